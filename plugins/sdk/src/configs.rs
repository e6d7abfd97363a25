//! Config metadata as Kafka's DescribeConfigs reports it (also used by
//! CreateTopics v5+, which returns the new topic's configs), and boolean
//! broker configs read as Kafka reads them.

/// The host's config administration (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs).
pub use crate::bindings::gregor::broker::configs::*;

/// Kafka's `DescribeConfigsResponse.ConfigSource` id for a config source:
/// DYNAMIC_TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2,
/// DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4, DEFAULT_CONFIG 5,
/// DYNAMIC_BROKER_LOGGER_CONFIG 6, CLIENT_METRICS_CONFIG 7,
/// DYNAMIC_GROUP_CONFIG 8.
pub fn source_code(source: ConfigSource) -> i8 {
    match source {
        ConfigSource::DynamicTopicConfig => 1,
        ConfigSource::DynamicBrokerConfig => 2,
        ConfigSource::DynamicDefaultBrokerConfig => 3,
        ConfigSource::StaticBrokerConfig => 4,
        ConfigSource::DefaultConfig => 5,
        ConfigSource::DynamicBrokerLoggerConfig => 6,
        ConfigSource::ClientMetricsConfig => 7,
        ConfigSource::DynamicGroupConfig => 8,
    }
}

/// Kafka's ConfigResource type id (TOPIC 2, BROKER 4, BROKER_LOGGER 8,
/// CLIENT_METRICS 16, GROUP 32) as a resource type; None for ids Kafka
/// does not define.
pub fn resource_type_of(id: i8) -> Option<ResourceType> {
    match id {
        2 => Some(ResourceType::Topic),
        4 => Some(ResourceType::Broker),
        8 => Some(ResourceType::BrokerLogger),
        16 => Some(ResourceType::ClientMetrics),
        32 => Some(ResourceType::Group),
        _ => None,
    }
}

/// Kafka's DescribeConfigs config type id.
pub fn type_code(config_type: ConfigType) -> i8 {
    match config_type {
        ConfigType::Unknown => 0,
        ConfigType::Boolean => 1,
        ConfigType::String => 2,
        ConfigType::Int => 3,
        ConfigType::Short => 4,
        ConfigType::Long => 5,
        ConfigType::Double => 6,
        ConfigType::List => 7,
        ConfigType::Class => 8,
        ConfigType::Password => 9,
    }
}

/// A boolean broker config (`auto.create.topics.enable`,
/// `delete.topic.enable`, ...) read as Kafka reads booleans: `true` or
/// `false`, any case, surrounding spaces ignored. Unset or unreadable values
/// take Kafka's `default`.
pub fn broker_flag(name: &str, default: bool) -> bool {
    match crate::metadata::broker_config(name) {
        Some(value) if value.trim().eq_ignore_ascii_case("true") => true,
        Some(value) if value.trim().eq_ignore_ascii_case("false") => false,
        _ => default,
    }
}

/// Authorizes `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on config
/// resources given as (Kafka type id, name), as KafkaApis does: topics on
/// the Topic, groups on the Group, brokers, broker loggers and
/// client-metrics subscriptions on the Cluster. One batch per type;
/// unknown types are left to the caller (true).
pub fn authorize_resources(
    operation: crate::authz::Operation,
    resources: &[(i8, &str)],
) -> Vec<bool> {
    use crate::authz::ResourceType as Acl;
    let names_of = |kind: ResourceType| {
        resources
            .iter()
            .filter(move |(id, _)| resource_type_of(*id) == Some(kind))
            .map(|(_, name)| *name)
    };
    let topics =
        crate::authorize::allowed_names(operation, Acl::Topic, names_of(ResourceType::Topic));
    let groups =
        crate::authorize::allowed_names(operation, Acl::Group, names_of(ResourceType::Group));
    let cluster_needed = resources.iter().any(|(id, _)| {
        matches!(
            resource_type_of(*id),
            Some(ResourceType::Broker | ResourceType::BrokerLogger | ResourceType::ClientMetrics)
        )
    });
    let cluster = cluster_needed && crate::authorize::cluster_allowed(operation);
    resources
        .iter()
        .map(|(id, name)| match resource_type_of(*id) {
            Some(ResourceType::Topic) => topics.contains(name),
            Some(ResourceType::Group) => groups.contains(name),
            Some(_) => cluster,
            None => true,
        })
        .collect()
}

/// The error for a config resource the principal may not touch.
pub fn authorization_error(kind: ResourceType) -> crate::ResponseError {
    match kind {
        ResourceType::Topic => crate::ResponseError::TopicAuthorizationFailed,
        ResourceType::Group => crate::ResponseError::GroupAuthorizationFailed,
        _ => crate::ResponseError::ClusterAuthorizationFailed,
    }
}

/// The shared body of AlterConfigs and IncrementalAlterConfigs: authorizes
/// ALTER_CONFIGS on every resource (given as Kafka type id and name) in one
/// batch, answers a resource named twice with INVALID_REQUEST as Kafka does,
/// and calls `alter(index, allowed)` for the others. One
/// (error code, message) per resource, in request order.
pub fn alter_resources(
    resources: &[(i8, &str)],
    mut alter: impl FnMut(usize, bool) -> Result<(), crate::KafkaError>,
) -> Vec<(i16, Option<String>)> {
    let mut count: std::collections::HashMap<(i8, &str), usize> = std::collections::HashMap::new();
    for key in resources {
        *count.entry(*key).or_default() += 1;
    }
    let allowed = authorize_resources(crate::authz::Operation::AlterConfigs, resources);
    resources
        .iter()
        .zip(allowed)
        .enumerate()
        .map(|(index, (key, allowed))| {
            let result = if count.get(key).copied().unwrap_or(0) > 1 {
                Err(crate::KafkaError {
                    code: crate::ResponseError::InvalidRequest.code(),
                    message: Some("Each resource must appear at most once.".to_string()),
                })
            } else {
                alter(index, allowed)
            };
            match result {
                Ok(()) => (0, None),
                Err(error) => (error.code, error.message),
            }
        })
        .collect()
}
