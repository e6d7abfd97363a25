//! Admin APIs with real clients: configs (topic, broker, cluster default)
//! and their live effect on the logs, partitions and cluster APIs, client
//! quotas and their enforcement on a librdkafka producer, delegation tokens
//! over SASL/SCRAM, client telemetry, config resources and feature flags
//! on the wire, the ZooKeeper-era and controller ApiKeys, graceful
//! shutdown, and everything surviving a restart.
//!
//! confluent-kafka's AdminClient (librdkafka) drives configs and partitions
//! (`tests/python/admin_configs.py`); kafka-python, an independent client,
//! drives what librdkafka has no API for (`tests/python/admin_wire.py`);
//! the rdkafka crate produces and consumes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gregor_tests::kafka::{self, CALL_TIMEOUT};
use gregor_tests::wire::{self, put_i16, put_i32, request_frame, Conn};
use gregor_tests::{free_port, wait_for, Broker};
use rdkafka::admin::{AlterConfig, NewPartitions, ResourceSpecifier};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, FutureRecord, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;
use serde_json::Value;

/// Runs a Python admin script and returns the JSON it printed last.
fn python(script: &str, args: &[&str]) -> Value {
    let (stdout, stderr) = gregor_tests::run_python(script, args);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}\n{stderr}"))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// GET /metrics on the admin endpoint.
fn scrape(admin: &str) -> String {
    gregor_tests::get_metrics(admin).1
}

/// The value of a Prometheus sample line starting with `prefix`.
fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

/// Produces `count` records to `topic` (partition 0) with the given
/// CreateTime, waiting for every delivery.
async fn produce_at(broker: &Broker, topic: &str, count: usize, timestamp: i64) {
    let producer = kafka::producer(broker, &[]);
    for i in 0..count {
        let payload = format!("record-{i}");
        producer
            .send(
                FutureRecord::to(topic)
                    .partition(0)
                    .key("k")
                    .payload(&payload)
                    .timestamp(timestamp),
                CALL_TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
    }
}

/// (low, high) watermarks of partition 0.
fn watermarks(broker: &Broker, topic: &str) -> (i64, i64) {
    kafka::plain_consumer(broker)
        .fetch_watermarks(topic, 0, CALL_TIMEOUT)
        .unwrap_or_else(|e| panic!("watermarks of {topic}: {e}"))
}

#[test]
fn configs_partitions_and_cluster_with_confluent_kafka() {
    let broker = Broker::start();
    let seen = python(
        "admin_configs.py",
        &[broker.bootstrap().as_str(), "configured"],
    );
    eprintln!("confluent-kafka: {seen}");
    // Kafka 4's 23 topic configs plus message.downconversion.enable (Kafka 3.9's,
    // honoured for the old message formats).
    assert_eq!(seen["topic_configs"], 24);
    assert_eq!(seen["partitions"], 4);
    assert_eq!(seen["election"], "ELECTION_NOT_NEEDED");
}

#[test]
fn cluster_default_broker_configs_with_kafka_python() {
    let broker = Broker::start();
    let seen = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "cluster-default", "defaulted"],
    );
    assert_eq!(seen["cluster_default"], "ok");
}

#[test]
fn partition_and_cluster_apis_on_the_wire() {
    let broker = Broker::start();
    let seen = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "partitions", "paged"],
    );
    assert_eq!(seen["pages"], 3);
    assert_eq!(seen["partitions"], 9);
}

#[test]
fn client_quotas_described_and_altered_with_kafka_python() {
    let broker = Broker::start();
    let seen = python("admin_wire.py", &[broker.bootstrap().as_str(), "quotas"]);
    assert_eq!(seen["quotas"], "ok");
}

/// request_percentage: a client id using more handler time than its quota
/// gets throttle_time_ms in its responses (capped at one quota window), and
/// the broker mutes its connection: the next request is answered only once
/// the throttle time has passed (KIP-219). Other clients are not slowed.
#[test]
fn request_quota_mutes_a_busy_client() {
    let broker = Broker::start();
    let seen = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "request-quota"],
    );
    eprintln!("request quota: {seen}");
    let delays = seen["throttle_then_next_answer_ms"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(delays >= 3, "{seen}");
}

/// controller_mutation_rate (KIP-599), as Kafka's Strict- and
/// PermissiveControllerMutationQuota apply it: a strict request
/// (CreatePartitions v3, CreateTopics v6, DeleteTopics v5) that finds the
/// token bucket empty is THROTTLING_QUOTA_EXCEEDED and changes nothing, one
/// that finds tokens left goes through unthrottled however many partitions
/// it mutates; older versions always go through and are throttled.
#[test]
fn controller_mutation_quota_refuses_strict_requests() {
    let broker = Broker::start();
    let seen = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "mutations", "mutated"],
    );
    eprintln!("mutation quota: {seen}");
    assert_eq!(seen["first_throttle_ms"], 0, "{seen}");
    let refused = seen["refused_throttle_ms"].as_array().map_or(0, Vec::len);
    assert_eq!(refused, 2, "{seen}");
    assert!(
        seen["permissive_delete_throttle_ms"].as_i64().unwrap_or(0) > 5000,
        "{seen}"
    );
}

/// A lowered retention deletes old data at once: on a topic through its
/// own config, on another through the broker's dynamic default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowered_retention_deletes_data() {
    let broker = Broker::start_with(&[("log.retention.check.interval.ms", "200")]);
    kafka::create_topic(&broker, "by-topic", 1).await;
    kafka::create_topic(&broker, "by-broker", 1).await;
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;
    produce_at(&broker, "by-topic", 50, two_hours_ago).await;
    produce_at(&broker, "by-broker", 50, two_hours_ago).await;
    // A week of retention keeps them.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(watermarks(&broker, "by-topic"), (0, 50));
    assert_eq!(watermarks(&broker, "by-broker"), (0, 50));

    let admin = kafka::admin(&broker);
    let topic_config =
        AlterConfig::new(ResourceSpecifier::Topic("by-topic")).set("retention.ms", "3600000");
    let results = admin
        .alter_configs(&[topic_config], &kafka::admin_options())
        .await
        .expect("alter topic config");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    wait_for(
        "by-topic's old records to be deleted",
        Duration::from_secs(30),
        || (watermarks(&broker, "by-topic") == (50, 50)).then_some(()),
    );
    assert_eq!(
        watermarks(&broker, "by-broker"),
        (0, 50),
        "other topics keep theirs"
    );

    let broker_config =
        AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.retention.ms", "3600000");
    let results = admin
        .alter_configs(&[broker_config], &kafka::admin_options())
        .await
        .expect("alter broker config");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    wait_for(
        "by-broker's old records to be deleted",
        Duration::from_secs(30),
        || (watermarks(&broker, "by-broker") == (50, 50)).then_some(()),
    );
    // New records are kept and readable.
    produce_at(&broker, "by-broker", 5, now_ms()).await;
    assert_eq!(watermarks(&broker, "by-broker"), (50, 55));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_partitions_take_records() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "growing", 1).await;
    let admin = kafka::admin(&broker);
    let results = admin
        .create_partitions(&[NewPartitions::new("growing", 3)], &kafka::admin_options())
        .await
        .expect("create partitions");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    kafka::wait_for_topic(&broker, "growing", 3);
    // A producer started now sees three partitions and writes to the new ones.
    let producer = kafka::producer(&broker, &[]);
    for partition in [1, 2] {
        for i in 0..10 {
            let payload = format!("p{partition}-{i}");
            producer
                .send(
                    FutureRecord::to("growing")
                        .partition(partition)
                        .key("k")
                        .payload(&payload),
                    CALL_TIMEOUT,
                )
                .await
                .unwrap_or_else(|(e, _)| panic!("produce to partition {partition}: {e}"));
        }
    }
    let consumer = kafka::plain_consumer(&broker);
    for partition in [0, 1, 2] {
        let (low, high) = consumer
            .fetch_watermarks("growing", partition, CALL_TIMEOUT)
            .expect("watermarks");
        assert_eq!((low, high), (0, if partition == 0 { 0 } else { 10 }));
    }
    let consumer: rdkafka::consumer::BaseConsumer = kafka::consumer_config(&broker)
        .set("enable.partition.eof", "false")
        .create()
        .expect("consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset("growing", 2, rdkafka::Offset::Beginning)
        .expect("assign");
    consumer.assign(&assignment).expect("assign");
    let mut payloads = Vec::new();
    let deadline = Instant::now() + CALL_TIMEOUT;
    while payloads.len() < 10 && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            payloads
                .push(String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string());
        }
    }
    assert_eq!(payloads.first().map(String::as_str), Some("p2-0"));
    assert_eq!(payloads.len(), 10);
    // Shrinking is refused as Kafka does.
    let results = admin
        .create_partitions(&[NewPartitions::new("growing", 2)], &kafka::admin_options())
        .await
        .expect("create partitions");
    let error = results[0].as_ref().expect_err("a decrease must fail");
    assert_eq!(error.1, RDKafkaErrorCode::InvalidPartitions);
}

// ---- quotas: enforcement on a real producer ----

/// Counts delivered bytes over time and the throttle times librdkafka
/// reports in its statistics.
#[derive(Clone, Default)]
struct QuotaProbe {
    delivered: Arc<Mutex<Vec<(Instant, usize)>>>,
    failed: Arc<AtomicI64>,
    throttle_max_ms: Arc<AtomicI64>,
}

impl ClientContext for QuotaProbe {
    fn stats(&self, statistics: Statistics) {
        for broker in statistics.brokers.values() {
            if let Some(throttle) = &broker.throttle {
                self.throttle_max_ms
                    .fetch_max(throttle.max, Ordering::Relaxed);
            }
        }
    }
}

impl ProducerContext for QuotaProbe {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(message) => {
                if let Ok(mut delivered) = self.delivered.lock() {
                    delivered.push((Instant::now(), message.payload_len()));
                }
            }
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Bytes per second delivered between `from` and `to`.
fn delivered_rate(probe: &QuotaProbe, from: Instant, to: Instant) -> f64 {
    let delivered = probe.delivered.lock().expect("lock");
    let bytes: usize = delivered
        .iter()
        .filter(|(at, _)| *at >= from && *at < to)
        .map(|(_, bytes)| bytes)
        .sum();
    bytes as f64 / to.duration_since(from).as_secs_f64()
}

/// A producer_byte_rate quota holds a librdkafka producer that could go
/// much faster to the quota, within 10% over 20 seconds; librdkafka sees
/// the throttle times, and the broker records them (ThrottleTimeMs).
///
/// Quota windows: Kafka's default of 11 one-second samples lets a client
/// that was idle for a window burst up to 10 s of quota at once, so its
/// 20-second averages swing by tens of percent around the quota; this
/// broker keeps 3 samples (`quota.window.num`), which makes the same
/// enforcement converge within a couple of seconds.
#[test]
fn produce_quota_throttles_a_librdkafka_producer() {
    const QUOTA: f64 = 1024.0 * 1024.0;
    const RECORD: usize = 1024;
    let admin_address = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(&[
        ("admin.listener", admin_address.as_str()),
        ("quota.window.num", "3"),
    ]);
    python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "set-quota",
            "client-id",
            "throttled-producer",
            "producer_byte_rate",
            &QUOTA.to_string(),
        ],
    );
    let probe = QuotaProbe::default();
    let producer: ThreadedProducer<QuotaProbe> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("client.id", "throttled-producer")
        .set("linger.ms", "5")
        .set("statistics.interval.ms", "500")
        .set("queue.buffering.max.kbytes", "4096")
        .create_with_context(probe.clone())
        .expect("producer");
    let payload = vec![b'x'; RECORD];
    let started = Instant::now();
    let warm_up = Duration::from_secs(8);
    let measured = Duration::from_secs(20);
    while started.elapsed() < warm_up + measured {
        match producer.send(BaseRecord::<(), [u8]>::to("quota-topic").payload(&payload)) {
            Ok(()) => {}
            Err((error, _)) if error.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err((error, _)) => panic!("produce: {error}"),
        }
    }
    let from = started + warm_up;
    let rate = delivered_rate(&probe, from, from + measured);
    let whole = delivered_rate(&probe, started, started + warm_up + measured);
    let _ = producer.flush(Duration::from_secs(30));
    let per_second: Vec<String> = (0..(warm_up + measured).as_secs())
        .map(|second| {
            let from = started + Duration::from_secs(second);
            format!(
                "{:.2}",
                delivered_rate(&probe, from, from + Duration::from_secs(1)) / QUOTA
            )
        })
        .collect();
    eprintln!(
        "delivered per second, as a share of the quota: {}",
        per_second.join(" ")
    );
    let ratio = rate / QUOTA;
    eprintln!(
        "produce quota {QUOTA} B/s: delivered {rate:.0} B/s over 20 s ({ratio:.3} of the quota), \
         {whole:.0} B/s over the whole run; librdkafka saw throttles up to {} ms",
        probe.throttle_max_ms.load(Ordering::Relaxed)
    );
    assert_eq!(probe.failed.load(Ordering::Relaxed), 0, "failed deliveries");
    assert!(
        (ratio - 1.0).abs() <= 0.10,
        "delivered {ratio:.3} of the quota"
    );
    assert!(
        probe.throttle_max_ms.load(Ordering::Relaxed) > 0,
        "librdkafka never saw a throttle time"
    );
    let text = scrape(&admin_address);
    let throttled = metric(
        &text,
        "gregor_request_throttle_time_ms_sum{request=\"Produce\"}",
    )
    .expect("ThrottleTimeMs of Produce");
    assert!(throttled > 0.0, "the broker recorded no throttle time");
}

/// A consumer_byte_rate quota throttles fetches: the consumer is held near
/// the quota and sees throttle times, while an unthrottled client id reads
/// at full speed.
#[test]
fn fetch_quota_throttles_a_consumer() {
    const QUOTA: f64 = 512.0 * 1024.0;
    let broker = Broker::start_with(&[("quota.window.num", "3")]);
    // 6 MiB of data to read.
    let producer: ThreadedProducer<QuotaProbe> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .create_with_context(QuotaProbe::default())
        .expect("producer");
    let payload = vec![b'y'; 1024];
    for _ in 0..6 * 1024 {
        loop {
            match producer.send(BaseRecord::<(), [u8]>::to("fetched").payload(&payload)) {
                Ok(()) => break,
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "set-quota",
            "client-id",
            "slow-reader",
            "consumer_byte_rate",
            &QUOTA.to_string(),
        ],
    );
    let read_for = |client_id: &str, limit: Duration| -> (usize, Duration) {
        let consumer: rdkafka::consumer::BaseConsumer = kafka::consumer_config(&broker)
            .set("client.id", client_id)
            .create()
            .expect("consumer");
        let mut assignment = rdkafka::TopicPartitionList::new();
        assignment
            .add_partition_offset("fetched", 0, rdkafka::Offset::Beginning)
            .expect("assign");
        consumer.assign(&assignment).expect("assign");
        let started = Instant::now();
        let mut bytes = 0;
        while started.elapsed() < limit && bytes < 6 * 1024 * 1024 {
            if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
                bytes += message.payload_len();
            }
        }
        (bytes, started.elapsed())
    };
    let (fast_bytes, fast_time) = read_for("fast-reader", Duration::from_secs(30));
    assert_eq!(
        fast_bytes,
        6 * 1024 * 1024,
        "the unthrottled reader read everything"
    );
    let (slow_bytes, slow_time) = read_for("slow-reader", Duration::from_secs(6));
    let rate = slow_bytes as f64 / slow_time.as_secs_f64();
    eprintln!(
        "fetch quota {QUOTA} B/s: unthrottled read 6 MiB in {fast_time:?}, throttled read {rate:.0} B/s"
    );
    // The first fetches may take one window's worth before throttling.
    assert!(rate < QUOTA * 1.6, "throttled reader went {rate:.0} B/s");
    assert!(
        fast_time < Duration::from_secs(6),
        "unthrottled read took {fast_time:?}"
    );
}

// ---- delegation tokens ----

#[test]
fn delegation_tokens_over_scram() {
    let broker = Broker::start_with_listeners(
        &["SASL_PLAINTEXT"],
        &[
            ("sasl.bootstrap.users", "alice:alice-secret"),
            ("delegation.token.secret.key", "test-token-secret"),
        ],
    );
    let sasl = broker.listener_bootstrap("SASL_PLAINTEXT");
    let seen = python(
        "admin_wire.py",
        &[
            sasl.as_str(),
            "tokens",
            broker.bootstrap().as_str(),
            "alice",
            "alice-secret",
        ],
    );
    assert_eq!(seen["tokens"], "ok");
}

// ---- client telemetry ----

/// A librdkafka client with a matching CLIENT_METRICS subscription pushes
/// its metrics (KIP-714); the broker exposes them on /metrics.
#[test]
fn client_telemetry_is_pushed_and_exposed() {
    let admin_address = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(&[("admin.listener", admin_address.as_str())]);
    python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "client-metrics",
            "all-producers",
            "org.apache.kafka.producer.",
            "1000",
            "client_id=telemetry-.*",
        ],
    );
    let producer: ThreadedProducer<QuotaProbe> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("client.id", "telemetry-producer")
        .set("enable.metrics.push", "true")
        .create_with_context(QuotaProbe::default())
        .expect("producer");
    let pushed = wait_for(
        "pushed client metrics on /metrics",
        Duration::from_secs(60),
        || {
            let _ = producer.send(BaseRecord::<(), str>::to("telemetry").payload("ping"));
            let text = scrape(&admin_address);
            let pushes = metric(&text, "gregor_client_telemetry_pushes_total").unwrap_or(0.0);
            let exposed = text.lines().any(|l| {
                l.starts_with("gregor_client_metric{")
                    && l.contains("client_id=\"telemetry-producer\"")
            });
            (pushes >= 2.0 && exposed).then_some(text)
        },
    );
    let sample = pushed
        .lines()
        .find(|l| l.starts_with("gregor_client_metric{"))
        .unwrap_or_default();
    eprintln!("client telemetry sample: {sample}");
    assert!(
        sample.contains("name=\"org.apache.kafka.producer."),
        "{sample}"
    );
}

// ---- config resources and feature flags ----

/// One ListConfigResources round trip (flexible from v0, header v2):
/// the error code and the (name, type) of each resource; v0 carries no
/// type, which a v0 client reads as CLIENT_METRICS (16).
fn list_config_resources(
    conn: &mut Conn,
    version: i16,
    types: &[i8],
    correlation_id: i32,
) -> (i16, Vec<(String, i8)>) {
    let mut body = Vec::new();
    if version >= 1 {
        wire::put_uvarint(&mut body, types.len() as u32 + 1);
        body.extend(types.iter().map(|t| *t as u8));
    }
    wire::put_uvarint(&mut body, 0); // tagged fields
    let frame = request_frame(74, version, correlation_id, true, &body);
    let response = conn.round_trip(&frame, correlation_id);
    let mut r = wire::Reader::new(&response[4..]);
    r.skip_tags(); // response header v1
    let _throttle_time_ms = r.i32();
    let error_code = r.i16();
    let count = (r.uvarint() as usize).saturating_sub(1);
    let resources = (0..count)
        .map(|_| {
            let name = r.compact_nullable_string().expect("a resource name");
            let kind = if version >= 1 { r.i8() } else { 16 };
            r.skip_tags();
            (name, kind)
        })
        .collect();
    r.skip_tags();
    assert_eq!(
        r.remaining(),
        0,
        "trailing bytes in ListConfigResources v{version}"
    );
    (error_code, resources)
}

/// One UpdateFeatures round trip (flexible from v0): the top-level error
/// code and message and, for v0-1, the per-feature results.
fn update_features(
    conn: &mut Conn,
    version: i16,
    updates: &[(&str, i16, i8)],
    validate_only: bool,
    correlation_id: i32,
) -> (i16, Option<String>, Vec<(String, i16)>) {
    let mut body = Vec::new();
    put_i32(&mut body, 60_000); // timeout_ms
    wire::put_uvarint(&mut body, updates.len() as u32 + 1);
    for (feature, level, upgrade_type) in updates {
        wire::put_compact_string(&mut body, feature);
        put_i16(&mut body, *level);
        if version == 0 {
            body.push(u8::from(*upgrade_type != 1)); // allow_downgrade
        } else {
            body.push(*upgrade_type as u8);
        }
        wire::put_uvarint(&mut body, 0);
    }
    if version >= 1 {
        body.push(u8::from(validate_only));
    }
    wire::put_uvarint(&mut body, 0);
    let frame = request_frame(57, version, correlation_id, true, &body);
    let response = conn.round_trip(&frame, correlation_id);
    let mut r = wire::Reader::new(&response[4..]);
    r.skip_tags(); // response header v1
    let _throttle_time_ms = r.i32();
    let error_code = r.i16();
    let message = r.compact_nullable_string();
    let mut results = Vec::new();
    if version <= 1 {
        let count = (r.uvarint() as usize).saturating_sub(1);
        for _ in 0..count {
            let feature = r.compact_nullable_string().expect("a feature name");
            let code = r.i16();
            let _message = r.compact_nullable_string();
            r.skip_tags();
            results.push((feature, code));
        }
    }
    r.skip_tags();
    assert_eq!(
        r.remaining(),
        0,
        "trailing bytes in UpdateFeatures v{version}"
    );
    (error_code, message, results)
}

/// ListConfigResources (74) lists the client-metrics subscriptions (v0)
/// and, from v1, this broker and every topic too, in Kafka's order, by
/// type, and refuses a type it does not support; UpdateFeatures (57)
/// refuses every feature update (Gregor supports no feature flags) with
/// Kafka's INVALID_UPDATE_VERSION answer, and accepts a request updating
/// nothing. The controller and quorum ApiKeys are not advertised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_resources_and_features_on_the_wire() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "listed", 1).await;
    python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "client-metrics",
            "listed-subscription",
            "org.apache.kafka.producer.",
            "1000",
        ],
    );
    let mut conn = Conn::connect(broker.addr());
    let versions = conn.api_versions(1);
    for (key, min, max) in [(57, 0, 2), (74, 0, 1)] {
        let range = versions
            .range(key)
            .unwrap_or_else(|| panic!("ApiKey {key} not advertised"));
        assert_eq!(
            (range.min_version, range.max_version),
            (min, max),
            "ApiKey {key}"
        );
    }
    let unserved = [
        52, 53, 54, 55, 56, 58, 59, 62, 63, 64, 67, 70, 73, 80, 81, 82,
    ]
    .into_iter()
    .chain(76..=79)
    .chain(83..=87)
    .chain(90..=92);
    for key in unserved {
        assert!(versions.range(key).is_none(), "ApiKey {key} advertised");
    }

    // v0: the client-metrics subscriptions only.
    let (code, v0) = list_config_resources(&mut conn, 0, &[], 2);
    assert_eq!(code, 0);
    assert_eq!(v0, [("listed-subscription".to_string(), 16)]);
    // v1, every type: subscriptions, then broker loggers, then brokers,
    // then topics.
    let (code, all) = list_config_resources(&mut conn, 1, &[], 3);
    assert_eq!(code, 0);
    eprintln!("ListConfigResources v1: {all:?}");
    let kinds: Vec<i8> = all.iter().map(|(_, kind)| *kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort_by_key(|kind| std::cmp::Reverse(*kind));
    assert_eq!(kinds, sorted, "Kafka's order: 16, then 8, then 4, then 2");
    assert!(all.contains(&("listed-subscription".to_string(), 16)));
    assert!(all.contains(&("listed".to_string(), 2)));
    let brokers: Vec<&(String, i8)> = all.iter().filter(|(_, kind)| *kind == 4).collect();
    assert_eq!(brokers.len(), 1, "{all:?}");
    assert!(brokers[0].0.parse::<i32>().is_ok(), "{all:?}");
    let node = brokers[0].0.clone();
    assert!(
        all.contains(&(node.clone(), 8)),
        "this node's loggers: {all:?}"
    );
    // v1, by type; groups (none with configs here) list nothing.
    let (code, topics) = list_config_resources(&mut conn, 1, &[2], 4);
    assert_eq!(code, 0);
    assert!(
        topics.iter().all(|(_, kind)| *kind == 2)
            && topics.len() == all.iter().filter(|(_, k)| *k == 2).count()
    );
    assert_eq!(
        list_config_resources(&mut conn, 1, &[8, 32], 5),
        (0, vec![(node, 8)])
    );
    // An unsupported type fails the whole request.
    assert_eq!(
        list_config_resources(&mut conn, 1, &[2, 1], 6),
        (wire::UNSUPPORTED_VERSION, vec![])
    );

    for version in 0..=2 {
        let correlation_id = 10 + i32::from(version);
        let (code, message, results) = update_features(
            &mut conn,
            version,
            &[("transaction.version", 2, 1)],
            false,
            correlation_id,
        );
        assert_eq!(code, 95, "v{version}: INVALID_UPDATE_VERSION");
        let message = message.unwrap_or_default();
        assert!(
            message.starts_with(
                "The update failed for all features since the following feature had an error: \
                 Invalid update version 2 for feature transaction.version."
            ) && message.ends_with("does not support this feature."),
            "v{version}: {message}"
        );
        assert!(results.is_empty(), "v{version}: {results:?}");
    }
    let (code, message, _) = update_features(&mut conn, 1, &[("group.version", 0, 2)], true, 20);
    assert_eq!(code, 95);
    assert!(message
        .unwrap_or_default()
        .ends_with("Feature group.version not found."));
    for version in 0..=2 {
        let answer = update_features(&mut conn, version, &[], version >= 1, 30);
        assert_eq!(answer, (0, None, vec![]), "v{version}: nothing to update");
    }

    // A controller or quorum ApiKey is unknown here: the connection closes.
    for key in [52i16, 55] {
        let mut conn = Conn::connect(broker.addr());
        let frame = request_frame(key, 0, 40, true, &[0]);
        conn.send(&frame).expect("send");
        conn.expect_closed(&format!("ApiKey {key}"));
    }
}

// ---- broker loggers ----

/// The lines of the broker's log containing `text`.
fn log_lines_with(broker: &Broker, text: &str) -> usize {
    std::fs::read_to_string(broker.log_path())
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(text))
        .count()
}

/// BROKER_LOGGER (KIP-412) with kafka-python: DescribeConfigs lists the
/// broker's loggers with their levels (DYNAMIC_BROKER_LOGGER_CONFIG);
/// IncrementalAlterConfigs SETs `gregor::apis` to DEBUG, which takes effect
/// at once (the broker logs its debug "request completed" lines) and leaves
/// its parent alone; DELETE puts it back at the root's level (the lines
/// stop). Kafka's errors: lower-case, OFF or unknown levels and unknown
/// loggers INVALID_CONFIG; APPEND, SUBTRACT, a null value, deleting the
/// root logger, another node and the legacy AlterConfigs INVALID_REQUEST.
#[test]
fn broker_logger_levels_change_live() {
    const LOGGER: &str = "gregor::apis";
    const DEBUG_LINE: &str = "request completed";
    let broker = Broker::start();
    let set = python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "broker-loggers",
            "1",
            "set",
            LOGGER,
        ],
    );
    eprintln!("broker loggers: {set}");
    assert_eq!(set["level"], "DEBUG");
    // The describe after the SET was served at DEBUG: its line is there.
    wait_for(
        "a debug line of gregor::apis",
        Duration::from_secs(10),
        || (log_lines_with(&broker, DEBUG_LINE) > 0).then_some(()),
    );
    if !matches!(set["root"].as_str(), Some("ERROR" | "FATAL" | "OFF")) {
        assert_eq!(
            log_lines_with(&broker, "Updated the log level of gregor::apis to DEBUG"),
            1,
            "{}",
            broker.log_tail(20)
        );
    }
    let reset = python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "broker-loggers",
            "1",
            "reset",
            LOGGER,
        ],
    );
    assert_eq!(reset["level"], set["root"]);
    if !matches!(set["root"].as_str(), Some("DEBUG" | "TRACE")) {
        // Back at the root's level: more traffic, no more debug lines.
        let before = log_lines_with(&broker, DEBUG_LINE);
        let mut conn = Conn::connect(broker.addr());
        for correlation_id in 0..5 {
            conn.api_versions(correlation_id);
        }
        assert_eq!(log_lines_with(&broker, DEBUG_LINE), before);
    }
}

/// One ConsumerGroupHeartbeat v0 join (member epoch 0, no topics): the
/// error code and the heartbeat interval the coordinator gives the member.
fn consumer_heartbeat_join(
    conn: &mut Conn,
    group: &str,
    member: &str,
    correlation_id: i32,
) -> (i16, i32) {
    let mut body = Vec::new();
    wire::put_compact_string(&mut body, group);
    wire::put_compact_string(&mut body, member);
    put_i32(&mut body, 0); // member epoch: joining
    wire::put_uvarint(&mut body, 0); // instance id: null
    wire::put_uvarint(&mut body, 0); // rack id: null
    put_i32(&mut body, 60_000); // rebalance timeout
    wire::put_uvarint(&mut body, 1); // subscribed topic names: []
    wire::put_uvarint(&mut body, 0); // server assignor: null
    wire::put_uvarint(&mut body, 1); // owned topic partitions: []
    wire::put_uvarint(&mut body, 0); // tagged fields
    let frame = request_frame(68, 0, correlation_id, true, &body);
    let response = conn.round_trip(&frame, correlation_id);
    let mut r = wire::Reader::new(&response[4..]);
    r.skip_tags(); // response header v1
    let _throttle_time_ms = r.i32();
    let error_code = r.i16();
    let _message = r.compact_nullable_string();
    let _member_id = r.compact_nullable_string();
    let _member_epoch = r.i32();
    (error_code, r.i32())
}

/// GROUP config resources (KIP-848): `consumer.heartbeat.interval.ms` set
/// for one group is described at DYNAMIC_GROUP_CONFIG (8), listed by
/// ListConfigResources, given to the group's KIP-848 members at once (and
/// not to other groups'), refused out of range with INVALID_CONFIG, kept
/// across a restart, and deleted back to the broker default.
#[test]
fn group_configs_change_the_consumer_heartbeat_interval() {
    const GROUP: &str = "configured-group";
    let mut broker = Broker::start();
    let set = python(
        "admin_wire.py",
        &[
            broker.bootstrap().as_str(),
            "group-configs",
            GROUP,
            "set",
            "7000",
        ],
    );
    eprintln!("group configs: {set}");
    assert_eq!(
        set["configs"]["consumer.heartbeat.interval.ms"]["source"],
        8
    );

    let mut conn = Conn::connect(broker.addr());
    assert_eq!(
        consumer_heartbeat_join(&mut conn, GROUP, "member-of-configured-a", 1),
        (0, 7000)
    );
    assert_eq!(
        consumer_heartbeat_join(&mut conn, "another-group", "member-of-another-a", 2),
        (0, 5000)
    );
    drop(conn);

    broker.restart();
    let shown = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "group-configs", GROUP, "show"],
    );
    assert_eq!(
        shown["configs"]["consumer.heartbeat.interval.ms"]["value"],
        "7000"
    );
    assert_eq!(
        shown["configs"]["consumer.heartbeat.interval.ms"]["source"],
        8
    );
    assert_eq!(shown["listed"], true);
    let mut conn = Conn::connect(broker.addr());
    assert_eq!(
        consumer_heartbeat_join(&mut conn, GROUP, "member-of-configured-b", 3),
        (0, 7000)
    );

    let reset = python(
        "admin_wire.py",
        &[broker.bootstrap().as_str(), "group-configs", GROUP, "reset"],
    );
    assert_eq!(
        reset["configs"]["consumer.heartbeat.interval.ms"]["value"],
        "5000"
    );
    assert_eq!(
        reset["configs"]["consumer.heartbeat.interval.ms"]["source"],
        5
    );
    assert_eq!(reset["listed"], false);
    assert_eq!(
        consumer_heartbeat_join(&mut conn, GROUP, "member-of-configured-c", 4),
        (0, 5000)
    );
}

// ---- ZooKeeper-era ApiKeys ----

/// Kafka 4 (KRaft) no longer serves LeaderAndIsr (4), StopReplica (5),
/// UpdateMetadata (6) or ControlledShutdown (7): they are not in
/// ApiVersions, and a request for one is an unknown ApiKey, which closes
/// the connection. Every admin ApiKey of this issue is advertised.
#[test]
fn zookeeper_era_keys_are_not_served() {
    let broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());
    let versions = conn.api_versions(1);
    for key in [4, 5, 6, 7] {
        assert!(versions.range(key).is_none(), "ApiKey {key} advertised");
    }
    for (key, min, max) in [
        (23, 0, 4),
        (32, 0, 4),
        (33, 0, 2),
        (37, 0, 3),
        (38, 0, 3),
        (39, 0, 2),
        (40, 0, 2),
        (41, 0, 3),
        (43, 0, 2),
        (44, 0, 1),
        (45, 0, 1),
        (46, 0, 0),
        (48, 0, 1),
        (49, 0, 1),
        (60, 0, 2),
        (71, 0, 0),
        (72, 0, 0),
        (75, 0, 0),
    ] {
        let range = versions
            .range(key)
            .unwrap_or_else(|| panic!("ApiKey {key} not advertised"));
        assert_eq!(
            (range.min_version, range.max_version),
            (min, max),
            "ApiKey {key}"
        );
    }
    for key in [4i16, 5, 6, 7] {
        let mut conn = Conn::connect(broker.addr());
        let mut body = Vec::new();
        put_i32(&mut body, 1); // controller id
        put_i32(&mut body, 0); // controller epoch
        let frame = request_frame(key, 0, 7, false, &body);
        conn.send(&frame).expect("send");
        conn.expect_closed(&format!("ApiKey {key}"));
    }
    // The broker goes on serving.
    assert!(Conn::connect(broker.addr())
        .api_versions(2)
        .range(0)
        .is_some());
}

// ---- graceful shutdown ----

/// SIGTERM drains in-flight requests (a long-poll fetch waiting for data
/// gets its answer), then flushes and checkpoints the logs: the exit is
/// clean, the clean-shutdown marker is written, and a restart needs no
/// recovery and has every record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_requests_and_flushes() {
    let mut broker = Broker::start();
    kafka::create_topic(&broker, "drained", 1).await;
    produce_at(&broker, "drained", 20, now_ms()).await;

    // A Fetch v4 at the end of the log, waiting up to 4 s for data.
    let mut conn = Conn::connect(broker.addr());
    let mut body = Vec::new();
    put_i32(&mut body, -1); // replica id
    put_i32(&mut body, 4000); // max wait
    put_i32(&mut body, 1); // min bytes
    put_i32(&mut body, 1 << 20); // max bytes
    body.push(0); // isolation level
    put_i32(&mut body, 1); // topics
    put_i16(&mut body, "drained".len() as i16);
    body.extend_from_slice(b"drained");
    put_i32(&mut body, 1); // partitions
    put_i32(&mut body, 0);
    body.extend_from_slice(&20i64.to_be_bytes()); // fetch offset: the end
    put_i32(&mut body, 1 << 20);
    let frame = request_frame(1, 4, 99, false, &body);
    conn.send(&frame).expect("send fetch");
    std::thread::sleep(Duration::from_millis(500));

    let stopping = Instant::now();
    let status = std::thread::scope(|scope| {
        let answer = scope.spawn(move || {
            let payload = conn.read_frame().expect("the in-flight fetch is answered");
            (wire::correlation_id_of(&payload), payload.len())
        });
        let status = broker.stop();
        let (correlation_id, _) = answer.join().expect("reader thread");
        assert_eq!(correlation_id, 99);
        status
    });
    assert!(status.success(), "exit after SIGTERM: {status}");
    eprintln!("SIGTERM to exit: {:?}", stopping.elapsed());
    let marker = walk(broker.data_dir())
        .into_iter()
        .any(|path| path.ends_with(".kafka_cleanshutdown"));
    assert!(
        marker,
        "no clean-shutdown marker in {}",
        broker.data_dir().display()
    );

    broker.restart();
    assert!(
        !broker.log_tail(200).contains("recovering"),
        "a clean restart recovered segments"
    );
    assert_eq!(watermarks(&broker, "drained"), (0, 20));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

// ---- persistence ----

/// Topic and broker configs, client quotas, client-metrics subscriptions
/// and delegation tokens survive a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_state_survives_a_restart() {
    let mut broker = Broker::start_with_listeners(
        &["SASL_PLAINTEXT"],
        &[
            ("sasl.bootstrap.users", "alice:alice-secret"),
            ("delegation.token.secret.key", "test-token-secret"),
        ],
    );
    kafka::create_topic(&broker, "kept", 2).await;
    let admin = kafka::admin(&broker);
    let configs = [
        AlterConfig::new(ResourceSpecifier::Topic("kept")).set("retention.ms", "123456789"),
        AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.segment.bytes", "268435456"),
    ];
    let results = admin
        .alter_configs(&configs, &kafka::admin_options())
        .await
        .expect("alter configs");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let bootstrap = broker.bootstrap();
    python(
        "admin_wire.py",
        &[
            bootstrap.as_str(),
            "set-quota",
            "user",
            "alice",
            "producer_byte_rate",
            "4096",
        ],
    );
    python(
        "admin_wire.py",
        &[
            bootstrap.as_str(),
            "client-metrics",
            "kept-sub",
            "org.apache.kafka.",
            "2000",
        ],
    );
    let sasl = broker.listener_bootstrap("SASL_PLAINTEXT");
    let token = python(
        "admin_wire.py",
        &[sasl.as_str(), "create-token", "alice", "alice-secret"],
    );

    broker.restart();

    let admin = kafka::admin(&broker);
    let described = admin
        .describe_configs(
            &[
                ResourceSpecifier::Topic("kept"),
                ResourceSpecifier::Broker(1),
            ],
            &kafka::admin_options(),
        )
        .await
        .expect("describe configs");
    let entries: Vec<BTreeMap<String, Option<String>>> = described
        .into_iter()
        .map(|r| {
            r.expect("resource")
                .entries
                .into_iter()
                .map(|e| (e.name, e.value))
                .collect()
        })
        .collect();
    assert_eq!(entries[0]["retention.ms"].as_deref(), Some("123456789"));
    assert_eq!(entries[0]["segment.bytes"].as_deref(), Some("268435456"));
    assert_eq!(
        entries[1]["log.segment.bytes"].as_deref(),
        Some("268435456")
    );
    // Passwords in static configs are never disclosed (sensitive, null).
    assert_eq!(entries[1].get("sasl.bootstrap.users"), Some(&None));
    let bootstrap = broker.bootstrap();
    let seen = python(
        "admin_wire.py",
        &[bootstrap.as_str(), "show-state", "kept-sub"],
    );
    assert_eq!(seen["quotas"][0]["values"]["producer_byte_rate"], 4096.0);
    assert_eq!(seen["subscription"]["interval.ms"], "2000");
    let sasl = broker.listener_bootstrap("SASL_PLAINTEXT");
    let tokens = python(
        "admin_wire.py",
        &[sasl.as_str(), "list-tokens", "alice", "alice-secret"],
    );
    assert_eq!(tokens["token_ids"][0], token["token_id"]);
}
