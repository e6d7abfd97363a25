//! A full disk (issue 17.5). `log.dirs` is a small tmpfs mounted in a mount
//! namespace of the broker's own (`unshare -m`), so nothing outlives the
//! broker; the test reaches the files through /proc/<pid>/root. Skipped,
//! with the reason printed, where mounting is not permitted (no
//! CAP_SYS_ADMIN, as in an unprivileged container).
//!
//! What Kafka does on a write error is take the whole log directory offline
//! (its LogDirFailureChannel), and a broker with no log directory left
//! shuts down. Gregor keeps the directory online instead: the append that
//! did not fit fails with KAFKA_STORAGE_ERROR and is cut back to the last
//! whole batch, everything acknowledged before stays readable, and writes
//! succeed again once space is freed. (BENCHMARKS.md, "How cost grows",
//! has the broker's log of such a run.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gregor_tests::kafka::{consume_all, create_topic, producer};
use gregor_tests::Broker;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;

const SIZE: &str = "16m";

/// Why a tmpfs cannot be mounted in a new mount namespace here, if it cannot.
fn cannot_mount(dir: &Path) -> Option<String> {
    let probe = Command::new("unshare")
        .args(["-m", "--propagation", "private", "mount", "-t", "tmpfs"])
        .args(["-o", "size=1m", "tmpfs"])
        .arg(dir)
        .output();
    match probe {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "unshare -m + mount tmpfs: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("cannot run unshare: {e}")),
    }
}

async fn send(p: &FutureProducer, value: &str) -> Result<i64, RDKafkaErrorCode> {
    p.send(
        FutureRecord::<(), str>::to("full")
            .partition(0)
            .payload(value),
        Duration::from_secs(0),
    )
    .await
    .map(|delivery| delivery.offset)
    .map_err(|(e, _)| e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_writes_keeps_reads_and_recovers() {
    let mount = tempfile::Builder::new()
        .prefix("gregor-full-disk-")
        .tempdir()
        .expect("a mount point");
    if let Some(reason) = cannot_mount(mount.path()) {
        println!("SKIPPED: a_full_disk_fails_writes_keeps_reads_and_recovers: {reason}");
        return;
    }
    let dir = mount.path().display().to_string();
    let script = format!("mount -t tmpfs -o size={SIZE} tmpfs '{dir}' && exec \"$@\"");
    let broker = Broker::start_wrapped(
        &[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ],
        &[],
        &[("log.dirs", &dir)],
    );
    let pid = broker.pid().expect("the broker runs");
    // The broker's view of its log directory.
    let inside = PathBuf::from(format!("/proc/{pid}/root{dir}"));
    assert!(inside.is_dir(), "{} is not there", inside.display());
    // Room to free later.
    std::fs::write(inside.join("filler"), vec![7u8; 2 << 20]).expect("write the filler");

    create_topic(&broker, "full", 1).await;
    let p = producer(&broker, &[("linger.ms", "0"), ("retries", "0")]);
    let value = "x".repeat(10_000);
    let mut acknowledged = 0i64;
    let error = loop {
        match send(&p, &value).await {
            Ok(offset) => {
                assert_eq!(offset, acknowledged);
                acknowledged += 1;
                assert!(acknowledged < 10_000, "the 16 MiB disk never filled");
            }
            Err(code) => break code,
        }
    };
    assert!(acknowledged > 100, "only {acknowledged} records fit");
    assert_eq!(error, RDKafkaErrorCode::KafkaStorageError);
    // It stays full: the next write fails the same way.
    assert_eq!(
        send(&p, &value).await,
        Err(RDKafkaErrorCode::KafkaStorageError)
    );
    // The operator is told, with the partition and the system's error.
    let log = broker.log_tail(200);
    assert!(
        log.lines().any(|l| l.contains("the disk refused an append")
            && l.contains("partition=full-0")
            && l.contains("No space left on device")),
        "no disk failure in the log:\n{log}"
    );

    // Reads keep working and every acknowledged record is there.
    let read = consume_all(
        &broker,
        "full",
        1,
        acknowledged as usize,
        Duration::from_secs(60),
    )
    .await;
    let records = &read[&0];
    assert_eq!(records.len() as i64, acknowledged);
    assert!(records
        .iter()
        .all(|m| m.payload() == Some(value.as_bytes())));

    // Space freed: writes go on from where the acknowledged ones ended.
    std::fs::remove_file(inside.join("filler")).expect("remove the filler");
    assert_eq!(send(&p, &value).await, Ok(acknowledged));
    assert_eq!(send(&p, "after").await, Ok(acknowledged + 1));
    let read = consume_all(
        &broker,
        "full",
        1,
        acknowledged as usize + 2,
        Duration::from_secs(60),
    )
    .await;
    let records = &read[&0];
    assert_eq!(records.len() as i64, acknowledged + 2);
    assert_eq!(
        records.last().and_then(|m| m.payload()),
        Some(&b"after"[..])
    );
}
