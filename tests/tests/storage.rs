//! The storage engine seen from real clients (librdkafka via `rdkafka`):
//! crash safety under SIGKILL, recovery of a damaged tail, retention,
//! DeleteRecords, compaction, index lookups and ListOffsets by timestamp,
//! size limits and corrupt batches, and log directories.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::wire::{self, Conn};
use gregor_tests::{wait_for, Broker};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

const CONSUME_TIMEOUT: Duration = Duration::from_secs(180);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Creates a topic with configs and waits for its metadata.
async fn create_topic_with(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    kafka::create_topic_with(broker, topic, partitions, configs).await
}

/// A record to send: key, value (none: a tombstone), timestamp and
/// partition (none: the producer's choice).
type Record = (Option<String>, Option<Vec<u8>>, Option<i64>, Option<i32>);

/// Sends records and waits for all deliveries; returns (partition, offset)
/// per record, panicking on a failed delivery.
async fn send_all(producer: &FutureProducer, topic: &str, records: &[Record]) -> Vec<(i32, i64)> {
    let mut pending = Vec::new();
    for (key, value, timestamp, partition) in records {
        let mut record = FutureRecord::<str, [u8]>::to(topic);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(value) = value {
            record = record.payload(value);
        }
        if let Some(ts) = timestamp {
            record = record.timestamp(*ts);
        }
        if let Some(p) = partition {
            record = record.partition(*p);
        }
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .expect("enqueue");
        pending.push(delivery);
    }
    let mut out = Vec::new();
    for delivery in pending {
        match delivery.await.expect("delivery report") {
            Ok(d) => out.push((d.partition, d.offset)),
            Err((e, _)) => panic!("delivery failed: {e}"),
        }
    }
    out
}

/// (offset, key, value) of every message of a partition from the log
/// start, read with a fresh consumer until end of partition.
async fn read_partition(
    broker: &Broker,
    topic: &str,
    partition: i32,
) -> Vec<(i64, Option<String>, Option<Vec<u8>>)> {
    let consumer = kafka::stream_consumer(broker);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + CONSUME_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Err(_) => panic!("reading {topic}-{partition}: timed out"),
            Ok(Ok(m)) => out.push((
                m.offset(),
                m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                m.payload().map(<[u8]>::to_vec),
            )),
            Ok(Err(KafkaError::PartitionEOF(_))) => return out,
            Ok(Err(e)) => panic!("reading {topic}-{partition}: {e}"),
        }
    }
}

fn watermarks(broker: &Broker, topic: &str, partition: i32) -> (i64, i64) {
    kafka::plain_consumer(broker)
        .fetch_watermarks(topic, partition, CALL_TIMEOUT)
        .expect("watermarks")
}

/// The `.log` files of a partition, oldest first.
fn segment_files(broker: &Broker, topic: &str, partition: i32) -> Vec<PathBuf> {
    let dir = partition_dir(broker.data_dir(), topic, partition);
    let mut logs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir
        .join("partitions")
        .join(format!("{topic}-{partition}"))
}

/// One acknowledged message of the crash test.
#[derive(Clone, Copy, Debug)]
struct Acked {
    seq: u64,
    partition: i32,
    offset: i64,
}

/// Produces with acks=all (and no retries, so a message is written at most
/// once) from a background task until `stop`, recording every acknowledged
/// message.
fn spawn_load(
    producer: FutureProducer,
    topic: String,
    first_seq: u64,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<Acked>>>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut seq = first_seq;
        let mut deliveries = Vec::new();
        let payload = vec![b'x'; 200];
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..50 {
                let key = format!("{seq:012}");
                let record = FutureRecord::<str, [u8]>::to(&topic)
                    .key(&key)
                    .payload(&payload);
                match producer.send_result(record) {
                    Ok(delivery) => {
                        let acked = Arc::clone(&acked);
                        let this = seq;
                        deliveries.push(tokio::spawn(async move {
                            if let Ok(Ok(d)) = delivery.await {
                                acked.lock().expect("acked lock").push(Acked {
                                    seq: this,
                                    partition: d.partition,
                                    offset: d.offset,
                                });
                            }
                        }));
                        seq += 1;
                    }
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        break;
                    }
                }
            }
            tokio::task::yield_now().await;
        }
        // Every outstanding delivery ends: acknowledged before the kill,
        // or failed by message.timeout.ms.
        for d in deliveries {
            let _ = d.await;
        }
        seq
    })
}

/// SIGKILL during an acks=all librdkafka load, several times in a row:
/// every acknowledged message is there after the restarts, exactly once,
/// at the offset it was acknowledged with, in order, and readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_messages_survive_repeated_sigkill() {
    let mut broker = Broker::start();
    let topic = "crash";
    // Small segments: kills land around rolls and in older segments' flushes.
    create_topic_with(&broker, topic, 2, &[("segment.bytes", "262144")]).await;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut next_seq = 0u64;
    for round in 0..4u64 {
        let producer = kafka::producer(
            &broker,
            &[
                ("message.send.max.retries", "0"),
                ("message.timeout.ms", "8000"),
                ("linger.ms", "2"),
            ],
        );
        let stop = Arc::new(AtomicBool::new(false));
        let load = spawn_load(
            producer,
            topic.to_string(),
            next_seq,
            Arc::clone(&stop),
            Arc::clone(&acked),
        );
        // Let the load run for a while (segments roll, flush and are
        // checkpointed), then kill at a moment that varies per round.
        let before = acked.lock().expect("acked").len();
        wait_for(
            "acknowledgements before the kill",
            Duration::from_secs(60),
            || (acked.lock().expect("acked").len() > before + 2000).then_some(()),
        );
        tokio::time::sleep(Duration::from_millis(1500 + 337 * round)).await;
        broker.kill();
        stop.store(true, Ordering::Relaxed);
        next_seq = load.await.expect("load task");
        broker.restart();
        kafka::wait_for_topic(&broker, topic, 2);
    }

    let acked = acked.lock().expect("acked").clone();
    assert!(acked.len() > 8000, "only {} acknowledged", acked.len());
    eprintln!(
        "{} messages acknowledged over 4 kills, {} sent",
        acked.len(),
        next_seq
    );
    let mut by_partition: BTreeMap<i32, Vec<Acked>> = BTreeMap::new();
    for a in &acked {
        by_partition.entry(a.partition).or_default().push(*a);
    }
    for (partition, mut expected) in by_partition {
        expected.sort_by_key(|a| a.offset);
        let log = read_partition(&broker, topic, partition).await;
        let mut seen: HashMap<u64, Vec<i64>> = HashMap::new();
        let mut last_seq = None;
        for (offset, key, value) in &log {
            let seq: u64 = key
                .as_deref()
                .and_then(|k| k.parse().ok())
                .unwrap_or_else(|| panic!("unreadable key at offset {offset}"));
            assert_eq!(
                value.as_deref(),
                Some(&[b'x'; 200][..]),
                "value at {offset}"
            );
            // One producer at a time, sending in sequence order: the log is
            // in sequence order too.
            assert!(last_seq < Some(seq), "out of order at offset {offset}");
            last_seq = Some(seq);
            seen.entry(seq).or_default().push(*offset);
        }
        for a in &expected {
            let offsets = seen.get(&a.seq).map(Vec::as_slice).unwrap_or_default();
            assert_eq!(
                offsets,
                &[a.offset],
                "acknowledged message {} (partition {partition})",
                a.seq
            );
        }
    }
}

/// The base offset of the last record batch in a segment file (batches are
/// laid out as base offset, INT64, then batch length, INT32, then the rest).
fn last_batch_base_offset(segment: &[u8]) -> i64 {
    let mut position = 0usize;
    let mut last = -1;
    while position + 12 <= segment.len() {
        let base = i64::from_be_bytes(segment[position..position + 8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(
            segment[position + 8..position + 12]
                .try_into()
                .expect("4 bytes"),
        );
        let next = position + 12 + length.max(0) as usize;
        if length <= 0 || next > segment.len() {
            break;
        }
        last = base;
        position = next;
    }
    last
}

/// A torn batch and garbage written after the last batch by the test, and
/// then a corrupted batch: recovery cuts the log back to the last whole,
/// valid batch and the partition keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_tail_is_recovered() {
    let mut broker = Broker::start();
    let topic = "damaged";
    create_topic_with(&broker, topic, 1, &[]).await;
    let producer = kafka::producer(&broker, &[("linger.ms", "0")]);
    let records: Vec<_> = (0..100)
        .map(|i| (Some(format!("k{i}")), Some(vec![b'v'; 100]), None, Some(0)))
        .collect();
    for chunk in records.chunks(10) {
        send_all(&producer, topic, chunk).await;
    }
    drop(producer);
    broker.kill();

    let log = segment_files(&broker, topic, 0).pop().expect("a segment");
    let bytes = fs::read(&log).expect("read the segment");
    // A copy of the first 70 bytes of the first batch (a torn write), then
    // garbage.
    let mut tail = bytes[..70].to_vec();
    tail.extend_from_slice(&[0xa5; 333]);
    let mut damaged = bytes.clone();
    damaged.extend_from_slice(&tail);
    fs::write(&log, &damaged).expect("write the damaged segment");
    broker.restart();
    assert_eq!(watermarks(&broker, topic, 0), (0, 100));
    assert_eq!(
        fs::metadata(&log).expect("segment").len(),
        bytes.len() as u64
    );
    let all = read_partition(&broker, topic, 0).await;
    assert_eq!(all.len(), 100);
    assert!(all
        .iter()
        .enumerate()
        .all(|(i, m)| m.0 == i as i64 && m.1.as_deref() == Some(&format!("k{i}"))));

    // Flip a byte inside the last batch: its CRC fails, it is cut. How
    // many records that batch holds is librdkafka's choice, so the
    // expected end is read from the segment: the last batch's base offset.
    broker.kill();
    let mut corrupt = fs::read(&log).expect("read the segment");
    let last_base = last_batch_base_offset(&corrupt);
    assert!(
        last_base > 0 && last_base < 100,
        "last batch starts at {last_base}"
    );
    let at = corrupt.len() - 20;
    corrupt[at] ^= 0xff;
    fs::write(&log, &corrupt).expect("write the corrupt segment");
    broker.restart();
    let (low, high) = watermarks(&broker, topic, 0);
    assert_eq!((low, high), (0, last_base), "the last batch is gone");
    assert!(broker.log_tail(400).contains("truncating log segment"));
    // New messages continue at the cut.
    let producer = kafka::producer(&broker, &[]);
    let at = send_all(
        &producer,
        topic,
        &[(Some("new".into()), Some(b"n".to_vec()), None, Some(0))],
    )
    .await;
    assert_eq!(at, vec![(0, last_base)]);
    let all = read_partition(&broker, topic, 0).await;
    assert_eq!(all.len() as i64, last_base + 1);
    assert_eq!(all[last_base as usize].1.as_deref(), Some("new"));
}

/// Retention by time and by size deletes whole old segments in the
/// background; a consumer from the beginning sees only what is left and
/// ListOffsets earliest moves. DeleteRecords moves it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_and_delete_records_seen_by_a_consumer() {
    let broker = Broker::start_with(&[("log.retention.check.interval.ms", "300")]);
    // Small batches, so that small segments hold several.
    let producer = kafka::producer(&broker, &[("linger.ms", "0"), ("batch.num.messages", "5")]);

    // retention.ms: old records (an hour ago) go, fresh ones stay.
    let timed = "retention-time";
    create_topic_with(
        &broker,
        timed,
        1,
        &[("retention.ms", "600000"), ("segment.bytes", "4096")],
    )
    .await;
    let old = now_ms() - 3_600_000;
    let records: Vec<_> = (0..100)
        .map(|i| {
            (
                Some(format!("old{i}")),
                Some(vec![b'o'; 100]),
                Some(old + i),
                Some(0),
            )
        })
        .collect();
    send_all(&producer, timed, &records).await;
    let records: Vec<_> = (0..20)
        .map(|i| {
            (
                Some(format!("new{i}")),
                Some(vec![b'n'; 100]),
                None,
                Some(0),
            )
        })
        .collect();
    send_all(&producer, timed, &records).await;
    // Whole segments go: at most the segment shared by the last old and
    // the first new records (about 30 records) keeps old ones.
    let low = wait_for("time retention", Duration::from_secs(30), || {
        let (low, high) = watermarks(&broker, timed, 0);
        assert_eq!(high, 120);
        (low >= 70).then_some(low)
    });
    let left = read_partition(&broker, timed, 0).await;
    assert_eq!(left.first().map(|m| m.0), Some(low));
    assert_eq!(left.len() as i64, 120 - low);
    let fresh = left
        .iter()
        .filter(|m| m.1.as_deref().is_some_and(|k| k.starts_with("new")))
        .count();
    assert_eq!(fresh, 20, "every fresh record is kept");

    // retention.bytes: the log shrinks to about the limit, newest kept.
    let sized = "retention-size";
    create_topic_with(
        &broker,
        sized,
        1,
        &[("retention.bytes", "20000"), ("segment.bytes", "4096")],
    )
    .await;
    let records: Vec<_> = (0..500)
        .map(|i| (Some(format!("s{i}")), Some(vec![b's'; 100]), None, Some(0)))
        .collect();
    send_all(&producer, sized, &records).await;
    wait_for("size retention", Duration::from_secs(30), || {
        let (low, _) = watermarks(&broker, sized, 0);
        (low > 300).then_some(())
    });
    let left = read_partition(&broker, sized, 0).await;
    assert!(left.len() < 200 && left.len() > 100, "{} left", left.len());
    assert_eq!(
        left.last().map(|m| m.1.clone()),
        Some(Some("s499".to_string()))
    );

    // DeleteRecords: the log start offset moves into a segment.
    let deleted = "delete-records";
    create_topic_with(&broker, deleted, 1, &[]).await;
    let records: Vec<_> = (0..50)
        .map(|i| (Some(format!("d{i}")), Some(vec![b'd'; 10]), None, Some(0)))
        .collect();
    send_all(&producer, deleted, &records).await;
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(deleted, 0, Offset::Offset(17))
        .expect("offsets");
    let result = kafka::admin(&broker)
        .delete_records(&offsets, &kafka::admin_options())
        .await
        .expect("DeleteRecords");
    let element = result.elements_for_topic(deleted).pop().expect("result");
    assert_eq!(element.error(), Ok(()));
    assert_eq!(element.offset(), Offset::Offset(17));
    assert_eq!(watermarks(&broker, deleted, 0), (17, 50));
    let left = read_partition(&broker, deleted, 0).await;
    assert_eq!(left.first().map(|m| m.0), Some(17));
    assert_eq!(left.len(), 33);
    // Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    let mut beyond = TopicPartitionList::new();
    beyond
        .add_partition_offset(deleted, 0, Offset::Offset(51))
        .expect("offsets");
    let result = kafka::admin(&broker)
        .delete_records(&beyond, &kafka::admin_options())
        .await
        .expect("DeleteRecords");
    let element = result.elements_for_topic(deleted).pop().expect("result");
    match element.error() {
        Err(KafkaError::OffsetFetch(code)) => assert_eq!(code, RDKafkaErrorCode::OffsetOutOfRange),
        other => panic!("DeleteRecords beyond the high watermark: {other:?}"),
    }
    assert_eq!(watermarks(&broker, deleted, 0), (17, 50));
}

/// cleanup.policy=compact: the cleaner keeps the latest value of every
/// key with its original offset, removes tombstones after
/// delete.retention.ms, and keyless records are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_latest_value_per_key() {
    let broker = Broker::start_with(&[("log.cleaner.backoff.ms", "200")]);
    let topic = "compacted";
    create_topic_with(
        &broker,
        topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "2048"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "2000"),
        ],
    )
    .await;
    let producer = kafka::producer(&broker, &[("linger.ms", "0")]);
    let mut records = Vec::new();
    for round in 0..10 {
        for k in 0..20 {
            let value = format!("k{k}-round{round}").into_bytes();
            records.push((Some(format!("k{k}")), Some(value), None, Some(0)));
        }
    }
    // k0 deleted: a tombstone.
    records.push((Some("k0".to_string()), None, None, Some(0)));
    let mut latest: HashMap<String, (i64, Option<Vec<u8>>)> = HashMap::new();
    for chunk in records.chunks(20) {
        let delivered = send_all(&producer, topic, chunk).await;
        for ((key, value, _, _), (_, offset)) in chunk.iter().zip(delivered) {
            latest.insert(key.clone().expect("key"), (offset, value.clone()));
        }
    }
    // Fillers with their own keys push everything above out of the active
    // segment (which the cleaner never touches).
    let fillers: Vec<_> = (0..40)
        .map(|i| {
            (
                Some(format!("filler{i}")),
                Some(vec![b'f'; 200]),
                None,
                Some(0),
            )
        })
        .collect();
    send_all(&producer, topic, &fillers).await;
    let produced = records.len() + fillers.len();

    let (b, p) = (&broker, &producer);
    let compacted = wait_for_async(Duration::from_secs(60), move || async move {
        let log = read_partition(b, topic, 0).await;
        let counts = log
            .iter()
            .fold(HashMap::new(), |mut m: HashMap<_, usize>, r| {
                *m.entry(r.1.clone()).or_default() += 1;
                m
            });
        (log.len() < produced - 150 && counts.values().all(|&c| c == 1)).then_some(log)
    })
    .await;
    for k in 1..20 {
        let key = format!("k{k}");
        let (offset, value) = &latest[&key];
        let found = compacted
            .iter()
            .find(|r| r.1.as_deref() == Some(key.as_str()))
            .unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!((&found.0, &found.2), (offset, value), "{key}");
    }
    // Offsets are kept: strictly increasing, with gaps.
    assert!(compacted.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(watermarks(&broker, topic, 0).1, produced as i64);
    // The tombstone stays readable, then goes after delete.retention.ms
    // (with more dirty data to trigger the passes).
    let k0 = compacted.iter().find(|r| r.1.as_deref() == Some("k0"));
    if let Some(k0) = k0 {
        assert_eq!(k0.2, None, "k0's latest record is its tombstone");
    }
    wait_for_async(Duration::from_secs(60), move || async move {
        let more: Vec<_> = (0..20)
            .map(|i| {
                (
                    Some(format!("more{i}")),
                    Some(vec![b'm'; 200]),
                    None,
                    Some(0),
                )
            })
            .collect();
        send_all(p, topic, &more).await;
        let log = read_partition(b, topic, 0).await;
        (!log.iter().any(|r| r.1.as_deref() == Some("k0"))).then_some(())
    })
    .await;

    // A record without a key is refused with INVALID_RECORD.
    let record = FutureRecord::<str, [u8]>::to(topic)
        .payload(b"no key")
        .partition(0);
    let result = producer
        .send_result(record)
        .map_err(|(e, _)| e)
        .expect("enqueue")
        .await
        .expect("delivery report");
    match result {
        Err((KafkaError::MessageProduction(code), _)) => {
            assert_eq!(code, RDKafkaErrorCode::InvalidRecord)
        }
        other => panic!("keyless record: {other:?}"),
    }
}

/// Compacted topics written by a compressing producer (gzip, snappy and
/// lz4 from librdkafka): keys inside compressed batches are checked on append and
/// compacted by the cleaner; ListOffsets by timestamp is exact inside a
/// compressed batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_batches_on_compacted_topics() {
    let broker = Broker::start_with(&[("log.cleaner.backoff.ms", "200")]);
    // The rdkafka build here has no libzstd; zstd decoding is covered by
    // the host's codec unit tests.
    for codec in ["gzip", "snappy", "lz4"] {
        let topic = format!("compressed-{codec}");
        create_topic_with(
            &broker,
            &topic,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("segment.bytes", "1024"),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        )
        .await;
        let producer = kafka::producer(
            &broker,
            &[
                ("compression.type", codec),
                ("linger.ms", "5"),
                ("batch.num.messages", "10"),
            ],
        );
        let base = now_ms() - 100_000;
        let mut records = Vec::new();
        for round in 0..10i64 {
            for k in 0..10i64 {
                let value = format!("{codec}-k{k}-round{round}").into_bytes();
                let ts = base + (round * 10 + k) * 10;
                records.push((Some(format!("k{k}")), Some(value), Some(ts), Some(0)));
            }
        }
        let delivered = send_all(&producer, &topic, &records).await;
        // The record at offset 57 has timestamp base + 570: exact answers
        // from inside compressed batches. Asked of a copy on a topic that
        // is not compacted: on the compacted one the cleaner may already
        // have removed offset 57 (its key is written again later).
        let uncompacted = format!("{topic}-timestamps");
        create_topic_with(&broker, &uncompacted, 1, &[]).await;
        send_all(&producer, &uncompacted, &records).await;
        let consumer = kafka::plain_consumer(&broker);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&uncompacted, 0, Offset::Offset(base + 565))
            .expect("tpl");
        let answer = consumer
            .offsets_for_times(tpl, CALL_TIMEOUT)
            .expect("ListOffsets by timestamp");
        assert_eq!(answer.elements()[0].offset(), Offset::Offset(57), "{codec}");
        // Incompressible fillers push every round out of the active segment.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let fillers: Vec<_> = (0..40)
            .map(|i| {
                let noise: Vec<u8> = (0..200)
                    .map(|_| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        (seed >> 56) as u8
                    })
                    .collect();
                (Some(format!("filler{i}")), Some(noise), None, Some(0))
            })
            .collect();
        send_all(&producer, &topic, &fillers).await;
        let (b, t) = (&broker, topic.as_str());
        let log = wait_for_async(Duration::from_secs(60), move || async move {
            let log = read_partition(b, t, 0).await;
            let ks = log
                .iter()
                .filter(|r| r.1.as_deref().is_some_and(|k| !k.starts_with("filler")))
                .count();
            (ks == 10).then_some(log)
        })
        .await;
        for k in 0..10 {
            let key = format!("k{k}");
            let found = log
                .iter()
                .find(|r| r.1.as_deref() == Some(key.as_str()))
                .unwrap_or_else(|| panic!("{codec}: {key} missing"));
            let want = format!("{codec}-k{k}-round9").into_bytes();
            assert_eq!(found.2.as_deref(), Some(&want[..]), "{codec}: {key}");
            assert_eq!(found.0, delivered[90 + k].1, "{codec}: {key}'s offset");
        }
        // A compressed batch with a keyless record: INVALID_RECORD.
        let record = FutureRecord::<str, [u8]>::to(&topic)
            .payload(b"no key")
            .partition(0);
        let result = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .expect("enqueue")
            .await
            .expect("delivery report");
        match result {
            Err((KafkaError::MessageProduction(code), _)) => {
                assert_eq!(code, RDKafkaErrorCode::InvalidRecord, "{codec}")
            }
            other => panic!("{codec}: keyless record: {other:?}"),
        }
    }
}

async fn wait_for_async<T, F, Fut>(timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// ListOffsets by timestamp answers the first offset whose timestamp is at
/// or after the target, checked against what was produced (monotonic and
/// shuffled timestamps), and a fetch from any offset starts exactly there
/// — before and after a restart that loads the index files, and after a
/// SIGKILL that rebuilds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_lookups_and_list_offsets_by_timestamp() {
    let mut broker = Broker::start();
    let topic = "timestamps";
    // Many segments with many index entries each.
    create_topic_with(&broker, topic, 2, &[("segment.bytes", "65536")]).await;
    // Batches of 10 records (~1.7 KB): many index entries per segment.
    let producer = kafka::producer(&broker, &[("linger.ms", "5"), ("batch.num.messages", "10")]);
    let base = now_ms() - 1_000_000;
    let n = 3000i64;
    // Partition 0: timestamps grow; partition 1: shuffled.
    let shuffled = |i: i64| base + (i * 7919) % n * 10;
    let mut records = Vec::new();
    for i in 0..n {
        let value = vec![b'a' + (i % 26) as u8; 150];
        records.push((
            Some(format!("p0-{i}")),
            Some(value.clone()),
            Some(base + i * 10),
            Some(0),
        ));
        records.push((
            Some(format!("p1-{i}")),
            Some(value),
            Some(shuffled(i)),
            Some(1),
        ));
    }
    let delivered = send_all(&producer, topic, &records).await;
    let mut produced: BTreeMap<i32, Vec<(i64, i64, String)>> = BTreeMap::new();
    for ((key, _, ts, _), (partition, offset)) in records.iter().zip(&delivered) {
        produced.entry(*partition).or_default().push((
            *offset,
            ts.expect("timestamp"),
            key.clone().expect("key"),
        ));
    }
    assert!(segment_files(&broker, topic, 0).len() > 5);

    let targets: Vec<i64> = [
        base - 5,
        base,
        base + 1,
        base + 9,
        base + 10,
        base + 12_345,
        base + 15_000,
        base + 29_990,
        base + 29_991,
        base + n * 10 + 100,
    ]
    .into_iter()
    .chain((0..40).map(|i| base + (i * 7727) % (n * 10)))
    .collect();

    check_timestamps(&broker, topic, &produced, &targets);
    check_fetch_positions(&broker, topic).await;
    // A clean restart loads the index files; a SIGKILL rebuilds the
    // indexes of the segments after the recovery point.
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    check_timestamps(&broker, topic, &produced, &targets);
    check_fetch_positions(&broker, topic).await;
    broker.kill();
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 2);
    check_timestamps(&broker, topic, &produced, &targets);
    check_fetch_positions(&broker, topic).await;
}

/// ListOffsets by timestamp for every target against the first produced
/// offset whose timestamp is at or after it.
fn check_timestamps(
    broker: &Broker,
    topic: &str,
    produced: &BTreeMap<i32, Vec<(i64, i64, String)>>,
    targets: &[i64],
) {
    let consumer = kafka::plain_consumer(broker);
    for (&partition, records) in produced {
        for &target in targets {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, partition, Offset::Offset(target))
                .expect("tpl");
            let answer = consumer
                .offsets_for_times(tpl, CALL_TIMEOUT)
                .expect("ListOffsets by timestamp");
            let got = answer.elements()[0].offset();
            let want = records
                .iter()
                .filter(|(_, ts, _)| *ts >= target)
                .map(|(offset, _, _)| *offset)
                .min()
                .map_or(Offset::End, Offset::Offset);
            assert_eq!(got, want, "partition {partition}, timestamp {target}");
        }
    }
}

/// A fetch from an arbitrary offset starts exactly at it.
async fn check_fetch_positions(broker: &Broker, topic: &str) {
    let consumer: StreamConsumer = kafka::consumer_config(broker).create().expect("consumer");
    for k in [0i64, 1, 777, 1500, 2222, 2999, 4321, 5999] {
        let partition = (k % 2) as i32;
        let offset = k / 2;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .expect("tpl");
        consumer.assign(&tpl).expect("assign");
        let m = tokio::time::timeout(CALL_TIMEOUT, consumer.recv())
            .await
            .expect("a message in time")
            .expect("a message");
        assert_eq!((m.partition(), m.offset()), (partition, offset));
        let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned());
        assert_eq!(key, Some(format!("p{partition}-{offset}")));
    }
}

/// max.message.bytes is enforced with MESSAGE_TOO_LARGE, a batch with a bad
/// CRC is CORRUPT_MESSAGE, a truncated one INVALID_RECORD, and none of them
/// appends anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_corrupt_batches_append_nothing() {
    let broker = Broker::start();
    let topic = "limits";
    create_topic_with(&broker, topic, 1, &[("max.message.bytes", "2000")]).await;
    let producer = kafka::producer(&broker, &[("linger.ms", "0")]);
    send_all(
        &producer,
        topic,
        &[(Some("small".into()), Some(vec![1; 100]), None, Some(0))],
    )
    .await;
    let record = FutureRecord::<str, [u8]>::to(topic)
        .key("big")
        .payload(&[2u8; 5000][..])
        .partition(0);
    let result = producer
        .send_result(record)
        .map_err(|(e, _)| e)
        .expect("enqueue")
        .await
        .expect("delivery report");
    match result {
        Err((KafkaError::MessageProduction(code), _)) => {
            assert_eq!(code, RDKafkaErrorCode::MessageSizeTooLarge)
        }
        other => panic!("oversized record: {other:?}"),
    }
    assert_eq!(watermarks(&broker, topic, 0), (0, 1));

    // The stored batch is the wire batch: send it again by hand, once
    // intact and once with a flipped byte.
    let stored = fs::read(&segment_files(&broker, topic, 0)[0]).expect("segment");
    assert_eq!(produce_raw(&broker, topic, &stored), 0, "a valid batch");
    assert_eq!(watermarks(&broker, topic, 0), (0, 2));
    let mut corrupt = stored.clone();
    let last = corrupt.len() - 3;
    corrupt[last] ^= 0x55;
    assert_eq!(produce_raw(&broker, topic, &corrupt), 2, "CORRUPT_MESSAGE");
    // A truncated batch is no batch at all to Kafka's Produce validation:
    // INVALID_RECORD ("must have at least one record batch").
    let mut truncated = stored.clone();
    truncated.truncate(stored.len() - 5);
    assert_eq!(
        produce_raw(&broker, topic, &truncated),
        87,
        "INVALID_RECORD"
    );
    assert_eq!(watermarks(&broker, topic, 0), (0, 2));
    let log = read_partition(&broker, topic, 0).await;
    assert_eq!(log.len(), 2);
}

/// Produce v3 with one partition's records as given; returns its error code.
fn produce_raw(broker: &Broker, topic: &str, records: &[u8]) -> i16 {
    wire::produce_v3(broker.addr(), None, topic, records, 7).0
}

fn put_string(buf: &mut Vec<u8>, s: &str) {
    wire::put_i16(buf, s.len() as i16);
    buf.extend_from_slice(s.as_bytes());
}

/// A reader of non-flexible response bodies.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn new(b: &'a [u8]) -> Self {
        Bytes(b)
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(self.0.len() >= n, "response truncated");
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().expect("2 bytes"))
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().expect("8 bytes"))
    }
    fn bool(&mut self) -> bool {
        self.take(1)[0] != 0
    }
    fn string(&mut self) -> String {
        let n = self.i16();
        String::from_utf8_lossy(self.take(n.max(0) as usize)).into_owned()
    }
}

/// DescribeLogDirs v1: directory -> (partition -> size).
fn describe_log_dirs(broker: &Broker) -> BTreeMap<String, BTreeMap<(String, i32), i64>> {
    let mut body = Vec::new();
    wire::put_i32(&mut body, -1); // all topics
    let frame = wire::request_frame(35, 1, 11, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 11);
    let mut r = Bytes::new(&response[4..]);
    r.i32(); // throttle
    let mut dirs = BTreeMap::new();
    for _ in 0..r.i32() {
        assert_eq!(r.i16(), 0, "log dir error");
        let path = r.string();
        let mut partitions = BTreeMap::new();
        for _ in 0..r.i32() {
            let topic = r.string();
            for _ in 0..r.i32() {
                let index = r.i32();
                let size = r.i64();
                let _lag = r.i64();
                assert!(!r.bool(), "no future replicas");
                partitions.insert((topic.clone(), index), size);
            }
        }
        dirs.insert(path, partitions);
    }
    dirs
}

/// AlterReplicaLogDirs v1 for one partition; returns its error code.
fn alter_log_dir(broker: &Broker, dir: &str, topic: &str, partition: i32) -> i16 {
    let mut body = Vec::new();
    wire::put_i32(&mut body, 1);
    put_string(&mut body, dir);
    wire::put_i32(&mut body, 1);
    put_string(&mut body, topic);
    wire::put_i32(&mut body, 1);
    wire::put_i32(&mut body, partition);
    let frame = wire::request_frame(34, 1, 12, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 12);
    let mut r = Bytes::new(&response[4..]);
    r.i32(); // throttle
    assert_eq!(r.i32(), 1, "topics");
    assert_eq!(r.string(), topic);
    assert_eq!(r.i32(), 1, "partitions");
    assert_eq!(r.i32(), partition);
    r.i16()
}

/// Several log.dirs: partitions are spread over them, DescribeLogDirs
/// reports each with its partitions' sizes, and AlterReplicaLogDirs moves a
/// partition to the other directory while a producer keeps writing to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_spread_over_log_dirs_and_move_while_written() {
    let roots = tempfile::tempdir().expect("log dirs");
    let dirs_setting = format!(
        "{},{}",
        roots.path().join("one").display(),
        roots.path().join("two").display()
    );
    let mut broker = Broker::start_with(&[("log.dirs", dirs_setting.as_str())]);
    let topic = "spread";
    create_topic_with(&broker, topic, 4, &[("segment.bytes", "65536")]).await;
    let dirs = describe_log_dirs(&broker);
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(dirs.values().all(|parts| parts.len() == 2), "{dirs:?}");

    // A producer writes to partition 0 throughout the move.
    let producer = kafka::producer(&broker, &[("linger.ms", "1")]);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let producer = producer.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) || n < 3000 {
                let records: Vec<_> = (0..100)
                    .map(|i| {
                        (
                            Some(format!("m{}", n + i)),
                            Some(vec![b'w'; 300]),
                            None,
                            Some(0),
                        )
                    })
                    .collect();
                send_all(&producer, topic, &records).await;
                n += 100;
            }
            n
        })
    };
    wait_for("some data in partition 0", Duration::from_secs(30), || {
        (watermarks(&broker, topic, 0).1 > 1000).then_some(())
    });
    let from = dirs
        .iter()
        .find(|(_, parts)| parts.contains_key(&(topic.to_string(), 0)))
        .map(|(dir, _)| dir.clone())
        .expect("partition 0 somewhere");
    let to = dirs
        .keys()
        .find(|d| **d != from)
        .expect("another dir")
        .clone();
    assert_eq!(alter_log_dir(&broker, "/no/such/dir", topic, 0), 57);
    assert_eq!(alter_log_dir(&broker, &to, "no-such-topic", 0), 3);
    assert_eq!(alter_log_dir(&broker, &to, topic, 0), 0);
    wait_for("the move", Duration::from_secs(60), || {
        describe_log_dirs(&broker)[&to]
            .contains_key(&(topic.to_string(), 0))
            .then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.expect("writer");
    let dirs = describe_log_dirs(&broker);
    assert!(!dirs[&from].contains_key(&(topic.to_string(), 0)));
    assert!(dirs[&to][&(topic.to_string(), 0)] > 0);
    let log = read_partition(&broker, topic, 0).await;
    assert_eq!(log.len(), written);
    assert!(log
        .iter()
        .enumerate()
        .all(|(i, m)| m.0 == i as i64 && m.1.as_deref() == Some(format!("m{i}").as_str())));
    // And it stays there after a restart.
    broker.restart();
    kafka::wait_for_topic(&broker, topic, 4);
    assert!(describe_log_dirs(&broker)[&to].contains_key(&(topic.to_string(), 0)));
    assert_eq!(read_partition(&broker, topic, 0).await.len(), written);
}

/// Authorization as Kafka's KafkaApis: DescribeLogDirs needs DESCRIBE on the
/// Cluster (otherwise no directory is listed), AlterReplicaLogDirs ALTER on
/// the Cluster, DeleteRecords DELETE on the Topic. With the ACL authorizer
/// and no ACL at all, the anonymous principal has none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_admin_requests_are_authorized() {
    let open = Broker::start();
    assert_eq!(
        describe_log_dirs(&open).len(),
        1,
        "allowed without an authorizer"
    );
    drop(open);

    let broker = Broker::start_with(&[("authorizer", "authorizer_acl")]);
    assert!(
        describe_log_dirs(&broker).is_empty(),
        "denied: no directory listed"
    );
    let dir = std::path::absolute(broker.data_dir())
        .expect("absolute data dir")
        .display()
        .to_string();
    assert_eq!(
        alter_log_dir(&broker, &dir, "t", 0),
        31,
        "CLUSTER_AUTHORIZATION_FAILED"
    );
    assert_eq!(
        delete_records_raw(&broker, "t", 0, 5),
        (29, -1),
        "TOPIC_AUTHORIZATION_FAILED"
    );
}

/// DeleteRecords v0 for one partition: (error code, low watermark).
fn delete_records_raw(broker: &Broker, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    let mut body = Vec::new();
    wire::put_i32(&mut body, 1);
    put_string(&mut body, topic);
    wire::put_i32(&mut body, 1);
    wire::put_i32(&mut body, partition);
    body.extend_from_slice(&offset.to_be_bytes());
    wire::put_i32(&mut body, 5000);
    let frame = wire::request_frame(21, 0, 13, false, &body);
    let response = Conn::connect(broker.addr()).round_trip(&frame, 13);
    let mut r = Bytes::new(&response[4..]);
    r.i32(); // throttle
    assert_eq!(r.i32(), 1, "topics");
    assert_eq!(r.string(), topic);
    assert_eq!(r.i32(), 1, "partitions");
    assert_eq!(r.i32(), partition);
    let low_watermark = r.i64();
    (r.i16(), low_watermark)
}
