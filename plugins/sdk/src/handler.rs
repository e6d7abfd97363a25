//! The handler traits a module implements and the glue that exports them as
//! the `gregor:broker/handler` interface.
//!
//! [`Handler`] is the typed layer every Kafka API is written against: a
//! module names its request and response types, its versions, and writes
//! `handle` (Kafka's `handleXxxRequest`) and, where Kafka's
//! `getErrorResponse` is more than the generic top-level error, `failed`.
//! Everything around them is done here, once:
//! decoding within the module's memory budget, counting the response's
//! error codes, the request-quota throttle time, and encoding for the
//! request's version. [`RawHandler`] is the escape hatch for a module that
//! speaks bytes (an RPC `kafka-protocol` does not know).

use std::marker::PhantomData;

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use crate::bindings::exports::gregor::broker::handler::{Answer, Guest};
use crate::bounded::DecodeError;
use crate::codec::{decode_request, encode};
use crate::legacy::Legacy;
use crate::records;
use crate::response::KafkaResponse;
use crate::{ApiInfo, Outcome, RequestContext};

/// What a handler does with a request it has handled.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply<R> {
    /// Send this response.
    Respond(R),
    /// Count and throttle this response but send nothing (acks=0 Produce).
    Withhold(R),
    /// Count and throttle this response, send nothing and close the
    /// connection (acks=0 Produce with a failed partition).
    WithholdAndClose(R),
    /// Close the connection without an answer, as Kafka does for some
    /// malformed requests.
    Close,
    /// The request is parked (Kafka's purgatory); the host handles it again
    /// when what it waits for happens, and that call answers.
    Parked,
}

impl<R> From<R> for Reply<R> {
    fn from(response: R) -> Self {
        Reply::Respond(response)
    }
}

impl<R> Reply<R> {
    /// The response this reply carries, if any.
    pub fn response(&self) -> Option<&R> {
        match self {
            Reply::Respond(r) | Reply::Withhold(r) | Reply::WithholdAndClose(r) => Some(r),
            Reply::Close | Reply::Parked => None,
        }
    }

    fn response_mut(&mut self) -> Option<&mut R> {
        match self {
            Reply::Respond(r) | Reply::Withhold(r) | Reply::WithholdAndClose(r) => Some(r),
            Reply::Close | Reply::Parked => None,
        }
    }
}

/// One Kafka ApiKey, like one `KafkaApis.handleXxxRequest`, on typed
/// messages. Export it with [`crate::export_handler!`].
pub trait Handler {
    /// The request message; its ApiKey is the one served.
    type Request: Request + Decodable + HeaderVersion;
    /// The response message.
    type Response: Encodable + KafkaResponse + Default;

    /// The API's name, as Kafka's `ApiKeys` spells it.
    const NAME: &'static str;
    /// The oldest version served.
    const MIN_VERSION: i16;
    /// The newest version served.
    const MAX_VERSION: i16;

    /// Handles one decoded request.
    fn handle(ctx: &RequestContext, request: &Self::Request) -> Reply<Self::Response>;

    /// Kafka's `getErrorResponse`: the request answered with `error_code`
    /// everywhere it can carry one. Sent when `handle` failed (it trapped
    /// or ran out of time). By default the generic one,
    /// [`KafkaResponse::error_response`]; a handler whose message answers
    /// per element of the request (per partition, per resource, ...) or
    /// sets more than the code writes its own. Some APIs answer
    /// differently per version, hence the context.
    fn failed(_ctx: &RequestContext, _request: &Self::Request, error_code: i16) -> Self::Response {
        Self::Response::error_response(error_code).unwrap_or_default()
    }

    /// Whether a failed request is answered with [`Handler::failed`] at all;
    /// when not, the host closes the connection (acks=0 Produce).
    fn answers_failure(_ctx: &RequestContext, _request: &Self::Request) -> bool {
        true
    }

    /// Sets the response's throttle time (Kafka's
    /// `sendResponseMaybeThrottle`): by default the larger of what the
    /// handler set (a mutation or bandwidth quota) and the request quota's.
    /// A response without a throttle time leaves the request quota to the
    /// host, which records it when the handler returns.
    fn throttle(_ctx: &RequestContext, _request: &Self::Request, response: &mut Self::Response) {
        with_request_quota(response);
    }

    /// The answer to a request too large to decode within the module's
    /// memory: by default the connection is closed, as for a malformed one.
    fn too_large(_ctx: &RequestContext) -> Reply<Self::Response> {
        Reply::Close
    }

    /// A reply given before the request is decoded, or None (the default)
    /// to decode and handle it: for a version advertised but not served,
    /// whose body the message schema cannot decode (Produce v0-2). Added
    /// for batch B.
    fn before_decode(_ctx: &RequestContext) -> Option<Reply<Self::Response>> {
        None
    }

    /// Versions older than the ones `kafka-protocol` knows (Kafka 4 removed
    /// them, KIP-896), served by rewriting them to and from the oldest it
    /// knows ([`crate::legacy`]); `handle` still sees the request's version
    /// in its context.
    const LEGACY: Option<Legacy> = None;
}

/// The declarations every handler makes, in one line inside its
/// `impl Handler` block: `gregor_sdk::api!(HeartbeatRequest, 0..=4)` names
/// the request, the response `kafka-protocol` pairs with it, the versions
/// served, and the API's name as Kafka's `ApiKeys` spells it (the request
/// message's name without `Request`). Also fits the SDK's per-concern
/// traits that declare the same items
/// ([`crate::token_lifetime::LifetimeChange`],
/// [`crate::config_alter::ConfigEdit`]).
#[macro_export]
macro_rules! api {
    ($request:ident, $min:tt..=$max:tt) => {
        type Request = $request;
        type Response = <$request as $crate::kafka_protocol::protocol::Request>::Response;
        const NAME: &'static str = $crate::handler::api_name(stringify!($request));
        const MIN_VERSION: i16 = $min;
        const MAX_VERSION: i16 = $max;
    };
}

/// Writes a handler crate's `encodes_for_every_served_version` test:
/// `served_versions_test!(Handler, [requests...], [responses...])` is
/// [`crate::testing::assert_encodes_for_served_versions`] for `Handler`
/// with the requests (that name something, so `failed` must carry the
/// error) and the responses (the shapes `handle` builds). Defined for every
/// target (a crate calls it outside its test module); the test exists only
/// in test builds.
#[macro_export]
macro_rules! served_versions_test {
    ($handler:ty, [$($request:expr),* $(,)?], [$($response:expr),* $(,)?] $(,)?) => {
        #[cfg(test)]
        #[test]
        fn encodes_for_every_served_version() {
            $crate::testing::assert_encodes_for_served_versions::<$handler>(
                &[$($request),*],
                &[$($response),*],
            );
        }
    };
}

/// Kafka's name of the API whose request message is `request`:
/// `HeartbeatRequest` is `Heartbeat`.
pub const fn api_name(request: &'static str) -> &'static str {
    const SUFFIX: &[u8] = b"Request";
    let name = request.as_bytes();
    assert!(
        name.len() > SUFFIX.len(),
        "a request message's name ends in Request"
    );
    let len = name.len() - SUFFIX.len();
    let mut i = 0;
    while i < SUFFIX.len() {
        assert!(
            name[len + i] == SUFFIX[i],
            "a request message's name ends in Request"
        );
        i += 1;
    }
    request.split_at(len).0
}

/// Describes the handler for ApiVersions: its key, name and versions, with
/// the first flexible version taken from the message schema.
pub fn describe<H: Handler>() -> ApiInfo {
    crate::codec::api_info::<H::Request>(H::NAME, H::MIN_VERSION, H::MAX_VERSION)
}

/// Decodes, handles and finishes one request: what the exported `handle`
/// does for every typed handler.
pub fn run<H: Handler>(ctx: &RequestContext, body: &[u8]) -> Answer {
    // Nothing a previous request left (it trapped) belongs to this one.
    records::release();
    if let Some(reply) = H::before_decode(ctx) {
        return finish::<H>(ctx, without_request(reply));
    }
    let reply = match decode::<H>(ctx, body) {
        Ok(request) => {
            let mut reply = H::handle(ctx, &request);
            if let Some(response) = reply.response_mut() {
                // Counted before the throttle: a throttled Fetch drops its
                // partitions, not their errors.
                crate::count_errors(response.error_codes());
                H::throttle(ctx, &request, response);
            }
            reply
        }
        Err(DecodeError::TooLarge) => without_request(H::too_large(ctx)),
        Err(DecodeError::Malformed(_)) => Reply::Close,
    };
    finish::<H>(ctx, reply)
}

/// The handler's legacy rewriting, when `ctx`'s version needs it.
fn legacy_for<H: Handler>(ctx: &RequestContext) -> Option<(Legacy, RequestContext)> {
    let legacy = H::LEGACY.filter(|legacy| ctx.api_version < legacy.base)?;
    let base = RequestContext {
        api_version: legacy.base,
        ..ctx.clone()
    };
    Some((legacy, base))
}

/// Decodes the request for the context's version, an old one rewritten first.
pub fn decode<H: Handler>(ctx: &RequestContext, body: &[u8]) -> Result<H::Request, DecodeError> {
    match legacy_for::<H>(ctx) {
        None => decode_request::<H::Request>(ctx, body),
        Some((legacy, base)) => match legacy.request_to_base(body, ctx.api_version) {
            Ok(body) => decode_request::<H::Request>(&base, &body),
            Err(error) => {
                crate::logging::log(
                    crate::logging::Level::Warn,
                    &format!(
                        "request not rewritten (api key {}, version {}, correlation id {}): {error}",
                        ctx.api_key, ctx.api_version, ctx.correlation_id
                    ),
                );
                Err(error)
            }
        },
    }
}

/// Encodes the response for the context's version, an old one rewritten
/// from the base version's encoding; None (logged) when it cannot be.
pub fn encode_response<H: Handler>(
    ctx: &RequestContext,
    response: &H::Response,
) -> Option<Vec<u8>> {
    let Some((legacy, base)) = legacy_for::<H>(ctx) else {
        return encode(ctx, response);
    };
    let body = encode_inline(&base, response)?;
    match legacy.response_from_base(&body, ctx.api_version) {
        Ok(body) => Some(body),
        Err(error) => {
            crate::logging::log(
                crate::logging::Level::Error,
                &format!(
                    "cannot rewrite the response for v{} (api key {}): {error}",
                    ctx.api_version, ctx.api_key
                ),
            );
            None
        }
    }
}

/// [`encode`], with the bytes of any record set the response references
/// read from the host and written in place: for a response the guest must
/// rewrite (an old version's).
fn encode_inline<R: Encodable>(ctx: &RequestContext, response: &R) -> Option<Vec<u8>> {
    if !records::any_referenced() {
        return encode(ctx, response);
    }
    match records::encode_referencing(response, ctx.api_version, true) {
        Ok(referencing) => Some(referencing.body),
        Err(error) => {
            encode_failed(ctx, &error);
            None
        }
    }
}

fn encode_failed(ctx: &RequestContext, error: &str) {
    crate::logging::log(
        crate::logging::Level::Error,
        &format!(
            "cannot encode response (api key {}, version {}): {error}",
            ctx.api_key, ctx.api_version
        ),
    );
}

/// The answer carrying an encoded response: one that references the
/// record sets put in it when there are any (the host writes their bytes),
/// else the plain body.
fn respond<H: Handler>(ctx: &RequestContext, response: &H::Response) -> Answer {
    if records::any_referenced() && legacy_for::<H>(ctx).is_none() {
        return match records::encode_referencing(response, ctx.api_version, false) {
            Ok(referencing) => Answer::RespondReferencing(referencing),
            Err(error) => {
                encode_failed(ctx, &error);
                Answer::Outcome(Outcome::CloseConnection)
            }
        };
    }
    Answer::Outcome(match encode_response::<H>(ctx, response) {
        Some(body) => Outcome::Respond(body),
        None => Outcome::CloseConnection,
    })
}

/// Counts and throttles a reply given without a decoded request.
fn without_request<R: KafkaResponse>(mut reply: Reply<R>) -> Reply<R> {
    if let Some(response) = reply.response_mut() {
        crate::count_errors(response.error_codes());
        with_request_quota(response);
    }
    reply
}

/// Raises the response's throttle time to the request quota's, when the
/// response carries one.
pub fn with_request_quota<R: KafkaResponse>(response: &mut R) {
    if let Some(current) = response.throttle_time_ms() {
        response.set_throttle_time_ms(current.max(crate::request_throttle_ms()));
    }
}

/// The answer the host sees for a finished reply.
fn finish<H: Handler>(ctx: &RequestContext, reply: Reply<H::Response>) -> Answer {
    let outcome = match reply {
        Reply::Respond(response) => return respond::<H>(ctx, &response),
        Reply::Withhold(_) | Reply::Parked => Outcome::NoResponse,
        Reply::WithholdAndClose(_) | Reply::Close => Outcome::CloseConnection,
    };
    // Record sets of a response not sent are freed at once.
    records::release();
    Answer::Outcome(outcome)
}

/// The encoded error response for a request whose handling failed, or None
/// (the host then closes the connection).
pub fn error_response<H: Handler>(
    ctx: &RequestContext,
    body: &[u8],
    error_code: i16,
) -> Option<Vec<u8>> {
    let request = decode::<H>(ctx, body).ok()?;
    if !H::answers_failure(ctx, &request) {
        return None;
    }
    encode_response::<H>(ctx, &H::failed(ctx, &request, error_code))
}

/// A module that works on the raw request body: for an RPC the
/// `kafka-protocol` crate does not know. Export it with
/// [`crate::export_raw_handler!`].
pub trait RawHandler {
    /// The ApiKey, name and version range this module serves.
    fn describe() -> ApiInfo;

    /// Handles one request; `body` is the request body after the header.
    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome;

    /// The response to send when `handle` failed for this request (it
    /// trapped or ran out of time): every element answered with
    /// `error_code`. The default has none, and the host closes the
    /// connection instead.
    fn error_response(_ctx: RequestContext, _body: Vec<u8>, _error_code: i16) -> Option<Vec<u8>> {
        None
    }
}

/// Exports a [`Handler`] through the generated bindings.
#[doc(hidden)]
pub struct Typed<T>(PhantomData<T>);

impl<T: Handler> Guest for Typed<T> {
    fn describe() -> ApiInfo {
        describe::<T>()
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Answer {
        run::<T>(&ctx, &body)
    }

    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        error_response::<T>(&ctx, &body, error_code)
    }
}

/// Exports a [`RawHandler`] through the generated bindings.
#[doc(hidden)]
pub struct Raw<T>(PhantomData<T>);

impl<T: RawHandler> Guest for Raw<T> {
    fn describe() -> ApiInfo {
        T::describe()
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Answer {
        Answer::Outcome(T::handle(ctx, body))
    }

    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        T::error_response(ctx, body, error_code)
    }
}

/// Exports a type implementing [`Handler`] as this module's handler.
#[macro_export]
macro_rules! export_handler {
    ($ty:ident) => {
        type __GregorHandlerExport = $crate::handler::Typed<$ty>;
        $crate::bindings::export_handler!(__GregorHandlerExport with_types_in $crate::bindings);
    };
}

/// Exports a type implementing [`RawHandler`] as this module's handler.
#[macro_export]
macro_rules! export_raw_handler {
    ($ty:ident) => {
        type __GregorHandlerExport = $crate::handler::Raw<$ty>;
        $crate::bindings::export_handler!(__GregorHandlerExport with_types_in $crate::bindings);
    };
}
