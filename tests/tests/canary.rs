//! Canary rollouts with real clients: a producer and a consumer keep
//! running while new versions of Produce and Fetch serve half of their
//! requests, are promoted and rolled back (no client error, every record
//! consumed once and in order); a deliberately broken Produce canary is
//! rolled back by itself and the clients recover.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gregor_tests::{kafka, plugin_dir, wait_for, Broker};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

/// A broker on a private plugin directory with an admin listener.
fn start(settings: &[(&str, &str)]) -> (tempfile::TempDir, Broker, String) {
    let plugins = gregor_tests::private_plugin_dir("gregor-canary-");
    let dir = plugins.path().display().to_string();
    let mut all = vec![("plugin.dir", dir.as_str())];
    all.extend_from_slice(settings);
    let (broker, admin) = gregor_tests::start_with_admin(&all);
    (plugins, broker, admin)
}

/// `gregor plugins <args>`, asserting it succeeded.
fn plugins(admin: &str, args: &[&str]) -> String {
    let (ok, text) = gregor_tests::gregor_cli(&[&["plugins"], args].concat(), admin);
    assert!(ok, "gregor plugins {args:?} failed: {text}");
    text
}

fn rollouts(admin: &str) -> Value {
    let text = plugins(admin, &["rollouts", "--output", "json"]);
    serde_json::from_str(text.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("rollouts is not JSON ({e}): {text}"))
}

fn active<'a>(status: &'a Value, module: &str) -> Option<&'a Value> {
    status["active"]
        .as_array()?
        .iter()
        .find(|rollout| rollout["module"] == module)
}

/// A different but equally valid build of a standard module (a custom
/// section appended), written as `<dir>/<name>.wasm`.
fn new_version(dir: &Path, name: &str, n: u8) -> PathBuf {
    let mut bytes = std::fs::read(plugin_dir().join(format!("{name}.wasm"))).expect("read module");
    let section = [b"gregor-canary".as_slice(), &[n]].concat();
    bytes.push(0);
    bytes.push(u8::try_from(section.len() + 1).expect("short"));
    bytes.push(u8::try_from(section.len() - 1).expect("short"));
    bytes.extend_from_slice(&section);
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).expect("write the new version");
    path
}

/// Waits until the canary of `module` has served `calls` requests.
fn served_by_canary(admin: &str, module: &str, calls: u64) {
    wait_for(
        &format!("the {module} canary to serve {calls} calls"),
        Duration::from_secs(60),
        || {
            let status = rollouts(admin);
            let served = active(&status, module)?["candidate"]["total"]["calls"].as_u64()?;
            (served >= calls).then_some(())
        },
    );
}

type Sent = BTreeMap<i32, Vec<u64>>;

/// A producer sending sequence numbers to both partitions until `stop`,
/// panicking on any failed delivery; one request in flight per
/// connection, so a retried batch cannot overtake a later one.
fn run_producer(
    producer: FutureProducer,
    topic: &'static str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Sent> {
    tokio::spawn(async move {
        let mut sent = Sent::new();
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<(u64, i32, String)> = (seq..seq + 20)
                .map(|s| (s, (s % 2) as i32, s.to_string()))
                .collect();
            seq += 20;
            let mut pending = Vec::new();
            for (_, partition, payload) in &batch {
                let record = FutureRecord::<(), _>::to(topic)
                    .payload(payload)
                    .partition(*partition);
                pending.push(producer.send(record, Duration::from_secs(60)));
            }
            for ((s, partition, _), delivery) in batch.iter().zip(pending) {
                let delivery = delivery.await.unwrap_or_else(|(e, _)| {
                    panic!("delivery of {s} failed during the rollout: {e}")
                });
                assert_eq!(delivery.partition, *partition);
                sent.entry(*partition).or_default().push(*s);
            }
        }
        sent
    })
}

/// A consumer reading both partitions from the start until `stop` and a
/// quiet half second, panicking on any error.
fn run_consumer(
    consumer: StreamConsumer,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Sent> {
    let mut assignment = TopicPartitionList::new();
    for partition in 0..2 {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    consumer.assign(&assignment).expect("assign partitions");
    tokio::spawn(async move {
        let mut received = Sent::new();
        loop {
            match tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
                Ok(Ok(message)) => {
                    let seq: u64 = std::str::from_utf8(message.payload().unwrap_or_default())
                        .ok()
                        .and_then(|text| text.parse().ok())
                        .expect("payload is a sequence number");
                    received.entry(message.partition()).or_default().push(seq);
                }
                Ok(Err(KafkaError::PartitionEOF(_))) => {}
                Ok(Err(error)) => panic!("consumer error during the rollout: {error}"),
                Err(_) if stop.load(Ordering::Relaxed) => return received,
                Err(_) => {}
            }
        }
    })
}

fn producer(broker: &Broker) -> FutureProducer {
    kafka::producer(
        broker,
        &[
            ("linger.ms", "5"),
            ("max.in.flight.requests.per.connection", "1"),
        ],
    )
}

fn handler_hash(admin: &str, module: &str) -> String {
    let text = plugins(admin, &["list", "--output", "json"]);
    let list: Value = serde_json::from_str(text.lines().next().unwrap_or_default()).expect("JSON");
    list["handlers"]
        .as_array()
        .and_then(|handlers| handlers.iter().find(|h| h["name"] == module))
        .and_then(|h| h["sha256"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canaries_at_half_are_promoted_and_rolled_back_under_load_without_client_errors() {
    // Identical versions: judged on traps and errors only (this busy
    // machine's latency is no verdict on a module).
    let (plugin_copy, broker, admin) = start(&[("plugin.canary.max.p99.increase.ms", "600000")]);
    let topic = "canary-load";
    kafka::create_topic(&broker, topic, 2).await;
    let versions = tempfile::tempdir().expect("a dir for new versions");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = run_consumer(kafka::stream_consumer(&broker), topic, Arc::clone(&stop));
    let writer = run_producer(producer(&broker), topic, Arc::clone(&stop));

    // New versions of Produce and Fetch each serve half of their requests.
    let produce_v1 = new_version(versions.path(), "produce", 1);
    let answer = plugins(
        &admin,
        &[
            "canary",
            &produce_v1.display().to_string(),
            "--percent",
            "50",
        ],
    );
    assert!(answer.contains("serving 50% of requests"), "{answer}");
    let fetch_v1 = new_version(versions.path(), "fetch", 1);
    plugins(
        &admin,
        &["canary", &fetch_v1.display().to_string(), "--percent", "50"],
    );
    served_by_canary(&admin, "produce", 20);
    served_by_canary(&admin, "fetch", 20);

    // Both versions are in /metrics under their own version label.
    let metrics = gregor_tests::scrape_metrics(&admin);
    for role in ["serving", "canary"] {
        assert!(
            metrics.lines().any(|line| line
                .starts_with("gregor_plugin_version_calls_total{api=\"Produce\"")
                && line.contains(&format!("role=\"{role}\""))),
            "no {role} Produce series in /metrics"
        );
    }
    let status = rollouts(&admin);
    let canary = active(&status, "produce").expect("the produce canary");
    assert_eq!(canary["candidate"]["total"]["traps"], 0, "{canary}");
    assert_eq!(
        canary["candidate"]["total"]["error_responses"], 0,
        "{canary}"
    );

    // Promote Produce: the new version serves everything, from its file.
    let promoted = plugins(&admin, &["promote", "produce"]);
    assert!(promoted.contains("promoted canary"), "{promoted}");
    let bytes = std::fs::read(&produce_v1).expect("read v1");
    assert_eq!(handler_hash(&admin, "produce"), sha256_hex(&bytes));
    assert_eq!(
        std::fs::read(plugin_copy.path().join("produce.wasm")).expect("module file"),
        bytes,
        "promote writes the new version over the module's file"
    );
    // Roll Fetch back: the serving version serves everything again.
    let rolled_back = plugins(&admin, &["rollback", "fetch"]);
    assert!(rolled_back.contains("rolled back canary"), "{rolled_back}");

    // A second Produce canary, rolled back under load too.
    let produce_v2 = new_version(versions.path(), "produce", 2);
    plugins(
        &admin,
        &[
            "canary",
            &produce_v2.display().to_string(),
            "--percent",
            "50",
        ],
    );
    served_by_canary(&admin, "produce", 20);
    plugins(&admin, &["rollback", "produce"]);
    assert_eq!(handler_hash(&admin, "produce"), sha256_hex(&bytes));

    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let sent = writer.await.expect("producer task");
    let received = reader.await.expect("consumer task");
    let total: usize = sent.values().map(Vec::len).sum();
    assert!(total > 0, "nothing was produced");
    assert_eq!(
        received, sent,
        "consumed exactly what was produced, in order, once"
    );
    let ended = rollouts(&admin)["ended"].clone();
    let outcomes: Vec<&str> = ended
        .as_array()
        .expect("ended rollouts")
        .iter()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert_eq!(
        outcomes,
        ["rolled back", "rolled back", "promoted"],
        "{ended}"
    );
    eprintln!("canary: {total} records through two canaries at 50%, a promote and two rollbacks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_canary_is_rolled_back_automatically_and_clients_recover() {
    let (_plugins, broker, admin) = start(&[("plugin.canary.min.calls", "10")]);
    let topic = "canary-broken";
    kafka::create_topic(&broker, topic, 2).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = run_consumer(kafka::stream_consumer(&broker), topic, Arc::clone(&stop));
    let writer = run_producer(producer(&broker), topic, Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A "new version" of Produce that answers NOT_ENOUGH_REPLICAS for
    // every partition: producers retry what it answers.
    let broken = gregor_tests::example_module("produce_unready");
    plugins(
        &admin,
        &[
            "canary",
            &broken.display().to_string(),
            "--name",
            "produce",
            "--percent",
            "50",
        ],
    );
    let ended = wait_for(
        "the broken canary to be rolled back",
        Duration::from_secs(60),
        || {
            let status = rollouts(&admin);
            status["ended"]
                .as_array()?
                .iter()
                .find(|e| e["module"] == "produce")
                .cloned()
        },
    );
    assert_eq!(ended["outcome"], "rolled back automatically", "{ended}");
    let reason = ended["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("error rate 100.0%"), "{reason}");
    assert!(
        ended["candidate_calls"].as_u64().unwrap_or(0) >= 10,
        "{ended}"
    );
    assert!(
        broker
            .log_tail(400)
            .contains("canary rolled back automatically"),
        "the rollback is logged"
    );
    // After the rollback the serving version takes everything again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let sent = writer.await.expect("producer task");
    let received = reader.await.expect("consumer task");
    assert!(
        sent.values().map(Vec::len).sum::<usize>() > 0,
        "nothing was produced"
    );
    assert_eq!(
        received, sent,
        "every record was delivered once, in order, after retries"
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
