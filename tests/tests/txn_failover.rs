//! Transaction coordinators in a cluster (issue 15): three combined-mode
//! nodes; a transactional id's coordinator is the leader of its partition
//! of `__transaction_state` (created by the first FindCoordinator,
//! replication factor 3), its state moves with that leadership, and its
//! markers reach partitions led by other brokers as WriteTxnMarkers.
//!
//! - A consume-transform-produce loop (librdkafka's transactional
//!   producer, a read_committed consumer group, offsets sent with each
//!   transaction) runs while the transaction coordinator's broker is
//!   SIGKILLed: the read_committed output then holds every input exactly
//!   once. The transactional id is picked so that its coordinator is not
//!   the group's; a second test SIGKILLs the group coordinator instead,
//!   mid-transaction (its transactional offsets are in `__consumer_offsets`
//!   as Kafka writes them, so the next coordinator has them).
//! - A commit decided (PrepareCommit) by a coordinator that is SIGKILLed
//!   before its marker could be written is completed by the next one.
//! - A commit whose decision waits seconds for a paused replica to leave
//!   the in-sync replicas is not cut short by the module's call deadline:
//!   that wait is the broker's time, not the guest's.
//! - A transaction left open on partitions its coordinator does not lead,
//!   when that coordinator is SIGKILLed, is ended by the new coordinator
//!   (aborted once its timeout passes): every partition's last stable
//!   offset moves on to its high watermark, and none of its records is
//!   read_committed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    DescribeTransactionsRequest, FindCoordinatorRequest, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DefaultProducerContext, Producer, ThreadedProducer,
};
use rdkafka::{Offset, TopicPartitionList};

use gregor_tests::cluster::{self, call, Cluster};
use gregor_tests::kafka::close_within;
use gregor_tests::replicated::{create_replicated, partition_leaders, read_committed};
use gregor_tests::wait_for;

const PARTITIONS: i32 = 3;
/// How long an election, a coordinator move or a rebalance may take.
const CONVERGE: Duration = Duration::from_secs(60);
const CALL: Duration = Duration::from_secs(30);

fn start() -> Cluster {
    start_with(4000, 3000, &[])
}

/// [`start`] with `replica.lag.time.max.ms`, the brokers' session timeout
/// and more settings given.
fn start_with(lag_ms: u64, session_ms: u64, extra: &[(&str, &str)]) -> Cluster {
    let mut builder = cluster::cluster(3).timing(500, session_ms, 8000);
    for (key, value) in extra {
        builder = builder.set(key, value);
    }
    let cluster = builder
        .set("replica.fetch.backoff.ms", "200")
        .set("replica.fetch.wait.max.ms", "200")
        .set("replica.lag.time.max.ms", &lag_ms.to_string())
        .set("offsets.topic.num.partitions", "5")
        .set("transaction.state.log.num.partitions", "5")
        .set(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "1000",
        )
        .start();
    cluster.await_formed(&[1, 2, 3]);
    cluster
}

fn create_topic(cluster: &Cluster, name: &str) {
    create_replicated(cluster, name, PARTITIONS);
}

/// The coordinator of `transactional_id` as node `via` answers
/// FindCoordinator v4 for key type 1 (once it has one other than `not`).
fn coordinator(cluster: &Cluster, via: i32, transactional_id: &str, not: Option<i32>) -> i32 {
    find(cluster, via, 1, transactional_id, not)
}

/// The coordinator of `key` (of `key_type`) as node `via` answers it.
fn find(cluster: &Cluster, via: i32, key_type: i8, key: &str, not: Option<i32>) -> i32 {
    let transactional_id = key;
    let addr = cluster.node(via).addr();
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![StrBytes::from_string(transactional_id.to_string())]);
    wait_for(
        &format!("a coordinator of {transactional_id} other than {not:?} seen by node {via}"),
        CONVERGE,
        || {
            let response = call(addr, &request, 4)?;
            let found = response.coordinators.first()?;
            let node = found.node_id.0;
            (found.error_code == 0 && node >= 1 && Some(node) != not).then_some(node)
        },
    )
}

fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("topic.metadata.refresh.interval.ms", "1000");
    config
}

fn produce_inputs(bootstrap: &str, topic: &str, count: usize) {
    let producer: BaseProducer = base_config(bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .expect("create a producer");
    for i in 0..count {
        let value = format!("r-{i:04}");
        let key = i.to_string();
        let record = BaseRecord::to(topic)
            .payload(&value)
            .key(&key)
            .partition(i as i32 % PARTITIONS);
        producer
            .send(record)
            .map_err(|(e, _)| e)
            .expect("queue a record");
    }
    producer.flush(CALL).expect("deliver the inputs");
}

/// A producer whose delivery reports a thread of its own polls (the
/// transactional calls wait for them).
type TxnProducer = ThreadedProducer<DefaultProducerContext>;

fn transactional_producer(
    bootstrap: &str,
    transactional_id: &str,
    timeout_ms: &str,
) -> TxnProducer {
    transactional_producer_with(bootstrap, transactional_id, timeout_ms, &[])
}

/// [`transactional_producer`] with more client settings.
fn transactional_producer_with(
    bootstrap: &str,
    transactional_id: &str,
    timeout_ms: &str,
    extra: &[(&str, &str)],
) -> TxnProducer {
    let mut config = base_config(bootstrap);
    config
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", timeout_ms)
        .set("message.timeout.ms", timeout_ms)
        .set("linger.ms", "5");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let producer: TxnProducer = config.create().expect("create a transactional producer");
    let deadline = Instant::now() + CONVERGE;
    loop {
        match producer.init_transactions(CALL) {
            Ok(()) => return producer,
            Err(error) if Instant::now() < deadline => {
                eprintln!("init_transactions: {error}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(error) => panic!("init_transactions: {error}"),
        }
    }
}

/// (last stable offset, high watermark) of each partition of `topic`.
fn stable_and_high(bootstrap: &str, topic: &str) -> Option<Vec<(i64, i64)>> {
    let watermarks = |isolation: &str| -> Option<Vec<i64>> {
        let consumer: BaseConsumer = base_config(bootstrap)
            .set("isolation.level", isolation)
            .create()
            .ok()?;
        (0..PARTITIONS)
            .map(|p| {
                consumer
                    .fetch_watermarks(topic, p, Duration::from_secs(5))
                    .ok()
                    .map(|w| w.1)
            })
            .collect()
    };
    let stable = watermarks("read_committed")?;
    let high = watermarks("read_uncommitted")?;
    Some(stable.into_iter().zip(high).collect())
}

/// The consume-transform-produce loop's state.
struct Transformer {
    bootstrap: String,
    transactional_id: String,
    consumer: BaseConsumer,
    producer: TxnProducer,
    /// The next input offset per partition, as committed with the output.
    done: BTreeMap<i32, i64>,
    committed_transactions: usize,
    aborted_transactions: usize,
}

const INPUT: &str = "txn-in";
const OUTPUT: &str = "txn-out";
const GROUP: &str = "txn-transformer";
/// Transactional ids are this with a number.
const TXN_ID_PREFIX: &str = "txn-failover-transformer";
const RECORDS: usize = 300;
const BATCH: usize = 20;

impl Transformer {
    fn new(bootstrap: String, transactional_id: String) -> Self {
        let consumer: BaseConsumer = base_config(&bootstrap)
            .set("group.id", GROUP)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .set("session.timeout.ms", "10000")
            .set("heartbeat.interval.ms", "500")
            .create()
            .expect("create a consumer");
        consumer.subscribe(&[INPUT]).expect("subscribe");
        let producer = transactional_producer(&bootstrap, &transactional_id, "20000");
        Self {
            bootstrap,
            transactional_id,
            consumer,
            producer,
            done: BTreeMap::new(),
            committed_transactions: 0,
            aborted_transactions: 0,
        }
    }

    /// The group's committed offsets of the assigned partitions, as its
    /// coordinator answers (empty while it cannot).
    fn committed(&self) -> BTreeMap<i32, i64> {
        let Ok(offsets) = self.consumer.committed(Duration::from_secs(5)) else {
            return BTreeMap::new();
        };
        offsets
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(offset) => Some((e.partition(), offset)),
                _ => None,
            })
            .collect()
    }

    /// Ends the loop: the producer, then the consumer's group membership,
    /// each within [`CALL`] (a close that never ends fails the test).
    fn close(self) {
        close_within(self.producer, CALL, "the transactional producer");
        close_within(self.consumer, CALL, "the transformer's consumer");
    }

    /// A new producer for the same transactional id (its
    /// `init_transactions` fences the old one, which is closed first).
    fn renew_producer(&mut self) {
        let fresh = transactional_producer(&self.bootstrap, &self.transactional_id, "20000");
        let old = std::mem::replace(&mut self.producer, fresh);
        close_within(old, CALL, "the replaced transactional producer");
    }

    fn finished(&self) -> bool {
        self.done.values().sum::<i64>() as usize >= RECORDS
    }

    /// Up to `BATCH` input records: (partition, offset, value).
    fn poll(&self) -> Vec<(i32, i64, String)> {
        let mut batch = Vec::new();
        let mut last = Instant::now();
        while batch.len() < BATCH && last.elapsed() < Duration::from_secs(1) {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let value = message
                        .payload_view::<str>()
                        .and_then(Result::ok)
                        .unwrap_or_default()
                        .to_string();
                    batch.push((message.partition(), message.offset(), value));
                    last = Instant::now();
                }
                Some(Err(error)) => eprintln!("consumer: {error}"),
                None => {}
            }
        }
        batch
    }

    /// One transaction of `batch` with its offsets: whether it committed.
    fn transact(&mut self, batch: &[(i32, i64, String)]) -> bool {
        self.transact_then(batch, &mut || {})
    }

    /// [`Self::transact`], running `before_commit` once the offsets are
    /// in the transaction and before it commits.
    fn transact_then(
        &mut self,
        batch: &[(i32, i64, String)],
        before_commit: &mut dyn FnMut(),
    ) -> bool {
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for (partition, offset, _) in batch {
            let entry = next.entry(*partition).or_insert(offset + 1);
            *entry = (*entry).max(offset + 1);
        }
        match self.try_transact(batch, &next, before_commit) {
            Ok(()) => {
                self.done.extend(next);
                self.committed_transactions += 1;
                true
            }
            Err(error) => {
                eprintln!("transaction failed: {error}");
                self.recover(&error);
                false
            }
        }
    }

    fn try_transact(
        &self,
        batch: &[(i32, i64, String)],
        next: &BTreeMap<i32, i64>,
        before_commit: &mut dyn FnMut(),
    ) -> Result<(), KafkaError> {
        self.producer.begin_transaction()?;
        for (partition, _, value) in batch {
            let out = format!("out-{value}");
            let record = BaseRecord::<str, str>::to(OUTPUT)
                .payload(&out)
                .partition(*partition);
            if let Err((error, _)) = self.producer.send(record) {
                return Err(error);
            }
        }
        let mut offsets = TopicPartitionList::new();
        for (partition, offset) in next {
            offsets.add_partition_offset(INPUT, *partition, Offset::Offset(*offset))?;
        }
        let metadata = self
            .consumer
            .group_metadata()
            .expect("the consumer's group metadata");
        self.producer
            .send_offsets_to_transaction(&offsets, &metadata, CALL)?;
        before_commit();
        // A retriable failure of the commit may be retried as it is.
        let mut attempts = 0;
        loop {
            match self.producer.commit_transaction(CALL) {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(error)) if error.is_retriable() && attempts < 5 => {
                    eprintln!("commit_transaction (retrying): {error}");
                    attempts += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// After a failed transaction: abort it (or start a new producer when
    /// the old one cannot go on) and rewind the input to the committed
    /// offsets.
    fn recover(&mut self, error: &KafkaError) {
        let fatal = matches!(error, KafkaError::Transaction(e) if e.is_fatal());
        let aborted = !fatal && {
            let deadline = Instant::now() + CONVERGE;
            loop {
                match self.producer.abort_transaction(CALL) {
                    Ok(()) => break true,
                    Err(KafkaError::Transaction(e)) if e.is_fatal() => break false,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("abort_transaction (retrying): {e}");
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    Err(e) => panic!("abort_transaction: {e}"),
                }
            }
        };
        if !aborted {
            eprintln!("a new transactional producer");
            self.producer =
                transactional_producer(&self.bootstrap, &self.transactional_id, "20000");
        }
        self.aborted_transactions += 1;
        // Rewind to the offsets committed with the last transaction.
        let assignment = self.consumer.assignment().expect("the assignment");
        for element in assignment.elements() {
            let partition = element.partition();
            let offset = match self.done.get(&partition) {
                Some(next) => Offset::Offset(*next),
                None => Offset::Beginning,
            };
            if let Err(e) = self
                .consumer
                .seek(INPUT, partition, offset, Duration::from_secs(10))
            {
                eprintln!("seek {partition}: {e}");
            }
        }
    }
}

#[test]
fn consume_transform_produce_survives_the_sigkill_of_its_transaction_coordinator() {
    let mut cluster = start();
    create_topic(&cluster, INPUT);
    create_topic(&cluster, OUTPUT);
    produce_inputs(&cluster.bootstrap(), INPUT, RECORDS);
    let group_coordinator = find(&cluster, 1, 0, GROUP, None);
    let (txn_id, first) = (0..50)
        .map(|n| format!("{TXN_ID_PREFIX}-{n}"))
        .map(|id| {
            let at = coordinator(&cluster, 1, &id, None);
            (id, at)
        })
        .find(|(_, at)| *at != group_coordinator)
        .expect("a transactional id coordinated away from the group");
    let out_leaders = partition_leaders(&cluster, 1, OUTPUT, PARTITIONS as usize, CONVERGE);
    eprintln!(
        "{txn_id} coordinated by {first}, {GROUP} by {group_coordinator}; {OUTPUT} led by {out_leaders:?}"
    );

    let mut transformer = Transformer::new(cluster.bootstrap(), txn_id.clone());
    let started = Instant::now();
    let mut killed = None;
    while !transformer.finished() {
        assert!(
            started.elapsed() < CONVERGE * 3,
            "the loop stalled at {:?} ({} committed, {} aborted)",
            transformer.done,
            transformer.committed_transactions,
            transformer.aborted_transactions
        );
        let batch = transformer.poll();
        if batch.is_empty() {
            continue;
        }
        transformer.transact(&batch);
        if killed.is_none() && transformer.committed_transactions == 3 {
            cluster.node_mut(first).kill();
            eprintln!("SIGKILLed node {first}, the coordinator of {txn_id}");
            killed = Some(first);
        }
    }
    let survivor = if first == 1 { 2 } else { 1 };
    let moved = coordinator(&cluster, survivor, &txn_id, Some(first));
    eprintln!(
        "{} transactions committed, {} aborted; {txn_id} coordinated by {moved} now",
        transformer.committed_transactions, transformer.aborted_transactions
    );
    assert!(
        transformer.committed_transactions > 3,
        "transactions committed after the kill"
    );
    transformer.close();
    every_input_once_in_the_output(&cluster);
}

/// The read_committed output holds every input's transform exactly once.
fn every_input_once_in_the_output(cluster: &Cluster) {
    let values = read_committed(&cluster.bootstrap(), OUTPUT, PARTITIONS, RECORDS);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for value in &values {
        *counts.entry(value.as_str()).or_default() += 1;
    }
    let expected: BTreeSet<String> = (0..RECORDS).map(|i| format!("out-r-{i:04}")).collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|v| !counts.contains_key(v.as_str()))
        .collect();
    let twice: Vec<(&&str, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(missing.is_empty(), "outputs missing: {missing:?}");
    assert!(twice.is_empty(), "outputs read_committed twice: {twice:?}");
    assert_eq!(values.len(), RECORDS);
}

/// The group coordinator's broker dies after the transaction's offsets
/// reached it and before the transaction commits: the offsets were in its
/// partition of `__consumer_offsets`, so the next coordinator commits them
/// at the marker, and the group, rebalanced there, resumes from them (had
/// they been lost, it would resume earlier and transform inputs twice).
#[test]
fn consume_transform_produce_survives_the_sigkill_of_its_group_coordinator_mid_transaction() {
    let mut cluster = start();
    create_topic(&cluster, INPUT);
    create_topic(&cluster, OUTPUT);
    produce_inputs(&cluster.bootstrap(), INPUT, RECORDS);
    let group_coordinator = find(&cluster, 1, 0, GROUP, None);
    let (txn_id, txn_coordinator) = (0..50)
        .map(|n| format!("{TXN_ID_PREFIX}-g{n}"))
        .map(|id| {
            let at = coordinator(&cluster, 1, &id, None);
            (id, at)
        })
        .find(|(_, at)| *at != group_coordinator)
        .expect("a transactional id coordinated away from the group");
    eprintln!("{txn_id} coordinated by {txn_coordinator}, {GROUP} by {group_coordinator}");

    let mut transformer = Transformer::new(cluster.bootstrap(), txn_id);
    let started = Instant::now();
    let mut killed = false;
    while !transformer.finished() {
        assert!(
            started.elapsed() < CONVERGE * 3,
            "the loop stalled at {:?} ({} committed, {} aborted)",
            transformer.done,
            transformer.committed_transactions,
            transformer.aborted_transactions
        );
        let batch = transformer.poll();
        if batch.is_empty() {
            continue;
        }
        if !killed && transformer.committed_transactions == 3 {
            let committed = transformer.transact_then(&batch, &mut || {
                cluster.node_mut(group_coordinator).kill();
                eprintln!("SIGKILLed node {group_coordinator}, the coordinator of {GROUP}");
            });
            killed = true;
            eprintln!("the transaction open at the kill committed: {committed}");
            if committed {
                // Its offsets are the group's now (lost with the killed
                // broker, the group would still have the previous ones).
                let wanted = transformer.done.clone();
                wait_for(
                    &format!("the group's committed offsets to be {wanted:?}"),
                    CONVERGE,
                    || (transformer.committed() == wanted).then_some(()),
                );
            }
            // librdkafka keeps the killed coordinator cached for the
            // group; once that broker leaves the Metadata answers (fenced,
            // as Kafka leaves it out) its next send_offsets_to_transaction
            // can wait forever, past its timeout (confluentinc/librdkafka
            // #5511, #5456). A producer started now asks FindCoordinator.
            transformer.renew_producer();
        } else {
            transformer.transact(&batch);
        }
    }
    let survivor = if group_coordinator == 1 { 2 } else { 1 };
    let moved = find(&cluster, survivor, 0, GROUP, Some(group_coordinator));
    eprintln!(
        "{} transactions committed, {} aborted; {GROUP} coordinated by {moved} now",
        transformer.committed_transactions, transformer.aborted_transactions
    );
    transformer.close();
    every_input_once_in_the_output(&cluster);
}

// The offsets are exact: a marker retried by the same coordinator is
// written only where it failed (a second marker would show as one more
// offset). Only a new coordinator may write a marker again, and the
// committed transaction is complete before the kill.
#[test]
fn an_open_transaction_of_a_killed_coordinator_is_ended_by_the_next() {
    const TOPIC: &str = "txn-open";
    const ID: &str = "txn-open-at-kill";
    let mut cluster = start();
    create_topic(&cluster, TOPIC);
    let first = coordinator(&cluster, 1, ID, None);
    let topic_leaders = partition_leaders(&cluster, 1, TOPIC, PARTITIONS as usize, CONVERGE);
    let elsewhere: Vec<i32> = topic_leaders
        .iter()
        .filter(|(_, leader)| **leader != first)
        .map(|(p, _)| *p)
        .collect();
    eprintln!("{ID} coordinated by {first}; {TOPIC} led by {topic_leaders:?}");
    assert!(
        !elsewhere.is_empty(),
        "a partition of {TOPIC} led by another broker than {first}"
    );

    // One committed transaction first: its markers go to every
    // partition, those led elsewhere as WriteTxnMarkers.
    let producer = transactional_producer(&cluster.bootstrap(), ID, "8000");
    producer.begin_transaction().expect("begin");
    for p in 0..PARTITIONS {
        let value = format!("committed-{p}");
        let record = BaseRecord::<str, str>::to(TOPIC)
            .payload(&value)
            .partition(p);
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.commit_transaction(CALL).expect("commit");
    let mut seen = None;
    let settled = wait_for("the committed transaction's markers", CONVERGE, || {
        let now = stable_and_high(&cluster.bootstrap(), TOPIC)?;
        if seen.as_ref() != Some(&now) {
            eprintln!("(last stable offset, high watermark) by partition: {now:?}");
            seen = Some(now.clone());
        }
        now.iter()
            .all(|(stable, high)| stable == high && *high >= 2)
            .then_some(now)
    });
    eprintln!("after the commit: {settled:?}");
    assert!(
        settled.iter().all(|(_, high)| *high == 2),
        "each partition holds the committed record and one marker: {settled:?}"
    );

    // Then one left open on the partitions led elsewhere.
    producer.begin_transaction().expect("begin");
    for p in &elsewhere {
        for i in 0..5 {
            let value = format!("open-{p}-{i}");
            let record = BaseRecord::<str, str>::to(TOPIC)
                .payload(&value)
                .partition(*p);
            producer.send(record).map_err(|(e, _)| e).expect("send");
        }
    }
    producer
        .flush(CALL)
        .expect("the open transaction's records written");
    let held = stable_and_high(&cluster.bootstrap(), TOPIC).expect("offsets");
    for p in &elsewhere {
        let (stable, high) = held[*p as usize];
        assert!(
            stable < high,
            "partition {p} held back by the open transaction: {held:?}"
        );
    }
    // The producer goes away without ending it; then its coordinator dies.
    drop(producer);
    cluster.node_mut(first).kill();
    eprintln!("SIGKILLed node {first}, the coordinator of {ID}");
    let survivor = if first == 1 { 2 } else { 1 };
    let moved = coordinator(&cluster, survivor, ID, Some(first));
    eprintln!("{ID} coordinated by {moved} now");

    let ended = wait_for(
        "every last stable offset to reach its high watermark",
        CONVERGE,
        || {
            let now = stable_and_high(&cluster.bootstrap(), TOPIC)?;
            now.iter()
                .all(|(stable, high)| stable == high)
                .then_some(now)
        },
    );
    eprintln!("after the new coordinator ended it: {ended:?}");
    for (p, (_, high)) in ended.iter().enumerate() {
        // What the commit left (its record and marker), then on the
        // partitions of the open transaction its 5 records and the abort
        // marker.
        let open = i32::try_from(p).is_ok_and(|p| elsewhere.contains(&p));
        let expected = settled[p].1 + if open { 6 } else { 0 };
        assert_eq!(*high, expected, "partition {p}: {ended:?}");
    }
    let mut values = read_committed(&cluster.bootstrap(), TOPIC, PARTITIONS, PARTITIONS as usize);
    values.sort();
    let expected: Vec<String> = (0..PARTITIONS).map(|p| format!("committed-{p}")).collect();
    assert_eq!(
        values, expected,
        "only the committed transaction is read_committed"
    );
}

/// The state DescribeTransactions gives node `via` for `transactional_id`.
fn described_state(cluster: &Cluster, via: i32, transactional_id: &str) -> Option<String> {
    let request =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
            StrBytes::from_string(transactional_id.to_string()),
        )]);
    let response = call(cluster.node(via).addr(), &request, 0)?;
    let state = response.transaction_states.first()?;
    (state.error_code == 0).then(|| state.transaction_state.to_string())
}

/// A transactional producer of `transactional_id` with a transaction
/// open and `count` records ("{prefix}-{i}") written to `partition`.
///
/// A request it sends to a paused broker (a FindCoordinator after the
/// coordinator answered COORDINATOR_NOT_AVAILABLE, its write having
/// waited out an ISR change) is given up on after 10 s, not librdkafka's
/// default 60 s, which is as long as these tests wait.
fn open_transaction(
    cluster: &Cluster,
    transactional_id: &str,
    (topic, partition): (&str, i32),
    prefix: &str,
    count: usize,
) -> TxnProducer {
    let producer = transactional_producer_with(
        &cluster.bootstrap(),
        transactional_id,
        "60000",
        &[("socket.timeout.ms", "10000")],
    );
    producer.begin_transaction().expect("begin");
    for i in 0..count {
        let value = format!("{prefix}-{i}");
        let record = BaseRecord::<str, str>::to(topic)
            .payload(&value)
            .partition(partition);
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer
        .flush(CALL)
        .expect("the transaction's records written");
    producer
}

/// The EndTxn module's call deadline (1 s here) counts only its own time:
/// the coordinator waiting for the in-sync replicas of its
/// `__transaction_state` partition and of the marker's partition, while a
/// paused follower is still in them (`replica.lag.time.max.ms` is 4 s),
/// is the broker's. Before, that wait timed the module out and the
/// producer was answered UNKNOWN_SERVER_ERROR, failing its commit.
#[test]
fn a_commit_waiting_for_a_paused_replica_outlasts_the_module_deadline() {
    const TOPIC: &str = "txn-slow-isr";
    const ID: &str = "txn-slow-isr-id";
    const RECORDS: usize = 3;
    let cluster = start_with(4000, 3000, &[("plugin.call.timeout.ms", "1000")]);
    create_topic(&cluster, TOPIC);
    let first = coordinator(&cluster, 1, ID, None);
    let topic_leaders = partition_leaders(&cluster, 1, TOPIC, PARTITIONS as usize, CONVERGE);
    let partition = topic_leaders
        .iter()
        .find(|(_, leader)| **leader == first)
        .map(|(p, _)| *p)
        .unwrap_or_else(|| panic!("a partition of {TOPIC} led by {first}"));
    let paused = if first == 1 { 2 } else { 1 };

    let producer = open_transaction(&cluster, ID, (TOPIC, partition), "slow", RECORDS);

    cluster.node(paused).pause();
    let started = Instant::now();
    let outcome = producer.commit_transaction(Duration::from_secs(60));
    let took = started.elapsed();
    cluster.node(paused).resume();
    outcome.unwrap_or_else(|error| {
        panic!("the commit, with node {paused} paused, failed after {took:?}: {error}")
    });
    eprintln!("committed in {took:?} with node {paused} paused");
    let mut values = read_committed(&cluster.bootstrap(), TOPIC, PARTITIONS, RECORDS);
    values.sort();
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("slow-{i}")).collect();
    assert_eq!(values, expected, "the committed records, once each");
}

/// A commit whose coordinator dies after deciding it (PrepareCommit is in
/// `__transaction_state`) and before its marker is written (the
/// partition's leader is paused) is completed by the next coordinator, as
/// Kafka's does on loading a prepared transaction: the producer's commit
/// call succeeds (answered once the decision was written, or, when that
/// answer died with the coordinator, its retried EndTxn told
/// CONCURRENT_TRANSACTIONS until then), the marker reaches the partition
/// and its records are read_committed.
#[test]
fn a_prepared_commit_of_a_killed_coordinator_is_completed_by_the_next() {
    const TOPIC: &str = "txn-prepared";
    const ID: &str = "txn-prepared-at-kill";
    const RECORDS: usize = 5;
    // The paused leader must keep its partition until the coordinator is
    // killed: its session (20 s) outlasts the ISR change that lets the
    // decision be written (8 s without a fetch), so the marker cannot be
    // written meanwhile. (With the default 3 s session the leadership
    // moved first and the commit could complete before the kill; 8 s
    // also keeps a healthy follower slowed by a busy machine in the ISR.)
    let mut cluster = start_with(8000, 20_000, &[]);
    create_topic(&cluster, TOPIC);
    let first = coordinator(&cluster, 1, ID, None);
    let topic_leaders = partition_leaders(&cluster, 1, TOPIC, PARTITIONS as usize, CONVERGE);
    let (partition, other) = topic_leaders
        .iter()
        .find(|(_, leader)| **leader != first)
        .map(|(p, leader)| (*p, *leader))
        .unwrap_or_else(|| panic!("a partition of {TOPIC} led by another broker than {first}"));
    eprintln!("{ID} coordinated by {first}; {TOPIC}-{partition} led by {other}");

    let producer = open_transaction(&cluster, ID, (TOPIC, partition), "prepared", RECORDS);

    // The partition's leader stops answering, so the decided commit's
    // marker cannot be written; the coordinator dies once it has decided.
    cluster.node(other).pause();
    let committing = std::thread::spawn(move || {
        let started = Instant::now();
        let outcome = producer.commit_transaction(Duration::from_secs(120));
        eprintln!(
            "commit_transaction: {outcome:?} after {:?}",
            started.elapsed()
        );
        (producer, outcome)
    });
    wait_for("the commit to be decided (PrepareCommit)", CONVERGE, || {
        if described_state(&cluster, first, ID).as_deref() == Some("PrepareCommit") {
            return Some(());
        }
        // Its outcome is printed above.
        assert!(
            !committing.is_finished(),
            "the commit call ended without the decision seen at node {first}"
        );
        None
    });
    cluster.node_mut(first).kill();
    cluster.node(other).resume();
    eprintln!("SIGKILLed node {first} with {ID} in PrepareCommit; node {other} resumed");

    let survivor = if first == 1 { 2 } else { 1 };
    let moved = coordinator(&cluster, survivor, ID, Some(first));
    let (_producer, outcome) = committing.join().expect("the committing thread");
    outcome.expect("the commit, completed by the next coordinator");
    // The commit call may return while the marker is still pending: an
    // EndTxn is answered once the decision is written, as Kafka answers
    // it, so the next coordinator may still be retrying the marker.
    wait_for(
        "the next coordinator to complete the commit",
        CONVERGE,
        || (described_state(&cluster, moved, ID)? == "CompleteCommit").then_some(()),
    );
    assert!(
        cluster
            .node(moved)
            .log_text()
            .contains("finishing a prepared transaction"),
        "node {moved} loaded {ID} prepared and finished it"
    );
    let mut values = read_committed(&cluster.bootstrap(), TOPIC, PARTITIONS, RECORDS);
    values.sort();
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("prepared-{i}")).collect();
    assert_eq!(values, expected, "the prepared commit's records, once each");
    let settled = wait_for("the last stable offsets to settle", CONVERGE, || {
        let now = stable_and_high(&cluster.bootstrap(), TOPIC)?;
        now.iter()
            .all(|(stable, high)| stable == high)
            .then_some(now)
    });
    // The records, then the commit marker; possibly twice, as Kafka may
    // write it: a marker write whose acknowledgement did not come in time
    // (the resumed leader's followers catching up) is sent again.
    let records = i64::try_from(RECORDS).unwrap_or(0);
    let high = settled[partition as usize].1;
    assert!(
        high == records + 1 || high == records + 2,
        "the records and the commit marker: {settled:?}"
    );
}
