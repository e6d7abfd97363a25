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
//! this is how a client says who it is.

use bytes::Bytes;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use gregor_sdk::{api_info, decode, respond, sasl, ApiInfo, Handler, Outcome, RequestContext};

struct SaslAuthenticate;

impl Handler for SaslAuthenticate {
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
        respond(&ctx, &response)
    }
}

gregor_sdk::export_handler!(SaslAuthenticate);
