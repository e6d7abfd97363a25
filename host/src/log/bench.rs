//! Storage-layer measurements, run by hand (never timed assertions):
//!
//! ```text
//! cargo test --release -p gregor -- --ignored --nocapture log::bench
//! ```
//!
//! `GREGOR_BENCH_DIR` chooses the directory (default: a temporary one under
//! `$TMPDIR`), so the figures are for that file system. Batches are 16
//! records of 1 KiB, about what librdkafka sends under load; each append
//! validates (CRC-32C, record framing) and copies the batch as a Produce
//! does, so these are the costs under the Wasm handlers.

use std::time::{Duration, Instant};

use super::batch::testing::simple_batch;
use super::manager::LogManager;
use super::partition::{OpenHints, Partition};
use super::{LogConfig, LogStore, TopicPartition};

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("GREGOR_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).expect("bench dir"),
        None => tempfile::tempdir().expect("temp dir"),
    }
}

fn report(what: &str, bytes: u64, appends: u64, records: u64, elapsed: Duration) {
    let secs = elapsed.as_secs_f64();
    println!(
        "{what}: {:.0} MB/s, {:.0} appends/s, {:.0} records/s ({} MiB in {:.2} s)",
        bytes as f64 / secs / 1e6,
        appends as f64 / secs,
        records as f64 / secs,
        bytes >> 20,
        secs
    );
}

/// Appends ~1 GiB to one partition (page cache only, Kafka's default), then
/// 2000 appends with `flush.messages=1` (an fsync per append), then the
/// same page-cache load spread over 4 partitions from 4 threads.
#[test]
#[ignore = "benchmark: run by hand with --ignored --nocapture"]
fn append_throughput() {
    let batch = simple_batch(16, 1024, 1_700_000_000_000);
    let tp = TopicPartition::new("bench", 0);

    let one_partition = |what: &str, config: LogConfig, n: u64| {
        let dir = bench_dir();
        let m = LogManager::open(dir.path()).expect("open");
        m.create_partition(&tp, config).expect("create");
        let started = Instant::now();
        for _ in 0..n {
            m.append(&tp, &batch, 0).expect("append");
        }
        report(what, n * batch.len() as u64, n, n * 16, started.elapsed());
    };
    one_partition(
        "1 partition, page cache (1 GiB segments)",
        LogConfig::default(),
        (1u64 << 30) / batch.len() as u64,
    );
    let durable = LogConfig {
        flush_messages: 1,
        ..LogConfig::default()
    };
    one_partition(
        "1 partition, flush.messages=1 (fsync per append)",
        durable,
        2000,
    );

    let dir = bench_dir();
    let m = std::sync::Arc::new(LogManager::open(dir.path()).expect("open"));
    let tps: Vec<_> = (0..4).map(|p| TopicPartition::new("bench", p)).collect();
    for tp in &tps {
        m.create_partition(tp, LogConfig::default())
            .expect("create");
    }
    let per_thread = (1u64 << 30) / 4 / batch.len() as u64;
    let started = Instant::now();
    let threads: Vec<_> = tps
        .into_iter()
        .map(|tp| {
            let m = std::sync::Arc::clone(&m);
            let batch = batch.clone();
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    m.append(&tp, &batch, 0).expect("append");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("appender");
    }
    report(
        "4 partitions from 4 threads, page cache",
        4 * per_thread * batch.len() as u64,
        4 * per_thread,
        4 * per_thread * 16,
        started.elapsed(),
    );
}

/// Opening a 1 GiB partition (8 segments of 128 MiB) after a clean
/// shutdown (index files, tail reads) and after a crash with no recovery
/// point (every batch re-validated, indexes rebuilt). The page cache is
/// warm, as after a killed process.
#[test]
#[ignore = "benchmark: run by hand with --ignored --nocapture"]
fn recovery_time() {
    let batch = simple_batch(16, 1024, 1_700_000_000_000);
    let dir = bench_dir();
    let path = dir.path().join("bench-0");
    let tp = TopicPartition::new("bench", 0);
    let config = LogConfig {
        segment_bytes: 128 << 20,
        ..LogConfig::default()
    };
    let p = Partition::open(
        path.clone(),
        tp.clone(),
        config.clone(),
        OpenHints::default(),
    )
    .expect("open");
    let n = (1u64 << 30) / batch.len() as u64;
    for _ in 0..n {
        p.append(&batch, 0).expect("append");
    }
    p.flush().expect("flush");
    drop(p);

    let clean = OpenHints {
        clean_shutdown: true,
        ..OpenHints::default()
    };
    let started = Instant::now();
    let p = Partition::open(path.clone(), tp.clone(), config.clone(), clean).expect("open");
    let clean_elapsed = started.elapsed();
    assert_eq!(p.offsets().expect("offsets").high_watermark, n as i64 * 16);
    drop(p);
    let started = Instant::now();
    let p = Partition::open(path, tp, config, OpenHints::default()).expect("open");
    let crash_elapsed = started.elapsed();
    assert_eq!(p.offsets().expect("offsets").high_watermark, n as i64 * 16);
    println!(
        "open 1 GiB ({} batches): after a clean shutdown {:.1} ms; after a crash, \
         everything re-validated: {:.0} ms ({:.0} MB/s)",
        n,
        clean_elapsed.as_secs_f64() * 1e3,
        crash_elapsed.as_secs_f64() * 1e3,
        (n * batch.len() as u64) as f64 / crash_elapsed.as_secs_f64() / 1e6
    );
}

/// `data` compressed with Kafka codec `codec` (snappy raw, as librdkafka).
fn compress(codec: i16, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        1 => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(data).expect("gzip");
            gz.finish().expect("gzip")
        }
        2 => snap::raw::Encoder::new()
            .compress_vec(data)
            .expect("snappy"),
        3 => {
            let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz4.write_all(data).expect("lz4");
            lz4.finish().expect("lz4")
        }
        _ => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
    }
}

/// Appends of compressed batches, each 16 JSON-like records of ~1 KiB
/// (about 4x compressible), 256 MiB of records per codec: what validating
/// a compressed batch (decompressing it) costs per append, next to the
/// uncompressed batch of the same records.
#[test]
#[ignore = "benchmark: run by hand with --ignored --nocapture"]
fn compressed_append_throughput() {
    use super::batch::testing::{encode_batch, Rec};
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let records: Vec<Rec> = (0..16)
        .map(|i| {
            let mut value = format!(
                "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"page_view\",\"path\":\"/a/b/c\",\"trace\":\"",
                i * 7919
            );
            while value.len() < 1000 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                value.push_str(&format!("{:x}", (seed >> 60) as u8 & 0x7));
                value.push_str(if seed & 1 == 0 { "ab" } else { "cd" });
            }
            value.push_str("\"}");
            Rec::new(1_700_000_000_000 + i, value.as_bytes())
        })
        .collect();
    let plain = encode_batch(&records);
    const HEADER: usize = 61;
    let total = 256u64 << 20;
    for codec in 0..=4i16 {
        let batch = if codec == 0 {
            plain.clone()
        } else {
            let mut b = plain[..HEADER].to_vec();
            b.extend_from_slice(&compress(codec, &plain[HEADER..]));
            let length = (b.len() - 12) as i32;
            b[8..12].copy_from_slice(&length.to_be_bytes());
            b[22] |= codec as u8;
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            b
        };
        if codec > 0 {
            let started = Instant::now();
            for _ in 0..2000 {
                let out =
                    super::codec::decompress(codec, &batch[HEADER..], 1 << 20).expect("decompress");
                assert_eq!(out.len(), plain.len() - HEADER);
            }
            println!(
                "codec {codec}: decompressing alone {:.1} us per batch",
                started.elapsed().as_secs_f64() * 1e6 / 2000.0
            );
        }
        let dir = bench_dir();
        let m = LogManager::open(dir.path()).expect("open");
        let tp = TopicPartition::new("bench", 0);
        m.create_partition(&tp, LogConfig::default())
            .expect("create");
        let n = total / plain.len() as u64;
        let started = Instant::now();
        for _ in 0..n {
            m.append(&tp, &batch, 0).expect("append");
        }
        let elapsed = started.elapsed();
        println!(
            "codec {codec}: batch {} bytes ({} uncompressed): {:.0} appends/s, \
             {:.0} MB/s of records, {:.0} MB/s as sent",
            batch.len(),
            plain.len(),
            n as f64 / elapsed.as_secs_f64(),
            (n * plain.len() as u64) as f64 / elapsed.as_secs_f64() / 1e6,
            (n * batch.len() as u64) as f64 / elapsed.as_secs_f64() / 1e6,
        );
    }
}

/// Walking and checking the records of uncompressed batches of small
/// records (`validate::records`, the per-record share of a Produce of
/// 100-byte records): ns per record, with the CRC-32C of the same batch
/// for scale.
#[test]
#[ignore = "benchmark: run by hand with --ignored --nocapture"]
fn record_validation() {
    use super::batch::BatchHeader;
    use super::validate::{records, Rules};
    let rules = Rules {
        compact: false,
        decompressed_limit: 1 << 20,
    };
    for (count, value_len) in [(1000usize, 100usize), (100, 100), (16, 1024)] {
        let batch = simple_batch(count, value_len, 1_700_000_000_000);
        let header = BatchHeader::parse(&batch).expect("header");
        let rounds = 20_000_000 / count;
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(records(std::hint::black_box(&batch), &header, rules))
                .expect("valid");
        }
        let walk = started.elapsed().as_secs_f64();
        let started = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(crc32c::crc32c(std::hint::black_box(&batch[21..])));
        }
        let crc = started.elapsed().as_secs_f64();
        let records_done = (rounds * count) as f64;
        println!(
            "{count} records of {value_len} B: walk {:.1} ns/record ({:.2} cpu-s/GiB), crc {:.1} ns/record",
            walk * 1e9 / records_done,
            walk / ((rounds * batch.len()) as f64 / f64::from(1u32 << 30)),
            crc * 1e9 / records_done,
        );
    }
}
