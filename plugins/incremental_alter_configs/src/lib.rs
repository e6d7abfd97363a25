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

use gregor_sdk::configs::{self, authorization_error, resource_type_of, AlterEntry, AlterOp};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use gregor_sdk::kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use gregor_sdk::kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, KafkaError, Outcome,
    RawHandler, RequestContext, ResponseError,
};

struct IncrementalAlterConfigs;

impl RawHandler for IncrementalAlterConfigs {
    fn describe() -> ApiInfo {
        api_info::<IncrementalAlterConfigsRequest>("IncrementalAlterConfigs", 0, 1)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: IncrementalAlterConfigsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let keys: Vec<(i8, &str)> = request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str()))
            .collect();
        let results = configs::alter_resources(&keys, |index, allowed| {
            alter(&request.resources[index], allowed, request.validate_only)
        });
        let mut response = IncrementalAlterConfigsResponse::default();
        for (resource, (code, message)) in request.resources.iter().zip(results) {
            response
                .responses
                .push(resource_response(resource, code, message.as_deref()));
        }
        gregor_sdk::count_errors(response.responses.iter().map(|r| r.error_code));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every resource with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: IncrementalAlterConfigsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// Every resource of the request answered with `error_code`.
fn error_response_for(
    request: &IncrementalAlterConfigsRequest,
    error_code: i16,
) -> IncrementalAlterConfigsResponse {
    let responses = request
        .resources
        .iter()
        .map(|resource| resource_response(resource, error_code, None))
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn resource_response(
    resource: &AlterConfigsResource,
    error_code: i16,
    message: Option<&str>,
) -> AlterConfigsResourceResponse {
    AlterConfigsResourceResponse::default()
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone())
}

fn error(code: ResponseError, message: &str) -> KafkaError {
    KafkaError {
        code: code.code(),
        message: Some(message.to_string()),
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

fn alter(
    resource: &AlterConfigsResource,
    allowed: bool,
    validate_only: bool,
) -> Result<(), KafkaError> {
    let Some(kind) = resource_type_of(resource.resource_type) else {
        return Err(error(
            ResponseError::InvalidRequest,
            &format!("Unknown resource type {}", resource.resource_type),
        ));
    };
    if !allowed {
        let denied = authorization_error(kind);
        return Err(error(denied, &denied.to_string()));
    }
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
    configs::incremental_alter(
        kind,
        resource.resource_name.as_str(),
        &entries,
        validate_only,
    )
}

gregor_sdk::export_raw_handler!(IncrementalAlterConfigs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn operations_have_kafkas_ids() {
        assert_eq!(operation(0), Some(AlterOp::Set));
        assert_eq!(operation(3), Some(AlterOp::Subtract));
        assert_eq!(operation(4), None);
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=1 {
            let result = AlterConfigsResourceResponse::default()
                .with_error_code(0)
                .with_resource_type(4)
                .with_resource_name(str_bytes("1"));
            let response = IncrementalAlterConfigsResponse::default().with_responses(vec![result]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_answer_every_resource_for_every_served_version() {
        let resource = |kind: i8, name: &str| {
            AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(str_bytes(name))
        };
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![resource(2, "t"), resource(16, "sub")]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        let shape: Vec<(i8, String, i16)> = response
            .responses
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string(), r.error_code))
            .collect();
        assert_eq!(
            shape,
            vec![(2, "t".to_string(), code), (16, "sub".to_string(), code)]
        );
        for version in 0..=1 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
