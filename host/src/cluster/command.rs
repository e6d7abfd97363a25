//! The metadata log's commands: Kafka's metadata records, one per change
//! that a single broker makes to one of its host stores.
//!
//! Why commands look the way they do:
//! - **Decisions are recorded, not re-made.** A command says what changes
//!   (the replicas of a new partition, the new leader and ISR), not what was
//!   asked for: the proposer decides against its image (`controller`,
//!   `placement`) and the log records the outcome, as Kafka's
//!   PartitionChangeRecord does. Replaying an old log with newer decision
//!   code must give the same image on every node.
//! - **Everything non-deterministic comes in the command**: the topic id,
//!   the delegation token's timestamps, the random start of a placement.
//!   `apply` reads no clock and draws no random number.
//! - **Guards, not policy.** Proposals may come from any node and race, so
//!   a command carries what its decision was based on (the partition epoch,
//!   the broker epoch) and `apply` refuses a stale one with Kafka's error.
//!   Validation of names, configs and request shapes is the proposer's,
//!   before proposing: the log holds only changes that were valid then.
//! - Plain data with serde, reusing the host stores' domain types
//!   (`AclBinding`, `ScramCredential`, `TokenInfo`, `QuotaOp`), so a broker
//!   applies the image to its stores without translating.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::quota::{Entity, QuotaOp};
use crate::security::acl_store::{AclBinding, AclFilter};
use crate::security::credentials::{ScramCredential, ScramMechanism};
use crate::security::tokens::TokenInfo;

/// Kafka's "no leader" (an offline partition).
pub const NO_LEADER: i32 = -1;

/// Producer ids handed to a broker per AllocateProducerIds (Kafka's
/// `ProducerIdControlManager` block size).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

/// One change to the metadata image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// BrokerRegistrationRecord: a broker process (incarnation) joins,
    /// fenced until it has caught up. Its broker epoch is the log index of
    /// this command.
    RegisterBroker(BrokerRegistrationRecord),
    /// UnfenceBrokerRecord: the broker may lead and be in ISRs again.
    UnfenceBroker { broker_id: i32, epoch: i64 },
    /// FenceBrokerRecord: the broker missed its session (or asked to be).
    FenceBroker { broker_id: i32, epoch: i64 },
    /// BrokerRegistrationChangeRecord with `inControlledShutdown`: the
    /// broker is moving its leaderships away before it stops.
    ControlledShutdown { broker_id: i32, epoch: i64 },
    /// UnregisterBrokerRecord.
    UnregisterBroker { broker_id: i32, epoch: i64 },
    /// ControllerRegistrationRecord (KIP-919): where a controller serves
    /// the controller APIs, so brokers can reach the active one.
    RegisterController {
        controller_id: i32,
        listeners: Vec<Endpoint>,
    },

    /// TopicRecord, its PartitionRecords and ConfigRecords together.
    CreateTopic(NewTopicRecord),
    /// PartitionRecords for new partitions of an existing topic; the first
    /// must be the topic's current partition count (a concurrent
    /// CreatePartitions is refused with INVALID_PARTITIONS).
    CreatePartitions {
        topic_id: Uuid,
        partitions: Vec<PartitionRecord>,
    },
    /// PartitionChangeRecord: new leader, ISR or replicas of a partition.
    ChangePartition(PartitionChangeRecord),
    /// RemoveTopicRecord (its configs go with it).
    DeleteTopic { topic_id: Uuid },

    /// ConfigRecords of one resource: each name set (Some) or deleted
    /// (None); with `replace`, every name not listed is deleted too
    /// (legacy AlterConfigs).
    AlterConfigs {
        resource: ConfigResource,
        changes: Vec<(String, Option<String>)>,
        replace: bool,
    },

    /// AccessControlEntryRecords for the bindings not present yet.
    CreateAcls(Vec<AclBinding>),
    /// RemoveAccessControlEntryRecords for every binding a filter matches
    /// when the command is applied (so concurrent changes are seen).
    DeleteAcls(Vec<AclFilter>),

    /// UserScramCredentialRecord.
    UpsertScramCredential {
        user: String,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
    /// RemoveUserScramCredentialRecord.
    DeleteScramCredential {
        user: String,
        mechanism: ScramMechanism,
    },

    /// ClientQuotaRecords of one entity (validated by the proposer, as
    /// `QuotaManager::alter` validates them).
    AlterClientQuota { entity: Entity, ops: Vec<QuotaOp> },

    /// DelegationTokenRecord: a new token (`create`), or a renewed or
    /// expired one, which must still exist.
    UpsertDelegationToken { token: TokenInfo, create: bool },
    /// RemoveDelegationTokenRecord.
    RemoveDelegationToken { token_id: String },

    /// FeatureLevelRecord; level 0 removes the feature.
    SetFeatureLevel { name: String, level: i16 },

    /// ProducerIdsRecord: the next block of producer ids for a broker.
    AllocateProducerIds { broker_id: i32, broker_epoch: i64 },

    /// Gregor's own: the authorizer module every node uses (None: none).
    SetAuthorizer { name: Option<String> },
    /// Gregor's own (Kafka formats it into every node's meta.properties
    /// with `kafka-storage format`): the cluster id, proposed by every node
    /// that finds none in the image; the first applied stays, later ones
    /// change nothing.
    SetClusterId { cluster_id: String },
    /// NoOpRecord: changes nothing. A node proposes one as a read barrier:
    /// once it is applied here, this node's image holds everything the
    /// quorum had committed when it was proposed.
    NoOp,

    /// Kafka's atomic batch: all apply, or none (the image is left as it
    /// was and the first refusal is the answer). The controller fences a
    /// broker and moves its leaderships in one.
    Atomic(Vec<Command>),
    /// Several independent changes in one log entry, each answered on its
    /// own (AlterUserScramCredentials, per-user results).
    Each(Vec<Command>),
}

/// Kafka's Uuid (topic ids, broker incarnation ids) as the host
/// holds it (`crate::uuid`), serialized in Kafka's text form (URL-safe
/// base64), so snapshots read like Kafka's tools print ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub u128);

impl Serialize for Uuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::uuid::to_text(self.0))
    }
}

impl<'de> Deserialize<'de> for Uuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use base64::Engine as _;
        use serde::de::Error;
        let text = String::deserialize(d)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(text.as_bytes())
            .map_err(|_| D::Error::custom(format!("topic id {text:?} is not base64")))?;
        let bytes: [u8; 16] = bytes
            .try_into()
            .map_err(|_| D::Error::custom(format!("topic id {text:?} is not 16 bytes")))?;
        Ok(Uuid(u128::from_be_bytes(bytes)))
    }
}

impl std::fmt::Display for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::uuid::to_text(self.0))
    }
}

/// A listener of a broker as other nodes reach it (Kafka's BrokerEndpoint).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The listener name (`PLAINTEXT`, `INTERNAL`, ...).
    pub name: String,
    pub host: String,
    pub port: u16,
    /// `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.
    pub security_protocol: String,
}

/// The feature levels a broker supports (Kafka's BrokerFeature).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRange {
    pub min: i16,
    pub max: i16,
}

/// Kafka's BrokerRegistrationRecord, less what the log adds (the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationRecord {
    pub broker_id: i32,
    /// Random per process start: a new one is a new incarnation.
    pub incarnation_id: Uuid,
    pub listeners: Vec<Endpoint>,
    pub rack: Option<String>,
    #[serde(default)]
    pub features: BTreeMap<String, FeatureRange>,
}

/// Kafka's PartitionRecord for a new partition (its epochs start at 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
}

/// Kafka's TopicRecord with the topic's PartitionRecords and ConfigRecords.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTopicRecord {
    pub name: String,
    pub id: Uuid,
    /// Partitions 0, 1, ... in order.
    pub partitions: Vec<PartitionRecord>,
    pub configs: BTreeMap<String, String>,
}

/// Kafka's LeaderRecoveryState: an unclean election leaves the new leader
/// RECOVERING until it has made its log consistent (KIP-704).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum LeaderRecoveryState {
    #[default]
    Recovered,
    Recovering,
}

/// Kafka's PartitionChangeRecord: every field None is unchanged. Applying
/// it bumps the partition epoch; naming a leader bumps the leader epoch
/// (as Kafka's `PartitionRegistration.merge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The partition epoch the change was decided on; a partition that
    /// changed since refuses it (INVALID_UPDATE_VERSION).
    pub expected_partition_epoch: i32,
    /// The new leader ([`NO_LEADER`]: offline).
    pub leader: Option<i32>,
    pub isr: Option<Vec<i32>>,
    pub replicas: Option<Vec<i32>>,
    pub adding_replicas: Option<Vec<i32>>,
    pub removing_replicas: Option<Vec<i32>>,
    pub leader_recovery_state: Option<LeaderRecoveryState>,
}

impl PartitionChangeRecord {
    /// A change of nothing yet, decided on `partition_epoch`.
    pub fn new(topic_id: Uuid, partition: i32, partition_epoch: i32) -> Self {
        Self {
            topic_id,
            partition,
            expected_partition_epoch: partition_epoch,
            leader: None,
            isr: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
            leader_recovery_state: None,
        }
    }
}

/// What a config belongs to (Kafka's ConfigResource, less BROKER_LOGGER,
/// which is per node and not replicated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigResource {
    Topic(String),
    /// One broker's dynamic configs.
    Broker(i32),
    /// The cluster-wide default of broker configs (resource name "").
    BrokerDefault,
    Group(String),
    ClientMetrics(String),
}

/// A command's answer: what it did, or why it was refused.
pub type Response = Result<Applied, Refusal>;

/// What an applied command did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Applied {
    Done,
    /// The broker epoch of a registration.
    BrokerRegistered {
        epoch: i64,
    },
    /// Per DeleteAcls filter, the bindings it removed.
    AclsDeleted(Vec<Vec<AclBinding>>),
    /// A block of producer ids: `first .. first + size`.
    ProducerIds {
        first: i64,
        size: i32,
    },
    /// The answers of an [`Command::Atomic`] batch, in order.
    Batch(Vec<Applied>),
    /// The answers of an [`Command::Each`] batch, in order.
    Each(Vec<Response>),
}

/// A refused command: Kafka's error code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Refusal {}
