use std::collections::BTreeMap;

use super::*;
use crate::cluster::command::{
    Endpoint, LeaderRecoveryState, NewTopicRecord, PartitionChangeRecord, PartitionRecord,
    NO_LEADER,
};
use crate::cluster::testing::{registration, Log};
use crate::quota::QuotaOp;
use crate::security::acl_store::{
    AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, PermissionFilter,
    ResourceType,
};
use crate::security::credentials::{ScramCredential, ScramMechanism};
use crate::security::tokens::TokenInfo;

fn refused(response: Response) -> ErrorCode {
    match response {
        Err(refusal) => refusal.code,
        Ok(applied) => panic!("accepted: {applied:?}"),
    }
}

fn acl(name: &str, principal: &str) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: name.to_string(),
        pattern_type: PatternType::Literal,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: Operation::Read,
        permission: Permission::Allow,
    }
}

fn token(id: &str, expiry: i64) -> TokenInfo {
    TokenInfo {
        token_id: id.to_string(),
        hmac: vec![1, 2, 3],
        owner: "User:alice".to_string(),
        requester: "User:alice".to_string(),
        renewers: vec![],
        issue_timestamp_ms: 1,
        expiry_timestamp_ms: expiry,
        max_timestamp_ms: 100,
    }
}

fn change(topic_id: Uuid, partition: i32, epoch: i32) -> PartitionChangeRecord {
    PartitionChangeRecord::new(topic_id, partition, epoch)
}

/// Partition `partition` on these replicas, led by broker 1, alone in the ISR.
fn led_by_1(partition: i32, replicas: Vec<i32>) -> PartitionRecord {
    PartitionRecord {
        partition,
        replicas,
        isr: vec![1],
        leader: 1,
    }
}

/// One command of every kind, in an order that applies.
fn every_kind() -> Vec<Command> {
    let topic = Uuid(77);
    vec![
        Command::RegisterBroker(registration(1, 11)),
        Command::UnfenceBroker {
            broker_id: 1,
            epoch: 1,
        },
        Command::RegisterBroker(registration(2, 22)),
        Command::CreateTopic(NewTopicRecord {
            name: "orders".into(),
            id: topic,
            partitions: vec![led_by_1(0, vec![1, 2])],
            configs: BTreeMap::from([("retention.ms".into(), "1000".into())]),
        }),
        Command::CreatePartitions {
            topic_id: topic,
            partitions: vec![led_by_1(1, vec![2, 1])],
        },
        Command::ChangePartition(PartitionChangeRecord {
            isr: Some(vec![1]),
            ..change(topic, 0, 0)
        }),
        Command::AlterConfigs {
            resource: ConfigResource::BrokerDefault,
            changes: vec![("log.retention.ms".into(), Some("5".into()))],
            replace: false,
        },
        Command::AlterConfigs {
            resource: ConfigResource::Group("g".into()),
            changes: vec![("consumer.session.timeout.ms".into(), Some("45000".into()))],
            replace: false,
        },
        Command::CreateAcls(vec![acl("orders", "User:a")]),
        Command::UpsertScramCredential {
            user: "alice".into(),
            mechanism: ScramMechanism::Sha256,
            credential: ScramCredential {
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations: 4096,
            },
        },
        Command::AlterClientQuota {
            entity: BTreeMap::from([("user".to_string(), Some("alice".to_string()))]),
            ops: vec![QuotaOp {
                key: "producer_byte_rate".into(),
                value: 1024.0,
                remove: false,
            }],
        },
        Command::UpsertDelegationToken {
            token: token("t1", 50),
            create: true,
        },
        Command::SetFeatureLevel {
            name: "transaction.version".into(),
            level: 2,
        },
        Command::AllocateProducerIds {
            broker_id: 1,
            broker_epoch: 1,
        },
        Command::SetAuthorizer {
            name: Some("acl_authorizer".into()),
        },
    ]
}

#[test]
fn every_command_kind_applies_and_the_image_round_trips_through_json() {
    let mut log = Log::default();
    for command in every_kind() {
        log.ok(&command);
    }
    let image = &log.image;
    assert_eq!(image.last_applied(), 15);
    let text = serde_json::to_string(image).unwrap();
    let back: MetadataImage = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, image);
    // The id index is rebuilt on load.
    assert_eq!(
        back.topic_by_id(Uuid(77)).map(|t| t.name.as_str()),
        Some("orders")
    );
    assert_eq!(back.authorizer_choice(), Some(Some("acl_authorizer")));
    assert_eq!(back.features()["transaction.version"], 2);
    assert_eq!(back.next_producer_id(), 1000);
    assert!(back.scram().get("alice", ScramMechanism::Sha256).is_some());
    assert!(text.contains("SCRAM-SHA-256"), "{text}");
    assert!(text.contains("\"resource_type\":\"TOPIC\""), "{text}");

    // Commands and answers cross the wire too.
    for command in every_kind() {
        let text = serde_json::to_string(&command).unwrap();
        assert_eq!(serde_json::from_str::<Command>(&text).unwrap(), command);
    }
    let answer: Response = Err(Refusal::new(ErrorCode::StaleBrokerEpoch, "old"));
    let text = serde_json::to_string(&answer).unwrap();
    assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), answer);
}

#[test]
fn the_same_log_gives_the_same_image() {
    let (mut a, mut b) = (Log::default(), Log::default());
    for command in every_kind() {
        let (x, y) = (a.apply(&command), b.apply(&command));
        assert_eq!(x, y);
    }
    assert_eq!(a.image, b.image);
    assert_eq!(
        serde_json::to_string(&a.image).unwrap(),
        serde_json::to_string(&b.image).unwrap()
    );
}

#[test]
fn broker_epochs_are_registration_indexes() {
    let mut log = Log::default();
    let first = log.ok(&Command::RegisterBroker(registration(1, 100)));
    assert_eq!(first, Applied::BrokerRegistered { epoch: 1 });
    assert!(
        log.image.cluster().broker(1).unwrap().fenced,
        "starts fenced"
    );
    // A retry of the same incarnation keeps its epoch.
    let retry = log.ok(&Command::RegisterBroker(registration(1, 100)));
    assert_eq!(retry, Applied::BrokerRegistered { epoch: 1 });
    // A new incarnation gets a new one.
    let again = log.ok(&Command::RegisterBroker(registration(1, 101)));
    assert_eq!(again, Applied::BrokerRegistered { epoch: 3 });

    let stale = Command::UnfenceBroker {
        broker_id: 1,
        epoch: 1,
    };
    assert_eq!(refused(log.apply(&stale)), ErrorCode::StaleBrokerEpoch);
    let unknown = Command::FenceBroker {
        broker_id: 9,
        epoch: 1,
    };
    assert_eq!(
        refused(log.apply(&unknown)),
        ErrorCode::BrokerIdNotRegistered
    );
    log.ok(&Command::UnfenceBroker {
        broker_id: 1,
        epoch: 3,
    });
    assert!(log.image.cluster().is_active(1));
    log.ok(&Command::ControlledShutdown {
        broker_id: 1,
        epoch: 3,
    });
    assert!(log.image.cluster().is_live(1) && !log.image.cluster().is_active(1));
    log.ok(&Command::UnregisterBroker {
        broker_id: 1,
        epoch: 3,
    });
    assert!(log.image.cluster().broker(1).is_none());
}

#[test]
fn live_brokers_per_listener() {
    let mut log = Log::with_brokers(3);
    log.fence(2);
    let live = log.image.live_brokers("INTERNAL");
    assert_eq!(live.iter().map(|b| b.id).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(live[1].host, "10.0.0.3");
    assert_eq!(live[1].port, 9999);
    assert!(log.image.live_brokers("NOPE").is_empty());
    assert_eq!(log.image.cluster().active_ids(), [1, 3]);
}

#[test]
fn topics_are_created_once_on_registered_brokers() {
    let mut log = Log::with_brokers(2);
    let id = log.topic("a.b", &[&[1, 2], &[2, 1]]);
    let topic = log.image.topic("a.b").unwrap();
    assert_eq!(topic.id, id);
    assert_eq!(topic.partition_count(), 2);
    assert_eq!(topic.replication_factor(), 2);
    assert_eq!(
        log.image.topic_by_id(id).map(|t| &t.name),
        Some(&topic.name)
    );
    assert_eq!(log.image.leader("a.b", 1), Some(2));

    let again = |log: &mut Log, name: &str, id: u128, replicas: Vec<i32>| {
        log.apply(&Command::CreateTopic(NewTopicRecord {
            name: name.into(),
            id: Uuid(id),
            partitions: vec![PartitionRecord {
                partition: 0,
                isr: replicas.clone(),
                leader: replicas[0],
                replicas,
            }],
            configs: BTreeMap::new(),
        }))
    };
    assert_eq!(
        refused(again(&mut log, "a.b", 5, vec![1])),
        ErrorCode::TopicAlreadyExists
    );
    assert_eq!(
        refused(again(&mut log, "a_b", 5, vec![1])),
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        refused(again(&mut log, "c", id.0, vec![1])),
        ErrorCode::TopicAlreadyExists,
        "the id is taken"
    );
    assert_eq!(
        refused(again(&mut log, "c", 5, vec![1, 3])),
        ErrorCode::InvalidReplicaAssignment,
        "broker 3 is not registered"
    );
    assert!(log.image.topic("c").is_none());
}

#[test]
fn partitions_are_added_after_the_last_one() {
    let mut log = Log::with_brokers(2);
    let id = log.topic("t", &[&[1]]);
    let add = |first: i32| Command::CreatePartitions {
        topic_id: id,
        partitions: vec![PartitionRecord {
            partition: first,
            replicas: vec![2],
            isr: vec![2],
            leader: 2,
        }],
    };
    assert_eq!(refused(log.apply(&add(2))), ErrorCode::InvalidPartitions);
    log.ok(&add(1));
    assert_eq!(
        refused(log.apply(&add(1))),
        ErrorCode::InvalidPartitions,
        "raced"
    );
    assert_eq!(log.image.topic("t").unwrap().partition_count(), 2);
    let unknown = Command::CreatePartitions {
        topic_id: Uuid(999),
        partitions: vec![],
    };
    assert_eq!(refused(log.apply(&unknown)), ErrorCode::UnknownTopicId);
}

#[test]
fn partition_changes_bump_epochs_like_kafka() {
    let mut log = Log::with_brokers(3);
    let id = log.topic("t", &[&[1, 2, 3]]);
    // An ISR change: partition epoch only.
    log.ok(&Command::ChangePartition(PartitionChangeRecord {
        isr: Some(vec![1, 2]),
        ..change(id, 0, 0)
    }));
    let p = log.image.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
    assert_eq!(p.isr, [1, 2]);
    // A leader change: both.
    log.ok(&Command::ChangePartition(PartitionChangeRecord {
        leader: Some(2),
        ..change(id, 0, 1)
    }));
    let p = log.image.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));

    // Decided on an old epoch.
    let stale = Command::ChangePartition(PartitionChangeRecord {
        leader: Some(1),
        ..change(id, 0, 1)
    });
    assert_eq!(refused(log.apply(&stale)), ErrorCode::InvalidUpdateVersion);
    // Inconsistent.
    let outsider = Command::ChangePartition(PartitionChangeRecord {
        isr: Some(vec![2, 4]),
        ..change(id, 0, 2)
    });
    assert_eq!(refused(log.apply(&outsider)), ErrorCode::InvalidRequest);
    let no_partition = Command::ChangePartition(change(id, 5, 0));
    assert_eq!(
        refused(log.apply(&no_partition)),
        ErrorCode::UnknownTopicOrPartition
    );
    // Adding a broker fenced since the decision.
    log.fence(3);
    let fenced = Command::ChangePartition(PartitionChangeRecord {
        isr: Some(vec![1, 2, 3]),
        ..change(id, 0, 2)
    });
    assert_eq!(refused(log.apply(&fenced)), ErrorCode::IneligibleReplica);
    let fenced_leader = Command::ChangePartition(PartitionChangeRecord {
        leader: Some(3),
        ..change(id, 0, 2)
    });
    assert_eq!(
        refused(log.apply(&fenced_leader)),
        ErrorCode::IneligibleReplica
    );
    // Offline, and recovering after an unclean election.
    log.ok(&Command::ChangePartition(PartitionChangeRecord {
        leader: Some(NO_LEADER),
        leader_recovery_state: Some(LeaderRecoveryState::Recovering),
        ..change(id, 0, 2)
    }));
    let p = log.image.partition("t", 0).unwrap();
    assert!(!p.has_leader());
    assert_eq!(log.image.leader("t", 0), None);
    assert_eq!(p.leader_recovery_state, LeaderRecoveryState::Recovering);
    assert_eq!(log.image.offline_replicas(p), [3]);
}

#[test]
fn deleting_a_topic_takes_its_configs() {
    let mut log = Log::with_brokers(1);
    let id = log.topic("t", &[&[1]]);
    let resource = ConfigResource::Topic("t".into());
    log.ok(&Command::AlterConfigs {
        resource: resource.clone(),
        changes: vec![("retention.ms".into(), Some("1".into()))],
        replace: false,
    });
    assert_eq!(log.image.configs().get(&resource).len(), 1);
    log.ok(&Command::DeleteTopic { topic_id: id });
    assert!(log.image.topic("t").is_none() && log.image.topic_by_id(id).is_none());
    assert!(log.image.configs().get(&resource).is_empty());
    assert_eq!(
        refused(log.apply(&Command::DeleteTopic { topic_id: id })),
        ErrorCode::UnknownTopicId
    );
    let orphan = Command::AlterConfigs {
        resource,
        changes: vec![("retention.ms".into(), Some("1".into()))],
        replace: false,
    };
    assert_eq!(
        refused(log.apply(&orphan)),
        ErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn configs_change_per_name_or_all_at_once() {
    let mut log = Log::default();
    let broker = ConfigResource::Broker(2);
    let alter = |changes: &[(&str, Option<&str>)], replace| Command::AlterConfigs {
        resource: broker.clone(),
        changes: changes
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect(),
        replace,
    };
    log.ok(&alter(&[("a", Some("1")), ("b", Some("2"))], false));
    log.ok(&alter(&[("a", None), ("c", Some("3"))], false));
    let names: Vec<&String> = log.image.configs().get(&broker).keys().collect();
    assert_eq!(names, ["b", "c"]);
    log.ok(&alter(&[("d", Some("4"))], true));
    let names: Vec<&String> = log.image.configs().get(&broker).keys().collect();
    assert_eq!(names, ["d"]);
    log.ok(&alter(&[("d", None)], false));
    assert_eq!(log.image.configs(), &ConfigsImage::default(), "empty goes");
}

#[test]
fn unclean_election_setting_falls_back_from_topic_to_cluster_to_static() {
    let mut log = Log::with_brokers(1);
    log.topic("t", &[&[1]]);
    assert!(!log.image.unclean_election_enabled("t", false));
    assert!(log.image.unclean_election_enabled("t", true));
    let set = |resource, value: &str| Command::AlterConfigs {
        resource,
        changes: vec![("unclean.leader.election.enable".into(), Some(value.into()))],
        replace: false,
    };
    log.ok(&set(ConfigResource::BrokerDefault, "true"));
    assert!(log.image.unclean_election_enabled("t", false));
    log.ok(&set(ConfigResource::Topic("t".into()), "false"));
    assert!(!log.image.unclean_election_enabled("t", true));
}

/// Fencing broker 1 (accepted), then broker 2 at a stale epoch (refused).
fn fence_1_then_stale_2(log: &Log) -> Vec<Command> {
    vec![
        Command::FenceBroker {
            broker_id: 1,
            epoch: log.epoch(1),
        },
        Command::FenceBroker {
            broker_id: 2,
            epoch: 999,
        },
    ]
}

#[test]
fn atomic_batches_apply_whole_or_not_at_all() {
    let mut log = Log::with_brokers(2);
    let before = log.image.clone();
    let batch = Command::Atomic(fence_1_then_stale_2(&log));
    let refusal = log.apply(&batch).unwrap_err();
    assert_eq!(refusal.code, ErrorCode::StaleBrokerEpoch);
    assert!(
        refusal.message.contains("change 2 of 2"),
        "{}",
        refusal.message
    );
    assert_eq!(log.image.cluster(), before.cluster(), "nothing changed");
    assert_eq!(log.image.last_applied(), log.index, "the index still moves");

    let each = Command::Each(fence_1_then_stale_2(&log));
    match log.ok(&each) {
        Applied::Each(answers) => {
            assert_eq!(answers[0], Ok(Applied::Done));
            assert_eq!(refused(answers[1].clone()), ErrorCode::StaleBrokerEpoch);
        }
        other => panic!("{other:?}"),
    }
    assert!(log.image.cluster().broker(1).unwrap().fenced);
}

#[test]
fn acls_are_added_once_and_deleted_by_filter() {
    let mut log = Log::default();
    let (a, b) = (acl("orders", "User:a"), acl("orders", "User:b"));
    log.ok(&Command::CreateAcls(vec![a.clone(), b.clone(), a.clone()]));
    log.ok(&Command::CreateAcls(vec![a.clone()]));
    assert_eq!(log.image.acls().bindings(), [a.clone(), b.clone()]);
    let by_principal = AclFilter {
        resource_type: ResourceType::Any,
        resource_name: None,
        pattern: PatternFilter::Any,
        principal: Some("User:b".into()),
        host: None,
        operation: Operation::Any,
        permission: PermissionFilter::Any,
    };
    let deleted = log.ok(&Command::DeleteAcls(vec![by_principal.clone()]));
    assert_eq!(deleted, Applied::AclsDeleted(vec![vec![b]]));
    let again = log.ok(&Command::DeleteAcls(vec![by_principal]));
    assert_eq!(again, Applied::AclsDeleted(vec![vec![]]));
    assert_eq!(log.image.acls().bindings(), [a]);
}

#[test]
fn credentials_tokens_and_quotas() {
    let mut log = Log::default();
    let delete = Command::DeleteScramCredential {
        user: "bob".into(),
        mechanism: ScramMechanism::Sha512,
    };
    assert_eq!(refused(log.apply(&delete)), ErrorCode::ResourceNotFound);

    log.ok(&Command::UpsertDelegationToken {
        token: token("t1", 10),
        create: true,
    });
    let duplicate = Command::UpsertDelegationToken {
        token: token("t1", 10),
        create: true,
    };
    assert_eq!(refused(log.apply(&duplicate)), ErrorCode::InvalidRequest);
    log.ok(&Command::UpsertDelegationToken {
        token: token("t1", 20),
        create: false,
    });
    assert_eq!(
        log.image.tokens().get("t1").unwrap().expiry_timestamp_ms,
        20
    );
    assert_eq!(
        log.image.tokens().by_hmac(&[1, 2, 3]).unwrap().token_id,
        "t1"
    );
    log.ok(&Command::RemoveDelegationToken {
        token_id: "t1".into(),
    });
    // A renewal decided before the removal must not bring it back.
    let renewal = Command::UpsertDelegationToken {
        token: token("t1", 30),
        create: false,
    };
    assert_eq!(
        refused(log.apply(&renewal)),
        ErrorCode::DelegationTokenNotFound
    );
    assert!(log.image.tokens().get("t1").is_none());

    let entity = BTreeMap::from([("client-id".to_string(), None)]);
    let op = |key: &str, value: f64, remove: bool| QuotaOp {
        key: key.into(),
        value,
        remove,
    };
    log.ok(&Command::AlterClientQuota {
        entity: entity.clone(),
        ops: vec![
            op("consumer_byte_rate", 10.0, false),
            op("request_percentage", 5.0, false),
        ],
    });
    log.ok(&Command::AlterClientQuota {
        entity: entity.clone(),
        ops: vec![op("consumer_byte_rate", 0.0, true)],
    });
    assert_eq!(
        log.image.quotas().get(&entity),
        Some(&BTreeMap::from([("request_percentage".to_string(), 5.0)]))
    );
    log.ok(&Command::AlterClientQuota {
        entity: entity.clone(),
        ops: vec![op("request_percentage", 0.0, true)],
    });
    assert_eq!(log.image.quotas().iter().count(), 0);
}

#[test]
fn producer_id_blocks_go_to_current_brokers_only() {
    let mut log = Log::with_brokers(2);
    let allocate = |id: i32, epoch: i64| Command::AllocateProducerIds {
        broker_id: id,
        broker_epoch: epoch,
    };
    let first = log.ok(&allocate(1, log.epoch(1)));
    assert_eq!(
        first,
        Applied::ProducerIds {
            first: 0,
            size: 1000
        }
    );
    let second = log.ok(&allocate(2, log.epoch(2)));
    assert_eq!(
        second,
        Applied::ProducerIds {
            first: 1000,
            size: 1000
        }
    );
    assert_eq!(
        refused(log.apply(&allocate(1, 0))),
        ErrorCode::StaleBrokerEpoch
    );
    assert_eq!(
        refused(log.apply(&allocate(7, 0))),
        ErrorCode::BrokerIdNotRegistered
    );
    assert_eq!(log.image.next_producer_id(), 2000);
}

#[test]
fn leadership_queries() {
    let mut log = Log::with_brokers(3);
    log.topic("a", &[&[1, 2], &[2, 3]]);
    log.topic("b", &[&[1, 3]]);
    let names = |found: Vec<(&TopicImage, i32)>| -> Vec<(String, i32)> {
        found
            .into_iter()
            .map(|(t, p)| (t.name.clone(), p))
            .collect()
    };
    assert_eq!(
        names(log.image.led_by(1)),
        [("a".to_string(), 0), ("b".to_string(), 0)]
    );
    assert_eq!(
        names(log.image.replicas_on(3)),
        [("a".to_string(), 1), ("b".to_string(), 0)]
    );
    log.ok(&Command::UnregisterBroker {
        broker_id: 3,
        epoch: log.epoch(3),
    });
    let p = log.image.partition("b", 0).unwrap();
    assert_eq!(
        log.image.offline_replicas(p),
        [3],
        "unregistered is offline"
    );
    let endpoints: Vec<&Endpoint> = log
        .image
        .cluster()
        .brokers()
        .filter_map(|b| b.endpoint("PLAINTEXT"))
        .collect();
    assert_eq!(endpoints.len(), 2);
}

#[test]
fn the_authorizer_choice_is_unset_until_made_and_none_is_a_choice() {
    let mut log = Log::default();
    assert_eq!(log.image.authorizer_choice(), None);
    log.ok(&Command::SetAuthorizer { name: None });
    assert_eq!(log.image.authorizer_choice(), Some(None));
    let name = Some("authorizer_acl".to_string());
    log.ok(&Command::SetAuthorizer { name });
    assert_eq!(log.image.authorizer_choice(), Some(Some("authorizer_acl")));
    // An image written before the flag existed reads as never chosen.
    let mut text: serde_json::Value = serde_json::to_value(&log.image).unwrap();
    text.as_object_mut().unwrap().remove("authorizer_chosen");
    let old: MetadataImage = serde_json::from_value(text).unwrap();
    assert_eq!(old.authorizer_choice(), None);
}
