//! Partition reassignment (KIP-455): the controller's decisions of Kafka's
//! `ReplicationControlManager.alterPartitionReassignments`, with its
//! `PartitionReassignmentReplicas`, `PartitionReassignmentRevert` and the
//! reassignment half of `PartitionChangeBuilder`.
//!
//! A reassignment moves a partition from its current replicas to a target
//! list in stages, each a PartitionChangeRecord in the metadata log:
//! 1. **Start**: the replicas become the target followed by the replicas
//!    leaving (`removing`); the new ones are `adding`. Every replica of
//!    that union is a follower, so the new brokers create their logs
//!    (the reconciler) and catch up from the leader (replication).
//! 2. **Completion**, when the ISR, less the replicas leaving, holds
//!    every target replica: the leader's AlterPartition that adds the
//!    last new replica to the ISR completes it (or the start itself, when
//!    the ISR already does: a reorder, or a smaller replica set). The
//!    replicas become the target, the leaving ones leave the ISR, adding
//!    and removing are cleared, and a leader that is leaving hands over to
//!    the first target replica that is an active ISR member (a new leader
//!    epoch; a shrinking replica set bumps it even when the leader stays,
//!    as Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`).
//!    The brokers no longer replicas then delete their logs.
//! 3. **Cancel** (null target) before completion reverts to the original
//!    replicas: the union less `adding`, the ISR less `adding`. An ISR
//!    left empty needs an unclean election (the topic's
//!    `unclean.leader.election.enable`), else INVALID_REPLICA_ASSIGNMENT.
//!    Nothing in progress is NO_REASSIGNMENT_IN_PROGRESS.
//!
//! A new target while one is in progress is decided against the union, as
//! Kafka does. These are pure functions over the image; the proposer
//! records their outcome, guarded by the partition epoch it read.

use std::collections::BTreeSet;

use crate::cluster::command::{LeaderRecoveryState, PartitionChangeRecord, Refusal, NO_LEADER};
use crate::cluster::image::{MetadataImage, PartitionRegistration, TopicImage};
use crate::error_code::ErrorCode;

/// One reassignment in progress (ListPartitionReassignments' entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ongoing {
    pub topic: String,
    pub partition: i32,
    /// Target and leaving replicas together.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// Whether a reassignment of `partition` is in progress.
pub fn in_progress(partition: &PartitionRegistration) -> bool {
    !partition.adding_replicas.is_empty() || !partition.removing_replicas.is_empty()
}

/// The replicas a partition had before its reassignment (all of them
/// when none is in progress).
pub fn original_replicas(partition: &PartitionRegistration) -> Vec<i32> {
    without(&partition.replicas, &partition.adding_replicas)
}

/// What a partition should become: Kafka's builder targets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    replicas: Vec<i32>,
    isr: Vec<i32>,
    adding: Vec<i32>,
    removing: Vec<i32>,
}

impl Target {
    /// The partition as it stands.
    fn of(partition: &PartitionRegistration) -> Self {
        Self {
            replicas: partition.replicas.clone(),
            isr: partition.isr.clone(),
            adding: partition.adding_replicas.clone(),
            removing: partition.removing_replicas.clone(),
        }
    }

    /// Kafka's `maybeCompleteReassignment`: done when the ISR less the
    /// leaving replicas is not empty and holds every remaining replica.
    fn completed(self) -> Self {
        if self.adding.is_empty() && self.removing.is_empty() {
            return self;
        }
        let isr = without(&self.isr, &self.removing);
        let replicas = without(&self.replicas, &self.removing);
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|id| isr.contains(id)) {
            return self;
        }
        Self {
            replicas,
            isr,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }
}

fn without(list: &[i32], gone: &[i32]) -> Vec<i32> {
    list.iter()
        .copied()
        .filter(|id| !gone.contains(id))
        .collect()
}

fn invalid_assignment(message: String) -> Refusal {
    Refusal::new(ErrorCode::InvalidReplicaAssignment, message)
}

/// The controller's `validateManualPartitionAssignment`: a non-empty list
/// of registered brokers, none twice.
pub fn validate_target(image: &MetadataImage, target: &[i32]) -> Result<(), Refusal> {
    if target.is_empty() {
        return Err(invalid_assignment(
            "The manual partition assignment includes an empty replica list.".to_string(),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    for id in sorted {
        if image.cluster().broker(id).is_none() {
            return Err(invalid_assignment(format!(
                "The manual partition assignment includes broker {id}, but no such broker is \
                 registered."
            )));
        }
        if !seen.insert(id) {
            return Err(invalid_assignment(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
    }
    Ok(())
}

/// The partition a request names, or UNKNOWN_TOPIC_OR_PARTITION with
/// Kafka's messages.
pub fn find<'a>(
    image: &'a MetadataImage,
    topic: &str,
    index: i32,
) -> Result<(&'a TopicImage, &'a PartitionRegistration), Refusal> {
    let unknown = |message: String| Refusal::new(ErrorCode::UnknownTopicOrPartition, message);
    let Some(topic_image) = image.topic(topic) else {
        return Err(unknown(format!("Unable to find a topic named {topic}.")));
    };
    let Some(partition) = topic_image.partition(index) else {
        return Err(unknown(format!(
            "Unable to find partition {topic}:{index}."
        )));
    };
    Ok((topic_image, partition))
}

/// Kafka's `changePartitionReassignment`: the change starting the move of
/// `partition` to `target` (completing it at once when the ISR allows);
/// None when the partition is already there.
pub fn reassign(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    target: &[i32],
) -> Result<Option<PartitionChangeRecord>, Refusal> {
    validate_target(image, target)?;
    let current = &partition.replicas;
    let removing: Vec<i32> = current
        .iter()
        .copied()
        .filter(|id| !target.contains(id))
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .collect();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|id| !current.contains(id))
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    let wanted = Target {
        replicas,
        isr: partition.isr.clone(),
        adding,
        removing,
    };
    Ok(build(image, topic, index, partition, wanted, false))
}

/// Kafka's `cancelPartitionReassignment`: the change reverting `partition`
/// to its original replicas. `unclean`: the topic allows an unclean
/// election, which a revert whose ISR would be empty needs.
pub fn cancel(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    unclean: bool,
) -> Result<Option<PartitionChangeRecord>, Refusal> {
    if !in_progress(partition) {
        return Err(Refusal::new(
            ErrorCode::NoReassignmentInProgress,
            "No partition reassignment is in progress for this topic or partition.",
        ));
    }
    let replicas = original_replicas(partition);
    let mut isr = without(&partition.isr, &partition.adding_replicas);
    if isr.is_empty() {
        let Some(first) = replicas.first().copied() else {
            return Err(invalid_assignment(
                "Invalid replica assignment: addingReplicas contains all replicas.".to_string(),
            ));
        };
        if !unclean {
            return Err(invalid_assignment(format!(
                "Unable to revert partition assignment for {}:{index} because it would require \
                 an unclean leader election.",
                topic.name
            )));
        }
        isr = vec![first];
    }
    let wanted = Target {
        replicas,
        isr,
        adding: Vec::new(),
        removing: Vec::new(),
    };
    Ok(build(image, topic, index, partition, wanted, unclean))
}

/// The reassignment half of an AlterPartition from the leader (Kafka's
/// builder with the request's ISR as target): the ISR change, and the
/// completion of the reassignment in progress when the new ISR allows it.
/// None when nothing changes.
pub fn with_new_isr(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    new_isr: &[i32],
) -> Option<PartitionChangeRecord> {
    let wanted = Target {
        isr: new_isr.to_vec(),
        ..Target::of(partition)
    };
    build(image, topic, index, partition, wanted, false)
}

/// Kafka's `PartitionChangeBuilder.build` for a reassignment: complete it
/// if the ISR allows, elect a leader if the current one is no longer an
/// active ISR member (an online election, or an unclean one), bump the
/// leader epoch when replicas leave, and record what differs.
fn build(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    wanted: Target,
    unclean: bool,
) -> Option<PartitionChangeRecord> {
    let mut wanted = wanted.completed();
    let mut record = PartitionChangeRecord::new(topic.id, index, partition.partition_epoch);
    let active = |id: i32| image.cluster().is_active(id);
    let valid = |id: i32, isr: &[i32]| isr.contains(&id) && active(id);
    let leader = if partition.has_leader() && valid(partition.leader, &wanted.isr) {
        partition.leader
    } else if let Some(clean) = wanted
        .replicas
        .iter()
        .copied()
        .find(|id| valid(*id, &wanted.isr))
    {
        clean
    } else if let Some(chosen) = wanted.replicas.iter().copied().find(|id| active(*id)) {
        if unclean {
            wanted.isr = vec![chosen];
            if partition.leader_recovery_state != LeaderRecoveryState::Recovering {
                record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            }
            chosen
        } else {
            NO_LEADER
        }
    } else {
        NO_LEADER
    };
    if leader != partition.leader {
        record.leader = Some(leader);
    } else if !partition
        .replicas
        .iter()
        .all(|id| wanted.replicas.contains(id))
    {
        // Replicas leave: a new leader epoch fences them.
        record.leader = Some(partition.leader);
    }
    if wanted.isr != partition.isr {
        record.isr = Some(wanted.isr);
    }
    if wanted.replicas != partition.replicas {
        record.replicas = Some(wanted.replicas);
    }
    if wanted.adding != partition.adding_replicas {
        record.adding_replicas = Some(wanted.adding);
    }
    if wanted.removing != partition.removing_replicas {
        record.removing_replicas = Some(wanted.removing);
    }
    let changed = record.leader.is_some()
        || record.isr.is_some()
        || record.replicas.is_some()
        || record.adding_replicas.is_some()
        || record.removing_replicas.is_some()
        || record.leader_recovery_state.is_some();
    changed.then_some(record)
}

/// Kafka's `listPartitionReassignments`: the reassignments in progress of
/// every topic (`requested` None) or of the named partitions of the named
/// topics (unknown ones skipped), by topic name and partition.
pub fn ongoing(image: &MetadataImage, requested: Option<&[(String, Vec<i32>)]>) -> Vec<Ongoing> {
    let entry = |topic: &TopicImage, index: i32| {
        let partition = topic.partition(index).filter(|p| in_progress(p))?;
        Some(Ongoing {
            topic: topic.name.clone(),
            partition: index,
            replicas: partition.replicas.clone(),
            adding: partition.adding_replicas.clone(),
            removing: partition.removing_replicas.clone(),
        })
    };
    match requested {
        None => image
            .topics()
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .keys()
                    .filter_map(move |index| entry(topic, *index))
            })
            .collect(),
        Some(requested) => requested
            .iter()
            .filter_map(|(name, indexes)| Some((image.topic(name)?, indexes)))
            .flat_map(|(topic, indexes)| indexes.iter().filter_map(move |i| entry(topic, *i)))
            .collect(),
    }
}

#[cfg(test)]
mod tests;
