//! Produce and consume with librdkafka (the `rdkafka` crate): what every
//! Kafka application does, checked message by message.
//!
//! Consumers use `assign` from the beginning of each partition; consumer
//! groups are not used (no subscribe, no commits).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::{wait_for, Broker};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::future_producer::Delivery;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

/// Time allowed to consume a test's messages.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(180);

/// One message as the test sent it.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Message `seq`: a key that names it, a value of varying length (null for
/// every 500th: a tombstone), headers including an empty value, a null
/// value and a repeated key, and a CreateTime timestamp that is not
/// monotonic in the send order (an hour or so in the past).
fn message(seq: usize, base_ts: i64) -> Sent {
    let value = if seq % 500 == 499 {
        None
    } else {
        let mut value = format!("value-{seq}-").into_bytes();
        value.extend(b"abcdefghij".repeat(seq % 50));
        Some(value)
    };
    let mut headers = vec![
        ("seq".to_string(), Some(seq.to_string().into_bytes())),
        (
            "bin".to_string(),
            Some(vec![seq as u8, (seq >> 8) as u8, 0, 0xff]),
        ),
    ];
    if seq.is_multiple_of(3) {
        headers.push(("empty".to_string(), Some(Vec::new())));
    }
    if seq.is_multiple_of(7) {
        headers.push(("null".to_string(), None));
    }
    if seq.is_multiple_of(11) {
        headers.push(("seq".to_string(), Some(b"again".to_vec())));
    }
    Sent {
        key: format!("key-{seq:05}"),
        value,
        headers,
        timestamp: base_ts - ((seq * 7919) % 10_000) as i64 * 10,
    }
}

fn messages(seqs: Range<usize>, base_ts: i64) -> Vec<Sent> {
    seqs.map(|seq| message(seq, base_ts)).collect()
}

/// Enqueues every message, then waits for every delivery report. Returns
/// the deliveries in send order; panics on any failed delivery.
async fn produce(
    producer: &FutureProducer,
    topic: &str,
    partition: Option<i32>,
    sent: &[Sent],
) -> Vec<Delivery> {
    let mut pending = Vec::with_capacity(sent.len());
    for m in sent {
        let mut headers = OwnedHeaders::new_with_capacity(m.headers.len());
        for (key, value) in &m.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        let mut record = FutureRecord::<str, [u8]>::to(topic)
            .key(&m.key)
            .headers(headers)
            .timestamp(m.timestamp);
        if let Some(value) = &m.value {
            record = record.payload(value);
        }
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("enqueue {}: {e}", m.key));
        pending.push((m.key.clone(), delivery));
    }
    let mut deliveries = Vec::with_capacity(pending.len());
    for (key, delivery) in pending {
        match delivery.await.expect("producer dropped a delivery report") {
            Ok(delivery) => deliveries.push(delivery),
            Err((e, _)) => panic!("delivery of {key} failed: {e}"),
        }
    }
    deliveries
}

fn seq_of(message: &OwnedMessage) -> usize {
    let key = message.key().expect("message without a key");
    let key = std::str::from_utf8(key).expect("key is UTF-8");
    key.strip_prefix("key-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected key {key:?}"))
}

fn headers_of(message: &OwnedMessage) -> Vec<(String, Option<Vec<u8>>)> {
    match message.headers() {
        None => Vec::new(),
        Some(headers) => headers
            .iter()
            .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
            .collect(),
    }
}

/// Checks that `received` holds exactly the messages `sent[i]` (message
/// `first_seq + i`), each once, in send order within its partition, at
/// contiguous offsets from 0, with the same key, value, headers and
/// timestamp, and in the partition (and at the offset, where known) that
/// its delivery report gave.
fn verify(
    received: &BTreeMap<i32, Vec<OwnedMessage>>,
    first_seq: usize,
    sent: &[Sent],
    placed: &[(i32, Option<i64>)],
) {
    assert_eq!(sent.len(), placed.len());
    let mut seen = vec![false; sent.len()];
    let mut total = 0;
    for (&partition, messages) in received {
        let mut previous: Option<usize> = None;
        for (index, m) in messages.iter().enumerate() {
            total += 1;
            assert_eq!(
                m.offset(),
                index as i64,
                "partition {partition}: offsets must be contiguous from 0"
            );
            let seq = seq_of(m);
            assert!(
                (first_seq..first_seq + sent.len()).contains(&seq),
                "partition {partition} offset {}: unexpected message {seq}",
                m.offset()
            );
            let i = seq - first_seq;
            assert!(
                !seen[i],
                "message {seq} received twice (again at partition {partition} offset {})",
                m.offset()
            );
            seen[i] = true;
            if let Some(previous) = previous {
                assert!(
                    seq > previous,
                    "partition {partition}: message {seq} at offset {} after message {previous}",
                    m.offset()
                );
            }
            previous = Some(seq);

            let expected = &sent[i];
            let (expected_partition, expected_offset) = placed[i];
            assert_eq!(
                partition, expected_partition,
                "message {seq}: partition differs from its delivery report"
            );
            if let Some(offset) = expected_offset {
                assert_eq!(
                    m.offset(),
                    offset,
                    "message {seq}: offset differs from its delivery report"
                );
            }
            assert_eq!(
                m.payload(),
                expected.value.as_deref(),
                "message {seq}: value"
            );
            assert_eq!(headers_of(m), expected.headers, "message {seq}: headers");
            assert_eq!(
                m.timestamp(),
                Timestamp::CreateTime(expected.timestamp),
                "message {seq}: timestamp"
            );
        }
    }
    let missing: Vec<usize> = seen
        .iter()
        .enumerate()
        .filter(|(_, seen)| !**seen)
        .map(|(i, _)| first_seq + i)
        .take(20)
        .collect();
    assert!(
        missing.is_empty(),
        "messages never received: {missing:?}..."
    );
    assert_eq!(total, sent.len(), "number of messages received");
}

fn placements(deliveries: &[Delivery]) -> Vec<(i32, Option<i64>)> {
    deliveries
        .iter()
        .map(|d| (d.partition, Some(d.offset)))
        .collect()
}

/// Low and high watermarks of each partition, from ListOffsets.
fn watermarks(broker: &Broker, topic: &str, partitions: i32) -> Vec<(i64, i64)> {
    let consumer = kafka::plain_consumer(broker);
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, CALL_TIMEOUT)
                .unwrap_or_else(|e| panic!("watermarks of {topic}/{p}: {e}"))
        })
        .collect()
}

fn per_partition_counts(deliveries: &[Delivery], partitions: i32) -> Vec<(i64, i64)> {
    (0..partitions)
        .map(|p| {
            let n = deliveries.iter().filter(|d| d.partition == p).count();
            (0, n as i64)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_keyed_messages_round_trip_exactly() {
    const N: usize = 10_000;
    let broker = Broker::start();
    let topic = "orders";
    kafka::create_topic(&broker, topic, 3).await;

    // The metadata names this broker as the leader of every partition.
    let metadata = kafka::wait_for_topic(&broker, topic, 3);
    assert_eq!(metadata.brokers().len(), 1, "one broker in the cluster");
    let me = &metadata.brokers()[0];
    assert_eq!(me.host(), "127.0.0.1");
    assert_eq!(me.port(), i32::from(broker.port()));
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .unwrap();
    let mut ids: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1, 2]);
    for p in t.partitions() {
        assert_eq!(p.leader(), me.id(), "leader of partition {}", p.id());
        assert_eq!(p.replicas(), &[me.id()], "replicas of partition {}", p.id());
        assert_eq!(p.isr(), &[me.id()], "ISR of partition {}", p.id());
    }

    let sent = messages(0..N, now_ms() - 3_600_000);
    let producer = kafka::producer(&broker, &[]);
    let deliveries = produce(&producer, topic, None, &sent).await;
    for p in 0..3 {
        assert!(
            deliveries.iter().any(|d| d.partition == p),
            "no message went to partition {p}: the keys should spread over all three"
        );
    }

    let received = kafka::consume_all(&broker, topic, 3, N, CONSUME_TIMEOUT).await;
    verify(&received, 0, &sent, &placements(&deliveries));
    assert_eq!(
        watermarks(&broker, topic, 3),
        per_partition_counts(&deliveries, 3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_unknown_topic_auto_creates_it() {
    let broker = Broker::start_with(&[
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "2"),
    ]);
    let topic = "created-on-first-use";
    assert!(!kafka::topic_names(&broker).contains(topic));

    // The first metadata answer is LEADER_NOT_AVAILABLE; librdkafka retries
    // until the topic is there, and the messages are then delivered.
    let sent = messages(0..50, now_ms() - 60_000);
    let producer = kafka::producer(&broker, &[]);
    let deliveries = produce(&producer, topic, None, &sent).await;

    kafka::wait_for_topic(&broker, topic, 2);
    let received = kafka::consume_all(&broker, topic, 2, sent.len(), CONSUME_TIMEOUT).await;
    verify(&received, 0, &sent, &placements(&deliveries));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_unknown_topic_fails_when_auto_create_is_disabled() {
    let broker = Broker::start_with(&[("auto.create.topics.enable", "false")]);
    let topic = "never-created";
    let producer = kafka::producer(
        &broker,
        &[
            ("topic.metadata.propagation.max.ms", "2000"),
            ("message.timeout.ms", "30000"),
        ],
    );
    let record = FutureRecord::<str, str>::to(topic).key("k").payload("v");
    let result = producer
        .send(record, Duration::from_secs(5))
        .await
        .map_err(|(e, _)| e);
    match result {
        Ok(delivery) => panic!("produce to an unknown topic succeeded: {delivery:?}"),
        Err(KafkaError::MessageProduction(
            RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic,
        )) => {}
        Err(e) => panic!("expected an unknown-topic error, got {e}"),
    }
    assert!(
        !kafka::topic_names(&broker).contains(topic),
        "topic was created although auto.create.topics.enable=false"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_messages_are_readable() {
    const N: usize = 500;
    let broker = Broker::start();
    let topic = "fire-and-forget";
    kafka::create_topic(&broker, topic, 1).await;

    let sent = messages(0..N, now_ms() - 60_000);
    let producer = kafka::producer(&broker, &[("acks", "0")]);
    // With acks=0 a delivery report only says the request was sent.
    produce(&producer, topic, Some(0), &sent).await;

    // No retries with acks=0 and one connection: the log holds the messages
    // in send order, message i at offset i.
    let placed: Vec<(i32, Option<i64>)> = (0..N).map(|i| (0, Some(i as i64))).collect();
    let received = kafka::consume_all(&broker, topic, 1, N, CONSUME_TIMEOUT).await;
    verify(&received, 0, &sent, &placed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_in_the_middle_loses_and_duplicates_nothing() {
    const HALF: usize = 1_000;
    let mut broker = Broker::start();
    let topic = "survives-restart";
    kafka::create_topic(&broker, topic, 2).await;
    let base_ts = now_ms() - 600_000;
    let producer = kafka::producer(&broker, &[]);

    let first = messages(0..HALF, base_ts);
    let mut deliveries = produce(&producer, topic, None, &first).await;
    let before = watermarks(&broker, topic, 2);
    assert_eq!(before, per_partition_counts(&deliveries, 2));

    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    assert_eq!(
        watermarks(&broker, topic, 2),
        before,
        "watermarks after a clean restart"
    );

    // The same producer reconnects and goes on.
    let second = messages(HALF..2 * HALF, base_ts);
    deliveries.extend(produce(&producer, topic, None, &second).await);

    let all: Vec<Sent> = first.into_iter().chain(second).collect();
    let received = kafka::consume_all(&broker, topic, 2, all.len(), CONSUME_TIMEOUT).await;
    verify(&received, 0, &all, &placements(&deliveries));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_messages_survive_sigkill() {
    const N: usize = 1_000;
    let mut broker = Broker::start();
    let topic = "survives-kill";
    kafka::create_topic(&broker, topic, 2).await;
    let base_ts = now_ms() - 600_000;

    let first = messages(0..N, base_ts);
    let mut deliveries = {
        let producer = kafka::producer(&broker, &[]);
        produce(&producer, topic, None, &first).await
    };

    broker.kill();
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    assert_eq!(
        watermarks(&broker, topic, 2),
        per_partition_counts(&deliveries, 2),
        "watermarks after recovery from SIGKILL"
    );
    let received = kafka::consume_all(&broker, topic, 2, N, CONSUME_TIMEOUT).await;
    verify(&received, 0, &first, &placements(&deliveries));

    // Appends after recovery continue the offsets: nothing is overwritten.
    let second = messages(N..N + 500, base_ts);
    let producer = kafka::producer(&broker, &[]);
    deliveries.extend(produce(&producer, topic, None, &second).await);
    let all: Vec<Sent> = first.into_iter().chain(second).collect();
    let received = kafka::consume_all(&broker, topic, 2, all.len(), CONSUME_TIMEOUT).await;
    verify(&received, 0, &all, &placements(&deliveries));
}

/// The offset ListOffsets gives for `query` (a timestamp, or
/// Beginning/End for earliest/latest) on one partition.
fn offset_for(broker: &Broker, topic: &str, partition: i32, query: Offset) -> Offset {
    let consumer = kafka::plain_consumer(broker);
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, partition, query)
        .expect("build the offsets_for_times list");
    let result = consumer
        .offsets_for_times(list, CALL_TIMEOUT)
        .unwrap_or_else(|e| panic!("offsets_for_times {topic}/{partition} {query:?}: {e}"));
    let element = result
        .find_partition(topic, partition)
        .expect("the partition in the offsets_for_times result");
    if let Err(e) = element.error() {
        panic!("offsets_for_times {topic}/{partition} {query:?}: {e}");
    }
    element.offset()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_and_by_timestamp() {
    const N: usize = 100;
    let broker = Broker::start();
    let topic = "timeline";
    kafka::create_topic(&broker, topic, 2).await;

    // Message i at base + i seconds, all in partition 0; partition 1 stays empty.
    let base = now_ms() - 3_600_000;
    let mut sent = messages(0..N, base);
    for (i, m) in sent.iter_mut().enumerate() {
        m.timestamp = base + i as i64 * 1_000;
    }
    let producer = kafka::producer(&broker, &[]);
    let deliveries = produce(&producer, topic, Some(0), &sent).await;
    for (i, d) in deliveries.iter().enumerate() {
        assert_eq!((d.partition, d.offset), (0, i as i64), "delivery {i}");
    }

    assert_eq!(watermarks(&broker, topic, 2), vec![(0, N as i64), (0, 0)]);

    let at = |query: Offset| offset_for(&broker, topic, 0, query);
    assert_eq!(at(Offset::Beginning), Offset::Offset(0), "earliest");
    assert_eq!(at(Offset::End), Offset::Offset(N as i64), "latest");
    // The first offset whose timestamp is >= the one asked for.
    assert_eq!(at(Offset::Offset(base - 60_000)), Offset::Offset(0));
    assert_eq!(at(Offset::Offset(base)), Offset::Offset(0));
    assert_eq!(at(Offset::Offset(base + 1)), Offset::Offset(1));
    assert_eq!(at(Offset::Offset(base + 42_000)), Offset::Offset(42));
    assert_eq!(at(Offset::Offset(base + 42_001)), Offset::Offset(43));
    assert_eq!(at(Offset::Offset(base + 99_000)), Offset::Offset(99));
    // Past the last timestamp: offset -1, which librdkafka calls End.
    assert_eq!(at(Offset::Offset(base + 99_001)), Offset::End);

    let empty = |query: Offset| offset_for(&broker, topic, 1, query);
    assert_eq!(empty(Offset::Beginning), Offset::Offset(0));
    assert_eq!(empty(Offset::End), Offset::Offset(0));
    assert_eq!(empty(Offset::Offset(base)), Offset::End);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_removes_the_topic() {
    let broker = Broker::start_with(&[("auto.create.topics.enable", "false")]);
    let topic = "doomed";
    kafka::create_topic(&broker, topic, 2).await;
    let producer = kafka::producer(&broker, &[]);
    produce(&producer, topic, None, &messages(0..20, now_ms())).await;
    drop(producer);

    let admin = kafka::admin(&broker);
    let options = kafka::admin_options();
    let results = admin
        .delete_topics(&[topic], &options)
        .await
        .expect("DeleteTopics request");
    assert_eq!(results, vec![Ok(topic.to_string())]);
    wait_for(
        "the deleted topic to leave the metadata",
        CALL_TIMEOUT,
        || (!kafka::topic_names(&broker).contains(topic)).then_some(()),
    );

    // Deleting it again: UNKNOWN_TOPIC_OR_PARTITION.
    let results = admin
        .delete_topics(&[topic], &options)
        .await
        .expect("DeleteTopics request");
    assert_eq!(
        results,
        vec![Err((
            topic.to_string(),
            RDKafkaErrorCode::UnknownTopicOrPartition
        ))]
    );

    // A topic created again under the same name starts empty.
    kafka::create_topic(&broker, topic, 1).await;
    assert_eq!(watermarks(&broker, topic, 1), vec![(0, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validate_only_and_errors() {
    let broker = Broker::start_with(&[("auto.create.topics.enable", "false")]);
    let admin = kafka::admin(&broker);
    let options = kafka::admin_options();
    let validate = kafka::admin_options().validate_only(true);
    let create = |name: &'static str, partitions: i32, replication: i32| {
        NewTopic::new(name, partitions, TopicReplication::Fixed(replication))
    };

    // validate_only: success, and nothing is created.
    let results = admin
        .create_topics(&[create("validated", 4, 1)], &validate)
        .await
        .expect("CreateTopics request");
    assert_eq!(results, vec![Ok("validated".to_string())]);

    // One broker cannot hold three replicas, validated or not.
    for opts in [&validate, &options] {
        let results = admin
            .create_topics(&[create("three-replicas", 1, 3)], opts)
            .await
            .expect("CreateTopics request");
        assert_eq!(
            results,
            vec![Err((
                "three-replicas".to_string(),
                RDKafkaErrorCode::InvalidReplicationFactor
            ))]
        );
    }

    let results = admin
        .create_topics(&[create("no-partitions", 0, 1)], &options)
        .await
        .expect("CreateTopics request");
    assert_eq!(
        results,
        vec![Err((
            "no-partitions".to_string(),
            RDKafkaErrorCode::InvalidPartitions
        ))]
    );

    let results = admin
        .create_topics(&[create("not a valid name!", 1, 1)], &options)
        .await
        .expect("CreateTopics request");
    assert_eq!(
        results,
        vec![Err((
            "not a valid name!".to_string(),
            RDKafkaErrorCode::InvalidTopic
        ))]
    );

    // Creating an existing topic again.
    kafka::create_topic(&broker, "exists", 1).await;
    let results = admin
        .create_topics(&[create("exists", 1, 1)], &options)
        .await
        .expect("CreateTopics request");
    assert_eq!(
        results,
        vec![Err((
            "exists".to_string(),
            RDKafkaErrorCode::TopicAlreadyExists
        ))]
    );

    let names = kafka::topic_names(&broker);
    let ours: BTreeSet<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !n.starts_with("__"))
        .collect();
    assert_eq!(
        ours,
        BTreeSet::from(["exists"]),
        "only the topic really created exists"
    );
}
