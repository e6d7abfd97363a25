//! CreateTopics with a manual replica assignment, as confluent-kafka's
//! AdminClient sends it (`NewTopic(replica_assignment=[[...]])`, through
//! `tests/python/replica_assignment.py`): a single node takes an
//! assignment naming only itself and refuses other brokers with
//! INVALID_REPLICA_ASSIGNMENT, as Kafka refuses unregistered ones; a
//! 3-node cluster places every replica where the assignment says, the
//! first replica leading, and every broker's Metadata shows it.
//!
//! The cluster's nodes come from the cluster harness
//! (`gregor_tests::cluster`).

use std::time::Duration;

use gregor_tests::cluster::{self, metadata, Cluster};
use gregor_tests::{run_python, wait_for, Broker};
use serde_json::{json, Value};

const INVALID_REPLICA_ASSIGNMENT: &str = "INVALID_REPLICA_ASSIGNMENT";

fn python(args: &[&str]) -> Value {
    let (stdout, stderr) = run_python("replica_assignment.py", args);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!("replica_assignment.py printed no JSON ({e}): {stdout}\n{stderr}")
    })
}

/// Creates `topic` with `assignment` (replicas of partitions 0, 1, ...)
/// through `bootstrap`: the error name (none on success) and the topic's
/// partitions as Metadata shows them afterwards.
fn create(bootstrap: &str, topic: &str, assignment: Value) -> (Value, Value) {
    let mut outcome = python(&["create", bootstrap, topic, &assignment.to_string()]);
    (outcome["error"].take(), outcome["partitions"].take())
}

/// Metadata's partitions of `topic` as `python` reports them, by partition.
fn placed(replicas: &[&[i32]]) -> Value {
    let partitions: serde_json::Map<String, Value> = replicas
        .iter()
        .enumerate()
        .map(|(partition, replicas)| {
            let entry = json!({"leader": replicas[0], "replicas": replicas, "isr": replicas});
            (partition.to_string(), entry)
        })
        .collect();
    Value::Object(partitions)
}

#[test]
fn a_single_node_takes_an_assignment_naming_only_itself() {
    let broker = Broker::start_with(&[("node.id", "7")]);
    let bootstrap = broker.bootstrap();
    let (error, partitions) = create(&bootstrap, "mine", json!([[7], [7], [7]]));
    assert_eq!(error, Value::Null, "{partitions}");
    assert_eq!(partitions, placed(&[&[7], &[7], &[7]]));

    for (topic, assignment) in [
        ("elsewhere", json!([[8]])),
        ("with-another", json!([[7, 8]])),
        ("later-elsewhere", json!([[7], [1]])),
    ] {
        let (error, partitions) = create(&bootstrap, topic, assignment);
        assert_eq!(error, INVALID_REPLICA_ASSIGNMENT, "{topic}");
        assert_eq!(partitions, json!({}), "{topic} was created");
    }
}

/// Three combined-mode nodes (ids 1-3), each registered.
fn cluster() -> Cluster {
    let cluster = cluster::cluster(3).start();
    wait_for("three registered brokers", Duration::from_secs(30), || {
        metadata(cluster.nodes[0].addr()).filter(|m| m.brokers.len() == 3)
    });
    cluster
}

#[test]
fn a_cluster_places_replicas_as_assigned() {
    let cluster = cluster();
    let nodes = &cluster.nodes;
    // Leaders 3, 3, 1: a layout the broker's own placement never makes
    // (it rotates leaders over the brokers).
    let assignment: &[&[i32]] = &[&[3, 1], &[3, 2], &[1, 2]];
    let (error, partitions) = create(&nodes[0].bootstrap(), "assigned", json!(assignment));
    assert_eq!(error, Value::Null, "{partitions}");
    assert_eq!(partitions, placed(assignment));
    for node in &nodes[1..] {
        let seen = python(&["describe", &node.bootstrap(), "assigned"]);
        assert_eq!(
            seen["partitions"],
            placed(assignment),
            "{}",
            node.bootstrap()
        );
    }

    for (topic, assignment) in [
        ("unknown-broker", json!([[1, 9]])),
        ("uneven", json!([[1, 2], [3]])),
        ("twice", json!([[2, 2]])),
    ] {
        let (error, partitions) = create(&nodes[1].bootstrap(), topic, assignment);
        assert_eq!(error, INVALID_REPLICA_ASSIGNMENT, "{topic}");
        assert_eq!(partitions, json!({}), "{topic} was created");
    }
}
