//! RenewDelegationToken (ApiKey 39), as Kafka's
//! `KafkaApis.handleRenewTokenRequest` and the controller's
//! `renewDelegationToken`.
//!
//! - Versions 0-2 (v0, which KIP-896 removed, is v1's message). The token is named by its HMAC. Only its owner, its
//!   requester and its renewers may renew it (else
//!   DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is
//!   DELEGATION_TOKEN_NOT_FOUND, an expired token DELEGATION_TOKEN_EXPIRED.
//!   Connections that may not manage tokens get
//!   DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
//! - The new expiry is now + the renew period (at most
//!   `delegation.token.expiry.time.ms`; -1 takes it), capped at the
//!   token's maximum lifetime. Errors answer expiry -1.
//! - Error response (a trap or timeout): the error and expiry -1, as
//!   Kafka's `RenewDelegationTokenRequest.getErrorResponse`.
//!
//! All but the host call is shared with ExpireDelegationToken
//! ([`gregor_sdk::token_lifetime`]).

use gregor_sdk::delegation_tokens;
use gregor_sdk::kafka_protocol::messages::RenewDelegationTokenRequest;
use gregor_sdk::token_lifetime::{LifetimeChange, TokenLifetime};
use gregor_sdk::KafkaError;

struct Renew;

impl LifetimeChange for Renew {
    gregor_sdk::api!(RenewDelegationTokenRequest, 0..=2);

    fn change(request: &RenewDelegationTokenRequest) -> Result<i64, KafkaError> {
        delegation_tokens::renew(&request.hmac, request.renew_period_ms)
    }
}

type RenewDelegationToken = TokenLifetime<Renew>;

gregor_sdk::export_handler!(RenewDelegationToken);

gregor_sdk::served_versions_test!(
    RenewDelegationToken,
    [RenewDelegationTokenRequest::default().with_hmac(vec![1, 2, 3].into())],
    [
        gregor_sdk::kafka_protocol::messages::RenewDelegationTokenResponse::default()
            .with_expiry_timestamp_ms(5)
    ]
);
