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
//! this is how a client says who it is. The response has no throttle time
//! (the host records the request quota). A failed handler (trap or
//! timeout) is answered as Kafka's `getErrorResponse`: the error with its
//! message and no token.

use bytes::Bytes;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::AnswerError;
use gregor_sdk::{sasl, Handler, Reply, RequestContext, ResponseError};

struct SaslAuthenticate;

impl Handler for SaslAuthenticate {
    gregor_sdk::api!(SaslAuthenticateRequest, 0..=2);

    fn handle(
        _: &RequestContext,
        request: &SaslAuthenticateRequest,
    ) -> Reply<SaslAuthenticateResponse> {
        let result = sasl::authenticate(&request.auth_bytes);
        SaslAuthenticateResponse::default()
            .with_error_code(result.error.error_code())
            .with_error_message(result.error.error_message().as_deref().map(str_bytes))
            .with_auth_bytes(Bytes::from(result.auth_bytes))
            .with_session_lifetime_ms(result.session_lifetime_ms)
            .into()
    }

    /// Kafka's `getErrorResponse`: the error and Kafka's message for it
    /// (`ApiError.message`), no token.
    fn failed(
        _: &RequestContext,
        _: &SaslAuthenticateRequest,
        error_code: i16,
    ) -> SaslAuthenticateResponse {
        let message = (error_code == ResponseError::UnknownServerError.code()).then(|| {
            StrBytes::from_static_str(
                "The server experienced an unexpected error when processing the request.",
            )
        });
        SaslAuthenticateResponse::default()
            .with_error_code(error_code)
            .with_error_message(message)
    }
}

gregor_sdk::export_handler!(SaslAuthenticate);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::fake::context;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn request() -> SaslAuthenticateRequest {
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0alice\0secret"))
    }

    #[test]
    fn encodes_for_every_served_version() {
        let failed = ResponseError::SaslAuthenticationFailed.code();
        assert_encodes_for_served_versions::<SaslAuthenticate>(
            &[request()],
            &[
                SaslAuthenticateResponse::default()
                    .with_error_code(failed)
                    .with_error_message(Some(str_bytes("Authentication failed"))),
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from_static(b"r=nonce"))
                    .with_session_lifetime_ms(0),
            ],
        );
    }

    #[test]
    fn a_failure_carries_kafkas_message_and_no_token() {
        let code = ResponseError::UnknownServerError.code();
        let ctx = context::<SaslAuthenticate>(2);
        let response = SaslAuthenticate::failed(&ctx, &request(), code);
        assert_eq!(response.error_code, code);
        assert!(response.error_message.is_some());
        assert!(response.auth_bytes.is_empty());
    }
}
