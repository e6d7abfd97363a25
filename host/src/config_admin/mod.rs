//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs as Kafka's
//! ConfigHelper, ConfigAdminManager and the controller's
//! ConfigurationControlManager answer them. Each config resource type
//! Gregor has is one module behind [`ConfigResource`]:
//!
//! - TOPIC (`topic`): a topic's overrides, stored with the topic;
//! - BROKER (`broker`): this broker's or the cluster default's dynamic
//!   broker configs: Gregor's own, and every other one Kafka 4 has
//!   (`catalog`, generated data), stored without effect;
//! - BROKER_LOGGER (`broker_logger`): this broker's log levels (KIP-412);
//! - CLIENT_METRICS (`client_metrics`): KIP-714 subscriptions;
//! - GROUP (`group`, KIP-848): a group's overrides of the coordinator
//!   settings.
//!
//! This module checks what every request shares (Kafka's preprocessing:
//! no name twice, no null value except for DELETE), applies incremental
//! operations to a resource's current config, and routes by type.
//!
//! On a node of a cluster, validated changes (all but BROKER_LOGGER's,
//! which are per node) go to the metadata log (`log`) instead of the
//! stores, which follow the log.
//!
//! Errors: unknown names and invalid values are INVALID_CONFIG with a
//! message; a malformed request (duplicate or null entries, a broker id
//! other than this node, a non-dynamic broker config) is INVALID_REQUEST.

mod broker;
mod broker_logger;
mod catalog;
pub mod client_metrics;
mod group;
mod log;
mod topic;

pub use log::{differences, ConfigLog};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use crate::config::BrokerConfig;
use crate::error_code::ErrorCode;
use crate::metadata::broker_config::ConfigType;
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::topic_config::Source;
use crate::metadata::topics::{self, TopicManager};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Broker,
    BrokerLogger,
    ClientMetrics,
    Group,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub code: i16,
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest.code(), message)
    }

    pub(crate) fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig.code(), message)
    }

    /// A resource's configs could not be stored.
    pub(crate) fn storage(error: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::KafkaStorageError.code(), error.to_string())
    }
}

impl From<topics::TopicError> for ConfigError {
    fn from(error: topics::TopicError) -> Self {
        Self::new(error.code, error.message)
    }
}

/// One synonym as DescribeConfigs reports it (sensitive values hidden).
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: Source,
}

/// One config as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    pub name: String,
    pub value: Option<String>,
    pub source: Source,
    pub read_only: bool,
    pub sensitive: bool,
    pub synonyms: Vec<DescribedSynonym>,
    pub config_type: ConfigType,
    pub documentation: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterOp {
    Set,
    Delete,
    Append,
    Subtract,
}

impl AlterOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AlterOp::Set => "SET",
            AlterOp::Delete => "DELETE",
            AlterOp::Append => "APPEND",
            AlterOp::Subtract => "SUBTRACT",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterEntry {
    pub name: String,
    pub op: AlterOp,
    pub value: Option<String>,
}

/// One config resource type: how its configs are described and changed.
/// Entries reach it already checked (no duplicate names, no null values
/// but for DELETE).
trait ConfigResource {
    /// DescribeConfigs: every config of the resource `name`.
    fn describe(&self, name: &str) -> Result<Vec<Description>, ConfigError>;

    /// IncrementalAlterConfigs: `entries` applied in order to the
    /// resource's current config (see [`apply_ops`]).
    fn incremental_alter(
        &self,
        name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError>;

    /// AlterConfigs (legacy): `configs` replace the resource's whole
    /// dynamic config.
    fn replace(&self, name: &str, configs: Configs, validate_only: bool)
        -> Result<(), ConfigError>;
}

/// A resource's dynamic config: config name to value.
type Configs = BTreeMap<String, String>;

/// A resource whose dynamic config is one [`Configs`] map: both alter
/// requests compute the whole next map, which is validated and, unless
/// validating only, persisted; a resource type says only how its name is
/// checked and its map is read, typed, validated and stored (BROKER_LOGGER
/// is not one: its changes are level changes, applied at once).
trait StoredConfigs {
    /// DescribeConfigs: every config of the resource `name`.
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError>;

    /// Refuses a resource name that cannot be changed.
    fn check_name(&self, name: &str) -> Result<(), ConfigError>;

    /// The resource's current dynamic config (`name` already checked).
    fn current(&self, name: &str) -> Result<Configs, ConfigError>;

    /// Whether config `config` is a LIST (APPEND and SUBTRACT apply); by
    /// default none is.
    fn is_list(&self, _config: &str) -> Result<bool, ConfigError> {
        Ok(false)
    }

    /// The value a LIST operation starts from where the resource has none.
    fn default_of(&self, _config: &str) -> Option<String> {
        None
    }

    /// Refuses a next config the resource cannot take.
    fn validate(&self, name: &str, configs: &Configs) -> Result<(), ConfigError>;

    /// Stores a validated next config.
    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError>;
}

impl<T: StoredConfigs> ConfigResource for T {
    fn describe(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.describe_configs(name)
    }

    fn incremental_alter(
        &self,
        name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        self.check_name(name)?;
        let current = self.current(name)?;
        let next = apply_ops(
            &current,
            entries,
            &|config| self.is_list(config),
            &|config| self.default_of(config),
        )?;
        self.replace(name, next, validate_only)
    }

    fn replace(
        &self,
        name: &str,
        configs: Configs,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        self.check_name(name)?;
        self.validate(name, &configs)?;
        if validate_only {
            return Ok(());
        }
        self.persist(name, configs)
    }
}

/// The config administration service: one handler per resource type, each
/// holding only the services it reads and changes.
pub struct ConfigAdmin {
    topic: topic::TopicConfigs,
    broker: broker::BrokerConfigs,
    broker_logger: broker_logger::BrokerLoggers,
    client_metrics: client_metrics::ClientMetricsConfigs,
    group: group::GroupConfigs,
    /// Set on a node of a cluster: changes go there.
    log: OnceLock<Arc<dyn ConfigLog>>,
}

impl ConfigAdmin {
    pub fn new(
        node_id: i32,
        config: Arc<BrokerConfig>,
        topics: Arc<TopicManager>,
        dynamic: Arc<DynamicConfigs>,
    ) -> Self {
        Self {
            topic: topic::TopicConfigs {
                topics: Arc::clone(&topics),
            },
            broker: broker::BrokerConfigs {
                node_id,
                config: Arc::clone(&config),
                dynamic: Arc::clone(&dynamic),
                topics,
            },
            broker_logger: broker_logger::BrokerLoggers { node_id },
            client_metrics: client_metrics::ClientMetricsConfigs {
                dynamic: Arc::clone(&dynamic),
            },
            group: group::GroupConfigs { config, dynamic },
            log: OnceLock::new(),
        }
    }

    /// Sends every later validated change to `log` (a node of a cluster).
    pub fn follow(&self, log: Arc<dyn ConfigLog>) {
        let _ = self.log.set(log);
    }

    /// Runs a change on the resource type's handler: on a node of a
    /// cluster one whose validated changes go to the log.
    fn altering<R>(
        &self,
        resource_type: ResourceType,
        change: impl FnOnce(&dyn ConfigResource) -> R,
    ) -> R {
        let Some(log) = self.log.get() else {
            return change(self.resource(resource_type));
        };
        let log = log.as_ref();
        match resource_type {
            ResourceType::Topic => change(&log::Logged::new(&self.topic, log, resource_type)),
            ResourceType::Broker => change(&log::Logged::new(&self.broker, log, resource_type)),
            ResourceType::ClientMetrics => {
                change(&log::Logged::new(&self.client_metrics, log, resource_type))
            }
            ResourceType::Group => change(&log::Logged::new(&self.group, log, resource_type)),
            ResourceType::BrokerLogger => change(&self.broker_logger),
        }
    }

    fn resource(&self, resource_type: ResourceType) -> &dyn ConfigResource {
        match resource_type {
            ResourceType::Topic => &self.topic,
            ResourceType::Broker => &self.broker,
            ResourceType::BrokerLogger => &self.broker_logger,
            ResourceType::ClientMetrics => &self.client_metrics,
            ResourceType::Group => &self.group,
        }
    }

    /// DescribeConfigs for one resource; `names` none or empty: every config.
    pub fn describe(
        &self,
        resource_type: ResourceType,
        resource_name: &str,
        names: Option<&[String]>,
    ) -> Result<Vec<Description>, ConfigError> {
        let mut all = self.resource(resource_type).describe(resource_name)?;
        if let Some(names) = names.filter(|names| !names.is_empty()) {
            all.retain(|entry| names.contains(&entry.name));
        }
        Ok(all)
    }

    /// IncrementalAlterConfigs for one resource.
    pub fn incremental_alter(
        &self,
        resource_type: ResourceType,
        resource_name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        check_entries(entries.iter().map(|e| {
            (
                e.name.as_str(),
                e.op != AlterOp::Delete && e.value.is_none(),
            )
        }))?;
        self.altering(resource_type, |resource| {
            resource.incremental_alter(resource_name, entries, validate_only)
        })
    }

    /// AlterConfigs (legacy) for one resource: `configs` replace the
    /// resource's whole dynamic config.
    pub fn replace(
        &self,
        resource_type: ResourceType,
        resource_name: &str,
        configs: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        check_entries(
            configs
                .iter()
                .map(|(name, value)| (name.as_str(), value.is_none())),
        )?;
        let next: BTreeMap<String, String> = configs
            .iter()
            .filter_map(|(name, value)| value.as_ref().map(|v| (name.clone(), v.clone())))
            .collect();
        self.altering(resource_type, |resource| {
            resource.replace(resource_name, next, validate_only)
        })
    }
}

/// A broker resource name as a node id; `what` names the id in the error
/// ("Broker id" when describing, "Node id" when changing, as Kafka).
fn node_id_of(name: &str, what: &str) -> Result<i32, ConfigError> {
    name.parse::<i32>().map_err(|_| {
        ConfigError::invalid_request(format!("{what} must be an integer, but it is: {name}"))
    })
}

/// Kafka's preprocessing: no name twice, no null value except for DELETE.
fn check_entries<'a>(entries: impl Iterator<Item = (&'a str, bool)>) -> Result<(), ConfigError> {
    let mut seen = BTreeSet::new();
    let mut nulls = Vec::new();
    for (name, null) in entries {
        if !seen.insert(name) {
            return Err(ConfigError::invalid_request(
                "Error due to duplicate config keys",
            ));
        }
        if null {
            nulls.push(name);
        }
    }
    if !nulls.is_empty() {
        return Err(ConfigError::invalid_request(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    Ok(())
}

/// Applies incremental operations to a resource's current dynamic config:
/// APPEND and SUBTRACT only to LIST configs (`is_list`), starting from the
/// default (`default_of`) when the resource has no value of its own.
pub(crate) fn apply_ops(
    current: &BTreeMap<String, String>,
    entries: &[AlterEntry],
    is_list: &dyn Fn(&str) -> Result<bool, ConfigError>,
    default_of: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut next = current.clone();
    for entry in entries {
        let value = entry.value.clone().unwrap_or_default();
        match entry.op {
            AlterOp::Set => {
                next.insert(entry.name.clone(), value);
            }
            AlterOp::Delete => {
                next.remove(&entry.name);
            }
            AlterOp::Append | AlterOp::Subtract => {
                if !is_list(&entry.name)? {
                    return Err(ConfigError::invalid_config(format!(
                        "Can't {} to key {} because its type is not LIST.",
                        entry.op.name(),
                        entry.name
                    )));
                }
                let old = next
                    .get(&entry.name)
                    .cloned()
                    .or_else(|| default_of(&entry.name))
                    .unwrap_or_default();
                let mut items: Vec<String> = old
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(str::to_string)
                    .collect();
                for item in value.split(',').map(str::trim) {
                    if entry.op == AlterOp::Append {
                        if !item.is_empty() && !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                next.insert(entry.name.clone(), items.join(","));
            }
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::topic_config;

    pub(crate) fn entry(name: &str, op: AlterOp, value: Option<&str>) -> AlterEntry {
        AlterEntry {
            name: name.into(),
            op,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn incremental_operations_follow_kafka() {
        let current = BTreeMap::from([("retention.ms".to_string(), "5".to_string())]);
        let ops = [
            entry("cleanup.policy", AlterOp::Append, Some("compact")),
            entry("retention.ms", AlterOp::Delete, None),
            entry("segment.ms", AlterOp::Set, Some("100")),
        ];
        let next = apply_ops(&current, &ops, &topic::topic_is_list, &|name| {
            topic_config::definition(name).map(|d| d.default.to_string())
        })
        .unwrap();
        assert_eq!(next.get("cleanup.policy").unwrap(), "delete,compact");
        assert!(!next.contains_key("retention.ms"));
        let subtract = [entry("cleanup.policy", AlterOp::Subtract, Some("delete"))];
        let next = apply_ops(&next, &subtract, &topic::topic_is_list, &|_| None).unwrap();
        assert_eq!(next.get("cleanup.policy").unwrap(), "compact");
        let bad = [entry("retention.ms", AlterOp::Append, Some("1"))];
        let error = apply_ops(&next, &bad, &topic::topic_is_list, &|_| None).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidConfig.code());
        assert!(error.message.contains("not LIST"), "{}", error.message);
    }

    #[test]
    fn malformed_entries_are_invalid_requests() {
        let duplicate = check_entries([("a", false), ("a", false)].into_iter()).unwrap_err();
        assert_eq!(duplicate.code, ErrorCode::InvalidRequest.code());
        let null = check_entries([("a", true)].into_iter()).unwrap_err();
        assert!(null.message.contains("Null value"));
    }
}
