//! Leader and ISR changes when a broker leaves or returns: Kafka's
//! PartitionChangeBuilder rules (without KIP-966's eligible leader
//! replicas).
//!
//! - A broker leaving (fenced, shutting down, unregistered) leaves every
//!   ISR it is in, unless it is the last member: the last in-sync replica
//!   stays recorded, so that it, and only it, can lead again without data
//!   loss when it returns.
//! - A partition whose leader left elects the first replica, in replica
//!   order, that is in the new ISR and may lead (active: unfenced and not
//!   shutting down). With none, the partition goes offline (leader -1),
//!   unless unclean election is enabled for the topic: then the first
//!   active replica leads, alone in the ISR and RECOVERING (KIP-704), and
//!   whatever the old ISR had that it lacks is lost, as the operator chose.
//! - A broker returning (unfenced) may lead the offline partitions whose
//!   ISR holds it (or, unclean, any it is a replica of).
//! - An offline partition is looked at again periodically (Kafka's
//!   controller does the same for unclean elections), so that enabling
//!   `unclean.leader.election.enable` on its topic brings it back.
//! - ElectLeaders (KIP-460): PREFERRED moves leadership to the first
//!   replica when it is active and in the ISR; UNCLEAN elects a leader of
//!   an offline partition as if unclean election were enabled.
//!
//! Every change names a leader only when it changes (naming one bumps the
//! leader epoch), and is decided on the partition epoch it read.

use crate::cluster::command::{LeaderRecoveryState, PartitionChangeRecord, Refusal, NO_LEADER};
use crate::cluster::image::{MetadataImage, PartitionRegistration, TopicImage};
use crate::error_code::ErrorCode;

/// The change to `partition` when `leaving` leaves it (None: none needed).
pub fn without_broker(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    leaving: i32,
    unclean: bool,
) -> Option<PartitionChangeRecord> {
    let acceptable = |id: i32| id != leaving && image.cluster().is_active(id);
    let mut isr: Vec<i32> = partition
        .isr
        .iter()
        .copied()
        .filter(|id| *id != leaving)
        .collect();
    if isr.is_empty() {
        isr.clone_from(&partition.isr);
    }
    let leader_stays = partition.has_leader() && acceptable(partition.leader);
    change(
        topic,
        index,
        partition,
        isr,
        leader_stays,
        &acceptable,
        unclean,
    )
}

/// The change to an offline `partition` now that `returning` is active
/// again (None: it still cannot lead, or the partition has a leader).
pub fn with_returning_broker(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    returning: i32,
    unclean: bool,
) -> Option<PartitionChangeRecord> {
    if partition.has_leader() {
        return None;
    }
    let acceptable = |id: i32| id == returning || image.cluster().is_active(id);
    let isr = partition.isr.clone();
    change(topic, index, partition, isr, false, &acceptable, unclean)
}

/// The elections of every offline partition that can have a leader now:
/// a clean one where an ISR member is active, else an unclean one where
/// the topic allows it.
pub fn offline_partitions(
    image: &MetadataImage,
    unclean_default: bool,
) -> Vec<PartitionChangeRecord> {
    let active = |id: i32| image.cluster().is_active(id);
    let mut changes = Vec::new();
    for topic in image.topics().iter() {
        let unclean = image.unclean_election_enabled(&topic.name, unclean_default);
        for (index, partition) in &topic.partitions {
            if partition.has_leader() {
                continue;
            }
            let isr = partition.isr.clone();
            changes.extend(change(
                topic, *index, partition, isr, false, &active, unclean,
            ));
        }
    }
    changes
}

/// Kafka's election types (ElectLeadersRequest's `election_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

/// ElectLeaders for one partition (Kafka's
/// `ReplicationControlManager.electLeader`): the change, or
/// ELECTION_NOT_NEEDED (the preferred replica leads already; for
/// UNCLEAN, the partition has a leader), PREFERRED_LEADER_NOT_AVAILABLE
/// (the first replica is not an active ISR member) or
/// ELIGIBLE_LEADERS_NOT_AVAILABLE (no active replica at all).
pub fn elect(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    election: ElectionType,
) -> Result<PartitionChangeRecord, Refusal> {
    let name = format!("{}-{index}", topic.name);
    let active = |id: i32| image.cluster().is_active(id);
    match election {
        ElectionType::Preferred => {
            let preferred = partition.replicas.first().copied().unwrap_or(NO_LEADER);
            if partition.leader == preferred {
                return Err(Refusal::new(
                    ErrorCode::ElectionNotNeeded,
                    format!("The preferred replica {preferred} already leads {name}."),
                ));
            }
            if !partition.isr.contains(&preferred) || !active(preferred) {
                return Err(Refusal::new(
                    ErrorCode::PreferredLeaderNotAvailable,
                    format!(
                        "The preferred replica {preferred} of {name} is not an active in-sync \
                         replica."
                    ),
                ));
            }
            let mut record = PartitionChangeRecord::new(topic.id, index, partition.partition_epoch);
            record.leader = Some(preferred);
            Ok(record)
        }
        ElectionType::Unclean => {
            if partition.has_leader() {
                return Err(Refusal::new(
                    ErrorCode::ElectionNotNeeded,
                    format!("{name} has a leader ({}).", partition.leader),
                ));
            }
            let isr = partition.isr.clone();
            change(topic, index, partition, isr, false, &active, true).ok_or_else(|| {
                Refusal::new(
                    ErrorCode::EligibleLeadersNotAvailable,
                    format!("No replica of {name} is active."),
                )
            })
        }
    }
}

/// The record turning `partition` into one with `isr` and, unless the
/// leader stays, an elected leader; None when nothing would change.
fn change(
    topic: &TopicImage,
    index: i32,
    partition: &PartitionRegistration,
    mut isr: Vec<i32>,
    leader_stays: bool,
    acceptable: &dyn Fn(i32) -> bool,
    unclean: bool,
) -> Option<PartitionChangeRecord> {
    let mut record = PartitionChangeRecord::new(topic.id, index, partition.partition_epoch);
    if !leader_stays {
        let clean = partition
            .replicas
            .iter()
            .copied()
            .find(|id| isr.contains(id) && acceptable(*id));
        let leader = match clean {
            Some(leader) => leader,
            None => match partition
                .replicas
                .iter()
                .copied()
                .find(|id| acceptable(*id))
            {
                Some(leader) if unclean => {
                    isr = vec![leader];
                    record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
                    leader
                }
                _ => NO_LEADER,
            },
        };
        if leader != partition.leader {
            record.leader = Some(leader);
        }
    }
    if isr != partition.isr {
        record.isr = Some(isr);
    }
    let changed = record.leader.is_some() || record.isr.is_some();
    changed.then_some(record)
}
