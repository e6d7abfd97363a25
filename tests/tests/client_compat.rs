//! Behaviour real clients rely on, checked with those clients (Python:
//! `tests/python/compat_clients.py`): per-record produce errors (KIP-467)
//! as librdkafka reports them to confluent-kafka, and Kafka's internal
//! topic names never auto-created as user topics (confluent-kafka asks
//! with auto-creation on; kafka-python reads `is_internal`).

use std::process::Command;

use gregor_tests::{kafka, workspace_root, Broker};
use rdkafka::admin::{NewTopic, TopicReplication};
use serde_json::Value;

/// Runs a command of `compat_clients.py` and returns the JSON it printed.
fn python(args: &[&str]) -> Value {
    let path = workspace_root().join("tests/python/compat_clients.py");
    let output = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run compat_clients.py: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "compat_clients.py {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("compat_clients.py printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// A batch with keyless records on a compacted topic: librdkafka fails
/// exactly the keyless records with INVALID_RECORD and the keyed ones
/// with _INVALID_DIFFERENT_RECORD, because the response names the keyless
/// ones in `record_errors`; kafka-python reads the field and Kafka's
/// error message off the wire. Nothing of either batch is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_records_on_a_compacted_topic_fail_one_by_one() {
    let broker = Broker::start();
    let topic = "compacted-keys";
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact");
    let results = kafka::admin(&broker)
        .create_topics(&[new], &kafka::admin_options())
        .await
        .expect("CreateTopics");
    assert_eq!(results[0], Ok(topic.to_string()));
    kafka::wait_for_topic(&broker, topic, 1);

    let report = python(&["record-errors", &broker.bootstrap(), topic]);
    let codes: Vec<i64> = report["librdkafka"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| r["code"].as_i64().unwrap_or_default())
        .collect();
    assert_eq!(codes, [-138, 87, -138, 87, 87, -138], "{report}");
    let end = kafka::end_offsets(&broker, topic, 1, kafka::Isolation::ReadUncommitted);
    assert_eq!(end, [0], "nothing appended");
}

/// Metadata for `__consumer_offsets`, `__transaction_state` and
/// `__share_group_state` with auto-creation on creates no topic (Kafka
/// creates those only as its coordinators' own; Gregor keeps that state
/// elsewhere): UNKNOWN_TOPIC_OR_PARTITION, flagged internal. Another
/// `__` name is an ordinary topic and is auto-created.
#[test]
fn internal_topic_names_are_not_auto_created() {
    let broker = Broker::start();
    let seen = python(&["internal-topics", &broker.bootstrap()]);
    let listed = seen["listed"].as_array().expect("listed topics");
    assert!(
        !listed.iter().any(|t| t
            .as_str()
            .is_some_and(|t| t.starts_with("__c") || t.starts_with("__t"))),
        "{seen}"
    );
    assert!(
        kafka::topic_names(&broker).contains("__a_user_topic"),
        "{seen}"
    );
}
