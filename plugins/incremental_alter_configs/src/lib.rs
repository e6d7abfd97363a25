//! IncrementalAlterConfigs (ApiKey 44): SET, DELETE, APPEND and SUBTRACT
//! individual configs, as Kafka's
//! `KafkaApis.handleIncrementalAlterConfigsRequest`, `ConfigAdminManager`
//! and the controller's `incrementalAlterConfigs`.
//!
//! - Versions 0-1. Only the named configs change; APPEND and SUBTRACT work
//!   on list configs (`cleanup.policy`, a subscription's `metrics`) and
//!   start from the current value or the default.
//! - A resource named twice: INVALID_REQUEST for each; an unknown operation
//!   or resource type: INVALID_REQUEST.
//! - BROKER_LOGGER (KIP-412, Kafka's `RuntimeLoggerManager`): the name must
//!   be this node's id; SET a logger's level (TRACE, DEBUG, INFO, WARN,
//!   ERROR, FATAL) or DELETE it (it follows its ancestors or the root
//!   again), at once and not persisted. Unknown loggers or levels:
//!   INVALID_CONFIG; APPEND, SUBTRACT or deleting the root logger:
//!   INVALID_REQUEST.
//! - ALTER_CONFIGS on the Topic for topics, on the Cluster for brokers,
//!   broker loggers and client-metrics subscriptions; otherwise
//!   TOPIC_ / CLUSTER_AUTHORIZATION_FAILED.
//! - The host validates the result (INVALID_CONFIG for unknown names and
//!   bad values, INVALID_REQUEST for null values, duplicate names, another
//!   broker's id or a read-only broker config), then, unless
//!   `validate_only`, stores it durably and applies it at once: a topic's
//!   new retention or segment settings reach its partition logs, a broker
//!   default reaches every topic that does not override it.
//! - Error response (a trap or timeout): every resource with the error, as
//!   Kafka's `IncrementalAlterConfigsRequest.getErrorResponse`.
//!
//! All but the edit itself is shared with AlterConfigs
//! ([`gregor_sdk::config_alter`]).

use gregor_sdk::config_alter::{error, ConfigAlter, ConfigEdit};
use gregor_sdk::configs::{self, AlterEntry, AlterOp, ResourceType};
use gregor_sdk::kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use gregor_sdk::kafka_protocol::messages::IncrementalAlterConfigsRequest;
use gregor_sdk::{KafkaError, ResponseError};

struct Incremental;

impl ConfigEdit for Incremental {
    gregor_sdk::api!(IncrementalAlterConfigsRequest, 0..=1);

    fn serves(_: ResourceType) -> bool {
        true
    }

    /// The named configs change, each by its operation.
    fn edit(
        kind: ResourceType,
        resource: &AlterConfigsResource,
        validate_only: bool,
    ) -> Result<(), KafkaError> {
        let mut entries = Vec::with_capacity(resource.configs.len());
        for config in &resource.configs {
            let Some(op) = operation(config.config_operation) else {
                return Err(error(
                    ResponseError::InvalidRequest,
                    &format!("Unknown operations type {}", config.config_operation),
                ));
            };
            entries.push(AlterEntry {
                name: config.name.to_string(),
                op,
                value: config.value.as_ref().map(|v| v.to_string()),
            });
        }
        let name = resource.resource_name.as_str();
        configs::incremental_alter(kind, name, &entries, validate_only)
    }
}

/// Kafka's `AlterConfigOp.OpType` ids.
fn operation(id: i8) -> Option<AlterOp> {
    match id {
        0 => Some(AlterOp::Set),
        1 => Some(AlterOp::Delete),
        2 => Some(AlterOp::Append),
        3 => Some(AlterOp::Subtract),
        _ => None,
    }
}

type IncrementalAlterConfigs = ConfigAlter<Incremental>;

gregor_sdk::export_handler!(IncrementalAlterConfigs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
    use gregor_sdk::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    use gregor_sdk::kafka_protocol::messages::IncrementalAlterConfigsResponse;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn resource(kind: i8, name: &str) -> AlterConfigsResource {
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
    }

    #[test]
    fn operations_have_kafkas_ids() {
        assert_eq!(operation(0), Some(AlterOp::Set));
        assert_eq!(operation(3), Some(AlterOp::Subtract));
        assert_eq!(operation(4), None);
    }

    #[test]
    fn encodes_for_every_served_version() {
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![resource(2, "t"), resource(16, "sub")]);
        let result = AlterConfigsResourceResponse::default()
            .with_error_code(0)
            .with_resource_type(4)
            .with_resource_name(str_bytes("1"));
        assert_encodes_for_served_versions::<IncrementalAlterConfigs>(
            &[request],
            &[IncrementalAlterConfigsResponse::default().with_responses(vec![result])],
        );
    }

    /// Topic "t" may be altered, nothing else; no edit reaches the host.
    struct OnlyTopicT;

    impl FakeHost for OnlyTopicT {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name == "t"
        }
    }

    #[test]
    fn every_resource_is_checked_before_the_edit() {
        let unknown_op = resource(2, "t")
            .with_configs(vec![AlterableConfig::default().with_config_operation(9)]);
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            resource(2, "u"),
            resource(4, "1"),
            resource(7, "x"),
            resource(32, "g"),
            resource(32, "g"),
            unknown_op,
        ]);
        let handled = fake::handle::<IncrementalAlterConfigs>(OnlyTopicT, 1, &request);
        let answers: Vec<(i8, String, i16)> = handled
            .response
            .unwrap()
            .responses
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string(), r.error_code))
            .collect();
        let invalid = ResponseError::InvalidRequest.code();
        assert_eq!(
            answers,
            [
                (
                    2,
                    "u".to_string(),
                    ResponseError::TopicAuthorizationFailed.code()
                ),
                (
                    4,
                    "1".to_string(),
                    ResponseError::ClusterAuthorizationFailed.code()
                ),
                (7, "x".to_string(), invalid),
                (32, "g".to_string(), invalid),
                (32, "g".to_string(), invalid),
                (2, "t".to_string(), invalid),
            ]
        );
        assert_eq!(handled.counted_errors.len(), 6);
    }
}
