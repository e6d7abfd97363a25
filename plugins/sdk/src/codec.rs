//! Decoding requests and encoding responses with the `kafka-protocol` crate.
//!
//! The host has already parsed the request header; a handler sees the body
//! and the version from its [`RequestContext`].

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

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
/// the error carries that outcome.
pub fn decode<R: Decodable>(ctx: &RequestContext, body: &[u8]) -> Result<R, Outcome> {
    let mut buf = Bytes::copy_from_slice(body);
    match R::decode(&mut buf, ctx.api_version) {
        Ok(request) => Ok(request),
        Err(error) => {
            logging::log(
                logging::Level::Warn,
                &format!(
                    "malformed request (api key {}, version {}, correlation id {}): {error}",
                    ctx.api_key, ctx.api_version, ctx.correlation_id
                ),
            );
            Err(Outcome::CloseConnection)
        }
    }
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
