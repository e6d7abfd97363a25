//! Config metadata as Kafka's DescribeConfigs reports it (also used by
//! CreateTopics v5+, which returns the new topic's configs).

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
