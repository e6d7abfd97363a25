//! Record batches Kafka's log validator refuses are refused here too, with
//! Kafka's error codes, and leave nothing behind (issue 20): raw Produce
//! frames carry batches whose CRC is right but whose records are not —
//! a compression attribute on plain records; empty, 1-byte, garbage and
//! truncated gzip, snappy, lz4 and zstd payloads; record counts that do
//! not match what decompresses; snappy blocks and zstd frames declaring
//! huge sizes; batches expanding past the decompression limit; control
//! batches from a client; bad offset deltas. A librdkafka consumer then
//! reads every valid record written before, between and after them, with
//! no error (a stored bad batch would stop it for good). Compressed
//! batches whose header leaves `max_timestamp` at -1 (sarama does) are
//! found by time as Kafka finds them.

use std::io::Write;
use std::time::Duration;

use gregor_tests::kafka::{self, Isolation};
use gregor_tests::wire::{self, Conn};
use gregor_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

const CORRUPT_MESSAGE: i16 = 2;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_RECORD: i16 = 87;

const NONE: i16 = 0;
const GZIP: i16 = 1;
const SNAPPY: i16 = 2;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;
const CONTROL: i16 = 0x20;

/// `max.message.bytes` of the test topic: batches may decompress to 64
/// times it, 4 MiB.
const MAX_MESSAGE_BYTES: usize = 65_536;
const DECOMPRESSED_LIMIT: usize = 64 * MAX_MESSAGE_BYTES;

fn compress(codec: i16, data: &[u8]) -> Vec<u8> {
    match codec {
        GZIP => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(data).expect("gzip");
            gz.finish().expect("gzip")
        }
        SNAPPY => snap::raw::Encoder::new()
            .compress_vec(data)
            .expect("snappy"),
        LZ4 => {
            let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz4.write_all(data).expect("lz4");
            lz4.finish().expect("lz4")
        }
        ZSTD => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        other => panic!("codec {other}"),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// A batch of `values` with `attributes`, compressed with the codec they
/// name.
fn batch_of(attributes: i16, values: &[&[u8]]) -> Vec<u8> {
    let plain = wire::records_section(values, None);
    let section = match attributes & 7 {
        NONE => plain,
        codec => compress(codec, &plain),
    };
    wire::record_batch(attributes, values.len() as i32, now_ms(), &section)
}

/// Deterministic incompressible bytes.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 56) as u8
        })
        .collect()
}

/// Every refused batch, with the error Kafka gives it.
fn bad_batches() -> Vec<(String, Vec<u8>, i16)> {
    let values: [&[u8]; 3] = [b"bad-0", b"bad-1", b"bad-2"];
    let plain = wire::records_section(&values, None);
    let ts = now_ms();
    let mut cases = Vec::new();
    let mut case = |what: String, batch: Vec<u8>, code: i16| cases.push((what, batch, code));

    for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
        let good = compress(codec, &plain);
        let with = |section: &[u8]| wire::record_batch(codec, 3, ts, section);
        case(
            format!("codec {codec} on plain records"),
            with(&plain),
            CORRUPT_MESSAGE,
        );
        case(
            format!("codec {codec}, empty payload"),
            with(&[]),
            CORRUPT_MESSAGE,
        );
        case(
            format!("codec {codec}, 1-byte payload"),
            with(&[0x5a]),
            CORRUPT_MESSAGE,
        );
        case(
            format!("codec {codec}, garbage"),
            with(&noise(200, codec as u64)),
            CORRUPT_MESSAGE,
        );
        case(
            format!("codec {codec}, truncated to half"),
            with(&good[..good.len() / 2]),
            CORRUPT_MESSAGE,
        );
        case(
            format!("codec {codec}, last byte cut"),
            with(&good[..good.len() - 1]),
            CORRUPT_MESSAGE,
        );
        // Header and records disagree: 3 declared (with a matching last
        // offset delta), 2 or 4 inside.
        let two = compress(codec, &wire::records_section(&values[..2], None));
        case(
            format!("codec {codec}, 3 declared, 2 inside"),
            with(&two),
            INVALID_RECORD,
        );
        let four = compress(
            codec,
            &wire::records_section(&[b"a", b"b", b"c", b"d"], None),
        );
        case(
            format!("codec {codec}, 3 declared, 4 inside"),
            with(&four),
            INVALID_RECORD,
        );
    }
    let two = wire::records_section(&values[..2], None);
    case(
        "plain, 3 declared, 2 inside".into(),
        wire::record_batch(NONE, 3, ts, &two),
        INVALID_RECORD,
    );
    // recordCount disagreeing with lastOffsetDelta + 1.
    let mut count = batch_of(NONE, &values);
    count[57..61].copy_from_slice(&4i32.to_be_bytes());
    wire::set_batch_crc(&mut count);
    case(
        "record count 4, last offset delta 2".into(),
        count,
        INVALID_RECORD,
    );

    // Declared sizes: a raw snappy block claiming 4 GiB in 8 bytes, an
    // xerial block longer than the payload, a zstd frame claiming 1 TiB.
    let snappy_huge = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x61, 0x62];
    case(
        "snappy block declaring 4 GiB".into(),
        wire::record_batch(SNAPPY, 3, ts, &snappy_huge),
        CORRUPT_MESSAGE,
    );
    let mut xerial = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    xerial.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    xerial.extend_from_slice(&compress(SNAPPY, &plain));
    case(
        "xerial block declaring 2 GiB".into(),
        wire::record_batch(SNAPPY, 3, ts, &xerial),
        CORRUPT_MESSAGE,
    );
    let mut zstd_huge = 0xFD2F_B528u32.to_le_bytes().to_vec();
    zstd_huge.push(0xe0); // single segment, 8-byte content size
    zstd_huge.extend_from_slice(&(1u64 << 40).to_le_bytes());
    let raw_last_block = ((plain.len() as u32) << 3) | 1;
    zstd_huge.extend_from_slice(&raw_last_block.to_le_bytes()[..3]);
    zstd_huge.extend_from_slice(&plain);
    case(
        "zstd frame declaring 1 TiB".into(),
        wire::record_batch(ZSTD, 3, ts, &zstd_huge),
        MESSAGE_TOO_LARGE,
    );
    // Small batches expanding past the limit: one record of zeros.
    let zeros = vec![0u8; DECOMPRESSED_LIMIT + (1 << 20)];
    let bomb = wire::records_section(&[&zeros], None);
    for codec in [GZIP, LZ4, ZSTD] {
        let section = compress(codec, &bomb);
        assert!(
            section.len() < MAX_MESSAGE_BYTES / 2,
            "codec {codec}: {}",
            section.len()
        );
        case(
            format!(
                "codec {codec}, {} KiB expanding to {} MiB",
                section.len() >> 10,
                bomb.len() >> 20
            ),
            wire::record_batch(codec, 1, ts, &section),
            MESSAGE_TOO_LARGE,
        );
    }

    // Control batches are the coordinator's.
    case(
        "control batch from a client".into(),
        batch_of(CONTROL, &values),
        INVALID_RECORD,
    );
    case(
        "compressed control batch from a client".into(),
        batch_of(CONTROL | GZIP, &values),
        INVALID_RECORD,
    );

    // Offset deltas 0, 2, 1 (the same varint lengths as 0, 1, 2).
    let mut swapped = plain.clone();
    let second = 1 + usize::from(plain[0] >> 1);
    let third = second + 1 + usize::from(plain[second] >> 1);
    assert_eq!(
        (swapped[second + 3], swapped[third + 3]),
        (2, 4),
        "zigzag deltas 1, 2"
    );
    swapped[second + 3] = 4;
    swapped[third + 3] = 2;
    case(
        "plain, offset deltas 0 2 1".into(),
        wire::record_batch(NONE, 3, ts, &swapped),
        INVALID_RECORD,
    );
    case(
        "gzip, offset deltas 0 2 1".into(),
        wire::record_batch(GZIP, 3, ts, &compress(GZIP, &swapped)),
        INVALID_RECORD,
    );

    // And a plain CRC mismatch, for completeness.
    let mut crc = batch_of(NONE, &values);
    let last = crc.len() - 1;
    crc[last] ^= 0x55;
    case("CRC mismatch".into(), crc, CORRUPT_MESSAGE);
    cases
}

async fn create_topic_with(broker: &Broker, topic: &str, configs: &[(&str, &str)]) {
    kafka::create_topic_with(broker, topic, 1, configs).await
}

/// Sends one raw Produce; returns (error code, base offset, message).
fn produce(
    conn: &mut Conn,
    version: i16,
    topic: &str,
    batch: &[u8],
    id: i32,
) -> (i16, i64, Option<String>) {
    let frame = wire::produce_request(version, id, topic, 0, batch);
    let response = conn.round_trip(&frame, id);
    wire::parse_produce_response(&response, version)
}

fn high_watermark(broker: &Broker, topic: &str) -> i64 {
    kafka::end_offsets(broker, topic, 1, Isolation::ReadUncommitted)[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_batches_append_nothing_and_consumers_read_past_them() {
    let mut broker = Broker::start();
    let topic = "bad-batches";
    let max = MAX_MESSAGE_BYTES.to_string();
    create_topic_with(&broker, topic, &[("max.message.bytes", &max)]).await;
    let producer = kafka::producer(&broker, &[("linger.ms", "0")]);
    let mut expected: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    kafka::send_values(&producer, topic, 1, &expected).await;

    // Valid raw batches in each codec this librdkafka decodes (it has no
    // zstd) are accepted, at the next offsets.
    let mut conn = Conn::connect(broker.addr());
    let mut id = 100;
    for codec in [NONE, GZIP, SNAPPY, LZ4] {
        let values: Vec<String> = (0..3).map(|i| format!("raw-{codec}-{i}")).collect();
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        id += 1;
        let (error, base, message) = produce(&mut conn, 8, topic, &batch_of(codec, &refs), id);
        assert_eq!((error, message), (NONE, None), "valid codec {codec} batch");
        assert_eq!(
            base,
            expected.len() as i64,
            "base offset of the codec {codec} batch"
        );
        expected.extend(values);
    }

    let end = high_watermark(&broker, topic);
    assert_eq!(end, expected.len() as i64);
    let versions = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    let cases = bad_batches();
    for (i, (what, batch, code)) in cases.iter().enumerate() {
        // zstd needs Produce v7+ (else UNSUPPORTED_COMPRESSION_TYPE).
        let version = versions[i % versions.len()].max(if batch[22] & 7 == 4 { 7 } else { 3 });
        id += 1;
        let (error, base, message) = produce(&mut conn, version, topic, batch, id);
        assert_eq!(error, *code, "{what} (Produce v{version}): {message:?}");
        assert_eq!(base, -1, "{what}: base offset");
        if version >= 8 {
            assert!(message.is_some(), "{what}: an error message");
        }
    }
    assert_eq!(high_watermark(&broker, topic), end, "nothing appended");

    let after: Vec<String> = (0..5).map(|i| format!("after-{i}")).collect();
    kafka::send_values(&producer, topic, 1, &after).await;
    expected.extend(after);

    let messages =
        kafka::consume_all(&broker, topic, 1, expected.len(), Duration::from_secs(30)).await;
    let got: Vec<(i64, String)> = messages[&0]
        .iter()
        .map(|m| {
            (
                m.offset(),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            )
        })
        .collect();
    let want: Vec<(i64, String)> = expected
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as i64, v))
        .collect();
    assert_eq!(got, want);
    assert!(broker.is_running(), "the broker is still up");
}

/// A valid zstd batch is accepted (librdkafka here cannot decode zstd, so
/// this one is checked by offsets), and keys are checked inside compressed
/// batches on a compacted topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_zstd_and_keys_inside_compressed_batches() {
    let broker = Broker::start();
    create_topic_with(&broker, "zstd-raw", &[]).await;
    create_topic_with(&broker, "compact-raw", &[("cleanup.policy", "compact")]).await;
    let mut conn = Conn::connect(broker.addr());
    let zstd = batch_of(ZSTD, &[b"z-0", b"z-1"]);
    assert_eq!(
        produce(&mut conn, 7, "zstd-raw", &zstd, 1).0,
        NONE,
        "valid zstd"
    );
    assert_eq!(high_watermark(&broker, "zstd-raw"), 2);

    let values: [&[u8]; 2] = [b"v-0", b"v-1"];
    for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
        let plain = wire::records_section(&values, Some(&[b"k-0", b"k-1"]));
        let keyed = wire::record_batch(codec, 2, now_ms(), &compress(codec, &plain));
        let (error, _, message) = produce(&mut conn, 9, "compact-raw", &keyed, 2);
        assert_eq!((error, message), (NONE, None), "keyed, codec {codec}");
        let keyless = batch_of(codec, &values);
        let (error, _, message) = produce(&mut conn, 9, "compact-raw", &keyless, 3);
        assert_eq!(error, INVALID_RECORD, "keyless, codec {codec}: {message:?}");
    }
    assert_eq!(high_watermark(&broker, "compact-raw"), 8);
}

/// A records section of one record per timestamp (deltas from the first),
/// unkeyed, values `t-<i>`.
fn timed_section(timestamps: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, ts) in timestamps.iter().enumerate() {
        let value = format!("t-{i}");
        let mut record = vec![0u8]; // attributes
        wire::put_varint(&mut record, ts - timestamps[0]);
        wire::put_varint(&mut record, i as i64); // offset delta
        wire::put_varint(&mut record, -1); // no key
        wire::put_varint(&mut record, value.len() as i64);
        record.extend_from_slice(value.as_bytes());
        wire::put_varint(&mut record, 0); // headers
        wire::put_varint(&mut out, record.len() as i64);
        out.extend_from_slice(&record);
    }
    out
}

/// sarama writes compressed batches whose header `max_timestamp` is -1.
/// Kafka recomputes it from the records when it validates the produce and
/// rewrites the header, so ListOffsets by time (here librdkafka's
/// offsets_for_times) finds records inside such batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_lookups_find_records_in_batches_without_a_max_timestamp() {
    let broker = Broker::start();
    let topic = "sarama-times";
    create_topic_with(&broker, topic, &[]).await;
    let mut conn = Conn::connect(broker.addr());
    let start = now_ms() - 3_600_000;
    // One batch per codec, each 10 s after the last, records 1 s apart.
    let codecs = [GZIP, SNAPPY, LZ4, ZSTD, NONE];
    for (i, codec) in codecs.iter().enumerate() {
        let first = start + 10_000 * i as i64;
        let timestamps = [first, first + 1_000, first + 2_000];
        let plain = timed_section(&timestamps);
        let section = match *codec {
            NONE => plain,
            codec => compress(codec, &plain),
        };
        let mut batch = wire::record_batch(*codec, 3, first, &section);
        batch[35..43].copy_from_slice(&(-1i64).to_be_bytes()); // max timestamp
        wire::set_batch_crc(&mut batch);
        let (error, base, message) = produce(&mut conn, 9, topic, &batch, i as i32 + 1);
        assert_eq!((error, message), (NONE, None), "codec {codec}");
        assert_eq!(base, 3 * i as i64, "codec {codec}");
    }
    let consumer = kafka::plain_consumer(&broker);
    for (i, codec) in codecs.iter().enumerate() {
        let first = start + 10_000 * i as i64;
        // The first record at or after each time: inside the batch.
        for (query, want) in [(first + 500, 1), (first + 1_500, 2), (first + 2_000, 2)] {
            let mut list = TopicPartitionList::new();
            list.add_partition_offset(topic, 0, Offset::Offset(query))
                .expect("offsets_for_times list");
            let result = consumer
                .offsets_for_times(list, Duration::from_secs(10))
                .expect("offsets_for_times");
            let found = result
                .find_partition(topic, 0)
                .expect("the partition in the result");
            assert_eq!(
                found.offset(),
                Offset::Offset(3 * i as i64 + want),
                "codec {codec}, time {query}"
            );
        }
    }
    // Past the last record: none.
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, 0, Offset::Offset(start + 60_000))
        .expect("offsets_for_times list");
    let result = consumer
        .offsets_for_times(list, Duration::from_secs(10))
        .expect("offsets_for_times");
    let found = result.find_partition(topic, 0).expect("the partition");
    assert!(
        matches!(
            found.offset(),
            Offset::End | Offset::Invalid | Offset::Offset(-1)
        ),
        "{:?}",
        found.offset()
    );
}
