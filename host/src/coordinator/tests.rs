//! Unit tests of the coordinator: whole rebalances driven by concurrent
//! JoinGroup/SyncGroup calls, with deadlines fired by hand.

use crate::error_code::ErrorCode;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::*;

fn open(dir: &Path) -> Arc<GroupCoordinator> {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    GroupCoordinator::open(dir, config).unwrap()
}

fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut bytes = vec![0, 0];
    bytes.extend((topics.len() as i32).to_be_bytes());
    for topic in topics {
        bytes.extend((topic.len() as i16).to_be_bytes());
        bytes.extend(topic.as_bytes());
    }
    bytes.extend((-1i32).to_be_bytes());
    bytes
}

fn join_request(group: &str, member: &str) -> JoinRequest {
    JoinRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"]))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        require_known_member_id: true,
        supports_skip_assignment: true,
        reason: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn spawn_join(c: &Arc<GroupCoordinator>, request: JoinRequest) -> JoinHandle<JoinResult> {
    let c = Arc::clone(c);
    tokio::spawn(async move { c.join(request).await })
}

fn spawn_sync(c: &Arc<GroupCoordinator>, request: SyncRequest) -> JoinHandle<SyncResult> {
    let c = Arc::clone(c);
    tokio::spawn(async move { c.sync(request).await })
}

/// Fires due deadlines until the task finishes.
async fn settle<T>(c: &GroupCoordinator, handle: JoinHandle<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !handle.is_finished() {
        assert!(Instant::now() < deadline, "call did not complete");
        c.fire_due(Instant::now());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    handle.await.unwrap()
}

/// A new member's two-step join (MEMBER_ID_REQUIRED, then with the id).
async fn first_join(c: &Arc<GroupCoordinator>, group: &str) -> (String, JoinHandle<JoinResult>) {
    let first = c.join(join_request(group, "")).await;
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    assert!(first.member_id.starts_with("client-"));
    let id = first.member_id.clone();
    (id.clone(), spawn_join(c, join_request(group, &id)))
}

fn sync_request(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &[u8])],
) -> SyncRequest {
    SyncRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .iter()
            .map(|(id, a)| (id.to_string(), a.to_vec()))
            .collect(),
    }
}

fn state_of(c: &GroupCoordinator, group: &str) -> String {
    c.describe_groups(&[group.to_string()])[0].state.clone()
}

/// Two members form generation 1; returns (leader, follower).
async fn two_member_group(c: &Arc<GroupCoordinator>, group: &str) -> (String, String) {
    let (a, a_join) = first_join(c, group).await;
    let a_result = settle(c, a_join).await;
    assert_eq!(a_result.error_code, ErrorCode::None.code());
    assert_eq!(a_result.generation_id, 1);
    assert_eq!(a_result.leader, a);
    assert_eq!(a_result.members.len(), 1);
    let a_sync = settle(
        c,
        spawn_sync(c, sync_request(group, 1, &a, &[(&a, b"all")])),
    )
    .await;
    assert_eq!(a_sync.assignment, b"all");
    assert_eq!(state_of(c, group), "Stable");

    // A second member joins: the leader learns of the rebalance through
    // its heartbeat and rejoins; both get generation 2.
    let (b, b_join) = first_join(c, group).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(state_of(c, group), "PreparingRebalance");
    assert_eq!(
        c.heartbeat(group, 1, &a, None),
        ErrorCode::RebalanceInProgress.code()
    );
    let a_join = spawn_join(c, join_request(group, &a));
    let (a_result, b_result) = (settle(c, a_join).await, settle(c, b_join).await);
    assert_eq!((a_result.generation_id, b_result.generation_id), (2, 2));
    assert_eq!(a_result.leader, a);
    assert_eq!(a_result.members.len(), 2, "the leader gets every member");
    assert!(b_result.members.is_empty());
    assert_eq!(b_result.protocol_name.as_deref(), Some("range"));

    // The follower's SyncGroup waits for the leader's.
    let b_sync = spawn_sync(c, sync_request(group, 2, &b, &[]));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(!b_sync.is_finished());
    assert_eq!(state_of(c, group), "CompletingRebalance");
    let a_sync = spawn_sync(c, sync_request(group, 2, &a, &[(&a, b"p0"), (&b, b"p1")]));
    assert_eq!(settle(c, a_sync).await.assignment, b"p0");
    assert_eq!(settle(c, b_sync).await.assignment, b"p1");
    assert_eq!(state_of(c, group), "Stable");
    (a, b)
}

#[tokio::test]
async fn members_join_sync_and_leave() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    assert_eq!(c.heartbeat("g", 2, &b, None), ErrorCode::None.code());
    assert_eq!(
        c.heartbeat("g", 1, &b, None),
        ErrorCode::IllegalGeneration.code()
    );
    assert_eq!(
        c.heartbeat("g", 2, "nobody", None),
        ErrorCode::UnknownMemberId.code()
    );
    assert_eq!(
        c.heartbeat("", 2, &b, None),
        ErrorCode::InvalidGroupId.code()
    );

    let described = &c.describe_groups(&["g".to_string()])[0];
    assert_eq!(described.protocol, "range");
    assert_eq!(described.members.len(), 2);
    assert!(described.members.iter().any(|m| m.assignment == b"p1"));

    // The leader leaves; the other member rejoins alone and leads.
    let leaving = LeavingMember {
        member_id: a.clone(),
        group_instance_id: None,
        reason: Some("closing".into()),
    };
    assert_eq!(
        c.leave("g", std::slice::from_ref(&leaving)),
        Ok(vec![ErrorCode::None.code()])
    );
    assert_eq!(
        c.leave("g", &[leaving]),
        Ok(vec![ErrorCode::UnknownMemberId.code()])
    );
    assert_eq!(
        c.heartbeat("g", 2, &b, None),
        ErrorCode::RebalanceInProgress.code()
    );
    let b_result = settle(&c, spawn_join(&c, join_request("g", &b))).await;
    assert_eq!(
        (b_result.generation_id, b_result.leader.as_str()),
        (3, b.as_str())
    );

    // The last member leaves: the group is empty.
    let leaving = LeavingMember {
        member_id: b.clone(),
        group_instance_id: None,
        reason: None,
    };
    assert_eq!(c.leave("g", &[leaving]), Ok(vec![ErrorCode::None.code()]));
    assert_eq!(state_of(&c, "g"), "Empty");
    let listed = c.list_groups(&["empty".into()], &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].protocol_type, "consumer");
    assert!(c.list_groups(&["Stable".into()], &[]).is_empty());
    assert!(c.list_groups(&[], &["consumer".into()]).is_empty());
}

#[tokio::test]
async fn an_expired_session_moves_the_group_on() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    // b stops heartbeating; a keeps going.
    let later = Instant::now() + Duration::from_secs(11);
    {
        let mut inner = c.lock();
        let group = inner.groups.get_mut("g").unwrap();
        group.members.get_mut(&a).unwrap().deadline = later + Duration::from_secs(10);
    }
    c.fire_due(later);
    assert_eq!(state_of(&c, "g"), "PreparingRebalance");
    let a_result = settle(&c, spawn_join(&c, join_request("g", &a))).await;
    assert_eq!(a_result.generation_id, 3);
    assert_eq!(a_result.members.len(), 1);
    assert_eq!(
        c.heartbeat("g", 3, &b, None),
        ErrorCode::UnknownMemberId.code()
    );
}

/// Kafka's `removeMemberAndUpdateGroup`: a member leaving during the join
/// phase ends it as soon as everybody still there has rejoined, instead of
/// at the rebalance timeout.
#[tokio::test]
async fn a_leave_completes_the_join_phase_of_those_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    // The leader rejoins and waits for b, which leaves instead.
    let a_join = spawn_join(&c, join_request("g", &a));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(!a_join.is_finished());
    assert_eq!(state_of(&c, "g"), "PreparingRebalance");
    let leaving = LeavingMember {
        member_id: b.clone(),
        group_instance_id: None,
        reason: None,
    };
    assert_eq!(c.leave("g", &[leaving]), Ok(vec![ErrorCode::None.code()]));
    // Answered at once: no deadline fired.
    let a_result = tokio::time::timeout(Duration::from_secs(5), a_join)
        .await
        .expect("the join completes with the leave")
        .unwrap();
    assert_eq!(
        (a_result.error_code, a_result.generation_id),
        (ErrorCode::None.code(), 3)
    );
    assert_eq!(a_result.members.len(), 1);
}

/// A waiting JoinGroup whose caller went away (a parked request whose
/// connection closed drops its receiver) still counts as joined, as in
/// Kafka's purgatory: the others' join phase does not wait for it.
#[tokio::test]
async fn an_abandoned_join_still_counts_as_joined() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    let a_join = spawn_join(&c, join_request("g", &a));
    tokio::time::sleep(Duration::from_millis(5)).await;
    a_join.abort();
    assert!(a_join.await.unwrap_err().is_cancelled());
    let b_result = tokio::time::timeout(
        Duration::from_secs(5),
        spawn_join(&c, join_request("g", &b)),
    )
    .await
    .expect("b's join completes without a deadline")
    .unwrap();
    assert_eq!(
        (b_result.error_code, b_result.generation_id),
        (ErrorCode::None.code(), 3)
    );
    assert_eq!(b_result.leader, a, "a is still a member, and leads");
}

#[tokio::test]
async fn a_pending_member_id_expires() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let first = c.join(join_request("g", "")).await;
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    c.fire_due(Instant::now() + Duration::from_secs(11));
    let late = c.join(join_request("g", &first.member_id)).await;
    assert_eq!(late.error_code, ErrorCode::UnknownMemberId.code());
}

#[tokio::test]
async fn join_validates_like_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let mut request = join_request("g", "");
    request.session_timeout_ms = 10;
    assert_eq!(
        c.join(request).await.error_code,
        ErrorCode::InvalidSessionTimeout.code()
    );
    assert_eq!(
        c.join(join_request("", "")).await.error_code,
        ErrorCode::InvalidGroupId.code()
    );
    assert_eq!(
        c.join(join_request("other", "someone")).await.error_code,
        ErrorCode::UnknownMemberId.code()
    );
    let mut request = join_request("g", "");
    request.protocols.clear();
    assert_eq!(
        c.join(request).await.error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );

    // Without KIP-394 a new member joins at once.
    let mut request = join_request("g", "");
    request.require_known_member_id = false;
    let result = settle(&c, spawn_join(&c, request)).await;
    assert_eq!(result.error_code, ErrorCode::None.code());
    // A member with no protocol in common is refused.
    let mut request = join_request("g", "");
    request.protocols = vec![("roundrobin".into(), Vec::new())];
    assert_eq!(
        c.join(request).await.error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
}

#[tokio::test]
async fn static_members_keep_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let mut request = join_request("g", "");
    request.group_instance_id = Some("instance-1".into());
    let result = settle(&c, spawn_join(&c, request.clone())).await;
    assert_eq!(
        result.error_code,
        ErrorCode::None.code(),
        "static members skip MEMBER_ID_REQUIRED"
    );
    let old = result.member_id.clone();
    assert!(old.starts_with("instance-1-"));
    let mut sync = sync_request("g", 1, &old, &[(&old, b"a")]);
    sync.group_instance_id = Some("instance-1".into());
    assert_eq!(settle(&c, spawn_sync(&c, sync)).await.assignment, b"a");

    // The instance restarts: same instance id, no member id. The group
    // stays Stable at the same generation; the old id is fenced.
    let result = settle(&c, spawn_join(&c, request)).await;
    assert_eq!(result.error_code, ErrorCode::None.code());
    assert_ne!(result.member_id, old);
    assert_eq!(result.generation_id, 1);
    assert!(
        result.skip_assignment,
        "the rejoining leader skips assignment"
    );
    assert_eq!(state_of(&c, "g"), "Stable");
    assert_eq!(
        c.heartbeat("g", 1, &old, Some("instance-1")),
        ErrorCode::FencedInstanceId.code()
    );
    assert_eq!(
        c.heartbeat("g", 1, &result.member_id, Some("instance-1")),
        ErrorCode::None.code()
    );
    // An admin removes the instance by its id alone.
    let leaving = LeavingMember {
        member_id: String::new(),
        group_instance_id: Some("instance-1".into()),
        reason: None,
    };
    assert_eq!(c.leave("g", &[leaving]), Ok(vec![ErrorCode::None.code()]));
    assert_eq!(state_of(&c, "g"), "Empty");
}

fn commit(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64)],
) -> CommitRequest {
    CommitRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_time_ms: -1,
        offsets: offsets
            .iter()
            .map(|(topic, partition, offset)| OffsetCommit {
                topic: topic.to_string(),
                partition: *partition,
                offset: *offset,
                leader_epoch: 0,
                metadata: Some(format!("m{offset}")),
            })
            .collect(),
    }
}

#[tokio::test]
async fn offsets_and_groups_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    assert_eq!(
        c.commit_offsets(&commit("g", 2, &a, &[("t", 0, 10), ("t", 1, 20)])),
        vec![ErrorCode::None.code(), ErrorCode::None.code()]
    );
    assert_eq!(
        c.commit_offsets(&commit("g", 1, &a, &[("t", 0, 11)])),
        vec![ErrorCode::IllegalGeneration.code()]
    );
    assert_eq!(
        c.commit_offsets(&commit("g", -1, "", &[("t", 0, 11)])),
        vec![ErrorCode::UnknownMemberId.code()]
    );
    assert_eq!(
        c.commit_offsets(&commit("g", 2, &b, &[("t", 0, 12)])),
        vec![ErrorCode::None.code()]
    );
    let mut big = commit("g", 2, &b, &[("t", 2, 1)]);
    big.offsets[0].metadata = Some("x".repeat(5000));
    assert_eq!(
        c.commit_offsets(&big),
        vec![ErrorCode::OffsetMetadataTooLarge.code()]
    );
    // A simple consumer (no group management) commits into a new group.
    assert_eq!(
        c.commit_offsets(&commit("simple", -1, "", &[("t", 0, 5)])),
        vec![ErrorCode::None.code()]
    );
    assert_eq!(
        c.commit_offsets(&commit("gone", 3, "x", &[("t", 0, 5)])),
        vec![ErrorCode::IllegalGeneration.code()]
    );
    drop(c);

    let c = open(dir.path());
    let all = c.fetch_offsets("g", None, false).unwrap();
    assert_eq!(
        all.iter()
            .map(|o| (o.partition, o.offset, o.metadata.as_str()))
            .collect::<Vec<_>>(),
        vec![(0, 12, "m12"), (1, 20, "m20")]
    );
    let named = c
        .fetch_offsets("g", Some(&[("t".into(), 1), ("u".into(), 0)]), true)
        .unwrap();
    assert_eq!((named[0].offset, named[1].offset), (20, -1));
    assert_eq!(c.fetch_offsets("nope", None, false).unwrap(), Vec::new());
    // The group came back Stable with its members and assignments.
    let described = &c.describe_groups(&["g".to_string()])[0];
    assert_eq!(described.state, "Stable");
    assert_eq!(described.members.len(), 2);
    assert_eq!(c.heartbeat("g", 2, &b, None), ErrorCode::None.code());
    assert_eq!(c.list_groups(&[], &[]).len(), 2);
}

#[tokio::test]
async fn deleting_offsets_and_groups() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let (a, b) = two_member_group(&c, "g").await;
    assert_eq!(
        c.commit_offsets(&commit("g", 2, &a, &[("t", 0, 1), ("old", 0, 2)])),
        vec![ErrorCode::None.code(), ErrorCode::None.code()]
    );
    // Members subscribe to "t": its offsets cannot go while they consume.
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 0), ("old".into(), 0)]),
        Ok(vec![
            ErrorCode::GroupSubscribedToTopic.code(),
            ErrorCode::None.code()
        ])
    );
    assert_eq!(
        c.delete_groups(&["g".into(), "none".into()]),
        vec![
            ErrorCode::NonEmptyGroup.code(),
            ErrorCode::GroupIdNotFound.code()
        ]
    );
    assert_eq!(
        c.delete_offsets("none", &[("t".into(), 0)]),
        Err(ErrorCode::GroupIdNotFound.code())
    );
    for member in [a, b] {
        let leaving = LeavingMember {
            member_id: member,
            group_instance_id: None,
            reason: None,
        };
        assert_eq!(c.leave("g", &[leaving]), Ok(vec![ErrorCode::None.code()]));
    }
    settle(&c, tokio::spawn(async {})).await;
    assert_eq!(state_of(&c, "g"), "Empty");
    assert_eq!(c.fetch_offsets("g", None, false).unwrap().len(), 1);
    assert_eq!(c.delete_groups(&["g".into()]), vec![ErrorCode::None.code()]);
    assert_eq!(
        c.describe_groups(&["g".into()])[0].error_code,
        ErrorCode::GroupIdNotFound.code()
    );
    assert!(c.fetch_offsets("g", None, false).unwrap().is_empty());
    drop(c);
    let c = open(dir.path());
    assert!(
        c.list_groups(&[], &[]).is_empty(),
        "the deletion is durable"
    );
}

#[tokio::test]
async fn retention_expires_offsets_of_empty_groups() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    assert_eq!(
        c.commit_offsets(&commit("simple", -1, "", &[("t", 0, 5)])),
        vec![ErrorCode::None.code()]
    );
    let (a, _b) = two_member_group(&c, "live").await;
    assert_eq!(
        c.commit_offsets(&commit("live", 2, &a, &[("t", 0, 7)])),
        vec![ErrorCode::None.code()]
    );
    let retention = GroupConfig::default().offsets_retention_ms;
    c.lock().expire_offsets(now_ms() + retention / 2);
    assert_eq!(c.list_groups(&[], &[]).len(), 2);
    c.lock().expire_offsets(now_ms() + retention + 1000);
    // The simple group's offset expired and the group went with it; the
    // stable group still consumes "t" and keeps its offset.
    assert_eq!(
        c.describe_groups(&["simple".into()])[0].error_code,
        ErrorCode::GroupIdNotFound.code()
    );
    assert_eq!(c.fetch_offsets("live", None, false).unwrap().len(), 1);
    drop(c);
    let c = open(dir.path());
    assert_eq!(
        c.describe_groups(&["simple".into()])[0].error_code,
        ErrorCode::GroupIdNotFound.code()
    );
}

#[tokio::test]
async fn a_deleted_topic_takes_its_offsets_along() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path());
    let offsets = [("gone", 0, 1), ("gone", 1, 2), ("kept", 0, 3)];
    assert_eq!(
        c.commit_offsets(&commit("a", -1, "", &offsets)),
        vec![ErrorCode::None.code(); 3]
    );
    assert_eq!(
        c.commit_offsets(&commit("b", -1, "", &[("gone", 0, 4)])),
        vec![ErrorCode::None.code()]
    );
    c.on_topic_deleted("gone");
    let left = c.fetch_offsets("a", None, false).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].topic, "kept");
    assert_eq!(
        c.describe_groups(&["b".into()])[0].error_code,
        ErrorCode::GroupIdNotFound.code(),
        "an empty group without offsets is gone"
    );
    drop(c);
    let c = open(dir.path());
    assert_eq!(c.fetch_offsets("a", None, false).unwrap().len(), 1);
}

/// A cluster node's coordinator: groups only of the partitions it leads,
/// loaded from the log when it becomes their leader, dropped when it stops.
#[tokio::test]
async fn a_cluster_node_coordinates_the_partitions_it_leads() {
    use super::store::tests::{created_topic, PARTITIONS};
    let dir = tempfile::tempdir().unwrap();
    let logs = created_topic(dir.path());
    let c = GroupCoordinator::open_in_cluster(logs, GroupConfig::default());
    let home = offsets_topic::partition_for("g", PARTITIONS);
    let elsewhere = (0..PARTITIONS)
        .map(|p| format!("other-{p}"))
        .find(|g| offsets_topic::partition_for(g, PARTITIONS) != home)
        .unwrap();
    let not_coordinator = ErrorCode::NotCoordinator.code();
    let commit_now = |group: &str, offset: i64| match c.begin_commit(&commit(
        group,
        -1,
        "",
        &[("t", 0, offset)],
    )) {
        Pending::Ready(codes) => codes,
        Pending::Later(_) => panic!("no replication to wait for here"),
    };
    assert_eq!(commit_now("g", 10), vec![not_coordinator]);

    let loaded = |c: &GroupCoordinator, partition: i32| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.coordinated_partitions().get(&partition) != Some(&true) {
            assert!(
                Instant::now() < deadline,
                "partition {partition} not loaded"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    c.on_elected(home, 0, PARTITIONS);
    loaded(&c, home);
    assert_eq!(commit_now("g", 10), vec![ErrorCode::None.code()]);
    assert_eq!(c.fetch_offsets("g", None, false).unwrap()[0].offset, 10);
    assert_eq!(c.heartbeat(&elsewhere, 1, "m", None), not_coordinator);
    assert_eq!(
        c.describe_groups(std::slice::from_ref(&elsewhere))[0].error_code,
        not_coordinator
    );

    // Resigned: the group is another broker's.
    c.on_resigned(home);
    assert_eq!(c.fetch_offsets("g", None, false), Err(not_coordinator));
    assert!(c.list_groups(&[], &[]).is_empty());
    // Led again in a later epoch: reloaded from the log.
    c.on_elected(home, 1, PARTITIONS);
    loaded(&c, home);
    let offsets = c.fetch_offsets("g", None, false).unwrap();
    assert_eq!((offsets.len(), offsets[0].offset), (1, 10));
    assert_eq!(
        c.delete_groups(&["g".to_string(), elsewhere]),
        vec![ErrorCode::None.code(), not_coordinator]
    );
}

/// TxnOffsetCommit on a cluster node is in the log, so the partition's
/// next leader holds it pending and the transaction's marker there
/// commits it; an aborted one never counts, and a reload after the
/// marker finds the committed offset and nothing pending.
#[tokio::test]
async fn transactional_offsets_survive_a_coordinator_failover() {
    use super::store::tests::{created_topic, PARTITIONS};
    let dir = tempfile::tempdir().unwrap();
    let logs = created_topic(dir.path());
    let home = offsets_topic::partition_for("g", PARTITIONS);
    let loaded = |c: &GroupCoordinator| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.coordinated_partitions().get(&home) != Some(&true) {
            assert!(Instant::now() < deadline, "partition {home} not loaded");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let txn_commit = |c: &GroupCoordinator, producer: i64, offset: i64| {
        let offsets = commit("g", -1, "", &[("t", 0, offset)]).offsets;
        match c.add_pending_txn_offsets("g", producer, 0, &offsets) {
            Pending::Ready(code) => code,
            Pending::Later(_) => panic!("no replication to wait for here"),
        }
    };
    let ready = |pending: Pending<i16>| match pending {
        Pending::Ready(code) => code,
        Pending::Later(_) => panic!("no replication to wait for here"),
    };
    let first = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    first.on_elected(home, 0, PARTITIONS);
    loaded(&first);
    assert_eq!(txn_commit(&first, 7, 42), ErrorCode::None.code());
    assert_eq!(txn_commit(&first, 8, 99), ErrorCode::None.code());
    // Pending, not committed.
    assert!(first.fetch_offsets("g", None, false).unwrap().is_empty());
    assert_eq!(first.pending_txn_partitions("g").len(), 2);
    first.on_resigned(home);
    assert_eq!(
        ready(first.complete_transaction(home, 7, 0, true)),
        ErrorCode::NotLeaderOrFollower.code()
    );

    // The next leader reads both back as pending.
    let next = GroupCoordinator::open_in_cluster(logs.clone(), GroupConfig::default());
    next.on_elected(home, 1, PARTITIONS);
    loaded(&next);
    assert!(next.fetch_offsets("g", None, false).unwrap().is_empty());
    assert_eq!(next.pending_txn_partitions("g").len(), 2);
    assert_eq!(ready(next.complete_transaction(home, 8, 0, false)), 0);
    assert_eq!(ready(next.complete_transaction(home, 7, 0, true)), 0);
    let offsets = next.fetch_offsets("g", None, false).unwrap();
    assert_eq!((offsets.len(), offsets[0].offset), (1, 42));
    assert!(next.pending_txn_partitions("g").is_empty());

    // And after the markers, a reload has the commit and nothing pending.
    let last = GroupCoordinator::open_in_cluster(logs, GroupConfig::default());
    last.on_elected(home, 2, PARTITIONS);
    loaded(&last);
    let offsets = last.fetch_offsets("g", None, false).unwrap();
    assert_eq!((offsets.len(), offsets[0].offset), (1, 42));
    assert!(last.pending_txn_partitions("g").is_empty());
}
