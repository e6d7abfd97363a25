//! The metadata image (Kafka's MetadataImage): the cluster's metadata as
//! of one log index, the state machine every node's quorum applies the
//! committed [`Command`]s to.
//!
//! One image holds what a single broker spreads over its host stores
//! (topics, configs, ACLs, credentials, quotas, tokens, the producer-id
//! reservation, the authorizer choice) plus what only a cluster has
//! (registered brokers, partition replicas, leaders and ISRs). Brokers read
//! it to answer clients and to drive their stores and logs; the active
//! controller reads it to decide (`cluster::controller`).
//!
//! Where each single-node store's state goes, and the commands that
//! change it:
//!
//! | host store today                       | image part        | commands |
//! |----------------------------------------|-------------------|----------|
//! | `metadata/store.rs` (topics.json)      | [`TopicsImage`]   | CreateTopic, CreatePartitions, ChangePartition, DeleteTopic |
//! | topic configs (topics.json), `metadata/dynamic.rs` (configs.json) | [`ConfigsImage`] | AlterConfigs |
//! | `security/acl_store.rs`                | [`AclsImage`]     | CreateAcls, DeleteAcls |
//! | `security/credentials.rs`              | [`ScramImage`]    | Upsert/DeleteScramCredential |
//! | `quota.rs` (quotas.json)               | [`QuotasImage`]   | AlterClientQuota |
//! | `security/tokens.rs`                   | [`TokensImage`]   | UpsertDelegationToken, RemoveDelegationToken |
//! | `producer_ids.rs` (producer-id-block)  | `next_producer_id`| AllocateProducerIds |
//! | `plugins/authorization.rs` (authorizer.json) | `authorizer` | SetAuthorizer |
//! | (none: UpdateFeatures finalizes nothing yet) | `features`  | SetFeatureLevel |
//! | (none: one broker)                     | [`ClusterImage`]  | Register/Fence/Unfence/Unregister Broker, ControlledShutdown |
//!
//! `apply` is deterministic: the same commands in the same order give the
//! same image on every node. Not here, on purpose:
//! - the active controller's id: the quorum's `leader()` knows it;
//! - broker heartbeat times: the active controller keeps them in memory,
//!   as Kafka does (a new controller starts every session afresh);
//! - group offsets and transactions: they live in internal topics.

mod acls;
mod cluster;
mod configs;
mod quotas;
mod security;
mod topics;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use acls::AclsImage;
pub use cluster::{BrokerEndpoint, BrokerRegistration, ClusterImage};
pub use configs::{Configs, ConfigsImage};
pub use quotas::QuotasImage;
pub use security::{ScramImage, TokensImage};
pub use topics::{PartitionRegistration, TopicImage, TopicsImage};

use crate::cluster::command::{
    Applied, Command, ConfigResource, Refusal, Response, Uuid, PRODUCER_ID_BLOCK_SIZE,
};
use crate::cluster::quorum::StateMachine;
use crate::error_code::ErrorCode;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// The index of the last command applied (Kafka's image offset).
    last_applied: u64,
    cluster: ClusterImage,
    topics: TopicsImage,
    configs: ConfigsImage,
    acls: AclsImage,
    scram: ScramImage,
    tokens: TokensImage,
    quotas: QuotasImage,
    /// Finalized feature levels (FeatureLevelRecord), by name.
    features: BTreeMap<String, i16>,
    /// The first producer id not handed out yet (ProducerIdsRecord).
    next_producer_id: i64,
    /// The authorizer module's name, if one decides.
    authorizer: Option<String>,
    /// Whether a choice was made through the log at all: until one is,
    /// every node keeps its own (`authorizer` config, or its file).
    #[serde(default)]
    authorizer_chosen: bool,
    /// The cluster id, once a node proposed one (the first stays).
    #[serde(default)]
    cluster_id: Option<String>,
}

impl StateMachine for MetadataImage {
    type Command = Command;
    type Response = Response;

    fn apply(&mut self, index: u64, command: &Command) -> Response {
        self.last_applied = index;
        self.apply_one(index, command)
    }
}

impl MetadataImage {
    fn apply_one(&mut self, index: u64, command: &Command) -> Response {
        match command {
            Command::RegisterBroker(record) => self.cluster.register(index, record),
            Command::RegisterController {
                controller_id,
                listeners,
            } => self.cluster.register_controller(*controller_id, listeners),
            Command::UnfenceBroker { broker_id, epoch } => {
                self.cluster
                    .change(*broker_id, *epoch, |b| b.fenced = false)
            }
            Command::FenceBroker { broker_id, epoch } => {
                self.cluster.change(*broker_id, *epoch, |b| b.fenced = true)
            }
            Command::ControlledShutdown { broker_id, epoch } => {
                self.cluster
                    .change(*broker_id, *epoch, |b| b.in_controlled_shutdown = true)
            }
            Command::UnregisterBroker { broker_id, epoch } => {
                self.cluster.unregister(*broker_id, *epoch)
            }
            Command::CreateTopic(record) => {
                self.topics.create(record, &self.cluster)?;
                let resource = ConfigResource::Topic(record.name.clone());
                let changes: Vec<(String, Option<String>)> = record
                    .configs
                    .iter()
                    .map(|(name, value)| (name.clone(), Some(value.clone())))
                    .collect();
                self.configs.alter(&resource, &changes, true)
            }
            Command::CreatePartitions {
                topic_id,
                partitions,
            } => self
                .topics
                .create_partitions(*topic_id, partitions, &self.cluster),
            Command::ChangePartition(change) => self.topics.change(change, &self.cluster),
            Command::DeleteTopic { topic_id } => {
                let name = self.topics.delete(*topic_id)?;
                self.configs.remove(&ConfigResource::Topic(name));
                Ok(Applied::Done)
            }
            Command::AlterConfigs {
                resource,
                changes,
                replace,
            } => {
                if let ConfigResource::Topic(name) = resource {
                    if self.topics.get(name).is_none() {
                        return Err(Refusal::new(
                            ErrorCode::UnknownTopicOrPartition,
                            format!("The topic '{name}' does not exist."),
                        ));
                    }
                }
                self.configs.alter(resource, changes, *replace)
            }
            Command::CreateAcls(bindings) => self.acls.create(bindings),
            Command::DeleteAcls(filters) => self.acls.delete(filters),
            Command::UpsertScramCredential {
                user,
                mechanism,
                credential,
            } => self.scram.upsert(user, *mechanism, credential),
            Command::DeleteScramCredential { user, mechanism } => {
                self.scram.delete(user, *mechanism)
            }
            Command::AlterClientQuota { entity, ops } => self.quotas.alter(entity, ops),
            Command::UpsertDelegationToken { token, create } => self.tokens.upsert(token, *create),
            Command::RemoveDelegationToken { token_id } => self.tokens.remove(token_id),
            Command::SetFeatureLevel { name, level } => {
                if *level <= 0 {
                    self.features.remove(name);
                } else {
                    self.features.insert(name.clone(), *level);
                }
                Ok(Applied::Done)
            }
            Command::AllocateProducerIds {
                broker_id,
                broker_epoch,
            } => self.allocate_producer_ids(*broker_id, *broker_epoch),
            Command::SetAuthorizer { name } => {
                self.authorizer.clone_from(name);
                self.authorizer_chosen = true;
                Ok(Applied::Done)
            }
            Command::SetClusterId { cluster_id } => {
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(cluster_id.clone());
                }
                Ok(Applied::Done)
            }
            Command::NoOp => Ok(Applied::Done),
            Command::Atomic(commands) => self.apply_atomic(index, commands),
            Command::Each(commands) => Ok(Applied::Each(
                commands
                    .iter()
                    .map(|command| self.apply_one(index, command))
                    .collect(),
            )),
        }
    }

    /// All or nothing: on a refusal the image is put back as it was. The
    /// copy costs O(image), fine for what batches are used for (fencing a
    /// broker, which is rare).
    fn apply_atomic(&mut self, index: u64, commands: &[Command]) -> Response {
        let before = self.clone();
        let mut answers = Vec::with_capacity(commands.len());
        for (position, command) in commands.iter().enumerate() {
            match self.apply_one(index, command) {
                Ok(answer) => answers.push(answer),
                Err(refusal) => {
                    *self = before;
                    return Err(Refusal::new(
                        refusal.code,
                        format!(
                            "change {} of {} refused, none made: {}",
                            position + 1,
                            commands.len(),
                            refusal.message
                        ),
                    ));
                }
            }
        }
        Ok(Applied::Batch(answers))
    }

    /// ProducerIdsRecord: the next block, for a broker of the current
    /// epoch (a fenced-off incarnation must not get ids).
    fn allocate_producer_ids(&mut self, broker_id: i32, broker_epoch: i64) -> Response {
        self.cluster.current(broker_id, broker_epoch)?;
        let first = self.next_producer_id;
        let Some(next) = first.checked_add(i64::from(PRODUCER_ID_BLOCK_SIZE)) else {
            return Err(Refusal::new(
                ErrorCode::UnknownServerError,
                "Producer ids are exhausted.",
            ));
        };
        self.next_producer_id = next;
        Ok(Applied::ProducerIds {
            first,
            size: PRODUCER_ID_BLOCK_SIZE,
        })
    }

    // ------------------------------------------------------------ reads

    /// The index of the last command applied.
    pub fn last_applied(&self) -> u64 {
        self.last_applied
    }

    pub fn cluster(&self) -> &ClusterImage {
        &self.cluster
    }

    pub fn topics(&self) -> &TopicsImage {
        &self.topics
    }

    pub fn configs(&self) -> &ConfigsImage {
        &self.configs
    }

    pub fn acls(&self) -> &AclsImage {
        &self.acls
    }

    pub fn scram(&self) -> &ScramImage {
        &self.scram
    }

    pub fn tokens(&self) -> &TokensImage {
        &self.tokens
    }

    pub fn quotas(&self) -> &QuotasImage {
        &self.quotas
    }

    /// Finalized feature levels by name.
    pub fn features(&self) -> &BTreeMap<String, i16> {
        &self.features
    }

    /// The first producer id not handed out yet.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// The authorizer chosen through the log (`Some(None)`: none), or
    /// `None` while no choice was made there.
    pub fn authorizer_choice(&self) -> Option<Option<&str>> {
        self.authorizer_chosen.then_some(self.authorizer.as_deref())
    }

    /// The cluster id, once set.
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// The live brokers reachable on `listener` (Metadata's broker list).
    pub fn live_brokers(&self, listener: &str) -> Vec<BrokerEndpoint> {
        self.cluster.live_endpoints(listener)
    }

    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicImage> {
        self.topics.by_id(id)
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionRegistration> {
        self.topics.get(topic)?.partition(partition)
    }

    /// The partition's leader, if it has one (NOT_LEADER_OR_FOLLOWER
    /// checks, Metadata's leader id).
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.partition(topic, partition)
            .filter(|p| p.has_leader())
            .map(|p| p.leader)
    }

    /// Replicas on brokers that are fenced or no longer registered
    /// (Metadata's `offline_replicas`).
    pub fn offline_replicas(&self, partition: &PartitionRegistration) -> Vec<i32> {
        partition
            .replicas
            .iter()
            .copied()
            .filter(|id| !self.cluster.is_live(*id))
            .collect()
    }

    /// Every (topic, partition) `broker` leads, by topic name.
    pub fn led_by(&self, broker: i32) -> Vec<(&TopicImage, i32)> {
        self.partitions_where(|p| p.leader == broker)
    }

    /// Every (topic, partition) with `broker` among its replicas.
    pub fn replicas_on(&self, broker: i32) -> Vec<(&TopicImage, i32)> {
        self.partitions_where(|p| p.replicas.contains(&broker))
    }

    /// Every (topic, partition) whose registration satisfies `keep`, by topic name.
    fn partitions_where(
        &self,
        keep: impl Fn(&PartitionRegistration) -> bool + Copy,
    ) -> Vec<(&TopicImage, i32)> {
        self.topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .filter(move |(_, p)| keep(p))
                    .map(move |(index, _)| (topic, *index))
            })
            .collect()
    }

    /// The effective `unclean.leader.election.enable` of a topic: its own
    /// override, else the cluster-wide dynamic broker default, else the
    /// static `fallback` (the broker config).
    pub fn unclean_election_enabled(&self, topic: &str, fallback: bool) -> bool {
        const NAME: &str = "unclean.leader.election.enable";
        let topic_value = self
            .configs
            .get(&ConfigResource::Topic(topic.to_string()))
            .get(NAME);
        let value =
            topic_value.or_else(|| self.configs.get(&ConfigResource::BrokerDefault).get(NAME));
        match value.map(|v| v.trim().to_ascii_lowercase()) {
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            _ => fallback,
        }
    }
}

#[cfg(test)]
mod tests;
