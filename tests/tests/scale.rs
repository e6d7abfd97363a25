//! How cost grows with partitions (issue 17.5): one CreateTopics of many
//! topics succeeds (host work inside the call is not guest time), the
//! broker's descriptors follow the partitions being written, not the
//! partitions or segment files there are, and running out of descriptors
//! fails only the writes that needed more.
//!
//! Descriptors are counted in /proc/<pid>/fd of the broker. Figures for
//! 10,000 partitions are in BENCHMARKS.md (`make bench-scale`); these tests
//! use fewer so that they stay short.

use std::time::Duration;

use gregor_tests::kafka::{
    admin, admin_options, consume_all, consumer_config, create_topic, producer, wait_for_topic,
};
use gregor_tests::Broker;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

/// The handle cache of segment files not being written (host/src/log/handles.rs).
const HANDLE_CACHE: usize = 512;

/// The descriptor limit the exhaustion test runs the broker with.
const LOW_LIMIT: usize = 300;

/// Partitions never written that the exhaustion test writes at the limit:
/// well over the handles the cache may hold under [`LOW_LIMIT`] (an eighth).
const FRESH: i32 = 120;

fn descriptors(broker: &Broker) -> usize {
    let pid = broker.pid().expect("the broker runs");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the broker's /proc/<pid>/fd")
        .count()
}

async fn create_many(broker: &Broker, prefix: &str, topics: usize, partitions: i32) {
    let names: Vec<String> = (0..topics).map(|i| format!("{prefix}-{i}")).collect();
    let new: Vec<NewTopic> = names
        .iter()
        .map(|n| NewTopic::new(n, partitions, TopicReplication::Fixed(1)))
        .collect();
    let results = admin(broker)
        .create_topics(&new, &admin_options())
        .await
        .expect("CreateTopics request");
    assert_eq!(results.len(), topics);
    let failed: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {topics} topics failed, first: {:?}",
        failed.len(),
        failed.first()
    );
}

async fn send(
    producer: &rdkafka::producer::FutureProducer,
    topic: &str,
    partition: i32,
    value: &str,
) -> Result<(i32, i64), RDKafkaErrorCode> {
    producer
        .send(
            FutureRecord::<(), str>::to(topic)
                .partition(partition)
                .payload(value),
            Duration::from_secs(0),
        )
        .await
        .map(|delivery| (delivery.partition, delivery.offset))
        .map_err(|(e, _)| e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_create_topics_of_many_partitions_and_descriptors_follow_writes() {
    let broker = Broker::start();
    let before = descriptors(&broker);
    // 100 topics of 10 partitions in one request: 1,000 partitions, which
    // held 3,000 descriptors before segment files were opened on demand.
    // (Kafka refuses one request of more than 10,000 metadata records, a
    // topic and each partition being one; the bench creates 10,000.)
    create_many(&broker, "many", 100, 10).await;
    wait_for_topic(&broker, "many-99", 10);
    let idle = descriptors(&broker);
    assert!(
        idle <= before + HANDLE_CACHE + 32,
        "1,000 idle partitions hold {} descriptors more than none",
        idle - before
    );

    // Write 100 partitions: each pins its active segment's file, no more.
    let p = producer(&broker, &[("linger.ms", "5")]);
    for topic in 0..10 {
        for partition in 0..10 {
            let name = format!("many-{topic}");
            let sent = send(&p, &name, partition, "v").await;
            assert_eq!(sent, Ok((partition, 0)), "{name}-{partition}");
        }
    }
    let written = descriptors(&broker);
    assert!(
        written <= before + HANDLE_CACHE + 100 + 64,
        "descriptors: {before} at start, {idle} idle, {written} with 100 partitions written"
    );

    // Many segments in one partition: the sealed ones are not kept open.
    create_topic_small_segments(&broker, "rolled").await;
    for i in 0..200 {
        send(&p, "rolled", 0, &format!("{i:0>200}")).await.unwrap();
    }
    let segments = segment_files(&broker, "rolled-0");
    assert!(segments >= 40, "only {segments} segments");
    let rolled = descriptors(&broker);
    assert!(
        rolled <= written + 8,
        "{segments} segments took {} descriptors",
        rolled.saturating_sub(written)
    );
    let read = consume_all(&broker, "rolled", 1, 200, Duration::from_secs(60)).await;
    assert_eq!(read.values().map(Vec::len).sum::<usize>(), 200);
}

async fn create_topic_small_segments(broker: &Broker, topic: &str) {
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1)).set("segment.bytes", "1500");
    let results = admin(broker)
        .create_topics(&[new], &admin_options())
        .await
        .expect("CreateTopics request");
    assert_eq!(results[0], Ok(topic.to_string()));
    wait_for_topic(broker, topic, 1);
}

fn segment_files(broker: &Broker, dir: &str) -> usize {
    // The partition directory, directly in the log directory or one level
    // down.
    let root = broker.data_dir();
    let mut candidates = vec![root.join(dir)];
    if let Ok(entries) = std::fs::read_dir(root) {
        candidates.extend(entries.flatten().map(|e| e.path().join(dir)));
    }
    let found = candidates
        .iter()
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no directory {dir} under {}", root.display()));
    std::fs::read_dir(found)
        .expect("the partition directory")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count()
}

/// The broker's descriptor limit is lowered to [`LOW_LIMIT`] (`prlimit`,
/// soft and hard) and idle connections take every descriptor left, with a
/// few more waiting in the accept queue (the broker's accepts then fail
/// with EMFILE, logged, and are retried). What needs a descriptor then is
/// the first write to a partition never written (its active segment's
/// file is pinned from the first append): writes to [`FRESH`] such
/// partitions fail, each with KAFKA_STORAGE_ERROR in its own partition
/// response (retriable for Kafka clients: librdkafka and the Java client
/// refresh metadata and retry), on a connection that stays up; the
/// partitions already written keep taking writes and serving reads; once
/// the idle connections go, the failed partitions take the same writes at
/// offset 0 (a failed write left nothing behind) and every acknowledged
/// record is read back. The broker logs each open that failed.
///
/// Why the outcome is forced: once the idle connections hold every
/// descriptor the broker may have, the only descriptors a fresh partition
/// can get are the ones the segment handle cache holds (at most an eighth
/// of the limit, [`LOW_LIMIT`] / 8 = 37: a cached handle is pinned as is,
/// or released when an open fails and the open retried), plus the odd
/// short-lived file the broker closes meanwhile; the accept loop competes
/// for those too, which only makes fewer writes succeed. Each fresh write
/// that succeeds pins its descriptor for the rest of the test. So of
/// [`FRESH`] = 120 writes at most 37 and a few succeed, whatever the
/// machine's load or which handles happen to be cached, and the test asks
/// for at least half of them to fail. The partitions already written hold
/// their pinned handles and need no new descriptor, so they must succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_descriptors_fails_only_what_needed_more() {
    let broker = Broker::start_wrapped(
        &[
            "prlimit",
            &format!("--nofile={LOW_LIMIT}:{LOW_LIMIT}"),
            "--",
        ],
        &[],
        &[],
    );
    create_topic(&broker, "healthy", 2).await;
    create_topic(&broker, "fresh", FRESH).await;
    // No retries: each failure is reported as the broker gave it.
    let p = producer(
        &broker,
        &[("linger.ms", "5"), ("message.send.max.retries", "0")],
    );
    for partition in 0..2 {
        assert_eq!(
            send(&p, "healthy", partition, "a").await,
            Ok((partition, 0))
        );
    }
    // Clients connect before descriptors run out (a new connection needs
    // one too): the producer learns the fresh topic, the consumer reads
    // what is there.
    let metadata = tokio::task::block_in_place(|| {
        p.client()
            .fetch_metadata(Some("fresh"), Duration::from_secs(30))
    })
    .expect("metadata of the fresh topic");
    assert_eq!(metadata.topics()[0].partitions().len(), FRESH as usize);
    let consumer = assigned_consumer(&broker, "healthy", 2);
    assert_eq!(read_n(&consumer, 2).await.len(), 2);

    let idle = take_every_descriptor(&broker);

    // Writes to partitions never written: those that cannot get a
    // descriptor fail alone, with a storage error of their own.
    let all: Vec<i32> = (0..FRESH).collect();
    let first = send_each(&p, "fresh", &all, "f").await;
    let failed: Vec<i32> = first
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(partition, _)| *partition)
        .collect();
    eprintln!(
        "at the limit {} of {FRESH} writes to new partitions failed",
        failed.len()
    );
    for (partition, result) in &first {
        assert!(
            matches!(result, Ok(0) | Err(RDKafkaErrorCode::KafkaStorageError)),
            "fresh-{partition}: {result:?}"
        );
    }
    assert!(
        failed.len() >= FRESH as usize / 2,
        "only {} of {FRESH} writes to new partitions failed with every descriptor taken",
        failed.len()
    );
    let log = broker.log_tail(usize::MAX);
    assert!(
        log.contains("out of file descriptors")
            && log.contains("the operation that needed it fails"),
        "the broker did not log the opens that failed: {}",
        broker.log_tail(20)
    );

    // The partitions already written keep taking writes and serving reads,
    // on the same connections.
    for partition in 0..2 {
        assert_eq!(
            send(&p, "healthy", partition, "b").await,
            Ok((partition, 1))
        );
    }
    assert_eq!(
        read_n(&consumer, 2).await,
        vec!["b".to_string(), "b".to_string()]
    );

    // The idle connections go: the failed partitions take the same write,
    // at offset 0.
    drop(idle);
    let mut left = failed.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !left.is_empty() {
        let results = send_each(&p, "fresh", &left, "f").await;
        left = results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(partition, _)| *partition)
            .collect();
        for (partition, result) in &results {
            assert!(
                matches!(result, Ok(0) | Err(RDKafkaErrorCode::KafkaStorageError)),
                "fresh-{partition} after the release: {result:?}"
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} partitions still fail with descriptors free: {left:?}",
            left.len()
        );
        if !left.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // Nothing acknowledged is lost, and no failed write left a record.
    let read = consume_all(
        &broker,
        "fresh",
        FRESH,
        FRESH as usize,
        Duration::from_secs(60),
    )
    .await;
    for partition in 0..FRESH {
        let values: Vec<_> = read
            .get(&partition)
            .map(|m| m.iter().map(|m| m.payload().unwrap_or_default()).collect())
            .unwrap_or_default();
        assert_eq!(values, vec![b"f".as_slice()], "fresh-{partition}");
    }
    let healthy = consume_all(&broker, "healthy", 2, 4, Duration::from_secs(60)).await;
    for partition in 0..2 {
        let values: Vec<_> = healthy[&partition]
            .iter()
            .map(|m| m.payload().unwrap_or_default())
            .collect();
        assert_eq!(values, vec![b"a".as_slice(), b"b"], "healthy-{partition}");
    }
}

/// Idle connections until the broker holds every descriptor it may, then a
/// few more left in its accept queue; returned to be dropped when the
/// descriptors should come back. On a loaded machine the broker may accept
/// slower than a connect times out (the queue is full for a moment), so a
/// failed connect is tried again.
fn take_every_descriptor(broker: &Broker) -> Vec<std::net::TcpStream> {
    let mut idle = Vec::new();
    let mut failed_connects = 0;
    let mut extra = 0;
    while extra < 5 && failed_connects < 10 && idle.len() < 2 * LOW_LIMIT {
        match std::net::TcpStream::connect_timeout(&broker.addr(), Duration::from_secs(3)) {
            Ok(stream) => {
                idle.push(stream);
                if descriptors(broker) >= LOW_LIMIT {
                    extra += 1;
                }
            }
            Err(_) => failed_connects += 1,
        }
    }
    assert!(
        descriptors(broker) >= LOW_LIMIT,
        "{} idle connections left the broker {} of {LOW_LIMIT} descriptors ({failed_connects} connects failed)",
        idle.len(),
        descriptors(broker)
    );
    gregor_tests::wait_for(
        "the broker to run out of descriptors",
        Duration::from_secs(30),
        || {
            broker
                .log_tail(50)
                .contains("Too many open files")
                .then_some(())
        },
    );
    idle
}

/// One record to each of `partitions`, all in flight at once; each
/// partition's offset or error.
async fn send_each(
    producer: &rdkafka::producer::FutureProducer,
    topic: &str,
    partitions: &[i32],
    value: &str,
) -> Vec<(i32, Result<i64, RDKafkaErrorCode>)> {
    let mut pending = Vec::new();
    for &partition in partitions {
        let record = FutureRecord::<(), str>::to(topic)
            .partition(partition)
            .payload(value);
        let future = producer
            .send_result(record)
            .unwrap_or_else(|(e, _)| panic!("enqueue to {topic}-{partition}: {e}"));
        pending.push((partition, future));
    }
    let mut results = Vec::new();
    for (partition, future) in pending {
        let result = match future.await.expect("the producer is alive") {
            Ok(delivery) => {
                assert_eq!(delivery.partition, partition);
                Ok(delivery.offset)
            }
            Err((e, _)) => Err(e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)),
        };
        results.push((partition, result));
    }
    results
}

fn assigned_consumer(broker: &Broker, topic: &str, partitions: i32) -> StreamConsumer {
    let consumer: StreamConsumer = consumer_config(broker).create().expect("create a consumer");
    let mut tpl = TopicPartitionList::new();
    for partition in 0..partitions {
        tpl.add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    consumer.assign(&tpl).expect("assign");
    consumer
}

/// The next `n` values the consumer reads (partition ends skipped).
async fn read_n(consumer: &StreamConsumer, n: usize) -> Vec<String> {
    let mut values = Vec::new();
    while values.len() < n {
        let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("a message within 30 s");
        match message {
            Ok(m) => values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into()),
            Err(KafkaError::PartitionEOF(_)) => {}
            Err(e) => panic!("consume: {e}"),
        }
    }
    values
}
