//! ApiVersions (ApiKey 18): the APIs and version ranges this broker serves.
//!
//! The list comes from the host's plugin registry (`metadata.supported-apis`),
//! so a module dropped into the plugin directory is advertised at once and a
//! removed one disappears. An ApiVersions request newer than this module
//! serves never reaches it: the host answers those with a v0 response
//! carrying UNSUPPORTED_VERSION, as Kafka does.

use gregor_sdk::kafka_protocol::messages::api_versions_response::ApiVersion;
use gregor_sdk::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use gregor_sdk::{
    api_info, decode, metadata, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

struct ApiVersions;

impl Handler for ApiVersions {
    fn describe() -> ApiInfo {
        api_info::<ApiVersionsRequest>("ApiVersions", 0, 4)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ApiVersionsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = ApiVersionsResponse::default().with_finalized_features_epoch(-1);
        if ctx.api_version >= 3 && !valid_client_software(&request) {
            response.error_code = ResponseError::InvalidRequest.code();
            return respond(&ctx, &response);
        }
        response.api_keys = metadata::supported_apis()
            .into_iter()
            .map(|api| {
                ApiVersion::default()
                    .with_api_key(api.api_key)
                    .with_min_version(api.min_version)
                    .with_max_version(api.max_version)
            })
            .collect();
        respond(&ctx, &response)
    }
}

/// KIP-511: client software name and version must be non-empty and made of
/// letters, digits, '-' and '.', starting and ending with a letter or digit.
fn valid_client_software(request: &ApiVersionsRequest) -> bool {
    valid_software_token(&request.client_software_name)
        && valid_software_token(&request.client_software_version)
}

fn valid_software_token(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    edge_ok(bytes.first())
        && edge_ok(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

gregor_sdk::export_handler!(ApiVersions);

#[cfg(test)]
mod tests {
    use super::valid_software_token;

    #[test]
    fn software_tokens_follow_kip_511() {
        assert!(valid_software_token("librdkafka"));
        assert!(valid_software_token("2.3.0"));
        assert!(!valid_software_token(""));
        assert!(!valid_software_token("-bad"));
        assert!(!valid_software_token("bad name"));
    }
}
