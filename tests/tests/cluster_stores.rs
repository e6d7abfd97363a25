//! The broker's stores follow the metadata log on a 3-node cluster: a
//! topic config, a cluster-wide and a per-broker config, a SCRAM user, an
//! ACL, a client quota and a client-metrics subscription set through one
//! broker are what another broker describes and enforces, and a node
//! restarted after missing a change has them all.
//!
//! Each node has a PLAINTEXT listener, whose ANONYMOUS user is a super
//! user (the admin side), and a SASL_PLAINTEXT one where `alice` (PLAIN)
//! is authorized by `authorizer_acl`. confluent-kafka drives configs,
//! ACLs and SCRAM (`tests/python/cluster_stores.py`), kafka-python the
//! quota and client-metrics APIs librdkafka lacks (`admin_wire.py`); the
//! nodes come from the cluster harness (`gregor_tests::cluster`).

use std::time::Duration;

use gregor_tests::cluster::{self, script_json, Cluster, ClusterBuilder, Node};
use gregor_tests::{gregor_cli, wait_for};
use serde_json::{json, Value};

/// Three combined-mode nodes with a SASL_PLAINTEXT listener beside the
/// PLAINTEXT one, authorized by `authorizer_acl` with ANONYMOUS a super
/// user.
fn authorized() -> ClusterBuilder {
    cluster::cluster(3)
        .listener("SASL_PLAINTEXT", "SASL_PLAINTEXT")
        .set("authorizer", "authorizer_acl")
        .set("super.users", "User:ANONYMOUS")
}

fn start_cluster() -> Cluster {
    authorized().start()
}

/// `cluster_stores.py COMMAND NODE ARGS` for `node`.
fn stores(command: &str, node: &Node, args: &[&str]) -> Value {
    let id = node.id.to_string();
    script_json(
        "cluster_stores.py",
        &[&[command, id.as_str()][..], args].concat(),
    )
}

/// admin_wire.py's `command`, pinned to `node`.
fn wire(node: &Node, args: &[&str]) -> Value {
    stores(
        "wire",
        node,
        &[&[node.bootstrap().as_str()][..], args].concat(),
    )
}

/// Waits until `answer()` satisfies `check` (another node applies a
/// change a moment after the one that proposed it); the answer.
fn until(what: &str, answer: impl Fn() -> Value, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, Duration::from_secs(15), || {
        Some(answer()).filter(|value| check(value))
    })
}

fn config_of(node: &Node, kind: &str, name: &str, key: &str) -> Value {
    stores("config", node, &[&node.bootstrap(), kind, name, key])["value"].clone()
}

fn set_config(node: &Node, kind: &str, name: &str, key: &str, value: &str) -> Value {
    stores(
        "set-config",
        node,
        &[&node.bootstrap(), kind, name, key, value],
    )
}

/// Waits until `node` describes `key` of a resource as `value`.
fn config_becomes(node: &Node, kind: &str, name: &str, key: &str, value: &str) {
    let what = format!("node {} to describe {kind} {name:?} {key}={value}", node.id);
    until(
        &what,
        || config_of(node, kind, name, key),
        |seen| seen == value,
    );
}

/// What `alice` (PLAIN) is told about `topic` on `node`'s SASL listener.
fn alice_on(node: &Node, topic: &str) -> Value {
    let sasl = node.listener_bootstrap("SASL_PLAINTEXT");
    stores("as-user", node, &[&sasl, "alice", "alice-secret", topic])
}

/// Waits until `alice` may describe `topic` on `node`.
fn alice_allowed(node: &Node, topic: &str) {
    let what = format!("alice allowed on node {}", node.id);
    until(
        &what,
        || alice_on(node, topic),
        |seen| seen["error"].is_null() && seen["topic_error"].is_null(),
    );
}

/// Every quota entity and the subscription `sub`, as `node` describes them.
fn quota_state(node: &Node) -> Value {
    wire(node, &["show-state", "sub"])
}

#[test]
fn configs_acls_users_and_quotas_set_on_one_broker_hold_on_every_broker() {
    let mut cluster = start_cluster();
    let nodes = &mut cluster.nodes;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    until(
        "three brokers",
        || script_json("cluster.py", &["metadata", &a.bootstrap()]),
        |md| md["brokers"] == json!([1, 2, 3]),
    );
    let created = script_json("cluster.py", &["create", &a.bootstrap(), "kept", "3", "3"]);
    assert_eq!(created["error"], Value::Null, "{created}");

    // A topic config and the cluster-wide default through A, read on B and C.
    let set = set_config(a, "topic", "kept", "segment.ms", "654321");
    assert_eq!(set["error"], Value::Null, "{set}");
    let default = set_config(a, "broker", "", "log.retention.ms", "7200000");
    assert_eq!(default["error"], Value::Null, "{default}");
    for node in [b, c] {
        config_becomes(node, "topic", "kept", "segment.ms", "654321");
        // The default reaches the topic's effective config.
        config_becomes(node, "topic", "kept", "retention.ms", "7200000");
    }
    config_becomes(c, "broker", "", "log.retention.ms", "7200000");
    // This broker's own, through it, survives its restart below.
    let own = set_config(b, "broker", "2", "log.retention.ms", "3600000");
    assert_eq!(own["error"], Value::Null, "{own}");

    // A SCRAM user through A logs in on B; an ACL through A authorizes it there.
    let refused = alice_on(b, "kept");
    assert_ne!(refused["error"], Value::Null, "no such user yet: {refused}");
    let added = stores("add-user", a, &[&a.bootstrap(), "alice", "alice-secret"]);
    assert_eq!(added["error"], Value::Null, "{added}");
    let denied = until(
        "alice to log in on B",
        || alice_on(b, "kept"),
        |seen| seen["error"].is_null(),
    );
    let denial = &denied["topic_error"];
    assert_eq!(denial, "TOPIC_AUTHORIZATION_FAILED", "{denied}");
    let allowed = stores("allow", a, &[&a.bootstrap(), "User:alice", "kept"]);
    assert_eq!(allowed["error"], Value::Null, "{allowed}");
    alice_allowed(b, "kept");
    alice_allowed(c, "kept");

    // A client quota and a client-metrics subscription through A, on C.
    wire(
        a,
        &[
            "set-quota",
            "user",
            "alice",
            "producer_byte_rate",
            "1048576",
        ],
    );
    wire(
        a,
        &[
            "client-metrics",
            "sub",
            "org.apache.kafka.producer.",
            "60000",
        ],
    );
    let alice_quota =
        json!([{"entity": {"user": "alice"}, "values": {"producer_byte_rate": 1048576.0}}]);
    let state = until(
        "C to have the quota",
        || quota_state(c),
        |state| state["quotas"] == alice_quota,
    );
    assert_eq!(state["subscription"]["interval.ms"], "60000", "{state}");

    // B misses a change while it is down, and has everything once back.
    nodes[1].kill();
    let a = &nodes[0];
    let set = set_config(a, "topic", "kept", "segment.ms", "111111");
    assert_eq!(set["error"], Value::Null, "{set}");
    nodes[1].restart();
    let b = &nodes[1];
    config_becomes(b, "topic", "kept", "segment.ms", "111111");
    assert_eq!(config_of(b, "broker", "", "log.retention.ms"), "7200000");
    assert_eq!(config_of(b, "broker", "2", "log.retention.ms"), "3600000");
    alice_allowed(b, "kept");
    let state = quota_state(b);
    assert_eq!(state["quotas"], alice_quota, "{state}");
    assert_eq!(state["subscription"]["interval.ms"], "60000", "{state}");
}

/// `gregor authorizer use NAME` on `node`'s admin endpoint (asserting it
/// succeeded): its answer.
fn use_authorizer(node: &Node, name: &str) -> String {
    let (ok, text) = gregor_cli(&["authorizer", "use", name], &node.admin());
    assert!(
        ok,
        "gregor authorizer use {name} on node {}: {text}",
        node.id
    );
    text
}

/// Waits until `alice` is denied `topic` on `node` (logged in, the topic
/// refused by the authorizer).
fn alice_denied(node: &Node, topic: &str) {
    let what = format!("alice denied on node {}", node.id);
    until(
        &what,
        || alice_on(node, topic),
        |seen| seen["error"].is_null() && seen["topic_error"] == "TOPIC_AUTHORIZATION_FAILED",
    );
}

#[test]
fn the_authorizer_chosen_on_one_broker_decides_on_every_broker() {
    let mut cluster = authorized().admin().start();
    cluster.await_formed(&[1, 2, 3]);
    let nodes = &mut cluster.nodes;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let created = script_json(
        "cluster.py",
        &["create", &a.bootstrap(), "guarded", "1", "3"],
    );
    assert_eq!(created["error"], Value::Null, "{created}");
    let added = stores("add-user", a, &[&a.bootstrap(), "alice", "alice-secret"]);
    assert_eq!(added["error"], Value::Null, "{added}");
    // The configured authorizer_acl decides everywhere: no ACL, denied.
    alice_denied(b, "guarded");
    alice_denied(c, "guarded");

    // No authorizer, chosen on A: B and C allow everything.
    let answer = use_authorizer(a, "none");
    assert!(answer.contains("every action is allowed"), "{answer}");
    alice_allowed(b, "guarded");
    alice_allowed(c, "guarded");
    let (ok, status) = gregor_cli(&["authorizer", "show", "--output", "json"], &c.admin());
    assert!(
        ok && status
            .replace(char::is_whitespace, "")
            .contains("\"active\":null"),
        "{status}"
    );

    // B restarted keeps the cluster's choice over its `authorizer` config.
    nodes[1].kill();
    nodes[1].restart();
    let b = &nodes[1];
    let seen = until(
        "alice to log in on the restarted B",
        || alice_on(b, "guarded"),
        |seen| seen["error"].is_null(),
    );
    assert!(seen["topic_error"].is_null(), "after the restart: {seen}");

    // authorizer_acl again, chosen on C: denied on A and B.
    use_authorizer(&nodes[2], "authorizer_acl");
    alice_denied(&nodes[0], "guarded");
    alice_denied(&nodes[1], "guarded");
}
