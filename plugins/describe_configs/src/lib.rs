//! DescribeConfigs (ApiKey 32): the configs of topics, this broker (or the
//! cluster-wide default), this broker's loggers (BROKER_LOGGER: every
//! logger with its level, source DYNAMIC_BROKER_LOGGER_CONFIG),
//! client-metrics subscriptions and groups (GROUP, KIP-848: every group
//! config, the group's override at DYNAMIC_GROUP_CONFIG above the broker's
//! `group.*` value), as Kafka's
//! `KafkaApis.handleDescribeConfigsRequest` and `ConfigHelper`.
//!
//! - Versions 0-4. Kafka 4 no longer serves v0 (KIP-896); Gregor does,
//!   through v1 (see [`v0`]).
//! - DESCRIBE_CONFIGS on the Topic for topics, on the Cluster for broker,
//!   broker-logger and client-metrics resources (GROUP: on the Group).
//!   Unauthorized resources get TOPIC_ / CLUSTER_ / GROUP_AUTHORIZATION_FAILED
//!   and no configs.
//! - The host answers each resource: every config (or the named ones) with
//!   its value, source, read-only and sensitive flags; synonyms only with
//!   `include_synonyms`, config types and documentation only with
//!   `include_documentation` (v3+). Sensitive values are never disclosed.
//!   Errors are per resource (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST
//!   for a broker or broker-logger id other than this node, ...).
//! - Error response (a trap or timeout): every resource with the error and
//!   no configs, as Kafka's `DescribeConfigsRequest.getErrorResponse`.

mod v0;

use gregor_sdk::authz::Operation;
use gregor_sdk::configs::{
    self, authorization_error, authorize_resources, resource_type_of, source_code, type_code,
    ResourceType,
};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use gregor_sdk::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use gregor_sdk::kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct DescribeConfigs;

impl Handler for DescribeConfigs {
    gregor_sdk::api!(DescribeConfigsRequest, 0..=4);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0::LEGACY);

    fn handle(
        _: &RequestContext,
        request: &DescribeConfigsRequest,
    ) -> Reply<DescribeConfigsResponse> {
        let resources: Vec<(i8, &str)> = request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str()))
            .collect();
        let allowed = authorize_resources(Operation::DescribeConfigs, &resources);
        let mut response = DescribeConfigsResponse::default();
        for (resource, allowed) in request.resources.iter().zip(allowed) {
            let result = match (resource_type_of(resource.resource_type), allowed) {
                (None, _) => refused(
                    ResponseError::InvalidRequest,
                    Some(format!(
                        "Unexpected resource type {} for resource {}",
                        resource.resource_type,
                        resource.resource_name.as_str()
                    )),
                ),
                (Some(kind), false) => refused(authorization_error(kind), None),
                (Some(kind), true) => describe(kind, resource, request),
            };
            response.results.push(for_resource(result, resource));
        }
        response.into()
    }

    /// Kafka's `getErrorResponse`: every resource with the error and no
    /// configs. The message names the error, as [`refused`] does where
    /// Kafka sends the error's default message.
    fn failed(
        _: &RequestContext,
        request: &DescribeConfigsRequest,
        error_code: i16,
    ) -> DescribeConfigsResponse {
        let message = ResponseError::try_from_code(error_code).map(|error| error.to_string());
        let results = request
            .resources
            .iter()
            .map(|resource| {
                let result = DescribeConfigsResult::default()
                    .with_error_code(error_code)
                    .with_error_message(message.as_deref().map(str_bytes));
                for_resource(result, resource)
            })
            .collect();
        DescribeConfigsResponse::default().with_results(results)
    }
}

/// A result naming the resource it answers.
fn for_resource(
    result: DescribeConfigsResult,
    resource: &DescribeConfigsResource,
) -> DescribeConfigsResult {
    result
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone())
}

fn refused(error: ResponseError, message: Option<String>) -> DescribeConfigsResult {
    DescribeConfigsResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(
            &message.unwrap_or_else(|| error.to_string()),
        )))
}

fn describe(
    kind: ResourceType,
    resource: &DescribeConfigsResource,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResult {
    let names: Option<Vec<String>> = resource
        .configuration_keys
        .as_ref()
        .map(|keys| keys.iter().map(|k| k.to_string()).collect());
    let entries = match configs::describe(kind, resource.resource_name.as_str(), names.as_deref()) {
        Ok(entries) => entries,
        Err(error) => {
            return DescribeConfigsResult::default()
                .with_error_code(error.code)
                .with_error_message(error.message.as_deref().map(str_bytes))
        }
    };
    let configs = entries
        .into_iter()
        .map(|entry| {
            let synonyms = if request.include_synonyms {
                entry
                    .synonyms
                    .iter()
                    .map(|synonym| {
                        DescribeConfigsSynonym::default()
                            .with_name(str_bytes(&synonym.name))
                            .with_value(synonym.value.as_deref().map(str_bytes))
                            .with_source(source_code(synonym.source))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let documentation = entry
                .documentation
                .as_deref()
                .filter(|_| request.include_documentation)
                .map(str_bytes);
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(&entry.name))
                .with_value(
                    entry
                        .value
                        .as_deref()
                        .filter(|_| !entry.is_sensitive)
                        .map(str_bytes),
                )
                .with_read_only(entry.read_only)
                .with_config_source(source_code(entry.source))
                .with_is_sensitive(entry.is_sensitive)
                .with_synonyms(synonyms)
                .with_config_type(type_code(entry.config_type))
                .with_documentation(documentation)
        })
        .collect();
    DescribeConfigsResult::default()
        .with_error_message(None)
        .with_configs(configs)
}

gregor_sdk::export_handler!(DescribeConfigs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn resource(kind: i8, name: &str) -> DescribeConfigsResource {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
    }

    #[test]
    fn encodes_for_every_served_version() {
        let entry = DescribeConfigsResourceResult::default()
            .with_name(str_bytes("retention.ms"))
            .with_value(Some(str_bytes("1000")))
            .with_config_source(1)
            .with_synonyms(vec![DescribeConfigsSynonym::default()
                .with_name(str_bytes("retention.ms"))
                .with_source(1)])
            .with_config_type(5)
            .with_documentation(Some(str_bytes("doc")));
        let result = DescribeConfigsResult::default()
            .with_resource_type(2)
            .with_resource_name(str_bytes("t"))
            .with_configs(vec![entry]);
        let request = DescribeConfigsRequest::default()
            .with_resources(vec![resource(2, "t"), resource(4, "1")]);
        assert_encodes_for_served_versions::<DescribeConfigs>(
            &[request],
            &[DescribeConfigsResponse::default().with_results(vec![result])],
        );
    }

    #[test]
    fn a_failure_answers_every_resource_without_configs() {
        let request = DescribeConfigsRequest::default()
            .with_resources(vec![resource(2, "t"), resource(4, "1")]);
        let code = ResponseError::UnknownServerError.code();
        let ctx = fake::context::<DescribeConfigs>(4);
        let response = DescribeConfigs::failed(&ctx, &request, code);
        let shape: Vec<(i8, String, i16, usize)> = response
            .results
            .iter()
            .map(|r| {
                let name = r.resource_name.to_string();
                (r.resource_type, name, r.error_code, r.configs.len())
            })
            .collect();
        assert_eq!(
            shape,
            vec![(2, "t".to_string(), code, 0), (4, "1".to_string(), code, 0)]
        );
    }

    #[test]
    fn denials_name_the_resource_kind() {
        assert_eq!(
            authorization_error(ResourceType::Topic),
            ResponseError::TopicAuthorizationFailed
        );
        assert_eq!(
            authorization_error(ResourceType::ClientMetrics),
            ResponseError::ClusterAuthorizationFailed
        );
    }

    /// A principal allowed nothing: no resource reaches the host's configs.
    struct DeniedEverything;

    impl FakeHost for DeniedEverything {
        fn authorize(&self, _: &Action) -> bool {
            false
        }
    }

    #[test]
    fn unauthorized_and_unknown_resources_are_answered_without_configs() {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            resource(2, "t"),
            resource(32, "g"),
            resource(8, "1"),
            resource(3, "x"),
        ]);
        let handled = fake::handle::<DescribeConfigs>(DeniedEverything, 4, &request);
        let answers: Vec<(String, i16, bool)> = handled
            .response
            .unwrap()
            .results
            .iter()
            .map(|r| {
                (
                    r.resource_name.to_string(),
                    r.error_code,
                    r.configs.is_empty(),
                )
            })
            .collect();
        assert_eq!(
            answers,
            [
                (
                    "t".to_string(),
                    ResponseError::TopicAuthorizationFailed.code(),
                    true
                ),
                (
                    "g".to_string(),
                    ResponseError::GroupAuthorizationFailed.code(),
                    true
                ),
                (
                    "1".to_string(),
                    ResponseError::ClusterAuthorizationFailed.code(),
                    true
                ),
                ("x".to_string(), ResponseError::InvalidRequest.code(), true),
            ]
        );
        assert_eq!(handled.counted_errors.len(), 4);
    }
}
