//! BROKER: this broker (resource name = node id: every broker config) or
//! the cluster-wide default (name ""): only the dynamic ones can change. The
//! configs Gregor acts on are its own table's (`metadata::broker_config`),
//! and a change of one reaches every partition log; every other config
//! Kafka can change dynamically (`catalog`) is checked, stored and
//! described back without effect, as Kafka would store it. A module's
//! `plugin.grants.<module>` (`plugins::grants`) is dynamic too: the loader
//! reads it at the module's next load.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::catalog::{self, Mode};
use super::{node_id_of, ConfigError, Configs, DescribedSynonym, Description, StoredConfigs};
use crate::config::BrokerConfig;
use crate::metadata::broker_config::{self, ConfigType};
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::topic_config::{BrokerView, Source, Synonym};
use crate::metadata::topics::TopicManager;
use crate::plugin_grants as grants;

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
        if config.starts_with(grants::CONFIG_PREFIX) {
            return Ok(true);
        }
        let config_type = match broker_config::definition(config) {
            Some(def) => Some(def.config_type),
            None => catalog::lookup(config).map(catalog::KafkaConfig::config_type),
        };
        match config_type {
            Some(config_type) => Ok(config_type == ConfigType::List),
            None => Err(ConfigError::invalid_config(format!(
                "Unknown config name: {config}"
            ))),
        }
    }

    fn default_of(&self, config: &str) -> Option<String> {
        match broker_config::definition(config) {
            Some(def) => def.default.map(str::to_string),
            None => catalog::lookup(config).and_then(|kafka| kafka.default.clone()),
        }
    }

    /// Known and valid, and only dynamic configs: Gregor's by its table,
    /// the others by Kafka's catalog, refused with Kafka's messages in
    /// Kafka's order (read-only, listener-only, then per-broker ones on
    /// the cluster default).
    fn validate(&self, name: &str, configs: &Configs) -> Result<(), ConfigError> {
        let per_broker = self.broker_target(name, false)?;
        let mut read_only = Vec::new();
        let mut listener_only = Vec::new();
        let mut broker_only = Vec::new();
        for (key, value) in configs {
            if let Some(def) = broker_config::definition(key) {
                if def.dynamic {
                    broker_config::validate(def, value).map_err(ConfigError::invalid_config)?;
                } else {
                    read_only.push(key.as_str());
                }
                continue;
            }
            if key.starts_with(grants::CONFIG_PREFIX) {
                grants::parse(value).map_err(ConfigError::invalid_config)?;
                continue;
            }
            let Some(kafka) = catalog::lookup(key) else {
                return Err(ConfigError::invalid_config(format!(
                    "Unknown broker config name: {key}"
                )));
            };
            if !kafka.dynamic() {
                read_only.push(key.as_str());
            } else if kafka.listener_only {
                listener_only.push(key.as_str());
            } else {
                kafka.check(value).map_err(ConfigError::invalid_config)?;
                if kafka.mode == Mode::PerBroker && !per_broker {
                    broker_only.push(key.as_str());
                }
            }
        }
        refuse(&read_only, "Cannot update these configs dynamically")?;
        refuse(
            &listener_only,
            "These security configs can be dynamically updated only per-listener using the listener prefix",
        )?;
        refuse(
            &broker_only,
            "Cannot update these configs at default cluster level, broker id must be specified",
        )
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

/// INVALID_REQUEST naming `names` as Kafka's `Set(...)`, if any.
fn refuse(names: &[&str], message: &str) -> Result<(), ConfigError> {
    if names.is_empty() {
        return Ok(());
    }
    Err(ConfigError::invalid_request(format!(
        "{message}: Set({})",
        names.join(", ")
    )))
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
        names.extend(catalog::all().iter().map(|kafka| kafka.name.clone()));
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
    // Kafka's entry for a config outside Gregor's table.
    let kafka = def.is_none().then(|| catalog::lookup(name)).flatten();
    let config_type = match (def, kafka) {
        (Some(def), _) => Some(def.config_type),
        (None, kafka) => kafka.map(catalog::KafkaConfig::config_type),
    };
    let sensitive = match config_type {
        Some(config_type) => config_type == ConfigType::Password,
        None => broker_config::looks_sensitive(name),
    };
    let group = broker_config::group_of(name);
    let mut synonyms: Vec<Synonym> = if group.is_empty() {
        let mut entries = view.entries(name);
        if entries.is_empty() {
            let default = view
                .config
                .get(name)
                .map(str::to_string)
                .or_else(|| kafka.and_then(|kafka| kafka.default.clone()));
            if let Some(default) = default {
                entries.push(Synonym {
                    name: name.to_string(),
                    value: default,
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
        read_only: !(def.is_some_and(|def| def.dynamic)
            || kafka.is_some_and(catalog::KafkaConfig::dynamic)
            || name.starts_with(grants::CONFIG_PREFIX)),
        sensitive,
        synonyms: synonyms
            .into_iter()
            .map(|s| DescribedSynonym {
                name: s.name,
                value: (!sensitive).then_some(s.value),
                source: s.source,
            })
            .collect(),
        config_type: config_type.unwrap_or(ConfigType::String),
        documentation: match (def, kafka) {
            (Some(def), _) => Some(def.doc.to_string()),
            (None, kafka) => kafka.map(catalog::KafkaConfig::documentation),
        },
    }
}
