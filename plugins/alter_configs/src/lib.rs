//! AlterConfigs (ApiKey 33), the legacy whole-resource config change, as
//! Kafka's `KafkaApis.handleAlterConfigsRequest`, `ConfigAdminManager` and
//! the controller's `legacyAlterConfigs`.
//!
//! - Versions 0-2. Each resource's configs become its whole dynamic
//!   config: configs it does not name are reset to their defaults.
//! - A resource named twice: INVALID_REQUEST for each ("Each resource must
//!   appear at most once."); unknown resource types and BROKER_LOGGER
//!   (never supported by the legacy API): INVALID_REQUEST.
//! - ALTER_CONFIGS on the Topic for topics, on the Cluster for brokers and
//!   client-metrics subscriptions; otherwise TOPIC_ / CLUSTER_AUTHORIZATION_FAILED.
//! - The host validates (INVALID_CONFIG for unknown names and bad values,
//!   INVALID_REQUEST for null values, duplicate names, another broker's id
//!   or a read-only broker config), then, unless `validate_only`, stores
//!   the change durably and applies it at once.
//! - Error response (a trap or timeout): every resource with the error, as
//!   Kafka's `AlterConfigsRequest.getErrorResponse`.
//!
//! All but the replacement itself is shared with IncrementalAlterConfigs
//! ([`gregor_sdk::config_alter`]).

use gregor_sdk::config_alter::{ConfigAlter, ConfigEdit};
use gregor_sdk::configs::{self, ResourceType};
use gregor_sdk::kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use gregor_sdk::kafka_protocol::messages::AlterConfigsRequest;
use gregor_sdk::KafkaError;

struct Replace;

impl ConfigEdit for Replace {
    gregor_sdk::api!(AlterConfigsRequest, 0..=2);

    fn serves(kind: ResourceType) -> bool {
        kind != ResourceType::BrokerLogger
    }

    /// The resource's configs become its whole dynamic config.
    fn edit(
        kind: ResourceType,
        resource: &AlterConfigsResource,
        validate_only: bool,
    ) -> Result<(), KafkaError> {
        let entries: Vec<(String, Option<String>)> = resource
            .configs
            .iter()
            .map(|config| {
                let value = config.value.as_ref().map(|v| v.to_string());
                (config.name.to_string(), value)
            })
            .collect();
        let name = resource.resource_name.as_str();
        configs::replace(kind, name, &entries, validate_only)
    }
}

type AlterConfigs = ConfigAlter<Replace>;

gregor_sdk::export_handler!(AlterConfigs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
    use gregor_sdk::kafka_protocol::messages::AlterConfigsResponse;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let resource = |kind: i8, name: &str| {
            AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(str_bytes(name))
        };
        let request =
            AlterConfigsRequest::default().with_resources(vec![resource(2, "t"), resource(4, "1")]);
        let result = AlterConfigsResourceResponse::default()
            .with_error_code(40)
            .with_error_message(Some(str_bytes("bad")))
            .with_resource_type(2)
            .with_resource_name(str_bytes("t"));
        assert_encodes_for_served_versions::<AlterConfigs>(
            &[request],
            &[AlterConfigsResponse::default().with_responses(vec![result])],
        );
    }
}
