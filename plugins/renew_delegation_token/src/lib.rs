//! RenewDelegationToken (ApiKey 39), as Kafka's
//! `KafkaApis.handleRenewTokenRequest` and the controller's
//! `renewDelegationToken`.
//!
//! - Versions 1-2. The token is named by its HMAC. Only its owner, its
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

use gregor_sdk::delegation_tokens;
use gregor_sdk::kafka_protocol::messages::{
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext,
};

struct RenewDelegationToken;

impl RawHandler for RenewDelegationToken {
    fn describe() -> ApiInfo {
        api_info::<RenewDelegationTokenRequest>("RenewDelegationToken", 1, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: RenewDelegationTokenRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = match delegation_tokens::renew(&request.hmac, request.renew_period_ms) {
            Ok(expiry) => RenewDelegationTokenResponse::default().with_expiry_timestamp_ms(expiry),
            Err(error) => error_response_for(error.code),
        };
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error, no expiry.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        // Nothing of the request is echoed, but a body that does not decode
        // gets no response.
        decode::<RenewDelegationTokenRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(error_code))
    }
}

/// The request answered with `error_code` and expiry -1.
fn error_response_for(error_code: i16) -> RenewDelegationTokenResponse {
    RenewDelegationTokenResponse::default()
        .with_error_code(error_code)
        .with_expiry_timestamp_ms(-1)
}

gregor_sdk::export_raw_handler!(RenewDelegationToken);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 1..=2 {
            let response = RenewDelegationTokenResponse::default().with_expiry_timestamp_ms(5);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = gregor_sdk::ResponseError::UnknownServerError.code();
        let response = error_response_for(code);
        assert_eq!(
            (response.error_code, response.expiry_timestamp_ms),
            (code, -1)
        );
        for version in 1..=2 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
