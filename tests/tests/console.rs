//! The web console in a real browser: a broker with basic authentication
//! on its admin endpoint, topics and a consumer group made by real
//! clients (librdkafka), then headless Chromium driven by Selenium
//! (`tests/python/console_browser.py`; Debian's chromium, chromium-driver
//! and python3-selenium, installed by `.ci/deps.sh`) checks that the pages
//! show that state (topic names, partition counts, the group's lag per
//! partition) and uploads an example module through the plugins page.
//! The broker must then serve it over the Kafka protocol. Screenshots of
//! every page are saved under `<target>/console-screenshots` (printed).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::wire::Conn;
use gregor_tests::{
    example_module, private_plugin_dir, run_python, start_with_admin, workspace_root,
};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::FutureRecord;
use serde_json::Value;
use sha2::{Digest, Sha256};

const USERS: &str = "admin:admin-secret,alice:alice-secret";

/// One request on a fresh connection: the status and the body.
fn request(admin: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin endpoint");
    stream
        .set_read_timeout(Some(CALL_TIMEOUT))
        .expect("read timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\nContent-Length: 4\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\nnone");
    stream.write_all(head.as_bytes()).expect("send a request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, format!("{head}\n\n{body}"))
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// Where the screenshots go: `console-screenshots` in the target dir.
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| workspace_root().join(dir))
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("console-screenshots")
}

/// A member of `group` on `topic` that commits only when told to.
fn member(broker: &gregor_tests::Broker, group: &str, topic: &str) -> BaseConsumer {
    let mut config = kafka::config(broker);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().expect("create a consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    consumer
}

async fn send_to(producer: &rdkafka::producer::FutureProducer, topic: &str, partition: i32) {
    producer
        .send(
            FutureRecord::<str, str>::to(topic)
                .payload("late")
                .partition(partition),
            CALL_TIMEOUT,
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("produce to {topic}-{partition}: {e}"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_the_broker_and_swaps_a_plugin() {
    // Uploads are written to the plugin directory: a copy of its own.
    let plugins = private_plugin_dir("gregor-console-");
    let plugin_dir = plugins.path().display().to_string();
    let (broker, admin) = start_with_admin(&[
        ("plugin.dir", plugin_dir.as_str()),
        ("sasl.bootstrap.users", USERS),
        ("super.users", "User:admin"),
        ("admin.auth", "basic"),
        ("group.initial.rebalance.delay.ms", "0"),
    ]);
    kafka::create_topic(&broker, "orders", 3).await;
    kafka::create_topic(&broker, "payments", 2).await;
    let producer = kafka::producer(&broker, &[]);
    let values: Vec<String> = (0..30).map(|i| format!("order-{i}")).collect();
    kafka::send_values(&producer, "orders", 3, &values).await;
    kafka::send_values(&producer, "payments", 2, &values[..4]).await;

    // The group reads all 30 orders and commits, then 5 more arrive on
    // partition 1: a lag of 5 there, 0 elsewhere.
    let consumer = member(&broker, "billing", "orders");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut read = 0;
    while read < values.len() {
        assert!(Instant::now() < deadline, "read {read} of the orders");
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message.expect("consume an order");
            read += 1;
        }
    }
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit the group's positions");
    for _ in 0..5 {
        send_to(&producer, "orders", 1).await;
    }

    // Over plain HTTP: the console needs credentials like the API, any
    // authenticated user may look, and a change from another origin is
    // refused even with a super user's credentials.
    let (status, answer) = request(&admin, "GET", "/", &[]);
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("Basic realm="), "{answer}");
    let alice = basic("alice", "alice-secret");
    let (status, page) = request(
        &admin,
        "GET",
        "/console/topics",
        &[("Authorization", &alice)],
    );
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(">orders</a>") && page.contains(">payments</a>"),
        "{page}"
    );
    let root = basic("admin", "admin-secret");
    let (status, answer) = request(
        &admin,
        "PUT",
        "/authorizer",
        &[("Authorization", &root), ("Origin", "http://evil.example")],
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("cross-origin"), "{answer}");

    // In the browser.
    let module = example_module("topic_summary");
    let shots = screenshot_dir();
    let expect = serde_json::json!({
        "topics": {"orders": 3, "payments": 2},
        "group": "billing",
        "lag": {"orders-0": 0, "orders-1": 5, "orders-2": 0},
        "total_lag": 5,
    });
    let (seen, _) = run_python(
        "console_browser.py",
        &[
            &format!("http://{admin}"),
            "admin",
            "admin-secret",
            &shots.display().to_string(),
            &expect.to_string(),
            &module.display().to_string(),
        ],
    );
    println!("console screenshots in {}", shots.display());
    let seen: Value = serde_json::from_str(seen.trim()).expect("the script's JSON line");
    assert_eq!(seen["end_offsets"]["1"], 15, "{seen}");

    // The uploaded module is what the broker serves: ApiVersions lists
    // its ApiKey, and the admin API names the file's hash.
    let versions = Conn::connect(broker.addr()).api_versions(7);
    let range = versions.range(1000).expect("ApiVersions lists ApiKey 1000");
    assert_eq!((range.min_version, range.max_version), (0, 0));
    let (status, listed) = request(&admin, "GET", "/plugins", &[("Authorization", &root)]);
    assert_eq!(status, 200, "{listed}");
    let body = listed.split_once("\n\n").map_or("", |(_, body)| body);
    let listed: Value = serde_json::from_str(body).expect("plugins JSON");
    let hash = hex_sha256(&std::fs::read(&module).expect("read the module"));
    let uploaded = listed["handlers"]
        .as_array()
        .and_then(|handlers| handlers.iter().find(|h| h["name"] == "topic_summary"))
        .unwrap_or_else(|| panic!("topic_summary listed: {listed}"));
    assert_eq!(uploaded["sha256"], hash.as_str(), "{uploaded}");
    for page in ["overview", "topics", "topic", "groups", "plugins"] {
        assert!(
            shots.join(format!("{page}.png")).is_file(),
            "{page}.png saved"
        );
    }
    drop(consumer);
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
