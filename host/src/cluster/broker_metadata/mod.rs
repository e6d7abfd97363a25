//! A cluster node's answers to the metadata seam
//! ([`ClusterMetadata`], [`Leadership`]): read from the replicated
//! metadata image, topic changes proposed to the quorum.
//!
//! - Metadata and DescribeCluster list the live (unfenced) brokers with
//!   their endpoint on the request's listener, the quorum leader as the
//!   controller (Kafka's combined mode: the active controller is the
//!   quorum leader; when it is a controller-only node, which clients
//!   cannot reach, a live broker stands for it, as Kafka names a random
//!   alive broker: here the lowest, so every broker names the same one,
//!   and it forwards what must reach the controller), and each partition's leader, replicas, ISR and
//!   offline replicas as the image has them.
//! - CreateTopics, CreatePartitions and DeleteTopics are validated with
//!   the single node's helpers (names, configs, defaults), decided with
//!   `controller::topics` on this node's image (placement over the active
//!   brokers, INVALID_REPLICATION_FACTOR beyond them, or the request's
//!   replica assignment over registered brokers) and proposed from
//!   this node, which the quorum forwards to its leader; they are answered
//!   once the command is applied here, so the topic is visible on this
//!   broker when the client hears back. A decision made on a stale image
//!   is refused by the image's guards and comes back as Kafka's error;
//!   one refused for too few active brokers is decided again after a
//!   read barrier (a NoOp proposed and applied here), since a broker that
//!   joined a moment ago is in the quorum's image before this node's.
//! - ElectLeaders goes the same way: each partition decided with
//!   `controller::election` on this node's image and proposed; so does
//!   AlterPartitionReassignments with `controller::reassignment` (the
//!   start, or the cancel; the leader's AlterPartition completes it at the
//!   active controller), and ListPartitionReassignments reads the image.
//! - Configs, ACLs, SCRAM credentials, client quotas and delegation
//!   tokens go the same way through the stores' log seams ([`stores`]),
//!   the authorizer choice through the plugin runtime's (`crate::authorizer_choice`).
//! - The seam is synchronous (the WIT imports are): a proposal blocks the
//!   calling worker with `block_in_place`, so the runtime's other tasks
//!   (the quorum's among them) keep running.

use std::future::Future;
use std::sync::Arc;

use tokio::runtime::Handle;

use crate::cluster::command::{Applied, Command, Refusal, Uuid};
use crate::cluster::controller::election::{self, ElectionType};
use crate::cluster::controller::reassignment;
use crate::cluster::controller::topics::{self, TopicRequest};
use crate::cluster::image::{MetadataImage, TopicImage};
use crate::cluster::placement::Seed;
use crate::cluster::quorum::{Quorum, QuorumError};
use crate::cluster::reconciler;
use crate::error_code::ErrorCode;
use crate::metadata::bounds;
use crate::metadata::topics::{new_topic_id, NewTopic, TopicError, TopicManager};
use crate::metadata::view::{
    ClusterMetadata, ClusterView, Election, Leadership, NodeView, OngoingReassignment,
    PartitionView, TopicView,
};

/// Kafka's REQUEST_TIMED_OUT: a proposal whose outcome is unknown.
const REQUEST_TIMED_OUT: i16 = 7;

pub struct BrokerMetadata {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    cluster_id: String,
    /// Validation of requests (names, configs, defaults) as on one node.
    topics: Arc<TopicManager>,
    runtime: Handle,
}

impl BrokerMetadata {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        node_id: i32,
        cluster_id: String,
        topics: Arc<TopicManager>,
        runtime: Handle,
    ) -> Self {
        Self {
            quorum,
            node_id,
            cluster_id,
            topics,
            runtime,
        }
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// Runs a future to completion from the synchronous seam.
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        tokio::task::block_in_place(|| self.runtime.block_on(future))
    }

    /// Proposes `command` and waits until it is applied here, then
    /// brings the local topics and logs along at once (the reconciler
    /// would, a moment later), so a client's next request finds them.
    fn propose(&self, command: Command) -> Result<Applied, TopicError> {
        let answer = self.block_on(self.quorum.propose(command));
        reconciler::sync(
            self.quorum.as_ref(),
            self.node_id,
            &self.topics,
            reconciler::Removal::Keep,
            &|_| {},
        );
        match answer {
            Ok(Ok(applied)) => Ok(applied),
            Ok(Err(refusal)) => Err(refused(refusal)),
            Err(error) => Err(quorum_failed(&error)),
        }
    }

    /// A decided topic change: with validate-only applied to a scratch
    /// copy of the image (nothing proposed), else proposed; answered with
    /// the topic as it then stands.
    fn carry_out(
        &self,
        image: &MetadataImage,
        command: Command,
        name: &str,
        validate_only: bool,
    ) -> Result<TopicView, TopicError> {
        if validate_only {
            let mut scratch = image.clone();
            crate::cluster::quorum::StateMachine::apply(
                &mut scratch,
                image.last_applied(),
                &command,
            )
            .map_err(refused)?;
            return self.view_of(&scratch, name);
        }
        self.propose(command)?;
        self.view_of(&self.image(), name)
    }

    /// Decides a placement on this node's image. One refused for too few
    /// active brokers is decided again after a read barrier: this node's
    /// image may lag the quorum's (a broker that registered or was
    /// unfenced a moment ago is known to the controller first, as Kafka's
    /// controller, which decides every CreateTopics, would know it).
    fn decide_placement(
        &self,
        decide: impl Fn(&MetadataImage) -> Result<Command, Refusal>,
    ) -> Result<(Arc<MetadataImage>, Command), TopicError> {
        let image = self.image();
        match decide(&image) {
            Err(refusal) if refusal.code == ErrorCode::InvalidReplicationFactor => {
                self.read_barrier()?;
                let image = self.image();
                let command = decide(&image).map_err(refused)?;
                Ok((image, command))
            }
            decided => decided.map(|command| (image, command)).map_err(refused),
        }
    }

    /// Proposes a NoOp and waits until it is applied here: the image then
    /// holds everything the quorum had committed before.
    fn read_barrier(&self) -> Result<(), TopicError> {
        match self.block_on(self.quorum.propose(Command::NoOp)) {
            Ok(_) => Ok(()),
            Err(error) => Err(quorum_failed(&error)),
        }
    }

    fn view_of(&self, image: &MetadataImage, name: &str) -> Result<TopicView, TopicError> {
        image
            .topic(name)
            .map(|t| topic_view(image, t))
            .ok_or_else(|| TopicError {
                code: ErrorCode::UnknownTopicOrPartition.code(),
                message: format!("The topic '{name}' is not in this broker's metadata yet."),
            })
    }
}

/// A topic of the image as the `metadata` import describes it.
pub fn topic_view(image: &MetadataImage, topic: &TopicImage) -> TopicView {
    TopicView {
        name: topic.name.clone(),
        id: topic.id.0,
        partitions: topic
            .partitions
            .iter()
            .map(|(index, p)| PartitionView {
                partition: *index,
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                offline_replicas: image.offline_replicas(p),
            })
            .collect(),
    }
}

fn refused(refusal: Refusal) -> TopicError {
    TopicError {
        code: refusal.code.code(),
        message: refusal.message,
    }
}

/// No leader: NOT_CONTROLLER, which clients retry; an unknown outcome:
/// REQUEST_TIMED_OUT (Kafka's answer when the controller did not answer).
fn quorum_failed(error: &QuorumError) -> TopicError {
    let code = match error {
        QuorumError::NoLeader => ErrorCode::NotController.code(),
        QuorumError::Indeterminate(_) => REQUEST_TIMED_OUT,
        QuorumError::Stopped(_) => ErrorCode::UnknownServerError.code(),
    };
    TopicError {
        code,
        message: error.to_string(),
    }
}

fn seed() -> Seed {
    let bytes = crate::uuid::random_bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[..8]);
    Seed::from_random(first)
}

impl ClusterMetadata for BrokerMetadata {
    fn cluster(&self, listener: &str) -> ClusterView {
        let image = self.image();
        let brokers: Vec<NodeView> = image
            .live_brokers(listener)
            .into_iter()
            .map(|b| NodeView {
                id: b.id,
                host: b.host,
                port: b.port,
                rack: b.rack,
            })
            .collect();
        let leader = self.quorum.leader().and_then(|id| i32::try_from(id).ok());
        let controller_id = match leader {
            Some(id) if brokers.iter().any(|b| b.id == id) => id,
            Some(_) => brokers.iter().map(|b| b.id).min().unwrap_or(-1),
            None => -1,
        };
        ClusterView {
            cluster_id: self.cluster_id.clone(),
            controller_id,
            brokers,
        }
    }

    fn topics(&self) -> Vec<TopicView> {
        let image = self.image();
        image
            .topics()
            .iter()
            .map(|t| topic_view(&image, t))
            .collect()
    }

    fn topic(&self, name: &str) -> Option<TopicView> {
        let image = self.image();
        image.topic(name).map(|t| topic_view(&image, t))
    }

    fn topic_by_id(&self, id: u128) -> Option<TopicView> {
        let image = self.image();
        image.topic_by_id(Uuid(id)).map(|t| topic_view(&image, t))
    }

    fn create_topic(
        &self,
        request: &NewTopic,
        validate_only: bool,
    ) -> Result<TopicView, TopicError> {
        // Placement judges the factor against the active brokers; an
        // assignment may name any registered broker (fenced ones too).
        let image = self.image();
        let registered = |id| image.cluster().broker(id).is_some();
        let resolved = self.topics.resolve(request, &|_| Ok(()), &registered)?;
        let records = usize::try_from(resolved.partitions)
            .unwrap_or(usize::MAX)
            .saturating_add(1 + resolved.configs.len());
        if !bounds::records_fit(records) {
            return Err(TopicError {
                code: ErrorCode::PolicyViolation.code(),
                message: bounds::TOO_MANY_RECORDS.to_string(),
            });
        }
        let decision = TopicRequest {
            name: request.name.clone(),
            id: Uuid(new_topic_id()),
            num_partitions: resolved.partitions,
            replication_factor: resolved.replication_factor,
            assignment: resolved.assignment,
            configs: resolved.configs,
        };
        let (image, command) =
            self.decide_placement(|image| topics::create_topic(image, &decision, seed()))?;
        self.carry_out(&image, command, &request.name, validate_only)
    }

    fn delete_topic(&self, name: &str) -> Result<u128, TopicError> {
        let image = self.image();
        let command = topics::delete_topic(&image, name).map_err(refused)?;
        let Command::DeleteTopic { topic_id } = command else {
            return Err(TopicError {
                code: ErrorCode::UnknownServerError.code(),
                message: "unexpected delete decision".to_string(),
            });
        };
        self.propose(command)?;
        Ok(topic_id.0)
    }

    fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<TopicView, TopicError> {
        let image = self.image();
        let additional = image
            .topic(name)
            .map_or(0, |t| total.saturating_sub(t.partition_count()));
        if !bounds::records_fit(usize::try_from(additional).unwrap_or(0)) {
            return Err(TopicError {
                code: ErrorCode::PolicyViolation.code(),
                message: bounds::TOO_MANY_RECORDS.to_string(),
            });
        }
        let (image, command) = self.decide_placement(|image| {
            topics::create_partitions(image, name, total, assignments, seed())
        })?;
        self.carry_out(&image, command, name, validate_only)
    }

    fn elect_leaders(&self, unclean: bool, partitions: Option<&[(String, i32)]>) -> Vec<Election> {
        let election = if unclean {
            ElectionType::Unclean
        } else {
            ElectionType::Preferred
        };
        let wanted: Vec<(String, i32)> = match partitions {
            Some(partitions) => partitions.to_vec(),
            None => {
                let image = self.image();
                image
                    .topics()
                    .iter()
                    .flat_map(|t| t.partitions.keys().map(|index| (t.name.clone(), *index)))
                    .collect()
            }
        };
        let not_needed = ErrorCode::ElectionNotNeeded.code();
        wanted
            .into_iter()
            .map(|(topic, partition)| {
                let result = self.elect(&topic, partition, election);
                Election {
                    topic,
                    partition,
                    result,
                }
            })
            // Every partition: Kafka answers only those that needed one.
            .filter(|e| {
                partitions.is_some() || e.result.as_ref().err().is_none_or(|e| e.code != not_needed)
            })
            .collect()
    }

    fn alter_partition_reassignment(
        &self,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
        allow_replication_factor_change: bool,
    ) -> Result<(), TopicError> {
        self.reassign(topic, partition, target, allow_replication_factor_change)
    }

    fn list_partition_reassignments(
        &self,
        requested: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<OngoingReassignment> {
        reassignment::ongoing(&self.image(), requested)
            .into_iter()
            .map(|o| OngoingReassignment {
                topic: o.topic,
                partition: o.partition,
                replicas: o.replicas,
                adding: o.adding,
                removing: o.removing,
            })
            .collect()
    }
}

impl BrokerMetadata {
    /// One partition's reassignment decided on the image as it stands;
    /// a decision overtaken by another change of the partition (the
    /// leader's AlterPartition) is made again on the newer image.
    fn reassign(
        &self,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
        allow_replication_factor_change: bool,
    ) -> Result<(), TopicError> {
        const ATTEMPTS: usize = 3;
        let unclean = self
            .topics
            .config_value(topic, "unclean.leader.election.enable")
            .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
        for attempt in 1..=ATTEMPTS {
            let image = self.image();
            let (topic_image, registration) =
                reassignment::find(&image, topic, partition).map_err(refused)?;
            let change = match target {
                None => reassignment::cancel(&image, topic_image, partition, registration, unclean),
                Some(target) => {
                    reassignment::validate_target(&image, target).map_err(refused)?;
                    let current = reassignment::original_replicas(registration).len();
                    if !allow_replication_factor_change && target.len() != current {
                        return Err(TopicError {
                            code: ErrorCode::InvalidReplicationFactor.code(),
                            message: format!(
                                "The replication factor is changed from {current} to {}",
                                target.len()
                            ),
                        });
                    }
                    reassignment::reassign(&image, topic_image, partition, registration, target)
                }
            }
            .map_err(refused)?;
            let Some(change) = change else {
                return Ok(());
            };
            match self.propose(Command::ChangePartition(change)) {
                Err(error)
                    if error.code == ErrorCode::InvalidUpdateVersion.code()
                        && attempt < ATTEMPTS => {}
                answer => return answer.map(drop),
            }
        }
        Ok(())
    }

    /// One partition's election, decided on the image as the previous
    /// ones left it and proposed (answered once applied here).
    fn elect(&self, topic: &str, partition: i32, election: ElectionType) -> Result<(), TopicError> {
        let image = self.image();
        let registration = image
            .topic(topic)
            .and_then(|t| Some((t, t.partition(partition)?)));
        let Some((topic_image, registration)) = registration else {
            return Err(TopicError {
                code: ErrorCode::UnknownTopicOrPartition.code(),
                message: format!("No such partition as {topic}-{partition}"),
            });
        };
        let change = election::elect(&image, topic_image, partition, registration, election)
            .map_err(refused)?;
        self.propose(Command::ChangePartition(change)).map(|_| ())
    }
}

/// This broker leads a partition when the image names it leader. A
/// partition the image does not know is left to the log (it answers
/// UNKNOWN_TOPIC_OR_PARTITION, as Kafka does).
pub struct ImageLeadership {
    pub quorum: Arc<dyn Quorum<MetadataImage>>,
    pub node_id: i32,
}

impl Leadership for ImageLeadership {
    fn leads(&self, topic: &str, partition: i32) -> bool {
        self.quorum
            .image()
            .partition(topic, partition)
            .is_none_or(|p| p.leader == self.node_id)
    }
}

pub mod stores;
#[cfg(test)]
mod tests;
