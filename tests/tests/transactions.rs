//! Transactions (issue 7, part 2) with real clients and raw frames.
//!
//! librdkafka's transactional producer (the `rdkafka` crate) against the
//! broker: a committed transaction is visible to read_committed consumers
//! and an aborted one only to read_uncommitted ones; an open transaction
//! holds back the last stable offset (and with it everything after it) until
//! it ends; consume-transform-produce commits the group's offsets with the
//! output, or neither; a second producer with the same transactional id
//! fences the first; the broker aborts a transaction that outlives its
//! timeout; a commit survives a SIGKILL, and a transaction left open by one
//! is aborted when its producer comes back. (An idempotent producer kept
//! alive across a broker crash is in `idempotence.rs`.)
//!
//! On the wire: InitProducerId with a transactional id hands out a producer
//! id, bumps its epoch on every call so older instances are fenced, answers
//! a KIP-360 retry again, refuses a stale epoch with PRODUCER_FENCED (v4+;
//! INVALID_PRODUCER_EPOCH for v3) and a bad timeout with INVALID_TRANSACTION_TIMEOUT, and keeps all of it across
//! a broker crash; DescribeTransactions and ListTransactions show ongoing
//! and completed transactions as Kafka's admin tools expect.
//!
//! End offsets are checked exactly: a partition holding a committed
//! transaction of n records has n + 1 offsets (the COMMIT control record),
//! and read_committed ListOffsets (the last stable offset) equals the high
//! watermark once no transaction is open on it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use gregor_tests::kafka::{self, Isolation, CALL_TIMEOUT};
use gregor_tests::wire::{self, Conn};
use gregor_tests::{wait_for, Broker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaError};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const PRODUCER_FENCED: i16 = 90;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

/// How long a test waits for anything: records, a group, a broker-side
/// abort. Every wait is bounded by it and fails naming what it waited for.
const WAIT: Duration = Duration::from_secs(30);

/// `prefix-0`, `prefix-1`, ...
fn values(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// Where [`kafka::send_values`] puts `batches`, sent one after the other
/// over `partitions` partitions: the values of each partition in offset
/// order. Every partition has an entry.
fn spread(batches: &[&[String]], partitions: i32) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = (0..partitions).map(|p| (p, Vec::new())).collect();
    for batch in batches {
        for (i, value) in batch.iter().enumerate() {
            out.entry(i as i32 % partitions)
                .or_default()
                .push(value.clone());
        }
    }
    out
}

/// The transactional calls block (librdkafka retries inside them until
/// their timeout): run them off the async worker.
fn blocking<T>(call: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(call)
}

fn init(producer: &FutureProducer) {
    blocking(|| producer.init_transactions(CALL_TIMEOUT))
        .unwrap_or_else(|e| panic!("init_transactions: {e}"));
}

fn begin(producer: &FutureProducer) {
    producer
        .begin_transaction()
        .unwrap_or_else(|e| panic!("begin_transaction: {e}"));
}

fn commit(producer: &FutureProducer) {
    blocking(|| producer.commit_transaction(CALL_TIMEOUT))
        .unwrap_or_else(|e| panic!("commit_transaction: {e}"));
}

fn abort(producer: &FutureProducer) {
    blocking(|| producer.abort_transaction(CALL_TIMEOUT))
        .unwrap_or_else(|e| panic!("abort_transaction: {e}"));
}

/// The librdkafka error behind a failed transactional call.
fn transaction_error(result: Result<(), KafkaError>, what: &str) -> RDKafkaError {
    match result {
        Ok(()) => panic!("{what} succeeded; it must fail"),
        Err(KafkaError::Transaction(error)) => error,
        Err(other) => panic!("{what}: expected a transaction error, got {other}"),
    }
}

/// librdkafka folds PRODUCER_FENCED and INVALID_PRODUCER_EPOCH into its
/// own `Fenced`, and makes it fatal: the instance is no longer usable.
fn assert_fenced(error: &RDKafkaError, what: &str) {
    let fencing = [
        RDKafkaErrorCode::Fenced,
        RDKafkaErrorCode::ProducerFenced,
        RDKafkaErrorCode::InvalidProducerEpoch,
    ];
    assert!(
        error.is_fatal() && fencing.contains(&error.code()),
        "{what}: expected a fatal fencing error, got {} ({}; fatal {}, abortable {})",
        error.name(),
        error.string(),
        error.is_fatal(),
        error.txn_requires_abort()
    );
}

/// Waits until every partition of `topic` has settled at `expected`: the
/// last stable offset (read_committed ListOffsets) reaches it, and then the
/// high watermark is the same, so no transaction is open and every marker
/// is written. (Gregor writes the markers before it answers EndTxn, so this
/// holds at once after a commit or an abort; Kafka writes them just after.)
fn settled(broker: &Broker, topic: &str, expected: &[i64]) {
    let partitions = expected.len() as i32;
    let what = format!("the last stable offsets of {topic} to reach {expected:?}");
    blocking(|| {
        wait_for(&what, WAIT, || {
            let now = kafka::end_offsets(broker, topic, partitions, Isolation::ReadCommitted);
            (now == expected).then_some(())
        })
    });
    assert_eq!(
        kafka::end_offsets(broker, topic, partitions, Isolation::ReadUncommitted),
        expected,
        "high watermarks of {topic} once its last stable offsets reached {expected:?}"
    );
}

/// Both end offsets of every partition: (last stable offset, high
/// watermark).
fn stable_and_high(broker: &Broker, topic: &str, partitions: i32) -> Vec<(i64, i64)> {
    let stable = kafka::end_offsets(broker, topic, partitions, Isolation::ReadCommitted);
    let high = kafka::end_offsets(broker, topic, partitions, Isolation::ReadUncommitted);
    stable.into_iter().zip(high).collect()
}

async fn read(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    isolation: Isolation,
) -> BTreeMap<i32, Vec<String>> {
    kafka::read_values(broker, topic, partitions, isolation, 0, WAIT).await
}

/// One commit, one abort, over two partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_sees_the_committed_transaction_and_read_uncommitted_both() {
    let broker = Broker::start();
    let topic = "txn-commit-abort";
    kafka::create_topic(&broker, topic, 2).await;
    let producer = kafka::transactional_producer(&broker, "commit-abort", &[]);
    init(&producer);

    let committed = values("committed", 0..10);
    begin(&producer);
    kafka::send_values(&producer, topic, 2, &committed).await;
    commit(&producer);
    // Committed: read_committed reaches the end, the COMMIT markers included.
    settled(&broker, topic, &[6, 6]);

    let aborted = values("aborted", 0..10);
    begin(&producer);
    // Delivered before the abort, so the records are in the log.
    kafka::send_values(&producer, topic, 2, &aborted).await;
    abort(&producer);

    // Per partition: 5 committed, COMMIT, 5 aborted, ABORT.
    settled(&broker, topic, &[12, 12]);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed], 2),
        "read_committed: the committed records only"
    );
    // Control records are never delivered to the application.
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadUncommitted).await,
        spread(&[&committed, &aborted], 2),
        "read_uncommitted: all 20 records, no markers"
    );
}

/// Until it ends, an open transaction holds back the last stable offset:
/// read_committed consumers see nothing from its first record on, not even
/// later non-transactional records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_holds_back_read_committed_consumers_until_it_commits() {
    let broker = Broker::start();
    let topic = "txn-open";
    kafka::create_topic(&broker, topic, 1).await;
    let plain = kafka::producer(&broker, &[]);
    let txn = kafka::transactional_producer(&broker, "open", &[]);
    init(&txn);

    let before = values("before", 0..3);
    kafka::send_values(&plain, topic, 1, &before).await;
    let inside = values("inside", 0..5);
    begin(&txn);
    kafka::send_values(&txn, topic, 1, &inside).await;
    let after = values("after", 0..3);
    kafka::send_values(&plain, topic, 1, &after).await;

    assert_eq!(
        stable_and_high(&broker, topic, 1),
        [(3, 11)],
        "the last stable offset stops at the open transaction's first record"
    );
    let waiting = kafka::isolated_consumer(&broker, Isolation::ReadCommitted);
    let seen = kafka::consume_assigned(&waiting, topic, 1, 0, WAIT).await;
    let seen: Vec<String> = seen
        .get(&0)
        .into_iter()
        .flatten()
        .map(|m| String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
        .collect();
    assert_eq!(seen, before, "read_committed while the transaction is open");
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadUncommitted).await,
        spread(&[&before, &inside, &after], 1),
        "read_uncommitted sees the open transaction"
    );

    commit(&txn);
    settled(&broker, topic, &[12]);
    // The consumer that was held at the last stable offset moves on.
    let mut rest = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while rest.len() < inside.len() + after.len() {
        match tokio::time::timeout_at(deadline, waiting.recv()).await {
            Err(_) => panic!("after the commit the waiting consumer got only {rest:?}"),
            Ok(Ok(m)) => {
                rest.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
            }
            Ok(Err(KafkaError::PartitionEOF(_))) => {}
            Ok(Err(e)) => panic!("waiting consumer: {e}"),
        }
    }
    let expected: Vec<String> = inside.iter().chain(&after).cloned().collect();
    assert_eq!(rest, expected, "the waiting consumer after the commit");
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadCommitted).await,
        spread(&[&before, &inside, &after], 1),
        "a fresh read_committed consumer after the commit"
    );
}

/// A group member for consume-transform-produce: read_committed, no
/// automatic commits.
fn transformer(broker: &Broker, group: &str, topic: &str) -> BaseConsumer {
    let mut config = kafka::config(broker);
    config
        .set("group.id", group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500");
    let consumer: BaseConsumer = config.create().expect("create a group consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    consumer
}

/// Polls `consumer` (serving its group) until `n` records have arrived.
fn poll_records(consumer: &BaseConsumer, n: usize) -> Vec<String> {
    blocking(|| {
        let what = "consume-transform-produce input";
        kafka::poll_values(consumer, n, Duration::from_millis(100), WAIT, what)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    })
}

/// The group's committed offsets of `topic`'s partitions, by OffsetFetch
/// from a consumer that is not a member.
fn group_offsets(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Offset> {
    let consumer: BaseConsumer = kafka::config(broker)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("create an OffsetFetch consumer");
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, p);
    }
    blocking(|| consumer.committed_offsets(list, CALL_TIMEOUT))
        .unwrap_or_else(|e| panic!("committed offsets of group {group}: {e}"))
        .elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

/// One round of consume-transform-produce: read `n` records, write them
/// transformed, put the consumer's position into the transaction.
async fn transform_round(
    consumer: &BaseConsumer,
    producer: &FutureProducer,
    output: &str,
    n: usize,
) -> Vec<String> {
    let input = poll_records(consumer, n);
    let transformed: Vec<String> = input.iter().map(|v| v.to_uppercase()).collect();
    begin(producer);
    kafka::send_values(producer, output, 1, &transformed).await;
    let position = consumer.position().expect("consumer position");
    let group = consumer
        .group_metadata()
        .expect("group metadata of a subscribed consumer");
    blocking(|| producer.send_offsets_to_transaction(&position, &group, CALL_TIMEOUT))
        .unwrap_or_else(|e| panic!("send_offsets_to_transaction {position:?}: {e}"));
    transformed
}

/// Exactly-once consume-transform-produce: the group's offsets are
/// committed with the output records, and an abort drops both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_transform_produce_commits_offsets_with_the_output_or_neither() {
    let broker = Broker::start_with(&[("group.initial.rebalance.delay.ms", "0")]);
    let (input, output, group) = ("ctp-in", "ctp-out", "transformers");
    kafka::create_topic(&broker, input, 2).await;
    kafka::create_topic(&broker, output, 1).await;
    let plain = kafka::producer(&broker, &[]);
    kafka::send_values(&plain, input, 2, &values("record", 0..20)).await;

    let consumer = transformer(&broker, group, input);
    let producer = kafka::transactional_producer(&broker, "transformer", &[]);
    init(&producer);

    let first = transform_round(&consumer, &producer, output, 20).await;
    commit(&producer);
    // 20 records and the COMMIT marker.
    settled(&broker, output, &[21]);
    let expected_first: BTreeSet<String> = values("RECORD", 0..20).into_iter().collect();
    assert_eq!(
        first.iter().cloned().collect::<BTreeSet<_>>(),
        expected_first
    );
    assert_eq!(
        group_offsets(&broker, group, input, 2),
        BTreeMap::from([(0, Offset::Offset(10)), (1, Offset::Offset(10))]),
        "the group's offsets were committed with the transaction"
    );
    let out = read(&broker, output, 1, Isolation::ReadCommitted).await;
    assert_eq!(
        out,
        BTreeMap::from([(0, first.clone())]),
        "committed output"
    );

    // Second round, aborted: neither the offsets nor the output count.
    kafka::send_values(&plain, input, 2, &values("more", 0..6)).await;
    let second = transform_round(&consumer, &producer, output, 6).await;
    abort(&producer);
    // 6 more records and the ABORT marker.
    settled(&broker, output, &[28]);
    assert_eq!(
        second.iter().cloned().collect::<BTreeSet<_>>(),
        values("MORE", 0..6).into_iter().collect::<BTreeSet<_>>()
    );
    assert_eq!(
        group_offsets(&broker, group, input, 2),
        BTreeMap::from([(0, Offset::Offset(10)), (1, Offset::Offset(10))]),
        "an aborted transaction leaves the group's offsets alone"
    );
    assert_eq!(
        read(&broker, output, 1, Isolation::ReadCommitted).await,
        BTreeMap::from([(0, first.clone())]),
        "read_committed output after the abort"
    );
    let everything: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_eq!(
        read(&broker, output, 1, Isolation::ReadUncommitted).await,
        BTreeMap::from([(0, everything)]),
        "read_uncommitted output after the abort"
    );
}

/// A second producer with the same transactional id fences the first: its
/// InitProducerId aborts the first one's open transaction, and the first
/// one's next transactional call fails fatally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let broker = Broker::start();
    let topic = "txn-fencing";
    kafka::create_topic(&broker, topic, 1).await;
    let first = kafka::transactional_producer(&broker, "fenced", &[]);
    init(&first);
    let committed = values("first-committed", 0..3);
    begin(&first);
    kafka::send_values(&first, topic, 1, &committed).await;
    commit(&first);

    let zombie = values("first-zombie", 0..3);
    begin(&first);
    kafka::send_values(&first, topic, 1, &zombie).await;

    let second = kafka::transactional_producer(&broker, "fenced", &[]);
    init(&second);
    let error = transaction_error(
        blocking(|| first.commit_transaction(CALL_TIMEOUT)),
        "commit by the fenced producer",
    );
    assert_fenced(&error, "commit by the fenced producer");

    let later = values("second", 0..3);
    begin(&second);
    kafka::send_values(&second, topic, 1, &later).await;
    commit(&second);

    // first: 3 + COMMIT; zombie: 3 + ABORT; second: 3 + COMMIT.
    settled(&broker, topic, &[12]);
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadCommitted).await,
        spread(&[&committed, &later], 1),
        "the fenced producer's open transaction was aborted"
    );
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadUncommitted).await,
        spread(&[&committed, &zombie, &later], 1)
    );
}

/// A transaction left open longer than its `transaction.timeout.ms` is
/// aborted by the broker: the ABORT marker lets read_committed consumers
/// past it, and the producer can no longer commit it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_aborts_a_transaction_that_outlives_its_timeout() {
    let broker = Broker::start_with(&[(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "500",
    )]);
    let topic = "txn-timeout";
    kafka::create_topic(&broker, topic, 1).await;
    let producer =
        kafka::transactional_producer(&broker, "slow", &[("transaction.timeout.ms", "5000")]);
    init(&producer);
    let abandoned = values("abandoned", 0..5);
    begin(&producer);
    kafka::send_values(&producer, topic, 1, &abandoned).await;
    assert_eq!(
        stable_and_high(&broker, topic, 1),
        [(0, 5)],
        "open transaction"
    );

    // 5 s of timeout and a 500 ms sweep: the ABORT marker is the 6th offset.
    settled(&broker, topic, &[6]);
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadCommitted).await,
        spread(&[], 1),
        "read_committed after the broker's abort"
    );
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadUncommitted).await,
        spread(&[&abandoned], 1)
    );

    let result = blocking(|| producer.commit_transaction(CALL_TIMEOUT));
    let error = transaction_error(result, "commit of a timed-out transaction");
    assert!(
        error.is_fatal() || error.txn_requires_abort(),
        "commit of a timed-out transaction: {} ({}) is neither fatal nor abortable",
        error.name(),
        error.string()
    );

    // The transactional id is usable again by a new instance.
    let next =
        kafka::transactional_producer(&broker, "slow", &[("transaction.timeout.ms", "5000")]);
    init(&next);
    let later = values("later", 0..2);
    begin(&next);
    kafka::send_values(&next, topic, 1, &later).await;
    commit(&next);
    assert_eq!(
        read(&broker, topic, 1, Isolation::ReadCommitted).await,
        spread(&[&later], 1)
    );
}

/// A committed transaction survives a SIGKILL of the broker, and the same
/// producer instance keeps going after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_survives_a_broker_crash() {
    let mut broker = Broker::start();
    let topic = "txn-crash-commit";
    kafka::create_topic(&broker, topic, 2).await;
    let producer = kafka::transactional_producer(&broker, "crash-commit", &[]);
    init(&producer);
    let committed = values("committed", 0..10);
    begin(&producer);
    kafka::send_values(&producer, topic, 2, &committed).await;
    commit(&producer);

    broker.kill();
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    settled(&broker, topic, &[6, 6]);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed], 2),
        "read_committed after the crash"
    );

    // The coordinator's state came back: the producer's epoch is still
    // current and it can run another transaction.
    let more = values("more", 0..4);
    begin(&producer);
    kafka::send_values(&producer, topic, 2, &more).await;
    commit(&producer);
    settled(&broker, topic, &[9, 9]);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed, &more], 2)
    );
}

/// A transaction open when the broker is killed never becomes visible:
/// after the restart it still holds the last stable offset (or was
/// aborted), and when a producer with the same transactional id
/// initializes, it is aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_at_a_crash_is_aborted_when_its_producer_comes_back() {
    let mut broker = Broker::start();
    let topic = "txn-crash-open";
    kafka::create_topic(&broker, topic, 2).await;
    let producer = kafka::transactional_producer(&broker, "crash-open", &[]);
    init(&producer);
    let committed = values("committed", 0..10);
    begin(&producer);
    kafka::send_values(&producer, topic, 2, &committed).await;
    commit(&producer);
    let open = values("open", 0..10);
    begin(&producer);
    kafka::send_values(&producer, topic, 2, &open).await;

    broker.kill();
    // The old instance dies with the broker: nothing of it ever ends the
    // transaction.
    blocking(|| drop(producer));
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed], 2),
        "read_committed after the restart, before the producer is back"
    );

    let back = kafka::transactional_producer(&broker, "crash-open", &[]);
    init(&back);
    // 5 committed, COMMIT, 5 open, ABORT per partition.
    settled(&broker, topic, &[12, 12]);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed], 2),
        "read_committed after the producer came back"
    );
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadUncommitted).await,
        spread(&[&committed, &open], 2)
    );

    let after = values("after", 0..4);
    begin(&back);
    kafka::send_values(&back, topic, 2, &after).await;
    commit(&back);
    assert_eq!(
        read(&broker, topic, 2, Isolation::ReadCommitted).await,
        spread(&[&committed, &after], 2)
    );
}

fn read_i64(r: &mut wire::Reader) -> i64 {
    (i64::from(r.i32()) << 32) | i64::from(r.i32() as u32)
}

/// InitProducerId v1 (classic encoding): (error, producer id, epoch).
fn init_v1(broker: &Broker, transactional_id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut body = Vec::new();
    wire::put_i16(&mut body, transactional_id.len() as i16);
    body.extend_from_slice(transactional_id.as_bytes());
    wire::put_i32(&mut body, timeout_ms);
    let frame = wire::request_frame(22, 1, 3, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 3);
    let mut r = wire::Reader::new(&response[4..]);
    r.i32(); // throttle
    let error = r.i16();
    let id = read_i64(&mut r);
    (error, id, r.i16())
}

/// InitProducerId v3 or later (flexible, the same fields) naming the
/// caller's producer id and epoch.
fn init_flexible(
    broker: &Broker,
    version: i16,
    transactional_id: &str,
    expected: (i64, i16),
) -> (i16, i64, i16) {
    assert!((3..=5).contains(&version), "InitProducerId v{version}");
    let mut body = Vec::new();
    wire::put_compact_string(&mut body, transactional_id);
    wire::put_i32(&mut body, 60_000);
    body.extend_from_slice(&expected.0.to_be_bytes());
    wire::put_i16(&mut body, expected.1);
    wire::put_uvarint(&mut body, 0); // tags
    let response = wire::flexible_call(broker.addr(), 22, version, 4, &body);
    let mut r = wire::Reader::new(&response);
    let error = r.i16();
    let id = read_i64(&mut r);
    (error, id, r.i16())
}

#[test]
fn init_producer_id_bumps_epochs_fences_zombies_and_survives_a_crash() {
    let mut broker = Broker::start();
    let (error, pid, epoch) = init_v1(&broker, "txn-a", 60_000);
    assert_eq!((error, epoch), (0, 0), "first InitProducerId");
    assert!(pid >= 0);
    // A second instance with the same transactional id bumps the epoch.
    assert_eq!(init_v1(&broker, "txn-a", 60_000), (0, pid, 1));
    // Another transactional id has a producer id of its own.
    let (_, other, other_epoch) = init_v1(&broker, "txn-b", 60_000);
    assert_ne!(other, pid);
    assert_eq!(other_epoch, 0);

    // KIP-360: the current epoch bumps; the previous one is a retry whose
    // answer was lost and gets the current epoch again; older is fenced:
    // PRODUCER_FENCED from v4 on (KIP-588), INVALID_PRODUCER_EPOCH for v3
    // clients, which predate that code (as KafkaApis answers them).
    assert_eq!(init_flexible(&broker, 3, "txn-a", (pid, 1)), (0, pid, 2));
    assert_eq!(init_flexible(&broker, 3, "txn-a", (pid, 1)), (0, pid, 2));
    let (fenced, _, _) = init_flexible(&broker, 3, "txn-a", (pid, 0));
    assert_eq!(fenced, INVALID_PRODUCER_EPOCH);
    let (fenced, _, _) = init_flexible(&broker, 4, "txn-a", (pid, 0));
    assert_eq!(fenced, PRODUCER_FENCED);

    let (error, _, _) = init_v1(&broker, "txn-a", 0);
    assert_eq!(error, INVALID_TRANSACTION_TIMEOUT);
    let (error, _, _) = init_v1(&broker, "txn-a", 900_001);
    assert_eq!(error, INVALID_TRANSACTION_TIMEOUT);

    // Epochs handed out are durable: a crash never hands one out twice.
    broker.kill();
    broker.restart();
    assert_eq!(init_v1(&broker, "txn-a", 60_000), (0, pid, 3));
    assert_eq!(init_v1(&broker, "txn-b", 60_000), (0, other, 1));
}

/// A transaction as DescribeTransactions v0 shows it.
#[derive(Debug)]
struct Described {
    error: i16,
    state: String,
    timeout_ms: i32,
    start_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
    partitions: BTreeMap<String, BTreeSet<i32>>,
}

/// DescribeTransactions v0 (flexible), per transactional id.
fn describe_transactions(broker: &Broker, ids: &[&str]) -> BTreeMap<String, Described> {
    let mut body = Vec::new();
    wire::put_uvarint(&mut body, ids.len() as u32 + 1);
    for id in ids {
        wire::put_compact_string(&mut body, id);
    }
    wire::put_uvarint(&mut body, 0); // tags
    let response = wire::flexible_call(broker.addr(), 65, 0, 7, &body);
    let mut r = wire::Reader::new(&response);
    let mut out = BTreeMap::new();
    for _ in 1..r.uvarint() {
        let error = r.i16();
        let id = r.compact_nullable_string().expect("a transactional id");
        let state = r.compact_nullable_string().unwrap_or_default();
        let timeout_ms = r.i32();
        let start_ms = read_i64(&mut r);
        let producer_id = read_i64(&mut r);
        let producer_epoch = r.i16();
        let mut partitions = BTreeMap::new();
        for _ in 1..r.uvarint() {
            let topic = r.compact_nullable_string().expect("a topic name");
            let set: BTreeSet<i32> = (1..r.uvarint()).map(|_| r.i32()).collect();
            r.skip_tags();
            partitions.insert(topic, set);
        }
        r.skip_tags();
        out.insert(
            id,
            Described {
                error,
                state,
                timeout_ms,
                start_ms,
                producer_id,
                producer_epoch,
                partitions,
            },
        );
    }
    r.skip_tags();
    assert_eq!(r.remaining(), 0, "trailing bytes in DescribeTransactions");
    out
}

/// ListTransactions v0 (flexible): (unknown state filters, set of
/// (transactional id, producer id, state)).
fn list_transactions(
    broker: &Broker,
    states: &[&str],
    producer_ids: &[i64],
) -> (Vec<String>, BTreeSet<(String, i64, String)>) {
    let mut body = Vec::new();
    wire::put_uvarint(&mut body, states.len() as u32 + 1);
    for state in states {
        wire::put_compact_string(&mut body, state);
    }
    wire::put_uvarint(&mut body, producer_ids.len() as u32 + 1);
    for id in producer_ids {
        body.extend_from_slice(&id.to_be_bytes());
    }
    wire::put_uvarint(&mut body, 0); // tags
    let response = wire::flexible_call(broker.addr(), 66, 0, 8, &body);
    let mut r = wire::Reader::new(&response);
    assert_eq!(r.i16(), 0, "ListTransactions error code");
    let unknown: Vec<String> = (1..r.uvarint())
        .map(|_| r.compact_nullable_string().unwrap_or_default())
        .collect();
    let mut listed = BTreeSet::new();
    for _ in 1..r.uvarint() {
        let id = r.compact_nullable_string().expect("a transactional id");
        let producer_id = read_i64(&mut r);
        let state = r.compact_nullable_string().unwrap_or_default();
        r.skip_tags();
        listed.insert((id, producer_id, state));
    }
    r.skip_tags();
    assert_eq!(r.remaining(), 0, "trailing bytes in ListTransactions");
    (unknown, listed)
}

/// What `kafka-transactions.sh describe` and `list` read: an ongoing
/// transaction with its partitions, a completed one, an unknown id, and
/// the filters of ListTransactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_list_transactions_show_ongoing_and_completed_transactions() {
    let broker = Broker::start();
    let topic = "txn-described";
    kafka::create_topic(&broker, topic, 2).await;
    let ongoing = kafka::transactional_producer(&broker, "ongoing", &[]);
    init(&ongoing);
    begin(&ongoing);
    kafka::send_values(&ongoing, topic, 2, &values("open", 0..4)).await;
    let done =
        kafka::transactional_producer(&broker, "done", &[("transaction.timeout.ms", "45000")]);
    init(&done);
    begin(&done);
    kafka::send_values(&done, topic, 1, &values("done", 0..2)).await;
    commit(&done);

    let described = describe_transactions(&broker, &["ongoing", "done", "missing"]);
    assert_eq!(described.len(), 3, "one answer per id: {described:?}");
    let open = &described["ongoing"];
    assert_eq!(
        (open.error, open.state.as_str()),
        (0, "Ongoing"),
        "{open:?}"
    );
    // librdkafka's default transaction.timeout.ms.
    assert_eq!(open.timeout_ms, 60_000);
    assert!(
        open.start_ms > 0,
        "an ongoing transaction has a start time: {open:?}"
    );
    assert!(
        open.producer_id >= 0 && open.producer_epoch >= 0,
        "{open:?}"
    );
    assert_eq!(
        open.partitions,
        BTreeMap::from([(topic.to_string(), BTreeSet::from([0, 1]))])
    );
    let completed = &described["done"];
    assert_eq!(
        (
            completed.error,
            completed.state.as_str(),
            completed.timeout_ms
        ),
        (0, "CompleteCommit", 45_000),
        "{completed:?}"
    );
    assert!(completed.partitions.is_empty(), "{completed:?}");
    assert_ne!(completed.producer_id, open.producer_id);
    assert_eq!(described["missing"].error, TRANSACTIONAL_ID_NOT_FOUND);

    let everything = BTreeSet::from([
        (
            "done".to_string(),
            completed.producer_id,
            "CompleteCommit".to_string(),
        ),
        (
            "ongoing".to_string(),
            open.producer_id,
            "Ongoing".to_string(),
        ),
    ]);
    assert_eq!(list_transactions(&broker, &[], &[]), (vec![], everything));
    assert_eq!(
        list_transactions(&broker, &["Ongoing"], &[]),
        (
            vec![],
            BTreeSet::from([(
                "ongoing".to_string(),
                open.producer_id,
                "Ongoing".to_string()
            )])
        )
    );
    assert_eq!(
        list_transactions(&broker, &[], &[completed.producer_id]),
        (
            vec![],
            BTreeSet::from([(
                "done".to_string(),
                completed.producer_id,
                "CompleteCommit".to_string()
            )])
        )
    );
    // Kafka names unknown state filters and, as no state matches them,
    // lists nothing.
    assert_eq!(
        list_transactions(&broker, &["Bogus"], &[]),
        (vec!["Bogus".to_string()], BTreeSet::new())
    );
}

/// A v2 record batch of one record (no key, value `value`) from a
/// transactional producer at `sequence`.
fn transactional_batch(producer_id: i64, epoch: i16, sequence: i32, value: &[u8]) -> Vec<u8> {
    // attributes, timestamp delta 0, offset delta 0, key null (-1), value,
    // no headers; lengths as zigzag varints (all small).
    let mut record = vec![0u8, 0, 0, 1];
    record.push((value.len() as u8) << 1);
    record.extend_from_slice(value);
    record.push(0);
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let length = 49 + 1 + record.len();
    batch.extend_from_slice(&(length as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&[0; 4]); // crc
    batch.extend_from_slice(&0x10i16.to_be_bytes()); // transactional
    batch.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    batch.extend_from_slice(&1_000i64.to_be_bytes());
    batch.extend_from_slice(&1_000i64.to_be_bytes());
    batch.extend_from_slice(&producer_id.to_be_bytes());
    batch.extend_from_slice(&epoch.to_be_bytes());
    batch.extend_from_slice(&sequence.to_be_bytes());
    batch.extend_from_slice(&1i32.to_be_bytes()); // records
    batch.push((record.len() as u8) << 1);
    batch.extend_from_slice(&record);
    wire::set_batch_crc(&mut batch);
    batch
}

fn put_string(body: &mut Vec<u8>, s: &str) {
    wire::put_i16(body, s.len() as i16);
    body.extend_from_slice(s.as_bytes());
}

/// Produce v3 of one batch to partition 0: the partition's error code.
fn produce_v3(broker: &Broker, transactional_id: &str, topic: &str, batch: &[u8]) -> i16 {
    wire::produce_v3(broker.addr(), Some(transactional_id), topic, batch, 7).0
}

/// AddPartitionsToTxn v1 for partition 0: its error code.
fn add_partition_v1(
    broker: &Broker,
    transactional_id: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
) -> i16 {
    let mut body = Vec::new();
    put_string(&mut body, transactional_id);
    body.extend_from_slice(&pid.to_be_bytes());
    wire::put_i16(&mut body, epoch);
    wire::put_i32(&mut body, 1);
    put_string(&mut body, topic);
    wire::put_i32(&mut body, 1);
    wire::put_i32(&mut body, 0);
    let frame = wire::request_frame(24, 1, 8, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 8);
    let mut r = wire::Reader::new(&response[4..]);
    r.i32(); // throttle
    assert_eq!(r.i32(), 1, "one topic");
    r.string();
    assert_eq!(r.i32(), 1, "one partition");
    assert_eq!(r.i32(), 0, "partition 0");
    r.i16()
}

/// Partition verification (KIP-890): a transactional batch for a
/// partition its transaction has not added is INVALID_TXN_STATE and is not
/// written, so no transaction can be left open where the coordinator
/// would never end it; after AddPartitionsToTxn the same batch goes in,
/// and a client may not write a control batch itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_batch_for_a_partition_outside_the_transaction_is_refused() {
    const INVALID_TXN_STATE: i16 = 48;
    const INVALID_RECORD: i16 = 87;
    let broker = Broker::start();
    let topic = "txn-verified";
    kafka::create_topic(&broker, topic, 1).await;
    let (error, pid, epoch) = init_v1(&broker, "verified", 60_000);
    assert_eq!(error, 0);
    let batch = transactional_batch(pid, epoch, 0, b"sneaky");
    assert_eq!(
        produce_v3(&broker, "verified", topic, &batch),
        INVALID_TXN_STATE
    );
    assert_eq!(
        stable_and_high(&broker, topic, 1),
        vec![(0, 0)],
        "nothing was written"
    );
    assert_eq!(add_partition_v1(&broker, "verified", pid, epoch, topic), 0);
    assert_eq!(produce_v3(&broker, "verified", topic, &batch), 0);
    assert_eq!(
        stable_and_high(&broker, topic, 1),
        vec![(0, 1)],
        "the open transaction holds the last stable offset"
    );
    let mut control = transactional_batch(pid, epoch, 1, b"fake");
    control[21..23].copy_from_slice(&0x30i16.to_be_bytes());
    let crc = wire::crc32c(&control[21..]);
    control[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        produce_v3(&broker, "verified", topic, &control),
        INVALID_RECORD
    );
}

/// WriteTxnMarkers v1 (flexible) of one marker for partition 0 of
/// `topic`: the partition's error code.
fn write_marker_v1(
    broker: &Broker,
    topic: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    coordinator_epoch: i32,
) -> i16 {
    let mut body = Vec::new();
    wire::put_uvarint(&mut body, 2); // one marker
    body.extend_from_slice(&pid.to_be_bytes());
    wire::put_i16(&mut body, epoch);
    body.push(u8::from(commit));
    wire::put_uvarint(&mut body, 2); // one topic
    wire::put_compact_string(&mut body, topic);
    wire::put_uvarint(&mut body, 2); // one partition
    wire::put_i32(&mut body, 0);
    wire::put_uvarint(&mut body, 0); // topic tags
    wire::put_i32(&mut body, coordinator_epoch);
    wire::put_uvarint(&mut body, 0); // marker tags
    wire::put_uvarint(&mut body, 0); // request tags
    let frame = wire::request_frame(27, 1, 9, true, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 9);
    // No throttle time in this response: header tags, then the markers.
    let mut r = wire::Reader::new(&response[4..]);
    r.skip_tags();
    assert_eq!(r.uvarint(), 2, "one marker");
    assert_eq!(read_i64(&mut r), pid);
    assert_eq!(r.uvarint(), 2, "one topic");
    assert_eq!(r.compact_nullable_string().as_deref(), Some(topic));
    assert_eq!(r.uvarint(), 2, "one partition");
    assert_eq!(r.i32(), 0, "partition 0");
    r.i16()
}

/// A partition refuses a marker from a coordinator older than the one
/// that wrote the producer's last marker there (Kafka's
/// `checkCoordinatorEpoch`: a zombie coordinator after a failover), also
/// after a restart rebuilt the producer's state from the log; the same
/// or a newer coordinator epoch is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_from_an_older_coordinator_epoch_is_fenced() {
    const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    let mut broker = Broker::start();
    let topic = "txn-coordinator-epoch";
    kafka::create_topic(&broker, topic, 1).await;
    let (error, pid, epoch) = init_v1(&broker, "zombie-coordinator", 60_000);
    assert_eq!(error, 0);
    assert_eq!(
        add_partition_v1(&broker, "zombie-coordinator", pid, epoch, topic),
        0
    );
    let batch = transactional_batch(pid, epoch, 0, b"v");
    assert_eq!(produce_v3(&broker, "zombie-coordinator", topic, &batch), 0);
    assert_eq!(write_marker_v1(&broker, topic, (pid, epoch), true, 5), 0);
    assert_eq!(stable_and_high(&broker, topic, 1), vec![(2, 2)]);
    assert_eq!(
        write_marker_v1(&broker, topic, (pid, epoch), false, 4),
        TRANSACTION_COORDINATOR_FENCED
    );
    assert_eq!(
        stable_and_high(&broker, topic, 1),
        vec![(2, 2)],
        "the fenced marker is not written"
    );
    broker.restart();
    assert_eq!(
        write_marker_v1(&broker, topic, (pid, epoch), false, 4),
        TRANSACTION_COORDINATOR_FENCED,
        "the coordinator epoch is rebuilt from the log"
    );
    assert_eq!(write_marker_v1(&broker, topic, (pid, epoch), true, 5), 0);
    assert_eq!(write_marker_v1(&broker, topic, (pid, epoch), true, 6), 0);
    assert_eq!(stable_and_high(&broker, topic, 1), vec![(4, 4)]);
}
