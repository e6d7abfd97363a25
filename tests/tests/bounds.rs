//! Requests that ask the broker to create or allocate in proportion to a
//! number they carry, with numbers far past what Kafka allows, over raw
//! frames (to read Kafka's error messages) and through librdkafka's
//! AdminClient. Kafka's controller writes at most 10000 records for one
//! request (`MAX_RECORDS_PER_USER_OP`) and CreateTopics may ask for at most
//! 10000 partitions (`MAX_PARTITIONS_PER_BATCH`): over either the request
//! is refused with POLICY_VIOLATION, `validate_only` or not, and nothing is
//! created. Before these bounds one CreateTopics with num_partitions
//! 2147483647 aborted the broker. After each case the broker keeps
//! serving: it is alive, a fresh connection gets Metadata, and a fresh
//! rdkafka producer and consumer move a record.

use std::collections::BTreeSet;
use std::time::Instant;

use gregor_tests::kafka::{self, Isolation, CALL_TIMEOUT};
use gregor_tests::wire::{
    metadata_request, put_compact_string, put_i16, put_i32, put_uvarint, request_frame, Conn,
    Reader, METADATA,
};
use gregor_tests::Broker;
use rdkafka::admin::{NewPartitions, NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::types::RDKafkaErrorCode;

const CREATE_TOPICS: i16 = 19;
const CREATE_ACLS: i16 = 30;
const DELETE_ACLS: i16 = 31;
const CREATE_PARTITIONS: i16 = 37;
const ALTER_CLIENT_QUOTAS: i16 = 49;
const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;

const LEADER_NOT_AVAILABLE: i16 = 5;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_PARTITIONS: i16 = 37;
const POLICY_VIOLATION: i16 = 44;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;

const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";
const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";
const QUOTA_POLICY: &str = "Request parameters do not satisfy the configured policy.";

/// The largest partition count librdkafka lets a client ask for
/// (`RD_KAFKAP_PARTITIONS_MAX`), ten times Kafka's cap.
const ADMIN_CLIENT_MAX: i32 = 100_000;

/// Partitions of the big-but-legal topic: well under Kafka's caps, created
/// within seconds here (about 6 ms each on this machine, so more than the
/// guest's 5 s call deadline, which the host's time must not count
/// against).
const BIG_TOPIC_PARTITIONS: i32 = 1_000;

/// Partitions the big topic then grows by.
const BIG_TOPIC_GROWTH: i32 = 250;

fn put_string(buf: &mut Vec<u8>, s: &str) {
    put_i16(buf, s.len() as i16);
    buf.extend_from_slice(s.as_bytes());
}

fn put_nullable_string(buf: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => put_i16(buf, -1),
    }
}

fn put_bool(buf: &mut Vec<u8>, v: bool) {
    buf.push(u8::from(v));
}

/// Sends a non-flexible request and returns the response body (after the
/// correlation id).
fn call(conn: &mut Conn, api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let correlation_id = 7_000 + i32::from(api_key);
    let frame = request_frame(api_key, version, correlation_id, false, body);
    conn.round_trip(&frame, correlation_id)[4..].to_vec()
}

/// One CreateTopics entry: name, partition count, manual assignments
/// (partition, brokers) and configs.
struct TopicSpec<'a> {
    name: &'a str,
    partitions: i32,
    assignments: Vec<(i32, Vec<i32>)>,
    configs: Vec<(&'a str, &'a str)>,
}

impl<'a> TopicSpec<'a> {
    fn new(name: &'a str, partitions: i32) -> Self {
        TopicSpec {
            name,
            partitions,
            assignments: Vec::new(),
            configs: Vec::new(),
        }
    }
}

/// CreateTopics v4; per topic (name, error code, error message).
fn create_topics(
    conn: &mut Conn,
    topics: &[TopicSpec<'_>],
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let mut body = Vec::new();
    put_i32(&mut body, topics.len() as i32);
    for topic in topics {
        put_string(&mut body, topic.name);
        put_i32(&mut body, topic.partitions);
        let replication: i16 = if topic.assignments.is_empty() { 1 } else { -1 };
        put_i16(&mut body, replication);
        put_i32(&mut body, topic.assignments.len() as i32);
        for (partition, brokers) in &topic.assignments {
            put_i32(&mut body, *partition);
            put_i32(&mut body, brokers.len() as i32);
            for broker in brokers {
                put_i32(&mut body, *broker);
            }
        }
        put_i32(&mut body, topic.configs.len() as i32);
        for (name, value) in &topic.configs {
            put_string(&mut body, name);
            put_nullable_string(&mut body, Some(value));
        }
    }
    put_i32(&mut body, 30_000);
    put_bool(&mut body, validate_only);
    let response = call(conn, CREATE_TOPICS, 4, &body);
    let mut r = Reader::new(&response);
    r.i32(); // throttle_time_ms
    (0..r.i32())
        .map(|_| (r.string(), r.i16(), r.nullable_string()))
        .collect()
}

/// Replica lists of new partitions, one per partition (None: placed by the
/// broker).
type Assignments = Option<Vec<Vec<i32>>>;

/// CreatePartitions v1 for (topic, new count, assignments); per topic
/// (name, error code, error message).
fn create_partitions(
    conn: &mut Conn,
    topics: &[(&str, i32, Assignments)],
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let mut body = Vec::new();
    put_i32(&mut body, topics.len() as i32);
    for (name, count, assignments) in topics {
        put_string(&mut body, name);
        put_i32(&mut body, *count);
        match assignments {
            None => put_i32(&mut body, -1),
            Some(assignments) => {
                put_i32(&mut body, assignments.len() as i32);
                for brokers in assignments {
                    put_i32(&mut body, brokers.len() as i32);
                    for broker in brokers {
                        put_i32(&mut body, *broker);
                    }
                }
            }
        }
    }
    put_i32(&mut body, 30_000);
    put_bool(&mut body, validate_only);
    let response = call(conn, CREATE_PARTITIONS, 1, &body);
    let mut r = Reader::new(&response);
    r.i32();
    (0..r.i32())
        .map(|_| (r.string(), r.i16(), r.nullable_string()))
        .collect()
}

/// CreateAcls v1: ALLOW READ on the LITERAL topics named, for `principal`;
/// per creation (error code, error message).
fn create_acls(conn: &mut Conn, principal: &str, topics: &[String]) -> Vec<(i16, Option<String>)> {
    let mut body = Vec::new();
    put_i32(&mut body, topics.len() as i32);
    for topic in topics {
        body.push(2); // TOPIC
        put_string(&mut body, topic);
        body.push(3); // LITERAL
        put_string(&mut body, principal);
        put_string(&mut body, "*");
        body.push(3); // READ
        body.push(3); // ALLOW
    }
    let response = call(conn, CREATE_ACLS, 1, &body);
    let mut r = Reader::new(&response);
    r.i32();
    (0..r.i32())
        .map(|_| (r.i16(), r.nullable_string()))
        .collect()
}

/// DeleteAcls v1 with one filter matching every binding of `principal`
/// (every binding with None); (error code, error message, bindings
/// matched). An empty message is no message.
fn delete_acls(conn: &mut Conn, principal: Option<&str>) -> (i16, Option<String>, usize) {
    let mut body = Vec::new();
    put_i32(&mut body, 1);
    body.push(1); // resource type ANY
    put_nullable_string(&mut body, None);
    body.push(1); // pattern type ANY
    put_nullable_string(&mut body, principal);
    put_nullable_string(&mut body, None);
    body.push(1); // operation ANY
    body.push(1); // permission ANY
    let response = call(conn, DELETE_ACLS, 1, &body);
    let mut r = Reader::new(&response);
    r.i32();
    assert_eq!(r.i32(), 1, "one result per filter");
    let (code, message) = (r.i16(), r.nullable_string().filter(|m| !m.is_empty()));
    let matched = r.i32();
    for _ in 0..matched {
        r.i16();
        r.nullable_string();
        r.i8();
        r.string();
        r.i8();
        r.string();
        r.string();
        r.i8();
        r.i8();
    }
    (code, message, usize::try_from(matched).unwrap_or(0))
}

/// AlterClientQuotas v0: for each user named, set every quota key; per
/// entry (error code, error message).
fn alter_client_quotas(
    conn: &mut Conn,
    users: &[String],
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let keys = [
        ("producer_byte_rate", 1_048_576.0),
        ("consumer_byte_rate", 1_048_576.0),
        ("request_percentage", 50.0),
        ("controller_mutation_rate", 10.0),
    ];
    let mut body = Vec::new();
    put_i32(&mut body, users.len() as i32);
    for user in users {
        put_i32(&mut body, 1);
        put_string(&mut body, "user");
        put_nullable_string(&mut body, Some(user));
        put_i32(&mut body, keys.len() as i32);
        for (key, value) in keys {
            put_string(&mut body, key);
            body.extend_from_slice(&f64::to_be_bytes(value));
            put_bool(&mut body, false);
        }
    }
    put_bool(&mut body, validate_only);
    let response = call(conn, ALTER_CLIENT_QUOTAS, 0, &body);
    let mut r = Reader::new(&response);
    r.i32();
    (0..r.i32())
        .map(|_| {
            let result = (r.i16(), r.nullable_string());
            for _ in 0..r.i32() {
                r.string();
                r.nullable_string();
            }
            result
        })
        .collect()
}

/// AlterUserScramCredentials v0 (flexible): one SCRAM-SHA-256 upsertion
/// for `user` with `iterations`; (error code, error message).
fn alter_scram(conn: &mut Conn, user: &str, iterations: i32) -> (i16, Option<String>) {
    let mut body = Vec::new();
    put_uvarint(&mut body, 1); // no deletions
    put_uvarint(&mut body, 2); // one upsertion
    put_compact_string(&mut body, user);
    body.push(1); // SCRAM-SHA-256
    put_i32(&mut body, iterations);
    put_uvarint(&mut body, 16 + 1);
    body.extend_from_slice(&[7; 16]);
    put_uvarint(&mut body, 32 + 1);
    body.extend_from_slice(&[9; 32]);
    put_uvarint(&mut body, 0); // upsertion tags
    put_uvarint(&mut body, 0); // request tags
    let correlation_id = 7_051;
    let frame = request_frame(ALTER_USER_SCRAM_CREDENTIALS, 0, correlation_id, true, &body);
    let payload = conn.round_trip(&frame, correlation_id);
    let mut r = Reader::new(&payload[4..]);
    r.skip_tags(); // response header v1
    r.i32();
    assert_eq!(r.uvarint(), 2, "one result");
    r.compact_nullable_string(); // user
    (r.i16(), r.compact_nullable_string())
}

/// Metadata v4 naming `topics`, auto-creation allowed; per topic (name,
/// error code).
fn metadata_auto_create(conn: &mut Conn, topics: &[String]) -> Vec<(String, i16)> {
    let mut body = Vec::new();
    put_i32(&mut body, topics.len() as i32);
    for topic in topics {
        put_string(&mut body, topic);
    }
    put_bool(&mut body, true);
    let response = call(conn, METADATA, 4, &body);
    let mut r = Reader::new(&response);
    r.i32(); // throttle_time_ms
    for _ in 0..r.i32() {
        r.i32();
        r.string();
        r.i32();
        r.nullable_string();
    }
    r.nullable_string(); // cluster_id
    r.i32(); // controller_id
    (0..r.i32())
        .map(|_| {
            let code = r.i16();
            let name = r.string();
            r.i8(); // is_internal
            assert_eq!(r.i32(), 0, "{name}: no partitions for a missing topic");
            (name, code)
        })
        .collect()
}

/// Asserts every result is POLICY_VIOLATION with `message`.
fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    results: &[T],
    expected: usize,
    code_and_message: impl Fn(&T) -> (i16, Option<&str>),
    message: &str,
) {
    assert_eq!(results.len(), expected, "{what}: one result per element");
    for result in results {
        assert_eq!(
            code_and_message(result),
            (POLICY_VIOLATION, Some(message)),
            "{what}: {result:?}"
        );
    }
}

fn names(count: usize, prefix: &str) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i}")).collect()
}

/// The broker keeps serving: its process is alive, a fresh connection
/// gets a Metadata response, and a fresh rdkafka producer and consumer
/// move a record through a new topic.
async fn assert_serving(broker: &mut Broker, topic: &str) {
    assert!(broker.is_running(), "the broker process exited");
    let mut fresh = Conn::connect(broker.addr());
    fresh.api_versions(1);
    let response = fresh.round_trip(&metadata_request(1, 2), 2);
    assert!(
        response.len() > 4,
        "Metadata (ApiKey {METADATA}) without a body"
    );
    kafka::create_topic(broker, topic, 1).await;
    let producer = kafka::producer(broker, &[]);
    kafka::send_values(&producer, topic, 1, &["still-serving".to_string()]).await;
    let read = kafka::read_values(
        broker,
        topic,
        1,
        Isolation::ReadUncommitted,
        1,
        CALL_TIMEOUT,
    )
    .await;
    assert_eq!(read.get(&0), Some(&vec!["still-serving".to_string()]));
}

fn topic_names(broker: &Broker) -> BTreeSet<String> {
    kafka::topic_names(broker)
}

/// This broker's node id, as Metadata names it.
fn node_id(broker: &Broker) -> i32 {
    let metadata = kafka::plain_consumer(broker)
        .fetch_metadata(None, CALL_TIMEOUT)
        .expect("metadata");
    metadata.brokers()[0].id()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_over_the_caps_are_refused_as_a_whole() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());
    let node = node_id(&broker);

    // The sweep's request: one topic with 2^31-1 partitions.
    for validate_only in [true, false] {
        let results = create_topics(
            &mut conn,
            &[TopicSpec::new("huge", i32::MAX)],
            validate_only,
        );
        let what = format!("num_partitions 2147483647, validate_only {validate_only}");
        assert_refused(
            &what,
            &results,
            1,
            |r| (r.1, r.2.as_deref()),
            TOO_MANY_PARTITIONS,
        );
        assert_eq!(results[0].0, "huge");
    }

    // The cap is on the request: 5000 + 5001 partitions refuse every topic,
    // the small valid one too, and a duplicate is answered as named.
    let topics = [
        TopicSpec::new("half-a", 5_000),
        TopicSpec::new("half-b", 5_001),
        TopicSpec::new("small", 1),
        TopicSpec::new("small", 1),
    ];
    for validate_only in [true, false] {
        let results = create_topics(&mut conn, &topics, validate_only);
        let what = format!("10001 partitions in 3 topics, validate_only {validate_only}");
        assert_refused(
            &what,
            &results,
            4,
            |r| (r.1, r.2.as_deref()),
            TOO_MANY_PARTITIONS,
        );
    }

    // 10000 partitions pass the partition cap but, with the topic record,
    // are 10001 records.
    for validate_only in [true, false] {
        let results = create_topics(&mut conn, &[TopicSpec::new("edge", 10_000)], validate_only);
        let what = format!("10000 partitions, validate_only {validate_only}");
        assert_refused(
            &what,
            &results,
            1,
            |r| (r.1, r.2.as_deref()),
            TOO_MANY_RECORDS,
        );
    }

    // Records add up over the request: two topics of 4999 partitions and
    // one config each fit the partition cap, not the record cap.
    let mut a = TopicSpec::new("records-a", 4_999);
    a.configs.push(("retention.ms", "1000"));
    let mut b = TopicSpec::new("records-b", 4_999);
    b.configs.push(("retention.ms", "1000"));
    let results = create_topics(&mut conn, &[a, b, TopicSpec::new("records-c", 1)], true);
    assert_refused(
        "10002 records",
        &results,
        3,
        |r| (r.1, r.2.as_deref()),
        TOO_MANY_RECORDS,
    );

    // Manual assignments count as partitions: 10001 of them are refused
    // before any is checked.
    let mut manual = TopicSpec::new("manual", -1);
    manual.assignments = (0..10_001).map(|p| (p, vec![node])).collect();
    let results = create_topics(&mut conn, &[manual], true);
    assert_refused(
        "10001 assignments",
        &results,
        1,
        |r| (r.1, r.2.as_deref()),
        TOO_MANY_PARTITIONS,
    );

    // Bad manual assignments keep Kafka's errors.
    let bad = [
        ("unknown-broker", vec![(0, vec![node + 1000])]),
        ("twice", vec![(0, vec![node, node])]),
        ("empty", vec![(0, vec![])]),
        ("gap", vec![(0, vec![node]), (2, vec![node])]),
    ];
    for (name, assignments) in bad {
        let mut topic = TopicSpec::new(name, -1);
        topic.assignments = assignments;
        let results = create_topics(&mut conn, &[topic], false);
        assert_eq!(results.len(), 1);
        assert_eq!(
            results[0].1, INVALID_REPLICA_ASSIGNMENT,
            "{name}: {results:?}"
        );
    }

    let existing = topic_names(&broker);
    for name in [
        "huge",
        "half-a",
        "half-b",
        "small",
        "edge",
        "records-a",
        "manual",
        "gap",
    ] {
        assert!(!existing.contains(name), "{name} was created: {existing:?}");
    }
    assert_serving(&mut broker, "alive-after-create-topics").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_over_the_cap_are_refused() {
    let mut broker = Broker::start();
    kafka::create_topic(&broker, "grow", 1).await;
    kafka::create_topic(&broker, "grow-too", 1).await;
    let node = node_id(&broker);
    let mut conn = Conn::connect(broker.addr());

    // The sweep's request: grow to 2^31-1 partitions.
    for validate_only in [true, false] {
        let results = create_partitions(&mut conn, &[("grow", i32::MAX, None)], validate_only);
        let what = format!("count 2147483647, validate_only {validate_only}");
        assert_refused(
            &what,
            &results,
            1,
            |r| (r.1, r.2.as_deref()),
            TOO_MANY_RECORDS,
        );
    }

    // The cap is on the request: the first topic's 6000 new partitions
    // fit, the second's do not.
    let results = create_partitions(
        &mut conn,
        &[("grow", 6_001, None), ("grow-too", 6_001, None)],
        true,
    );
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].1, 0, "{results:?}");
    assert_eq!(
        (results[1].1, results[1].2.as_deref()),
        (POLICY_VIOLATION, Some(TOO_MANY_RECORDS))
    );

    // Manual assignments: one per new partition, registered brokers, each
    // once; a count that is not an increase is INVALID_PARTITIONS.
    let cases: [(i32, Assignments, i16); 4] = [
        (3, Some(vec![vec![node]]), INVALID_REPLICA_ASSIGNMENT),
        (2, Some(vec![vec![node + 1000]]), INVALID_REPLICA_ASSIGNMENT),
        (2, Some(vec![vec![node, node]]), INVALID_REPLICA_ASSIGNMENT),
        (1, None, INVALID_PARTITIONS),
    ];
    for (count, assignments, expected) in cases {
        let results = create_partitions(&mut conn, &[("grow", count, assignments.clone())], false);
        assert_eq!(
            results[0].1, expected,
            "count {count}, {assignments:?}: {results:?}"
        );
    }

    let metadata = kafka::wait_for_topic(&broker, "grow", 1);
    assert!(metadata.topics().iter().any(|t| t.name() == "grow"));
    assert_serving(&mut broker, "alive-after-create-partitions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_client_gets_policy_violation_for_huge_counts() {
    let mut broker = Broker::start();
    kafka::create_topic(&broker, "admin-grow", 1).await;
    let admin = kafka::admin(&broker);
    for validate_only in [true, false] {
        let options = kafka::admin_options().validate_only(validate_only);
        let results = admin
            .create_topics(
                &[NewTopic::new(
                    "admin-huge",
                    ADMIN_CLIENT_MAX,
                    TopicReplication::Fixed(1),
                )],
                &options,
            )
            .await
            .expect("CreateTopics request");
        assert_eq!(
            results,
            vec![Err((
                "admin-huge".to_string(),
                RDKafkaErrorCode::PolicyViolation
            ))],
            "validate_only {validate_only}"
        );
        let results = admin
            .create_partitions(
                &[NewPartitions::new("admin-grow", ADMIN_CLIENT_MAX as usize)],
                &options,
            )
            .await
            .expect("CreatePartitions request");
        assert_eq!(
            results,
            vec![Err((
                "admin-grow".to_string(),
                RDKafkaErrorCode::PolicyViolation
            ))],
            "validate_only {validate_only}"
        );
    }
    assert!(!topic_names(&broker).contains("admin-huge"));
    assert_serving(&mut broker, "alive-after-admin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_but_legal_topic_is_created_and_grown() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());
    let started = Instant::now();
    let results = create_topics(
        &mut conn,
        &[TopicSpec::new("big", BIG_TOPIC_PARTITIONS)],
        false,
    );
    eprintln!(
        "created {BIG_TOPIC_PARTITIONS} partitions in {:?}",
        started.elapsed()
    );
    assert_eq!(results, vec![("big".to_string(), 0, None)]);
    let started = Instant::now();
    let grown = BIG_TOPIC_PARTITIONS + BIG_TOPIC_GROWTH;
    let results = create_partitions(&mut conn, &[("big", grown, None)], false);
    eprintln!(
        "added {BIG_TOPIC_GROWTH} partitions in {:?}",
        started.elapsed()
    );
    assert_eq!(results, vec![("big".to_string(), 0, None)]);
    let metadata = kafka::wait_for_topic(&broker, "big", grown);
    let topic = metadata.topics().iter().find(|t| t.name() == "big");
    assert_eq!(topic.map(|t| t.partitions().len()), Some(grown as usize));

    // The last partition takes a record.
    let producer = kafka::producer(&broker, &[]);
    let record = rdkafka::producer::FutureRecord::<str, str>::to("big")
        .payload("last")
        .partition(grown - 1);
    producer
        .send(record, CALL_TIMEOUT)
        .await
        .unwrap_or_else(|(e, _)| panic!("produce to the last partition: {e}"));
    assert_serving(&mut broker, "alive-after-big-topic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_changes_over_the_cap_are_refused() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());

    // 10001 new bindings in one request: every creation refused, none kept.
    let results = create_acls(&mut conn, "User:many", &names(10_001, "t"));
    assert_refused(
        "10001 ACLs",
        &results,
        10_001,
        |r| (r.0, r.1.as_deref()),
        TOO_MANY_RECORDS,
    );
    assert_eq!(
        delete_acls(&mut conn, None),
        (0, None, 0),
        "no ACL was stored"
    );

    // 5000 and 5001 in two requests are fine; deleting all 10001 at once
    // is refused and removes nothing, deleting one principal's works.
    let results = create_acls(&mut conn, "User:a", &names(5_000, "a"));
    assert!(results.iter().all(|r| r.0 == 0), "first half");
    let results = create_acls(&mut conn, "User:b", &names(5_001, "b"));
    assert!(results.iter().all(|r| r.0 == 0), "second half");
    let message = "Cannot remove more than 10000 acls in a single delete operation.";
    assert_eq!(
        delete_acls(&mut conn, None),
        (POLICY_VIOLATION, Some(message.to_string()), 0)
    );
    assert_eq!(delete_acls(&mut conn, Some("User:a")), (0, None, 5_000));
    assert_eq!(delete_acls(&mut conn, None), (0, None, 5_001));
    assert_serving(&mut broker, "alive-after-acls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_alterations_over_the_cap_are_refused() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());

    // 2501 entities with 4 quotas each: 10004 records.
    let users = names(2_501, "user");
    for validate_only in [true, false] {
        let results = alter_client_quotas(&mut conn, &users, validate_only);
        let what = format!("10004 quota records, validate_only {validate_only}");
        assert_refused(
            &what,
            &results,
            2_501,
            |r| (r.0, r.1.as_deref()),
            QUOTA_POLICY,
        );
    }

    // 2500 entities (10000 records) are within the cap.
    let results = alter_client_quotas(&mut conn, &users[..2_500], true);
    assert!(results.iter().all(|r| *r == (0, None)), "2500 entities");
    assert_serving(&mut broker, "alive-after-quotas").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_iterations_are_bounded_as_kafka_bounds_them() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());
    for (iterations, message) in [
        (i32::MAX, "Too many iterations"),
        (16_385, "Too many iterations"),
        (4_095, "Too few iterations"),
        (i32::MIN, "Too few iterations"),
    ] {
        assert_eq!(
            alter_scram(&mut conn, "alice", iterations),
            (UNACCEPTABLE_CREDENTIAL, Some(message.to_string())),
            "iterations {iterations}"
        );
    }
    assert_eq!(alter_scram(&mut conn, "alice", 16_384).0, 0, "the maximum");
    assert_serving(&mut broker, "alive-after-scram").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creation_is_bounded_per_request() {
    let mut broker = Broker::start();
    let mut conn = Conn::connect(broker.addr());

    // 5001 one-partition topics are 10002 records: none is created.
    let many = names(5_001, "auto");
    let results = metadata_auto_create(&mut conn, &many);
    assert_eq!(results.len(), many.len());
    assert!(
        results
            .iter()
            .all(|(_, code)| *code == LEADER_NOT_AVAILABLE),
        "{:?}",
        results
            .iter()
            .find(|(_, code)| *code != LEADER_NOT_AVAILABLE)
    );
    let existing = topic_names(&broker);
    assert!(
        many.iter().all(|name| !existing.contains(name)),
        "auto-created past the cap"
    );

    // A few are created, as before.
    let few = names(3, "few");
    let results = metadata_auto_create(&mut conn, &few);
    assert!(results
        .iter()
        .all(|(_, code)| *code == LEADER_NOT_AVAILABLE));
    for name in &few {
        kafka::wait_for_topic(&broker, name, 1);
    }
    assert_serving(&mut broker, "alive-after-auto-create").await;
}
