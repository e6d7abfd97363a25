//! KIP-848 consumer groups survive their coordinator (issue 15.1): the
//! members, their subscriptions and assignments are records of
//! `__consumer_offsets`, so the coordinator that loads the group next (the
//! same broker restarted, or the partition's new leader after a SIGKILL)
//! takes each member on at its epoch.
//!
//! Two members of a group speak ConsumerGroupHeartbeat (v0, over TCP, as a
//! KIP-848 consumer does: a join with epoch 0 and the subscription, then
//! heartbeats with the member epoch and the partitions owned) until the
//! group is stable with the topic's partitions split between them. After
//! the coordinator goes, each member's next heartbeat with its epoch is
//! accepted (no UNKNOWN_MEMBER_ID, no FENCED_MEMBER_EPOCH) and leaves its
//! assignment as it was; a wrong epoch is still fenced and a stranger still
//! unknown, so the members are known, not re-admitted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as Owned;
use kafka_protocol::messages::consumer_group_heartbeat_response::TopicPartitions as Assigned;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest, GroupId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use gregor_tests::cluster::{self, call};
use gregor_tests::{kafka, wait_for, Broker};

const TOPIC: &str = "kip848-events";
const PARTITIONS: i32 = 4;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;
/// Answers that say "ask again" while a coordinator loads or moves.
const RETRIABLE: [i16; 3] = [14, 15, 16];

struct Member {
    id: String,
    epoch: i32,
    owned: Vec<Assigned>,
}

impl Member {
    fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            epoch: 0,
            owned: Vec::new(),
        }
    }

    /// The owned partitions, sorted, as (topic id, partitions).
    fn partitions(&self) -> Vec<(String, Vec<i32>)> {
        sorted(&self.owned)
    }
}

fn sorted(assigned: &[Assigned]) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = assigned
        .iter()
        .filter(|t| !t.partitions.is_empty())
        .map(|t| {
            let mut p = t.partitions.clone();
            p.sort();
            (t.topic_id.to_string(), p)
        })
        .collect();
    out.sort();
    out
}

/// One heartbeat of `member` in `group` at `addr` (a join at epoch 0).
fn heartbeat(addr: SocketAddr, group: &str, member: &Member) -> ConsumerGroupHeartbeatResponse {
    let joining = member.epoch == 0;
    let owned = member
        .owned
        .iter()
        .map(|t| {
            Owned::default()
                .with_topic_id(t.topic_id)
                .with_partitions(t.partitions.clone())
        })
        .collect();
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_member_id(StrBytes::from_string(member.id.clone()))
        .with_member_epoch(member.epoch)
        .with_rebalance_timeout_ms(if joining { 60_000 } else { -1 })
        .with_subscribed_topic_names(
            joining.then(|| vec![TopicName(StrBytes::from_static_str(TOPIC))]),
        )
        .with_topic_partitions(Some(owned));
    call(addr, &request, 0).expect("a ConsumerGroupHeartbeat answer")
}

/// Heartbeats both members until the group is stable: each owns half the
/// partitions and a further round changes nothing.
fn stabilize(addr: SocketAddr, group: &str, members: &mut [Member]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut quiet_rounds = 0;
    while quiet_rounds < 2 {
        assert!(Instant::now() < deadline, "the group did not settle");
        let mut changed = false;
        for member in members.iter_mut() {
            let response = heartbeat(addr, group, member);
            if RETRIABLE.contains(&response.error_code) {
                changed = true; // the coordinator is still loading the group
                continue;
            }
            assert_eq!(response.error_code, 0, "{response:?}");
            changed |= response.member_epoch != member.epoch;
            member.epoch = response.member_epoch;
            if let Some(assignment) = response.assignment {
                changed |= sorted(&assignment.topic_partitions) != member.partitions();
                member.owned = assignment.topic_partitions;
            }
        }
        let split = members
            .iter()
            .all(|m| m.partitions().iter().map(|(_, p)| p.len()).sum::<usize>() == 2);
        quiet_rounds = if changed || !split {
            0
        } else {
            quiet_rounds + 1
        };
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// After the coordinator moved or restarted: each member's heartbeat with
/// its epoch is accepted, at that epoch, with its assignment unchanged.
fn members_go_on(addr: impl Fn() -> SocketAddr, group: &str, members: &[Member]) {
    for member in members {
        let response = wait_for(
            &format!("{}'s heartbeat to be answered", member.id),
            Duration::from_secs(60),
            || {
                let response = heartbeat(addr(), group, member);
                (!RETRIABLE.contains(&response.error_code)).then_some(response)
            },
        );
        assert_eq!(
            response.error_code, 0,
            "{} at epoch {}: {response:?}",
            member.id, member.epoch
        );
        assert_eq!(response.member_epoch, member.epoch, "{response:?}");
        if let Some(assignment) = &response.assignment {
            assert_eq!(sorted(&assignment.topic_partitions), member.partitions());
        }
    }
    // Known at their epochs: another epoch is fenced, a stranger unknown.
    let mut wrong = Member::new(&members[0].id);
    wrong.epoch = members[0].epoch + 5;
    assert_eq!(
        heartbeat(addr(), group, &wrong).error_code,
        FENCED_MEMBER_EPOCH
    );
    let mut stranger = Member::new("never-joined");
    stranger.epoch = members[0].epoch;
    assert_eq!(
        heartbeat(addr(), group, &stranger).error_code,
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn members_keep_their_epochs_and_assignments_across_a_restart() {
    const GROUP: &str = "kip848-restart";
    let mut broker = Broker::start();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(kafka::create_topic(&broker, TOPIC, PARTITIONS));
    let mut members = [Member::new("member-a"), Member::new("member-b")];
    stabilize(broker.addr(), GROUP, &mut members);
    eprintln!(
        "stable: a at epoch {} owns {:?}, b at epoch {} owns {:?}",
        members[0].epoch,
        members[0].partitions(),
        members[1].epoch,
        members[1].partitions()
    );

    broker.restart(); // SIGTERM, then the same data directory
    members_go_on(|| broker.addr(), GROUP, &members);
}

/// The coordinator of `group` as node `via` answers FindCoordinator v4,
/// once it is a node other than `not`.
fn coordinator(cluster: &cluster::Cluster, group: &str, via: i32, not: Option<i32>) -> i32 {
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
    wait_for(
        &format!("a coordinator of {group} other than {not:?}"),
        Duration::from_secs(60),
        || {
            let response = call(cluster.node(via).addr(), &request, 4)?;
            let found = response.coordinators.first()?;
            (found.error_code == 0 && Some(found.node_id.0) != not).then_some(found.node_id.0)
        },
    )
}

#[test]
fn members_keep_their_epochs_when_the_coordinator_is_killed() {
    const GROUP: &str = "kip848-failover";
    let mut cluster = cluster::cluster(3)
        .set("replica.fetch.backoff.ms", "200")
        .set("replica.fetch.wait.max.ms", "200")
        .set("offsets.topic.num.partitions", "5")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    gregor_tests::replicated::create_replicated(&cluster, TOPIC, PARTITIONS);

    let first = coordinator(&cluster, GROUP, 1, None);
    let mut members = [Member::new("member-a"), Member::new("member-b")];
    // Topic metadata reaches the coordinator's node shortly after creation.
    stabilize(cluster.node(first).addr(), GROUP, &mut members);
    eprintln!(
        "stable at node {first}: epochs {}, {}",
        members[0].epoch, members[1].epoch
    );

    cluster.node_mut(first).kill();
    let survivor = if first == 1 { 2 } else { 1 };
    let next = coordinator(&cluster, GROUP, survivor, Some(first));
    eprintln!("node {first} killed; node {next} coordinates {GROUP}");
    let addr = cluster.node(next).addr();
    members_go_on(|| addr, GROUP, &members);
}
