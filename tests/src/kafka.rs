//! rdkafka helpers: client configs, topic creation, and a consumer loop
//! that reads partitions from the beginning with `assign` (consumer groups
//! are not used: no subscribe, no commits).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::metadata::Metadata;
use rdkafka::producer::FutureProducer;
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
