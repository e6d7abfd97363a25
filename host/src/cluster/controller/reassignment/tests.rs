use super::*;
use crate::cluster::command::Command;
use crate::cluster::testing::Log;

/// (replicas, ISR, leader, adding, removing, leader epoch).
type State = (Vec<i32>, Vec<i32>, i32, Vec<i32>, Vec<i32>, i32);

fn state(log: &Log, topic: &str) -> State {
    let p = log.image.partition(topic, 0).cloned().unwrap();
    (
        p.replicas,
        p.isr,
        p.leader,
        p.adding_replicas,
        p.removing_replicas,
        p.leader_epoch,
    )
}

/// Reassigns partition 0 of `topic` to `target` and applies the change.
fn reassign_to(log: &mut Log, topic: &str, target: &[i32]) {
    let (t, p) = find(&log.image, topic, 0).unwrap();
    let change = reassign(&log.image, t, 0, p, target)
        .unwrap()
        .expect("a change");
    log.ok(&Command::ChangePartition(change));
}

/// The leader's AlterPartition to `isr`, applied.
fn isr_to(log: &mut Log, topic: &str, isr: &[i32]) {
    let (t, p) = find(&log.image, topic, 0).unwrap();
    let change = with_new_isr(&log.image, t, 0, p, isr).expect("a change");
    log.ok(&Command::ChangePartition(change));
}

#[test]
fn a_move_adds_the_target_then_completes_when_it_is_in_sync() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1]]);
    reassign_to(&mut log, "t", &[2]);
    assert_eq!(
        state(&log, "t"),
        (vec![2, 1], vec![1], 1, vec![2], vec![1], 0),
        "the union, the old leader leading"
    );
    assert!(in_progress(log.image.partition("t", 0).unwrap()));
    isr_to(&mut log, "t", &[1, 2]);
    assert_eq!(
        state(&log, "t"),
        (vec![2], vec![2], 2, vec![], vec![], 1),
        "completed: the leaving leader handed over in a new epoch"
    );
}

#[test]
fn growing_waits_for_the_new_replica_and_keeps_the_leader() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1, 2]]);
    reassign_to(&mut log, "t", &[1, 2, 3]);
    assert_eq!(
        state(&log, "t"),
        (vec![1, 2, 3], vec![1, 2], 1, vec![3], vec![], 0)
    );
    let (t, p) = find(&log.image, "t", 0).unwrap();
    assert_eq!(
        with_new_isr(&log.image, t, 0, p, &[1, 2]),
        None,
        "not yet in sync: nothing changes"
    );
    isr_to(&mut log, "t", &[1, 2, 3]);
    assert_eq!(
        state(&log, "t"),
        (vec![1, 2, 3], vec![1, 2, 3], 1, vec![], vec![], 0)
    );
}

#[test]
fn shrinking_completes_at_once_with_a_new_leader_epoch() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1, 2, 3]]);
    reassign_to(&mut log, "t", &[1, 2]);
    assert_eq!(
        state(&log, "t"),
        (vec![1, 2], vec![1, 2], 1, vec![], vec![], 1),
        "the leader stays, its epoch fences the removed replica"
    );
    log.topic("u", &[&[1, 2, 3]]);
    reassign_to(&mut log, "u", &[3, 2]);
    assert_eq!(
        state(&log, "u"),
        (vec![3, 2], vec![2, 3], 3, vec![], vec![], 1),
        "a removed leader hands over to the first target replica in sync"
    );
}

#[test]
fn a_reorder_completes_at_once_without_a_new_epoch() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1, 2, 3]]);
    reassign_to(&mut log, "t", &[3, 2, 1]);
    assert_eq!(
        state(&log, "t"),
        (vec![3, 2, 1], vec![1, 2, 3], 1, vec![], vec![], 0)
    );
    let (t, p) = find(&log.image, "t", 0).unwrap();
    assert_eq!(
        reassign(&log.image, t, 0, p, &[3, 2, 1]).unwrap(),
        None,
        "already there"
    );
}

#[test]
fn a_fenced_target_cannot_lead_the_completed_partition() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1, 2, 3]]);
    log.fence(2);
    let (t, p) = find(&log.image, "t", 0).unwrap();
    let change = reassign(&log.image, t, 0, p, &[2, 3]).unwrap().unwrap();
    assert_eq!(change.leader, Some(3), "2 is fenced: 3 leads");
}

#[test]
fn cancel_reverts_to_the_original_replicas() {
    let mut log = Log::with_brokers(4);
    log.topic("t", &[&[1, 2]]);
    let (t, p) = find(&log.image, "t", 0).unwrap();
    let refused = cancel(&log.image, t, 0, p, false).unwrap_err();
    assert_eq!(refused.code, ErrorCode::NoReassignmentInProgress);
    reassign_to(&mut log, "t", &[3, 4]);
    assert_eq!(
        state(&log, "t"),
        (vec![3, 4, 1, 2], vec![1, 2], 1, vec![3, 4], vec![1, 2], 0)
    );
    isr_to(&mut log, "t", &[1, 2, 3]);
    let (t, p) = find(&log.image, "t", 0).unwrap();
    let change = cancel(&log.image, t, 0, p, false).unwrap().unwrap();
    log.ok(&Command::ChangePartition(change));
    assert_eq!(
        state(&log, "t"),
        (vec![1, 2], vec![1, 2], 1, vec![], vec![], 1),
        "the added replica leaves the ISR and the replicas"
    );
    let (t, p) = find(&log.image, "t", 0).unwrap();
    assert_eq!(
        cancel(&log.image, t, 0, p, false).unwrap_err().code,
        ErrorCode::NoReassignmentInProgress
    );
}

#[test]
fn a_cancel_leaving_no_isr_needs_an_unclean_election() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1]]);
    reassign_to(&mut log, "t", &[1, 2]);
    // Only the adding replica is in sync (the original one was dropped).
    log.ok(&Command::ChangePartition(PartitionChangeRecord {
        isr: Some(vec![2]),
        leader: Some(2),
        ..PartitionChangeRecord::new(log.image.topic("t").unwrap().id, 0, 1)
    }));
    let (t, p) = find(&log.image, "t", 0).unwrap();
    let refused = cancel(&log.image, t, 0, p, false).unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidReplicaAssignment);
    let change = cancel(&log.image, t, 0, p, true).unwrap().unwrap();
    assert_eq!(
        (change.replicas.clone(), change.isr.clone(), change.leader),
        (Some(vec![1]), Some(vec![1]), Some(1))
    );
    log.ok(&Command::ChangePartition(change));
}

#[test]
fn targets_are_checked_like_manual_assignments() {
    let mut log = Log::with_brokers(2);
    log.topic("t", &[&[1]]);
    let (t, p) = find(&log.image, "t", 0).unwrap();
    for target in [&[][..], &[9], &[1, 1]] {
        let refused = reassign(&log.image, t, 0, p, target).unwrap_err();
        assert_eq!(
            refused.code,
            ErrorCode::InvalidReplicaAssignment,
            "{target:?}"
        );
    }
    for (topic, index) in [("t", 1), ("gone", 0)] {
        let refused = find(&log.image, topic, index).unwrap_err();
        assert_eq!(refused.code, ErrorCode::UnknownTopicOrPartition);
    }
}

#[test]
fn only_reassignments_in_progress_are_listed() {
    let mut log = Log::with_brokers(3);
    log.topic("a", &[&[1], &[2]]);
    log.topic("b", &[&[1, 2]]);
    reassign_to(&mut log, "a", &[3]);
    reassign_to(&mut log, "b", &[2, 3]);
    let all = ongoing(&log.image, None);
    let entry = |topic: &str, replicas: &[i32], adding: &[i32], removing: &[i32]| Ongoing {
        topic: topic.to_string(),
        partition: 0,
        replicas: replicas.to_vec(),
        adding: adding.to_vec(),
        removing: removing.to_vec(),
    };
    assert_eq!(
        all,
        vec![
            entry("a", &[3, 1], &[3], &[1]),
            entry("b", &[2, 3, 1], &[3], &[1]),
        ]
    );
    let named = ongoing(
        &log.image,
        Some(&[
            ("a".to_string(), vec![0, 1, 7]),
            ("gone".to_string(), vec![0]),
        ]),
    );
    assert_eq!(named.len(), 1);
    assert_eq!((named[0].topic.as_str(), named[0].partition), ("a", 0));
}
