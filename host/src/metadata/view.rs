//! The metadata seam: what the `metadata` import and the log path ask of
//! "the cluster", whichever answers it.
//!
//! A single node answers from its own stores ([`LocalMetadata`]: the
//! TopicManager, this broker as the only broker and controller, every
//! partition led here), exactly as before the cluster existed. A node of a
//! cluster answers from the replicated metadata image and proposes its
//! changes to the quorum (`cluster::broker_metadata`). The import code
//! does not know which: it holds a `dyn ClusterMetadata`.

use std::sync::{Arc, RwLock};

use crate::error_code::ErrorCode;
use crate::metadata::topics::{NewTopic, Topic, TopicError, TopicManager};

/// A broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<NodeView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline_replicas: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    pub name: String,
    pub id: u128,
    pub partitions: Vec<PartitionView>,
}

/// Topics, partitions and brokers as the cluster sees them, and the
/// topic changes that go through the controller.
pub trait ClusterMetadata: Send + Sync {
    /// The cluster as seen from `listener` (the request's listener).
    fn cluster(&self, listener: &str) -> ClusterView;
    fn topics(&self) -> Vec<TopicView>;
    fn topic(&self, name: &str) -> Option<TopicView>;
    fn topic_by_id(&self, id: u128) -> Option<TopicView>;
    /// CreateTopics; answered once the topic is visible here.
    fn create_topic(
        &self,
        request: &NewTopic,
        validate_only: bool,
    ) -> Result<TopicView, TopicError>;
    /// DeleteTopics; the deleted topic's id.
    fn delete_topic(&self, name: &str) -> Result<u128, TopicError>;
    fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<TopicView, TopicError>;
    /// ElectLeaders (preferred, or `unclean`) for `partitions`, or for
    /// every partition (then only those that needed one are answered).
    fn elect_leaders(&self, unclean: bool, partitions: Option<&[(String, i32)]>) -> Vec<Election>;
    /// AlterPartitionReassignments for one partition: move it to `target`
    /// (None: cancel the reassignment in progress).
    fn alter_partition_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
        allow_replication_factor_change: bool,
    ) -> Result<(), TopicError>;
    /// ListPartitionReassignments: those in progress, of every topic
    /// (`requested` None) or of the named partitions.
    fn list_partition_reassignments(
        &self,
        requested: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<OngoingReassignment>;
}

/// A partition reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    /// The target replicas, then those leaving.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// One partition's ElectLeaders outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    pub topic: String,
    pub partition: i32,
    pub result: Result<(), TopicError>,
}

/// Whether this broker leads a partition: the log path answers
/// NOT_LEADER_OR_FOLLOWER for the others. A single node has none (it
/// leads everything), so the log path checks nothing there.
pub trait Leadership: Send + Sync {
    fn leads(&self, topic: &str, partition: i32) -> bool;
}

/// A listener as clients should reach it (the bound port, not port 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedListener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The listeners this node advertises, set once they are bound.
#[derive(Debug, Default)]
pub struct Advertised(RwLock<Vec<AdvertisedListener>>);

impl Advertised {
    pub fn set(&self, listeners: Vec<AdvertisedListener>) {
        *crate::sync::write(&self.0) = listeners;
    }

    pub fn all(&self) -> Vec<AdvertisedListener> {
        crate::sync::read(&self.0).clone()
    }

    /// The address clients of `listener` should use (else the first).
    pub fn for_listener(&self, listener: &str) -> Option<AdvertisedListener> {
        let advertised = crate::sync::read(&self.0);
        advertised
            .iter()
            .find(|candidate| candidate.name == listener)
            .or_else(|| advertised.first())
            .cloned()
    }
}

/// The single-node broker: its own topics, itself as the one broker and
/// the controller, one replica per partition.
pub struct LocalMetadata {
    pub node_id: i32,
    pub cluster_id: String,
    pub topics: Arc<TopicManager>,
    pub advertised: Arc<Advertised>,
}

impl LocalMetadata {
    fn view(&self, topic: &Topic) -> TopicView {
        let node = self.node_id;
        TopicView {
            name: topic.name.clone(),
            id: topic.id,
            partitions: (0..topic.partitions)
                .map(|partition| PartitionView {
                    partition,
                    leader: node,
                    leader_epoch: 0,
                    replicas: vec![node],
                    isr: vec![node],
                    offline_replicas: Vec::new(),
                })
                .collect(),
        }
    }
}

impl ClusterMetadata for LocalMetadata {
    fn cluster(&self, listener: &str) -> ClusterView {
        let brokers = self
            .advertised
            .for_listener(listener)
            .map(|advertised| NodeView {
                id: self.node_id,
                host: advertised.host,
                port: advertised.port,
                rack: None,
            })
            .into_iter()
            .collect();
        ClusterView {
            cluster_id: self.cluster_id.clone(),
            controller_id: self.node_id,
            brokers,
        }
    }

    fn topics(&self) -> Vec<TopicView> {
        self.topics.list().iter().map(|t| self.view(t)).collect()
    }

    fn topic(&self, name: &str) -> Option<TopicView> {
        self.topics.get(name).map(|t| self.view(&t))
    }

    fn topic_by_id(&self, id: u128) -> Option<TopicView> {
        self.topics.by_id(id).map(|t| self.view(&t))
    }

    fn create_topic(
        &self,
        request: &NewTopic,
        validate_only: bool,
    ) -> Result<TopicView, TopicError> {
        self.topics
            .create(request, self.node_id, validate_only)
            .map(|t| self.view(&t))
    }

    fn delete_topic(&self, name: &str) -> Result<u128, TopicError> {
        self.topics.delete(name)
    }

    fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<TopicView, TopicError> {
        self.topics
            .create_partitions(name, total, assignments, self.node_id, validate_only)
            .map(|t| self.view(&t))
    }

    /// A single node leads every partition with its only, preferred,
    /// replica: no election is ever needed.
    fn elect_leaders(&self, _unclean: bool, partitions: Option<&[(String, i32)]>) -> Vec<Election> {
        let Some(partitions) = partitions else {
            return Vec::new();
        };
        partitions
            .iter()
            .map(|(topic, partition)| {
                let known = self
                    .topics
                    .get(topic)
                    .is_some_and(|t| (0..t.partitions).contains(partition));
                let (code, message) = if known {
                    (
                        ErrorCode::ElectionNotNeeded,
                        format!("{topic}-{partition} is led by its preferred replica."),
                    )
                } else {
                    (
                        ErrorCode::UnknownTopicOrPartition,
                        format!("No such partition as {topic}-{partition}"),
                    )
                };
                Election {
                    topic: topic.clone(),
                    partition: *partition,
                    result: Err(TopicError {
                        code: code.code(),
                        message,
                    }),
                }
            })
            .collect()
    }

    /// The controller's checks with this broker as the only registered
    /// one: its single replica is the only valid target, so a valid
    /// reassignment is complete at once and none is ever in progress
    /// (a cancel is NO_REASSIGNMENT_IN_PROGRESS).
    fn alter_partition_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
        _allow_replication_factor_change: bool,
    ) -> Result<(), TopicError> {
        let refuse = |code: ErrorCode, message: String| {
            Err(TopicError {
                code: code.code(),
                message,
            })
        };
        let Some(known) = self.topics.get(topic) else {
            return refuse(
                ErrorCode::UnknownTopicOrPartition,
                format!("Unable to find a topic named {topic}."),
            );
        };
        if !(0..known.partitions).contains(&partition) {
            return refuse(
                ErrorCode::UnknownTopicOrPartition,
                format!("Unable to find partition {topic}:{partition}."),
            );
        }
        let Some(target) = target else {
            return refuse(
                ErrorCode::NoReassignmentInProgress,
                "No partition reassignment is in progress for this topic or partition.".into(),
            );
        };
        let invalid = ErrorCode::InvalidReplicaAssignment;
        if target.is_empty() {
            return refuse(
                invalid,
                "The manual partition assignment includes an empty replica list.".into(),
            );
        }
        if let Some(id) = target.iter().find(|id| **id != self.node_id) {
            return refuse(
                invalid,
                format!(
                    "The manual partition assignment includes broker {id}, but no such broker \
                     is registered."
                ),
            );
        }
        if target.len() > 1 {
            return refuse(
                invalid,
                format!(
                    "The manual partition assignment includes the broker {} more than once.",
                    self.node_id
                ),
            );
        }
        // The target is the current assignment (of the same replication
        // factor): the reassignment is complete.
        Ok(())
    }

    fn list_partition_reassignments(
        &self,
        _requested: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<OngoingReassignment> {
        Vec::new()
    }
}
