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

    let dir = bench_dir();
    let m = LogManager::open(dir.path()).expect("open");
    m.create_partition(&tp, LogConfig::default())
        .expect("create");
    let n = (1u64 << 30) / batch.len() as u64;
    let started = Instant::now();
    for _ in 0..n {
        m.append(&tp, &batch, 0).expect("append");
    }
    report(
        "1 partition, page cache (1 GiB segments)",
        n * batch.len() as u64,
        n,
        n * 16,
        started.elapsed(),
    );
    drop(m);

    let dir = bench_dir();
    let m = LogManager::open(dir.path()).expect("open");
    let durable = LogConfig {
        flush_messages: 1,
        ..LogConfig::default()
    };
    m.create_partition(&tp, durable).expect("create");
    let n = 2000u64;
    let started = Instant::now();
    for _ in 0..n {
        m.append(&tp, &batch, 0).expect("append");
    }
    report(
        "1 partition, flush.messages=1 (fsync per append)",
        n * batch.len() as u64,
        n,
        n * 16,
        started.elapsed(),
    );
    drop(m);

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
