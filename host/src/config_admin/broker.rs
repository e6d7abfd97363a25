//! BROKER: this broker (resource name = node id: every broker config) or
//! the cluster-wide default (name ""): only the dynamic ones
//! (`metadata::broker_config`) can change; a change reaches every
//! partition log.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{node_id_of, ConfigError, Configs, DescribedSynonym, Description, StoredConfigs};
use crate::config::BrokerConfig;
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

impl StoredConfigs for BrokerConfigs {
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.describe_broker(name)
    }

    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        self.broker_target(name, false).map(drop)
    }

    fn current(&self, name: &str) -> Result<Configs, ConfigError> {
        let layers = self.dynamic.broker_layers();
        Ok(if self.broker_target(name, false)? {
            layers.per_broker
        } else {
            layers.cluster_default
        })
    }

    fn is_list(&self, config: &str) -> Result<bool, ConfigError> {
        match broker_config::definition(config) {
            Some(def) => Ok(def.config_type == ConfigType::List),
            None => Err(ConfigError::invalid_config(format!(
                "Unknown config name: {config}"
            ))),
        }
    }

    fn default_of(&self, config: &str) -> Option<String> {
        broker_config::definition(config)
            .and_then(|def| def.default)
            .map(str::to_string)
    }

    /// Known and valid, and only dynamic configs.
    fn validate(&self, _name: &str, configs: &Configs) -> Result<(), ConfigError> {
        let mut read_only = Vec::new();
        for (key, value) in configs {
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
        Ok(())
    }

    /// Every partition log follows the change.
    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError> {
        let per_broker = self.broker_target(name, false)?;
        self.dynamic
            .set_broker(per_broker, configs)
            .map_err(ConfigError::storage)?;
        self.topics.reapply_configs()?;
        Ok(())
    }
}

impl BrokerConfigs {
    /// The broker resource name: "" (cluster default, false) or this node's
    /// id (true).
    fn broker_target(&self, name: &str, describing: bool) -> Result<bool, ConfigError> {
        if name.is_empty() {
            return Ok(false);
        }
        let id = node_id_of(name, if describing { "Broker id" } else { "Node id" })?;
        if id != self.node_id {
            return Err(ConfigError::invalid_request(format!(
                "Unexpected broker id, expected {}{}, but received {name}",
                self.node_id,
                if describing { " or empty string" } else { "" }
            )));
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
