//! CreateDelegationToken (ApiKey 38), as Kafka's
//! `KafkaApis.handleCreateTokenRequest` and the controller's
//! `DelegationTokenControlManager.createDelegationToken`.
//!
//! - Versions 0-3. Kafka 4 no longer serves v0 (KIP-896), v1's message:
//!   served as v1. v3 may name another owner.
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
use gregor_sdk::{Handler, KafkaError, Reply, RequestContext, ResponseError};

/// Kafka's `KafkaPrincipal.ANONYMOUS`, the owner of an error response.
const ANONYMOUS: &str = "User:ANONYMOUS";

struct CreateDelegationToken;

impl Handler for CreateDelegationToken {
    gregor_sdk::api!(CreateDelegationTokenRequest, 0..=3);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::Legacy::same_as(1));

    fn handle(
        ctx: &RequestContext,
        request: &CreateDelegationTokenRequest,
    ) -> Reply<CreateDelegationTokenResponse> {
        let requester = ctx.principal.as_str();
        let owner = match (&request.owner_principal_type, &request.owner_principal_name) {
            (kind, Some(name)) if !name.is_empty() => format!(
                "{}:{}",
                kind.as_ref().map_or("User", |k| k.as_str()),
                name.as_str()
            ),
            _ => requester.to_string(),
        };
        let mut response = base(&owner, requester, ctx.api_version);
        match create(request, &owner, requester) {
            Ok(token) => {
                response.issue_timestamp_ms = token.issue_timestamp_ms;
                response.expiry_timestamp_ms = token.expiry_timestamp_ms;
                response.max_timestamp_ms = token.max_timestamp_ms;
                response.token_id = str_bytes(&token.token_id);
                response.hmac = token.hmac.into();
            }
            Err(error) => response.error_code = error.code,
        }
        response.into()
    }

    /// Kafka's `getErrorResponse`: the error with no token, for the
    /// anonymous principal as Kafka answers.
    fn failed(
        ctx: &RequestContext,
        _: &CreateDelegationTokenRequest,
        error_code: i16,
    ) -> CreateDelegationTokenResponse {
        base(ANONYMOUS, ANONYMOUS, ctx.api_version).with_error_code(error_code)
    }
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

gregor_sdk::export_handler!(CreateDelegationToken);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::fake::context;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn principals_split_like_kafka() {
        assert_eq!(split("User:alice"), ("User", "alice"));
        assert_eq!(split("User:a:b"), ("User", "a:b"));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let request = CreateDelegationTokenRequest::default().with_max_lifetime_ms(1000);
        // Without the requester (v3 only), a response encodes for every
        // version; with it, for v3.
        let token = |version| base("User:a", "User:b", version).with_token_id(str_bytes("id"));
        assert_encodes_for_served_versions::<CreateDelegationToken>(&[request], &[token(1)]);
        assert!(token(3).encode(&mut Vec::new(), 3).is_ok());
    }

    #[test]
    fn a_failure_is_the_anonymous_principals() {
        let code = ResponseError::UnknownServerError.code();
        for version in 1..=3 {
            let ctx = context::<CreateDelegationToken>(version);
            let request = CreateDelegationTokenRequest::default();
            let response = CreateDelegationToken::failed(&ctx, &request, code);
            assert_eq!(response.error_code, code);
            assert_eq!(response.principal_name.as_str(), "ANONYMOUS");
            assert_eq!(response.expiry_timestamp_ms, -1);
            assert!(response.hmac.is_empty());
        }
    }
}
