//! The idempotent producer (issue 7, part 1) with real clients and raw
//! frames: librdkafka with `enable.idempotence=true` across a broker crash
//! writes every record exactly once and in order; on the wire, a retried
//! batch is answered with its original offset and written once, a gap is
//! OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH,
//! and the partition's producer state comes back from the log after a
//! restart.

use std::time::Duration;

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::wire::{self, Conn};
use gregor_tests::Broker;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

async fn create_topic(broker: &Broker, topic: &str) {
    let results = kafka::admin(broker)
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &kafka::admin_options(),
        )
        .await
        .expect("CreateTopics request");
    assert_eq!(results[0], Ok(topic.to_string()), "CreateTopics {topic}");
    kafka::wait_for_topic(broker, topic, 1);
}

/// Every value of partition 0 from the start, in offset order.
async fn read_values(broker: &Broker, topic: &str) -> Vec<String> {
    let consumer = kafka::stream_consumer(broker);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Err(_) => panic!("reading {topic}: timed out after {} records", out.len()),
            Ok(Ok(m)) => out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into()),
            Ok(Err(KafkaError::PartitionEOF(_))) => return out,
            Ok(Err(e)) => panic!("reading {topic}: {e}"),
        }
    }
}

async fn send_range(
    producer: &FutureProducer,
    topic: &str,
    range: std::ops::Range<u32>,
    pace: bool,
) {
    let mut pending = Vec::new();
    for i in range {
        let value = i.to_string();
        let record = FutureRecord::<str, str>::to(topic)
            .payload(&value)
            .partition(0);
        pending.push(
            producer
                .send_result(record)
                .map_err(|(e, _)| e)
                .expect("enqueue"),
        );
        if pace && i % 20 == 0 {
            // Spread the sends so that some are in flight when the broker dies.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for delivery in pending {
        if let Err((e, _)) = delivery.await.expect("delivery report") {
            panic!("delivery failed: {e}");
        }
    }
}

/// librdkafka's idempotent producer keeps producing through a SIGKILL and
/// restart of the broker: the partition ends up with every record exactly
/// once, in order — no duplicates from retried in-flight requests and no
/// gaps.
#[tokio::test(flavor = "multi_thread")]
async fn idempotent_producer_across_a_broker_crash_has_no_duplicates_or_gaps() {
    let mut broker = Broker::start();
    let topic = "idempotent-restart";
    create_topic(&broker, topic).await;
    let producer = kafka::producer(
        &broker,
        &[
            ("enable.idempotence", "true"),
            ("linger.ms", "5"),
            ("batch.num.messages", "50"),
            ("max.in.flight.requests.per.connection", "5"),
            ("message.timeout.ms", "120000"),
        ],
    );
    send_range(&producer, topic, 0..1000, false).await;

    // Records in flight while the broker dies are retried after it is back;
    // those the broker had already written are answered as duplicates.
    let sender = {
        let producer = producer.clone();
        tokio::spawn(async move { send_range(&producer, topic, 1000..3000, true).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    broker.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    broker.restart();
    sender.await.expect("sender task");
    send_range(&producer, topic, 3000..3500, false).await;
    producer.flush(CALL_TIMEOUT).expect("flush");

    let values = read_values(&broker, topic).await;
    let expected: Vec<String> = (0..3500).map(|i: u32| i.to_string()).collect();
    assert_eq!(values.len(), expected.len(), "record count");
    assert!(values == expected, "records out of order or duplicated");
}

/// A v2 record batch with one record per value and the given producer
/// fields (uncompressed, CreateTime).
fn batch(producer_id: i64, epoch: i16, base_sequence: i32, values: &[&str]) -> Vec<u8> {
    let mut records = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let mut record = vec![0u8]; // attributes
        put_varint(&mut record, 0); // timestamp delta
        put_varint(&mut record, i as i64); // offset delta
        put_varint(&mut record, -1); // key: null
        put_varint(&mut record, value.len() as i64);
        record.extend_from_slice(value.as_bytes());
        put_varint(&mut record, 0); // headers
        put_varint(&mut records, record.len() as i64);
        records.extend_from_slice(&record);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut b = Vec::new();
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((49 + records.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc
    b.extend_from_slice(&0i16.to_be_bytes()); // attributes
    b.extend_from_slice(&(values.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&now.to_be_bytes());
    b.extend_from_slice(&now.to_be_bytes());
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&epoch.to_be_bytes());
    b.extend_from_slice(&base_sequence.to_be_bytes());
    b.extend_from_slice(&(values.len() as i32).to_be_bytes());
    b.extend_from_slice(&records);
    let crc = wire::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// InitProducerId v1 without a transactional id: (error, id, epoch).
fn init_producer_id(broker: &Broker) -> (i16, i64, i16) {
    let mut body = Vec::new();
    wire::put_i16(&mut body, -1); // transactional id: null
    wire::put_i32(&mut body, 60_000);
    let frame = wire::request_frame(22, 1, 3, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 3);
    let mut r = wire::Reader::new(&response[4..]);
    r.i32(); // throttle
    let error = r.i16();
    let id = (i64::from(r.i32()) << 32) | i64::from(r.i32() as u32);
    (error, id, r.i16())
}

/// Produce v3, acks=all, one partition: (error code, base offset).
fn produce(broker: &Broker, topic: &str, records: &[u8]) -> (i16, i64) {
    wire::produce_v3(broker.addr(), None, topic, records, 9)
}

/// A producer as DescribeProducers shows it: (id, epoch, last sequence).
type DescribedProducer = (i64, i32, i32);

/// DescribeProducers v0 for partitions of one topic: per partition, its
/// error code and (producer id, epoch, last sequence).
fn describe_producers(
    broker: &Broker,
    topic: &str,
    partitions: &[i32],
) -> Vec<(i32, i16, Vec<DescribedProducer>)> {
    let mut body = Vec::new();
    wire::put_uvarint(&mut body, 2); // one topic
    wire::put_compact_string(&mut body, topic);
    wire::put_uvarint(&mut body, partitions.len() as u32 + 1);
    for partition in partitions {
        wire::put_i32(&mut body, *partition);
    }
    wire::put_uvarint(&mut body, 0); // topic tags
    wire::put_uvarint(&mut body, 0); // request tags
    let response = wire::flexible_call(broker.addr(), 61, 0, 5, &body);
    let mut r = wire::Reader::new(&response);
    assert_eq!(r.uvarint(), 2, "one topic");
    assert_eq!(r.compact_nullable_string().as_deref(), Some(topic));
    let mut out = Vec::new();
    for _ in 1..r.uvarint() {
        let index = r.i32();
        let error = r.i16();
        r.compact_nullable_string();
        let mut producers = Vec::new();
        for _ in 1..r.uvarint() {
            let id = (i64::from(r.i32()) << 32) | i64::from(r.i32() as u32);
            let epoch = r.i32();
            let last_sequence = r.i32();
            r.i32(); // last timestamp, high
            r.i32(); // low
            assert_eq!(r.i32(), -1, "coordinator epoch");
            assert_eq!((r.i32(), r.i32()), (-1, -1), "no open transaction");
            r.skip_tags();
            producers.push((id, epoch, last_sequence));
        }
        r.skip_tags();
        out.push((index, error, producers));
    }
    out
}

/// Kafka's sequence rules on the wire, before and after a restart that
/// rebuilds the producer state from the log.
#[tokio::test(flavor = "multi_thread")]
async fn duplicates_gaps_and_old_epochs_are_answered_as_kafka_does() {
    let mut broker = Broker::start();
    let topic = "idempotent-wire";
    create_topic(&broker, topic).await;

    let (error, pid, epoch) = init_producer_id(&broker);
    assert_eq!((error, epoch), (0, 0), "InitProducerId");
    let (_, other_pid, _) = init_producer_id(&broker);
    assert_ne!(pid, other_pid, "producer ids are unique");

    assert_eq!(
        produce(&broker, topic, &batch(pid, 0, 0, &["a", "b"])),
        (0, 0)
    );
    assert_eq!(produce(&broker, topic, &batch(pid, 0, 2, &["c"])), (0, 2));
    // A retry of either batch is answered with its original offset.
    assert_eq!(
        produce(&broker, topic, &batch(pid, 0, 0, &["a", "b"])),
        (0, 0)
    );
    assert_eq!(produce(&broker, topic, &batch(pid, 0, 2, &["c"])), (0, 2));
    // A gap, and an older epoch after a bump.
    let (gap, _) = produce(&broker, topic, &batch(pid, 0, 5, &["x"]));
    assert_eq!(gap, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(produce(&broker, topic, &batch(pid, 1, 0, &["d"])), (0, 3));
    let (fenced, _) = produce(&broker, topic, &batch(pid, 0, 3, &["y"]));
    assert_eq!(fenced, INVALID_PRODUCER_EPOCH);

    // After a crash the state is rebuilt from the log's batch headers.
    broker.kill();
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 1);
    assert_eq!(produce(&broker, topic, &batch(pid, 1, 0, &["d"])), (0, 3));
    let (gap, _) = produce(&broker, topic, &batch(pid, 1, 2, &["z"]));
    assert_eq!(gap, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(produce(&broker, topic, &batch(pid, 1, 1, &["e"])), (0, 4));
    // Producer ids are never handed out again after a restart.
    let (_, after_restart, _) = init_producer_id(&broker);
    assert!(
        after_restart > other_pid,
        "{after_restart} after {other_pid}"
    );

    let values = read_values(&broker, topic).await;
    assert_eq!(values, ["a", "b", "c", "d", "e"]);

    // DescribeProducers shows the rebuilt state; an unknown partition is
    // UNKNOWN_TOPIC_OR_PARTITION.
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 1);
    let described = describe_producers(&broker, topic, &[0, 7]);
    assert_eq!(described[0], (0, 0, vec![(pid, 1, 1)]));
    assert_eq!((described[1].0, described[1].1), (7, 3));
}
