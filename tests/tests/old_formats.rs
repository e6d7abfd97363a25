//! The old message formats (magic v0 and v1), as Kafka 3.9 served them:
//! Produce v0-2 message sets are up-converted to v2 batches when appended,
//! and Fetch v0-3 gets the stored batches down-converted (v0-1 to magic
//! v0, v2-3 to magic v1), unless the topic's
//! `message.downconversion.enable` is false (UNSUPPORTED_VERSION). Raw
//! frames write and read every version; librdkafka (the rdkafka crate)
//! reads what old producers wrote; kafka-python pinned to 0.9 and 0.10
//! and librdkafka as a client of 0.9.0 (`tests/python/old_formats.py`)
//! produce and consume with the old formats themselves.

use std::io::{Read, Write};
use std::time::Duration;

use gregor_tests::kafka::{self, Isolation};
use gregor_tests::wire::{put_i16, put_i32, request_frame, Conn, Reader};
use gregor_tests::{run_python, Broker};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value};

const NO_TIMESTAMP: i64 = -1;
const UNSUPPORTED_VERSION: i16 = 35;

/// CRC-32 (IEEE), bitwise: test data is small.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn put_bytes(buf: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_i32(buf, -1),
        Some(b) => {
            put_i32(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
    }
}

/// One legacy message entry as an old client writes it.
fn message(
    magic: i8,
    offset: i64,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut body = vec![magic as u8, attributes as u8];
    if magic == 1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    put_bytes(&mut body, key);
    put_bytes(&mut body, value);
    let mut out = offset.to_be_bytes().to_vec();
    put_i32(&mut out, body.len() as i32 + 4);
    out.extend_from_slice(&crc32(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).expect("gzip");
    gz.finish().expect("gzip")
}

/// A gzip wrapper around `inner` entries, at offset `offset`.
fn gzip_wrapper(magic: i8, offset: i64, timestamp: i64, inner: &[u8]) -> Vec<u8> {
    message(magic, offset, 1, timestamp, None, Some(&gzip(inner)))
}

/// A Produce request of `version` 0-2 (acks=1) of `records` to partition 0.
fn produce_frame(version: i16, correlation_id: i32, topic: &str, records: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    put_i16(&mut body, 1); // acks
    put_i32(&mut body, 10_000);
    put_i32(&mut body, 1);
    put_i16(&mut body, topic.len() as i16);
    body.extend_from_slice(topic.as_bytes());
    put_i32(&mut body, 1);
    put_i32(&mut body, 0);
    put_bytes(&mut body, Some(records));
    request_frame(0, version, correlation_id, false, &body)
}

/// Produces with `version` 0-2 on a new connection: (error, base offset).
fn produce(broker: &Broker, version: i16, topic: &str, records: &[u8]) -> (i16, i64) {
    let id = 100 + i32::from(version);
    let response =
        Conn::connect(broker.addr()).round_trip(&produce_frame(version, id, topic, records), id);
    let mut r = Reader::new(&response[4..]);
    assert_eq!(r.i32(), 1, "one topic");
    assert_eq!(r.string(), topic);
    assert_eq!(r.i32(), 1, "one partition");
    assert_eq!(r.i32(), 0, "partition 0");
    let answer = (r.i16(), r.i64());
    if version >= 2 {
        assert_eq!(
            r.i64(),
            NO_TIMESTAMP,
            "log append time of a CreateTime topic"
        );
    }
    if version >= 1 {
        assert_eq!(r.i32(), 0, "throttle time");
    }
    assert_eq!(r.remaining(), 0, "v{version} response fully read");
    answer
}

/// A legacy message read back: (magic, offset, timestamp, key, value).
type Read1 = (i8, i64, i64, Option<String>, Option<String>);

/// The messages of a legacy message set, wrappers opened (gzip only, as
/// these tests write and read), v1 inner offsets made absolute.
fn read_messages(mut set: &[u8]) -> Vec<Read1> {
    let mut out = Vec::new();
    while set.len() >= 12 {
        let offset = i64::from_be_bytes(set[..8].try_into().unwrap());
        let size = i32::from_be_bytes(set[8..12].try_into().unwrap()) as usize;
        if set.len() < 12 + size {
            break; // a partial message at the end, as old clients skip it
        }
        let body = &set[12..12 + size];
        set = &set[12 + size..];
        assert_eq!(
            u32::from_be_bytes(body[..4].try_into().unwrap()),
            crc32(&body[4..]),
            "message CRC"
        );
        let mut r = Reader::new(&body[4..]);
        let magic = r.i8();
        let attributes = r.i8();
        let timestamp = if magic == 1 { r.i64() } else { NO_TIMESTAMP };
        let mut field = || {
            let len = r.i32();
            (len >= 0).then(|| {
                let mut bytes = vec![0u8; len as usize];
                for b in &mut bytes {
                    *b = r.i8() as u8;
                }
                bytes
            })
        };
        let key = field();
        let value = field();
        match attributes & 7 {
            0 => out.push((magic, offset, timestamp, key.map(text), value.map(text))),
            1 => {
                let mut inner = Vec::new();
                flate2::read::GzDecoder::new(&value.expect("wrapper value")[..])
                    .read_to_end(&mut inner)
                    .expect("gunzip");
                let inner = read_messages(&inner);
                let last = inner.last().expect("inner messages").1;
                for (m, o, t, k, v) in inner {
                    assert_eq!(m, magic, "inner magic");
                    let o = if magic == 1 { offset - last + o } else { o };
                    out.push((m, o, t, k, v));
                }
            }
            codec => panic!("codec {codec} in a test answer"),
        }
    }
    out
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8")
}

/// Fetches partition 0 of `topic` from `offset` with `version` 0-3:
/// (error, high watermark, records).
fn fetch(broker: &Broker, version: i16, topic: &str, offset: i64) -> (i16, i64, Vec<u8>) {
    let mut body = Vec::new();
    put_i32(&mut body, -1);
    put_i32(&mut body, 100); // max wait
    put_i32(&mut body, 1); // min bytes
    if version >= 3 {
        put_i32(&mut body, 1 << 20);
    }
    put_i32(&mut body, 1);
    put_i16(&mut body, topic.len() as i16);
    body.extend_from_slice(topic.as_bytes());
    put_i32(&mut body, 1);
    put_i32(&mut body, 0);
    body.extend_from_slice(&offset.to_be_bytes());
    put_i32(&mut body, 1 << 20);
    let id = 200 + i32::from(version);
    let response =
        Conn::connect(broker.addr()).round_trip(&request_frame(1, version, id, false, &body), id);
    let mut r = Reader::new(&response[4..]);
    if version >= 1 {
        assert_eq!(r.i32(), 0, "throttle time");
    }
    assert_eq!(r.i32(), 1, "one topic");
    assert_eq!(r.string(), topic);
    assert_eq!(r.i32(), 1, "one partition");
    assert_eq!(r.i32(), 0, "partition 0");
    let error = r.i16();
    let high_watermark = r.i64();
    let len = r.i32();
    let records: Vec<u8> = (0..len.max(0)).map(|_| r.i8() as u8).collect();
    assert_eq!(r.remaining(), 0, "v{version} response fully read");
    (error, high_watermark, records)
}

/// Reads partition 0 of `topic` up to `end` with `version` 0-3 as an old
/// consumer does: each fetch from after the last message received (an
/// answer holds whole messages within the size read, so may stop short),
/// dropping those before the offset asked (a compressed wrapper's).
fn read_all(broker: &Broker, version: i16, topic: &str, end: i64) -> Vec<Read1> {
    let mut out: Vec<Read1> = Vec::new();
    let mut offset = 0;
    while offset < end {
        let (error, high_watermark, records) = fetch(broker, version, topic, offset);
        assert_eq!(
            (error, high_watermark),
            (0, end),
            "Fetch v{version} from {offset}"
        );
        let read: Vec<Read1> = read_messages(&records)
            .into_iter()
            .filter(|m| m.1 >= offset)
            .collect();
        assert!(
            !read.is_empty(),
            "Fetch v{version} from {offset}: no message"
        );
        offset = read.last().map_or(offset, |m| m.1 + 1);
        out.extend(read);
    }
    out
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// Raw Produce v0, v1 and v2 frames write magic v0 and v1 sets,
/// uncompressed and gzip (v1 inner offsets relative); Fetch v0-3 reads
/// them back as the format each version speaks, and librdkafka reads the
/// same records as v2 batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_producers_write_what_every_reader_reads() {
    let broker = Broker::start();
    let topic = "old-formats-raw";
    kafka::create_topic(&broker, topic, 1).await;

    let v0_plain = [
        message(0, 0, 0, 0, Some(b"a"), Some(b"v0-plain-1")),
        message(0, 1, 0, 0, None, Some(b"v0-plain-2")),
    ]
    .concat();
    let v0_gzip = gzip_wrapper(
        0,
        1,
        0,
        &[
            message(0, 0, 0, 0, Some(b"b"), Some(b"v0-gzip-1")),
            message(0, 1, 0, 0, Some(b"c"), None),
        ]
        .concat(),
    );
    let v1_plain = [
        message(1, 0, 0, 1_000, Some(b"d"), Some(b"v1-plain-1")),
        message(1, 0, 0, 1_001, None, Some(b"v1-plain-2")),
    ]
    .concat();
    let v1_gzip = gzip_wrapper(
        1,
        1,
        2_001,
        &[
            message(1, 0, 0, 2_000, Some(b"e"), Some(b"v1-gzip-1")),
            message(1, 1, 0, 2_001, None, Some(b"v1-gzip-2")),
        ]
        .concat(),
    );
    assert_eq!(produce(&broker, 0, topic, &v0_plain), (0, 0));
    assert_eq!(produce(&broker, 1, topic, &v0_gzip), (0, 2));
    assert_eq!(produce(&broker, 2, topic, &v1_plain), (0, 4));
    assert_eq!(produce(&broker, 2, topic, &v1_gzip), (0, 6));

    // (offset, timestamp as magic v1 reads it, key, value)
    let stored: Vec<(i64, i64, Option<String>, Option<String>)> = vec![
        (0, NO_TIMESTAMP, some("a"), some("v0-plain-1")),
        (1, NO_TIMESTAMP, None, some("v0-plain-2")),
        (2, NO_TIMESTAMP, some("b"), some("v0-gzip-1")),
        (3, NO_TIMESTAMP, some("c"), None),
        (4, 1_000, some("d"), some("v1-plain-1")),
        (5, 1_001, None, some("v1-plain-2")),
        (6, 2_000, some("e"), some("v1-gzip-1")),
        (7, 2_001, None, some("v1-gzip-2")),
    ];
    for version in 0..=3 {
        let magic = if version <= 1 { 0 } else { 1 };
        let expected: Vec<Read1> = stored
            .iter()
            .map(|(o, t, k, v)| {
                (
                    magic,
                    *o,
                    if magic == 0 { NO_TIMESTAMP } else { *t },
                    k.clone(),
                    v.clone(),
                )
            })
            .collect();
        assert_eq!(
            read_all(&broker, version, topic, 8),
            expected,
            "Fetch v{version}"
        );
    }
    // From the middle of an uncompressed batch (the first up-converted
    // set) the records before the offset are left out; a gzip batch comes
    // whole (the client skips what it did not ask for).
    let from_1: Vec<i64> = read_messages(&fetch(&broker, 3, topic, 1).2)
        .iter()
        .map(|m| m.1)
        .collect();
    assert_eq!(from_1, (1..8).collect::<Vec<_>>());
    let from_3: Vec<i64> = read_messages(&fetch(&broker, 3, topic, 3).2)
        .iter()
        .map(|m| m.1)
        .collect();
    assert_eq!(
        from_3[..2],
        [2, 3],
        "the gzip batch from its start: {from_3:?}"
    );
    assert!(from_3.windows(2).all(|w| w[1] == w[0] + 1), "{from_3:?}");

    // A modern client reads the same records.
    let values = kafka::read_values(
        &broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        8,
        Duration::from_secs(30),
    )
    .await;
    let expected: Vec<String> = stored
        .iter()
        .map(|(.., v)| v.clone().unwrap_or_default())
        .collect();
    assert_eq!(values[&0], expected);

    // Kafka's refusals: a bad CRC is CORRUPT_MESSAGE (2), a compressed
    // wrapper with another message INVALID_RECORD (87); nothing appended.
    let mut bad_crc = message(1, 0, 0, 1, None, Some(b"x"));
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(produce(&broker, 2, topic, &bad_crc).0, 2);
    let two = [v1_gzip.clone(), message(1, 0, 0, 1, None, Some(b"x"))].concat();
    assert_eq!(produce(&broker, 2, topic, &two).0, 87);
    assert_eq!(fetch(&broker, 2, topic, 0).1, 8);
}

/// A modern producer's batches (librdkafka, uncompressed and gzip) fetched
/// with Fetch v0 and v2 come back as magic v0 and v1 messages with their
/// offsets, keys and values (timestamps from v1); transaction markers are
/// not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_records_come_back_as_old_messages() {
    let broker = Broker::start();
    for codec in ["none", "gzip"] {
        let topic = format!("old-formats-modern-{codec}");
        kafka::create_topic(&broker, &topic, 1).await;
        let producer: FutureProducer = kafka::producer(
            &broker,
            // The four records in one batch, whatever the machine's load:
            // a compressed wrapper is sent whole, from its first offset.
            &[
                ("compression.codec", codec),
                ("linger.ms", "10000"),
                ("batch.num.messages", "4"),
            ],
        );
        let mut pending = Vec::new();
        for i in 0..4i64 {
            let key = format!("key-{i}");
            let value = format!("value-{i}");
            let record = FutureRecord::to(&topic)
                .key(&key)
                .payload(&value)
                .partition(0)
                .timestamp(5_000 + i);
            pending.push(
                producer
                    .send_result(record)
                    .map_err(|(e, _)| e)
                    .expect("enqueue"),
            );
        }
        for delivery in pending {
            delivery
                .await
                .expect("delivery")
                .map_err(|(e, _)| e)
                .expect("delivered");
        }
        for (version, magic) in [(0, 0), (2, 1)] {
            let (error, high_watermark, records) = fetch(&broker, version, &topic, 1);
            assert_eq!((error, high_watermark), (0, 4), "{codec} Fetch v{version}");
            let first = if codec == "gzip" { 0 } else { 1 };
            let expected: Vec<Read1> = (first..4)
                .map(|i| {
                    let timestamp = if magic == 1 { 5_000 + i } else { NO_TIMESTAMP };
                    (
                        magic,
                        i,
                        timestamp,
                        Some(format!("key-{i}")),
                        Some(format!("value-{i}")),
                    )
                })
                .collect();
            assert_eq!(
                read_messages(&records),
                expected,
                "{codec} Fetch v{version}"
            );
        }
    }

    // A committed transaction: its data is sent, its marker is not.
    let topic = "old-formats-txn";
    kafka::create_topic(&broker, topic, 1).await;
    let producer = kafka::transactional_producer(&broker, "old-formats-txn", &[]);
    rdkafka::producer::Producer::init_transactions(&producer, Duration::from_secs(30))
        .expect("init");
    rdkafka::producer::Producer::begin_transaction(&producer).expect("begin");
    let record = FutureRecord::<str, str>::to(topic)
        .payload("in-txn")
        .partition(0);
    producer
        .send_result(record)
        .map_err(|(e, _)| e)
        .expect("enqueue")
        .await
        .expect("delivery")
        .map_err(|(e, _)| e)
        .expect("delivered");
    rdkafka::producer::Producer::commit_transaction(&producer, Duration::from_secs(30))
        .expect("commit");
    let (error, high_watermark, records) = fetch(&broker, 3, topic, 0);
    assert_eq!((error, high_watermark), (0, 2), "data and marker stored");
    let read: Vec<(i64, Option<String>)> = read_messages(&records)
        .into_iter()
        .map(|m| (m.1, m.4))
        .collect();
    assert_eq!(read, vec![(0, some("in-txn"))]);
}

/// `message.downconversion.enable=false` on a topic: Fetch v0-3 gets
/// UNSUPPORTED_VERSION for its partitions, Fetch v4 reads as usual; the
/// broker-wide `log.message.downconversion.enable=false` does the same for
/// topics without their own value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_down_conversion_is_unsupported_version() {
    let broker = Broker::start_with(&[("log.message.downconversion.enable", "false")]);
    kafka::create_topic_with(&broker, "old-formats-off", 1, &[]).await;
    kafka::create_topic_with(
        &broker,
        "old-formats-on",
        1,
        &[("message.downconversion.enable", "true")],
    )
    .await;
    let producer = kafka::producer(&broker, &[]);
    for topic in ["old-formats-off", "old-formats-on"] {
        kafka::send_values(&producer, topic, 1, &["x".to_string()]).await;
    }
    for version in 0..=3 {
        let (error, high_watermark, records) = fetch(&broker, version, "old-formats-off", 0);
        assert_eq!(
            (error, high_watermark, records.len()),
            (UNSUPPORTED_VERSION, -1, 0),
            "v{version}"
        );
        let (error, _, records) = fetch(&broker, version, "old-formats-on", 0);
        assert_eq!((error, read_messages(&records).len()), (0, 1), "v{version}");
    }
    let response = Conn::connect(broker.addr()).round_trip(
        &gregor_tests::wire::fetch_request("old-formats-off", 0, 0, 7),
        7,
    );
    let mut r = Reader::new(&response[4..]);
    r.i32(); // throttle
    r.i32();
    r.string();
    r.i32();
    r.i32();
    assert_eq!(r.i16(), 0, "Fetch v4 reads v2 batches");
}

/// Runs a command of `old_formats.py` and returns the JSON it printed last.
fn python(args: &[&str]) -> Value {
    let (stdout, stderr) = run_python("old_formats.py", args);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("old_formats.py printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// Real old clients: kafka-python as a client of 0.9 (Produce v1 / Fetch
/// v1, magic v0) and of 0.10 (Produce v2 / Fetch v2, magic v1, gzip), and
/// librdkafka as one of 0.9.0 (gzip), each reading all that was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_clients_produce_and_consume() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let topic = "old-formats-clients";
    kafka::create_topic(&broker, topic, 1).await;
    assert_eq!(
        python(&["produce", &bootstrap, topic, "0.9", "none", "3"]),
        json!({"offsets": [0, 1, 2]})
    );
    assert_eq!(
        python(&["produce", &bootstrap, topic, "0.10", "gzip", "3"]),
        json!({"offsets": [3, 4, 5]})
    );
    for api in ["0.9", "0.10"] {
        let seen = python(&["consume", &bootstrap, topic, api, "6"]);
        let records = seen["records"].as_array().expect("records");
        let read: Vec<(i64, String, String)> = records
            .iter()
            .map(|r| {
                (
                    r[0].as_i64().unwrap(),
                    r[1].as_str().unwrap().to_string(),
                    r[2].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let expected: Vec<(i64, String, String)> = (0..6)
            .map(|i| (i, format!("k{}", i % 3), format!("v{}", i % 3)))
            .collect();
        assert_eq!(read, expected, "kafka-python {api}");
        // Magic v0 has no timestamps; v1 carries those the 0.10 producer set.
        let timestamps: Vec<i64> = records
            .iter()
            .map(|r| r[3].as_i64().unwrap_or(-1))
            .collect();
        if api == "0.9" {
            assert!(timestamps.iter().all(|&t| t == -1), "{timestamps:?}");
        } else {
            assert!(
                timestamps[..3].iter().all(|&t| t == -1) && timestamps[3..].iter().all(|&t| t > 0),
                "{timestamps:?}"
            );
        }
    }
    let values = kafka::read_values(
        &broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        6,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(values[&0], ["v0", "v1", "v2", "v0", "v1", "v2"]);

    let topic = "old-formats-rdkafka";
    kafka::create_topic(&broker, topic, 1).await;
    let seen = python(&["rdkafka", &bootstrap, topic, "3"]);
    assert_eq!(
        seen,
        json!({"values": [[0, "r0"], [1, "r1"], [2, "r2"]]}),
        "{seen}"
    );
}
