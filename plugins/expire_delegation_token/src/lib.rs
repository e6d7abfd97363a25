//! ExpireDelegationToken (ApiKey 40), as Kafka's
//! `KafkaApis.handleExpireTokenRequest` and the controller's
//! `expireDelegationToken`.
//!
//! - Versions 0-2 (v0, which KIP-896 removed, is v1's message). The token is named by its HMAC; only its owner, its
//!   requester and its renewers may expire it (else
//!   DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is
//!   DELEGATION_TOKEN_NOT_FOUND. Connections that may not manage tokens get
//!   DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
//! - A negative period expires the token now (it is removed and can no
//!   longer authenticate); otherwise its expiry moves to now + period,
//!   capped at its maximum lifetime (an already expired token is
//!   DELEGATION_TOKEN_EXPIRED). Errors answer expiry -1.
//! - Error response (a trap or timeout): the error and expiry -1, as
//!   Kafka's `ExpireDelegationTokenRequest.getErrorResponse`.
//!
//! All but the host call is shared with RenewDelegationToken
//! ([`gregor_sdk::token_lifetime`]).

use gregor_sdk::delegation_tokens;
use gregor_sdk::kafka_protocol::messages::ExpireDelegationTokenRequest;
use gregor_sdk::token_lifetime::{LifetimeChange, TokenLifetime};
use gregor_sdk::KafkaError;

struct Expire;

impl LifetimeChange for Expire {
    gregor_sdk::api!(ExpireDelegationTokenRequest, 0..=2);

    fn change(request: &ExpireDelegationTokenRequest) -> Result<i64, KafkaError> {
        delegation_tokens::expire(&request.hmac, request.expiry_time_period_ms)
    }
}

type ExpireDelegationToken = TokenLifetime<Expire>;

gregor_sdk::export_handler!(ExpireDelegationToken);

gregor_sdk::served_versions_test!(
    ExpireDelegationToken,
    [ExpireDelegationTokenRequest::default().with_hmac(vec![1, 2, 3].into())],
    [
        gregor_sdk::kafka_protocol::messages::ExpireDelegationTokenResponse::default()
            .with_error_code(62)
    ]
);
