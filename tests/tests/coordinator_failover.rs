//! Group coordinators in a cluster (issue 15): three combined-mode nodes;
//! a group's coordinator is the leader of its partition of
//! `__consumer_offsets` (created by the first FindCoordinator, replication
//! factor 3), and its state moves with that leadership.
//!
//! A real librdkafka consumer group consumes and commits in batches; the
//! coordinator's broker is SIGKILLed mid-stream. The group moves to the
//! partition's new leader (FindCoordinator names another broker), the
//! consumer keeps committing there, then leaves with one batch
//! uncommitted, and a second consumer of the group resumes from the
//! committed offsets. Checked: every record is processed, and a record is
//! processed twice only if its earlier processing was in a batch whose
//! commit was not acknowledged (acknowledged commits survive the crash:
//! they were on every in-sync replica).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use gregor_tests::cluster::{self, call, Cluster};
use gregor_tests::replicated::create_replicated;
use gregor_tests::wait_for;

const TOPIC: &str = "events";
const GROUP: &str = "failover-group";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 600;
const BATCH: usize = 25;
/// How long an election, a coordinator move or a rebalance may take.
const CONVERGE: Duration = Duration::from_secs(60);

fn start() -> Cluster {
    let cluster = cluster::cluster(3)
        .set("replica.fetch.backoff.ms", "200")
        .set("replica.fetch.wait.max.ms", "200")
        .set("offsets.topic.num.partitions", "5")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    cluster
}

/// `TOPIC` with `PARTITIONS` partitions on all three nodes.
fn create_topic(cluster: &Cluster) {
    create_replicated(cluster, TOPIC, PARTITIONS);
}

fn produce(bootstrap: &str) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("create a producer");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let records: Vec<(String, String)> = (0..RECORDS)
        .map(|i| (i.to_string(), format!("r-{i:04}")))
        .collect();
    runtime.block_on(async {
        let mut pending = Vec::new();
        for (key, value) in &records {
            let record = FutureRecord::to(TOPIC)
                .payload(value.as_str())
                .key(key.as_str());
            pending.push(producer.send(record, Duration::from_secs(30)));
        }
        for delivery in pending {
            if let Err((error, _)) = delivery.await {
                panic!("delivering a record: {error}");
            }
        }
    });
}

/// The coordinator of `GROUP` as node `via` answers FindCoordinator v4
/// (once it has one).
fn coordinator(cluster: &Cluster, via: i32, not: Option<i32>) -> i32 {
    let addr = cluster.node(via).addr();
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_static_str(GROUP)]);
    wait_for(
        &format!("a coordinator of {GROUP} other than {not:?} seen by node {via}"),
        CONVERGE,
        || {
            let response = call(addr, &request, 4)?;
            let found = response.coordinators.first()?;
            let node = found.node_id.0;
            (found.error_code == 0 && node >= 1 && Some(node) != not).then_some(node)
        },
    )
}

fn consumer(bootstrap: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .expect("create a consumer");
    consumer.subscribe(&[TOPIC]).expect("subscribe");
    consumer
}

/// One polled batch: the offsets it commits (the next offset per
/// partition) and whether the commit was acknowledged.
struct Batch {
    offsets: BTreeMap<i32, i64>,
    committed: bool,
}

/// What the consumers processed: each delivery of a record (partition,
/// offset) with the index of its batch.
#[derive(Default)]
struct Processed {
    deliveries: Vec<((i32, i64), usize)>,
    batches: Vec<Batch>,
}

impl Processed {
    /// Polls one batch (up to `BATCH` records, ended early once `idle`
    /// passes without one); its index, None if nothing came.
    fn poll_batch(&mut self, consumer: &BaseConsumer, idle: Duration) -> Option<usize> {
        let index = self.batches.len();
        let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
        let mut count = 0;
        let mut last = Instant::now();
        while count < BATCH && last.elapsed() < idle {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let at = (message.partition(), message.offset());
                    self.deliveries.push((at, index));
                    let next = offsets.entry(at.0).or_insert(at.1 + 1);
                    *next = (*next).max(at.1 + 1);
                    count += 1;
                    last = Instant::now();
                }
                // A coordinator or leader moving shows up here; librdkafka
                // recovers by itself.
                Some(Err(error)) => eprintln!("consumer: {error}"),
                None => {}
            }
        }
        if count == 0 {
            return None;
        }
        self.batches.push(Batch {
            offsets,
            committed: false,
        });
        Some(index)
    }

    /// Commits batch `index` (synchronously, retried for a few seconds
    /// while the coordinator moves): whether it was acknowledged.
    fn commit(&mut self, consumer: &BaseConsumer, index: usize) -> bool {
        let mut list = TopicPartitionList::new();
        for (partition, next) in &self.batches[index].offsets {
            list.add_partition_offset(TOPIC, *partition, Offset::Offset(*next))
                .expect("a partition offset");
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match consumer.commit(&list, CommitMode::Sync) {
                Ok(()) => {
                    self.batches[index].committed = true;
                    return true;
                }
                Err(error) if Instant::now() < deadline => {
                    eprintln!("commit of batch {index}: {error}");
                    // Keep the membership alive meanwhile.
                    let _ = consumer.poll(Duration::from_millis(0));
                    std::thread::sleep(Duration::from_millis(300));
                }
                Err(error) => {
                    eprintln!("commit of batch {index} given up: {error}");
                    return false;
                }
            }
        }
    }

    fn distinct(&self) -> usize {
        self.deliveries
            .iter()
            .map(|(at, _)| *at)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Records processed again although an acknowledged commit covered
    /// their earlier processing.
    fn redelivered_after_commit(&self) -> Vec<(i32, i64)> {
        let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
        let mut wrong = Vec::new();
        for (at, batch) in &self.deliveries {
            if let Some(earlier) = seen.insert(*at, *batch) {
                if self.batches[earlier].committed {
                    wrong.push(*at);
                }
            }
        }
        wrong
    }
}

#[test]
fn a_group_survives_the_sigkill_of_its_coordinator() {
    let mut cluster = start();
    create_topic(&cluster);
    produce(&cluster.bootstrap());
    let bootstrap = cluster.bootstrap();
    let mut processed = Processed::default();

    // The first consumer: a few committed batches through the first
    // coordinator.
    let first = consumer(&bootstrap);
    let mut committed_before = 0;
    let started = Instant::now();
    while committed_before < 4 {
        assert!(
            started.elapsed() < CONVERGE,
            "the first batches did not come"
        );
        if let Some(batch) = processed.poll_batch(&first, Duration::from_secs(2)) {
            if processed.commit(&first, batch) {
                committed_before += 1;
            }
        }
    }
    let killed = coordinator(&cluster, 1, None);
    // One more batch in flight when the coordinator dies.
    let in_flight = processed.poll_batch(&first, Duration::from_secs(2));
    cluster.node_mut(killed).kill();
    let survivor = if killed == 1 { 2 } else { 1 };
    let moved = coordinator(&cluster, survivor, Some(killed));
    assert_ne!(moved, killed);
    eprintln!("coordinator {killed} killed; {moved} coordinates {GROUP} now");
    if let Some(batch) = in_flight {
        processed.commit(&first, batch);
    }

    // The first consumer goes on with the new coordinator: at least two
    // acknowledged commits there.
    let mut committed_after = 0;
    let started = Instant::now();
    while committed_after < 2 {
        assert!(
            started.elapsed() < CONVERGE,
            "no commits through the new coordinator {moved}"
        );
        if let Some(batch) = processed.poll_batch(&first, Duration::from_secs(2)) {
            if processed.commit(&first, batch) {
                committed_after += 1;
            }
        }
    }
    // Then it leaves with a batch processed but not committed.
    let _uncommitted = processed.poll_batch(&first, Duration::from_secs(2));
    drop(first);

    // A second consumer of the group resumes from the committed offsets.
    let second = consumer(&cluster.bootstrap());
    let started = Instant::now();
    while processed.distinct() < RECORDS {
        assert!(
            started.elapsed() < CONVERGE,
            "the second consumer stalled at {} of {RECORDS} records",
            processed.distinct()
        );
        if let Some(batch) = processed.poll_batch(&second, Duration::from_secs(2)) {
            processed.commit(&second, batch);
        }
    }
    drop(second);

    eprintln!(
        "{} deliveries of {RECORDS} records in {} batches, {} not committed",
        processed.deliveries.len(),
        processed.batches.len(),
        processed.batches.iter().filter(|b| !b.committed).count()
    );
    assert_eq!(processed.distinct(), RECORDS, "every record processed");
    assert_eq!(
        processed.redelivered_after_commit(),
        Vec::<(i32, i64)>::new(),
        "records processed again after an acknowledged commit"
    );
    // Only the uncommitted batches (the one in flight if its commit
    // failed, the one the first consumer left with) may come twice.
    let uncommitted: usize = processed.batches.iter().filter(|b| !b.committed).count();
    assert!(
        uncommitted >= 1,
        "the first consumer left a batch uncommitted"
    );
    assert!(
        processed.deliveries.len() - RECORDS <= uncommitted * BATCH,
        "{} deliveries of {RECORDS} records with {uncommitted} uncommitted batches",
        processed.deliveries.len()
    );
    // The group's coordinator is another broker now, and says so on
    // every live one.
    for node in [1, 2, 3].into_iter().filter(|n| *n != killed) {
        assert_eq!(coordinator(&cluster, node, Some(killed)), moved);
    }
}
