//! KIP-848 groups rebuilt from their records in `__consumer_offsets`: after
//! a failover (a cluster node loading the partition), a restart (a single
//! node replaying the topic) and a compaction (the live state rewritten).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::consumer_records::{ConsumerRecord, ConsumerRecords};
use super::offsets_log::OffsetsLog;
use super::store::tests::{created_topic, Logs, PARTITIONS};
use super::*;
use crate::error_code::ErrorCode;
use crate::log::keyed_records::{self, Entry};

const TOPIC_ID: u128 = 7;

fn topics() -> BTreeMap<String, TopicMeta> {
    BTreeMap::from([(
        "t".to_string(),
        TopicMeta {
            id: TOPIC_ID,
            partitions: 4,
        },
    )])
}

fn heartbeat(member: &str, epoch: i32, owned: Option<Vec<i32>>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: Some(format!("rack-{member}")),
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: (epoch == 0).then(|| vec!["t".to_string()]),
        server_assignor: None,
        owned: owned.map(|p| vec![(TOPIC_ID, p)]),
        client_id: format!("client-{member}"),
        client_host: "/127.0.0.1".into(),
    }
}

fn ok(c: &GroupCoordinator, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult {
    let result = c.consumer_heartbeat(&request, topics());
    assert_eq!(result.error_code, ErrorCode::None.code(), "{result:?}");
    result
}

fn partitions(result: &ConsumerHeartbeatResult) -> Vec<i32> {
    let assignment = result.assignment.as_ref().expect("an assignment");
    assignment.iter().flat_map(|(_, p)| p.clone()).collect()
}

/// (group epoch, assignment epoch, members' records) of group "g".
fn state(c: &GroupCoordinator) -> Option<(i32, i32, ConsumerRecords)> {
    let inner = c.lock();
    let consumer = inner.groups.get("g")?.consumer.as_ref()?;
    Some(consumer.state_for_test())
}

/// Members a and b of "g" mid-rebalance: a (epoch 1) must revoke two of its
/// four partitions, b (epoch 2) waits for them.
fn two_members_mid_rebalance(c: &GroupCoordinator) {
    let a = ok(c, heartbeat("a", 0, None));
    assert_eq!(a.member_epoch, 1);
    assert_eq!(partitions(&a), vec![0, 1, 2, 3]);
    let b = ok(c, heartbeat("b", 0, None));
    assert_eq!(b.member_epoch, 2);
    // a must revoke two partitions first: it stays at epoch 1.
    let a = ok(c, heartbeat("a", 1, Some(vec![0, 1, 2, 3])));
    assert_eq!(a.member_epoch, 1);
    assert_eq!(partitions(&a).len(), 2);
}

fn loaded(c: &GroupCoordinator, partition: i32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.coordinated_partitions().get(&partition) != Some(&true) {
        assert!(Instant::now() < deadline, "{partition} not loaded");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test]
async fn a_consumer_group_is_rebuilt_exactly_on_failover_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let logs = created_topic(dir.path());
    let home = offsets_topic::partition_for("g", PARTITIONS);
    let first = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    first.on_elected(home, 0, PARTITIONS);
    loaded(&first, home);
    two_members_mid_rebalance(&first);
    let before = state(&first).unwrap();
    let (epoch, assignment_epoch, records) = &before;
    assert_eq!((*epoch, *assignment_epoch), (2, 2));
    assert_eq!(records.current["a"].member_epoch, 1);
    assert_eq!(records.current["a"].state, 1, "unrevoked partitions");
    assert_eq!(records.current["a"].pending_revocation[0].1.len(), 2);
    assert_eq!(records.current["b"].state, 2, "unreleased partitions");
    assert_eq!(records.members["b"].rack_id.as_deref(), Some("rack-b"));
    first.on_resigned(home);

    // Failover: the next leader of the partition has the same group.
    let next = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    next.on_elected(home, 1, PARTITIONS);
    loaded(&next, home);
    assert_eq!(state(&next).as_ref(), Some(&before));
    let described = &next.consumer_describe(&["g".to_string()])[0];
    assert_eq!(described.state, "Reconciling");
    assert_eq!(described.members.len(), 2);

    // The members go on with their epochs: a reports the revocation done
    // and moves to epoch 2, then b gets the partitions a released.
    let kept = before.2.current["a"].assigned[0].1.clone();
    let a = ok(&next, heartbeat("a", 1, Some(kept.clone())));
    assert_eq!(a.member_epoch, 2);
    let b = ok(&next, heartbeat("b", 2, Some(vec![])));
    assert_eq!(b.member_epoch, 2);
    let mut all = partitions(&b);
    all.extend(kept);
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3]);
    let after = state(&next).unwrap();
    next.on_resigned(home);
    drop((first, next, logs));

    // A single node's restart replays the topic to the same state.
    let restarted = GroupCoordinator::open_on_topic(
        std::sync::Arc::new(Logs::open(dir.path(), offsets_topic::TOPIC)),
        &dir.path().join("groups"),
        GroupConfig::default(),
    )
    .unwrap();
    assert_eq!(state(&restarted), Some(after));
    assert_eq!(
        restarted.consumer_describe(&["g".to_string()])[0].state,
        "Stable"
    );
    // An unknown member is still told so.
    let stranger = restarted.consumer_heartbeat(&heartbeat("x", 3, None), topics());
    assert_eq!(stranger.error_code, ErrorCode::UnknownMemberId.code());
}

#[tokio::test]
async fn a_member_that_left_is_tombstoned_and_not_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let logs = created_topic(dir.path());
    let home = offsets_topic::partition_for("g", PARTITIONS);
    let first = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    first.on_elected(home, 0, PARTITIONS);
    loaded(&first, home);
    two_members_mid_rebalance(&first);
    let (_, end_before_leave) = logs.bounds(home).unwrap();
    ok(&first, heartbeat("b", -1, None));
    let before = state(&first).unwrap();
    assert!(!before.2.members.contains_key("b"));

    // b's records are tombstoned in Kafka's order, then the new epoch.
    let bytes = logs.read(home, end_before_leave).unwrap();
    let (entries, _) = keyed_records::decode(&bytes).unwrap();
    let written: Vec<(offsets_topic::Key, bool)> = entries
        .iter()
        .filter_map(|entry| match entry {
            Entry::Record(record) => Some(record),
            Entry::TxnEnd { .. } => None,
        })
        .filter_map(|r| {
            let key = offsets_topic::Key::decode(r.key.as_deref()?).ok()??;
            Some((key, r.value.is_none()))
        })
        .collect();
    let b = |kind: &str| -> (offsets_topic::Key, bool) {
        let (group, member) = ("g".to_string(), "b".to_string());
        let key = match kind {
            "assignment" => offsets_topic::Key::ConsumerAssignment { group, member },
            "target" => offsets_topic::Key::ConsumerTarget { group, member },
            _ => offsets_topic::Key::ConsumerMember { group, member },
        };
        (key, true)
    };
    assert_eq!(
        written[..4],
        [
            b("assignment"),
            b("target"),
            b("member"),
            (offsets_topic::Key::ConsumerGroup("g".into()), false)
        ]
    );
    first.on_resigned(home);

    let next = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    next.on_elected(home, 1, PARTITIONS);
    loaded(&next, home);
    assert_eq!(state(&next), Some(before));
    let gone = next.consumer_heartbeat(&heartbeat("b", 2, None), topics());
    assert_eq!(gone.error_code, ErrorCode::UnknownMemberId.code());

    // The last member leaving, then the group deleted: nothing comes back.
    ok(&next, heartbeat("a", -1, None));
    assert_eq!(next.delete_groups(&["g".to_string()]), vec![0]);
    let snapshot = store::load_partition(logs.as_ref(), home).unwrap();
    assert!(snapshot.consumer_members.is_empty(), "{snapshot:?}");
    assert!(snapshot.consumer_groups.is_empty());
}

#[tokio::test]
async fn compaction_keeps_the_members_and_assignments() {
    let dir = tempfile::tempdir().unwrap();
    // The file store, whose compaction rewrites the live state.
    let c = GroupCoordinator::open(dir.path(), GroupConfig::default()).unwrap();
    two_members_mid_rebalance(&c);
    let before = state(&c).unwrap();
    {
        let mut inner = c.lock();
        let live = inner.live_records();
        let consumer_records = live
            .iter()
            .filter(|r| matches!(r, store::Record::Consumer { .. }))
            .count();
        // Two members' metadata, targets and assignments, the topics and
        // the assignment epoch.
        assert_eq!(consumer_records, 8);
        inner.env.store.rewrite(&live).unwrap();
    }
    drop(c);
    let c = GroupCoordinator::open(dir.path(), GroupConfig::default()).unwrap();
    assert_eq!(state(&c).as_ref(), Some(&before));

    // Snapshot::to_records rebuilds the same snapshot.
    let (_, snapshot) = store::GroupStore::open_file(dir.path()).unwrap();
    let mut rebuilt = store::Snapshot::default();
    for record in snapshot.to_records() {
        rebuilt.apply(record);
    }
    assert_eq!(rebuilt, snapshot);
    let members = &snapshot.consumer_members["g"];
    assert_eq!(members.members.len(), 2);
    assert!(snapshot.to_records().iter().any(|r| matches!(
        r,
        store::Record::Consumer {
            record: ConsumerRecord::Assignment { member_id, .. },
            ..
        } if member_id == "a"
    )));
}
