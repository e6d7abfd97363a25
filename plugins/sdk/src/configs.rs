//! Config metadata as Kafka's DescribeConfigs reports it (also used by
//! CreateTopics v5+, which returns the new topic's configs), and boolean
//! broker configs read as Kafka reads them.

use crate::metadata::ConfigSource;

/// Kafka's `DescribeConfigsResponse.ConfigSource` id for a config source:
/// DYNAMIC_TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2, STATIC_BROKER_CONFIG 4,
/// DEFAULT_CONFIG 5.
pub fn source_code(source: ConfigSource) -> i8 {
    match source {
        ConfigSource::DynamicTopicConfig => 1,
        ConfigSource::DynamicBrokerConfig => 2,
        ConfigSource::StaticBrokerConfig => 4,
        ConfigSource::DefaultConfig => 5,
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
