//! The plugin platform with real modules: hot reload under client load,
//! a brand-new ApiKey appearing and disappearing with its file, misbehaving
//! modules contained by the sandbox, and refused modules leaving the old
//! version serving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gregor_tests::wire::{request_frame, Conn};
use gregor_tests::{gregor_bin, kafka, plugin_dir, wait_for, Broker};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

const TOPIC_SUMMARY_KEY: i16 = 1000;
const CHAOS_KEY: i16 = 1099;

fn example(name: &str) -> PathBuf {
    gregor_tests::example_module(name)
}

/// A broker on a private copy of the plugin directory, with an admin
/// listener and `settings`: the directory, the broker, the admin address.
fn start_private(settings: &[(&str, &str)]) -> (tempfile::TempDir, Broker, String) {
    let plugins = private_plugin_dir();
    let plugin_path = plugins.path().display().to_string();
    let mut all = vec![("plugin.dir", plugin_path.as_str())];
    all.extend_from_slice(settings);
    let (broker, admin) = gregor_tests::start_with_admin(&all);
    (plugins, broker, admin)
}

fn private_plugin_dir() -> tempfile::TempDir {
    gregor_tests::private_plugin_dir("gregor-plugins-")
}

/// Puts a module in place the way the docs ask: write aside, then rename.
fn install_file(bytes: &[u8], dir: &Path, name: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).expect("write module");
    std::fs::rename(&tmp, dir.join(format!("{name}.wasm"))).expect("rename module into place");
}

/// A different but equally valid build of a module: the same component
/// with a custom section appended (custom sections may appear anywhere).
fn variant(module: &[u8], n: u32) -> Vec<u8> {
    let name = b"gregor-test-variant";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(&n.to_be_bytes());
    let mut out = module.to_vec();
    out.push(0);
    out.push(section.len() as u8);
    out.extend_from_slice(&section);
    out
}

fn served_keys(broker: &Broker) -> Vec<i16> {
    let mut conn = Conn::connect(broker.addr());
    conn.api_versions(1)
        .apis
        .iter()
        .map(|api| api.api_key)
        .collect()
}

/// `gregor plugins <args>`.
fn cli(admin: &str, args: &[&str]) -> (bool, String) {
    gregor_tests::gregor_cli(&[&["plugins"], args].concat(), admin)
}

fn plugin_list(admin: &str) -> Value {
    let (ok, text) = cli(admin, &["list", "--output", "json"]);
    assert!(ok, "gregor plugins list failed: {text}");
    let json = text.lines().next().unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("plugins list is not JSON ({e}): {text}"))
}

fn handler_entry(list: &Value, name: &str) -> Option<Value> {
    list["handlers"]
        .as_array()?
        .iter()
        .find(|handler| handler["name"] == name)
        .cloned()
}

/// Whether the admin API lists a refusal for a file ending in `suffix`.
fn is_refused(list: &Value, suffix: &str) -> bool {
    list["refused"].as_array().is_some_and(|refused| {
        refused
            .iter()
            .any(|r| r["file"].as_str().is_some_and(|f| f.ends_with(suffix)))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_api_key_appears_with_its_module_and_answers_its_client() {
    let plugins = private_plugin_dir();
    let plugin_path = plugins.path().display().to_string();
    let broker = Broker::start_with(&[("plugin.dir", plugin_path.as_str())]);
    assert!(!served_keys(&broker).contains(&TOPIC_SUMMARY_KEY));

    kafka::create_topic(&broker, "summary", 2).await;
    let producer = kafka::producer(&broker, &[]);
    for i in 0..5 {
        let key = format!("k{i}");
        producer
            .send(
                FutureRecord::to("summary")
                    .key(&key)
                    .payload("v")
                    .partition(i % 2),
                Duration::from_secs(30),
            )
            .await
            .expect("produce");
    }

    let bytes = std::fs::read(example("topic_summary")).expect("read the example module");
    install_file(&bytes, plugins.path(), "topic_summary");
    wait_for(
        "ApiVersions to list ApiKey 1000",
        Duration::from_secs(30),
        || {
            served_keys(&broker)
                .contains(&TOPIC_SUMMARY_KEY)
                .then_some(())
        },
    );

    let client = gregor_bin().with_file_name("topic-summary");
    let output = Command::new(&client)
        .args(["--bootstrap", &broker.bootstrap(), "summary"])
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", client.display()));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "topic-summary failed: {text} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("summary partition=0 error=0 log_start_offset=0 log_end_offset=3"),
        "{text}"
    );
    assert!(
        text.contains("summary partition=1 error=0 log_start_offset=0 log_end_offset=2"),
        "{text}"
    );
    assert!(text.contains("records=5"), "{text}");

    std::fs::remove_file(plugins.path().join("topic_summary.wasm")).expect("remove the module");
    wait_for(
        "ApiVersions to drop ApiKey 1000",
        Duration::from_secs(30),
        || (!served_keys(&broker).contains(&TOPIC_SUMMARY_KEY)).then_some(()),
    );
    // A request for the removed key is an unknown ApiKey again: closed.
    let mut conn = Conn::connect(broker.addr());
    conn.send(&request_frame(
        TOPIC_SUMMARY_KEY,
        0,
        9,
        false,
        &(-1i32).to_be_bytes(),
    ))
    .expect("send");
    conn.expect_closed("request for an unloaded ApiKey");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trapping_looping_and_hoarding_modules_are_contained_and_counted() {
    let (_plugins, broker, admin) = start_private(&[
        ("plugin.call.timeout.ms", "1000"),
        ("plugin.memory.max.bytes", "33554432"),
    ]);
    let chaos = example("chaos").display().to_string();
    let (ok, text) = cli(&admin, &["load", &chaos]);
    assert!(ok, "loading chaos failed: {text}");

    let call = |body: &[u8]| {
        let mut conn = Conn::connect(broker.addr());
        conn.send(&request_frame(CHAOS_KEY, 0, 42, false, body))
            .expect("send");
        conn
    };
    // A healthy call echoes.
    let mut echo = call(&[9]);
    let payload = echo.read_frame().expect("echo response");
    assert_eq!(payload, [0, 0, 0, 42, 9]);

    for (mode, what) in [
        (1u8, "a trap"),
        (2, "an endless loop"),
        (3, "unbounded allocation"),
    ] {
        // Without an error response from the module: the connection closes.
        let started = Instant::now();
        call(&[mode]).expect_closed(what);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what} took {:?} to be stopped",
            started.elapsed()
        );
        // With one: the client gets it, UNKNOWN_SERVER_ERROR (-1).
        let mut answered = call(&[mode, 1]);
        let payload = answered
            .read_frame()
            .unwrap_or_else(|e| panic!("{what}: no error response: {e}"));
        assert_eq!(payload, [0, 0, 0, 42, 0xff, 0xff], "{what}: error response");
        // Every other client is unaffected, on a fresh connection.
        assert!(served_keys(&broker).contains(&CHAOS_KEY));
        let mut again = call(&[9]);
        assert_eq!(
            again.read_frame().expect("echo after failure"),
            [0, 0, 0, 42, 9]
        );
    }
    let metadata = kafka::plain_consumer(&broker)
        .fetch_metadata(None, Duration::from_secs(30))
        .expect("metadata from a real client after the failures");
    assert_eq!(metadata.brokers().len(), 1);

    // The listing can lag the calls just answered (seen once under load:
    // 7 of 10 counted, the 3 of the last mode missing); wait for all 10.
    let entry = wait_for("all 10 calls counted", Duration::from_secs(30), || {
        let entry = handler_entry(&plugin_list(&admin), "chaos").expect("chaos listed");
        (entry["calls"] == 10).then_some(entry)
    });
    assert_eq!(
        entry["traps"], 4,
        "trap and out-of-memory are traps: {entry}"
    );
    assert_eq!(entry["timeouts"], 2, "the loop is a timeout: {entry}");
    assert_eq!(entry["calls"], 10, "{entry}");
}

/// `plugin.memory.total.max.bytes` bounds the linear memory of all module
/// instances together. Eight calls that each take all an instance may have
/// (64 MiB) at once, 512 MiB in all, get what is left of the total between
/// them: the broker's resident memory grows by that, not by 512 MiB. Each
/// such call fails alone, and a producer writing meanwhile is acknowledged
/// throughout, every record read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_memory_has_a_broker_wide_total_and_running_out_fails_only_those_calls() {
    const MIB: u64 = 1 << 20;
    const HOARDERS: usize = 8;
    const TOTAL: u64 = 256 * MIB;
    let total = TOTAL.to_string();
    let (_plugins, broker, admin) = start_private(&[
        ("plugin.call.timeout.ms", "3000"),
        ("plugin.memory.max.bytes", "67108864"),
        ("plugin.memory.total.max.bytes", &total),
    ]);
    let chaos = example("chaos").display().to_string();
    let (ok, text) = cli(&admin, &["load", &chaos]);
    assert!(ok, "loading chaos failed: {text}");
    let metric = |series: &str| {
        gregor_tests::metric_sample(&gregor_tests::scrape_metrics(&admin), series)
            .unwrap_or_else(|| panic!("no {series} in /metrics"))
    };
    assert_eq!(metric("gregor_plugin_memory_capacity_bytes"), TOTAL as f64);

    // A topic being produced to before, during and after.
    let topic = "steady";
    kafka::create_topic(&broker, topic, 3).await;
    let producer = kafka::producer(&broker, &[("acks", "all")]);
    let batch = |round: usize| -> Vec<String> {
        (0..50)
            .map(|i| format!("round {round} record {i}"))
            .collect()
    };
    kafka::send_values(&producer, topic, 3, &batch(0)).await;
    let used_before = metric("gregor_plugin_memory_used_bytes");
    let peak_before = broker.status_bytes("VmHWM");

    let addr = broker.addr();
    let hoarders: Vec<_> = (0..HOARDERS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conn = Conn::connect(addr);
                conn.send(&request_frame(CHAOS_KEY, 0, 42, false, &[6, 1]))
                    .expect("send");
                conn.read_frame()
            })
        })
        .collect();
    // Produced while the hoarders hold the memory (their calls last 3 s).
    for round in 1..=5 {
        kafka::send_values(&producer, topic, 3, &batch(round)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Each fails: at its deadline, answered with the module's error
    // response; or, when not even a fresh instance could have its first
    // memory, with the connection closed (there is no instance to ask for
    // an error response).
    let mut answered = 0;
    for hoarder in hoarders {
        match hoarder.join().expect("hoarder thread") {
            Ok(payload) => {
                assert_eq!(
                    payload,
                    [0, 0, 0, 42, 0xff, 0xff],
                    "a hoarding call's answer"
                );
                answered += 1;
            }
            Err(e) => assert!(gregor_tests::wire::is_closed_error(&e), "{e}"),
        }
    }
    assert!(answered >= 1, "no hoarding call got its error response");

    let grown = broker.status_bytes("VmHWM").saturating_sub(peak_before);
    let unbounded = HOARDERS as u64 * 64 * MIB;
    let left = TOTAL.saturating_sub(used_before as u64);
    eprintln!(
        "resident memory grew by {} MiB with {} MiB of the total left",
        grown / MIB,
        left / MIB
    );
    assert!(
        grown < left + 64 * MIB,
        "resident memory grew by {} MiB; the total left {} MiB to the hoarders \
         ({} MiB without it)",
        grown / MIB,
        left / MIB,
        unbounded / MIB
    );
    assert!(
        metric("gregor_plugin_memory_refused_total") >= 1.0,
        "no growth was refused"
    );
    // The hoarders' memory is back once their instances are gone.
    wait_for("the hoarders' memory back", Duration::from_secs(30), || {
        let used = metric("gregor_plugin_memory_used_bytes");
        (used <= used_before + (16 * MIB) as f64).then_some(())
    });

    // Nothing produced was lost, and the broker still serves everything.
    kafka::send_values(&producer, topic, 3, &batch(6)).await;
    let read = kafka::read_values(
        &broker,
        topic,
        3,
        kafka::Isolation::ReadUncommitted,
        7 * 50,
        Duration::from_secs(60),
    )
    .await;
    let mut values: Vec<String> = read.into_values().flatten().collect();
    values.sort();
    let mut expected: Vec<String> = (0..=6).flat_map(batch).collect();
    expected.sort();
    assert_eq!(values, expected);
    let mut echo = Conn::connect(broker.addr());
    echo.send(&request_frame(CHAOS_KEY, 0, 43, false, &[9]))
        .expect("send");
    assert_eq!(echo.read_frame().expect("echo"), [0, 0, 0, 43, 9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_modules_leave_the_previous_version_serving() {
    let (plugins, broker, admin) = start_private(&[]);
    let before = handler_entry(&plugin_list(&admin), "produce").expect("produce listed");

    // A corrupt upload is refused with the compiler's reason.
    let garbage = plugins.path().join("garbage.bin");
    std::fs::write(&garbage, b"this is not wasm").expect("write garbage");
    let (ok, text) = cli(
        &admin,
        &["load", &garbage.display().to_string(), "--name", "produce"],
    );
    assert!(!ok, "a corrupt module was accepted: {text}");
    assert!(text.contains("compiling"), "{text}");

    // A component for another world (an empty one) is refused by world.
    let empty_component = plugins.path().join("empty.bin");
    std::fs::write(&empty_component, b"\0asm\x0d\x00\x01\x00").expect("write component");
    let (ok, text) = cli(
        &admin,
        &[
            "load",
            &empty_component.display().to_string(),
            "--name",
            "fetch",
        ],
    );
    assert!(!ok, "a wrong-world module was accepted: {text}");
    assert!(
        text.contains("must target world gregor:broker/kafka-handler@0.4.0"),
        "{text}"
    );

    // A module built for an older contract is refused by version, naming
    // both: a component exporting `gregor:broker/handler@<old>` (an empty
    // instance).
    for version in ["0.1.0", "0.2.0", "0.3.0"] {
        let old_component = plugins.path().join(format!("old-{version}.bin"));
        std::fs::write(&old_component, exporting_handler(version)).expect("write component");
        let (ok, text) = cli(
            &admin,
            &[
                "load",
                &old_component.display().to_string(),
                "--name",
                "fetch",
            ],
        );
        assert!(!ok, "a {version} module was accepted: {text}");
        assert!(
            text.contains(&format!("built for gregor:broker@{version}"))
                && text.contains("serves gregor:broker@0.4.0"),
            "{text}"
        );
    }

    // A corrupt file dropped into the directory is refused too.
    install_file(b"garbage", plugins.path(), "produce");
    let list = wait_for("the refusal to be listed", Duration::from_secs(30), || {
        let list = plugin_list(&admin);
        let refused = is_refused(&list, "produce.wasm");
        refused.then_some(list)
    });
    let after = handler_entry(&list, "produce").expect("produce still listed");
    assert_eq!(
        after["sha256"], before["sha256"],
        "the old produce module must keep serving"
    );

    // And it really serves: a produce/consume round trip works.
    let producer = kafka::producer(&broker, &[]);
    producer
        .send(
            FutureRecord::to("still-works").key("k").payload("v"),
            Duration::from_secs(60),
        )
        .await
        .expect("produce with the old module");
    let received = kafka::consume_all(&broker, "still-works", 1, 1, Duration::from_secs(60)).await;
    assert_eq!(received[&0].len(), 1);

    // Putting a good module back clears the refusal.
    let good = std::fs::read(plugin_dir().join("produce.wasm")).expect("read produce");
    install_file(&variant(&good, 1), plugins.path(), "produce");
    wait_for("the refusal to clear", Duration::from_secs(30), || {
        let list = plugin_list(&admin);
        let refused = is_refused(&list, "produce.wasm");
        let sha = handler_entry(&list, "produce")?["sha256"].clone();
        (!refused && sha != before["sha256"]).then_some(())
    });
}

/// A component exporting an empty instance as
/// `gregor:broker/handler@<version>`: all the loader reads of its names.
fn exporting_handler(version: &str) -> Vec<u8> {
    let name = format!("gregor:broker/handler@{version}");
    let len = u8::try_from(name.len()).expect("a short name");
    let mut bytes = b"\0asm\x0d\x00\x01\x00\x05\x03\x01\x01\x00".to_vec();
    bytes.extend([0x0b, len + 6, 0x01, 0x00, len]);
    bytes.extend(name.as_bytes());
    bytes.extend([0x05, 0x00, 0x00]);
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_fetch_handlers_are_replaced_under_load_without_errors() {
    let (plugins, broker, admin) = start_private(&[("plugin.watch.interval.ms", "50")]);
    let topic = "hot-reload";
    kafka::create_topic(&broker, topic, 2).await;

    // A consumer reading continuously from the start of both partitions.
    let consumer = kafka::stream_consumer(&broker);
    let mut assignment = TopicPartitionList::new();
    for partition in 0..2 {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("assign");
    }
    consumer.assign(&assignment).expect("assign partitions");
    let stop = Arc::new(AtomicBool::new(false));
    let reader_stop = Arc::clone(&stop);
    let reader = tokio::spawn(async move {
        let mut received: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
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
                Ok(Err(error)) => panic!("consumer error during hot reload: {error}"),
                Err(_) if reader_stop.load(Ordering::Relaxed) => return received,
                Err(_) => {}
            }
        }
    });

    // A producer sending continuously; every delivery must succeed.
    let producer = kafka::producer(&broker, &[("linger.ms", "5")]);
    let writer_stop = Arc::clone(&stop);
    let writer = tokio::spawn(async move {
        let mut sent: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        let mut seq = 0u64;
        while !writer_stop.load(Ordering::Relaxed) {
            let mut batch = Vec::new();
            for _ in 0..50 {
                let payload = seq.to_string();
                let partition = (seq % 2) as i32;
                batch.push((seq, partition, payload));
                seq += 1;
            }
            let deliveries = batch.iter().map(|(_, partition, payload)| {
                producer.send(
                    FutureRecord::<(), _>::to(topic)
                        .payload(payload)
                        .partition(*partition),
                    Duration::from_secs(60),
                )
            });
            for ((seq, partition, _), delivery) in
                batch.iter().zip(futures_join_all(deliveries).await)
            {
                let delivery = delivery.unwrap_or_else(|(e, _)| {
                    panic!("delivery of {seq} failed during hot reload: {e}")
                });
                assert_eq!(delivery.partition, *partition);
                sent.entry(*partition).or_default().push(*seq);
            }
        }
        sent
    });

    // Replace Produce and Fetch several times while the clients run.
    let produce = std::fs::read(plugin_dir().join("produce.wasm")).expect("read produce");
    let fetch = std::fs::read(plugin_dir().join("fetch.wasm")).expect("read fetch");
    let mut reload_ms = Vec::new();
    for round in 1..=4u32 {
        for (name, module) in [("produce", &produce), ("fetch", &fetch)] {
            let bytes = variant(module, round);
            let started = Instant::now();
            install_file(&bytes, plugins.path(), name);
            let hash = sha256_hex(&bytes);
            wait_for(
                &format!("{name} round {round} to be swapped in"),
                Duration::from_secs(60),
                || {
                    let entry = handler_entry(&plugin_list(&admin), name)?;
                    (entry["sha256"].as_str() == Some(hash.as_str())).then_some(())
                },
            );
            reload_ms.push(started.elapsed().as_millis());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let sent = writer.await.expect("producer task");
    let total: usize = sent.values().map(Vec::len).sum();
    assert!(total > 0, "nothing was produced");
    // Let the consumer catch up with everything that was acknowledged.
    let received = reader.await.expect("consumer task");
    assert_eq!(
        received, sent,
        "consumed exactly what was produced, in order, once"
    );
    eprintln!("hot reload: {total} records through 8 swaps; swap-to-served times (ms, incl. admin polling): {reload_ms:?}");
}

/// The module identity the admin API reports.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Awaits every future, in order.
async fn futures_join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let handles: Vec<F> = futures.collect();
    let mut out = Vec::with_capacity(handles.len());
    for future in handles {
        out.push(future.await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_connection_policy_skips_the_error_response() {
    let (_plugins, broker, admin) =
        start_private(&[("plugin.failure.policy.chaos", "close-connection")]);
    let chaos = example("chaos").display().to_string();
    let (ok, text) = cli(&admin, &["load", &chaos]);
    assert!(ok, "loading chaos failed: {text}");
    // The module offers an error response ([1, 1]), but the policy closes.
    let mut conn = Conn::connect(broker.addr());
    conn.send(&request_frame(CHAOS_KEY, 0, 7, false, &[1, 1]))
        .expect("send");
    conn.expect_closed("a trap under the close-connection policy");
    // The close can reach the client before the trap is counted.
    let entry = gregor_tests::wait_for("the trap to be counted", Duration::from_secs(10), || {
        let entry = handler_entry(&plugin_list(&admin), "chaos").expect("chaos listed");
        (entry["traps"] != 0).then_some(entry)
    });
    assert_eq!(entry["traps"], 1, "{entry}");
}
