//! The group coordinator's state in the internal topic
//! `__consumer_offsets`, as Kafka keeps it, on a single node:
//! - created on the first group write (not before), compacted, internal,
//!   `offsets.topic.num.partitions` (50) partitions; a group's records go
//!   to partition `abs(javaHashCode(group)) % 50`;
//! - committed offsets (with metadata) survive a clean restart and a
//!   SIGKILL, read back from the topic; no groups.log is written;
//! - a data directory written by the release before (groups.log, in
//!   `tests/fixtures/groups-log-datadir`) is migrated at the first start:
//!   every offset and its metadata still there, groups.log retired, and
//!   still there after another restart (from the topic alone).

use std::fs;
use std::path::Path;

use gregor_tests::cluster::{coordinator_partition, metadata, script_json};
use gregor_tests::{workspace_root, Broker};
use serde_json::{json, Value};

const TOPIC: &str = "__consumer_offsets";

fn commit(broker: &Broker, group: &str, topic: &str, specs: &[&str]) {
    let mut args = vec!["commit", "", group, topic];
    let bootstrap = broker.bootstrap();
    args[1] = &bootstrap;
    args.extend_from_slice(specs);
    let answer = script_json("offsets_topic.py", &args);
    assert_eq!(answer, json!({"ok": true}));
}

fn committed(broker: &Broker, group: &str, topic: &str, partitions: u32) -> Value {
    let partitions = partitions.to_string();
    script_json(
        "offsets_topic.py",
        &["committed", &broker.bootstrap(), group, topic, &partitions],
    )
}

/// `__consumer_offsets` as Metadata lists it: (is_internal, partitions),
/// or `None` if it is not there.
fn offsets_topic(broker: &Broker) -> Option<(bool, usize)> {
    let md = metadata(broker.addr()).expect("a Metadata answer");
    md.topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))
        .map(|t| (t.is_internal, t.partitions.len()))
}

/// Bytes in the log segments of `__consumer_offsets-<partition>`.
fn partition_bytes(data: &Path, partition: i32) -> u64 {
    let dir = data.join("partitions").join(format!("{TOPIC}-{partition}"));
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

#[test]
fn committed_offsets_live_in_the_internal_topic_across_restarts() {
    let mut broker = Broker::start();
    let created = script_json(
        "cluster.py",
        &["create", &broker.bootstrap(), "orders", "3", "1"],
    );
    assert_eq!(created["error"], Value::Null, "{created}");
    // Kafka creates the topic on first use, not before.
    assert_eq!(offsets_topic(&broker), None);

    commit(
        &broker,
        "billing",
        "orders",
        &["0:5:first", "1:7", "2:9:third"],
    );
    let expected = json!({"0": [5, "first"], "1": [7, null], "2": [9, "third"]});
    assert_eq!(committed(&broker, "billing", "orders", 3), expected);
    assert_eq!(offsets_topic(&broker), Some((true, 50)));
    // Kafka's Utils.abs ("billing" hashes negative: partition 9).
    let home = coordinator_partition("billing", 50);
    assert!(
        partition_bytes(broker.data_dir(), home) > 0,
        "partition {home}"
    );
    let elsewhere = (home + 1) % 50;
    assert_eq!(partition_bytes(broker.data_dir(), elsewhere), 0);
    let groups_dir = broker.data_dir().join("groups");
    assert!(!groups_dir.join("groups.log").exists());

    // A later commit wins over an earlier one, after a clean restart and
    // after a crash.
    commit(&broker, "billing", "orders", &["1:8:later"]);
    broker.restart();
    let expected = json!({"0": [5, "first"], "1": [8, "later"], "2": [9, "third"]});
    assert_eq!(committed(&broker, "billing", "orders", 3), expected);
    broker.kill();
    broker.restart();
    assert_eq!(committed(&broker, "billing", "orders", 3), expected);
    assert!(!groups_dir.join("groups.log").exists());
}

#[test]
fn a_data_directory_with_groups_log_is_migrated_with_nothing_lost() {
    let fixture = workspace_root().join("tests/fixtures/groups-log-datadir");
    assert!(fixture.join("groups/groups.log").is_file());
    let mut broker = Broker::start_on_copy_of(&fixture, &[]);
    let data = broker.data_dir().to_path_buf();

    let legacy = json!({"0": [3, null], "1": [4, null]});
    let manual = json!({"0": [-1001, null], "1": [2, "kept-metadata"]});
    let check = |broker: &Broker| {
        assert_eq!(committed(broker, "legacy-group", "legacy", 2), legacy);
        assert_eq!(committed(broker, "legacy-manual", "legacy", 2), manual);
    };
    check(&broker);
    assert!(
        !data.join("groups/groups.log").exists(),
        "groups.log retired"
    );
    assert!(data.join("groups/groups.log.migrated").is_file());
    assert_eq!(offsets_topic(&broker), Some((true, 50)));
    let home = coordinator_partition("legacy-manual", 50);
    assert!(partition_bytes(&data, home) > 0);

    // From the topic alone from now on; new commits go on from there.
    broker.restart();
    check(&broker);
    commit(&broker, "legacy-group", "legacy", &["0:5"]);
    broker.restart();
    assert_eq!(
        committed(&broker, "legacy-group", "legacy", 2),
        json!({"0": [5, null], "1": [4, null]})
    );
}
