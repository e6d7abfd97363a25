//! The guest library for interceptor modules (the `kafka-interceptor`
//! world): modules that wrap the standard handler of some ApiKeys, before
//! (validate, rewrite or answer the request) and after (rewrite the
//! response), without copying the handler.
//!
//! An interceptor implements [`Interceptor`] and exports it with
//! [`export_interceptor!`]. The hooks get bytes, as the host passes them;
//! [`decode_request`], [`rewrite_request`], [`rewrite_response`] and
//! [`encode`] turn them into the
//! `kafka-protocol` messages for the request's version with the SDK's
//! bounded decoding, so an interceptor reads like the handler it wraps.
//!
//! This is a crate apart from `gregor-sdk` because the bindings of a world
//! follow every crate that reaches them into its component: handlers must
//! not carry the interceptor world, nor interceptors the handler world.
//! From `gregor-sdk` it uses plain data only.

use bytes::BytesMut;
use gregor_sdk::bounded::{decode_bounded, DecodeError, DECODE_BUDGET};
use gregor_sdk::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

pub use gregor_sdk::kafka_protocol;

/// Bindings generated from the `kafka-interceptor` world in `wit/`.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "kafka-interceptor",
        pub_export_macro: true,
        export_macro_name: "export_interceptor_world",
        default_bindings_module: "gregor_intercept::bindings",
    });
}

pub use bindings::exports::gregor::broker::interceptor::{InterceptorInfo, Verdict};
pub use bindings::gregor::broker::types::RequestContext;
pub use bindings::gregor::broker::{logging, metadata, types};

/// One interceptor: the ApiKeys it wraps and its two hooks. Both default
/// to passing everything on unchanged.
pub trait Interceptor {
    /// A short name for logs and the admin API.
    const NAME: &'static str;
    /// The ApiKeys this interceptor understands.
    const API_KEYS: &'static [i16];

    /// Before the handler: pass the request on (as it is or rewritten),
    /// answer it, or close the connection.
    fn on_request(_ctx: &RequestContext, body: Vec<u8>) -> Verdict {
        Verdict::Continue(body)
    }

    /// After the handler, for a request this interceptor passed on: the
    /// response body to send on, or why there is none (the request then
    /// fails as a failed handler's does). `request` is the body as this
    /// interceptor was given it (hooks keep no state between calls).
    fn on_response(
        _ctx: &RequestContext,
        _request: Vec<u8>,
        response: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        Ok(response)
    }
}

/// Decodes a request body for the context's version (bounded: no input
/// makes the module trap).
pub fn decode_request<R: Decodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
) -> Result<R, DecodeError> {
    let flexible = R::header_version(ctx.api_version) >= 2;
    decode_bounded(body, ctx.api_version, flexible, DECODE_BUDGET)
}

/// Decodes a response body (the handler's) for the context's version.
pub fn decode_response<R: Decodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
) -> Result<R, DecodeError> {
    let flexible = R::header_version(ctx.api_version) >= 1;
    decode_bounded(body, ctx.api_version, flexible, DECODE_BUDGET)
}

/// Encodes a message for the context's version.
pub fn encode<R: Encodable>(ctx: &RequestContext, message: &R) -> Result<Vec<u8>, String> {
    let mut buf = BytesMut::new();
    message
        .encode(&mut buf, ctx.api_version)
        .map_err(|error| format!("cannot encode for version {}: {error}", ctx.api_version))?;
    Ok(buf.to_vec())
}

/// Decodes a request, lets `edit` change it, and encodes it again.
pub fn rewrite_request<R: Decodable + Encodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
    edit: impl FnOnce(&mut R),
) -> Result<Vec<u8>, String> {
    let mut request: R = decode_request(ctx, body).map_err(|error| error.to_string())?;
    edit(&mut request);
    encode(ctx, &request)
}

/// Decodes a response, lets `edit` change it, and encodes it again.
pub fn rewrite_response<R: Decodable + Encodable + HeaderVersion>(
    ctx: &RequestContext,
    body: &[u8],
    edit: impl FnOnce(&mut R),
) -> Result<Vec<u8>, String> {
    let mut response: R = decode_response(ctx, body).map_err(|error| error.to_string())?;
    edit(&mut response);
    encode(ctx, &response)
}

/// A request that cannot be read must not be passed on: the connection is
/// closed, as Kafka closes it for a malformed request (logged).
pub fn refuse_unreadable(ctx: &RequestContext, why: &str) -> Verdict {
    logging::log(
        logging::Level::Warn,
        &format!(
            "request not intercepted (api key {}, version {}, correlation id {}): {why}",
            ctx.api_key, ctx.api_version, ctx.correlation_id
        ),
    );
    Verdict::CloseConnection
}

/// Exports an [`Interceptor`] through the generated bindings.
#[doc(hidden)]
pub struct Export<T>(std::marker::PhantomData<T>);

impl<T: Interceptor> bindings::exports::gregor::broker::interceptor::Guest for Export<T> {
    fn describe() -> InterceptorInfo {
        InterceptorInfo {
            name: T::NAME.to_string(),
            api_keys: T::API_KEYS.to_vec(),
        }
    }

    fn on_request(ctx: RequestContext, body: Vec<u8>) -> Verdict {
        T::on_request(&ctx, body)
    }

    fn on_response(
        ctx: RequestContext,
        request: Vec<u8>,
        response: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        T::on_response(&ctx, request, response)
    }
}

/// Exports a type implementing [`Interceptor`] as this module's
/// interceptor.
#[macro_export]
macro_rules! export_interceptor {
    ($ty:ident) => {
        type __GregorInterceptorExport = $crate::Export<$ty>;
        $crate::bindings::export_interceptor_world!(__GregorInterceptorExport with_types_in $crate::bindings);
    };
}
