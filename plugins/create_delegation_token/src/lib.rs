//! CreateDelegationToken (ApiKey 38), as Kafka's
//! `KafkaApis.handleCreateTokenRequest` and the controller's
//! `DelegationTokenControlManager.createDelegationToken`.
//!
//! - Versions 1-3 (Kafka 4 no longer serves v0). v3 may name another owner.
//! - In Kafka's order: a connection that may not manage tokens (plain
//!   text, one-way SSL, itself token-authenticated) gets
//!   DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; creating a token for another
//!   owner needs CREATE_TOKENS on that User, else
//!   DELEGATION_TOKEN_AUTHORIZATION_FAILED; renewers must be User
//!   principals (INVALID_PRINCIPAL_TYPE); without
//!   `delegation.token.secret.key` tokens are DELEGATION_TOKEN_AUTH_DISABLED.
//! - The token lives until its expiry time (renewable up to
//!   `max_lifetime_ms`, at most `delegation.token.max.lifetime.ms`); its
//!   HMAC is the password to authenticate with over SCRAM.
//! - Error response (a trap or timeout): the error with no token, owner
//!   and requester `User:ANONYMOUS`, as Kafka's
//!   `CreateDelegationTokenRequest.getErrorResponse`.

use gregor_sdk::authorize::is_allowed;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::delegation_tokens;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, KafkaError, Outcome,
    RawHandler, RequestContext, ResponseError,
};

/// Kafka's `KafkaPrincipal.ANONYMOUS`, the owner of an error response.
const ANONYMOUS: &str = "User:ANONYMOUS";

struct CreateDelegationToken;

impl RawHandler for CreateDelegationToken {
    fn describe() -> ApiInfo {
        api_info::<CreateDelegationTokenRequest>("CreateDelegationToken", 1, 3)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: CreateDelegationTokenRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let requester = ctx.principal.clone();
        let owner = match (&request.owner_principal_type, &request.owner_principal_name) {
            (kind, Some(name)) if !name.is_empty() => format!(
                "{}:{}",
                kind.as_ref().map_or("User", |k| k.as_str()),
                name.as_str()
            ),
            _ => requester.clone(),
        };
        let mut response = base(&owner, &requester, ctx.api_version);
        match create(&request, &owner, &requester) {
            Ok(token) => {
                response.issue_timestamp_ms = token.issue_timestamp_ms;
                response.expiry_timestamp_ms = token.expiry_timestamp_ms;
                response.max_timestamp_ms = token.max_timestamp_ms;
                response.token_id = str_bytes(&token.token_id);
                response.hmac = token.hmac.into();
            }
            Err(error) => response.error_code = error.code,
        }
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error, no token.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        // Nothing of the request is echoed, but a body that does not decode
        // gets no response.
        decode::<CreateDelegationTokenRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(ctx.api_version, error_code))
    }
}

/// The error with no token, for the anonymous principal as Kafka answers.
fn error_response_for(version: i16, error_code: i16) -> CreateDelegationTokenResponse {
    base(ANONYMOUS, ANONYMOUS, version).with_error_code(error_code)
}

fn create(
    request: &CreateDelegationTokenRequest,
    owner: &str,
    requester: &str,
) -> Result<delegation_tokens::TokenInfo, KafkaError> {
    delegation_tokens::requests_allowed()?;
    if owner != requester && !is_allowed(Operation::CreateTokens, ResourceType::User, owner) {
        return Err(KafkaError {
            code: ResponseError::DelegationTokenAuthorizationFailed.code(),
            message: None,
        });
    }
    let renewers: Vec<String> = request
        .renewers
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r.principal_type.as_str(),
                r.principal_name.as_str()
            )
        })
        .collect();
    let owner = (owner != requester).then(|| owner.to_string());
    delegation_tokens::create(owner.as_deref(), &renewers, request.max_lifetime_ms)
}

/// Kafka's `CreateDelegationTokenResponse.prepareResponse`: who the token
/// is for and (v3+) who asked, with error timestamps until it exists.
fn base(owner: &str, requester: &str, version: i16) -> CreateDelegationTokenResponse {
    let (owner_type, owner_name) = split(owner);
    let mut response = CreateDelegationTokenResponse::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_issue_timestamp_ms(-1)
        .with_expiry_timestamp_ms(-1)
        .with_max_timestamp_ms(-1);
    if version >= 3 {
        let (requester_type, requester_name) = split(requester);
        response.token_requester_principal_type = str_bytes(requester_type);
        response.token_requester_principal_name = str_bytes(requester_name);
    }
    response
}

/// "User:alice" -> ("User", "alice").
fn split(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

gregor_sdk::export_raw_handler!(CreateDelegationToken);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn principals_split_like_kafka() {
        assert_eq!(split("User:alice"), ("User", "alice"));
        assert_eq!(split("User:a:b"), ("User", "a:b"));
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 1..=3 {
            let response = base("User:a", "User:b", version).with_token_id(str_bytes("id"));
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        for version in 1..=3 {
            let response = error_response_for(version, code);
            assert_eq!(response.error_code, code);
            assert_eq!(response.principal_name.as_str(), "ANONYMOUS");
            assert_eq!(response.expiry_timestamp_ms, -1);
            assert!(response.hmac.is_empty());
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
