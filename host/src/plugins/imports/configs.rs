//! `configs`: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs
//! through the config admin service, and the client-metrics subscription
//! and group names for ListConfigResources.

use crate::config_admin::{self, AlterEntry, AlterOp as HostOp, ConfigError};
use crate::metadata::broker_config::ConfigType as HostType;
use crate::metadata::topic_config::Source;
use crate::plugins::bindings::handler::gregor::broker::configs::{
    self, AlterEntry as WitEntry, AlterOp, ConfigDescription, ConfigSynonym, ConfigType,
    ResourceType,
};
use crate::plugins::bindings::handler::gregor::broker::types::ConfigSource;
use crate::plugins::bindings::handler::gregor::broker::types::KafkaError;
use crate::plugins::state::HandlerState;

/// The contract's config source for a host source.
pub fn source_of(source: Source) -> ConfigSource {
    match source {
        Source::Topic => ConfigSource::DynamicTopicConfig,
        Source::DynamicBroker => ConfigSource::DynamicBrokerConfig,
        Source::DynamicDefaultBroker => ConfigSource::DynamicDefaultBrokerConfig,
        Source::StaticBroker => ConfigSource::StaticBrokerConfig,
        Source::Default => ConfigSource::DefaultConfig,
        Source::ClientMetrics => ConfigSource::ClientMetricsConfig,
        Source::BrokerLogger => ConfigSource::DynamicBrokerLoggerConfig,
        Source::Group => ConfigSource::DynamicGroupConfig,
    }
}

fn resource(resource_type: ResourceType) -> config_admin::ResourceType {
    match resource_type {
        ResourceType::Topic => config_admin::ResourceType::Topic,
        ResourceType::Broker => config_admin::ResourceType::Broker,
        ResourceType::BrokerLogger => config_admin::ResourceType::BrokerLogger,
        ResourceType::ClientMetrics => config_admin::ResourceType::ClientMetrics,
        ResourceType::Group => config_admin::ResourceType::Group,
    }
}

fn config_type(config_type: HostType) -> ConfigType {
    match config_type {
        HostType::Unknown => ConfigType::Unknown,
        HostType::Boolean => ConfigType::Boolean,
        HostType::String => ConfigType::String,
        HostType::Int => ConfigType::Int,
        HostType::Short => ConfigType::Short,
        HostType::Long => ConfigType::Long,
        HostType::Double => ConfigType::Double,
        HostType::List => ConfigType::List,
        HostType::Class => ConfigType::Class,
        HostType::Password => ConfigType::Password,
    }
}

fn kafka_error(error: ConfigError) -> KafkaError {
    KafkaError {
        code: error.code,
        message: Some(error.message),
    }
}

impl configs::Host for HandlerState {
    fn describe(
        &mut self,
        resource_type: ResourceType,
        resource_name: String,
        names: Option<Vec<String>>,
    ) -> Result<Vec<ConfigDescription>, KafkaError> {
        self.services
            .configs
            .describe(resource(resource_type), &resource_name, names.as_deref())
            .map(|entries| {
                entries
                    .into_iter()
                    .map(|entry| ConfigDescription {
                        name: entry.name,
                        value: entry.value,
                        source: source_of(entry.source),
                        read_only: entry.read_only,
                        is_sensitive: entry.sensitive,
                        synonyms: entry
                            .synonyms
                            .into_iter()
                            .map(|synonym| ConfigSynonym {
                                name: synonym.name,
                                value: synonym.value,
                                source: source_of(synonym.source),
                            })
                            .collect(),
                        config_type: config_type(entry.config_type),
                        documentation: entry.documentation,
                    })
                    .collect()
            })
            .map_err(kafka_error)
    }

    fn incremental_alter(
        &mut self,
        resource_type: ResourceType,
        resource_name: String,
        entries: Vec<WitEntry>,
        validate_only: bool,
    ) -> Result<(), KafkaError> {
        let entries: Vec<AlterEntry> = entries
            .into_iter()
            .map(|entry| AlterEntry {
                name: entry.name,
                op: match entry.op {
                    AlterOp::Set => HostOp::Set,
                    AlterOp::Delete => HostOp::Delete,
                    AlterOp::Append => HostOp::Append,
                    AlterOp::Subtract => HostOp::Subtract,
                },
                value: entry.value,
            })
            .collect();
        // A cluster node's change is committed by the metadata quorum.
        self.broker_work(|state| {
            state.services.configs.incremental_alter(
                resource(resource_type),
                &resource_name,
                &entries,
                validate_only,
            )
        })
        .map_err(kafka_error)
    }

    fn replace(
        &mut self,
        resource_type: ResourceType,
        resource_name: String,
        configs: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), KafkaError> {
        self.broker_work(|state| {
            state.services.configs.replace(
                resource(resource_type),
                &resource_name,
                &configs,
                validate_only,
            )
        })
        .map_err(kafka_error)
    }

    fn list_client_metrics(&mut self) -> Vec<String> {
        self.services.dynamic.client_metrics_names()
    }

    fn list_group_configs(&mut self) -> Vec<String> {
        self.services.dynamic.group_config_names()
    }
}
