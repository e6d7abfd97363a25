//! The request versions Kafka 4 removed (KIP-896) that Gregor serves, as
//! Kafka 3.x-era clients use them: kafka-python pinned to old brokers'
//! versions (`tests/python/old_clients.py`) commits and fetches offsets
//! (OffsetCommit/OffsetFetch v0 and v1), lists offsets (ListOffsets v0),
//! creates and deletes topics (CreateTopics v0/v1, DeleteTopics v0),
//! describes configs and manages ACLs (v0), and librdkafka with
//! `api.version.request=false` lists and commits offsets; raw frames for the versions
//! no client here sends (OffsetForLeaderEpoch v0-1, DescribeLogDirs v0,
//! AlterReplicaLogDirs v0, the delegation token APIs v0). ApiVersions
//! advertises these ranges (Produce v0-2 and Fetch v0-3, the old message
//! formats, are tests/tests/old_formats.rs's).

use gregor_tests::wire::{put_i16, put_i32, request_frame, Conn, Reader};
use gregor_tests::{kafka, run_python, Broker};
use serde_json::{json, Value};

/// Runs a command of `old_clients.py` and returns the JSON it printed last.
fn python(args: &[&str]) -> Value {
    let (stdout, stderr) = run_python("old_clients.py", args);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("old_clients.py printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// A broker with `topic` (one partition) holding `values`.
async fn broker_with(topic: &str, values: &[&str]) -> Broker {
    let broker = Broker::start();
    kafka::create_topic(&broker, topic, 1).await;
    let producer = kafka::producer(&broker, &[]);
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    kafka::send_values(&producer, topic, 1, &values).await;
    broker
}

fn put_string(buf: &mut Vec<u8>, s: &str) {
    put_i16(buf, s.len() as i16);
    buf.extend_from_slice(s.as_bytes());
}

/// Sends a non-flexible request and returns the response body (after the
/// correlation id).
fn call(conn: &mut Conn, api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let frame = request_frame(api_key, version, correlation_id, false, body);
    conn.round_trip(&frame, correlation_id)[4..].to_vec()
}

/// kafka-python as a client of Kafka 0.8.1 and 0.8.2 commits offsets with
/// OffsetCommit v0 and v1 and reads them back with OffsetFetch v0 and v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_consumers_commit_and_fetch_offsets() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "old-commits", 1).await;
    let seen = python(&["commit", &broker.bootstrap(), "old-commits", "old-group"]);
    assert_eq!(
        seen,
        json!({"0.8.1": [5, "at 5"], "0.8.2": [7, "at 7"]}),
        "{seen}"
    );
}

/// kafka-python as a client of Kafka 0.10.0 finds the earliest and latest
/// offsets with ListOffsets v0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_consumer_lists_offsets_with_v0() {
    let broker = broker_with("old-offsets", &["v0", "v1", "v2"]).await;
    let seen = python(&["list-offsets", &broker.bootstrap(), "old-offsets"]);
    assert_eq!(seen, json!({"earliest": 0, "latest": 3}), "{seen}");
}

/// kafka-python's admin client as one of Kafka 0.10.1 creates a topic with
/// CreateTopics v0 and deletes it with DeleteTopics v0; as one of 0.10.2
/// it validates a topic with CreateTopics v1 (`validate_only`), which
/// creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_admin_clients_create_and_delete_topics() {
    let broker = Broker::start();
    let seen = python(&["topics", &broker.bootstrap(), "old-admin"]);
    assert_eq!(
        seen,
        json!({"created": ["old-admin-v0"], "after": []}),
        "{seen}"
    );
    assert!(!kafka::topic_names(&broker).contains("old-admin-v0"));
}

/// kafka-python's admin client as one of Kafka 0.11 describes a topic's
/// configs with DescribeConfigs v0 (an override is not the default, a
/// default is) and creates, describes and deletes an ACL with v0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_admin_clients_describe_configs_and_manage_acls() {
    let broker = Broker::start();
    kafka::create_topic_with(&broker, "old-configs", 1, &[("cleanup.policy", "compact")]).await;
    let seen = python(&["configs-acls", &broker.bootstrap(), "old-configs"]);
    assert_eq!(seen["cleanup.policy"], json!(["compact", false]), "{seen}");
    assert_eq!(seen["retention.ms"], json!(["604800000", true]), "{seen}");
    assert_eq!(seen["acls"], json!([["User:old", "READ"]]), "{seen}");
    assert_eq!(seen["deleted"], json!([["User:old", "READ"]]), "{seen}");
}

/// ListOffsets v0: each partition answers its old-style offsets, and a
/// special timestamp other than latest and earliest is UNSUPPORTED_VERSION,
/// as in Kafka 3.9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_v0_on_the_wire() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "raw-offsets", 2).await;
    let mut body = Vec::new();
    put_i32(&mut body, -1); // replica id
    put_i32(&mut body, 1);
    put_string(&mut body, "raw-offsets");
    put_i32(&mut body, 2);
    for (partition, timestamp) in [(0, -1i64), (1, -3)] {
        put_i32(&mut body, partition);
        body.extend_from_slice(&timestamp.to_be_bytes());
        put_i32(&mut body, 1); // max_num_offsets
    }
    let response = call(&mut Conn::connect(broker.addr()), 2, 0, 7, &body);
    let mut r = Reader::new(&response);
    assert_eq!((r.i32(), r.string(), r.i32()), (1, "raw-offsets".into(), 2));
    assert_eq!((r.i32(), r.i16(), r.i32(), r.i64()), (0, 0, 1, 0), "latest");
    assert_eq!((r.i32(), r.i16(), r.i32()), (1, 35, 0), "max timestamp");
    assert_eq!(r.remaining(), 0);
}

/// OffsetForLeaderEpoch v0 and v1 (sent by brokers of Kafka 2.0 and older):
/// epoch 0 ends at the log end offset; v1 also answers the epoch, and
/// neither carries a throttle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_v0_and_v1_on_the_wire() {
    let broker = broker_with("raw-epochs", &["a", "b"]).await;
    let mut body = Vec::new();
    put_i32(&mut body, 1);
    put_string(&mut body, "raw-epochs");
    put_i32(&mut body, 1);
    put_i32(&mut body, 0); // partition
    put_i32(&mut body, 0); // leader epoch
    let mut conn = Conn::connect(broker.addr());
    for version in [0, 1] {
        let response = call(&mut conn, 23, version, 10 + i32::from(version), &body);
        let mut r = Reader::new(&response);
        assert_eq!((r.i32(), r.string(), r.i32()), (1, "raw-epochs".into(), 1));
        assert_eq!((r.i16(), r.i32()), (0, 0), "v{version}: error, partition");
        if version == 1 {
            assert_eq!(r.i32(), 0, "v1: leader epoch");
        }
        assert_eq!(r.i64(), 2, "v{version}: end offset");
        assert_eq!(r.remaining(), 0, "v{version}");
    }
}

/// DescribeLogDirs v0 and AlterReplicaLogDirs v0 (to a directory not among
/// `log.dirs`: LOG_DIR_NOT_FOUND) are v1's messages; the
/// delegation token APIs' v0 too (on a plaintext connection every one is
/// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, 64, or without a secret key
/// DELEGATION_TOKEN_AUTH_DISABLED, 61).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_v0_requests_on_the_wire() {
    let broker = Broker::start();
    kafka::create_topic(&broker, "raw-dirs", 1).await;
    let mut conn = Conn::connect(broker.addr());

    let mut all_dirs = Vec::new();
    put_i32(&mut all_dirs, -1);
    let response = call(&mut conn, 35, 0, 20, &all_dirs);
    let mut r = Reader::new(&response);
    r.i32(); // throttle
    assert_eq!(r.i32(), 1, "one log dir");
    assert_eq!(r.i16(), 0, "log dir error");
    assert!(!r.string().is_empty(), "its path");

    let mut alter = Vec::new();
    put_i32(&mut alter, 1);
    put_string(&mut alter, "/not-a-log-dir");
    put_i32(&mut alter, 1);
    put_string(&mut alter, "raw-dirs");
    put_i32(&mut alter, 1);
    put_i32(&mut alter, 0);
    let response = call(&mut conn, 34, 0, 21, &alter);
    let mut r = Reader::new(&response);
    r.i32(); // throttle
    assert_eq!((r.i32(), r.string(), r.i32()), (1, "raw-dirs".into(), 1));
    assert_eq!((r.i32(), r.i16()), (0, 57), "LOG_DIR_NOT_FOUND");

    let mut create = Vec::new();
    put_i32(&mut create, 0); // no renewers
    create.extend_from_slice(&(-1i64).to_be_bytes());
    let mut hmac = Vec::new();
    put_i32(&mut hmac, 3);
    hmac.extend_from_slice(b"mac");
    hmac.extend_from_slice(&1000i64.to_be_bytes());
    let mut describe = Vec::new();
    put_i32(&mut describe, -1); // every owner
    for (key, body) in [(38, &create), (39, &hmac), (40, &hmac), (41, &describe)] {
        let response = call(&mut conn, key, 0, 30 + i32::from(key), body);
        let code = Reader::new(&response).i16();
        assert!([61, 64].contains(&code), "ApiKey {key} v0: error {code}");
    }
}

/// ApiVersions advertises the versions Kafka 3.9 served, Produce and Fetch
/// from 0 (old message formats, converted).
#[test]
fn api_versions_advertise_the_old_versions() {
    let broker = Broker::start();
    let versions = Conn::connect(broker.addr()).api_versions(1);
    let expected = [
        (0, 0, 13),
        (1, 0, 17),
        (2, 0, 10),
        (8, 0, 9),
        (9, 0, 9),
        (19, 0, 7),
        (20, 0, 6),
        (23, 0, 4),
        (27, 0, 1),
        (29, 0, 3),
        (30, 0, 3),
        (31, 0, 3),
        (32, 0, 4),
        (34, 0, 2),
        (35, 0, 4),
        (38, 0, 3),
        (39, 0, 2),
        (40, 0, 2),
        (41, 0, 3),
    ];
    let advertised: Vec<(i16, i16, i16)> = expected
        .iter()
        .filter_map(|&(key, ..)| {
            versions
                .range(key)
                .map(|r| (key, r.min_version, r.max_version))
        })
        .collect();
    assert_eq!(advertised, expected);
}

/// librdkafka (confluent-kafka) without ApiVersions: as a client of 0.9.0
/// it reads the watermarks with ListOffsets v0, as one of 0.8.2 it commits
/// and fetches an offset with OffsetCommit and OffsetFetch v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_with_old_fallback_versions() {
    let broker = broker_with("old-rdkafka", &["x", "y"]).await;
    let seen = python(&["librdkafka", &broker.bootstrap(), "old-rdkafka", "old-rd"]);
    assert_eq!(
        seen,
        json!({"watermarks": [0, 2], "committed": 4}),
        "{seen}"
    );
}
