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

use gregor_sdk::configs::{self, authorization_error, resource_type_of, ResourceType};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use gregor_sdk::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use gregor_sdk::kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, KafkaError, Outcome,
    RawHandler, RequestContext, ResponseError,
};

struct AlterConfigs;

impl RawHandler for AlterConfigs {
    fn describe() -> ApiInfo {
        api_info::<AlterConfigsRequest>("AlterConfigs", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: AlterConfigsRequest = match decode(&ctx, &body) {
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
        let mut response = AlterConfigsResponse::default();
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
        let request: AlterConfigsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// Every resource of the request answered with `error_code`.
fn error_response_for(request: &AlterConfigsRequest, error_code: i16) -> AlterConfigsResponse {
    let responses = request
        .resources
        .iter()
        .map(|resource| resource_response(resource, error_code, None))
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
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

fn alter(
    resource: &AlterConfigsResource,
    allowed: bool,
    validate_only: bool,
) -> Result<(), KafkaError> {
    let kind = match resource_type_of(resource.resource_type) {
        Some(ResourceType::BrokerLogger) | None => {
            return Err(error(
                ResponseError::InvalidRequest,
                &format!("Unknown resource type {}", resource.resource_type),
            ))
        }
        Some(kind) => kind,
    };
    if !allowed {
        let denied = authorization_error(kind);
        return Err(error(denied, &denied.to_string()));
    }
    let entries: Vec<(String, Option<String>)> = resource
        .configs
        .iter()
        .map(|config| {
            (
                config.name.to_string(),
                config.value.as_ref().map(|v| v.to_string()),
            )
        })
        .collect();
    configs::replace(
        kind,
        resource.resource_name.as_str(),
        &entries,
        validate_only,
    )
}

gregor_sdk::export_raw_handler!(AlterConfigs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=2 {
            let result = AlterConfigsResourceResponse::default()
                .with_error_code(40)
                .with_error_message(Some(str_bytes("bad")))
                .with_resource_type(2)
                .with_resource_name(str_bytes("t"));
            let response = AlterConfigsResponse::default().with_responses(vec![result]);
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
        let request =
            AlterConfigsRequest::default().with_resources(vec![resource(2, "t"), resource(4, "1")]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        let shape: Vec<(i8, String, i16)> = response
            .responses
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string(), r.error_code))
            .collect();
        assert_eq!(
            shape,
            vec![(2, "t".to_string(), code), (4, "1".to_string(), code)]
        );
        for version in 0..=2 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
