//! ExpireDelegationToken (ApiKey 40), as Kafka's
//! `KafkaApis.handleExpireTokenRequest` and the controller's
//! `expireDelegationToken`.
//!
//! - Versions 1-2. The token is named by its HMAC; only its owner, its
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

use gregor_sdk::delegation_tokens;
use gregor_sdk::kafka_protocol::messages::{
    ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext,
};

struct ExpireDelegationToken;

impl RawHandler for ExpireDelegationToken {
    fn describe() -> ApiInfo {
        api_info::<ExpireDelegationTokenRequest>("ExpireDelegationToken", 1, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ExpireDelegationTokenRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response =
            match delegation_tokens::expire(&request.hmac, request.expiry_time_period_ms) {
                Ok(expiry) => {
                    ExpireDelegationTokenResponse::default().with_expiry_timestamp_ms(expiry)
                }
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
        decode::<ExpireDelegationTokenRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(error_code))
    }
}

/// The request answered with `error_code` and expiry -1.
fn error_response_for(error_code: i16) -> ExpireDelegationTokenResponse {
    ExpireDelegationTokenResponse::default()
        .with_error_code(error_code)
        .with_expiry_timestamp_ms(-1)
}

gregor_sdk::export_raw_handler!(ExpireDelegationToken);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 1..=2 {
            let response = ExpireDelegationTokenResponse::default().with_error_code(62);
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
