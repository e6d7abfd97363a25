//! SaslHandshake (ApiKey 17): the client names the SASL mechanism it wants,
//! as in Kafka's SaslServerAuthenticator. The host keeps the connection's
//! authentication state: on a SASL listener before authentication it
//! selects the mechanism (or answers UNSUPPORTED_SASL_MECHANISM with the
//! enabled ones and closes the connection); on a listener without SASL or
//! after authentication it answers ILLEGAL_SASL_STATE, as KafkaApis does.
//!
//! Versions 0 and 1 are advertised, as Kafka does: librdkafka requires v0
//! in ApiVersions before it will use SASL at all, then speaks v1 with
//! SaslAuthenticate. A client that really uses v0 sends the SASL tokens
//! unframed (pre-KIP-152); the host reads and answers those itself once
//! this response is out, as Kafka does. No authorization: the client
//! has not said who it is yet. The response has no throttle time (the
//! host records the request quota). A failed handler (trap or timeout) is
//! answered as Kafka's `getErrorResponse`: the error and no mechanisms.

use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use gregor_sdk::AnswerError;
use gregor_sdk::{sasl, Handler, Reply, RequestContext};

struct SaslHandshake;

impl Handler for SaslHandshake {
    gregor_sdk::api!(SaslHandshakeRequest, 0..=1);

    fn handle(_: &RequestContext, request: &SaslHandshakeRequest) -> Reply<SaslHandshakeResponse> {
        let result = sasl::handshake(request.mechanism.as_str());
        SaslHandshakeResponse::default()
            .with_error_code(result.error.error_code())
            .with_mechanisms(result.mechanisms.iter().map(|m| str_bytes(m)).collect())
            .into()
    }
}

gregor_sdk::export_handler!(SaslHandshake);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ResponseError;

    gregor_sdk::served_versions_test!(
        SaslHandshake,
        [SaslHandshakeRequest::default().with_mechanism(str_bytes("PLAIN"))],
        [SaslHandshakeResponse::default()
            .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
            .with_mechanisms(vec![str_bytes("PLAIN"), str_bytes("SCRAM-SHA-256")])]
    );
}
