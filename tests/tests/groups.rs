//! Consumer groups with real clients: librdkafka (the `rdkafka` crate)
//! consumers sharing partitions, rebalancing on close and on a killed
//! member's session timeout, committed offsets across a broker crash, the
//! group admin operations, rebalance times, and the same flow with
//! kafka-python, an independent client implementation.

#[path = "groups_support/admin.rs"]
mod admin;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::Broker;
use rdkafka::bindings::rd_kafka_consumer_group_state_t as State;
use rdkafka::bindings::rd_kafka_resp_err_t as Err;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

/// How long a group may take to settle after a change.
const SETTLE: Duration = Duration::from_secs(30);

/// Broker settings for most tests: no initial rebalance delay, so that a
/// group forms as soon as its first member joins.
const NO_DELAY: &[(&str, &str)] = &[("group.initial.rebalance.delay.ms", "0")];

/// A subscribed group member with a short session and fast heartbeats.
fn member(broker: &Broker, group: &str, topic: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = kafka::config(broker);
    config
        .set("group.id", group)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let consumer: BaseConsumer = config.create().expect("create a consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    consumer
}

fn assignment(consumer: &BaseConsumer) -> BTreeSet<i32> {
    consumer
        .assignment()
        .map(|list| list.elements().iter().map(|e| e.partition()).collect())
        .unwrap_or_default()
}

/// Polls every consumer (serving rebalances, dropping messages) until
/// `done` holds for their assignments; returns them.
fn poll_until(
    consumers: &[&BaseConsumer],
    what: &str,
    mut done: impl FnMut(&[BTreeSet<i32>]) -> bool,
) -> Vec<BTreeSet<i32>> {
    let deadline = Instant::now() + SETTLE;
    loop {
        for consumer in consumers {
            let _ = consumer.poll(Duration::from_millis(20));
        }
        let assignments: Vec<BTreeSet<i32>> = consumers.iter().map(|c| assignment(c)).collect();
        if done(&assignments) {
            return assignments;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; assignments {assignments:?}"
        );
    }
}

/// Every partition 0..n assigned exactly once across the members, each
/// member owning at least one.
fn shared_by_all(assignments: &[BTreeSet<i32>], partitions: i32) -> bool {
    let total: usize = assignments.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
    assignments.iter().all(|a| !a.is_empty())
        && total == partitions as usize
        && union == (0..partitions).collect()
}

/// Produces messages `seqs` with key `key-N`, value `N`, round-robin over
/// `partitions` partitions.
async fn produce(broker: &Broker, topic: &str, partitions: i32, seqs: std::ops::Range<usize>) {
    let producer = kafka::producer(broker, &[]);
    for seq in seqs {
        let key = format!("key-{seq}");
        let value = seq.to_string();
        let record = FutureRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition(seq as i32 % partitions);
        producer
            .send(record, CALL_TIMEOUT)
            .await
            .unwrap_or_else(|(e, _)| panic!("produce {seq}: {e}"));
    }
}

fn seq_of(message: &rdkafka::message::BorrowedMessage<'_>) -> usize {
    let payload = message.payload().expect("a value");
    std::str::from_utf8(payload)
        .expect("UTF-8")
        .parse()
        .expect("a number")
}

fn group_state(broker: &Broker, group: &str) -> (String, usize) {
    let admin = kafka::admin(broker);
    let list = admin
        .inner()
        .fetch_group_list(Some(group), CALL_TIMEOUT)
        .expect("list groups");
    let found = list
        .groups()
        .iter()
        .find(|g| g.name() == group)
        .expect("the group is listed");
    (found.state().to_string(), found.members().len())
}

#[tokio::test(flavor = "multi_thread")]
async fn two_consumers_share_partitions_and_the_survivor_takes_all() {
    // Kafka's default initial rebalance delay (3 s): both members join the
    // group's first generation.
    let broker = Broker::start();
    kafka::create_topic(&broker, "shared", 4).await;
    let first = member(&broker, "sharing", "shared", &[]);
    let second = member(&broker, "sharing", "shared", &[]);
    let shared = poll_until(
        &[&first, &second],
        "two members to share 4 partitions",
        |a| shared_by_all(a, 4),
    );
    assert_eq!(shared[0].len() + shared[1].len(), 4);
    assert_eq!(group_state(&broker, "sharing"), ("Stable".to_string(), 2));

    // A clean close sends LeaveGroup: the survivor gets every partition
    // well before any session timeout could have done it.
    let closed = Instant::now();
    drop(second);
    poll_until(&[&first], "the survivor to own all 4 partitions", |a| {
        a[0].len() == 4
    });
    assert!(
        closed.elapsed() < Duration::from_secs(5),
        "LeaveGroup should move partitions at once, took {:?}",
        closed.elapsed()
    );
    assert_eq!(group_state(&broker, "sharing"), ("Stable".to_string(), 1));
}

/// Kills its child process on drop, so a failing test leaves nothing behind.
struct ChildMember(Child);

impl Drop for ChildMember {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_member_loses_its_partitions_after_the_session_timeout() {
    let broker = Broker::start_with(NO_DELAY);
    kafka::create_topic(&broker, "killed", 4).await;
    // The other member is a separate process that SIGKILL stops dead: no
    // LeaveGroup, no more heartbeats.
    let mut child = ChildMember(
        Command::new(env!("CARGO_BIN_EXE_group_member"))
            .args([broker.bootstrap().as_str(), "killing", "killed", "6000"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child member"),
    );
    let stdout = child.0.stdout.take().expect("child stdout");
    let (lines, assignments) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(list) = line.strip_prefix("ASSIGNED ") {
                let set: BTreeSet<i32> = list.split(',').filter_map(|p| p.parse().ok()).collect();
                if lines.send(set).is_err() {
                    break;
                }
            }
        }
    });
    let survivor = member(&broker, "killing", "killed", &[]);
    let mut child_assignment = BTreeSet::new();
    poll_until(
        &[&survivor],
        "the child and this member to share 4 partitions",
        |a| {
            while let Ok(latest) = assignments.try_recv() {
                child_assignment = latest;
            }
            shared_by_all(&[a[0].clone(), child_assignment.clone()], 4)
        },
    );
    assert_eq!(group_state(&broker, "killing").1, 2);

    child.0.kill().expect("SIGKILL the child member");
    let _ = child.0.wait();
    let killed = Instant::now();
    poll_until(&[&survivor], "the survivor to own all 4 partitions", |a| {
        a[0].len() == 4
    });
    let moved = killed.elapsed();
    // Only the 6 s session timeout can have noticed the dead member.
    assert!(
        moved >= Duration::from_secs(3) && moved < Duration::from_secs(25),
        "partitions moved after {moved:?}"
    );
    assert_eq!(group_state(&broker, "killing"), ("Stable".to_string(), 1));
    eprintln!("killed member's partitions moved after {moved:?} (session.timeout.ms=6000)");
}

/// librdkafka reports connection events (a bootstrap connection it drops,
/// a broker that restarted) as consumer errors; it retries on its own.
fn transient(error: KafkaError) {
    match error {
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown,
        ) => eprintln!("consumer: {error} (retried by librdkafka)"),
        other => panic!("consume: {other}"),
    }
}

/// Reads messages until `count` arrived, committing each one (sync) as it
/// is processed. Returns the seqs in order; partitions that reported
/// end-of-partition (when enabled) are added to `at_end`.
fn consume_and_commit(
    consumer: &BaseConsumer,
    count: usize,
    at_end: &mut BTreeSet<i32>,
) -> Vec<usize> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + SETTLE;
    while seen.len() < count {
        assert!(
            Instant::now() < deadline,
            "only {} of {count} messages",
            seen.len()
        );
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                at_end.remove(&message.partition());
                seen.push(seq_of(&message));
                consumer
                    .commit_message(&message, CommitMode::Sync)
                    .expect("commit");
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            None => {}
            Some(Err(e)) => transient(e),
        }
    }
    seen
}

fn committed(consumer: &BaseConsumer, topic: &str, partitions: i32) -> BTreeMap<i32, Offset> {
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, p);
    }
    consumer
        .committed_offsets(list, CALL_TIMEOUT)
        .expect("fetch committed offsets")
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_offsets_survive_a_broker_crash_and_restart() {
    let mut broker = Broker::start_with(NO_DELAY);
    kafka::create_topic(&broker, "resume", 4).await;
    produce(&broker, "resume", 4, 0..100).await;

    let first = member(&broker, "resumers", "resume", &[]);
    let consumed = consume_and_commit(&first, 60, &mut BTreeSet::new());
    let before = committed(&first, "resume", 4);
    let total: i64 = before
        .values()
        .map(|o| match o {
            Offset::Offset(n) => *n,
            // A partition this consumer had not reached yet.
            Offset::Invalid => 0,
            other => panic!("unexpected committed offset {other:?}"),
        })
        .sum();
    assert_eq!(
        total, 60,
        "committed positions add up to what was processed"
    );
    drop(first);

    // SIGKILL: the commits were acknowledged, so they are in the page
    // cache and must survive the process.
    broker.kill();
    broker.restart();
    let second = member(
        &broker,
        "resumers",
        "resume",
        &[("enable.partition.eof", "true")],
    );
    assert_eq!(
        committed(&second, "resume", 4),
        before,
        "commits survived the crash"
    );
    let mut at_end = BTreeSet::new();
    let rest = consume_and_commit(&second, 40, &mut at_end);
    // Nothing more arrives: every partition reaches its end.
    let deadline = Instant::now() + SETTLE;
    while at_end.len() < 4 {
        assert!(Instant::now() < deadline, "partitions at end: {at_end:?}");
        match second.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => panic!("unexpected message {} after resuming", seq_of(&message)),
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => transient(e),
            None => {}
        }
    }
    let all: BTreeSet<usize> = consumed.iter().chain(&rest).copied().collect();
    assert_eq!(consumed.len() + rest.len(), 100, "no duplicates");
    assert_eq!(all, (0..100).collect(), "no loss");
    let after = committed(&second, "resume", 4);
    drop(second);

    // A clean restart keeps them too (the store is fsynced on shutdown).
    broker.restart();
    let third = kafka::consumer_config(&broker)
        .set("group.id", "resumers")
        .create::<BaseConsumer>()
        .expect("create a consumer");
    assert_eq!(committed(&third, "resume", 4), after);
    assert!(after.values().all(|o| *o == Offset::Offset(25)));
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_lists_describes_and_deletes_groups_and_offsets() {
    let broker = Broker::start_with(NO_DELAY);
    kafka::create_topic(&broker, "audited", 2).await;
    produce(&broker, "audited", 2, 0..10).await;
    let admin = kafka::admin(&broker);

    // An active group with commits on both partitions.
    let active = member(
        &broker,
        "active",
        "audited",
        &[("client.id", "audit-member")],
    );
    poll_until(&[&active], "the member to own both partitions", |a| {
        a[0].len() == 2
    });
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("audited", 0, Offset::Offset(3))
        .unwrap();
    offsets
        .add_partition_offset("audited", 1, Offset::Offset(4))
        .unwrap();
    active.commit(&offsets, CommitMode::Sync).expect("commit");
    // A consumer without group management commits into a "simple" group.
    let simple = kafka::consumer_config(&broker)
        .set("group.id", "simple")
        .create::<BaseConsumer>()
        .expect("create a consumer");
    simple
        .commit(&offsets, CommitMode::Sync)
        .expect("simple commit");

    // The legacy group list (ListGroups + DescribeGroups).
    let list = admin
        .inner()
        .fetch_group_list(None, CALL_TIMEOUT)
        .expect("list groups");
    let mut listed: Vec<(String, String, String)> = list
        .groups()
        .iter()
        .map(|g| {
            (
                g.name().to_string(),
                g.state().to_string(),
                g.protocol_type().to_string(),
            )
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            ("active".into(), "Stable".into(), "consumer".into()),
            ("simple".into(), "Empty".into(), String::new()),
        ]
    );

    // ListConsumerGroups with a state filter, DescribeConsumerGroups.
    let names = |listed: Vec<admin::Listed>| -> Vec<String> {
        listed.into_iter().map(|l| l.group_id).collect()
    };
    assert_eq!(names(admin::list_groups(&admin, &[])), ["active", "simple"]);
    assert_eq!(
        names(admin::list_groups(
            &admin,
            &[State::RD_KAFKA_CONSUMER_GROUP_STATE_STABLE]
        )),
        ["active"]
    );
    assert_eq!(
        names(admin::list_groups(
            &admin,
            &[State::RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY]
        )),
        ["simple"]
    );
    let described = admin::describe_groups(&admin, &["active", "missing"]);
    let active_group = described
        .iter()
        .find(|d| d.group_id == "active")
        .expect("described");
    assert_eq!(active_group.error, Err::RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_eq!(
        active_group.state,
        State::RD_KAFKA_CONSUMER_GROUP_STATE_STABLE
    );
    assert_eq!(active_group.assignor, "range");
    assert_eq!(active_group.members.len(), 1);
    assert_eq!(active_group.members[0].0, "audit-member");
    let mut assigned = active_group.members[0].1.clone();
    assigned.sort();
    assert_eq!(
        assigned,
        vec![("audited".to_string(), 0), ("audited".to_string(), 1)]
    );

    // Deleting a group with members, or offsets of a topic it consumes, is refused.
    let refused = admin
        .delete_groups(&["active"], &kafka::admin_options())
        .await
        .expect("DeleteGroups");
    assert_eq!(
        refused,
        vec![Err(("active".to_string(), RDKafkaErrorCode::NonEmptyGroup))]
    );
    let (error, partitions) = admin::delete_offsets(&admin, "active", &[("audited", 0)]);
    assert_eq!(error, Err::RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_eq!(
        partitions[0].2,
        Err::RD_KAFKA_RESP_ERR_GROUP_SUBSCRIBED_TO_TOPIC
    );

    // Once the member is gone, offsets and then the groups can go.
    drop(active);
    let (error, partitions) = admin::delete_offsets(&admin, "active", &[("audited", 0)]);
    assert_eq!(error, Err::RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_eq!(
        partitions,
        vec![("audited".to_string(), 0, Err::RD_KAFKA_RESP_ERR_NO_ERROR)]
    );
    let remaining = committed(&simple, "audited", 2);
    assert_eq!(remaining[&1], Offset::Offset(4));
    let reader = kafka::consumer_config(&broker)
        .set("group.id", "active")
        .create::<BaseConsumer>()
        .expect("create a consumer");
    let active_offsets = committed(&reader, "audited", 2);
    assert_eq!(active_offsets[&0], Offset::Invalid, "deleted");
    assert_eq!(active_offsets[&1], Offset::Offset(4), "kept");
    drop(reader);

    let deleted = admin
        .delete_groups(&["active", "simple", "missing"], &kafka::admin_options())
        .await
        .expect("DeleteGroups");
    assert_eq!(
        deleted,
        vec![
            Ok("active".to_string()),
            Ok("simple".to_string()),
            Err(("missing".to_string(), RDKafkaErrorCode::GroupIdNotFound)),
        ]
    );
    assert!(admin::list_groups(&admin, &[]).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_static_member_rejoins_without_a_rebalance() {
    let broker = Broker::start_with(NO_DELAY);
    kafka::create_topic(&broker, "static", 4).await;
    let statics = [("group.instance.id", "instance-a")];
    let first = member(&broker, "statics", "static", &statics);
    let other = member(
        &broker,
        "statics",
        "static",
        &[("group.instance.id", "instance-b")],
    );
    let before = poll_until(&[&first, &other], "two static members to share", |a| {
        shared_by_all(a, 4)
    });
    // librdkafka sends no LeaveGroup for a static member: its place waits
    // for it (until the session timeout), and the other keeps its share.
    drop(first);
    let restarted = member(&broker, "statics", "static", &statics);
    let after = poll_until(
        &[&restarted, &other],
        "the instance to get its partitions back",
        |a| !a[0].is_empty(),
    );
    assert_eq!(after, before, "same partitions, no reshuffle");
    assert_eq!(group_state(&broker, "statics"), ("Stable".to_string(), 2));
}

/// Forms a group of `n` members from nothing and then removes one;
/// returns how long each took until every remaining member had its share.
fn rebalance_times(n: usize, create: impl Fn() -> BaseConsumer) -> (Duration, Duration) {
    let started = Instant::now();
    let members: Vec<BaseConsumer> = (0..n).map(|_| create()).collect();
    let refs: Vec<&BaseConsumer> = members.iter().collect();
    poll_until(&refs, &format!("{n} members to share 12 partitions"), |a| {
        shared_by_all(a, 12)
    });
    let formed = started.elapsed();
    let mut members = members;
    let leaving = members.pop().expect("a member");
    let left = Instant::now();
    drop(leaving);
    let refs: Vec<&BaseConsumer> = members.iter().collect();
    poll_until(
        &refs,
        &format!("{} members to share 12 partitions", n - 1),
        |a| shared_by_all(a, 12),
    );
    let after_leave = left.elapsed();
    leave_together(members);
    (formed, after_leave)
}

/// Takes every member out of the group at once, serving the revocations
/// by polling, and only then closes them. Dropping subscribed members one
/// by one is not safe: the first one's LeaveGroup starts a rebalance, the
/// others (not polled) queue its revocation, and librdkafka's close can
/// then hang forever (confluentinc/librdkafka#4884), with the broker
/// waiting the rebalance timeout for members that never come back.
fn leave_together(members: Vec<BaseConsumer>) {
    for member in &members {
        member.unsubscribe();
    }
    let refs: Vec<&BaseConsumer> = members.iter().collect();
    poll_until(&refs, "every member to give up its partitions", |a| {
        a.iter().all(BTreeSet::is_empty)
    });
    // A heartbeat answered after the unsubscribe may still queue an
    // event: serve it too (a heartbeat interval is 500 ms).
    let grace = Instant::now() + Duration::from_millis(600);
    poll_until(&refs, "the last group events", |_| Instant::now() > grace);
    drop(members);
}

#[tokio::test(flavor = "multi_thread")]
async fn rebalance_time_for_2_and_10_consumers() {
    let broker = Broker::start_with(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("group.consumer.heartbeat.interval.ms", "500"),
    ]);
    kafka::create_topic(&broker, "timed", 12).await;
    for n in [2, 10] {
        let classic = format!("classic-{n}");
        let (formed, after_leave) = rebalance_times(n, || member(&broker, &classic, "timed", &[]));
        eprintln!(
            "rebalance, classic protocol, {n} consumers: group formed in {formed:?}, \
             rebalanced after one left in {after_leave:?} (heartbeat.interval.ms=500)"
        );
        assert!(formed < SETTLE && after_leave < SETTLE);
        let modern = format!("consumer-{n}");
        let (formed, after_leave) =
            rebalance_times(n, || kip848_member(&broker, &modern, "timed", "uniform"));
        eprintln!(
            "rebalance, consumer protocol (KIP-848), {n} consumers: group formed in {formed:?}, \
             rebalanced after one left in {after_leave:?} (group.consumer.heartbeat.interval.ms=500)"
        );
        assert!(formed < SETTLE && after_leave < SETTLE);
    }
}

#[test]
fn the_group_flow_with_kafka_python() {
    let broker = Broker::start_with(NO_DELAY);
    let (stdout, _) = gregor_tests::run_python(
        "group_flow.py",
        &[broker.bootstrap().as_str(), "python-topic", "python-group"],
    );
    let summary = stdout.lines().last().unwrap_or_default();
    assert!(summary.contains("\"resumed\": 10"), "summary: {summary}");
    eprintln!("kafka-python: {summary}");
}

/// A member speaking the consumer group protocol (KIP-848).
fn kip848_member(broker: &Broker, group: &str, topic: &str, assignor: &str) -> BaseConsumer {
    let mut config = kafka::config(broker);
    config
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("group.remote.assignor", assignor)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().expect("create a consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    consumer
}

#[tokio::test(flavor = "multi_thread")]
async fn the_consumer_group_protocol_with_librdkafka() {
    let broker = Broker::start_with(&[
        ("group.consumer.heartbeat.interval.ms", "500"),
        ("group.consumer.session.timeout.ms", "6000"),
    ]);
    kafka::create_topic(&broker, "kip848", 4).await;
    let admin = kafka::admin(&broker);

    // Two members share the partitions; the server-side assignor decides.
    let first = kip848_member(&broker, "next-gen", "kip848", "uniform");
    let second = kip848_member(&broker, "next-gen", "kip848", "uniform");
    let shared = poll_until(
        &[&first, &second],
        "two KIP-848 members to share 4 partitions",
        |a| shared_by_all(a, 4),
    );
    assert_eq!(
        (shared[0].len(), shared[1].len()),
        (2, 2),
        "uniform balances"
    );
    let described = admin::describe_groups(&admin, &["next-gen"]);
    assert_eq!(described[0].error, Err::RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_eq!(described[0].members.len(), 2);
    assert_eq!(described[0].assignor, "uniform");
    let listed = admin::list_groups(&admin, &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].group_id, "next-gen");

    // Each commits what it reads (OffsetCommit v9 with its member epoch).
    // Produced only now: polling above dropped whatever it received.
    produce(&broker, "kip848", 4, 0..40).await;
    let mut seen = Vec::new();
    let deadline = Instant::now() + SETTLE;
    while seen.len() < 40 {
        assert!(Instant::now() < deadline, "read {} of 40", seen.len());
        for consumer in [&first, &second] {
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(message)) => {
                    seen.push(seq_of(&message));
                    consumer
                        .commit_message(&message, CommitMode::Sync)
                        .expect("commit with the member epoch");
                }
                Some(Err(e)) => transient(e),
                None => {}
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..40).collect::<Vec<_>>(), "each message once");

    // One leaves: the other gets everything, without a group-wide barrier.
    drop(second);
    poll_until(&[&first], "the survivor to own all 4 partitions", |a| {
        a[0].len() == 4
    });
    drop(first);

    // A new member resumes after the commits: nothing is read again.
    produce(&broker, "kip848", 4, 40..48).await;
    let third = kip848_member(&broker, "next-gen", "kip848", "range");
    let rest = consume_and_commit(&third, 8, &mut BTreeSet::new());
    let mut rest = rest;
    rest.sort_unstable();
    assert_eq!(rest, (40..48).collect::<Vec<_>>());
    let offsets = committed(&third, "kip848", 4);
    assert!(
        offsets.values().all(|o| *o == Offset::Offset(12)),
        "{offsets:?}"
    );
}
