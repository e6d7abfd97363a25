//! rdkafka helpers: client configs, topic creation, and a consumer loop
//! that reads partitions from the beginning with `assign` (consumer groups
//! are not used: no subscribe, no commits); for transactions, a
//! transactional producer, consumers of either isolation level and the
//! end offsets each of them sees.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use crate::Broker;

/// Timeout for one client call (metadata, admin operation, list offsets).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A client config pointing at `broker`, with IPv4 only (the broker listens
/// on 127.0.0.1) and timeouts suited to a test.
pub fn config(broker: &Broker) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("client.id", "gregor-tests");
    config
}

pub fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    config(broker).create().expect("create an AdminClient")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .operation_timeout(Some(CALL_TIMEOUT))
}

/// A producer with `acks=all` unless `extra` says otherwise.
pub fn producer(broker: &Broker, extra: &[(&str, &str)]) -> FutureProducer {
    let mut config = config(broker);
    config.set("acks", "all").set("message.timeout.ms", "60000");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("create a FutureProducer")
}

/// A consumer for `assign`: a group.id is required by librdkafka for
/// `assign`, but nothing is ever committed and no group is joined.
pub fn consumer_config(broker: &Broker) -> ClientConfig {
    let mut config = config(broker);
    config
        .set("group.id", "gregor-tests")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest");
    config
}

pub fn stream_consumer(broker: &Broker) -> StreamConsumer {
    consumer_config(broker)
        .create()
        .expect("create a StreamConsumer")
}

/// A consumer's `isolation.level`. librdkafka's default is read_committed,
/// so every consumer these helpers build without saying otherwise reads
/// committed data only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the last stable offset, without records of aborted
    /// transactions.
    ReadCommitted,
    /// Up to the high watermark, everything in the log.
    ReadUncommitted,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// A consumer for `assign` (as [`consumer_config`]) with an explicit
/// isolation level. Its end-of-partition events come at the last stable
/// offset when reading committed, at the high watermark otherwise.
pub fn isolated_consumer(broker: &Broker, isolation: Isolation) -> StreamConsumer {
    consumer_config(broker)
        .set("isolation.level", isolation.as_str())
        .create()
        .expect("create a StreamConsumer")
}

/// A transactional producer: `transactional.id` set (which implies
/// idempotence and acks=all), plus `extra`. `message.timeout.ms` is left to
/// librdkafka, which makes it `transaction.timeout.ms` (it refuses a larger
/// one). `init_transactions` is the caller's.
pub fn transactional_producer(
    broker: &Broker,
    transactional_id: &str,
    extra: &[(&str, &str)],
) -> FutureProducer {
    let mut config = config(broker);
    config
        .set("transactional.id", transactional_id)
        .set("linger.ms", "5");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config
        .create()
        .expect("create a transactional FutureProducer")
}

/// Sends `values` to `topic`, the i-th to partition `i % partitions`, and
/// waits for every delivery report (panicking on a failed delivery or after
/// [`CALL_TIMEOUT`]). Inside a transaction the records are then written but
/// not yet committed.
pub async fn send_values(
    producer: &FutureProducer,
    topic: &str,
    partitions: i32,
    values: &[String],
) {
    let mut pending = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        let record = FutureRecord::<str, str>::to(topic)
            .payload(value)
            .partition(i as i32 % partitions);
        let delivery = producer
            .send_result(record)
            .unwrap_or_else(|(e, _)| panic!("enqueue {value:?} for {topic}: {e}"));
        pending.push((value, delivery));
    }
    let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
    for (value, delivery) in pending {
        match tokio::time::timeout_at(deadline, delivery).await {
            Err(_) => panic!("no delivery report for {value:?} to {topic} within {CALL_TIMEOUT:?}"),
            Ok(Err(_)) => panic!("the producer dropped the delivery of {value:?} to {topic}"),
            Ok(Ok(Err((e, _)))) => panic!("delivering {value:?} to {topic}: {e}"),
            Ok(Ok(Ok(_))) => {}
        }
    }
}

/// The latest offset of each partition `0..partitions` by ListOffsets as a
/// client at `isolation` sees it: the last stable offset when reading
/// committed, the high watermark otherwise.
pub fn end_offsets(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    isolation: Isolation,
) -> Vec<i64> {
    let consumer: BaseConsumer = config(broker)
        .set("isolation.level", isolation.as_str())
        .create()
        .expect("create a BaseConsumer");
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, CALL_TIMEOUT)
                .unwrap_or_else(|e| {
                    panic!("ListOffsets of {topic}/{p} ({}): {e}", isolation.as_str())
                })
                .1
        })
        .collect()
}

/// Reads partitions `0..partitions` of `topic` from the beginning with a
/// fresh consumer at `isolation`, until at least `at_least` records have
/// arrived and every partition then reported its end (see
/// [`consume_all`]). Returns the values per partition in offset order;
/// every partition has an entry, empty if nothing was visible.
///
/// With `at_least` 0 this is exactly what the isolation level shows: a
/// read_committed consumer stops at the last stable offset, so records of
/// an open transaction and everything after them are not returned.
pub async fn read_values(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    isolation: Isolation,
    at_least: usize,
    timeout: Duration,
) -> BTreeMap<i32, Vec<String>> {
    let consumer = isolated_consumer(broker, isolation);
    let messages = consume_assigned(&consumer, topic, partitions, at_least, timeout).await;
    let mut values: BTreeMap<i32, Vec<String>> = (0..partitions).map(|p| (p, Vec::new())).collect();
    for (partition, messages) in messages {
        let mut offset = -1;
        for message in messages {
            assert!(
                message.offset() > offset,
                "{topic}/{partition}: offset {} after {offset}",
                message.offset()
            );
            offset = message.offset();
            let value = String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
            values.entry(partition).or_default().push(value);
        }
    }
    values
}

/// Polls `consumer` (every `poll`) until `n` records have arrived, failing
/// after `within`: their values as text, or the first error it reports.
pub fn poll_values(
    consumer: &BaseConsumer,
    n: usize,
    poll: Duration,
    within: Duration,
    what: &str,
) -> Result<Vec<String>, KafkaError> {
    let deadline = Instant::now() + within;
    let mut values = Vec::new();
    while values.len() < n {
        assert!(
            Instant::now() < deadline,
            "{what}: {} of {n} records within {within:?}",
            values.len()
        );
        match consumer.poll(poll) {
            Some(Ok(message)) => values
                .push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned()),
            Some(Err(error)) => return Err(error),
            None => {}
        }
    }
    Ok(values)
}

/// A consumer without group.id, for metadata, watermarks and
/// offsets_for_times only.
pub fn plain_consumer(broker: &Broker) -> BaseConsumer {
    config(broker).create().expect("create a BaseConsumer")
}

/// Creates a topic through the AdminClient and waits until its metadata
/// shows every partition with a leader.
pub async fn create_topic(broker: &Broker, topic: &str, partitions: i32) {
    let admin = admin(broker);
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &admin_options(),
        )
        .await
        .expect("CreateTopics request");
    assert_eq!(results.len(), 1, "one result per topic: {results:?}");
    assert_eq!(
        results[0],
        Ok(topic.to_string()),
        "CreateTopics {topic} failed"
    );
    wait_for_topic(broker, topic, partitions);
}

/// Creates a topic with configs and waits for its metadata.
pub async fn create_topic_with(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let results = admin(broker)
        .create_topics(&[new], &admin_options())
        .await
        .expect("CreateTopics request");
    assert_eq!(results[0], Ok(topic.to_string()), "CreateTopics {topic}");
    wait_for_topic(broker, topic, partitions);
}

/// Polls metadata until `topic` exists without error and has `partitions`
/// partitions, each with a leader. Returns that metadata.
pub fn wait_for_topic(broker: &Broker, topic: &str, partitions: i32) -> Metadata {
    let consumer = plain_consumer(broker);
    let deadline = Instant::now() + CALL_TIMEOUT;
    loop {
        let last = match consumer.fetch_metadata(None, CALL_TIMEOUT) {
            Ok(metadata) => {
                let found = metadata.topics().iter().find(|t| t.name() == topic);
                match found {
                    Some(t)
                        if t.error().is_none()
                            && t.partitions().len() == partitions as usize
                            && t.partitions().iter().all(|p| p.leader() >= 0) =>
                    {
                        return metadata;
                    }
                    Some(t) => format!(
                        "topic error {:?}, partitions {:?}",
                        t.error(),
                        t.partitions()
                            .iter()
                            .map(|p| (p.id(), p.leader(), p.error()))
                            .collect::<Vec<_>>()
                    ),
                    None => "topic not in metadata".to_string(),
                }
            }
            Err(e) => format!("metadata request failed: {e}"),
        };
        if Instant::now() >= deadline {
            panic!("topic {topic} with {partitions} partitions never showed up: {last}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Names of all topics in the cluster, from a fresh metadata request.
pub fn topic_names(broker: &Broker) -> BTreeSet<String> {
    plain_consumer(broker)
        .fetch_metadata(None, CALL_TIMEOUT)
        .expect("fetch metadata for all topics")
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

/// Reads partitions `0..partitions` of `topic` from the beginning with
/// `assign` until at least `expected` messages have arrived and every
/// partition then reported end-of-partition (so extra messages already in
/// the log would be seen too). Panics after `timeout`.
///
/// Returns the messages per partition, in the order received.
pub async fn consume_all(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    expected: usize,
    timeout: Duration,
) -> BTreeMap<i32, Vec<OwnedMessage>> {
    let consumer = stream_consumer(broker);
    consume_assigned(&consumer, topic, partitions, expected, timeout).await
}

/// [`consume_all`] with a consumer of the caller's.
pub async fn consume_assigned(
    consumer: &StreamConsumer,
    topic: &str,
    partitions: i32,
    expected: usize,
    timeout: Duration,
) -> BTreeMap<i32, Vec<OwnedMessage>> {
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("add partition to the assignment");
    }
    consumer.assign(&assignment).expect("assign partitions");

    let mut received: BTreeMap<i32, Vec<OwnedMessage>> = BTreeMap::new();
    let mut at_end: BTreeSet<i32> = BTreeSet::new();
    let mut count = 0usize;
    let deadline = tokio::time::Instant::now() + timeout;
    while count < expected || at_end.len() < partitions as usize {
        let next = tokio::time::timeout_at(deadline, consumer.recv()).await;
        match next {
            Err(_) => panic!(
                "consuming {topic}: timed out after {timeout:?} with {count} of {expected} \
                 messages (per partition {:?}, at end {at_end:?})",
                received
                    .iter()
                    .map(|(p, m)| (*p, m.len()))
                    .collect::<Vec<_>>()
            ),
            Ok(Ok(message)) => {
                assert_eq!(message.topic(), topic, "message from an unassigned topic");
                at_end.remove(&message.partition());
                received
                    .entry(message.partition())
                    .or_default()
                    .push(message.detach());
                count += 1;
            }
            Ok(Err(KafkaError::PartitionEOF(partition))) => {
                at_end.insert(partition);
            }
            Ok(Err(e)) => panic!("consuming {topic}: {e}"),
        }
    }
    received
}

/// Closes a group member within `limit`: rust-rdkafka's drop of a
/// `BaseConsumer` polls until librdkafka says the consumer is closed,
/// with no deadline, so a close that never completes (a LeaveGroup or
/// revoke that never ends) would hang the test instead of failing it.
/// Dropped on a thread of its own; a close that outlives `limit` fails
/// the test and names what did not close.
pub fn close_within<T: Send + 'static>(client: T, limit: Duration, what: &str) {
    let (done, closed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(client);
        let _ = done.send(());
    });
    let started = std::time::Instant::now();
    match closed.recv_timeout(limit) {
        Ok(()) => eprintln!("{what} closed in {:?}", started.elapsed()),
        Err(_) => panic!("{what} did not close within {limit:?}"),
    }
}
