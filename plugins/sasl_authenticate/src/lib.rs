//! SaslAuthenticate (ApiKey 36): one token of the SASL exchange the
//! handshake selected, as Kafka's SaslServerAuthenticator handles it. The
//! host runs the mechanism (PLAIN, SCRAM-SHA-256/512) against its
//! credential store and keeps the per-connection state; this handler
//! carries the tokens. A failed exchange answers SASL_AUTHENTICATION_FAILED
//! with Kafka's message and the host closes the connection once the answer
//! is written; a successful one makes the user the connection's principal.
//! After authentication another SaslAuthenticate is ILLEGAL_SASL_STATE.
//!
//! v1+ carry the session lifetime: 0, as Gregor does not ask clients to
//! re-authenticate (`connections.max.reauth.ms` unset). No authorization:
//! this is how a client says who it is. A failed handler (trap or
//! timeout) is answered as Kafka's `getErrorResponse`: the error with its
//! message and no token.

use bytes::Bytes;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{
    api_info, decode, encode, respond, sasl, ApiInfo, Outcome, RawHandler, RequestContext,
    ResponseError,
};

struct SaslAuthenticate;

impl RawHandler for SaslAuthenticate {
    fn describe() -> ApiInfo {
        api_info::<SaslAuthenticateRequest>("SaslAuthenticate", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: SaslAuthenticateRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let result = sasl::authenticate(&request.auth_bytes);
        let response = SaslAuthenticateResponse::default()
            .with_error_code(result.error_code)
            .with_error_message(result.error_message.as_deref().map(str_bytes))
            .with_auth_bytes(Bytes::from(result.auth_bytes))
            .with_session_lifetime_ms(result.session_lifetime_ms);
        gregor_sdk::count_errors([response.error_code]);
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error with its message.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let _: SaslAuthenticateRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(error_code))
    }
}

/// The error and Kafka's message for it (`ApiError.message`), no token.
fn failed(error_code: i16) -> SaslAuthenticateResponse {
    let message = (error_code == ResponseError::UnknownServerError.code()).then(|| {
        StrBytes::from_static_str(
            "The server experienced an unexpected error when processing the request.",
        )
    });
    SaslAuthenticateResponse::default()
        .with_error_code(error_code)
        .with_error_message(message)
}

gregor_sdk::export_raw_handler!(SaslAuthenticate);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let response = failed(code);
        assert_eq!(response.error_code, code);
        assert!(response.error_message.is_some());
        assert!(response.auth_bytes.is_empty());
        for version in 0..=2 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
