//! Topic decisions (Kafka's ReplicationControlManager): where new
//! partitions go, and whether a leader's AlterPartition is accepted.
//!
//! The request shapes are checked by the handler plugin and the values by
//! the proposer (topic name, configs, `-1` resolved to the broker's
//! defaults, Kafka's per-request caps); what needs the cluster is here:
//! existence, the live brokers, the epochs.

use std::collections::BTreeMap;

use super::reassignment;
use crate::cluster::command::{
    Command, LeaderRecoveryState, NewTopicRecord, PartitionChangeRecord, PartitionRecord, Refusal,
    Uuid, NO_LEADER,
};
use crate::cluster::image::{MetadataImage, TopicImage};
use crate::cluster::placement::{self, Seed};
use crate::error_code::ErrorCode;

/// A CreateTopics entry as the proposer resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRequest {
    pub name: String,
    /// A fresh topic id (the proposer's random UUID).
    pub id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
    /// Replicas per partition 0, 1, ... (CreateTopics' `assignments`, in
    /// partition order); then `num_partitions` and `replication_factor`
    /// are ignored.
    pub assignment: Option<Vec<Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

/// CreateTopics: TOPIC_ALREADY_EXISTS, a name colliding once '.' and '_'
/// are alike (INVALID_TOPIC_EXCEPTION), else the placed topic. Replicas
/// spread over the active brokers ([`placement::assign`]) or follow the
/// explicit assignment; the ISR is the active replicas and the leader the
/// first of them.
pub fn create_topic(
    image: &MetadataImage,
    request: &TopicRequest,
    seed: Seed,
) -> Result<Command, Refusal> {
    let name = &request.name;
    if image.topic(name).is_some() {
        return Err(Refusal::new(
            ErrorCode::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(existing) = image.topics().colliding(name) {
        return Err(Refusal::new(
            ErrorCode::InvalidTopicException,
            format!("Topic '{name}' collides with existing topic: {existing}"),
        ));
    }
    let assignment = match &request.assignment {
        Some(assignment) => assignment.clone(),
        None => placement::assign(
            &image.cluster().active_ids(),
            request.num_partitions,
            0,
            request.replication_factor,
            seed,
        )?,
    };
    let partitions = if request.assignment.is_some() {
        manual_partitions(image, &assignment, 0, None)?
    } else {
        placed_partitions(assignment, 0)
    };
    Ok(Command::CreateTopic(NewTopicRecord {
        name: name.clone(),
        id: request.id,
        partitions,
        configs: request.configs.clone(),
    }))
}

/// CreatePartitions: grows `name` to `total` partitions with the topic's
/// replication factor, placed like new topics or as `assignment` says
/// (one entry per new partition). Kafka's checks and messages.
pub fn create_partitions(
    image: &MetadataImage,
    name: &str,
    total: i32,
    assignment: Option<&[Vec<i32>]>,
    seed: Seed,
) -> Result<Command, Refusal> {
    let Some(topic) = image.topic(name) else {
        return Err(Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            format!("The topic '{name}' does not exist."),
        ));
    };
    let current = topic.partition_count();
    let invalid = |message: String| Err(Refusal::new(ErrorCode::InvalidPartitions, message));
    if total == current {
        return invalid(format!("Topic already has {current} partition(s)."));
    }
    if total < current {
        return invalid(format!(
            "The topic {name} currently has {current} partition(s); {total} would not be an \
             increase."
        ));
    }
    let additional = total - current;
    let factor = topic.replication_factor();
    let partitions = match assignment {
        Some(assignment) => {
            let given = assignment.len();
            if i32::try_from(given).ok() != Some(additional) {
                return Err(Refusal::new(
                    ErrorCode::InvalidReplicaAssignment,
                    format!(
                        "Attempted to add {additional} additional partition(s), but only {given} \
                         assignment(s) were specified."
                    ),
                ));
            }
            manual_partitions(image, assignment, current, Some(factor))?
        }
        None => {
            let factor = i16::try_from(factor).unwrap_or(i16::MAX);
            let brokers = image.cluster().active_ids();
            let placed = placement::assign(&brokers, additional, current, factor, seed)?;
            placed_partitions(placed, current)
        }
    };
    Ok(Command::CreatePartitions {
        topic_id: topic.id,
        partitions,
    })
}

/// DeleteTopics: the topic's RemoveTopicRecord.
pub fn delete_topic(image: &MetadataImage, name: &str) -> Result<Command, Refusal> {
    let topic = image.topic(name).ok_or_else(|| {
        Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            "This server does not host this topic-partition.",
        )
    })?;
    Ok(Command::DeleteTopic { topic_id: topic.id })
}

/// Automatically placed partitions: every replica active, the first leads.
fn placed_partitions(assignment: Vec<Vec<i32>>, first: i32) -> Vec<PartitionRecord> {
    (first..)
        .zip(assignment)
        .map(|(partition, replicas)| PartitionRecord {
            partition,
            leader: replicas.first().copied().unwrap_or(NO_LEADER),
            isr: replicas.clone(),
            replicas,
        })
        .collect()
}

/// Explicitly assigned partitions, checked with Kafka's rules: the ISR
/// is the active replicas (none active: INVALID_REPLICA_ASSIGNMENT), the
/// first of them leads.
fn manual_partitions(
    image: &MetadataImage,
    assignment: &[Vec<i32>],
    first: i32,
    factor: Option<usize>,
) -> Result<Vec<PartitionRecord>, Refusal> {
    placement::validate_assignment(assignment, factor, |id| {
        image.cluster().broker(id).is_some()
    })?;
    let mut partitions = Vec::with_capacity(assignment.len());
    for (partition, replicas) in (first..).zip(assignment) {
        let isr: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|id| image.cluster().is_active(*id))
            .collect();
        let Some(&leader) = isr.first() else {
            return Err(Refusal::new(
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "All brokers specified in the manual partition assignment for partition \
                     {partition} are fenced or in controlled shutdown."
                ),
            ));
        };
        partitions.push(PartitionRecord {
            partition,
            replicas: replicas.clone(),
            isr,
            leader,
        });
    }
    Ok(partitions)
}

/// One partition of an AlterPartition request (Kafka's
/// AlterPartitionRequest, v2+: by topic id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
    pub leader_recovery_state: LeaderRecoveryState,
}

/// AlterPartition from a partition's leader, validated as Kafka's
/// `ReplicationControlManager.alterPartition` does: a stale broker epoch
/// (STALE_BROKER_EPOCH), an unknown partition (UNKNOWN_TOPIC_ID,
/// UNKNOWN_TOPIC_OR_PARTITION), an old leader epoch (FENCED_LEADER_EPOCH),
/// a sender that is not the leader (INVALID_REQUEST), a partition that
/// changed since (INVALID_UPDATE_VERSION), an ISR member that may not be
/// one (INELIGIBLE_REPLICA), an ISR without the leader or a recovery state
/// going backwards (INVALID_REQUEST). Ok(None) when nothing changes (the
/// answer is the current state). With a reassignment in progress, an ISR
/// holding every target replica completes it ([`reassignment`]).
pub fn alter_partition(
    image: &MetadataImage,
    request: &AlterPartitionRequest,
) -> Result<Option<Command>, Refusal> {
    image
        .cluster()
        .current(request.broker_id, request.broker_epoch)?;
    let topic: &TopicImage = image.topic_by_id(request.topic_id).ok_or_else(|| {
        Refusal::new(
            ErrorCode::UnknownTopicId,
            format!("No topic with id {} exists.", request.topic_id),
        )
    })?;
    let Some(partition) = topic.partition(request.partition) else {
        return Err(Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            format!(
                "Partition {}-{} does not exist.",
                topic.name, request.partition
            ),
        ));
    };
    let invalid = |message: String| Err(Refusal::new(ErrorCode::InvalidRequest, message));
    current_epoch(
        ErrorCode::FencedLeaderEpoch,
        "leader epoch",
        (request.leader_epoch, partition.leader_epoch),
    )?;
    if request.broker_id != partition.leader {
        return invalid(format!(
            "Broker {} is not the leader of {}-{} (the leader is {}).",
            request.broker_id, topic.name, request.partition, partition.leader
        ));
    }
    current_epoch(
        ErrorCode::InvalidUpdateVersion,
        "partition epoch",
        (request.partition_epoch, partition.partition_epoch),
    )?;
    if let Some(id) = request
        .new_isr
        .iter()
        .find(|id| !partition.replicas.contains(id) || !image.cluster().is_active(**id))
    {
        return Err(Refusal::new(
            ErrorCode::IneligibleReplica,
            format!(
                "Broker {id} is not an active replica of {}-{}.",
                topic.name, request.partition
            ),
        ));
    }
    if !request.new_isr.contains(&partition.leader) {
        return invalid("The new ISR must include the current leader.".to_string());
    }
    let recovering = LeaderRecoveryState::Recovering;
    let state = request.leader_recovery_state;
    if state == recovering && partition.leader_recovery_state != recovering {
        return invalid("A recovered partition cannot go back to RECOVERING.".to_string());
    }
    if state == recovering && request.new_isr.len() > 1 {
        return invalid("A RECOVERING leader must be alone in the ISR.".to_string());
    }
    let mut change = if reassignment::in_progress(partition) {
        // The ISR may complete the reassignment (and move the leader).
        reassignment::with_new_isr(image, topic, request.partition, partition, &request.new_isr)
            .unwrap_or_else(|| {
                PartitionChangeRecord::new(topic.id, request.partition, partition.partition_epoch)
            })
    } else {
        let mut change =
            PartitionChangeRecord::new(topic.id, request.partition, partition.partition_epoch);
        if request.new_isr != partition.isr {
            change.isr = Some(request.new_isr.clone());
        }
        change
    };
    if state != partition.leader_recovery_state {
        change.leader_recovery_state = Some(state);
    }
    let changed = change.isr.is_some()
        || change.leader_recovery_state.is_some()
        || change.leader.is_some()
        || change.replicas.is_some();
    Ok(changed.then_some(Command::ChangePartition(change)))
}

/// Refuses with `code` when the epoch the request read (`read`) is not the
/// `current` one: the request decided on a state that has moved on.
fn current_epoch(code: ErrorCode, what: &str, (read, current): (i32, i32)) -> Result<(), Refusal> {
    if read == current {
        return Ok(());
    }
    Err(Refusal::new(
        code,
        format!("The {what} {read} is not the current {current}."),
    ))
}
