//! BROKER: this broker (resource name = node id: every broker config) or
//! the cluster-wide default (name ""): only the dynamic ones
//! (`metadata::broker_config`) can change; a change reaches every
//! partition log.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{apply_ops, AlterEntry, ConfigError, ConfigResource, DescribedSynonym, Description};
use crate::config::BrokerConfig;
use crate::error_code::ErrorCode;
use crate::metadata::broker_config::{self, ConfigType};
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::topic_config::{BrokerView, Source, Synonym};
use crate::metadata::topics::TopicManager;

pub(super) struct BrokerConfigs {
    pub(super) node_id: i32,
    pub(super) config: Arc<BrokerConfig>,
    pub(super) dynamic: Arc<DynamicConfigs>,
    /// A change reaches every partition log through the topics.
    pub(super) topics: Arc<TopicManager>,
}

impl ConfigResource for BrokerConfigs {
    fn describe(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.describe_broker(name)
    }

    fn incremental_alter(
        &self,
        name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        let per_broker = self.broker_target(name, false)?;
        let layers = self.dynamic.broker_layers();
        let current = if per_broker {
            layers.per_broker
        } else {
            layers.cluster_default
        };
        let next = apply_ops(&current, entries, &broker_is_list, &|name| {
            broker_config::definition(name)
                .and_then(|def| def.default)
                .map(str::to_string)
        })?;
        self.store_broker(per_broker, next, validate_only)
    }

    fn replace(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        let per_broker = self.broker_target(name, false)?;
        self.store_broker(per_broker, configs, validate_only)
    }
}

impl BrokerConfigs {
    /// The broker resource name: "" (cluster default, false) or this node's
    /// id (true).
    fn broker_target(&self, name: &str, describing: bool) -> Result<bool, ConfigError> {
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
        if id != self.node_id {
            return Err(ConfigError::invalid_request(if describing {
                format!(
                    "Unexpected broker id, expected {} or empty string, but received {name}",
                    self.node_id
                )
            } else {
                format!(
                    "Unexpected broker id, expected {}, but received {name}",
                    self.node_id
                )
            }));
        }
        Ok(true)
    }

    fn describe_broker(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        let per_broker = self.broker_target(name, true)?;
        let layers = self.dynamic.broker_layers();
        let view = BrokerView {
            layers: &layers,
            config: &self.config,
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
        names.extend(self.config.known_names());
        names.extend(layers.per_broker.keys().cloned());
        names.extend(layers.cluster_default.keys().cloned());
        Ok(names.iter().map(|name| broker_entry(&view, name)).collect())
    }

    fn store_broker(
        &self,
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
        self.dynamic
            .set_broker(per_broker, configs)
            .map_err(|error| {
                ConfigError::new(ErrorCode::KafkaStorageError.code(), error.to_string())
            })?;
        self.topics.reapply_configs()?;
        Ok(())
    }
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

fn broker_is_list(name: &str) -> Result<bool, ConfigError> {
    match broker_config::definition(name) {
        Some(def) => Ok(def.config_type == ConfigType::List),
        None => Err(ConfigError::invalid_config(format!(
            "Unknown config name: {name}"
        ))),
    }
}
