//! SaslHandshake (ApiKey 17): the client names the SASL mechanism it wants,
//! as in Kafka's SaslServerAuthenticator. The host keeps the connection's
//! authentication state: on a SASL listener before authentication it
//! selects the mechanism (or answers UNSUPPORTED_SASL_MECHANISM with the
//! enabled ones and closes the connection); on a listener without SASL or
//! after authentication it answers ILLEGAL_SASL_STATE, as KafkaApis does.
//!
//! Versions 0 and 1 are advertised, as Kafka does: librdkafka requires v0
//! in ApiVersions before it will use SASL at all, then speaks v1 with
//! SaslAuthenticate. A client that really uses v0 would send the SASL
//! tokens unframed (pre-KIP-152), which Gregor does not speak: such a
//! connection is closed at its first token. No authorization: the client
//! has not said who it is yet. A failed handler (trap or timeout) is
//! answered as Kafka's `getErrorResponse`: the error and no mechanisms.

use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use gregor_sdk::{
    api_info, decode, encode, respond, sasl, ApiInfo, Outcome, RawHandler, RequestContext,
};

struct SaslHandshake;

impl RawHandler for SaslHandshake {
    fn describe() -> ApiInfo {
        api_info::<SaslHandshakeRequest>("SaslHandshake", 0, 1)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: SaslHandshakeRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let result = sasl::handshake(request.mechanism.as_str());
        let response = SaslHandshakeResponse::default()
            .with_error_code(result.error_code)
            .with_mechanisms(result.mechanisms.iter().map(|m| str_bytes(m)).collect());
        gregor_sdk::count_errors([response.error_code]);
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error, no mechanisms.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let _: SaslHandshakeRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(error_code))
    }
}

fn failed(error_code: i16) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(error_code)
}

gregor_sdk::export_raw_handler!(SaslHandshake);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::ResponseError;

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let response = failed(code);
        assert_eq!((response.error_code, response.mechanisms.len()), (code, 0));
        for version in 0..=1 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
