//! GROUP (KIP-848): a group's overrides of the coordinator settings
//! (`coordinator::group_configs`, Kafka's GroupConfig and
//! GroupConfigManager). Described as Kafka's ConfigHelper
//! `createGroupConfigEntry`: every group config, the override at
//! DYNAMIC_GROUP_CONFIG above its broker synonym (`group.consumer.*`,
//! STATIC_BROKER_CONFIG when the broker was started with a value other
//! than Kafka's default, else DEFAULT_CONFIG); the group need not exist.
//! Changes are validated as Kafka's `GroupConfig.validate`, stored with
//! the dynamic configs and followed by the consumer group coordinator at
//! once. They outlive the group (DeleteGroups leaves them, as Kafka,
//! where they are controller records the group coordinator never
//! deletes). An empty group name is INVALID_REQUEST.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ConfigError, Configs, DescribedSynonym, Description, StoredConfigs};
use crate::config::BrokerConfig;
use crate::coordinator::group_configs;
use crate::coordinator::GroupConfig;
use crate::error_code::ErrorCode;
use crate::metadata::broker_config::ConfigType;
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::topic_config::Source;

pub(super) struct GroupConfigs {
    pub(super) config: Arc<BrokerConfig>,
    pub(super) dynamic: Arc<DynamicConfigs>,
}

impl StoredConfigs for GroupConfigs {
    /// Kafka's `createGroupConfigEntry` for every group config.
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.check_name(name)?;
        let settings = self.group_settings()?;
        let overrides = self.dynamic.group_configs_of(name);
        Ok(group_configs::GROUP_CONFIGS
            .iter()
            .map(|def| group_entry(&self.config, &settings, &overrides, def))
            .collect())
    }

    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::invalid_request("Group name must not be empty"));
        }
        Ok(())
    }

    // No group config is a LIST: APPEND and SUBTRACT are refused.
    fn current(&self, name: &str) -> Result<Configs, ConfigError> {
        Ok(self.dynamic.group_configs_of(name))
    }

    fn validate(&self, _name: &str, configs: &Configs) -> Result<(), ConfigError> {
        group_configs::validate(configs, &self.group_settings()?)
            .map_err(ConfigError::invalid_config)
    }

    /// An empty set removes the group's configs.
    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError> {
        self.dynamic
            .set_group_configs(name, configs)
            .map_err(ConfigError::storage)
    }
}

impl GroupConfigs {
    /// The broker's group coordinator settings (validated at startup).
    fn group_settings(&self) -> Result<GroupConfig, ConfigError> {
        GroupConfig::from_broker(&self.config).map_err(|error| {
            ConfigError::new(ErrorCode::UnknownServerError.code(), error.to_string())
        })
    }
}

fn group_entry(
    config: &BrokerConfig,
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
        let entry = |name| {
            let def = group_configs::definition(name).unwrap();
            group_entry(&config, &settings, &overrides, def)
        };
        let heartbeat = entry(group_configs::CONSUMER_HEARTBEAT_INTERVAL_MS);
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
        let session = entry(group_configs::CONSUMER_SESSION_TIMEOUT_MS);
        assert_eq!(session.value.as_deref(), Some("50000"));
        assert_eq!(session.source, Source::StaticBroker);
        assert_eq!(
            session.synonyms[0].name,
            "group.consumer.session.timeout.ms"
        );
        // No broker synonym: Kafka's default under the group key's name.
        let reset = entry(group_configs::SHARE_AUTO_OFFSET_RESET);
        assert_eq!(
            (reset.value.as_deref(), reset.source, reset.config_type),
            (Some("latest"), Source::Default, ConfigType::String)
        );
        assert_eq!(reset.synonyms[0].name, "share.auto.offset.reset");
    }
}
