//! The Kafka-protocol command line (`gregor topic|group|produce|consume|
//! cluster`), run as a user runs it against a real broker, with what it
//! did checked through librdkafka (an independent client): topics created,
//! described, reconfigured and deleted; lines produced with keys and
//! headers land where Kafka's partitioner puts them; records produced by
//! librdkafka print in the asked format; a real consumer group's lag,
//! seek and delete; SASL/SCRAM and TLS connections.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use gregor_tests::certs::Certificates;
use gregor_tests::{gregor_bin, kafka, wait_for, Broker};
use rdkafka::admin::{AdminClient, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::Message;
use serde_json::Value;

/// Runs `gregor ARGS --bootstrap BOOTSTRAP` with `stdin`: success, stdout,
/// stderr.
fn cli(bootstrap: &str, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(gregor_bin())
        .args(args)
        .args(["--bootstrap", bootstrap])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gregor");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("gregor output");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `cli` with `--output json`, which must succeed: its one JSON document.
fn cli_json(bootstrap: &str, args: &[&str]) -> Value {
    let (ok, out, err) = cli(bootstrap, &[args, &["-o", "json"]].concat(), "");
    assert!(ok, "gregor {args:?} failed: {out}{err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    kafka::admin(broker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_described_reconfigured_and_deleted() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let created = cli_json(
        &bootstrap,
        &[
            "topic",
            "create",
            "orders",
            "-p",
            "3",
            "-c",
            "retention.ms=3600000",
        ],
    );
    assert_eq!(created["topics"][0]["error"], "NONE", "{created}");
    let metadata = kafka::wait_for_topic(&broker, "orders", 3);
    assert_eq!(metadata.topics()[0].partitions().len(), 3);

    // A second create is refused with Kafka's error name and exit code 1.
    let (ok, out, err) = cli(&bootstrap, &["topic", "create", "orders"], "");
    assert!(!ok, "{out}{err}");
    assert!(out.contains("TOPIC_ALREADY_EXISTS"), "{out}");

    let listed = cli_json(&bootstrap, &["topic", "list"]);
    let orders = listed["topics"]
        .as_array()
        .and_then(|topics| topics.iter().find(|t| t["topic"] == "orders"))
        .unwrap_or_else(|| panic!("orders not listed: {listed}"));
    assert_eq!(orders["partitions"], 3);

    cli_json(
        &bootstrap,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "cleanup.policy=compact",
        ],
    );
    let configs = admin(&broker)
        .describe_configs(
            &[ResourceSpecifier::Topic("orders")],
            &kafka::admin_options(),
        )
        .await
        .expect("describe configs");
    let resource = configs[0].as_ref().expect("orders configs");
    let value = |name: &str| {
        resource
            .entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(value("cleanup.policy").as_deref(), Some("compact"));
    assert_eq!(value("retention.ms").as_deref(), Some("3600000"));

    let described = cli_json(&bootstrap, &["topic", "describe", "orders"]);
    let topic = &described["topics"][0];
    let partitions = topic["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 3, "{described}");
    for (index, partition) in partitions.iter().enumerate() {
        assert_eq!(partition["partition"], index);
        assert_eq!(partition["leader"], 1, "{partition}");
        assert_eq!(partition["isr"], serde_json::json!([1]));
        assert_eq!(partition["high_watermark"], 0);
    }
    let config = |name: &str| {
        topic["configs"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == name))
            .map(|c| (c["value"].clone(), c["source"].clone()))
    };
    assert_eq!(
        config("cleanup.policy"),
        Some(("compact".into(), "DYNAMIC_TOPIC_CONFIG".into()))
    );
    // The text form is a table people read.
    let (ok, text, _) = cli(&bootstrap, &["topic", "describe", "orders"], "");
    assert!(
        ok && text.contains("PARTITION") && text.contains("HIGH-WATERMARK"),
        "{text}"
    );

    cli_json(&bootstrap, &["topic", "delete", "orders"]);
    wait_for("orders deleted", Duration::from_secs(15), || {
        (!kafka::topic_names(&broker).contains("orders")).then_some(())
    });
    let (ok, out, _) = cli(&bootstrap, &["topic", "describe", "orders"], "");
    assert!(!ok && out.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_a_groups_lag() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    kafka::create_topic(&broker, "events", 4).await;

    // 40 keyed lines with a header, through the CLI.
    let lines: String = (0..40)
        .map(|i| format!("key-{}:value-{i}\n", i % 8))
        .collect();
    let (ok, out, err) = cli(
        &bootstrap,
        &[
            "produce",
            "events",
            "-k",
            ":",
            "-H",
            "source=cli",
            "-o",
            "json",
        ],
        &lines,
    );
    assert!(ok, "{out}{err}");
    let produced: Value = serde_json::from_str(out.trim()).expect("produce summary");
    assert_eq!(produced["produced"], 40, "{produced}");

    // librdkafka reads them back; each key sits on the partition Kafka's
    // (murmur2) partitioner gives it, as librdkafka's murmur2 computes it.
    let consumer: BaseConsumer = kafka::consumer_config(&broker).create().expect("consumer");
    let seen = read_all(&consumer, "events", 4, 40);
    let producer = kafka::producer(&broker, &[("partitioner", "murmur2")]);
    for (key, partition) in keyed_partitions(&seen) {
        let delivered = producer
            .send(
                FutureRecord::to("events").key(&key).payload("probe"),
                Duration::from_secs(30),
            )
            .await
            .expect("probe");
        assert_eq!(partition, delivered.partition, "key {key}");
    }
    for record in &seen {
        assert_eq!(record.header.as_deref(), Some("cli"), "{record:?}");
        let index: usize = record.value["value-".len()..].parse().expect("index");
        assert_eq!(record.key, format!("key-{}", index % 8));
    }

    // Records with headers from librdkafka print in the asked format.
    producer
        .send(
            FutureRecord::to("events")
                .partition(2)
                .key("lib")
                .payload("from-librdkafka")
                .headers(OwnedHeaders::new().insert(Header {
                    key: "h",
                    value: Some("x"),
                })),
            Duration::from_secs(30),
        )
        .await
        .expect("produce");
    let (ok, out, err) = cli(
        &bootstrap,
        &["consume", "events", "-p", "2", "-e", "-f", "%p|%k|%v|%h\\n"],
        "",
    );
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l == "2|lib|from-librdkafka|h=x"),
        "{out}"
    );
    let (ok, out, err) = cli(&bootstrap, &["consume", "events", "-e", "-o", "json"], "");
    assert!(ok, "{err}");
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    // 40 from the CLI, 8 probes and the librdkafka record.
    assert_eq!(records.len(), 49, "{out}");
    let (ok, out, _) = cli(&bootstrap, &["consume", "events", "-n", "3"], "");
    assert!(ok && out.lines().count() == 3, "{out}");

    // A real group commits everything, then leaves.
    {
        let group: BaseConsumer = kafka::consumer_config(&broker)
            .set("group.id", "lag-group")
            .set("enable.auto.offset.store", "true")
            .create()
            .expect("group consumer");
        group.subscribe(&["events"]).expect("subscribe");
        let mut count = 0;
        wait_for("the group reads 49", Duration::from_secs(60), || {
            if let Some(Ok(_)) = group.poll(Duration::from_millis(200)) {
                count += 1;
            }
            (count >= 49).then_some(())
        });
        group
            .commit_consumer_state(CommitMode::Sync)
            .expect("commit");
    }
    let listed = cli_json(&bootstrap, &["group", "list"]);
    assert!(
        listed["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["group"] == "lag-group")),
        "{listed}"
    );
    assert_eq!(total_lag(&bootstrap, "lag-group"), 0);
    let (ok, _, err) = cli(&bootstrap, &["produce", "events", "-p", "1"], "a\nb\nc\n");
    assert!(ok, "{err}");
    assert_eq!(total_lag(&bootstrap, "lag-group"), 3);

    // Seek the (now empty) group back to the start: the lag is everything.
    wait_for("the group is empty", Duration::from_secs(30), || {
        let described = cli_json(&bootstrap, &["group", "describe", "lag-group"]);
        (described["groups"][0]["state"] == "Empty").then_some(())
    });
    cli_json(
        &bootstrap,
        &["group", "seek", "lag-group", "--to", "earliest"],
    );
    assert_eq!(total_lag(&bootstrap, "lag-group"), 52);

    cli_json(&bootstrap, &["group", "delete", "lag-group"]);
    let listed = cli_json(&bootstrap, &["group", "list"]);
    assert!(
        !listed["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["group"] == "lag-group")),
        "{listed}"
    );

    let info = cli_json(&bootstrap, &["cluster", "info"]);
    assert_eq!(info["controller"], 1, "{info}");
    assert_eq!(info["brokers"][0]["port"], broker.port(), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_and_tls_connections() {
    let certs = Certificates::generate();
    let keystore = certs.path("server.pem");
    let ca = certs.path("ca.pem");
    let broker = Broker::start_with_listeners(
        &["SASL_PLAINTEXT", "SSL"],
        &[
            ("sasl.bootstrap.users", "alice:alice-secret"),
            ("ssl.keystore.location", keystore.as_str()),
        ],
    );
    let sasl = broker.listener_bootstrap("SASL_PLAINTEXT");
    let login = |password: &str| {
        cli(
            &sasl,
            &[
                "topic",
                "create",
                "secured",
                "--sasl-mechanism",
                "SCRAM-SHA-512",
                "--sasl-user",
                "alice",
                "--sasl-password",
                password,
            ],
            "",
        )
    };
    let (ok, out, err) = login("wrong");
    assert!(!ok, "{out}");
    assert!(err.contains("SASL_AUTHENTICATION_FAILED"), "{err}");
    let (ok, out, err) = login("alice-secret");
    assert!(ok, "{out}{err}");

    let tls = broker.listener_bootstrap("SSL");
    let listed = cli_json(&tls, &["topic", "list", "--tls-ca", &ca]);
    assert!(
        listed["topics"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["topic"] == "secured")),
        "{listed}"
    );
    // Without the CA the server's certificate is not trusted.
    let (ok, _, err) = cli(&tls, &["topic", "list"], "");
    assert!(!ok, "{err}");
}

#[derive(Debug)]
struct Seen {
    partition: i32,
    key: String,
    value: String,
    header: Option<String>,
}

/// Every record of `topic`'s partitions until `count` are read.
fn read_all(consumer: &BaseConsumer, topic: &str, partitions: i32, count: usize) -> Vec<Seen> {
    let mut assignment = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .expect("assign");
    }
    consumer.assign(&assignment).expect("assign");
    let mut seen = Vec::new();
    wait_for("records read back", Duration::from_secs(60), || {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let text =
                |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
            seen.push(Seen {
                partition: message.partition(),
                key: text(message.key()),
                value: text(message.payload()),
                header: message
                    .headers()
                    .and_then(|h| h.iter().find(|h| h.key == "source").map(|h| text(h.value))),
            });
        }
        (seen.len() >= count).then_some(())
    });
    seen
}

/// Each key and the one partition its records are on.
fn keyed_partitions(seen: &[Seen]) -> BTreeMap<String, i32> {
    let mut partitions = BTreeMap::new();
    for record in seen {
        let previous = partitions.insert(record.key.clone(), record.partition);
        assert!(
            previous.is_none_or(|p| p == record.partition),
            "key {} on two partitions",
            record.key
        );
    }
    partitions
}

/// The sum of a group's lag over its partitions, as `group describe` says.
fn total_lag(bootstrap: &str, group: &str) -> i64 {
    let described = cli_json(bootstrap, &["group", "describe", group]);
    described["groups"][0]["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets: {described}"))
        .iter()
        .map(|o| o["lag"].as_i64().unwrap_or_else(|| panic!("no lag: {o}")))
        .sum()
}
