//! Authorization rules as Kafka 4's KafkaApis applies them (issue 16.4),
//! each against a broker with the ACL authorizer, a SASL listener and a
//! super user, driven by real clients through `tests/python/authz_checks.py`:
//! librdkafka (confluent-kafka) for the consumer protocol, describing
//! consumer groups; kafka-python's connection and protocol classes for
//! InitProducerId, FindCoordinator and DescribeCluster, which no client
//! lets one send as is (librdkafka's describe_cluster sends Metadata).

use std::path::PathBuf;

use gregor_tests::{free_port, gregor_cli, run_python, workspace_root, Broker};
use serde_json::{json, Value};

const USERS: &str =
    "admin:admin-secret,alice:alice-secret,bob:bob-secret,carol:carol-secret,dave:dave-secret";
const ADMIN: &str = "admin";
const TOPIC_AUTHORIZATION_FAILED: &str = "TOPIC_AUTHORIZATION_FAILED";
const CLUSTER_AUTHORIZATION_FAILED: i64 = 31;
const INVALID_REQUEST: i64 = 42;

/// The ACL authorizer with `User:admin` as super user, plus `extra` settings.
fn acl_broker(extra: &[(&str, &str)]) -> Broker {
    let mut settings = vec![
        ("sasl.bootstrap.users", USERS),
        ("authorizer", "authorizer_acl"),
        ("super.users", "User:admin"),
    ];
    settings.extend_from_slice(extra);
    Broker::start_with_listeners(&["SASL_PLAINTEXT"], &settings)
}

/// Runs an `authz_checks.py` command as `user` (password `<user>-secret`):
/// the JSON it printed.
fn checks(broker: &Broker, user: &str, command: &[&str]) -> Value {
    let bootstrap = broker.listener_bootstrap("SASL_PLAINTEXT");
    let password = format!("{user}-secret");
    let mut args = vec![bootstrap.as_str(), user, password.as_str()];
    args.extend_from_slice(command);
    let (stdout, stderr) = run_python("authz_checks.py", &args);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{command:?} printed no JSON ({e}): {stdout}{stderr}"))
}

/// Creates ACLs as the super user (`PERMISSION:TYPE:PATTERN:NAME:PRINCIPAL:OPERATION`).
fn grant(broker: &Broker, acls: &[&str]) {
    let mut command = vec!["create-acls"];
    command.extend_from_slice(acls);
    assert_eq!(checks(broker, ADMIN, &command)["failed"], json!([]));
}

fn create_topics(broker: &Broker, topics: &[&str]) {
    let mut command = vec!["create-topics"];
    command.extend_from_slice(topics);
    checks(broker, ADMIN, &command);
}

/// Whether `user`'s idempotent InitProducerId got a producer id, else its error.
fn init_producer_id(broker: &Broker, user: &str) -> Result<(), i64> {
    let answer = checks(broker, user, &["init-producer-id"]);
    match answer["error_code"].as_i64() {
        Some(0) if answer["producer_id"].as_i64() >= Some(0) => Ok(()),
        code => Err(code.unwrap_or(-1)),
    }
}

#[test]
fn idempotent_producers_are_allowed_by_write_acl_patterns_alone() {
    let broker = acl_broker(&[]);
    grant(
        &broker,
        &[
            // A topic that does not exist (nor ever will here).
            "ALLOW:TOPIC:LITERAL:future:User:alice:WRITE",
            // A LITERAL DENY does not cancel a PREFIXED ALLOW.
            "ALLOW:TOPIC:PREFIXED:carol-:User:carol:WRITE",
            "DENY:TOPIC:LITERAL:carol-:User:carol:WRITE",
            // A PREFIXED DENY covering the ALLOW does.
            "ALLOW:TOPIC:PREFIXED:dave-x:User:dave:WRITE",
            "DENY:TOPIC:PREFIXED:dave-:User:dave:WRITE",
            // READ is not WRITE.
            "ALLOW:TOPIC:LITERAL:future:User:bob:READ",
        ],
    );
    assert_eq!(init_producer_id(&broker, "alice"), Ok(()));
    assert_eq!(init_producer_id(&broker, "carol"), Ok(()));
    assert_eq!(
        init_producer_id(&broker, "dave"),
        Err(CLUSTER_AUTHORIZATION_FAILED)
    );
    assert_eq!(
        init_producer_id(&broker, "bob"),
        Err(CLUSTER_AUTHORIZATION_FAILED)
    );
    assert_eq!(init_producer_id(&broker, ADMIN), Ok(()));
    // IDEMPOTENT_WRITE on the Cluster is enough on its own.
    grant(
        &broker,
        &["ALLOW:CLUSTER:LITERAL:kafka-cluster:User:bob:IDEMPOTENT_WRITE"],
    );
    assert_eq!(init_producer_id(&broker, "bob"), Ok(()));
}

fn example(name: &str) -> PathBuf {
    let dir = std::env::var_os("GREGOR_EXAMPLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/examples"));
    dir.join(format!("{name}.wasm"))
}

#[test]
fn example_authorizers_answer_by_resource_type_in_every_language() {
    let plugins = gregor_tests::private_plugin_dir("gregor-authz-plugins-");
    let plugin_dir = plugins.path().display().to_string();
    let admin_addr = format!("127.0.0.1:{}", free_port());
    let broker = acl_broker(&[
        ("plugin.dir", plugin_dir.as_str()),
        ("admin.listener", admin_addr.as_str()),
        ("admin.auth", "none"),
    ]);
    // No ACLs: the ACL authorizer refuses alice.
    assert_eq!(
        init_producer_id(&broker, "alice"),
        Err(CLUSTER_AUTHORIZATION_FAILED)
    );
    for module in [
        "authorizer_prefix",
        "authorizer_prefix_py",
        "authorizer_prefix_js",
    ] {
        let file = example(module).display().to_string();
        let (ok, text) = gregor_cli(&["plugins", "load", &file], &admin_addr);
        assert!(ok, "loading {module}: {text}");
        let (ok, text) = gregor_cli(&["authorizer", "use", module], &admin_addr);
        assert!(ok, "switching to {module}: {text}");
        // A tenant owns the topics under its prefix before they exist.
        assert_eq!(init_producer_id(&broker, "alice"), Ok(()), "{module}");
    }
}

/// Topics "visible" and "hidden"; alice may perform `operation` on the
/// groups prefixed `alice-` and on "visible", nothing on "hidden".
fn visible_and_hidden(operation: &str) -> Broker {
    let broker = acl_broker(&[]);
    create_topics(&broker, &["visible", "hidden"]);
    let group = format!("ALLOW:GROUP:PREFIXED:alice-:User:alice:{operation}");
    let topic = format!("ALLOW:TOPIC:LITERAL:visible:User:alice:{operation}");
    grant(&broker, &[&group, &topic]);
    broker
}

#[test]
fn consumer_group_members_need_describe_on_every_subscribed_topic() {
    let broker = visible_and_hidden("READ");
    let refused = checks(&broker, "alice", &["join", "alice-2", "visible", "hidden"]);
    assert_eq!(refused["assigned"], json!([]), "{refused}");
    assert!(
        refused["errors"]
            .as_array()
            .is_some_and(|e| e.contains(&json!(TOPIC_AUTHORIZATION_FAILED))),
        "{refused}"
    );
    let joined = checks(&broker, "alice", &["join", "alice-1", "visible"]);
    assert_eq!(joined["assigned"], json!(["visible"]), "{joined}");
}

#[test]
fn consumer_groups_with_topics_the_caller_may_not_describe_are_hidden() {
    let broker = visible_and_hidden("DESCRIBE");
    let described = checks(
        &broker,
        "alice",
        &[
            "describe-groups",
            ADMIN,
            "admin-secret",
            "alice-mixed:visible,hidden",
            "alice-plain:visible",
        ],
    );
    assert_eq!(
        described["alice-mixed"],
        json!({"error": TOPIC_AUTHORIZATION_FAILED, "members": 0}),
        "{described}"
    );
    assert_eq!(
        described["alice-plain"],
        json!({"error": null, "members": 1}),
        "{described}"
    );
}

#[test]
fn cluster_operations_are_described_only_to_who_may_describe_the_cluster() {
    let broker = acl_broker(&[]);
    grant(
        &broker,
        &["ALLOW:CLUSTER:LITERAL:kafka-cluster:User:alice:CREATE"],
    );
    let alice = checks(&broker, "alice", &["describe-cluster"]);
    assert_eq!(alice["operations"], json!([]), "{alice}");
    let admin = checks(&broker, ADMIN, &["describe-cluster"]);
    let operations = admin["operations"].as_array().cloned().unwrap_or_default();
    assert!(operations.contains(&json!("DESCRIBE")), "{admin}");
    assert!(operations.contains(&json!("CREATE")), "{admin}");
}

#[test]
fn share_coordinators_need_cluster_action_before_the_key_type_is_checked() {
    let broker = acl_broker(&[]);
    let alice = checks(&broker, "alice", &["find-share-coordinator"]);
    assert_eq!(
        alice["error_code"],
        json!(CLUSTER_AUTHORIZATION_FAILED),
        "{alice}"
    );
    // Allowed CLUSTER_ACTION: this broker has no share coordinator.
    let admin = checks(&broker, ADMIN, &["find-share-coordinator"]);
    assert_eq!(admin["error_code"], json!(INVALID_REQUEST), "{admin}");
}
