//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs as Kafka's
//! ConfigHelper, ConfigAdminManager and the controller's
//! ConfigurationControlManager answer them, for the resources Gregor has:
//!
//! - TOPIC: every topic config with its effective value; changes are the
//!   topic's overrides, stored with the topic and applied to its partition
//!   logs at once.
//! - BROKER: this broker (resource name = node id: every broker config) or
//!   the cluster-wide default (name ""): only the dynamic ones
//!   (`broker_config`) can change; a change reaches every partition log.
//! - CLIENT_METRICS: KIP-714 subscriptions (`metrics`, `interval.ms`,
//!   `match`), which client telemetry reads.
//! - BROKER_LOGGER: this broker's loggers (`runtime_loggers`), as Kafka's
//!   ConfigHelper and RuntimeLoggerManager (KIP-412): every logger with its
//!   effective level (DYNAMIC_BROKER_LOGGER_CONFIG, never read-only); SET
//!   and DELETE change levels at once and are not persisted. The name must
//!   be this node's id. Unknown loggers and levels are INVALID_CONFIG;
//!   deleting the root logger's level, APPEND and SUBTRACT are
//!   INVALID_REQUEST; the legacy AlterConfigs refuses the type.
//!
//! - GROUP (KIP-848): a group's overrides of the coordinator settings
//!   (`coordinator::group_configs`, Kafka's GroupConfig and
//!   GroupConfigManager). Described as Kafka's ConfigHelper
//!   `createGroupConfigEntry`: every group config, the override at
//!   DYNAMIC_GROUP_CONFIG above its broker synonym (`group.consumer.*`,
//!   STATIC_BROKER_CONFIG when the broker was started with a value other
//!   than Kafka's default, else DEFAULT_CONFIG); the group need not exist.
//!   Changes are validated as Kafka's `GroupConfig.validate`, stored with
//!   the dynamic configs and followed by the consumer group coordinator at
//!   once. They outlive the group (DeleteGroups leaves them, as Kafka,
//!   where they are controller records the group coordinator never
//!   deletes). An empty group name is INVALID_REQUEST.
//!
//! Errors: unknown names and invalid values are INVALID_CONFIG with a
//! message; a malformed request (duplicate or null entries, a broker id
//! other than this node, a non-dynamic broker config) is INVALID_REQUEST.

use std::collections::{BTreeMap, BTreeSet};

use regex_automata::meta::Regex;

use crate::broker::Broker;
use crate::coordinator::group_configs;
use crate::coordinator::GroupConfig;
use crate::metadata::broker_config::{self, ConfigType};
use crate::metadata::topic_config::{self, BrokerView, Kind, Source, Synonym};
use crate::metadata::topics;
use crate::runtime_loggers::{self, Change, Level, RuntimeLoggers, ROOT_LOGGER, VALID_LEVELS};

/// Kafka error codes of config administration.
pub mod codes {
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const INVALID_CONFIG: i16 = 40;
    pub const INVALID_REQUEST: i16 = 42;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
}

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
    fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST, message)
    }

    fn invalid_config(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_CONFIG, message)
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
    fn name(self) -> &'static str {
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

/// The client-metrics subscription configs (KIP-714).
const CLIENT_METRICS_CONFIGS: &[(&str, ConfigType, &str)] = &[
    (
        "interval.ms",
        ConfigType::Int,
        "How often matching clients push their metrics (100 to 3600000 ms).",
    ),
    (
        "match",
        ConfigType::List,
        "Client selectors NAME=REGEX (client_instance_id, client_id, client_software_name, \
         client_software_version, client_source_address, client_source_port); none: every client.",
    ),
    (
        "metrics",
        ConfigType::List,
        "Metric name prefixes the clients should push; * for all.",
    ),
];
const CLIENT_MATCH_NAMES: &[&str] = &[
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];
pub const DEFAULT_PUSH_INTERVAL_MS: i32 = 5 * 60 * 1000;

// ---------------------------------------------------------------- describe

/// DescribeConfigs for one resource; `names` none or empty: every config.
pub fn describe(
    broker: &Broker,
    resource_type: ResourceType,
    resource_name: &str,
    names: Option<&[String]>,
) -> Result<Vec<Description>, ConfigError> {
    let mut all = match resource_type {
        ResourceType::Topic => describe_topic(broker, resource_name)?,
        ResourceType::Broker => describe_broker(broker, resource_name)?,
        ResourceType::ClientMetrics => describe_client_metrics(broker, resource_name)?,
        ResourceType::BrokerLogger => describe_broker_loggers(broker, resource_name)?,
        ResourceType::Group => describe_group(broker, resource_name)?,
    };
    if let Some(names) = names.filter(|names| !names.is_empty()) {
        all.retain(|entry| names.contains(&entry.name));
    }
    Ok(all)
}

// ------------------------------------------------------------------ groups

fn check_group_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid_request("Group name must not be empty"));
    }
    Ok(())
}

/// The broker's group coordinator settings (validated at startup).
fn group_settings(broker: &Broker) -> Result<GroupConfig, ConfigError> {
    GroupConfig::from_broker(&broker.config)
        .map_err(|error| ConfigError::new(codes::UNKNOWN_SERVER_ERROR, error.to_string()))
}

/// Kafka's `createGroupConfigEntry` for every group config.
fn describe_group(broker: &Broker, name: &str) -> Result<Vec<Description>, ConfigError> {
    check_group_name(name)?;
    let settings = group_settings(broker)?;
    let overrides = broker.dynamic.group_configs_of(name);
    Ok(group_configs::GROUP_CONFIGS
        .iter()
        .map(|def| group_entry(&broker.config, &settings, &overrides, def))
        .collect())
}

fn group_entry(
    config: &crate::config::BrokerConfig,
    settings: &GroupConfig,
    overrides: &BTreeMap<String, String>,
    def: &group_configs::Definition,
) -> Description {
    let mut synonyms = Vec::new();
    if let Some(value) = overrides.get(def.name) {
        synonyms.push(DescribedSynonym {
            name: def.name.to_string(),
            value: Some(value.clone()),
            source: Source::Group,
        });
    }
    let broker_value = group_configs::broker_value(settings, def);
    synonyms.push(match def.broker_synonym {
        Some(synonym) => DescribedSynonym {
            name: synonym.to_string(),
            source: if config.explicit(synonym).is_some() && broker_value != def.default {
                Source::StaticBroker
            } else {
                Source::Default
            },
            value: Some(broker_value),
        },
        None => DescribedSynonym {
            name: def.name.to_string(),
            value: Some(broker_value),
            source: Source::Default,
        },
    });
    let head = synonyms[0].clone();
    Description {
        name: def.name.to_string(),
        value: head.value,
        source: head.source,
        read_only: false,
        sensitive: false,
        synonyms,
        config_type: match def.kind {
            group_configs::Kind::Int { .. } => ConfigType::Int,
            group_configs::Kind::OneOf(_) => ConfigType::String,
        },
        documentation: Some(def.doc.to_string()),
    }
}

/// Validates a group's new overrides and, unless validating only, stores
/// them (an empty set removes the group's configs).
fn store_group(
    broker: &Broker,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ConfigError> {
    group_configs::validate(&configs, &group_settings(broker)?)
        .map_err(ConfigError::invalid_config)?;
    if validate_only {
        return Ok(());
    }
    broker
        .dynamic
        .set_group_configs(name, configs)
        .map_err(|error| ConfigError::new(codes::KAFKA_STORAGE_ERROR, error.to_string()))
}

fn describe_topic(broker: &Broker, name: &str) -> Result<Vec<Description>, ConfigError> {
    topics::validate_name(name)?;
    let Some(configs) = broker.topics.configs(name) else {
        return Err(ConfigError::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        ));
    };
    Ok(configs
        .into_iter()
        .map(|entry| {
            let def = topic_config::definition(entry.name);
            Description {
                name: entry.name.to_string(),
                value: Some(entry.value),
                source: entry.source,
                read_only: false,
                sensitive: false,
                synonyms: entry.synonyms.into_iter().map(described).collect(),
                config_type: def.map_or(ConfigType::Unknown, |def| topic_type(def.kind)),
                documentation: Some(topic_doc(entry.name).to_string()),
            }
        })
        .collect())
}

fn described(synonym: Synonym) -> DescribedSynonym {
    DescribedSynonym {
        name: synonym.name,
        value: Some(synonym.value),
        source: synonym.source,
    }
}

fn topic_type(kind: Kind) -> ConfigType {
    match kind {
        Kind::Long { .. } => ConfigType::Long,
        Kind::Int { .. } => ConfigType::Int,
        Kind::Double => ConfigType::Double,
        Kind::Bool => ConfigType::Boolean,
        Kind::OneOf(_) => ConfigType::String,
        Kind::ListOf(_) => ConfigType::List,
    }
}

/// The broker resource name: "" (cluster default, false) or this node's
/// id (true).
fn broker_target(broker: &Broker, name: &str, describing: bool) -> Result<bool, ConfigError> {
    if name.is_empty() {
        return Ok(false);
    }
    let Ok(id) = name.parse::<i32>() else {
        return Err(ConfigError::invalid_request(if describing {
            format!("Broker id must be an integer, but it is: {name}")
        } else {
            format!("Node id must be an integer, but it is: {name}")
        }));
    };
    if id != broker.node_id {
        return Err(ConfigError::invalid_request(if describing {
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.node_id
            )
        } else {
            format!(
                "Unexpected broker id, expected {}, but received {name}",
                broker.node_id
            )
        }));
    }
    Ok(true)
}

fn describe_broker(broker: &Broker, name: &str) -> Result<Vec<Description>, ConfigError> {
    let per_broker = broker_target(broker, name, true)?;
    let layers = broker.dynamic.broker_layers();
    let view = BrokerView {
        layers: &layers,
        config: &broker.config,
    };
    if !per_broker {
        // The cluster default resource shows only what is set there.
        return Ok(layers
            .cluster_default
            .keys()
            .map(|key| {
                let mut entry = broker_entry(&view, key);
                entry
                    .synonyms
                    .retain(|s| s.source == Source::DynamicDefaultBroker);
                entry.source = Source::DynamicDefaultBroker;
                entry.value = if entry.sensitive {
                    None
                } else {
                    layers.cluster_default.get(key).cloned()
                };
                entry
            })
            .collect());
    }
    let mut names: BTreeSet<String> = broker_config::BROKER_CONFIGS
        .iter()
        .map(|def| def.name.to_string())
        .collect();
    names.extend(broker.config.known_names());
    names.extend(layers.per_broker.keys().cloned());
    names.extend(layers.cluster_default.keys().cloned());
    Ok(names.iter().map(|name| broker_entry(&view, name)).collect())
}

/// One broker config as Kafka's `createBrokerConfigEntry` describes it: its
/// synonyms from the first one with its own name on, its value and source
/// from that first one.
fn broker_entry(view: &BrokerView<'_>, name: &str) -> Description {
    let def = broker_config::definition(name);
    let sensitive = match def {
        Some(def) => def.config_type == ConfigType::Password,
        None => broker_config::looks_sensitive(name),
    };
    let group = broker_config::group_of(name);
    let mut synonyms: Vec<Synonym> = if group.is_empty() {
        let mut entries = view.entries(name);
        if entries.is_empty() {
            if let Some(default) = view.config.get(name) {
                entries.push(Synonym {
                    name: name.to_string(),
                    value: default.to_string(),
                    source: Source::Default,
                });
            }
        }
        entries
    } else {
        view.group_entries(&group)
            .into_iter()
            .map(|(entry, _)| entry)
            .collect()
    };
    let own = synonyms
        .iter()
        .position(|s| s.name == name)
        .unwrap_or(synonyms.len());
    synonyms.drain(..own);
    let head = synonyms.first().cloned();
    Description {
        name: name.to_string(),
        value: head
            .as_ref()
            .filter(|_| !sensitive)
            .map(|head| head.value.clone()),
        source: head.as_ref().map_or(Source::Default, |head| head.source),
        read_only: !def.is_some_and(|def| def.dynamic),
        sensitive,
        synonyms: synonyms
            .into_iter()
            .map(|s| DescribedSynonym {
                name: s.name,
                value: (!sensitive).then_some(s.value),
                source: s.source,
            })
            .collect(),
        config_type: def.map_or(ConfigType::String, |def| def.config_type),
        documentation: def.map(|def| def.doc.to_string()),
    }
}

fn describe_client_metrics(broker: &Broker, name: &str) -> Result<Vec<Description>, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid_request(
            "Client metrics subscription name must not be empty",
        ));
    }
    Ok(broker
        .dynamic
        .client_metrics_of(name)
        .into_iter()
        .map(|(key, value)| {
            let def = CLIENT_METRICS_CONFIGS.iter().find(|(n, _, _)| *n == key);
            Description {
                name: key,
                value: Some(value),
                source: Source::ClientMetrics,
                read_only: false,
                sensitive: false,
                synonyms: Vec::new(),
                config_type: def.map_or(ConfigType::Unknown, |d| d.1),
                documentation: def.map(|d| d.2.to_string()),
            }
        })
        .collect())
}

// ---------------------------------------------------------- broker loggers

fn loggers() -> Result<&'static RuntimeLoggers, ConfigError> {
    runtime_loggers::installed().ok_or_else(|| {
        ConfigError::invalid_request("Runtime log levels are not available in this process")
    })
}

/// Kafka's ConfigHelper for BROKER_LOGGER: every logger with its effective
/// level.
fn describe_broker_loggers(broker: &Broker, name: &str) -> Result<Vec<Description>, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid_request("Broker id must not be empty"));
    }
    let Ok(id) = name.parse::<i32>() else {
        return Err(ConfigError::invalid_request(format!(
            "Broker id must be an integer, but it is: {name}"
        )));
    };
    if id != broker.node_id {
        return Err(ConfigError::invalid_request(format!(
            "Unexpected broker id, expected {} but received {name}",
            broker.node_id
        )));
    }
    Ok(loggers()?
        .loggers()
        .into_iter()
        .map(|(name, level)| Description {
            name,
            value: Some(level.name().to_string()),
            source: Source::BrokerLogger,
            read_only: false,
            sensitive: false,
            synonyms: Vec::new(),
            config_type: ConfigType::Unknown,
            documentation: None,
        })
        .collect())
}

/// Kafka's RuntimeLoggerManager: the node id, then every operation is
/// validated (an existing logger, a valid level, no root DELETE, no APPEND
/// or SUBTRACT) before any is applied.
fn alter_broker_loggers(
    broker: &Broker,
    name: &str,
    entries: &[AlterEntry],
    validate_only: bool,
) -> Result<(), ConfigError> {
    let Ok(id) = name.parse::<i32>() else {
        return Err(ConfigError::invalid_request(format!(
            "Node id must be an integer, but it is: {name}"
        )));
    };
    if id != broker.node_id {
        return Err(ConfigError::invalid_request(format!(
            "Unexpected node id. Expected {}, but received {name}",
            broker.node_id
        )));
    }
    let loggers = loggers()?;
    let changes = logger_changes(entries, |logger| loggers.exists(logger))?;
    if validate_only {
        return Ok(());
    }
    loggers
        .apply(&changes)
        .map_err(|message| ConfigError::new(codes::UNKNOWN_SERVER_ERROR, message))
}

/// The changes IncrementalAlterConfigs asks of the loggers, validated as
/// Kafka's `validateLogLevelConfigs`, in order: SET needs an existing logger
/// and a valid level, DELETE an existing logger other than the root;
/// APPEND and SUBTRACT are refused.
fn logger_changes(
    entries: &[AlterEntry],
    exists: impl Fn(&str) -> bool,
) -> Result<Vec<Change>, ConfigError> {
    let exists = |logger: &str| {
        if exists(logger) {
            Ok(())
        } else {
            Err(ConfigError::invalid_config(format!(
                "Logger {logger} does not exist!"
            )))
        }
    };
    let mut changes = Vec::with_capacity(entries.len());
    for entry in entries {
        let logger = entry.name.as_str();
        match entry.op {
            AlterOp::Set => {
                exists(logger)?;
                let value = entry.value.as_deref().unwrap_or_default();
                let Some(level) = Level::parse_kafka(value) else {
                    return Err(ConfigError::invalid_config(format!(
                        "Cannot set the log level of {logger} to {value} as it is not a \
                         supported log level. Valid log levels are {VALID_LEVELS}"
                    )));
                };
                changes.push(Change {
                    logger: logger.to_string(),
                    level: Some(level),
                });
            }
            AlterOp::Delete => {
                exists(logger)?;
                if logger == ROOT_LOGGER {
                    return Err(ConfigError::invalid_request(format!(
                        "Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                    )));
                }
                changes.push(Change {
                    logger: logger.to_string(),
                    level: None,
                });
            }
            AlterOp::Append | AlterOp::Subtract => {
                return Err(ConfigError::invalid_request(format!(
                    "{} operation is not allowed for the BROKER_LOGGER resource",
                    entry.op.name()
                )));
            }
        }
    }
    Ok(changes)
}

// ------------------------------------------------------------------- alter

/// IncrementalAlterConfigs for one resource.
pub fn incremental_alter(
    broker: &Broker,
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
    let apply = |current: &BTreeMap<String, String>,
                 is_list: &dyn Fn(&str) -> Result<bool, ConfigError>,
                 default_of: &dyn Fn(&str) -> Option<String>|
     -> Result<BTreeMap<String, String>, ConfigError> {
        apply_ops(current, entries, is_list, default_of)
    };
    match resource_type {
        ResourceType::Topic => {
            check_topic_name(resource_name)?;
            let current = broker
                .topics
                .get(resource_name)
                .map(|topic| topic.configs)
                .unwrap_or_default();
            let next = apply(&current, &topic_is_list, &|name| {
                topic_config::definition(name).map(|def| def.default.to_string())
            })?;
            store_topic(broker, resource_name, next, validate_only)
        }
        ResourceType::Broker => {
            let per_broker = broker_target(broker, resource_name, false)?;
            let layers = broker.dynamic.broker_layers();
            let current = if per_broker {
                layers.per_broker
            } else {
                layers.cluster_default
            };
            let next = apply(&current, &broker_is_list, &|name| {
                broker_config::definition(name)
                    .and_then(|def| def.default)
                    .map(str::to_string)
            })?;
            store_broker(broker, per_broker, next, validate_only)
        }
        ResourceType::ClientMetrics => {
            check_subscription_name(resource_name)?;
            let current = broker.dynamic.client_metrics_of(resource_name);
            let next = apply(&current, &client_metrics_is_list, &|_| None)?;
            store_client_metrics(broker, resource_name, next, validate_only)
        }
        ResourceType::BrokerLogger => {
            alter_broker_loggers(broker, resource_name, entries, validate_only)
        }
        ResourceType::Group => {
            check_group_name(resource_name)?;
            let current = broker.dynamic.group_configs_of(resource_name);
            // No group config is a LIST: APPEND and SUBTRACT are refused.
            let next = apply(&current, &|_| Ok(false), &|_| None)?;
            store_group(broker, resource_name, next, validate_only)
        }
    }
}

/// AlterConfigs (legacy) for one resource: `configs` replace the resource's
/// whole dynamic config.
pub fn replace(
    broker: &Broker,
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
    match resource_type {
        ResourceType::Topic => {
            check_topic_name(resource_name)?;
            store_topic(broker, resource_name, next, validate_only)
        }
        ResourceType::Broker => {
            let per_broker = broker_target(broker, resource_name, false)?;
            store_broker(broker, per_broker, next, validate_only)
        }
        ResourceType::ClientMetrics => {
            check_subscription_name(resource_name)?;
            store_client_metrics(broker, resource_name, next, validate_only)
        }
        // Legacy AlterConfigs never supported broker loggers.
        ResourceType::BrokerLogger => Err(ConfigError::invalid_request("Unknown resource type 8")),
        ResourceType::Group => {
            check_group_name(resource_name)?;
            store_group(broker, resource_name, next, validate_only)
        }
    }
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

/// Applies incremental operations to a resource's current dynamic config.
fn apply_ops(
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

fn topic_is_list(name: &str) -> Result<bool, ConfigError> {
    Ok(topic_config::definition(name).is_some_and(|def| matches!(def.kind, Kind::ListOf(_))))
}

fn broker_is_list(name: &str) -> Result<bool, ConfigError> {
    match broker_config::definition(name) {
        Some(def) => Ok(def.config_type == ConfigType::List),
        None => Err(ConfigError::invalid_config(format!(
            "Unknown config name: {name}"
        ))),
    }
}

fn client_metrics_is_list(name: &str) -> Result<bool, ConfigError> {
    Ok(CLIENT_METRICS_CONFIGS
        .iter()
        .any(|(n, t, _)| *n == name && *t == ConfigType::List))
}

fn check_topic_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid_request(
            "Default topic resources are not allowed.",
        ));
    }
    topics::validate_name(name)?;
    Ok(())
}

fn check_subscription_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::invalid_request(
            "Subscription name can't be empty",
        ));
    }
    Ok(())
}

/// Validates a topic's new overrides, then (unless validating only) checks
/// the topic exists and stores them, as the controller does.
fn store_topic(
    broker: &Broker,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ConfigError> {
    for (key, value) in &configs {
        topic_config::validate(key, value).map_err(ConfigError::invalid_config)?;
    }
    if broker.topics.get(name).is_none() {
        return Err(ConfigError::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        ));
    }
    if validate_only {
        return Ok(());
    }
    broker.topics.set_configs(name, configs)?;
    Ok(())
}

fn store_broker(
    broker: &Broker,
    per_broker: bool,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ConfigError> {
    let mut read_only = Vec::new();
    for (key, value) in &configs {
        let Some(def) = broker_config::definition(key) else {
            return Err(ConfigError::invalid_config(format!(
                "Unknown broker config name: {key}"
            )));
        };
        if !def.dynamic {
            read_only.push(key.as_str());
            continue;
        }
        broker_config::validate(def, value).map_err(ConfigError::invalid_config)?;
    }
    if !read_only.is_empty() {
        return Err(ConfigError::invalid_request(format!(
            "Cannot update these configs dynamically: Set({})",
            read_only.join(", ")
        )));
    }
    if validate_only {
        return Ok(());
    }
    broker
        .dynamic
        .set_broker(per_broker, configs)
        .map_err(|error| ConfigError::new(codes::KAFKA_STORAGE_ERROR, error.to_string()))?;
    broker.topics.reapply_configs()?;
    Ok(())
}

fn store_client_metrics(
    broker: &Broker,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), ConfigError> {
    validate_client_metrics(&configs)?;
    if validate_only {
        return Ok(());
    }
    broker
        .dynamic
        .set_client_metrics(name, configs)
        .map_err(|error| ConfigError::new(codes::KAFKA_STORAGE_ERROR, error.to_string()))
}

/// Kafka's ClientMetricsConfigs validation.
pub fn validate_client_metrics(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (key, value) in configs {
        match key.as_str() {
            "metrics" => {}
            "interval.ms" => {
                let interval = value.trim().parse::<i64>().map_err(|_| {
                    ConfigError::invalid_config(format!(
                        "Invalid value {value} for configuration interval.ms: Not a number of type INT"
                    ))
                })?;
                if !(100..=3_600_000).contains(&interval) {
                    return Err(ConfigError::invalid_config(format!(
                        "Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
                    )));
                }
            }
            "match" => {
                parse_match_patterns(value)?;
            }
            other => {
                return Err(ConfigError::invalid_config(format!(
                    "Unknown client metrics configuration: {other}"
                )))
            }
        }
    }
    Ok(())
}

/// A client selector of a subscription: attribute name and a regex that
/// must match the whole attribute value.
pub struct MatchPattern {
    pub attribute: String,
    pub regex: Regex,
}

/// Parses `match` (comma-separated NAME=REGEX), as Kafka's
/// `parseMatchingPatterns`.
pub fn parse_match_patterns(value: &str) -> Result<Vec<MatchPattern>, ConfigError> {
    let mut patterns = Vec::new();
    for pattern in value.split(',').filter(|p| !p.trim().is_empty()) {
        let illegal =
            || ConfigError::invalid_config(format!("Illegal client matching pattern: {pattern}"));
        let parts: Vec<&str> = pattern.split('=').collect();
        let [name, regex] = parts.as_slice() else {
            return Err(illegal());
        };
        let name = name.trim();
        if !CLIENT_MATCH_NAMES.contains(&name) {
            return Err(illegal());
        }
        let regex = Regex::new(&format!("^(?:{})$", regex.trim())).map_err(|_| illegal())?;
        patterns.push(MatchPattern {
            attribute: name.to_string(),
            regex,
        });
    }
    Ok(patterns)
}

/// Short documentation of a topic config (DescribeConfigs v3+).
fn topic_doc(name: &str) -> &'static str {
    match name {
        "cleanup.policy" => "How old segments are removed: delete (by retention), compact (keep the latest value per key), or both.",
        "compression.type" => "Compression of stored batches; producer keeps the producer's codec.",
        "delete.retention.ms" => "How long tombstones of a compacted topic are kept.",
        "file.delete.delay.ms" => "How long a deleted segment's files linger before removal.",
        "flush.messages" => "Fsync the log after this many messages.",
        "flush.ms" => "Fsync the log when its oldest unflushed data is this old.",
        "index.interval.bytes" => "Log bytes between two offset index entries.",
        "max.compaction.lag.ms" => "The longest a record stays uncompacted.",
        "max.message.bytes" => "The largest record batch the topic accepts.",
        "message.timestamp.after.max.ms" => "How far in the future a CreateTime timestamp may be.",
        "message.timestamp.before.max.ms" => "How far in the past a CreateTime timestamp may be.",
        "message.timestamp.type" => "CreateTime (the producer's) or LogAppendTime (the broker's).",
        "min.cleanable.dirty.ratio" => "Dirty share of a log that triggers compaction.",
        "min.compaction.lag.ms" => "The shortest a record stays uncompacted.",
        "min.insync.replicas" => "Replicas that must acknowledge an acks=all write.",
        "preallocate" => "Preallocate segment files.",
        "retention.bytes" => "The most a partition keeps before old segments are deleted (-1: no limit).",
        "retention.ms" => "How long records are kept before their segment is deleted (-1: forever).",
        "segment.bytes" => "Size at which a new segment is rolled.",
        "segment.index.bytes" => "Size of a segment's offset index.",
        "segment.jitter.ms" => "Random jitter subtracted from segment.ms.",
        "segment.ms" => "Age at which a new segment is rolled.",
        "unclean.leader.election.enable" => "Whether an out-of-sync replica may become leader.",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_entries_show_the_override_above_the_broker_value() {
        let mut config = crate::config::BrokerConfig::default();
        config
            .set_pair("group.consumer.session.timeout.ms=50000")
            .unwrap();
        let settings = GroupConfig::from_broker(&config).unwrap();
        let overrides = BTreeMap::from([(
            group_configs::CONSUMER_HEARTBEAT_INTERVAL_MS.to_string(),
            "7000".to_string(),
        )]);
        let def = |name| group_configs::definition(name).unwrap();
        let heartbeat = group_entry(
            &config,
            &settings,
            &overrides,
            def(group_configs::CONSUMER_HEARTBEAT_INTERVAL_MS),
        );
        assert_eq!(heartbeat.value.as_deref(), Some("7000"));
        assert_eq!(heartbeat.source, Source::Group);
        assert_eq!(heartbeat.config_type, ConfigType::Int);
        let synonyms: Vec<_> = heartbeat
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
            .collect();
        assert_eq!(
            synonyms,
            [
                (
                    "consumer.heartbeat.interval.ms",
                    Some("7000"),
                    Source::Group
                ),
                (
                    "group.consumer.heartbeat.interval.ms",
                    Some("5000"),
                    Source::Default
                ),
            ]
        );
        // No override: the broker's value, static since set in its config.
        let session = group_entry(
            &config,
            &settings,
            &overrides,
            def(group_configs::CONSUMER_SESSION_TIMEOUT_MS),
        );
        assert_eq!(session.value.as_deref(), Some("50000"));
        assert_eq!(session.source, Source::StaticBroker);
        assert_eq!(
            session.synonyms[0].name,
            "group.consumer.session.timeout.ms"
        );
        // No broker synonym: Kafka's default under the group key's name.
        let reset = group_entry(
            &config,
            &settings,
            &overrides,
            def(group_configs::SHARE_AUTO_OFFSET_RESET),
        );
        assert_eq!(
            (reset.value.as_deref(), reset.source, reset.config_type),
            (Some("latest"), Source::Default, ConfigType::String)
        );
        assert_eq!(reset.synonyms[0].name, "share.auto.offset.reset");
    }

    fn entry(name: &str, op: AlterOp, value: Option<&str>) -> AlterEntry {
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
        let next = apply_ops(&current, &ops, &topic_is_list, &|name| {
            topic_config::definition(name).map(|d| d.default.to_string())
        })
        .unwrap();
        assert_eq!(next.get("cleanup.policy").unwrap(), "delete,compact");
        assert!(!next.contains_key("retention.ms"));
        let subtract = [entry("cleanup.policy", AlterOp::Subtract, Some("delete"))];
        let next = apply_ops(&next, &subtract, &topic_is_list, &|_| None).unwrap();
        assert_eq!(next.get("cleanup.policy").unwrap(), "compact");
        let bad = [entry("retention.ms", AlterOp::Append, Some("1"))];
        let error = apply_ops(&next, &bad, &topic_is_list, &|_| None).unwrap_err();
        assert_eq!(error.code, codes::INVALID_CONFIG);
        assert!(error.message.contains("not LIST"), "{}", error.message);
    }

    #[test]
    fn broker_logger_changes_are_validated_as_kafka() {
        let exists = |logger: &str| matches!(logger, "root" | "gregor" | "gregor::apis");
        let changes = logger_changes(
            &[
                entry("gregor::apis", AlterOp::Set, Some("DEBUG")),
                entry("gregor", AlterOp::Delete, None),
                entry("root", AlterOp::Set, Some("FATAL")),
            ],
            exists,
        )
        .unwrap();
        assert_eq!(
            changes,
            [
                Change {
                    logger: "gregor::apis".into(),
                    level: Some(Level::Debug)
                },
                Change {
                    logger: "gregor".into(),
                    level: None
                },
                Change {
                    logger: "root".into(),
                    level: Some(Level::Fatal)
                },
            ]
        );
        let refused = |op, name: &str, value: Option<&str>| {
            logger_changes(&[entry(name, op, value)], exists).unwrap_err()
        };
        let bad_level = refused(AlterOp::Set, "gregor", Some("debug"));
        assert_eq!(bad_level.code, codes::INVALID_CONFIG);
        assert_eq!(
            bad_level.message,
            "Cannot set the log level of gregor to debug as it is not a supported log level. \
             Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"
        );
        assert_eq!(
            refused(AlterOp::Set, "gregor", Some("OFF")).code,
            codes::INVALID_CONFIG
        );
        let unknown = refused(AlterOp::Set, "nope", Some("INFO"));
        assert_eq!(
            (unknown.code, unknown.message.as_str()),
            (codes::INVALID_CONFIG, "Logger nope does not exist!")
        );
        assert_eq!(
            refused(AlterOp::Delete, "nope", None).code,
            codes::INVALID_CONFIG
        );
        let root = refused(AlterOp::Delete, "root", None);
        assert_eq!(root.code, codes::INVALID_REQUEST);
        assert_eq!(
            root.message,
            "Removing the log level of the root logger is not allowed"
        );
        let append = refused(AlterOp::Append, "gregor", Some("INFO"));
        assert_eq!(
            (append.code, append.message.as_str()),
            (
                codes::INVALID_REQUEST,
                "APPEND operation is not allowed for the BROKER_LOGGER resource"
            )
        );
        assert_eq!(
            refused(AlterOp::Subtract, "gregor", Some("INFO")).code,
            codes::INVALID_REQUEST
        );
        // Nothing is applied when a later operation is refused.
        assert!(logger_changes(
            &[
                entry("gregor", AlterOp::Set, Some("DEBUG")),
                entry("gregor::apis", AlterOp::Set, Some("LOUD")),
            ],
            exists
        )
        .is_err());
    }

    #[test]
    fn malformed_entries_are_invalid_requests() {
        let duplicate = check_entries([("a", false), ("a", false)].into_iter()).unwrap_err();
        assert_eq!(duplicate.code, codes::INVALID_REQUEST);
        let null = check_entries([("a", true)].into_iter()).unwrap_err();
        assert!(null.message.contains("Null value"));
    }

    #[test]
    fn client_metrics_are_validated() {
        let ok = BTreeMap::from([
            (
                "metrics".to_string(),
                "org.apache.kafka.producer.".to_string(),
            ),
            ("interval.ms".to_string(), "1000".to_string()),
            (
                "match".to_string(),
                "client_id=perf.*,client_software_name=librdkafka".to_string(),
            ),
        ]);
        assert!(validate_client_metrics(&ok).is_ok());
        let patterns = parse_match_patterns("client_id=perf.*").unwrap();
        assert!(patterns[0].regex.is_match("perf-1"));
        assert!(!patterns[0].regex.is_match("xperf"));
        for (key, value) in [
            ("interval.ms", "5"),
            ("match", "client_colour=red"),
            ("match", "client_id"),
            ("match", "client_id=(("),
            ("colour", "red"),
        ] {
            let bad = BTreeMap::from([(key.to_string(), value.to_string())]);
            assert_eq!(
                validate_client_metrics(&bad).unwrap_err().code,
                codes::INVALID_CONFIG,
                "{key}={value}"
            );
        }
    }
}
