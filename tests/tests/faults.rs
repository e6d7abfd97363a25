//! A fault test in the style of Jepsen (issue 14.5). Three combined-mode
//! nodes on 127.0.0.1, .2 and .3 inside a network namespace of the test's
//! own (`unshare -n`, loopback only; tests/src/netns.rs), a topic of three
//! partitions with replication factor 3 and `min.insync.replicas=2`,
//! idempotent acks=all librdkafka producers writing unique values and two
//! consumers of one group reading and committing (so the group rebalances
//! as coordinators and members come and go), while for a minute a fault
//! strikes every few seconds:
//! - SIGKILL of a partition leader, restarted a few seconds later;
//! - SIGSTOP of a broker, SIGCONT a few seconds later;
//! - a partition leader cut off from the other two nodes by nftables rules
//!   (clients still reach every node, so the isolated leader keeps being
//!   asked to write and must not acknowledge);
//! - SIGTERM of a broker and a restart.
//!
//! Then everything heals, the replicas catch up, and the checks run:
//! - every acknowledged record is in the log exactly once, at the offset it
//!   was acknowledged at (an isolated leader acknowledging an acks=all
//!   write would fail this: its tail is cut when it rejoins); the
//!   acknowledgements of the cut-off leader's partitions while it was cut
//!   off (and 5 s after, a request timeout) are counted apart, and none of
//!   them may be missing from its offset;
//! - no two replicas hold different batches at one offset (their segment
//!   files compared batch by batch);
//! - the group's committed offsets never went backwards: each reader, after
//!   its commit, reads them back from the coordinator and compares them
//!   with every value either reader had read back before it asked.
//!
//! The counts are printed; any loss fails. The namespace needs root and
//! `nft`; without them the test says SKIPPED and why. `GREGOR_FAULT_SEED`
//! replays a run's choice of faults (its seed is printed).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tokio::task::JoinSet;

use gregor_tests::cluster::{self, call, metadata, Cluster};
use gregor_tests::netns::{self, Firewall, Namespace};
use gregor_tests::wait_for;

const TOPIC: &str = "faults";
const PARTITIONS: i32 = 3;
/// How long faults strike.
const FAULT_WINDOW: Duration = Duration::from_secs(60);
/// Node `id` runs as user `USERS + id`.
const USERS: u32 = 47_000;
const WRITERS: usize = 3;
/// Consumers of the one group.
const READERS: usize = 2;
/// How long after a cut is healed an acknowledgement may still come from
/// what the cut-off leader took (the producers' request timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Sends a writer keeps unanswered at most.
const IN_FLIGHT: usize = 16;
/// How long healing (every replica back in the ISR) may take.
const HEAL: Duration = Duration::from_secs(90);

// What it found so far, each fixed: replica divergence after healing (a
// new leader appended in the old epoch before its log entered the new
// one), a broker frozen for good, logging nothing and ignoring SIGTERM
// (InitProducerId blocked every runtime worker while the controller was
// cut off), and a SIGTERM that waited the whole controlled-shutdown
// timeout (a partition created on an image from before the shutdown
// still named the node leader). About 70 s; part of `make test` where
// root and `nft` are there (CI runs as root), SKIPPED otherwise.
#[test]
fn acknowledged_records_survive_kills_pauses_and_partitions() {
    if !netns::inside() {
        if let Some(reason) = netns::unavailable() {
            println!("SKIPPED: acknowledged_records_survive_kills_pauses_and_partitions: {reason}");
            return;
        }
        assert!(
            netns::run_inside("acknowledged_records_survive_kills_pauses_and_partitions"),
            "the fault test failed inside its network namespace (its output is above)"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run());
}

/// An acknowledged record: its value, partition and offset, and when the
/// acknowledgement came.
struct Ack {
    value: String,
    partition: i32,
    offset: i64,
    at: Instant,
}

/// A partition leader cut off from the other nodes: the partitions it led
/// and when.
struct Cut {
    partitions: Vec<i32>,
    from: Instant,
    to: Instant,
}

/// What the readers saw.
#[derive(Default)]
struct Reads {
    /// Each partition's committed offset as last read back.
    committed: HashMap<i32, i64>,
    /// Every time a read-back was lower than one read before it began.
    regressions: Vec<String>,
    commits: usize,
    /// Assignment changes over both readers (rebalances they took part in).
    reassignments: usize,
}

/// What the writers saw.
#[derive(Default)]
struct Writes {
    acknowledged: Vec<Ack>,
    /// Failed deliveries by error (each one is allowed to be lost).
    failed: BTreeMap<String, usize>,
}

async fn run() {
    let seed = std::env::var("GREGOR_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos());
            u64::try_from(nanos % u128::from(u32::MAX)).unwrap_or(1) | 1
        });
    println!("fault test seed {seed} (GREGOR_FAULT_SEED={seed} replays it)");
    let mut rng = Rng(seed);

    let namespace = Namespace::loopback();
    // Kafka's default registration timeout (60 s): a node restarted while
    // its old incarnation's session still runs waits for it to expire, and
    // a fault may cut it off meanwhile.
    let builder = cluster::cluster(3)
        .timing(500, 3000, 60_000)
        .distinct_hosts()
        .run_as_users(USERS)
        .set("replica.fetch.backoff.ms", "200")
        .set("replica.fetch.wait.max.ms", "200")
        .set("replica.lag.time.max.ms", "4000");
    let users: Vec<(u32, Ipv4Addr)> = (1..=3i32)
        .map(|id| (USERS + id.unsigned_abs(), builder.host(id)))
        .collect();
    namespace.source_addresses(&users);
    let mut cluster = builder.start();
    let _logs = KeepLogsOnFailure {
        dir: cluster.dir().to_path_buf(),
        to: std::env::temp_dir().join(format!("gregor-faults-{seed}")),
    };
    cluster.await_formed(&[1, 2, 3]);
    create_topic(&cluster);
    let mut firewall = Firewall::new();
    let bootstrap = cluster.bootstrap();

    let stop_writing = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Writes::default()));
    let mut writers = JoinSet::new();
    for writer in 0..WRITERS {
        writers.spawn(write(
            writer,
            bootstrap.clone(),
            stop_writing.clone(),
            writes.clone(),
        ));
    }
    let stop_reading = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(Mutex::new(Reads::default()));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (bootstrap, stop, reads) = (bootstrap.clone(), stop_reading.clone(), reads.clone());
            thread::spawn(move || read_and_commit(&bootstrap, &stop, &reads))
        })
        .collect();

    // Faults, one at a time, each undone before the next.
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cuts = Vec::new();
    let mut led = leaders(&cluster, &[]);
    let mut failovers = 0;
    let start = Instant::now();
    while start.elapsed() < FAULT_WINDOW {
        let partition = rng.below(PARTITIONS as u64) as i32;
        let leader = led.get(&partition).map_or(1, |(id, _)| *id);
        let any = 1 + rng.below(3) as i32;
        let fault = match rng.below(4) {
            0 => {
                cluster.node_mut(leader).kill();
                sleep(3000 + rng.below(2000)).await;
                cluster.node_mut(leader).restart();
                "SIGKILL of a leader"
            }
            1 => {
                cluster.node(any).pause();
                sleep(2000 + rng.below(3000)).await;
                cluster.node(any).resume();
                "SIGSTOP of a broker"
            }
            2 => {
                let others: Vec<Ipv4Addr> = (1..=3)
                    .filter(|id| *id != leader)
                    .map(|id| cluster.node(id).host())
                    .collect();
                let partitions = led
                    .iter()
                    .filter(|(_, (id, _))| *id == leader)
                    .map(|(p, _)| *p)
                    .collect();
                let from = Instant::now();
                firewall.isolate(cluster.node(leader).host(), &others);
                sleep(5000 + rng.below(3000)).await;
                firewall.heal();
                cuts.push(Cut {
                    partitions,
                    from,
                    to: Instant::now(),
                });
                "a leader cut off"
            }
            _ => {
                cluster.node_mut(any).stop();
                cluster.node_mut(any).restart();
                "SIGTERM and restart"
            }
        };
        let node = if fault.contains("leader") {
            leader
        } else {
            any
        };
        let (acknowledged, failed) = {
            let writes = writes.lock().expect("the writes");
            (
                writes.acknowledged.len(),
                writes.failed.values().sum::<usize>(),
            )
        };
        println!(
            "{:>5.1}s  {fault} (node {node}), undone at {}; so far {acknowledged} acknowledged, {failed} failed",
            start.elapsed().as_secs_f32(),
            wall_clock()
        );
        *faults.entry(fault).or_default() += 1;
        sleep(1000 + rng.below(1500)).await;
        let now = leaders(&cluster, &[]);
        failovers += now
            .iter()
            .filter(|(p, current)| led.get(p).is_some_and(|before| before != *current))
            .count();
        led.extend(now);
    }

    // Heal: every link, every process, every replica back in the ISR. A
    // broker that exited by itself is a finding (a fault must not stop a
    // broker that was not its target); it is restarted for the checks.
    firewall.heal();
    let mut exited = Vec::new();
    for id in 1..=3 {
        cluster.node(id).resume();
        if let Some(status) = cluster.node_mut(id).exit_within(Duration::ZERO) {
            exited.push(format!("node {id}: {status}"));
            cluster.node_mut(id).restart();
        }
    }
    println!("healed at {}", wall_clock());
    stop_writing.store(true, Ordering::SeqCst);
    while writers.join_next().await.is_some() {}
    await_full_isr(&cluster);
    stop_reading.store(true, Ordering::SeqCst);
    for reader in readers {
        reader.join().expect("a reader thread");
    }
    let reads = std::mem::take(&mut *reads.lock().expect("the reads"));
    let regressions = reads.regressions;

    // The checks.
    let writes = std::mem::take(&mut *writes.lock().expect("the writes"));
    println!(
        "writers: {} acknowledged, failed {:?}",
        writes.acknowledged.len(),
        writes.failed
    );
    let log = drain(&cluster.bootstrap());
    let mut copies: HashMap<&str, usize> = HashMap::new();
    for value in log.values() {
        *copies.entry(value.as_str()).or_default() += 1;
    }
    let duplicated = copies.values().filter(|n| **n > 1).count();
    let mut lost = Vec::new();
    let mut misplaced = Vec::new();
    // librdkafka reports some acknowledgements without an offset (-1001,
    // OFFSET_INVALID): those records must be in the log, anywhere.
    let mut without_offset = 0;
    // Acknowledgements of a cut-off leader's partitions during its cut,
    // and those of them not at their offset in the log.
    let mut while_cut_off = 0;
    let mut cut_off_missing = Vec::new();
    for ack in &writes.acknowledged {
        let Ack {
            value,
            partition,
            offset,
            at,
        } = ack;
        let stored = copies.contains_key(value.as_str());
        let in_place = log.get(&(*partition, *offset)) == Some(value);
        let cut_off = cuts.iter().any(|cut| {
            cut.partitions.contains(partition) && *at >= cut.from && *at <= cut.to + REQUEST_TIMEOUT
        });
        if cut_off {
            while_cut_off += 1;
            if !in_place && (*offset >= 0 || !stored) {
                cut_off_missing.push(format!("{value} at {partition}/{offset}"));
            }
        }
        match log.get(&(*partition, *offset)) {
            Some(found) if found == value => {}
            _ if *offset < 0 && stored => without_offset += 1,
            Some(found) if stored => {
                misplaced.push(format!("{value} at {partition}/{offset} holds {found}"));
            }
            _ if stored => misplaced.push(format!("{value} acknowledged at {partition}/{offset}")),
            _ => lost.push(format!("{value} at {partition}/{offset}")),
        }
    }
    let divergent = divergent_batches(&cluster);
    let failed: usize = writes.failed.values().sum();
    println!(
        "fault test: brokers exited by themselves {exited:?}; faults {faults:?}, failovers {failovers}; acknowledged {} ({without_offset} without an offset), failed {failed} {:?}; read {}; lost {}, duplicated {duplicated}, misplaced {}, divergent offsets {}; acknowledged on a cut-off leader's partitions while cut off {while_cut_off}, of them missing {}; {READERS} readers: {} commits, {} assignment changes, committed offsets gone back {}",
        writes.acknowledged.len(),
        writes.failed,
        log.len(),
        lost.len(),
        misplaced.len(),
        divergent.len(),
        cut_off_missing.len(),
        reads.commits,
        reads.reassignments,
        regressions.len(),
    );
    assert!(
        cut_off_missing.is_empty(),
        "acknowledged while their leader was cut off, not in the log: {:?}",
        &cut_off_missing[..cut_off_missing.len().min(20)]
    );
    assert!(
        lost.is_empty(),
        "acknowledged records lost: {:?}",
        &lost[..lost.len().min(20)]
    );
    assert!(
        misplaced.is_empty(),
        "acknowledged records elsewhere: {:?}",
        &misplaced[..misplaced.len().min(20)]
    );
    assert_eq!(duplicated, 0, "records stored twice");
    assert!(
        exited.is_empty(),
        "brokers exited by themselves: {exited:?}"
    );
    assert!(divergent.is_empty(), "replicas differ: {divergent:?}");
    assert!(
        regressions.is_empty(),
        "committed offsets went back: {regressions:?}"
    );
    assert!(
        writes.acknowledged.len() >= 1000,
        "too few acknowledged writes ({}) for the test to mean anything",
        writes.acknowledged.len()
    );
    assert!(failovers > 0, "no fault moved a leader");
}

fn create_topic(cluster: &Cluster) {
    let config = |name: &str, value: &str| {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_value(Some(StrBytes::from_string(value.to_string())))
    };
    // Leaders spread: partition p led by node p + 1 at first.
    let assignments = (0..PARTITIONS)
        .map(|p| {
            let replicas = (0..3).map(|i| BrokerId((p + i) % 3 + 1)).collect();
            CreatableReplicaAssignment::default()
                .with_partition_index(p)
                .with_broker_ids(replicas)
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)
            .with_configs(vec![config("min.insync.replicas", "2")])]);
    let response = call(cluster.node(1).addr(), &request, 5).expect("a CreateTopics answer");
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
    wait_for("every partition led", Duration::from_secs(30), || {
        (leaders(cluster, &[]).len() == PARTITIONS as usize).then_some(())
    });
}

/// Each partition's (leader, leader epoch): the newest any running,
/// reachable node reports, skipping `paused` nodes.
fn leaders(cluster: &Cluster, paused: &[i32]) -> BTreeMap<i32, (i32, i32)> {
    let mut newest: BTreeMap<i32, (i32, i32)> = BTreeMap::new();
    for node in cluster.brokers() {
        if paused.contains(&node.id) || node.pid().is_none() {
            continue;
        }
        let Some(md) = metadata(node.addr()) else {
            continue;
        };
        let partitions = md
            .topics
            .iter()
            .filter(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))
            .flat_map(|t| &t.partitions);
        for p in partitions.filter(|p| p.leader_id.0 >= 0) {
            let entry = newest.entry(p.partition_index).or_insert((-1, -1));
            if p.leader_epoch > entry.1 {
                *entry = (p.leader_id.0, p.leader_epoch);
            }
        }
    }
    newest
}

/// Waits until a node reports every partition with all three replicas in
/// sync.
fn await_full_isr(cluster: &Cluster) {
    wait_for("every replica back in the ISR", HEAL, || {
        let md = metadata(cluster.node(1).addr())?;
        let topic = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == TOPIC))?;
        let healed = topic.partitions.len() == PARTITIONS as usize
            && topic
                .partitions
                .iter()
                .all(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() == 3);
        healed.then_some(())
    });
}

// Clients leave `broker.address.family` at its default: with `v4`
// librdkafka resolves with AI_ADDRCONFIG, which finds no IPv4 address in a
// namespace that has only loopback.

/// One writer: an idempotent acks=all producer sending unique values
/// round-robin over the partitions until told to stop, then waiting for
/// every answer.
async fn write(
    writer: usize,
    bootstrap: String,
    stop: Arc<AtomicBool>,
    writes: Arc<Mutex<Writes>>,
) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        // Longer than any stall the faults cause: a message that times out
        // makes librdkafka's idempotent producer bump its epoch and send
        // what it still holds again under new sequences, which a broker
        // cannot tell from new records (Kafka stores them twice too;
        // confluentinc/librdkafka#4953). Seen with 20 s: 16 timeouts and
        // 12 such second copies in one run.
        .set("message.timeout.ms", "120000")
        .set("request.timeout.ms", "5000")
        .create()
        .expect("create a producer");
    let mut pending = JoinSet::new();
    let mut seq: u64 = 0;
    while !stop.load(Ordering::SeqCst) {
        while pending.len() >= IN_FLIGHT {
            if let Some(Ok(outcome)) = pending.join_next().await {
                record(&writes, outcome);
            }
        }
        let value = format!("w{writer}-{seq:07}");
        let partition = i32::try_from(seq % PARTITIONS as u64).unwrap_or(0);
        seq += 1;
        let producer = producer.clone();
        pending.spawn(async move {
            let sent = producer
                .send(
                    FutureRecord::<(), str>::to(TOPIC)
                        .partition(partition)
                        .payload(&value),
                    Duration::from_secs(0),
                )
                .await
                .map(|delivery| (delivery.partition, delivery.offset))
                .map_err(|(error, _)| error.to_string());
            (value, sent)
        });
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    while let Some(outcome) = pending.join_next().await {
        if let Ok(outcome) = outcome {
            record(&writes, outcome);
        }
    }
}

type Outcome = (String, Result<(i32, i64), String>);

fn record(writes: &Mutex<Writes>, (value, sent): Outcome) {
    let mut writes = writes.lock().expect("the writes");
    match sent {
        Ok((partition, offset)) => writes.acknowledged.push(Ack {
            value,
            partition,
            offset,
            at: Instant::now(),
        }),
        Err(error) => *writes.failed.entry(error).or_default() += 1,
    }
}

/// A consumer group member reading the topic and committing its position
/// every second until told to stop; after each commit it reads the
/// committed offsets back from the coordinator and compares each with the
/// value last read back (by either reader) before it asked: a lower one,
/// or none after one, is a regression.
fn read_and_commit(bootstrap: &str, stop: &AtomicBool, reads: &Mutex<Reads>) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "fault-readers")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create()
        .expect("create a consumer");
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    let mut assigned = Vec::new();
    let mut last_commit = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let _ = consumer.poll(Duration::from_millis(100));
        let now: Vec<i32> = consumer.assignment().map_or_else(
            |_| Vec::new(),
            |list| list.elements().iter().map(|e| e.partition()).collect(),
        );
        if now != assigned {
            assigned = now;
            reads.lock().expect("the reads").reassignments += 1;
        }
        if last_commit.elapsed() < Duration::from_secs(1) {
            continue;
        }
        last_commit = Instant::now();
        if consumer.commit_consumer_state(CommitMode::Sync).is_err() {
            continue; // the coordinator is moving, or nothing to commit
        }
        let before = reads.lock().expect("the reads").committed.clone();
        let Ok(now) = consumer.committed(Duration::from_secs(5)) else {
            continue;
        };
        let mut reads = reads.lock().expect("the reads");
        reads.commits += 1;
        for element in now.elements() {
            let partition = element.partition();
            let earlier = before.get(&partition).copied();
            let Offset::Offset(offset) = element.offset() else {
                if let Some(earlier) = earlier {
                    reads
                        .regressions
                        .push(format!("partition {partition}: {earlier} then none"));
                }
                continue;
            };
            if let Some(earlier) = earlier.filter(|earlier| *earlier > offset) {
                reads
                    .regressions
                    .push(format!("partition {partition}: {earlier} then {offset}"));
            }
            let latest = reads.committed.entry(partition).or_insert(offset);
            *latest = (*latest).max(offset);
        }
    }
}

/// Every record of the topic, read from the beginning up to each
/// partition's high watermark: (partition, offset) -> value.
fn drain(bootstrap: &str) -> BTreeMap<(i32, i64), String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "fault-drain")
        .set("enable.auto.commit", "false")
        .create()
        .expect("create a consumer");
    let mut assignment = TopicPartitionList::new();
    let mut remaining = HashMap::new();
    for p in 0..PARTITIONS {
        let (_, high) = wait_for("the watermarks", Duration::from_secs(30), || {
            consumer
                .fetch_watermarks(TOPIC, p, Duration::from_secs(5))
                .map_err(|e| println!("watermarks of partition {p}: {e}"))
                .ok()
        });
        if high > 0 {
            remaining.insert(p, high);
        }
        assignment
            .add_partition_offset(TOPIC, p, Offset::Beginning)
            .expect("assign a partition");
    }
    consumer.assign(&assignment).expect("assign");
    let mut log = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !remaining.is_empty() {
        assert!(Instant::now() < deadline, "draining: {remaining:?} left");
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.expect("a record");
        let value = String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
        log.insert((message.partition(), message.offset()), value);
        if remaining
            .get(&message.partition())
            .is_some_and(|high| message.offset() + 1 >= *high)
        {
            remaining.remove(&message.partition());
        }
    }
    log
}

/// Offsets at which two nodes' segment files hold different batches (by
/// CRC and length), once the followers have caught up with the leader.
fn divergent_batches(cluster: &Cluster) -> Vec<String> {
    let mut divergent = Vec::new();
    for p in 0..PARTITIONS {
        let logs = wait_for(
            &format!("every replica of partition {p} to end at the same offset"),
            Duration::from_secs(30),
            || {
                let logs: Vec<BTreeMap<i64, (i32, u32)>> = (1..=3)
                    .map(|id| {
                        batches(
                            &cluster
                                .node(id)
                                .data_dir()
                                .join("partitions")
                                .join(format!("{TOPIC}-{p}")),
                        )
                    })
                    .collect();
                let end =
                    |log: &BTreeMap<i64, (i32, u32)>| log.last_key_value().map(|(base, _)| *base);
                (logs.iter().all(|log| end(log) == end(&logs[0]))).then_some(logs)
            },
        );
        for (base, batch) in &logs[0] {
            for (i, other) in logs.iter().enumerate().skip(1) {
                if other.get(base).is_some_and(|b| b != batch) {
                    divergent.push(format!(
                        "partition {p} offset {base}: node 1 and node {}",
                        i + 1
                    ));
                }
            }
        }
    }
    divergent
}

/// The batches of a partition's segment files: base offset -> (length,
/// CRC). A torn batch at the end (an append under way) is left out.
fn batches(dir: &Path) -> BTreeMap<i64, (i32, u32)> {
    let mut batches = BTreeMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return batches;
    };
    let mut segments: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    for segment in segments {
        let bytes = fs::read(&segment).unwrap_or_default();
        let mut at = 0;
        while let Some(header) = bytes.get(at..at + 21) {
            let base = i64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
            let length = i32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
            let crc = u32::from_be_bytes(header[17..21].try_into().expect("4 bytes"));
            let Some(end) = usize::try_from(length).ok().map(|l| at + 12 + l) else {
                break;
            };
            if end > bytes.len() {
                break;
            }
            batches.insert(base, (length, crc));
            at = end;
        }
    }
    batches
}

/// Copies every node's log out of the cluster's directory (removed with
/// it) when the test fails, and says where.
struct KeepLogsOnFailure {
    dir: std::path::PathBuf,
    to: std::path::PathBuf,
}

impl Drop for KeepLogsOnFailure {
    fn drop(&mut self) {
        if !thread::panicking() || fs::create_dir_all(&self.to).is_err() {
            return;
        }
        for id in 1..=3 {
            let name = format!("node-{id}.log");
            let _ = fs::copy(self.dir.join(&name), self.to.join(&name));
        }
        eprintln!("the nodes' logs are in {}", self.to.display());
    }
}

/// The time of day (UTC), to find a moment in the nodes' logs.
fn wall_clock() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        now.subsec_millis()
    )
}

async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// A small deterministic generator (xorshift64), so a seed replays a run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
