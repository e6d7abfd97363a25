//! Decoding requests and encoding responses with the `kafka-protocol` crate.
//!
//! The host has already parsed the request header; a handler sees the body
//! and the version from its [`RequestContext`].

use bytes::BytesMut;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::bounded::{decode_bounded, DecodeError, DECODE_BUDGET};
use crate::{logging, ApiInfo, Outcome, RequestContext};

/// Describes a handler for ApiKey `R::KEY` serving `min..=max`, with the
/// first flexible version taken from the message schema.
pub fn api_info<R: kafka_protocol::protocol::Request>(name: &str, min: i16, max: i16) -> ApiInfo {
    ApiInfo {
        api_key: R::KEY,
        name: name.to_string(),
        min_version: min,
        max_version: max,
        first_flexible_version: (min..=max).find(|v| R::header_version(*v) >= 2),
    }
}

/// Decodes the request body for the context's version. A body that does
/// not parse is a malformed request: Kafka closes the connection for it, so
/// the error carries that outcome. So does a request too large to decode
/// within the module's memory (see [`decode_request`] to answer it).
pub fn decode<R: Decodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
) -> Result<R, Outcome> {
    decode_request(ctx, body).map_err(|_| Outcome::CloseConnection)
}

/// Decodes the request body for the context's version without a trap on
/// any input (see [`crate::bounded`]); the error, logged, tells a malformed
/// body from one too large to decode.
pub fn decode_request<R: Decodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
) -> Result<R, DecodeError> {
    let flexible = R::header_version(ctx.api_version) >= 2;
    decode_bounded(body, ctx.api_version, flexible, DECODE_BUDGET).map_err(|error| {
        logging::log(
            logging::Level::Warn,
            &format!(
                "request not decoded (api key {}, version {}, correlation id {}, {} bytes): {error}",
                ctx.api_key,
                ctx.api_version,
                ctx.correlation_id,
                body.len()
            ),
        );
        error
    })
}

/// Encodes a response body for the context's version. A response that
/// cannot be encoded (a field the version cannot carry) closes the
/// connection rather than sending a wrong answer.
pub fn respond<R: Encodable + HeaderVersion>(ctx: &RequestContext, response: &R) -> Outcome {
    match encode(ctx, response) {
        Some(body) => Outcome::Respond(body),
        None => Outcome::CloseConnection,
    }
}

/// The encoded response body, or None (logged) when the version cannot
/// carry it.
pub fn encode<R: Encodable>(ctx: &RequestContext, response: &R) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    match response.encode(&mut buf, ctx.api_version) {
        Ok(()) => Some(buf.to_vec()),
        Err(error) => {
            logging::log(
                logging::Level::Error,
                &format!(
                    "cannot encode response (api key {}, version {}): {error}",
                    ctx.api_key, ctx.api_version
                ),
            );
            None
        }
    }
}
