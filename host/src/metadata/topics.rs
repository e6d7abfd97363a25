//! Topics: Kafka's MetadataCache and the topic half of its AdminManager.
//!
//! The topic set lives in memory for lookups by name and by id and in the
//! crash-safe metadata store for restarts. Creating a topic validates it
//! the way Kafka does (name, partitions, replication factor on our one
//! broker, configs), writes the record, then creates its partition logs;
//! on start every stored topic gets its partitions back with its config.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::error_code::ErrorCode;
use crate::log::{LogConfig, LogStore, TopicPartition};
use crate::metadata::assignment;
use crate::metadata::bounds;
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::store::{MetadataStore, TopicRecord};
use crate::metadata::topic_config::{self, BrokerView};
use crate::topic_name::{self, Invalid, MAX_LENGTH};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    pub code: i16,
    pub message: String,
}

impl TopicError {
    fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The topic metadata could not be stored.
    fn storage(error: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::KafkaStorageError.code(), error.to_string())
    }
}

/// What a CreateTopics entry asks for (-1: the broker's default).
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, Option<String>)>,
    /// The manual assignment as the request names it, (partition,
    /// replicas); empty: placed by the broker.
    pub replica_assignment: Vec<(i32, Vec<i32>)>,
}

/// A CreateTopics entry once checked: what the broker will create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedTopic {
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// The manual assignment, replicas of partitions 0..n in order.
    pub assignment: Option<Vec<Vec<i32>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub id: u128,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

pub struct TopicManager {
    config: Arc<BrokerConfig>,
    /// Dynamic broker configs: topic configs fall back to them.
    dynamic: Arc<DynamicConfigs>,
    logs: Arc<dyn LogStore>,
    store: Mutex<MetadataStore>,
    topics: RwLock<BTreeMap<String, Topic>>,
    reopen: Reopen,
    /// Held by a cluster's reconciliation pass from reading the image to
    /// the last log it creates or deletes (`cluster::reconciler`).
    reconcile: Mutex<()>,
}

/// Which partition logs [`TopicManager::open_with`] gives back to the
/// stored topics, and a config change reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopen {
    /// A single broker holds every partition: each one's log is opened,
    /// created if it went missing.
    Every,
    /// In a cluster this broker holds only the partitions the metadata
    /// image makes it a replica of, which is not known yet at start: the
    /// logs found on disk get their topic's config and nothing is created.
    /// The reconciler, once the image has caught up, creates the missing
    /// replicas and removes the stray ones (`cluster::reconciler`); a
    /// config change reaches the logs held and creates none.
    Found,
}

impl TopicManager {
    /// Loads the stored topics and reopens their partition logs (a single
    /// broker's: every partition).
    pub fn open(
        config: Arc<BrokerConfig>,
        dynamic: Arc<DynamicConfigs>,
        logs: Arc<dyn LogStore>,
        store: MetadataStore,
    ) -> Result<Self> {
        Self::open_with(config, dynamic, logs, store, Reopen::Every)
    }

    /// Loads the stored topics and reopens the partition logs `reopen` says.
    pub fn open_with(
        config: Arc<BrokerConfig>,
        dynamic: Arc<DynamicConfigs>,
        logs: Arc<dyn LogStore>,
        store: MetadataStore,
        reopen: Reopen,
    ) -> Result<Self> {
        let found = logs.partitions();
        let mut topics = BTreeMap::new();
        let layers = dynamic.broker_layers();
        let view = BrokerView {
            layers: &layers,
            config: &config,
        };
        for record in store.topics() {
            let topic = Topic {
                name: record.name.clone(),
                id: u128::from_be_bytes(record.id),
                partitions: record.partitions,
                configs: record.configs.clone(),
            };
            let log_config = log_config_for(&topic.configs, &view);
            for partition in 0..topic.partitions {
                let tp = TopicPartition {
                    topic: topic.name.clone(),
                    partition,
                };
                if reopen == Reopen::Found && found.binary_search(&tp).is_err() {
                    continue;
                }
                logs.create_partition(&tp, log_config.clone())
                    .map_err(|error| anyhow::anyhow!("{error}"))
                    .with_context(|| format!("opening partition {}-{partition}", topic.name))?;
            }
            topics.insert(topic.name.clone(), topic);
        }
        info!(topics = topics.len(), "topics loaded");
        Ok(Self {
            config,
            dynamic,
            logs,
            store: Mutex::new(store),
            topics: RwLock::new(topics),
            reopen,
            reconcile: Mutex::new(()),
        })
    }

    pub fn get(&self, name: &str) -> Option<Topic> {
        self.read().get(name).cloned()
    }

    pub fn by_id(&self, id: u128) -> Option<Topic> {
        self.read().values().find(|topic| topic.id == id).cloned()
    }

    pub fn list(&self) -> Vec<Topic> {
        self.read().values().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Topic>> {
        crate::sync::read(&self.topics)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Topic>> {
        crate::sync::write(&self.topics)
    }

    fn lock_store(&self) -> std::sync::MutexGuard<'_, MetadataStore> {
        crate::sync::lock(&self.store)
    }

    /// A CreateTopics entry checked and resolved against the broker's
    /// defaults (Kafka's order of checks); `replicas_ok` judges the
    /// resolved replication factor against the brokers there are, and
    /// `registered` the brokers a manual assignment names.
    pub fn resolve(
        &self,
        request: &NewTopic,
        replicas_ok: &dyn Fn(i16) -> Result<(), TopicError>,
        registered: &dyn Fn(i32) -> bool,
    ) -> Result<ResolvedTopic, TopicError> {
        let default_partitions = self.config.num_partitions().unwrap_or(1);
        let requested = match request.replica_assignment.len() {
            0 => bounds::requested_partitions(request.num_partitions, default_partitions),
            assigned => assigned,
        };
        if requested > bounds::MAX_PARTITIONS_PER_BATCH {
            return Err(TopicError::new(
                ErrorCode::PolicyViolation.code(),
                bounds::TOO_MANY_PARTITIONS,
            ));
        }
        validate_name(&request.name)?;
        let (partitions, replication_factor, assignment) = if request.replica_assignment.is_empty()
        {
            let (partitions, replication) = self.counts(request, default_partitions)?;
            replicas_ok(replication)?;
            (partitions, replication, None)
        } else {
            let assignment = manual_assignment(request, registered)?;
            let replication = assignment
                .first()
                .and_then(|replicas| i16::try_from(replicas.len()).ok())
                .unwrap_or(i16::MAX);
            let partitions = i32::try_from(assignment.len()).unwrap_or(i32::MAX);
            (partitions, replication, Some(assignment))
        };
        Ok(ResolvedTopic {
            partitions,
            replication_factor,
            configs: validate_configs(&request.configs)?,
            assignment,
        })
    }

    /// The partition count and replication factor a topic without a
    /// manual assignment gets (-1: the broker's defaults).
    fn counts(
        &self,
        request: &NewTopic,
        default_partitions: i32,
    ) -> Result<(i32, i16), TopicError> {
        if request.replication_factor < -1 || request.replication_factor == 0 {
            return Err(TopicError::new(
                ErrorCode::InvalidReplicationFactor.code(),
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        let partitions = match request.num_partitions {
            -1 => default_partitions,
            n if n <= 0 => {
                return Err(TopicError::new(
                    ErrorCode::InvalidPartitions.code(),
                    "Number of partitions was set to an invalid non-positive value.",
                ))
            }
            n => n,
        };
        let replication = match request.replication_factor {
            -1 => self
                .config
                .get("default.replication.factor")
                .and_then(|value| value.parse::<i16>().ok())
                .unwrap_or(1),
            n => n,
        };
        if replication <= 0 {
            return Err(TopicError::new(
                ErrorCode::InvalidReplicationFactor.code(),
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        Ok((partitions, replication))
    }

    /// Creates a topic, or with `validate_only` checks that it could be.
    ///
    /// The partition count is bounded before anything else (Kafka's
    /// `validateTotalNumberOfPartitions`), and the records the topic would
    /// write before it is created or described, `validate_only` or not.
    ///
    /// `node_id` is the only registered broker: the one broker a manual
    /// assignment may name.
    pub fn create(
        &self,
        request: &NewTopic,
        node_id: i32,
        validate_only: bool,
    ) -> Result<Topic, TopicError> {
        let replicas_ok = |replication: i16| {
            if replication > 1 {
                return Err(TopicError::new(
                    ErrorCode::InvalidReplicationFactor.code(),
                    format!(
                        "Unable to replicate the partition {replication} time(s): The target replication factor of {replication} cannot be reached because only 1 broker(s) are registered."
                    ),
                ));
            }
            Ok(())
        };
        let ResolvedTopic {
            partitions,
            configs,
            ..
        } = self.resolve(request, &replicas_ok, &|id| id == node_id)?;
        // Serialize creations so the existence check and the write agree.
        let mut store = self.lock_store();
        if let Some(existing) = self.collision(&request.name) {
            return Err(existing);
        }
        // A topic record, one per partition, one per config.
        let records = usize::try_from(partitions)
            .unwrap_or(usize::MAX)
            .saturating_add(1 + configs.len());
        if !bounds::records_fit(records) {
            return Err(TopicError::new(
                ErrorCode::PolicyViolation.code(),
                bounds::TOO_MANY_RECORDS,
            ));
        }
        let topic = Topic {
            name: request.name.clone(),
            id: new_topic_id(),
            partitions,
            configs,
        };
        if validate_only {
            return Ok(topic);
        }
        // The logs first, then the record: out of descriptors or disk,
        // the request fails and leaves nothing behind (no record of a
        // topic without logs for the next start to trip over).
        let created = self.open_partitions(&topic, 0..partitions).and_then(|()| {
            store
                .put_topic(record_of(&topic))
                .map_err(TopicError::storage)
        });
        if let Err(error) = created {
            if let Err(e) = self.logs.delete_topic(&topic.name) {
                warn!(topic = %topic.name, "cannot remove the logs of a topic whose creation failed: {e}");
            }
            return Err(error);
        }
        self.write().insert(topic.name.clone(), topic.clone());
        info!(topic = %topic.name, partitions, "topic created");
        Ok(topic)
    }

    /// Kafka refuses a name that exists, or that collides with an existing
    /// one once '.' and '_' are treated alike (they map to the same metric).
    fn collision(&self, name: &str) -> Option<TopicError> {
        let topics = self.read();
        if topics.contains_key(name) {
            return Some(TopicError::new(
                ErrorCode::TopicAlreadyExists.code(),
                format!("Topic '{name}' already exists."),
            ));
        }
        let folded = name.replace('.', "_");
        topics
            .keys()
            .find(|existing| existing.replace('.', "_") == folded)
            .map(|existing| {
                TopicError::new(
                    ErrorCode::InvalidTopicException.code(),
                    format!("Topic '{name}' collides with existing topic: {existing}"),
                )
            })
    }

    /// Deletes a topic and its data; returns its id.
    pub fn delete(&self, name: &str) -> Result<u128, TopicError> {
        let mut store = self.lock_store();
        let Some(topic) = self.get(name) else {
            return Err(TopicError::new(
                ErrorCode::UnknownTopicOrPartition.code(),
                "This server does not host this topic-partition.",
            ));
        };
        store.remove_topic(name).map_err(TopicError::storage)?;
        self.write().remove(name);
        drop(store);
        self.logs
            .delete_topic(name)
            .map_err(|error| TopicError::new(error.error_code(), error.to_string()))?;
        info!(topic = %name, "topic deleted");
        Ok(topic.id)
    }

    /// A topic as the cluster's metadata image has it (its reconciler):
    /// recorded here with the image's id, partition count and configs, and
    /// the logs of the partitions this broker holds a replica of (`local`)
    /// created or given the topic's config. A topic of the same name with
    /// another id is an older incarnation: it goes first, data and all.
    /// Nothing is done when the topic is unchanged.
    pub fn adopt(&self, topic: Topic, local: &[i32]) -> Result<(), TopicError> {
        if self
            .get(&topic.name)
            .is_some_and(|known| known.id != topic.id)
        {
            self.delete(&topic.name)?;
        }
        let mut store = self.lock_store();
        if self.get(&topic.name).as_ref() == Some(&topic) {
            return Ok(());
        }
        store.put_topic(record_of(&topic)).map_err(|error| {
            TopicError::new(ErrorCode::KafkaStorageError.code(), error.to_string())
        })?;
        self.open_partitions(&topic, local.iter().copied())?;
        info!(topic = %topic.name, partitions = topic.partitions, local = local.len(), "topic adopted from the metadata image");
        self.write().insert(topic.name.clone(), topic);
        Ok(())
    }

    /// The cluster reconciler's hold: one pass at a time, so a pass planned
    /// on an older image cannot re-create a log a newer one deleted.
    pub fn reconcile_hold(&self) -> std::sync::MutexGuard<'_, ()> {
        crate::sync::lock(&self.reconcile)
    }

    /// Creates the logs of `partitions` of a known topic, with its config
    /// (replicas newly placed on this broker in a cluster).
    pub fn open_replicas(&self, name: &str, partitions: &[i32]) -> Result<(), TopicError> {
        let _store = self.lock_store();
        let Some(topic) = self.get(name) else {
            return Err(TopicError::new(
                ErrorCode::UnknownTopicOrPartition.code(),
                format!("The topic '{name}' is not known here."),
            ));
        };
        self.open_partitions(&topic, partitions.iter().copied())?;
        info!(topic = %name, ?partitions, "replica logs created");
        Ok(())
    }

    /// The partitions whose logs this broker holds, sorted.
    pub fn local_partitions(&self) -> Vec<TopicPartition> {
        self.logs.partitions()
    }

    /// Removes the logs of partitions this broker must not hold (stray
    /// replicas, or replicas moved away, in a cluster), data and all.
    pub fn remove_logs(&self, stray: &[TopicPartition]) -> Result<(), TopicError> {
        let _store = self.lock_store();
        for tp in stray {
            self.logs
                .delete_partition(tp)
                .map_err(|error| TopicError::new(error.error_code(), error.to_string()))?;
            info!(partition = %tp, "partition log removed (no replica here)");
        }
        Ok(())
    }

    /// Every config of a topic with its effective value and source.
    pub fn configs(&self, name: &str) -> Option<Vec<topic_config::EffectiveConfig>> {
        let topic = self.get(name)?;
        let layers = self.dynamic.broker_layers();
        let view = BrokerView {
            layers: &layers,
            config: &self.config,
        };
        Some(topic_config::effective(&topic.configs, &view))
    }

    /// The effective value of one config of a topic (None: no such topic
    /// or config).
    pub fn config_value(&self, name: &str, config: &str) -> Option<String> {
        let topic = self.get(name)?;
        let layers = self.dynamic.broker_layers();
        let view = BrokerView {
            layers: &layers,
            config: &self.config,
        };
        topic_config::effective_value(config, &topic.configs, &view)
    }

    /// The log settings for a topic with these overrides, from the current
    /// broker configs.
    /// Opens (creating where needed) the logs of these partitions of
    /// `topic` with the topic's effective config.
    fn open_partitions(
        &self,
        topic: &Topic,
        partitions: impl IntoIterator<Item = i32>,
    ) -> Result<(), TopicError> {
        let log_config = self.log_config(&topic.configs);
        for partition in partitions {
            let tp = TopicPartition {
                topic: topic.name.clone(),
                partition,
            };
            self.logs
                .create_partition(&tp, log_config.clone())
                .map_err(|error| TopicError::new(error.error_code(), error.to_string()))?;
        }
        Ok(())
    }

    fn log_config(&self, overrides: &BTreeMap<String, String>) -> LogConfig {
        let layers = self.dynamic.broker_layers();
        log_config_for(
            overrides,
            &BrokerView {
                layers: &layers,
                config: &self.config,
            },
        )
    }

    /// Replaces a topic's config overrides (already validated): stored
    /// durably, then applied to every partition log at once (creating an
    /// existing partition replaces its config).
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), TopicError> {
        let mut store = self.lock_store();
        let Some(mut topic) = self.get(name) else {
            return Err(unknown_topic(name));
        };
        topic.configs = configs;
        store
            .put_topic(record_of(&topic))
            .map_err(TopicError::storage)?;
        self.write().insert(topic.name.clone(), topic.clone());
        // Still under the store lock, so a concurrent delete cannot have
        // removed the logs this recreates.
        self.apply_log_config(&topic)?;
        drop(store);
        info!(topic = %name, "topic configs changed");
        Ok(())
    }

    /// Applies the current effective configs of every topic to its logs,
    /// after a dynamic broker config changed.
    pub fn reapply_configs(&self) -> Result<(), TopicError> {
        let _store = self.lock_store();
        let mut first_error = None;
        for topic in self.list() {
            if let Err(error) = self.apply_log_config(&topic) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn apply_log_config(&self, topic: &Topic) -> Result<(), TopicError> {
        match self.reopen {
            Reopen::Every => self.open_partitions(topic, 0..topic.partitions),
            Reopen::Found => {
                let held = self.logs.partitions().into_iter();
                let held = held.filter(|tp| tp.topic == topic.name);
                self.open_partitions(topic, held.map(|tp| tp.partition))
            }
        }
    }

    /// CreatePartitions: grows a topic to `total` partitions, as Kafka's
    /// controller does (only increases; manual assignments, if given, one
    /// per new partition naming registered brokers with the topic's
    /// replication factor; at most `MAX_RECORDS_PER_USER_OP` new ones).
    /// With `validate_only` nothing changes.
    pub fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: Option<&[Vec<i32>]>,
        node_id: i32,
        validate_only: bool,
    ) -> Result<Topic, TopicError> {
        let mut store = self.lock_store();
        let Some(mut topic) = self.get(name) else {
            return Err(unknown_topic(name));
        };
        let current = topic.partitions;
        if total == current {
            return Err(TopicError::new(
                ErrorCode::InvalidPartitions.code(),
                format!("Topic already has {current} partition(s)."),
            ));
        }
        if total < current {
            return Err(TopicError::new(
                ErrorCode::InvalidPartitions.code(),
                format!(
                    "The topic {name} currently has {current} partition(s); {total} would not be an increase."
                ),
            ));
        }
        let additional = total - current;
        if let Some(assignments) = assignments {
            let given = assignments.len();
            if i32::try_from(given).ok() != Some(additional) {
                return Err(TopicError::new(
                    ErrorCode::InvalidReplicaAssignment.code(),
                    format!(
                        "Attempted to add {additional} additional partition(s), but only {given} assignment(s) were specified."
                    ),
                ));
            }
            // The only registered broker is this one, so the topic's
            // replication factor is 1 and needs no check of its own.
            for replicas in assignments {
                assignment::check_replicas(replicas, None, &|id| id == node_id)
                    .map_err(invalid_assignment)?;
            }
        }
        // One partition record per new partition, bounded before any is
        // placed or described.
        if !bounds::records_fit(usize::try_from(additional).unwrap_or(usize::MAX)) {
            return Err(TopicError::new(
                ErrorCode::PolicyViolation.code(),
                bounds::TOO_MANY_RECORDS,
            ));
        }
        topic.partitions = total;
        if validate_only {
            return Ok(topic);
        }
        store
            .put_topic(record_of(&topic))
            .map_err(TopicError::storage)?;
        if let Err(error) = self.open_partitions(&topic, current..total) {
            // As for a failed creation: back to the partitions it had.
            topic.partitions = current;
            if let Err(e) = store.put_topic(record_of(&topic)) {
                warn!(topic = %name, "cannot restore the record of a topic whose growth failed: {e}");
            }
            for partition in current..total {
                let tp = TopicPartition {
                    topic: name.to_string(),
                    partition,
                };
                if let Err(e) = self.logs.delete_partition(&tp) {
                    warn!(partition = %tp, "cannot remove a partition log whose creation failed: {e}");
                }
            }
            return Err(error);
        }
        self.write().insert(topic.name.clone(), topic.clone());
        info!(topic = %name, from = current, to = total, "partitions created");
        Ok(topic)
    }
}

fn unknown_topic(name: &str) -> TopicError {
    TopicError::new(
        ErrorCode::UnknownTopicOrPartition.code(),
        format!("The topic '{name}' does not exist."),
    )
}

fn record_of(topic: &Topic) -> TopicRecord {
    TopicRecord {
        name: topic.name.clone(),
        id: topic.id.to_be_bytes(),
        partitions: topic.partitions,
        configs: topic.configs.clone(),
    }
}

/// The topic configs of a CreateTopics entry, each validated.
fn validate_configs(
    requested: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, TopicError> {
    let mut configs = BTreeMap::new();
    for (name, value) in requested {
        let Some(value) = value else {
            return Err(TopicError::new(
                ErrorCode::InvalidConfig.code(),
                format!("Null value not supported for topic configs: {name}"),
            ));
        };
        topic_config::validate(name, value)
            .map_err(|message| TopicError::new(ErrorCode::InvalidConfig.code(), message))?;
        configs.insert(name.clone(), value.clone());
    }
    Ok(configs)
}

/// A CreateTopics entry's manual assignment, as Kafka's controller checks
/// it: both counts left at -1 (else INVALID_REQUEST), then the
/// assignment itself ([`assignment::in_partition_order`]).
fn manual_assignment(
    request: &NewTopic,
    registered: &dyn Fn(i32) -> bool,
) -> Result<Vec<Vec<i32>>, TopicError> {
    let invalid_request =
        |message: &str| TopicError::new(ErrorCode::InvalidRequest.code(), message);
    if request.replication_factor != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ));
    }
    if request.num_partitions != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ));
    }
    assignment::in_partition_order(&request.replica_assignment, registered)
        .map_err(invalid_assignment)
}

fn invalid_assignment(message: String) -> TopicError {
    TopicError::new(ErrorCode::InvalidReplicaAssignment.code(), message)
}

/// The log settings a topic's partitions are opened with: each config's
/// effective value (topic override, else broker config, else Kafka's
/// default). Values were validated when set; an unreadable one falls back
/// to Kafka's default.
pub fn log_config_for(overrides: &BTreeMap<String, String>, broker: &BrokerView<'_>) -> LogConfig {
    let value =
        |name: &str| topic_config::effective_value(name, overrides, broker).unwrap_or_default();
    let number = |name: &str, default: i64| value(name).trim().parse::<i64>().unwrap_or(default);
    let defaults = LogConfig::default();
    let policy = value("cleanup.policy");
    let policies: Vec<&str> = policy.split(',').map(str::trim).collect();
    LogConfig {
        segment_bytes: u64::try_from(number("segment.bytes", 1 << 30)).unwrap_or(1 << 30),
        segment_ms: number("segment.ms", defaults.segment_ms),
        max_message_bytes: usize::try_from(number("max.message.bytes", 1_048_588))
            .unwrap_or(1_048_588),
        log_append_time: value("message.timestamp.type") == "LogAppendTime",
        index_interval_bytes: u64::try_from(number("index.interval.bytes", 4096)).unwrap_or(4096),
        flush_messages: number("flush.messages", i64::MAX),
        flush_ms: number("flush.ms", i64::MAX),
        retention_ms: number("retention.ms", defaults.retention_ms),
        retention_bytes: number("retention.bytes", -1),
        delete: policies.contains(&"delete"),
        compact: policies.contains(&"compact"),
        delete_retention_ms: number("delete.retention.ms", defaults.delete_retention_ms),
        min_compaction_lag_ms: number("min.compaction.lag.ms", 0),
        max_compaction_lag_ms: number("max.compaction.lag.ms", i64::MAX),
        min_cleanable_dirty_ratio: value("min.cleanable.dirty.ratio")
            .trim()
            .parse()
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
    }
}

/// Kafka's topic name rules, with Kafka's messages.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    let message = match topic_name::check(name) {
        Ok(()) => return Ok(()),
        Err(Invalid::Empty) => "Topic name is illegal, it can't be empty".to_string(),
        Err(Invalid::Dots) => "Topic name cannot be \".\" or \"..\"".to_string(),
        Err(Invalid::TooLong) => format!(
            "Topic name is illegal, it can't be longer than {MAX_LENGTH} characters, topic name: {name}"
        ),
        Err(Invalid::Character(_)) => format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ),
    };
    Err(TopicError::new(
        ErrorCode::InvalidTopicException.code(),
        message,
    ))
}

/// A random (version 4) UUID that is never Kafka's zero or sentinel id.
pub fn new_topic_id() -> u128 {
    loop {
        let mut bytes = crate::uuid::random_bytes();
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let id = u128::from_be_bytes(bytes);
        if id > 1 {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_name("orders.v1_x-y").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("has space").is_err());
        assert!(validate_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn topic_configs_reach_the_log_config() {
        let mut broker = BrokerConfig::default();
        broker.set_pair("log.retention.ms=5000").unwrap();
        broker.set_pair("message.max.bytes=2000").unwrap();
        let mut overrides = BTreeMap::new();
        overrides.insert("cleanup.policy".to_string(), "compact,delete".to_string());
        overrides.insert("segment.ms".to_string(), "100".to_string());
        overrides.insert("flush.messages".to_string(), "1".to_string());
        let layers = crate::metadata::dynamic::BrokerLayers::default();
        let view = BrokerView {
            layers: &layers,
            config: &broker,
        };
        let config = log_config_for(&overrides, &view);
        assert!(config.compact && config.delete);
        assert_eq!(config.retention_ms, 5000);
        assert_eq!(config.max_message_bytes, 2000);
        assert_eq!(config.segment_ms, 100);
        assert_eq!(config.flush_messages, 1);
        let default_broker = BrokerConfig::default();
        let defaults = log_config_for(
            &BTreeMap::new(),
            &BrokerView {
                layers: &layers,
                config: &default_broker,
            },
        );
        assert_eq!(defaults, LogConfig::default());
    }

    /// A topic manager on `dir` (its logs under `dir/partitions`).
    fn open_in(dir: &std::path::Path, reopen: Reopen) -> TopicManager {
        let mut config = BrokerConfig::default();
        config
            .set_pair(&format!("log.dirs={}", dir.display()))
            .unwrap();
        let logs: Arc<dyn LogStore> =
            Arc::new(crate::log::manager::LogManager::open(&dir.join("partitions")).unwrap());
        let metadata = dir.join("metadata");
        let dynamic = Arc::new(DynamicConfigs::open(&metadata).unwrap());
        let store = MetadataStore::open(&metadata).unwrap();
        TopicManager::open_with(Arc::new(config), dynamic, logs, store, reopen).unwrap()
    }

    #[test]
    fn a_cluster_broker_reopens_only_the_logs_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let tps = |names: &[(&str, i32)]| -> Vec<TopicPartition> {
            names
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect()
        };
        {
            let topics = open_in(dir.path(), Reopen::Found);
            let topic = Topic {
                name: "t".into(),
                id: 7,
                partitions: 3,
                configs: BTreeMap::new(),
            };
            // The image makes this broker a replica of partition 1 only.
            topics.adopt(topic, &[1]).unwrap();
            assert_eq!(topics.local_partitions(), tps(&[("t", 1)]));
        }
        // A restart in a cluster: the stored topic has 3 partitions, but
        // only the log found comes back (no empty logs for the others).
        {
            let topics = open_in(dir.path(), Reopen::Found);
            assert_eq!(topics.get("t").map(|t| t.partitions), Some(3));
            assert_eq!(topics.local_partitions(), tps(&[("t", 1)]));
            // A config change reaches the log held, and creates no other.
            let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
            topics.set_configs("t", configs).unwrap();
            topics.reapply_configs().unwrap();
            assert_eq!(topics.local_partitions(), tps(&[("t", 1)]));
            topics.remove_logs(&tps(&[("t", 1)])).unwrap();
            assert!(topics.local_partitions().is_empty());
            assert_eq!(topics.get("t").map(|t| t.partitions), Some(3));
        }
        // A single broker has every partition, recreated where missing.
        let topics = open_in(dir.path(), Reopen::Every);
        assert_eq!(
            topics.local_partitions(),
            tps(&[("t", 0), ("t", 1), ("t", 2)])
        );
    }

    /// A topic manager over `dir` and its broker's node id.
    fn manager(dir: &tempfile::TempDir) -> (TopicManager, i32) {
        let mut config = BrokerConfig::default();
        config
            .set_pair(&format!("log.dirs={}", dir.path().display()))
            .unwrap();
        let node_id = config.node_id().unwrap();
        let logs: Arc<dyn LogStore> = Arc::new(
            crate::log::manager::LogManager::open(&dir.path().join("partitions")).unwrap(),
        );
        let metadata = dir.path().join("metadata");
        let dynamic = Arc::new(DynamicConfigs::open(&metadata).unwrap());
        let store = MetadataStore::open(&metadata).unwrap();
        let topics = TopicManager::open(Arc::new(config), dynamic, logs, store).unwrap();
        (topics, node_id)
    }

    #[test]
    fn manual_assignments_name_this_broker_with_both_counts_left_at_minus_one() {
        let dir = tempfile::tempdir().unwrap();
        let (topics, node) = manager(&dir);
        let new = |assignment: Vec<(i32, Vec<i32>)>, counts: (i32, i16)| NewTopic {
            name: "manual".to_string(),
            num_partitions: counts.0,
            replication_factor: counts.1,
            configs: Vec::new(),
            replica_assignment: assignment,
        };
        let code = |request: &NewTopic| topics.create(request, node, true).map_err(|e| e.code);
        let valid = vec![(1, vec![node]), (0, vec![node])];
        let created = topics.create(&new(valid.clone(), (-1, -1)), node, false);
        assert_eq!(created.map(|t| t.partitions), Ok(2));
        let invalid_request = Err(ErrorCode::InvalidRequest.code());
        assert_eq!(code(&new(valid.clone(), (2, -1))), invalid_request);
        assert_eq!(code(&new(valid, (-1, 1))), invalid_request);
        let invalid = Err(ErrorCode::InvalidReplicaAssignment.code());
        assert_eq!(code(&new(vec![(0, vec![node + 1])], (-1, -1))), invalid);
        assert_eq!(code(&new(vec![(1, vec![node])], (-1, -1))), invalid);
    }

    #[test]
    fn counts_over_kafkas_caps_are_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let (topics, node_id) = manager(&dir);
        let topics = &topics;
        let new = |name: &str, num_partitions: i32| NewTopic {
            name: name.to_string(),
            num_partitions,
            replication_factor: 1,
            configs: Vec::new(),
            replica_assignment: Vec::new(),
        };
        let refused = |result: Result<Topic, TopicError>| {
            let error = result.unwrap_err();
            (error.code, error.message)
        };
        let policy = |message: &str| (ErrorCode::PolicyViolation.code(), message.to_string());
        for validate_only in [true, false] {
            let huge = topics.create(&new("huge", i32::MAX), node_id, validate_only);
            assert_eq!(refused(huge), policy(bounds::TOO_MANY_PARTITIONS));
            // 10000 partitions and the topic record are 10001 records.
            let edge = topics.create(&new("edge", 10_000), node_id, validate_only);
            assert_eq!(refused(edge), policy(bounds::TOO_MANY_RECORDS));
        }
        assert!(topics.list().is_empty());

        topics.create(&new("small", 1), node_id, false).unwrap();
        for validate_only in [true, false] {
            let grown = topics.create_partitions("small", i32::MAX, None, node_id, validate_only);
            assert_eq!(refused(grown), policy(bounds::TOO_MANY_RECORDS));
        }
        assert_eq!(topics.get("small").map(|t| t.partitions), Some(1));
        let grown = topics.create_partitions("small", 10_001, None, node_id, true);
        assert_eq!(
            grown.map(|t| t.partitions),
            Ok(10_001),
            "10000 new ones fit"
        );
    }

    #[test]
    fn topic_ids_are_v4_uuids() {
        let id = new_topic_id();
        let bytes = id.to_be_bytes();
        assert_eq!(bytes[6] >> 4, 4);
        assert_ne!(id, new_topic_id());
    }
}
