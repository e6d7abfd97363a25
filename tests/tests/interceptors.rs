//! Interceptors (PLUGINS.md, "Interceptors"): modules that wrap the
//! standard handler of an ApiKey, chained per ApiKey in configured order,
//! driven by real clients. The JSON validator in front of Produce refuses
//! records that are not JSON with INVALID_RECORD and per-record errors
//! (KIP-467) while good records land; the tenant filter lets two SASL
//! users of different tenants both use a topic and a group called
//! `orders` without seeing each other's (stored as `acme.orders` and
//! `globex.orders`); the two chained on Produce run their request hooks
//! in the configured order and their response hooks in reverse; a
//! configured interceptor that is not loaded fails the request closed.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gregor_tests::wire::{record_batch, records_section, request_frame, Conn};
use gregor_tests::{kafka, Broker};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use serde_json::Value;

/// Every API the tenant filter wraps, by module name.
const TENANT_APIS: &[&str] = &[
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "create_topics",
    "offset_for_leader_epoch",
];

const INVALID_RECORD: i16 = 87;

/// A broker serving the standard modules plus the named examples, with an
/// admin endpoint: the plugin directory (kept alive), the broker, the
/// admin address.
fn start(examples: &[&str], settings: &[(&str, &str)]) -> (tempfile::TempDir, Broker, String) {
    let plugins = gregor_tests::plugin_dir_with_examples(examples);
    let dir = plugins.path().display().to_string();
    let mut all = vec![("plugin.dir", dir.as_str())];
    all.extend_from_slice(settings);
    let (broker, admin) = gregor_tests::start_with_admin(&all);
    (plugins, broker, admin)
}

fn batch(values: &[&str]) -> Bytes {
    let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    let section = records_section(&values, None);
    Bytes::from(record_batch(
        0,
        values.len() as i32,
        1_700_000_000_000,
        &section,
    ))
}

/// Produce v9 (acks=all) of one batch per topic, partition 0, over the
/// wire; the decoded response.
fn produce(broker: &Broker, batches: &[(&str, Bytes)]) -> ProduceResponse {
    produce_on(&mut Conn::connect(broker.addr()), batches)
}

/// As [`produce`], on an open connection.
fn produce_on(conn: &mut Conn, batches: &[(&str, Bytes)]) -> ProduceResponse {
    let version = 9;
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    for (topic, records) in batches {
        let mut data = TopicProduceData::default();
        data.name = TopicName(StrBytes::from_string(topic.to_string()));
        let mut partition = PartitionProduceData::default();
        partition.index = 0;
        partition.records = Some(records.clone());
        data.partition_data.push(partition);
        request.topic_data.push(data);
    }
    let mut body = BytesMut::new();
    request.encode(&mut body, version).expect("encode Produce");
    let frame = request_frame(ProduceRequest::KEY, version, 11, true, &body);
    let payload = conn.round_trip(&frame, 11);
    let mut buf = Bytes::from(payload);
    ResponseHeader::decode(&mut buf, 1).expect("response header");
    ProduceResponse::decode(&mut buf, version).expect("Produce response")
}

fn partition<'a>(
    response: &'a ProduceResponse,
    topic: &str,
) -> &'a kafka_protocol::messages::produce_response::PartitionProduceResponse {
    let answer = response
        .responses
        .iter()
        .find(|t| t.name.0.as_str() == topic)
        .unwrap_or_else(|| panic!("no answer for {topic}: {response:?}"));
    assert_eq!(answer.partition_responses.len(), 1, "{response:?}");
    &answer.partition_responses[0]
}

fn plugin_list(admin: &str) -> Value {
    let (ok, text) = gregor_tests::gregor_cli(&["plugins", "list", "--output", "json"], admin);
    assert!(ok, "gregor plugins list failed: {text}");
    let json = text.lines().next().unwrap_or_default();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("plugins list is not JSON ({e}): {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_validator_refuses_records_that_are_not_json() {
    let (_plugins, broker, admin) = start(
        &["json_validator"],
        &[
            ("plugin.interceptors.produce", "json_validator"),
            ("plugin.grants.json_validator", "metadata.read"),
            ("json.validator.topics", "events.*"),
        ],
    );
    kafka::create_topic(&broker, "events.orders", 1).await;
    kafka::create_topic(&broker, "free", 1).await;

    // One request, two topics: the validated one has two bad records of
    // four and is refused as a whole, with their indices; the other one
    // takes any bytes and is appended.
    let response = produce(
        &broker,
        &[
            (
                "events.orders",
                batch(&[r#"{"id":1}"#, "not json", "[1,2]", "{bad"]),
            ),
            ("free", batch(&["plain text"])),
        ],
    );
    let refused = partition(&response, "events.orders");
    assert_eq!(refused.error_code, INVALID_RECORD, "{refused:?}");
    let indices: Vec<i32> = refused
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indices, [1, 3], "{refused:?}");
    assert!(refused.record_errors.iter().all(|e| e
        .batch_index_error_message
        .as_deref()
        .is_some_and(|m| m.contains("JSON"))));
    assert!(refused.error_message.is_some(), "{refused:?}");
    let free = partition(&response, "free");
    assert_eq!(free.error_code, 0, "{free:?}");
    assert_eq!(free.base_offset, 0, "{free:?}");

    // Good JSON lands.
    let good = produce(&broker, &[("events.orders", batch(&[r#"{"id":2}"#, "7"]))]);
    let landed = partition(&good, "events.orders");
    assert_eq!(
        (landed.error_code, landed.base_offset),
        (0, 0),
        "{landed:?}"
    );

    // A real producer: its non-JSON record fails with INVALID_RECORD, its
    // JSON one is delivered.
    let producer = kafka::producer(&broker, &[("message.timeout.ms", "15000")]);
    let bad = producer
        .send(
            FutureRecord::<(), _>::to("events.orders").payload("<xml/>"),
            Duration::from_secs(15),
        )
        .await;
    let code = bad
        .expect_err("a record that is not JSON is refused")
        .0
        .rdkafka_error_code();
    assert_eq!(code, Some(RDKafkaErrorCode::InvalidRecord));
    producer
        .send(
            FutureRecord::<(), _>::to("events.orders").payload(r#"{"id":3}"#),
            Duration::from_secs(15),
        )
        .await
        .expect("a JSON record is delivered");

    // What a consumer reads: only the JSON records.
    let consumer: BaseConsumer = kafka::config(&broker)
        .set("group.id", "json-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = rdkafka::TopicPartitionList::new();
    assignment
        .add_partition_offset("events.orders", 0, rdkafka::Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let values = kafka::poll_values(
        &consumer,
        3,
        Duration::from_millis(200),
        Duration::from_secs(30),
        "events.orders",
    )
    .expect("consume");
    assert_eq!(values, [r#"{"id":2}"#, "7", r#"{"id":3}"#]);

    // The admin API lists the interceptor and what it wraps.
    let list = plugin_list(&admin);
    let entry = list["interceptors"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["name"] == "json_validator"))
        .unwrap_or_else(|| panic!("json_validator not listed: {list}"));
    assert_eq!(entry["api_keys"], serde_json::json!([0]), "{entry}");
    assert_eq!(entry["wrapping"], serde_json::json!([0]), "{entry}");
    assert!(entry["calls"].as_u64().unwrap_or(0) >= 4, "{entry}");
    assert_eq!(
        entry["grants"]["granted"],
        serde_json::json!(["metadata.read"])
    );
    assert_eq!(
        list["chains"],
        serde_json::json!([{ "api_key": 0, "interceptors": ["json_validator"] }])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_interceptor_that_is_not_loaded_fails_closed() {
    let (_plugins, broker, _admin) =
        start(&[], &[("plugin.interceptors.produce", "json_validator")]);
    kafka::create_topic(&broker, "events.orders", 1).await;
    // The Produce module answers the failed request with its own error
    // response (UNKNOWN_SERVER_ERROR), nothing is appended.
    let response = produce(&broker, &[("events.orders", batch(&["not json"]))]);
    assert_eq!(partition(&response, "events.orders").error_code, -1);
    assert!(broker
        .log_tail(200)
        .contains("interceptor json_validator is configured for api key 0 but not loaded"));
    let (low, high) = kafka::plain_consumer(&broker)
        .fetch_watermarks("events.orders", 0, Duration::from_secs(10))
        .expect("watermarks");
    assert_eq!((low, high), (0, 0));
}

/// A SASL/PLAIN client of `user`.
fn tenant_config(broker: &Broker, user: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set(
            "bootstrap.servers",
            broker.listener_bootstrap("SASL_PLAINTEXT"),
        )
        .set("broker.address.family", "v4")
        .set("security.protocol", "sasl_plaintext")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", user)
        .set("sasl.password", "secret");
    config
}

fn metadata_topics(consumer: &BaseConsumer) -> BTreeSet<String> {
    consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("metadata")
        .topics()
        .iter()
        .map(|topic| topic.name().to_string())
        .collect()
}

/// A broker with a SASL_PLAINTEXT listener for the tenants `acme.alice`
/// and `globex.bob`, the tenant filter wrapping every API of
/// [`TENANT_APIS`] (Produce with `produce_chain` instead, when given),
/// plus `settings`: the plugin directory (kept alive) and the broker.
fn tenant_broker(
    examples: &[&str],
    produce_chain: Option<&str>,
    settings: &[(&str, &str)],
) -> (tempfile::TempDir, Broker) {
    let chains: Vec<(String, String)> = TENANT_APIS
        .iter()
        .map(|api| {
            let chain = match (*api, produce_chain) {
                ("produce", Some(chain)) => chain,
                _ => "tenant_filter",
            };
            (format!("plugin.interceptors.{api}"), chain.to_string())
        })
        .collect();
    let plugins = gregor_tests::plugin_dir_with_examples(examples);
    let dir = plugins.path().display().to_string();
    let mut all = vec![
        ("plugin.dir", dir.as_str()),
        ("plugin.grants.tenant_filter", "metadata.read"),
        (
            "sasl.bootstrap.users",
            "acme.alice:secret,globex.bob:secret",
        ),
    ];
    all.extend(chains.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    all.extend_from_slice(settings);
    let broker = Broker::start_with_listeners(&["SASL_PLAINTEXT"], &all);
    (plugins, broker)
}

/// A raw connection to the SASL_PLAINTEXT listener, authenticated as
/// `user` with SASL/PLAIN (SaslHandshake v1, SaslAuthenticate v0).
fn tenant_conn(broker: &Broker, user: &str) -> Conn {
    let address = broker
        .listener_bootstrap("SASL_PLAINTEXT")
        .parse()
        .expect("listener address");
    let mut conn = Conn::connect(address);
    let mut body = Vec::new();
    body.extend_from_slice(&5i16.to_be_bytes());
    body.extend_from_slice(b"PLAIN");
    let payload = conn.round_trip(&request_frame(17, 1, 1, false, &body), 1);
    assert_eq!(payload[4..6], [0, 0], "SaslHandshake error code");
    let token = format!("\0{user}\0secret");
    let mut body = (token.len() as i32).to_be_bytes().to_vec();
    body.extend_from_slice(token.as_bytes());
    let payload = conn.round_trip(&request_frame(36, 0, 2, false, &body), 2);
    assert_eq!(payload[4..6], [0, 0], "SaslAuthenticate error code");
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_both_use_orders_without_seeing_each_other() {
    let (_plugins, broker) = tenant_broker(&["tenant_filter"], None, &[]);

    for (user, tenant) in [("acme.alice", "acme"), ("globex.bob", "globex")] {
        // Each tenant creates its own `orders` through its AdminClient.
        let admin: rdkafka::admin::AdminClient<_> =
            tenant_config(&broker, user).create().expect("admin client");
        let created = admin
            .create_topics(
                &[rdkafka::admin::NewTopic::new(
                    "orders",
                    1,
                    rdkafka::admin::TopicReplication::Fixed(1),
                )],
                &kafka::admin_options(),
            )
            .await
            .expect("create topics");
        assert!(
            matches!(created.as_slice(), [Ok(name)] if name == "orders"),
            "{user}: {created:?}"
        );
        let producer: rdkafka::producer::FutureProducer = tenant_config(&broker, user)
            .set("message.timeout.ms", "20000")
            .create()
            .expect("producer");
        for i in 0..3 {
            let value = format!("{tenant}-{i}");
            producer
                .send(
                    FutureRecord::<(), _>::to("orders").payload(&value),
                    Duration::from_secs(20),
                )
                .await
                .unwrap_or_else(|(e, _)| panic!("{user} produces: {e}"));
        }
    }

    for (user, tenant) in [("acme.alice", "acme"), ("globex.bob", "globex")] {
        // A group called `orders` in each tenant, reading its own topic.
        let consumer: BaseConsumer = tenant_config(&broker, user)
            .set("group.id", "orders")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        consumer.subscribe(&["orders"]).expect("subscribe");
        let values = kafka::poll_values(
            &consumer,
            3,
            Duration::from_millis(200),
            Duration::from_secs(45),
            user,
        )
        .expect("consume");
        let expected: Vec<String> = (0..3).map(|i| format!("{tenant}-{i}")).collect();
        assert_eq!(values, expected, "{user}");
        consumer
            .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
            .expect("commit");
        let committed = consumer
            .committed(Duration::from_secs(10))
            .expect("committed offsets");
        let offsets: Vec<(String, rdkafka::Offset)> = committed
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.offset()))
            .collect();
        assert_eq!(
            offsets,
            [("orders".to_string(), rdkafka::Offset::Offset(3))],
            "{user}"
        );
        // Metadata lists only the tenant's topics, un-prefixed.
        assert_eq!(
            metadata_topics(&consumer),
            BTreeSet::from(["orders".to_string()]),
            "{user}"
        );
    }

    // A tenant's ListGroups shows its own group, un-prefixed.
    let consumer: BaseConsumer = tenant_config(&broker, "acme.alice")
        .create()
        .expect("consumer");
    assert_eq!(
        group_names(&consumer),
        BTreeSet::from(["orders".to_string()])
    );

    // Underneath, two topics and two groups (seen from the PLAINTEXT
    // listener, whose anonymous principal has no tenant).
    let names = kafka::topic_names(&broker);
    assert!(
        names.contains("acme.orders")
            && names.contains("globex.orders")
            && !names.contains("orders"),
        "{names:?}"
    );
    let groups = group_names(&kafka::plain_consumer(&broker));
    assert!(
        groups.contains("acme.orders")
            && groups.contains("globex.orders")
            && !groups.contains("orders"),
        "{groups:?}"
    );
}

/// The groups ListGroups answers `consumer`'s principal.
fn group_names(consumer: &BaseConsumer) -> BTreeSet<String> {
    consumer
        .fetch_group_list(None, Duration::from_secs(10))
        .expect("list groups")
        .groups()
        .iter()
        .map(|group| group.name().to_string())
        .collect()
}

/// Produce chained `tenant_filter,json_validator` for the tenant acme,
/// the validator checking only the stored name `acme.events`; one
/// request with a bad record for `events` and one for `free`.
async fn chained_produce(chain: &str) -> (tempfile::TempDir, Broker, ProduceResponse) {
    let (plugins, broker) = tenant_broker(
        &["tenant_filter", "json_validator"],
        Some(chain),
        &[
            ("plugin.grants.json_validator", "metadata.read"),
            ("json.validator.topics", "acme.events"),
        ],
    );
    kafka::create_topic(&broker, "acme.events", 1).await;
    kafka::create_topic(&broker, "acme.free", 1).await;
    let response = produce_on(
        &mut tenant_conn(&broker, "acme.alice"),
        &[
            ("events", batch(&[r#"{"id":1}"#, "not json"])),
            ("free", batch(&["plain text"])),
        ],
    );
    (plugins, broker, response)
}

fn end_offset(broker: &Broker, topic: &str) -> i64 {
    kafka::plain_consumer(broker)
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chained_interceptors_run_requests_in_order_and_responses_in_reverse() {
    let (_plugins, broker, response) = chained_produce("tenant_filter,json_validator").await;
    // Request hooks in the configured order: the validator refused a
    // record of `events`, which it validates only under the name the
    // tenant filter gave it (`acme.events`), so the filter ran first.
    let refused = partition(&response, "events");
    assert_eq!(refused.error_code, INVALID_RECORD, "{response:?}");
    let indices: Vec<i32> = refused
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indices, [1], "{refused:?}");
    // Response hooks in reverse: the validator answered that partition
    // under the name it was given (`acme.events`), and the client sees
    // `events`, so the filter took the prefix off after the validator
    // added its answer. The other topic went through both and the handler.
    let free = partition(&response, "free");
    assert_eq!((free.error_code, free.base_offset), (0, 0), "{free:?}");
    let names: Vec<&str> = response
        .responses
        .iter()
        .map(|t| t.name.0.as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("acme.")), "{names:?}");
    assert_eq!(
        end_offset(&broker, "acme.events"),
        0,
        "the refused batch landed"
    );
    assert_eq!(end_offset(&broker, "acme.free"), 1);

    // A real producer of the tenant: its non-JSON record is refused, its
    // JSON one lands in acme.events.
    let producer: rdkafka::producer::FutureProducer = tenant_config(&broker, "acme.alice")
        .set("message.timeout.ms", "15000")
        .create()
        .expect("producer");
    let bad = producer
        .send(
            FutureRecord::<(), _>::to("events").payload("<xml/>"),
            Duration::from_secs(15),
        )
        .await;
    assert_eq!(
        bad.expect_err("a record that is not JSON is refused")
            .0
            .rdkafka_error_code(),
        Some(RDKafkaErrorCode::InvalidRecord)
    );
    producer
        .send(
            FutureRecord::<(), _>::to("events").payload(r#"{"id":2}"#),
            Duration::from_secs(15),
        )
        .await
        .expect("a JSON record is delivered");
    assert_eq!(end_offset(&broker, "acme.events"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_order_decides_what_each_interceptor_sees() {
    // The other way round the validator sees the tenant's own name,
    // `events`, which it is not told to validate: everything lands.
    let (_plugins, broker, response) = chained_produce("json_validator,tenant_filter").await;
    for topic in ["events", "free"] {
        let answer = partition(&response, topic);
        assert_eq!(
            (answer.error_code, answer.base_offset),
            (0, 0),
            "{response:?}"
        );
    }
    assert_eq!(end_offset(&broker, "acme.events"), 2);
    assert_eq!(end_offset(&broker, "acme.free"), 1);
}
