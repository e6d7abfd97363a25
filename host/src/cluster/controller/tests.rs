use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::brokers::{self, HeartbeatDecision, HeartbeatRequest};
use super::election;
use super::heartbeats::Heartbeats;
use super::topics::{self, AlterPartitionRequest, TopicRequest};
use crate::cluster::command::{
    Applied, Command, ConfigResource, LeaderRecoveryState, PartitionChangeRecord, Uuid, NO_LEADER,
};
use crate::cluster::image::PartitionRegistration;
use crate::cluster::placement::Seed;
use crate::cluster::testing::{registration, Log};
use crate::error_code::ErrorCode;

const TIMEOUT: Duration = Duration::from_millis(9000);

fn partition(log: &Log, topic: &str, index: i32) -> PartitionRegistration {
    log.image.partition(topic, index).cloned().unwrap()
}

/// (leader, ISR, leader epoch, partition epoch).
fn state(log: &Log, topic: &str, index: i32) -> (i32, Vec<i32>, i32, i32) {
    let p = partition(log, topic, index);
    (p.leader, p.isr, p.leader_epoch, p.partition_epoch)
}

fn heartbeat(broker_id: i32, broker_epoch: i64, offset: i64) -> HeartbeatRequest {
    HeartbeatRequest {
        broker_id,
        broker_epoch,
        current_metadata_offset: offset,
        want_fence: false,
        want_shutdown: false,
    }
}

fn request(name: &str, partitions: i32, factor: i16) -> TopicRequest {
    TopicRequest {
        name: name.to_string(),
        id: Uuid(0xabc),
        num_partitions: partitions,
        replication_factor: factor,
        assignment: None,
        configs: BTreeMap::new(),
    }
}

#[test]
fn a_live_broker_id_cannot_be_registered_twice() {
    let mut log = Log::with_brokers(1);
    let mut heartbeats = Heartbeats::new();
    let t0 = Instant::now();
    heartbeats.touch(1, log.epoch(1), t0);
    let other = registration(1, 999);
    let refused =
        brokers::register(&log.image, &heartbeats, other.clone(), t0, TIMEOUT, false).unwrap_err();
    assert_eq!(refused.code, ErrorCode::DuplicateBrokerRegistration);
    // The same incarnation retrying is fine.
    let retry = brokers::register(
        &log.image,
        &heartbeats,
        registration(1, 1),
        t0,
        TIMEOUT,
        false,
    );
    assert_eq!(retry, Ok(Command::RegisterBroker(registration(1, 1))));

    // Once the session expired the new incarnation takes over; the old
    // one, not fenced yet, is fenced (and leaves its partitions) with it.
    log.topic("t", &[&[1]]);
    let later = t0 + TIMEOUT;
    let command = brokers::register(&log.image, &heartbeats, other, later, TIMEOUT, false).unwrap();
    let Applied::Batch(answers) = log.ok(&command) else {
        panic!("not atomic: {command:?}");
    };
    let Some(Applied::BrokerRegistered { epoch }) = answers.last() else {
        panic!("{answers:?}");
    };
    let broker = log.image.cluster().broker(1).unwrap();
    assert_eq!((broker.epoch, broker.fenced), (*epoch, true));
    assert_eq!(state(&log, "t", 0), (NO_LEADER, vec![1], 1, 1));
}

#[test]
fn heartbeats_unfence_a_caught_up_broker_and_bring_its_partitions_back() {
    let mut log = Log::with_brokers(2);
    log.topic("solo", &[&[2]]);
    let mut heartbeats = Heartbeats::new();
    let t0 = Instant::now();
    // Broker 2 is fenced (session expired): its partition goes offline.
    heartbeats.touch(1, log.epoch(1), t0);
    heartbeats.touch(2, log.epoch(2), t0);
    heartbeats.touch(1, log.epoch(1), t0 + TIMEOUT);
    let fence =
        brokers::fence_expired(&log.image, &mut heartbeats, t0 + TIMEOUT, TIMEOUT, false).unwrap();
    log.ok(&fence);
    assert_eq!(state(&log, "solo", 0), (NO_LEADER, vec![2], 1, 1));
    assert!(log.image.cluster().broker(2).unwrap().fenced);

    // It re-registers (new incarnation, fenced) and heartbeats.
    let Applied::BrokerRegistered { epoch } =
        log.ok(&Command::RegisterBroker(registration(2, 2222)))
    else {
        panic!()
    };
    let behind = brokers::heartbeat(
        &log.image,
        &mut heartbeats,
        heartbeat(2, epoch, epoch - 1),
        t0,
        false,
    )
    .unwrap();
    assert_eq!(
        behind,
        HeartbeatDecision {
            command: None,
            is_caught_up: false,
            is_fenced: true,
            should_shut_down: false
        }
    );
    let stale = brokers::heartbeat(&log.image, &mut heartbeats, heartbeat(2, 1, 99), t0, false);
    assert_eq!(stale.unwrap_err().code, ErrorCode::StaleBrokerEpoch);
    let unknown = brokers::heartbeat(&log.image, &mut heartbeats, heartbeat(8, 1, 99), t0, false);
    assert_eq!(unknown.unwrap_err().code, ErrorCode::BrokerIdNotRegistered);

    let caught_up = brokers::heartbeat(
        &log.image,
        &mut heartbeats,
        heartbeat(2, epoch, epoch),
        t0,
        false,
    )
    .unwrap();
    assert!(caught_up.is_caught_up && !caught_up.is_fenced);
    log.ok(&caught_up.command.unwrap());
    assert!(log.image.cluster().is_active(2));
    // The last ISR member leads again.
    assert_eq!(state(&log, "solo", 0), (2, vec![2], 2, 2));
}

#[test]
fn fencing_moves_leaders_within_the_isr_and_shrinks_it() {
    let mut log = Log::with_brokers(3);
    let start = topics::create_topic(&log.image, &request("t", 6, 3), Seed::default()).unwrap();
    log.ok(&start);
    let led_by_1: Vec<i32> = (0..6)
        .filter(|p| partition(&log, "t", *p).leader == 1)
        .collect();
    assert_eq!(led_by_1.len(), 2);

    let mut heartbeats = Heartbeats::new();
    let t0 = Instant::now();
    assert_eq!(
        brokers::fence_expired(&log.image, &mut heartbeats, t0, TIMEOUT, false),
        None,
        "sessions start when the controller first looks"
    );
    let later = t0 + TIMEOUT;
    heartbeats.touch(2, log.epoch(2), later);
    heartbeats.touch(3, log.epoch(3), later);
    let fence = brokers::fence_expired(&log.image, &mut heartbeats, later, TIMEOUT, false).unwrap();
    let before: Vec<PartitionRegistration> = (0..6).map(|p| partition(&log, "t", p)).collect();
    log.ok(&fence);
    assert!(log.image.cluster().broker(1).unwrap().fenced);
    for (index, old) in before.iter().enumerate() {
        let new = partition(&log, "t", index as i32);
        let expected_isr: Vec<i32> = old.isr.iter().copied().filter(|id| *id != 1).collect();
        assert_eq!(new.isr, expected_isr);
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
        if old.leader == 1 {
            // The next replica in preference order that is in the ISR.
            let next = old.replicas.iter().copied().find(|id| *id != 1).unwrap();
            assert_eq!(new.leader, next);
            assert_eq!(new.leader_epoch, old.leader_epoch + 1);
        } else {
            assert_eq!(
                (new.leader, new.leader_epoch),
                (old.leader, old.leader_epoch)
            );
        }
    }
    assert!(log.image.led_by(1).is_empty());
    assert_eq!(
        brokers::fence_expired(&log.image, &mut heartbeats, later, TIMEOUT, false),
        None,
        "fenced brokers are not fenced again"
    );
}

#[test]
fn brokers_expiring_together_are_fenced_in_one_consistent_command() {
    let mut log = Log::with_brokers(3);
    log.topic("t", &[&[1, 2, 3]]);
    let mut heartbeats = Heartbeats::new();
    let t0 = Instant::now();
    heartbeats.expired(&log.image, t0, TIMEOUT);
    heartbeats.touch(3, log.epoch(3), t0 + TIMEOUT);
    let fence =
        brokers::fence_expired(&log.image, &mut heartbeats, t0 + TIMEOUT, TIMEOUT, false).unwrap();
    log.ok(&fence);
    // 1 leaves (2 leads), then 2 leaves (3 leads): two changes, both applied.
    assert_eq!(state(&log, "t", 0), (3, vec![3], 2, 2));
}

#[test]
fn without_a_live_isr_member_the_partition_goes_offline_unless_unclean() {
    for unclean in [false, true] {
        let mut log = Log::with_brokers(2);
        let id = log.topic("t", &[&[1, 2]]);
        // Broker 2 fell out of the ISR earlier.
        log.shrink_isr(id, vec![1]);
        let mut heartbeats = Heartbeats::new();
        let t0 = Instant::now();
        heartbeats.expired(&log.image, t0, TIMEOUT);
        heartbeats.touch(2, log.epoch(2), t0 + TIMEOUT);
        let fence =
            brokers::fence_expired(&log.image, &mut heartbeats, t0 + TIMEOUT, TIMEOUT, unclean)
                .unwrap();
        log.ok(&fence);
        let p = partition(&log, "t", 0);
        if unclean {
            assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
            assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
        } else {
            assert_eq!(
                (p.leader, p.isr.clone()),
                (NO_LEADER, vec![1]),
                "1 stays, last"
            );
            assert_eq!(log.image.offline_replicas(&p), [1]);
        }
        assert_eq!(p.leader_epoch, 1);
    }
}

#[test]
fn the_topic_config_decides_unclean_election() {
    let mut log = Log::with_brokers(2);
    let id = log.topic("t", &[&[1, 2]]);
    log.shrink_isr(id, vec![1]);
    log.ok(&Command::AlterConfigs {
        resource: ConfigResource::Topic("t".into()),
        changes: vec![("unclean.leader.election.enable".into(), Some("true".into()))],
        replace: false,
    });
    let mut heartbeats = Heartbeats::new();
    heartbeats.touch(2, log.epoch(2), Instant::now());
    let command = brokers::heartbeat(
        &log.image,
        &mut heartbeats,
        HeartbeatRequest {
            want_fence: true,
            ..heartbeat(1, log.epoch(1), 100)
        },
        Instant::now(),
        false,
    )
    .unwrap();
    assert!(command.is_fenced);
    log.ok(&command.command.unwrap());
    assert_eq!(partition(&log, "t", 0).leader, 2);
}

/// A creation decided on an image from before the shutdown's change still
/// names the broker leader (seen in the fault test: `__consumer_offsets`
/// created as a node got SIGTERM); its next beats move that too, once.
#[test]
fn a_partition_placed_on_a_broker_already_shutting_down_moves_too() {
    let mut log = Log::with_brokers(2);
    let mut heartbeats = Heartbeats::new();
    let now = Instant::now();
    let shutdown = HeartbeatRequest {
        want_shutdown: true,
        ..heartbeat(1, log.epoch(1), 100)
    };
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    log.ok(&decision.command.unwrap());
    assert!(
        log.image
            .cluster()
            .broker(1)
            .unwrap()
            .in_controlled_shutdown
    );
    log.topic("late", &[&[1, 2]]);
    let two = heartbeat(2, log.epoch(2), log.image.last_applied() as i64);
    brokers::heartbeat(&log.image, &mut heartbeats, two, now, false).unwrap();
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    assert!(!decision.should_shut_down, "it still leads late-0");
    log.ok(&decision.command.expect("the late partition moves"));
    assert_eq!(state(&log, "late", 0), (2, vec![2], 1, 1));
    let two = heartbeat(2, log.epoch(2), log.image.last_applied() as i64);
    brokers::heartbeat(&log.image, &mut heartbeats, two, now, false).unwrap();
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    assert_eq!(decision.command, None, "nothing is left to move");
    assert!(decision.should_shut_down);
}

#[test]
fn controlled_shutdown_moves_leadership_away_first() {
    let mut log = Log::with_brokers(2);
    log.topic("t", &[&[1, 2], &[2, 1]]);
    let mut heartbeats = Heartbeats::new();
    let now = Instant::now();
    let shutdown = HeartbeatRequest {
        want_shutdown: true,
        ..heartbeat(1, log.epoch(1), 100)
    };
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    assert!(!decision.should_shut_down, "it still leads t-0");
    log.ok(&decision.command.unwrap());
    assert_eq!(state(&log, "t", 0), (2, vec![2], 1, 1));
    assert_eq!(state(&log, "t", 1), (2, vec![2], 0, 1));
    let broker = log.image.cluster().broker(1).unwrap();
    assert!(broker.in_controlled_shutdown && !broker.fenced);
    // Broker 2 has not applied the change yet: 1 waits.
    let behind = log.image.last_applied() as i64 - 1;
    let two = heartbeat(2, log.epoch(2), behind);
    brokers::heartbeat(&log.image, &mut heartbeats, two, now, false).unwrap();
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    assert_eq!(decision.command, None);
    assert!(
        !decision.should_shut_down,
        "broker 2 does not know it leads"
    );
    let two = heartbeat(2, log.epoch(2), log.image.last_applied() as i64);
    brokers::heartbeat(&log.image, &mut heartbeats, two, now, false).unwrap();
    let decision = brokers::heartbeat(&log.image, &mut heartbeats, shutdown, now, false).unwrap();
    assert!(decision.should_shut_down);
}

#[test]
fn unregistering_leaves_partitions_first() {
    let mut log = Log::with_brokers(2);
    log.topic("t", &[&[1, 2]]);
    let command = brokers::unregister(&log.image, 1, false).unwrap();
    log.ok(&command);
    assert!(log.image.cluster().broker(1).is_none());
    let p = partition(&log, "t", 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(log.image.offline_replicas(&p), [1]);
    let unknown = brokers::unregister(&log.image, 1, false).unwrap_err();
    assert_eq!(unknown.code, ErrorCode::BrokerIdNotRegistered);
}

#[test]
fn create_topic_places_over_active_brokers() {
    let mut log = Log::with_brokers(3);
    let too_many = topics::create_topic(&log.image, &request("t", 1, 4), Seed::default());
    assert_eq!(
        too_many.unwrap_err().code,
        ErrorCode::InvalidReplicationFactor
    );
    log.fence(3);
    let fenced_out = topics::create_topic(&log.image, &request("t", 1, 3), Seed::default());
    assert_eq!(
        fenced_out.unwrap_err().code,
        ErrorCode::InvalidReplicationFactor
    );

    let command = topics::create_topic(&log.image, &request("t", 4, 2), Seed::default()).unwrap();
    log.ok(&command);
    for index in 0..4 {
        let p = partition(&log, "t", index);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        assert!(!p.replicas.contains(&3));
    }
    let exists = topics::create_topic(&log.image, &request("t", 1, 1), Seed::default());
    assert_eq!(exists.unwrap_err().code, ErrorCode::TopicAlreadyExists);
    let mut dotted = request("a.b", 1, 1);
    dotted.id = Uuid(0xdef);
    log.ok(&topics::create_topic(&log.image, &dotted, Seed::default()).unwrap());
    dotted.name = "a_b".into();
    let collides = topics::create_topic(&log.image, &dotted, Seed::default());
    assert_eq!(collides.unwrap_err().code, ErrorCode::InvalidTopicException);
}

#[test]
fn explicit_assignments_keep_only_active_replicas_in_the_isr() {
    let mut log = Log::with_brokers(3);
    log.fence(2);
    let mut manual = request("m", -1, -1);
    manual.assignment = Some(vec![vec![2, 1], vec![3, 2]]);
    log.ok(&topics::create_topic(&log.image, &manual, Seed::default()).unwrap());
    assert_eq!(state(&log, "m", 0), (1, vec![1], 0, 0));
    assert_eq!(state(&log, "m", 1), (3, vec![3], 0, 0));

    manual.name = "n".into();
    manual.assignment = Some(vec![vec![2]]);
    let all_fenced = topics::create_topic(&log.image, &manual, Seed::default()).unwrap_err();
    assert_eq!(all_fenced.code, ErrorCode::InvalidReplicaAssignment);
    assert!(all_fenced
        .message
        .contains("fenced or in controlled shutdown"));
    manual.assignment = Some(vec![vec![1, 5]]);
    let unknown = topics::create_topic(&log.image, &manual, Seed::default()).unwrap_err();
    assert_eq!(unknown.code, ErrorCode::InvalidReplicaAssignment);
}

#[test]
fn create_partitions_keeps_the_replication_factor() {
    let mut log = Log::with_brokers(3);
    log.ok(&topics::create_topic(&log.image, &request("t", 3, 2), Seed::default()).unwrap());
    let grow = topics::create_partitions(&log.image, "t", 6, None, Seed::default()).unwrap();
    log.ok(&grow);
    let topic = log.image.topic("t").unwrap();
    assert_eq!(topic.partition_count(), 6);
    assert!(topic.partitions.values().all(|p| p.replicas.len() == 2));
    let leaders: Vec<i32> = topic.partitions.values().map(|p| p.leader).collect();
    for broker in 1..=3 {
        assert_eq!(
            leaders.iter().filter(|l| **l == broker).count(),
            2,
            "{leaders:?}"
        );
    }

    let code = |result: Result<Command, crate::cluster::command::Refusal>| result.unwrap_err().code;
    let seed = Seed::default();
    assert_eq!(
        code(topics::create_partitions(&log.image, "t", 6, None, seed)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(topics::create_partitions(&log.image, "t", 2, None, seed)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(topics::create_partitions(&log.image, "nope", 9, None, seed)),
        ErrorCode::UnknownTopicOrPartition
    );
    let one = [vec![1, 2]];
    assert_eq!(
        code(topics::create_partitions(
            &log.image,
            "t",
            8,
            Some(&one),
            seed
        )),
        ErrorCode::InvalidReplicaAssignment,
        "two new partitions, one assignment"
    );
    let wrong_factor = [vec![1]];
    assert_eq!(
        code(topics::create_partitions(
            &log.image,
            "t",
            7,
            Some(&wrong_factor),
            seed
        )),
        ErrorCode::InvalidReplicaAssignment
    );
    let manual = [vec![3, 1]];
    log.ok(&topics::create_partitions(&log.image, "t", 7, Some(&manual), seed).unwrap());
    assert_eq!(state(&log, "t", 6), (3, vec![3, 1], 0, 0));
    log.ok(&topics::delete_topic(&log.image, "t").unwrap());
    assert!(log.image.topic("t").is_none());
    assert_eq!(
        code(topics::delete_topic(&log.image, "t")),
        ErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn alter_partition_follows_kafkas_checks() {
    let mut log = Log::with_brokers(3);
    let id = log.topic("t", &[&[1, 2, 3]]);
    let shrink = AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: log.epoch(1),
        topic_id: id,
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![1, 2],
        leader_recovery_state: LeaderRecoveryState::Recovered,
    };
    let code = |log: &Log, request: AlterPartitionRequest| {
        topics::alter_partition(&log.image, &request)
            .unwrap_err()
            .code
    };
    let with = |change: &dyn Fn(&mut AlterPartitionRequest)| {
        let mut request = shrink.clone();
        change(&mut request);
        request
    };
    assert_eq!(
        code(&log, with(&|r| r.broker_epoch = 0)),
        ErrorCode::StaleBrokerEpoch
    );
    assert_eq!(
        code(&log, with(&|r| r.topic_id = Uuid(5))),
        ErrorCode::UnknownTopicId
    );
    assert_eq!(
        code(&log, with(&|r| r.partition = 3)),
        ErrorCode::UnknownTopicOrPartition
    );
    assert_eq!(
        code(&log, with(&|r| r.leader_epoch = -1)),
        ErrorCode::FencedLeaderEpoch
    );
    let follower = with(&|r| {
        r.broker_id = 2;
        r.broker_epoch = log.epoch(2);
    });
    assert_eq!(code(&log, follower), ErrorCode::InvalidRequest);
    assert_eq!(
        code(&log, with(&|r| r.partition_epoch = 4)),
        ErrorCode::InvalidUpdateVersion
    );
    assert_eq!(
        code(&log, with(&|r| r.new_isr = vec![2, 3])),
        ErrorCode::InvalidRequest
    );
    assert_eq!(
        code(&log, with(&|r| r.new_isr = vec![1, 4])),
        ErrorCode::IneligibleReplica
    );
    assert_eq!(
        code(
            &log,
            with(&|r| r.leader_recovery_state = LeaderRecoveryState::Recovering)
        ),
        ErrorCode::InvalidRequest
    );

    // Accepted: the ISR shrinks, the partition epoch moves.
    let command = topics::alter_partition(&log.image, &shrink)
        .unwrap()
        .unwrap();
    log.ok(&command);
    assert_eq!(state(&log, "t", 0), (1, vec![1, 2], 0, 1));
    // The same request again is stale now.
    assert_eq!(code(&log, shrink.clone()), ErrorCode::InvalidUpdateVersion);
    // An unchanged ISR changes nothing.
    let same = with(&|r| r.partition_epoch = 1);
    assert_eq!(topics::alter_partition(&log.image, &same), Ok(None));
    // A fenced broker cannot rejoin.
    log.fence(3);
    let expand = with(&|r| {
        r.partition_epoch = 1;
        r.new_isr = vec![1, 2, 3];
    });
    assert_eq!(code(&log, expand), ErrorCode::IneligibleReplica);
}

#[test]
fn an_offline_partition_is_elected_once_its_topic_allows_unclean() {
    let mut log = Log::with_brokers(2);
    let id = log.topic("t", &[&[1, 2]]);
    log.shrink_isr(id, vec![1]);
    let command = brokers::unregister(&log.image, 1, false).unwrap();
    log.ok(&command);
    assert_eq!(state(&log, "t", 0).0, NO_LEADER);
    assert_eq!(election::offline_partitions(&log.image, false), vec![]);
    log.ok(&Command::AlterConfigs {
        resource: ConfigResource::Topic("t".into()),
        changes: vec![("unclean.leader.election.enable".into(), Some("true".into()))],
        replace: false,
    });
    let changes = election::offline_partitions(&log.image, false);
    assert_eq!(changes.len(), 1);
    log.ok(&Command::ChangePartition(changes[0].clone()));
    let p = partition(&log, "t", 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
    assert_eq!(election::offline_partitions(&log.image, false), vec![]);
}

#[test]
fn elect_leaders_follows_kafkas_rules() {
    use super::election::ElectionType::{Preferred, Unclean};
    let elect = |log: &Log, election| {
        let topic = log.image.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        election::elect(&log.image, topic, 0, p, election)
    };
    let mut log = Log::with_brokers(3);
    let id = log.topic("t", &[&[1, 2, 3]]);
    let refused = |r: Result<_, crate::cluster::command::Refusal>| r.unwrap_err().code;
    assert_eq!(
        refused(elect(&log, Preferred)),
        ErrorCode::ElectionNotNeeded
    );
    assert_eq!(refused(elect(&log, Unclean)), ErrorCode::ElectionNotNeeded);

    // 1 fails over to 2, then comes back but is not in the ISR yet.
    let mut heartbeats = Heartbeats::new();
    let t0 = Instant::now();
    heartbeats.expired(&log.image, t0, TIMEOUT);
    heartbeats.touch(2, log.epoch(2), t0 + TIMEOUT);
    heartbeats.touch(3, log.epoch(3), t0 + TIMEOUT);
    let fence =
        brokers::fence_expired(&log.image, &mut heartbeats, t0 + TIMEOUT, TIMEOUT, false).unwrap();
    log.ok(&fence);
    assert_eq!(state(&log, "t", 0), (2, vec![2, 3], 1, 1));
    assert_eq!(
        refused(elect(&log, Preferred)),
        ErrorCode::PreferredLeaderNotAvailable
    );
    log.ok(&Command::UnfenceBroker {
        broker_id: 1,
        epoch: log.epoch(1),
    });
    assert_eq!(
        refused(elect(&log, Preferred)),
        ErrorCode::PreferredLeaderNotAvailable,
        "not in the ISR"
    );
    log.ok(&Command::ChangePartition(PartitionChangeRecord {
        isr: Some(vec![2, 3, 1]),
        ..PartitionChangeRecord::new(id, 0, 1)
    }));
    let change = elect(&log, Preferred).unwrap();
    log.ok(&Command::ChangePartition(change));
    assert_eq!(state(&log, "t", 0), (1, vec![2, 3, 1], 2, 3));

    // Every replica fenced: nothing is eligible, unclean or not.
    for broker in [1, 2, 3] {
        let command = brokers::unregister(&log.image, broker, false).unwrap();
        log.ok(&command);
    }
    assert_eq!(
        refused(elect(&log, Unclean)),
        ErrorCode::EligibleLeadersNotAvailable
    );
}

#[test]
fn an_isr_with_every_target_replica_completes_the_reassignment() {
    use super::reassignment;
    let mut log = Log::with_brokers(3);
    let id = log.topic("moved", &[&[1]]);
    let registration = partition(&log, "moved", 0);
    let topic = log.image.topic("moved").unwrap();
    let start = reassignment::reassign(&log.image, topic, 0, &registration, &[2])
        .unwrap()
        .unwrap();
    log.ok(&Command::ChangePartition(start));
    assert_eq!(partition(&log, "moved", 0).replicas, [2, 1]);
    let join = AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: log.epoch(1),
        topic_id: id,
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 1,
        new_isr: vec![1, 2],
        leader_recovery_state: LeaderRecoveryState::Recovered,
    };
    let command = topics::alter_partition(&log.image, &join)
        .unwrap()
        .expect("a change");
    log.ok(&command);
    let done = partition(&log, "moved", 0);
    assert_eq!(
        (done.replicas, done.isr, done.leader, done.leader_epoch),
        (vec![2], vec![2], 2, 1),
        "the old leader handed over in a new epoch"
    );
    assert!(done.adding_replicas.is_empty() && done.removing_replicas.is_empty());
}
