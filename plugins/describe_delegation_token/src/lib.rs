//! DescribeDelegationToken (ApiKey 41), as Kafka's
//! `KafkaApis.handleDescribeTokensRequest` and
//! `DelegationTokenManager.filterToken`.
//!
//! - Versions 0-3 (v0, which KIP-896 removed, is v1's message; v3 adds the
//!   token requester).
//! - Connections that may not manage tokens get
//!   DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; without a secret key,
//!   DELEGATION_TOKEN_AUTH_DISABLED.
//! - `owners` null: every token; an empty list: none; otherwise the tokens
//!   owned or renewable by one of them. Of those, a principal sees the
//!   tokens it owns, requested or may renew, and others only with DESCRIBE
//!   on the DelegationToken (its id) or DESCRIBE_TOKENS on the owner User.
//! - Error response (a trap or timeout): the error and no tokens, as
//!   Kafka's `DescribeDelegationTokenRequest.getErrorResponse`.

use gregor_sdk::authz::{self, Action, Operation, ResourceType};
use gregor_sdk::delegation_tokens::{self, TokenInfo};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
};
use gregor_sdk::{Handler, Reply, RequestContext};

struct DescribeDelegationToken;

impl Handler for DescribeDelegationToken {
    gregor_sdk::api!(DescribeDelegationTokenRequest, 0..=3);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::Legacy::same_as(1));

    fn handle(
        ctx: &RequestContext,
        request: &DescribeDelegationTokenRequest,
    ) -> Reply<DescribeDelegationTokenResponse> {
        let mut response = DescribeDelegationTokenResponse::default();
        match delegation_tokens::list_tokens() {
            Err(error) => response.error_code = error.code,
            Ok(tokens) => {
                let owners: Option<Vec<String>> = request.owners.as_ref().map(|owners| {
                    owners
                        .iter()
                        .map(|o| {
                            format!(
                                "{}:{}",
                                o.principal_type.as_str(),
                                o.principal_name.as_str()
                            )
                        })
                        .collect()
                });
                response.tokens = visible(&ctx.principal, owners.as_deref(), tokens)
                    .into_iter()
                    .map(|token| described(token, ctx.api_version))
                    .collect();
            }
        }
        response.into()
    }
}

fn owner_or_renewer(token: &TokenInfo, principal: &str) -> bool {
    token.owner == principal
        || token.requester == principal
        || token.renewers.iter().any(|r| r == principal)
}

/// Kafka's `filterToken` over every token: the owner filter, then the
/// principal's own tokens, then the others it may describe (asked in one
/// batch).
fn visible(principal: &str, owners: Option<&[String]>, tokens: Vec<TokenInfo>) -> Vec<TokenInfo> {
    let requested: Vec<TokenInfo> = tokens
        .into_iter()
        .filter(|token| {
            owners.is_none_or(|owners| owners.iter().any(|o| owner_or_renewer(token, o)))
        })
        .collect();
    let others: Vec<&TokenInfo> = requested
        .iter()
        .filter(|token| !owner_or_renewer(token, principal))
        .collect();
    let actions: Vec<Action> = others
        .iter()
        .flat_map(|token| {
            [
                Action {
                    operation: Operation::Describe,
                    resource_type: ResourceType::DelegationToken,
                    resource_name: token.token_id.clone(),
                },
                Action {
                    operation: Operation::DescribeTokens,
                    resource_type: ResourceType::User,
                    resource_name: token.owner.clone(),
                },
            ]
        })
        .collect();
    let answers = if actions.is_empty() {
        Vec::new()
    } else {
        authz::authorize(&actions)
    };
    let allowed_others: Vec<String> = others
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            answers.get(2 * i).copied() == Some(true)
                || answers.get(2 * i + 1).copied() == Some(true)
        })
        .map(|(_, token)| token.token_id.clone())
        .collect();
    requested
        .into_iter()
        .filter(|token| {
            owner_or_renewer(token, principal) || allowed_others.contains(&token.token_id)
        })
        .collect()
}

fn split(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

/// A token as the response carries it; the requester only from v3.
fn described(token: TokenInfo, version: i16) -> DescribedDelegationToken {
    let (owner_type, owner_name) = split(&token.owner);
    let (requester_type, requester_name) = if version >= 3 {
        split(&token.requester)
    } else {
        ("", "")
    };
    DescribedDelegationToken::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_token_requester_principal_type(str_bytes(requester_type))
        .with_token_requester_principal_name(str_bytes(requester_name))
        .with_issue_timestamp(token.issue_timestamp_ms)
        .with_expiry_timestamp(token.expiry_timestamp_ms)
        .with_max_timestamp(token.max_timestamp_ms)
        .with_token_id(str_bytes(&token.token_id))
        .with_hmac(token.hmac.clone().into())
        .with_renewers(
            token
                .renewers
                .iter()
                .map(|renewer| {
                    let (kind, name) = split(renewer);
                    DescribedDelegationTokenRenewer::default()
                        .with_principal_type(str_bytes(kind))
                        .with_principal_name(str_bytes(name))
                })
                .collect(),
        )
}

gregor_sdk::export_handler!(DescribeDelegationToken);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn token(owner: &str, renewers: &[&str]) -> TokenInfo {
        TokenInfo {
            token_id: "id".into(),
            hmac: vec![1, 2],
            owner: owner.into(),
            requester: owner.into(),
            renewers: renewers.iter().map(|r| r.to_string()).collect(),
            issue_timestamp_ms: 1,
            expiry_timestamp_ms: 2,
            max_timestamp_ms: 3,
        }
    }

    #[test]
    fn owners_filter_matches_owners_and_renewers() {
        let t = token("User:a", &["User:b"]);
        assert!(owner_or_renewer(&t, "User:a"));
        assert!(owner_or_renewer(&t, "User:b"));
        assert!(!owner_or_renewer(&t, "User:c"));
        // Own tokens need no authorization call.
        let owners = vec!["User:b".to_string()];
        assert_eq!(visible("User:a", Some(&owners), vec![t.clone()]).len(), 1);
        assert!(visible("User:a", Some(&[]), vec![t]).is_empty());
    }

    #[test]
    fn encodes_for_every_served_version() {
        let owner = DescribeDelegationTokenOwner::default()
            .with_principal_type(str_bytes("User"))
            .with_principal_name(str_bytes("a"));
        let request = DescribeDelegationTokenRequest::default().with_owners(Some(vec![owner]));
        // Without the requester (v3 only), a token encodes for every
        // version; with it, for v3.
        let tokens = |version| {
            DescribeDelegationTokenResponse::default()
                .with_tokens(vec![described(token("User:a", &["User:b"]), version)])
        };
        assert_encodes_for_served_versions::<DescribeDelegationToken>(&[request], &[tokens(1)]);
        assert!(tokens(3).encode(&mut Vec::new(), 3).is_ok());
    }
}
