//! FindCoordinator v4+ on a 3-broker cluster (issue 15): one request
//! names several keys, and each key's answer is the leader of its own
//! partition of the internal topic, `abs(hash(key)) % partitions` of
//! `__consumer_offsets` for groups (key type 0) and of
//! `__transaction_state` for transactional ids (key type 1), with that
//! broker's address; every broker answers the same.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

use gregor_tests::cluster::{self, call, coordinator_partition, Cluster};
use gregor_tests::replicated::partition_leaders;
use gregor_tests::wait_for;

const PARTITIONS: i32 = 5;
const CONVERGE: Duration = Duration::from_secs(60);

/// Keys `prefix-<n>`, one for each partition, in partition order.
fn one_key_per_partition(prefix: &str) -> Vec<String> {
    let mut found: BTreeMap<i32, String> = BTreeMap::new();
    for n in 0.. {
        let key = format!("{prefix}-{n}");
        found
            .entry(coordinator_partition(&key, PARTITIONS))
            .or_insert(key);
        if found.len() == PARTITIONS as usize {
            break;
        }
    }
    found.into_values().collect()
}

/// One FindCoordinator v`version` for `keys` to node `via`: per key, its
/// (error, node, host:port), in the order answered.
fn find(
    cluster: &Cluster,
    via: i32,
    version: i16,
    key_type: i8,
    keys: &[String],
) -> Option<Vec<(String, i16, i32, String)>> {
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(
            keys.iter()
                .map(|k| StrBytes::from_string(k.clone()))
                .collect(),
        );
    let response = call(cluster.node(via).addr(), &request, version)?;
    Some(
        response
            .coordinators
            .iter()
            .map(|c| {
                (
                    c.key.to_string(),
                    c.error_code,
                    c.node_id.0,
                    format!("{}:{}", c.host, c.port),
                )
            })
            .collect(),
    )
}

/// Asks every node for `keys` in one request until each key is answered
/// with the leader of its partition of `topic` (the first request creates
/// the topic: COORDINATOR_NOT_AVAILABLE until it has leaders).
fn check_keys(cluster: &Cluster, key_type: i8, topic: &str, keys: &[String]) {
    // The topic exists once the first answer names a coordinator.
    wait_for(&format!("{topic} created"), CONVERGE, || {
        find(cluster, 1, 4, key_type, keys)?
            .iter()
            .all(|(_, error, _, _)| *error == 0)
            .then_some(())
    });
    let by_partition = partition_leaders(cluster, 1, topic, PARTITIONS as usize, CONVERGE);
    let expected: Vec<(String, i16, i32, String)> = keys
        .iter()
        .map(|key| {
            let leader = by_partition[&coordinator_partition(key, PARTITIONS)];
            let addr = cluster.node(leader).addr();
            (key.clone(), 0, leader, addr.to_string())
        })
        .collect();
    for via in [1, 2, 3] {
        for version in [4, 5, 6] {
            let deadline = Instant::now() + CONVERGE;
            loop {
                let got = find(cluster, via, version, key_type, keys);
                if got.as_ref() == Some(&expected) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {via}, v{version}: {got:?}, expected {expected:?}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[test]
fn several_keys_in_one_request_each_get_their_partition_leader() {
    let cluster = cluster::cluster(3)
        .set("offsets.topic.num.partitions", &PARTITIONS.to_string())
        .set(
            "transaction.state.log.num.partitions",
            &PARTITIONS.to_string(),
        )
        .start();
    cluster.await_formed(&[1, 2, 3]);

    let groups = one_key_per_partition("group");
    check_keys(&cluster, 0, "__consumer_offsets", &groups);
    let transactional_ids = one_key_per_partition("txn");
    check_keys(&cluster, 1, "__transaction_state", &transactional_ids);

    // The partitions are led by more than one broker, so the answers above
    // differ by key, not only by luck of a single leader.
    let offsets_leaders = partition_leaders(
        &cluster,
        1,
        "__consumer_offsets",
        PARTITIONS as usize,
        CONVERGE,
    );
    let txn_leaders = partition_leaders(
        &cluster,
        1,
        "__transaction_state",
        PARTITIONS as usize,
        CONVERGE,
    );
    let distinct =
        |l: &BTreeMap<i32, i32>| l.values().collect::<std::collections::BTreeSet<_>>().len();
    assert!(
        distinct(&offsets_leaders) > 1 && distinct(&txn_leaders) > 1,
        "leaders {offsets_leaders:?} {txn_leaders:?}"
    );
}
