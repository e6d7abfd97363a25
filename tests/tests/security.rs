//! Security with real clients: SASL (PLAIN, SCRAM-SHA-256/512) and TLS
//! listeners driven by librdkafka, the SASL state machine on the wire,
//! ACLs created and deleted through a real AdminClient (kafka-python; the
//! rdkafka crate has no ACL API) taking effect for a librdkafka client,
//! client certificates mapped to principals, the example prefix
//! authorizer in Rust, Python and JavaScript switched to live, and the
//! security state surviving a crash.
//!
//! Certificates are generated at test time with rcgen; no key is checked
//! in.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gregor_tests::wire::{metadata_request, put_i16, put_i32, request_frame, Conn, Reader};
use gregor_tests::{free_port, kafka, workspace_root, Broker};
use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

const ALICE: (&str, &str) = ("alice", "alice-secret");
const ADMIN: (&str, &str) = ("admin", "admin-secret");
const USERS: &str = "alice:alice-secret,admin:admin-secret";
const SASL_KEY_HANDSHAKE: i16 = 17;
const SASL_KEY_AUTHENTICATE: i16 = 36;

// ---- clients ----

/// How a client reaches a listener.
#[derive(Clone)]
struct Client {
    bootstrap: String,
    properties: Vec<(String, String)>,
}

impl Client {
    fn sasl(bootstrap: String, mechanism: &str, (user, password): (&str, &str)) -> Client {
        Client {
            bootstrap,
            properties: vec![
                ("security.protocol".into(), "sasl_plaintext".into()),
                ("sasl.mechanism".into(), mechanism.into()),
                ("sasl.username".into(), user.into()),
                ("sasl.password".into(), password.into()),
            ],
        }
    }

    fn with(mut self, key: &str, value: &str) -> Client {
        self.properties.retain(|(k, _)| k != key);
        self.properties.push((key.to_string(), value.to_string()));
        self
    }

    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap)
            .set("broker.address.family", "v4")
            .set("client.id", "gregor-security-tests")
            .set_log_level(RDKafkaLogLevel::Warning);
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    fn producer(&self) -> FutureProducer {
        self.config()
            .set("acks", "all")
            .set("message.timeout.ms", "20000")
            .create()
            .expect("create a producer")
    }

    fn admin(&self) -> AdminClient<rdkafka::client::DefaultClientContext> {
        self.config().create().expect("create an AdminClient")
    }
}

/// Produces `count` records; the first delivery error if any.
async fn produce(client: &Client, topic: &str, count: usize) -> Result<(), KafkaError> {
    let producer = client.producer();
    for i in 0..count {
        let payload = format!("record-{i}");
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(&payload),
                Duration::from_secs(20),
            )
            .await
            .map_err(|(error, _)| error)?;
    }
    Ok(())
}

fn produce_error_code(result: Result<(), KafkaError>) -> Option<RDKafkaErrorCode> {
    match result {
        Ok(()) => None,
        Err(error) => Some(
            error
                .rdkafka_error_code()
                .unwrap_or_else(|| panic!("produce failed without an error code: {error}")),
        ),
    }
}

/// Reads partition 0 of `topic` from the beginning until `count` records
/// arrived; the first error the consumer reports instead, if any.
fn consume(client: &Client, topic: &str, count: usize) -> Result<Vec<String>, KafkaError> {
    let consumer: BaseConsumer = client
        .config()
        // librdkafka looks up the group's coordinator even for assign:
        // a group the prefix policy gives alice.
        .set("group.id", "alice-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("create a consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    kafka::poll_values(
        &consumer,
        count,
        Duration::from_millis(500),
        Duration::from_secs(30),
        topic,
    )
}

/// A consumer that may not read `topic` gets none of its records. Whether
/// librdkafka also reports TOPIC_AUTHORIZATION_FAILED for an assigned
/// partition depends on which request learns it first (it may only log
/// it); if it reports an error, it must be that one.
fn assert_read_denied(client: &Client, topic: &str) {
    let consumer: BaseConsumer = client
        .config()
        .set("group.id", "alice-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("create a consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while std::time::Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(message)) => panic!(
                "read {topic} without the right: offset {}",
                message.offset()
            ),
            Some(Err(error)) => {
                assert_eq!(
                    error.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::TopicAuthorizationFailed),
                    "{error}"
                );
                return;
            }
            None => {}
        }
    }
}

async fn create_topic(client: &Client, topic: &str) {
    let results = client
        .admin()
        .create_topics(
            &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &kafka::admin_options(),
        )
        .await
        .expect("CreateTopics");
    assert_eq!(results, vec![Ok(topic.to_string())], "creating {topic}");
}

/// A client context that keeps every error librdkafka reports.
#[derive(Default, Clone)]
struct ErrorLog(Arc<Mutex<Vec<ReportedError>>>);

/// An error code and librdkafka's reason text.
type ReportedError = (Option<RDKafkaErrorCode>, String);

impl ClientContext for ErrorLog {
    fn error(&self, error: KafkaError, reason: &str) {
        if let Ok(mut errors) = self.0.lock() {
            errors.push((error.rdkafka_error_code(), reason.to_string()));
        }
    }
}

impl ConsumerContext for ErrorLog {}

// ---- brokers, tools ----

fn sasl_broker(settings: &[(&str, &str)]) -> Broker {
    let mut all = vec![("sasl.bootstrap.users", USERS)];
    all.extend_from_slice(settings);
    Broker::start_with_listeners(&["SASL_PLAINTEXT"], &all)
}

fn acl_admin(broker: &Broker, args: &[&str]) -> Value {
    let script = workspace_root().join("tests/python/acl_admin.py");
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let output = Command::new("python3")
        .arg(script)
        .args([
            "--bootstrap",
            &bootstrap,
            "--user",
            ADMIN.0,
            "--password",
            ADMIN.1,
        ])
        .args(args)
        .output()
        .expect("run acl_admin.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "acl_admin.py {args:?} printed no JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn cli(admin: &str, args: &[&str]) -> (bool, String) {
    gregor_tests::gregor_cli(args, admin)
}

/// A private copy of the standard plugin directory: the tests upload
/// modules into it.
fn private_plugin_dir() -> tempfile::TempDir {
    gregor_tests::private_plugin_dir("gregor-security-plugins-")
}

fn example(name: &str) -> PathBuf {
    gregor_tests::example_module(name)
}

// ---- certificates ----

/// A CA, a server certificate for 127.0.0.1 and two client certificates,
/// as PEM files in a temporary directory.
struct Certificates {
    dir: tempfile::TempDir,
}

impl Certificates {
    fn generate() -> Certificates {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            SanType,
        };
        let dir = tempfile::Builder::new()
            .prefix("gregor-certs-")
            .tempdir()
            .expect("certificate dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Gregor Test CA");
        let ca = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write ca.pem");

        let server_key = KeyPair::generate().expect("server key");
        let mut server = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        server
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server
            .signed_by(&server_key, &ca, &ca_key)
            .expect("sign the server certificate");
        // One PEM file with the chain and the key: ssl.keystore.location.
        std::fs::write(
            dir.path().join("server.pem"),
            format!("{}{}", server.pem(), server_key.serialize_pem()),
        )
        .expect("write server.pem");

        for name in ["tls-client", "intruder"] {
            let key = KeyPair::generate().expect("client key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            // rcgen's default subject has a CN; start from an empty one.
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::OrganizationName, "Gregor Tests");
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let certificate = params
                .signed_by(&key, &ca, &ca_key)
                .expect("sign a client certificate");
            std::fs::write(dir.path().join(format!("{name}.pem")), certificate.pem())
                .expect("write a client certificate");
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem())
                .expect("write a client key");
        }
        Certificates { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A TLS client of `bootstrap` trusting the test CA, optionally with
    /// a client certificate.
    fn client(&self, bootstrap: String, protocol: &str, certificate: Option<&str>) -> Client {
        let mut client = Client {
            bootstrap,
            properties: vec![
                ("security.protocol".into(), protocol.into()),
                ("ssl.ca.location".into(), self.path("ca.pem")),
            ],
        };
        if let Some(name) = certificate {
            client = client
                .with(
                    "ssl.certificate.location",
                    &self.path(&format!("{name}.pem")),
                )
                .with("ssl.key.location", &self.path(&format!("{name}.key")));
        }
        client
    }
}

// ---- raw protocol ----

fn sasl_conn(broker: &Broker) -> Conn {
    let address: SocketAddr = broker
        .listener_bootstrap("SASL_PLAINTEXT")
        .parse()
        .expect("listener address");
    Conn::connect(address)
}

fn kafka_string(buf: &mut Vec<u8>, value: &str) {
    put_i16(buf, value.len() as i16);
    buf.extend_from_slice(value.as_bytes());
}

/// SaslHandshake v1: the error code and the enabled mechanisms.
fn handshake(conn: &mut Conn, mechanism: &str, correlation_id: i32) -> (i16, Vec<String>) {
    handshake_version(conn, 1, mechanism, correlation_id)
}

/// SaslHandshake of `version` (v0 and v1 have the same layout).
fn handshake_version(
    conn: &mut Conn,
    version: i16,
    mechanism: &str,
    correlation_id: i32,
) -> (i16, Vec<String>) {
    let mut body = Vec::new();
    kafka_string(&mut body, mechanism);
    let frame = request_frame(SASL_KEY_HANDSHAKE, version, correlation_id, false, &body);
    let payload = conn.round_trip(&frame, correlation_id);
    let mut reader = Reader::new(&payload[4..]);
    let error = reader.i16();
    let count = reader.i32();
    let mechanisms = (0..count).map(|_| reader.string()).collect();
    (error, mechanisms)
}

/// SaslAuthenticate v0: the error code and message.
fn authenticate(conn: &mut Conn, token: &[u8], correlation_id: i32) -> (i16, Option<String>) {
    let mut body = Vec::new();
    put_i32(&mut body, token.len() as i32);
    body.extend_from_slice(token);
    let frame = request_frame(SASL_KEY_AUTHENTICATE, 0, correlation_id, false, &body);
    let payload = conn.round_trip(&frame, correlation_id);
    let mut reader = Reader::new(&payload[4..]);
    let error = reader.i16();
    let message = reader.nullable_string();
    (error, message)
}

// ---- tests ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha512_producer_and_plain_consumer_round_trip() {
    let broker = sasl_broker(&[]);
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let scram = Client::sasl(bootstrap.clone(), "SCRAM-SHA-512", ALICE);
    let plain = Client::sasl(bootstrap.clone(), "PLAIN", ALICE);
    let scram256 = Client::sasl(bootstrap, "SCRAM-SHA-256", ALICE);
    create_topic(&scram, "sasl-orders").await;
    produce(&scram, "sasl-orders", 10)
        .await
        .expect("SCRAM-SHA-512 producer");
    produce(&scram256, "sasl-orders", 5)
        .await
        .expect("SCRAM-SHA-256 producer");
    let records = consume(&plain, "sasl-orders", 15).expect("PLAIN consumer");
    assert_eq!(records[0], "record-0");
    assert_eq!(records.len(), 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_fails_cleanly() {
    let broker = sasl_broker(&[]);
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    for mechanism in ["SCRAM-SHA-512", "PLAIN"] {
        let client = Client::sasl(bootstrap.clone(), mechanism, ("alice", "not-her-password"));
        let errors = ErrorLog::default();
        let consumer: BaseConsumer<ErrorLog> = client
            .config()
            .create_with_context(errors.clone())
            .expect("create a consumer");
        let result = consumer.fetch_metadata(None, Duration::from_secs(10));
        assert!(
            result.is_err(),
            "{mechanism}: metadata with a wrong password"
        );
        // Errors reach the context when the client is polled.
        for _ in 0..50 {
            if !errors.0.lock().unwrap().is_empty() {
                break;
            }
            let _ = consumer.poll(Duration::from_millis(100));
        }
        let seen = errors.0.lock().unwrap().clone();
        assert!(
            seen.iter().any(
                |(code, reason)| *code == Some(RDKafkaErrorCode::Authentication)
                    && reason.contains("Authentication failed")
            ),
            "{mechanism}: expected an authentication failure, got {seen:?}"
        );
    }
    // The broker is fine and a right password still works.
    let good = Client::sasl(bootstrap, "SCRAM-SHA-512", ALICE);
    create_topic(&good, "after-failures").await;
    assert!(broker.log_tail(400).contains("SASL authentication failed"));
}

#[test]
fn sasl_state_machine_on_the_wire() {
    let broker = sasl_broker(&[(
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
        "PLAIN",
    )]);

    // Anything but ApiVersions and SaslHandshake before authenticating closes.
    let mut conn = sasl_conn(&broker);
    conn.send(&metadata_request(1, 1)).expect("send Metadata");
    conn.expect_closed("Metadata before SASL authentication");

    // A mechanism that is not enabled: the enabled ones, then close.
    let mut conn = sasl_conn(&broker);
    conn.api_versions(1);
    let (error, mechanisms) = handshake(&mut conn, "SCRAM-SHA-512", 2);
    assert_eq!(error, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(mechanisms, vec!["PLAIN".to_string()]);
    conn.expect_closed("after an unsupported mechanism");

    // A wrong password: SASL_AUTHENTICATION_FAILED, then close.
    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake(&mut conn, "PLAIN", 1).0, 0);
    let (error, message) = authenticate(&mut conn, b"\0alice\0wrong", 2);
    assert_eq!(error, 58, "SASL_AUTHENTICATION_FAILED: {message:?}");
    assert!(
        message
            .as_deref()
            .unwrap_or_default()
            .contains("Authentication failed"),
        "{message:?}"
    );
    conn.expect_closed("after failed authentication");

    // After a handshake only SaslAuthenticate is accepted.
    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake(&mut conn, "PLAIN", 1).0, 0);
    conn.send(&metadata_request(1, 2)).expect("send Metadata");
    conn.expect_closed("Metadata between handshake and authentication");

    // The right password: authenticated, and the connection serves.
    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake(&mut conn, "PLAIN", 1).0, 0);
    assert_eq!(authenticate(&mut conn, b"\0alice\0alice-secret", 2).0, 0);
    conn.round_trip(&metadata_request(1, 3), 3);
    assert_eq!(handshake(&mut conn, "PLAIN", 4).0, 34, "ILLEGAL_SASL_STATE");
    conn.round_trip(&metadata_request(1, 5), 5);

    // A PLAINTEXT listener has no SASL: ILLEGAL_SASL_STATE, no mechanisms.
    let mut plain = Conn::connect(broker.addr());
    assert_eq!(handshake(&mut plain, "PLAIN", 1), (34, Vec::new()));
}

/// Sends one unframed SASL token (SaslHandshake v0) and reads the answer.
fn unframed_token(conn: &mut Conn, token: &[u8]) -> Vec<u8> {
    let mut frame = (token.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(token);
    conn.send(&frame).expect("send an unframed token");
    conn.read_token().expect("the broker's unframed token")
}

/// SaslHandshake v0, as Kafka serves it (pre-KIP-152 clients): after the
/// handshake the SASL tokens go unframed, size-prefixed without a request
/// header, and come back the same way (empty for PLAIN); then the
/// connection serves requests. A failed token closes the connection
/// without an answer. PLAIN and SCRAM-SHA-256, computed here.
#[test]
fn sasl_handshake_v0_exchanges_unframed_tokens() {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine as _;
    use sha2::{Digest, Sha256};

    let broker = sasl_broker(&[]);
    let mut conn = sasl_conn(&broker);
    conn.api_versions(1);
    assert_eq!(handshake_version(&mut conn, 0, "PLAIN", 2).0, 0);
    assert!(unframed_token(&mut conn, b"\0alice\0alice-secret").is_empty());
    conn.round_trip(&metadata_request(1, 3), 3);

    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake_version(&mut conn, 0, "PLAIN", 1).0, 0);
    let mut wrong = 12i32.to_be_bytes().to_vec();
    wrong.extend_from_slice(b"\0alice\0wrong");
    conn.send(&wrong).expect("send a wrong password");
    conn.expect_closed("after a failed unframed token");

    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake_version(&mut conn, 0, "SCRAM-SHA-256", 1).0, 0);
    let bare = "n=alice,r=v0clientnonce";
    let first = unframed_token(&mut conn, format!("n,,{bare}").as_bytes());
    let first = String::from_utf8(first).expect("server-first is text");
    let mut fields = first.split(',');
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .expect("r=");
    let salt = BASE64
        .decode(
            fields
                .next()
                .and_then(|f| f.strip_prefix("s="))
                .expect("s="),
        )
        .expect("salt");
    let iterations: u32 = fields
        .next()
        .and_then(|f| f.strip_prefix("i="))
        .and_then(|i| i.parse().ok())
        .expect("i=");
    assert!(nonce.starts_with("v0clientnonce"), "{first}");
    let salted = salted_password(ALICE.1, &salt, iterations);
    let client_key = hmac_sha256(&salted, b"Client Key");
    let stored_key: [u8; 32] = Sha256::digest(client_key).into();
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{bare},{first},{without_proof}");
    let signature = hmac_sha256(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let last = format!("{without_proof},p={}", BASE64.encode(proof));
    let server_final = unframed_token(&mut conn, last.as_bytes());
    let server_key = hmac_sha256(&salted, b"Server Key");
    let expected = hmac_sha256(&server_key, auth_message.as_bytes());
    assert_eq!(
        String::from_utf8_lossy(&server_final),
        format!("v={}", BASE64.encode(expected)),
        "server-final proves the server knows the credential"
    );
    conn.round_trip(&metadata_request(1, 2), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_from_an_admin_client_grant_and_revoke_rights() {
    let broker = sasl_broker(&[
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
    ]);
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let admin = Client::sasl(bootstrap.clone(), "SCRAM-SHA-512", ADMIN);
    let alice = Client::sasl(bootstrap, "SCRAM-SHA-512", ALICE);
    create_topic(&admin, "orders").await;
    produce(&admin, "orders", 3)
        .await
        .expect("a super user writes");
    // The consumer's group is alice's from the start: this is about topics.
    let created = acl_admin(
        &broker,
        &[
            "create",
            "--principal",
            "User:alice",
            "--resource-type",
            "GROUP",
            "--name",
            "alice-",
            "--pattern",
            "PREFIXED",
            "--operation",
            "READ",
        ],
    );
    assert_eq!(created["succeeded"], 1, "{created}");

    // No ACL: denied.
    assert_eq!(
        produce_error_code(produce(&alice, "orders", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    assert_read_denied(&alice, "orders");

    // CreateAcls through kafka-python's KafkaAdminClient.
    for operation in ["WRITE", "READ"] {
        let created = acl_admin(
            &broker,
            &[
                "create",
                "--principal",
                "User:alice",
                "--name",
                "orders",
                "--operation",
                operation,
            ],
        );
        assert_eq!(created["succeeded"], 1, "{created}");
    }
    let described = acl_admin(
        &broker,
        &[
            "describe",
            "--principal",
            "User:alice",
            "--name",
            "orders",
            "--operation",
            "ANY",
        ],
    );
    assert_eq!(described["error"], "NoError", "{described}");
    assert_eq!(
        described["acls"].as_array().map(Vec::len),
        Some(2),
        "{described}"
    );

    produce(&alice, "orders", 2)
        .await
        .expect("alice writes after CreateAcls");
    assert_eq!(consume(&alice, "orders", 5).expect("alice reads").len(), 5);

    // DeleteAcls takes WRITE away again.
    let deleted = acl_admin(
        &broker,
        &[
            "delete",
            "--principal",
            "User:alice",
            "--name",
            "orders",
            "--operation",
            "WRITE",
        ],
    );
    assert_eq!(deleted["deleted"], 1, "{deleted}");
    assert_eq!(
        produce_error_code(produce(&alice, "orders", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    consume(&alice, "orders", 5).expect("READ is still granted");

    // alice may not administer ACLs.
    let output = Command::new("python3")
        .arg(workspace_root().join("tests/python/acl_admin.py"))
        .args(["--bootstrap", &broker.listener_bootstrap("SASL_PLAINTEXT")])
        .args(["--user", ALICE.0, "--password", ALICE.1])
        .args([
            "create",
            "--principal",
            "User:alice",
            "--name",
            "x",
            "--operation",
            "ALL",
        ])
        .output()
        .expect("run acl_admin.py");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("ClusterAuthorizationFailed"),
        "alice creating ACLs: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_need_their_own_acl() {
    let broker = sasl_broker(&[
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
    ]);
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let admin = Client::sasl(bootstrap.clone(), "SCRAM-SHA-512", ADMIN);
    let alice = Client::sasl(bootstrap, "SCRAM-SHA-512", ALICE);
    create_topic(&admin, "events").await;
    produce(&admin, "events", 2).await.expect("admin writes");
    let created = acl_admin(
        &broker,
        &[
            "create",
            "--principal",
            "User:alice",
            "--name",
            "events",
            "--operation",
            "READ",
        ],
    );
    assert_eq!(created["succeeded"], 1, "{created}");

    let subscribe = || {
        let consumer: BaseConsumer = alice
            .config()
            .set("group.id", "alice-group")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("create a group consumer");
        consumer.subscribe(&["events"]).expect("subscribe");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "no answer from the group"
            );
            match consumer.poll(Duration::from_millis(500)) {
                Some(Ok(message)) => return Ok(message.offset()),
                Some(Err(error)) => return Err(error.rdkafka_error_code()),
                None => {}
            }
        }
    };
    assert_eq!(
        subscribe(),
        Err(Some(RDKafkaErrorCode::GroupAuthorizationFailed))
    );
    let created = acl_admin(
        &broker,
        &[
            "create",
            "--principal",
            "User:alice",
            "--resource-type",
            "GROUP",
            "--name",
            "alice-",
            "--pattern",
            "PREFIXED",
            "--operation",
            "READ",
        ],
    );
    assert_eq!(created["succeeded"], 1, "{created}");
    assert_eq!(subscribe(), Ok(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_round_trip_with_client_certificate_principals() {
    let certs = Certificates::generate();
    let keystore = certs.path("server.pem");
    let truststore = certs.path("ca.pem");
    let broker = Broker::start_with_listeners(
        &["SSL"],
        &[
            ("ssl.keystore.location", keystore.as_str()),
            ("ssl.truststore.location", truststore.as_str()),
            ("ssl.client.auth", "required"),
            ("authorizer", "authorizer_acl"),
            (
                "super.users",
                "User:ANONYMOUS;User:CN=tls-client,O=Gregor Tests",
            ),
        ],
    );
    let bootstrap = broker.listener_bootstrap("SSL");
    let client = certs.client(bootstrap.clone(), "ssl", Some("tls-client"));
    create_topic(&client, "tls-orders").await;
    produce(&client, "tls-orders", 20)
        .await
        .expect("TLS producer");
    let records = consume(&client, "tls-orders", 20).expect("TLS consumer");
    assert_eq!(records.len(), 20);

    // Another certificate is another principal, without rights.
    let intruder = certs.client(bootstrap.clone(), "ssl", Some("intruder"));
    assert_eq!(
        produce_error_code(produce(&intruder, "tls-orders", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
    );

    // Without a certificate the handshake fails (ssl.client.auth=required).
    let anonymous = certs.client(bootstrap, "ssl", None);
    let consumer: BaseConsumer = anonymous.config().create().expect("consumer");
    assert!(consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_round_trip_with_scram_sha256() {
    let certs = Certificates::generate();
    let keystore = certs.path("server.pem");
    let broker = Broker::start_with_listeners(
        &["SASL_SSL"],
        &[
            ("ssl.keystore.location", keystore.as_str()),
            ("sasl.bootstrap.users", USERS),
            ("authorizer", "authorizer_acl"),
            ("super.users", "User:alice"),
        ],
    );
    let client = certs
        .client(broker.listener_bootstrap("SASL_SSL"), "sasl_ssl", None)
        .with("sasl.mechanism", "SCRAM-SHA-256")
        .with("sasl.username", ALICE.0)
        .with("sasl.password", ALICE.1);
    create_topic(&client, "secure-orders").await;
    produce(&client, "secure-orders", 10)
        .await
        .expect("SASL_SSL producer");
    assert_eq!(
        consume(&client, "secure-orders", 10)
            .expect("SASL_SSL consumer")
            .len(),
        10
    );
}

/// Loads the prefix authorizer `module` into a running broker that uses
/// the ACL authorizer, switches to it live and checks its policy against
/// a real client; then switches back to no authorizer.
async fn prefix_authorizer_is_enforced(module: &str) {
    let plugins = private_plugin_dir();
    let plugin_path = plugins.path().display().to_string();
    let admin_addr = format!("127.0.0.1:{}", free_port());
    let broker = sasl_broker(&[
        ("plugin.dir", plugin_path.as_str()),
        ("admin.listener", admin_addr.as_str()),
        // Open on purpose: admin_auth.rs tests the authenticated endpoint.
        ("admin.auth", "none"),
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
    ]);
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let admin = Client::sasl(bootstrap.clone(), "SCRAM-SHA-512", ADMIN);
    let alice = Client::sasl(bootstrap, "SCRAM-SHA-512", ALICE);
    create_topic(&admin, "alice-orders").await;
    create_topic(&admin, "bob-orders").await;
    // The ACL authorizer, no ACLs: alice may do nothing.
    assert_eq!(
        produce_error_code(produce(&alice, "alice-orders", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
    );

    let file = example(module).display().to_string();
    let (ok, text) = cli(&admin_addr, &["plugins", "load", &file]);
    assert!(ok, "loading {module}: {text}");
    let (ok, text) = cli(&admin_addr, &["authorizer", "use", module]);
    assert!(ok, "switching to {module}: {text}");
    let (ok, text) = cli(&admin_addr, &["authorizer", "show", "--output", "json"]);
    assert!(
        ok && text.contains(&format!("\"active\":\"{module}\"")),
        "{text}"
    );

    produce(&alice, "alice-orders", 3)
        .await
        .unwrap_or_else(|e| panic!("{module}: alice writes her topic: {e}"));
    assert_eq!(
        consume(&alice, "alice-orders", 3)
            .expect("alice reads")
            .len(),
        3
    );
    assert_eq!(
        produce_error_code(produce(&alice, "bob-orders", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "{module}: alice may not write bob's topic"
    );
    produce(&admin, "bob-orders", 1)
        .await
        .expect("admin may do everything");

    // Back to no authorizer, live: everything is allowed.
    let (ok, text) = cli(&admin_addr, &["authorizer", "use", "none"]);
    assert!(ok, "switching to none: {text}");
    produce(&alice, "bob-orders", 1)
        .await
        .expect("no authorizer: alice writes bob's topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_prefix_authorizer_is_switched_to_live() {
    prefix_authorizer_is_enforced("authorizer_prefix").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_prefix_authorizer_is_switched_to_live() {
    prefix_authorizer_is_enforced("authorizer_prefix_py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_prefix_authorizer_is_switched_to_live() {
    prefix_authorizer_is_enforced("authorizer_prefix_js").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_acls_and_the_authorizer_choice_survive_a_crash() {
    let admin_addr = format!("127.0.0.1:{}", free_port());
    let mut broker = sasl_broker(&[
        ("admin.listener", admin_addr.as_str()),
        ("admin.auth", "none"),
        ("super.users", "User:admin"),
    ]);
    let (ok, text) = cli(
        &admin_addr,
        &[
            "users",
            "add",
            "carol",
            "--password",
            "carol-secret",
            "--mechanism",
            "SCRAM-SHA-512",
        ],
    );
    assert!(ok, "users add: {text}");
    let (ok, text) = cli(&admin_addr, &["users", "list", "--output", "json"]);
    assert!(
        ok && text.contains("\"carol\"") && !text.contains("carol-secret"),
        "{text}"
    );
    let created = acl_admin(
        &broker,
        &[
            "create",
            "--principal",
            "User:carol",
            "--name",
            "carol-",
            "--pattern",
            "PREFIXED",
            "--operation",
            "WRITE",
        ],
    );
    assert_eq!(created["succeeded"], 1, "{created}");
    let (ok, text) = cli(&admin_addr, &["authorizer", "use", "authorizer_acl"]);
    assert!(ok, "{text}");

    broker.kill();
    broker.restart();

    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let admin = Client::sasl(bootstrap.clone(), "SCRAM-SHA-512", ADMIN);
    let carol = Client::sasl(
        bootstrap.clone(),
        "SCRAM-SHA-512",
        ("carol", "carol-secret"),
    );
    create_topic(&admin, "carol-log").await;
    create_topic(&admin, "other-log").await;
    produce(&carol, "carol-log", 1)
        .await
        .expect("carol's credentials and ACL survived");
    assert_eq!(
        produce_error_code(produce(&carol, "other-log", 1).await),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed),
        "the ACL authorizer is still the active one"
    );
    // SHA-256 was never set for carol.
    let carol256 = Client::sasl(bootstrap, "SCRAM-SHA-256", ("carol", "carol-secret"));
    let consumer: BaseConsumer = carol256.config().create().expect("consumer");
    assert!(consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .is_err());
    let data = broker.data_dir().join("security");
    let stored = std::fs::read_to_string(data.join("scram-credentials.json")).expect("store");
    assert!(!stored.contains("carol-secret"));
    assert!(Path::new(&data.join("acls.json")).is_file());
}

// ---- SCRAM credential administration on the wire ----

/// HMAC-SHA-256 (RFC 2104), enough for a test's PBKDF2.
fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
    let outer: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
    let inner_hash = Sha256::new()
        .chain_update(&inner)
        .chain_update(data)
        .finalize();
    Sha256::new()
        .chain_update(&outer)
        .chain_update(inner_hash)
        .finalize()
        .into()
}

/// RFC 5802 `Hi()`: PBKDF2-HMAC-SHA-256 with one block.
fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac_sha256(password.as_bytes(), &first);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac_sha256(password.as_bytes(), &u);
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

fn put_uvarint(buf: &mut Vec<u8>, value: usize) {
    gregor_tests::wire::put_uvarint(buf, value as u32);
}

fn put_compact_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_uvarint(buf, bytes.len() + 1);
    buf.extend_from_slice(bytes);
}

/// AlterUserScramCredentials v0 upserting SCRAM-SHA-256 for `user`, and
/// deleting SCRAM-SHA-512 of `delete`: (user, error code) per result.
fn alter_scram(
    conn: &mut Conn,
    user: &str,
    password: &str,
    delete: &str,
    id: i32,
) -> Vec<(String, i16)> {
    let salt = b"gregor-test-salt";
    let mut body = Vec::new();
    put_uvarint(&mut body, 2); // one deletion
    put_compact_bytes(&mut body, delete.as_bytes());
    body.push(2); // SCRAM-SHA-512
    body.push(0);
    put_uvarint(&mut body, 2); // one upsertion
    put_compact_bytes(&mut body, user.as_bytes());
    body.push(1); // SCRAM-SHA-256
    put_i32(&mut body, 4096);
    put_compact_bytes(&mut body, salt);
    put_compact_bytes(&mut body, &salted_password(password, salt, 4096));
    body.push(0);
    body.push(0);
    let payload = conn.round_trip(&request_frame(51, 0, id, true, &body), id);
    let mut reader = Reader::new(&payload[4..]);
    reader.skip_tags();
    let _throttle = reader.i32();
    let count = reader.uvarint().saturating_sub(1);
    (0..count)
        .map(|_| {
            let user = reader.compact_nullable_string().unwrap_or_default();
            let error = reader.i16();
            let _message = reader.compact_nullable_string();
            reader.skip_tags();
            (user, error)
        })
        .collect()
}

/// DescribeUserScramCredentials v0 for `users`: the top-level error and
/// (user, error, [(mechanism, iterations)]) per result.
#[allow(clippy::type_complexity)]
fn describe_scram(
    conn: &mut Conn,
    users: &[&str],
    id: i32,
) -> (i16, Vec<(String, i16, Vec<(i8, i32)>)>) {
    let mut body = Vec::new();
    put_uvarint(&mut body, users.len() + 1);
    for user in users {
        put_compact_bytes(&mut body, user.as_bytes());
        body.push(0);
    }
    body.push(0);
    let payload = conn.round_trip(&request_frame(50, 0, id, true, &body), id);
    let mut reader = Reader::new(&payload[4..]);
    reader.skip_tags();
    let _throttle = reader.i32();
    let error = reader.i16();
    let _message = reader.compact_nullable_string();
    let count = reader.uvarint().saturating_sub(1);
    let results = (0..count)
        .map(|_| {
            let user = reader.compact_nullable_string().unwrap_or_default();
            let error = reader.i16();
            let _message = reader.compact_nullable_string();
            let infos = (0..reader.uvarint().saturating_sub(1))
                .map(|_| {
                    let info = (reader.i8(), reader.i32());
                    reader.skip_tags();
                    info
                })
                .collect();
            reader.skip_tags();
            (user, error, infos)
        })
        .collect();
    (error, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_credentials_are_described_and_altered_over_the_protocol() {
    let broker = sasl_broker(&[
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
    ]);
    // ANONYMOUS on the PLAINTEXT listener may not touch credentials.
    let mut anonymous = Conn::connect(broker.addr());
    let (error, _) = describe_scram(&mut anonymous, &[], 1);
    assert_eq!(error, 31, "CLUSTER_AUTHORIZATION_FAILED");
    let denied = alter_scram(&mut anonymous, "dave", "dave-secret", "nobody", 2);
    assert!(denied.iter().all(|(_, error)| *error == 31), "{denied:?}");

    // admin, authenticated over SASL.
    let mut conn = sasl_conn(&broker);
    assert_eq!(handshake(&mut conn, "PLAIN", 1).0, 0);
    assert_eq!(authenticate(&mut conn, b"\0admin\0admin-secret", 2).0, 0);
    let results = alter_scram(&mut conn, "dave", "dave-secret", "nobody", 3);
    assert!(
        results.contains(&("dave".to_string(), 0)) && results.contains(&("nobody".to_string(), 91)),
        "upsert dave, RESOURCE_NOT_FOUND for nobody: {results:?}"
    );
    let (error, described) = describe_scram(&mut conn, &["dave", "alice", "ghost"], 4);
    assert_eq!(error, 0);
    assert_eq!(described[0], ("dave".to_string(), 0, vec![(1, 4096)]));
    assert_eq!(described[1].2.len(), 2, "alice has both mechanisms");
    assert_eq!(described[2].1, 91, "ghost has no credentials");
    let (_, everyone) = describe_scram(&mut conn, &[], 5);
    assert_eq!(everyone.len(), 3, "admin, alice, dave: {everyone:?}");

    // dave logs in with the credential a client salted.
    let dave = Client::sasl(
        broker.listener_bootstrap("SASL_PLAINTEXT"),
        "SCRAM-SHA-256",
        ("dave", "dave-secret"),
    );
    let consumer: BaseConsumer = dave.config().create().expect("consumer");
    consumer
        .fetch_metadata(None, Duration::from_secs(20))
        .expect("dave authenticates with SCRAM-SHA-256");
}
