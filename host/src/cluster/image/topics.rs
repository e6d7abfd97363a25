//! Topics and their partitions (Kafka's TopicsImage): for each partition
//! its replicas, ISR, leader and the two epochs replication is fenced by.
//!
//! - The **leader epoch** grows whenever a leader is named; followers and
//!   clients use it to detect a stale leader (FENCED_LEADER_EPOCH) and to
//!   truncate a diverging log (KIP-101).
//! - The **partition epoch** grows with every change; AlterPartition and
//!   every change proposed against an image name the one they saw, so a
//!   change decided on an old state is refused (INVALID_UPDATE_VERSION).
//!
//! Topics are looked up by name and by id (Fetch and DescribeTopicPartitions
//! name ids); the id index is rebuilt on load rather than serialized.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::ClusterImage;
use crate::cluster::command::{
    Applied, LeaderRecoveryState, NewTopicRecord, PartitionChangeRecord, PartitionRecord, Refusal,
    Response, Uuid, NO_LEADER,
};
use crate::error_code::ErrorCode;

/// Kafka's PartitionRegistration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRegistration {
    /// In preference order: the first is the preferred leader.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Reassignment in progress (KIP-455): replicas on their way out / in.
    #[serde(default)]
    pub removing_replicas: Vec<i32>,
    #[serde(default)]
    pub adding_replicas: Vec<i32>,
    /// [`NO_LEADER`] when offline.
    pub leader: i32,
    #[serde(default)]
    pub leader_recovery_state: LeaderRecoveryState,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

impl PartitionRegistration {
    fn new(record: &PartitionRecord) -> Self {
        Self {
            replicas: record.replicas.clone(),
            isr: record.isr.clone(),
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: record.leader,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            leader_epoch: 0,
            partition_epoch: 0,
        }
    }

    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }

    /// Kafka's `PartitionRegistration.merge`.
    fn merged(&self, change: &PartitionChangeRecord) -> Self {
        let mut next = self.clone();
        if let Some(replicas) = &change.replicas {
            next.replicas.clone_from(replicas);
        }
        if let Some(isr) = &change.isr {
            next.isr.clone_from(isr);
        }
        if let Some(adding) = &change.adding_replicas {
            next.adding_replicas.clone_from(adding);
        }
        if let Some(removing) = &change.removing_replicas {
            next.removing_replicas.clone_from(removing);
        }
        if let Some(leader) = change.leader {
            next.leader = leader;
            next.leader_epoch = self.leader_epoch.saturating_add(1);
        }
        if let Some(state) = change.leader_recovery_state {
            next.leader_recovery_state = state;
        }
        next.partition_epoch = self.partition_epoch.saturating_add(1);
        next
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionRegistration>,
}

impl TopicImage {
    pub fn partition(&self, partition: i32) -> Option<&PartitionRegistration> {
        self.partitions.get(&partition)
    }

    /// Partitions are 0..count (they only ever grow).
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }

    /// The replication factor (of partition 0, as Kafka takes it).
    pub fn replication_factor(&self) -> usize {
        self.partitions
            .values()
            .next()
            .map_or(0, |p| p.replicas.len())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<TopicImage>", into = "Vec<TopicImage>")]
pub struct TopicsImage {
    by_name: BTreeMap<String, TopicImage>,
    by_id: BTreeMap<Uuid, String>,
}

impl From<Vec<TopicImage>> for TopicsImage {
    fn from(topics: Vec<TopicImage>) -> Self {
        let mut image = Self::default();
        for topic in topics {
            image.by_id.insert(topic.id, topic.name.clone());
            image.by_name.insert(topic.name.clone(), topic);
        }
        image
    }
}

impl From<TopicsImage> for Vec<TopicImage> {
    fn from(image: TopicsImage) -> Self {
        image.by_name.into_values().collect()
    }
}

impl TopicsImage {
    pub fn get(&self, name: &str) -> Option<&TopicImage> {
        self.by_name.get(name)
    }

    pub fn by_id(&self, id: Uuid) -> Option<&TopicImage> {
        self.by_name.get(self.by_id.get(&id)?)
    }

    /// Every topic, by name.
    pub fn iter(&self) -> impl Iterator<Item = &TopicImage> {
        self.by_name.values()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// A topic's name that `name` collides with once '.' and '_' are
    /// treated alike (Kafka refuses it: the two share metric names).
    pub fn colliding(&self, name: &str) -> Option<&str> {
        let folded = name.replace('.', "_");
        self.by_name
            .keys()
            .find(|existing| existing.replace('.', "_") == folded)
            .map(String::as_str)
    }

    fn by_id_mut(&mut self, id: Uuid) -> Result<&mut TopicImage, Refusal> {
        let name = self.by_id.get(&id).ok_or_else(|| unknown_topic_id(id))?;
        self.by_name
            .get_mut(name)
            .ok_or_else(|| unknown_topic_id(id))
    }

    /// TopicRecord + PartitionRecords: refused if the name or id is taken
    /// or a replica is not a registered broker (unregistered since the
    /// placement was decided).
    pub(super) fn create(&mut self, record: &NewTopicRecord, cluster: &ClusterImage) -> Response {
        if self.by_name.contains_key(&record.name) {
            return Err(Refusal::new(
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{}' already exists.", record.name),
            ));
        }
        if let Some(existing) = self.colliding(&record.name) {
            return Err(Refusal::new(
                ErrorCode::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {existing}",
                    record.name
                ),
            ));
        }
        if let Some(holder) = self.by_id.get(&record.id) {
            return Err(Refusal::new(
                ErrorCode::TopicAlreadyExists,
                format!(
                    "Topic id {} is already used by topic '{holder}'.",
                    record.id
                ),
            ));
        }
        if record.partitions.is_empty() {
            return Err(Refusal::new(
                ErrorCode::InvalidPartitions,
                "A topic needs at least one partition.",
            ));
        }
        check_new_partitions(&record.partitions, 0, cluster)?;
        let topic = TopicImage {
            name: record.name.clone(),
            id: record.id,
            partitions: record
                .partitions
                .iter()
                .map(|p| (p.partition, PartitionRegistration::new(p)))
                .collect(),
        };
        self.by_id.insert(topic.id, topic.name.clone());
        self.by_name.insert(topic.name.clone(), topic);
        Ok(Applied::Done)
    }

    /// PartitionRecords for new partitions of an existing topic.
    pub(super) fn create_partitions(
        &mut self,
        topic_id: Uuid,
        partitions: &[PartitionRecord],
        cluster: &ClusterImage,
    ) -> Response {
        let topic = self.by_id_mut(topic_id)?;
        check_new_partitions(partitions, topic.partition_count(), cluster)?;
        for record in partitions {
            topic
                .partitions
                .insert(record.partition, PartitionRegistration::new(record));
        }
        Ok(Applied::Done)
    }

    /// PartitionChangeRecord, if decided on the partition's current epoch
    /// and consistent: the leader one of the replicas, the ISR a subset of
    /// them, and a newly named leader or ISR member a broker that may be
    /// one now (else INELIGIBLE_REPLICA: it was fenced since).
    pub(super) fn change(
        &mut self,
        change: &PartitionChangeRecord,
        cluster: &ClusterImage,
    ) -> Response {
        let topic = self.by_id_mut(change.topic_id)?;
        let name = topic.name.clone();
        let Some(current) = topic.partitions.get_mut(&change.partition) else {
            return Err(Refusal::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("Partition {name}-{} does not exist.", change.partition),
            ));
        };
        if current.partition_epoch != change.expected_partition_epoch {
            return Err(Refusal::new(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "Partition {name}-{} is at partition epoch {}, the change was decided at {}.",
                    change.partition, current.partition_epoch, change.expected_partition_epoch
                ),
            ));
        }
        let next = current.merged(change);
        let invalid = |message: String| Err(Refusal::new(ErrorCode::InvalidRequest, message));
        if next.has_leader() && !next.replicas.contains(&next.leader) {
            return invalid(format!("The leader {} is not a replica.", next.leader));
        }
        if let Some(stray) = next.isr.iter().find(|id| !next.replicas.contains(id)) {
            return invalid(format!("The ISR member {stray} is not a replica."));
        }
        let new_leader = next.leader != current.leader && next.has_leader();
        if new_leader && !cluster.is_active(next.leader) {
            return Err(ineligible(next.leader));
        }
        if let Some(added) = next
            .isr
            .iter()
            .find(|id| !current.isr.contains(id) && !cluster.is_active(**id))
        {
            return Err(ineligible(*added));
        }
        *current = next;
        Ok(Applied::Done)
    }

    /// RemoveTopicRecord; the removed topic's name.
    pub(super) fn delete(&mut self, topic_id: Uuid) -> Result<String, Refusal> {
        let name = self
            .by_id
            .remove(&topic_id)
            .ok_or_else(|| unknown_topic_id(topic_id))?;
        self.by_name.remove(&name);
        Ok(name)
    }
}

/// New partitions numbered from `first` on, each with registered replicas
/// (INVALID_REPLICA_ASSIGNMENT otherwise), the leader among them.
fn check_new_partitions(
    partitions: &[PartitionRecord],
    first: i32,
    cluster: &ClusterImage,
) -> Result<(), Refusal> {
    for (offset, record) in partitions.iter().enumerate() {
        let expected = i32::try_from(offset)
            .ok()
            .and_then(|offset| first.checked_add(offset));
        if expected != Some(record.partition) {
            return Err(Refusal::new(
                ErrorCode::InvalidPartitions,
                format!(
                    "New partitions must follow the existing {first}; got partition {} at \
                     position {offset}.",
                    record.partition
                ),
            ));
        }
        if record.replicas.is_empty() {
            return Err(Refusal::new(
                ErrorCode::InvalidReplicaAssignment,
                format!("Partition {} has no replicas.", record.partition),
            ));
        }
        if let Some(id) = record
            .replicas
            .iter()
            .find(|id| cluster.broker(**id).is_none())
        {
            return Err(Refusal::new(
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "The partition assignment includes broker {id}, but no such broker is \
                     registered."
                ),
            ));
        }
        let leader_ok = record.leader == NO_LEADER || record.isr.contains(&record.leader);
        if !leader_ok || record.isr.iter().any(|id| !record.replicas.contains(id)) {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!(
                    "Partition {}: the leader must be in the ISR and the ISR among the replicas.",
                    record.partition
                ),
            ));
        }
    }
    Ok(())
}

fn unknown_topic_id(id: Uuid) -> Refusal {
    Refusal::new(
        ErrorCode::UnknownTopicId,
        format!("No topic with id {id} exists."),
    )
}

fn ineligible(id: i32) -> Refusal {
    Refusal::new(
        ErrorCode::IneligibleReplica,
        format!("Broker {id} is fenced, shutting down or not registered."),
    )
}
