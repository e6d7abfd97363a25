//! ApiVersions (ApiKey 18): the APIs and version ranges this broker serves.
//!
//! The list comes from the host's plugin registry (`metadata.supported-apis`),
//! so a module dropped into the plugin directory is advertised at once and a
//! removed one disappears. An ApiVersions request newer than this module
//! serves never reaches it: the host answers those with a v0 response
//! carrying UNSUPPORTED_VERSION, as Kafka does.
//!
//! A failed handler (trap or timeout) is answered as Kafka's
//! `getErrorResponse`: the error and no APIs (with UNSUPPORTED_VERSION,
//! ApiVersions' own range, KIP-511).

use gregor_sdk::kafka_protocol::messages::api_versions_response::ApiVersion;
use gregor_sdk::kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use gregor_sdk::kafka_protocol::protocol::Request;
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 4;

struct ApiVersions;

impl Handler for ApiVersions {
    gregor_sdk::api!(ApiVersionsRequest, MIN_VERSION..=MAX_VERSION);

    fn handle(ctx: &RequestContext, request: &ApiVersionsRequest) -> Reply<ApiVersionsResponse> {
        if ctx.api_version >= 3 && !valid_client_software(request) {
            return failed(ResponseError::InvalidRequest.code()).into();
        }
        let api_keys = metadata::supported_apis()
            .into_iter()
            .map(|api| api_version(api.api_key, api.min_version, api.max_version))
            .collect();
        ApiVersionsResponse::default()
            .with_finalized_features_epoch(-1)
            .with_api_keys(api_keys)
            .into()
    }

    /// Kafka's `getErrorResponse`: the error, no APIs.
    fn failed(_: &RequestContext, _: &ApiVersionsRequest, error_code: i16) -> ApiVersionsResponse {
        failed(error_code)
    }
}

fn api_version(api_key: i16, min_version: i16, max_version: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(api_key)
        .with_min_version(min_version)
        .with_max_version(max_version)
}

/// Kafka's `ApiVersionsRequest.getErrorResponse`: the error and no APIs,
/// except that UNSUPPORTED_VERSION lists ApiVersions' own range so the
/// client can retry with a version this broker speaks (KIP-511).
fn failed(error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_finalized_features_epoch(-1);
    if error_code == ResponseError::UnsupportedVersion.code() {
        response.api_keys = vec![api_version(
            ApiVersionsRequest::KEY,
            MIN_VERSION,
            MAX_VERSION,
        )];
    }
    response
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
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn software_tokens_follow_kip_511() {
        assert!(valid_software_token("librdkafka"));
        assert!(valid_software_token("2.3.0"));
        assert!(!valid_software_token(""));
        assert!(!valid_software_token("-bad"));
        assert!(!valid_software_token("bad name"));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let response = failed(code);
        assert_eq!((response.error_code, response.api_keys.len()), (code, 0));
        let unsupported = failed(ResponseError::UnsupportedVersion.code());
        let own: Vec<(i16, i16, i16)> = unsupported
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(own, vec![(18, MIN_VERSION, MAX_VERSION)]);
        assert_encodes_for_served_versions::<ApiVersions>(
            &[ApiVersionsRequest::default()],
            &[response, unsupported],
        );
    }
}
