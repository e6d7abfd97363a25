//! One connection: read a frame, parse its header, route it, enqueue it,
//! wait for its response, write it, repeat. Reading the next request only
//! after the previous response is written gives Kafka's guarantees (one
//! request in flight, responses in order) without a reorder buffer: a
//! pipelining client's further requests wait in the socket buffer, as
//! Kafka's muted channels make them wait.
//!
//! While a request is in flight the connection still watches its socket:
//! bytes the client pipelines are buffered unparsed, and when the client
//! goes away (EOF or a reset) the connection ends at once, dropping the
//! request's reply receiver so that a parked request (a long-poll Fetch)
//! can see `reply.closed()` and give up its work.
//!
//! Any protocol violation (bad frame, malformed header, unknown ApiKey,
//! unsupported version) closes this connection only, with a log line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::metrics::{label_of, ConnectionRecorder, Metrics, RequestTimes};
use crate::network::channel::{Request, RequestChannel, Response, Route, Timings};
use crate::network::connection_quotas::ConnectionQuotas;
use crate::network::frame::{Frame, FrameReader};
use crate::network::header::{self, API_VERSIONS_KEY};
use crate::network::memory_pool::MemoryPool;
use crate::network::sasl_v0;
use crate::network::transport::Transport;
use crate::network::vectored::write_parts;
use crate::plugins::exposure;
use crate::plugins::registry::Registry;
use crate::security::credentials::CredentialStore;
use crate::security::sasl::Admission;
use crate::security::session::Session;

/// SaslHandshake, whose v0 is followed by unframed SASL tokens.
const SASL_HANDSHAKE_KEY: i16 = 17;

/// What every connection task shares.
pub struct ConnectionContext {
    pub registry: Arc<Registry>,
    pub metrics: Arc<Metrics>,
    pub channel: RequestChannel,
    pub max_request_bytes: usize,
    /// `queued.max.request.bytes`.
    pub memory_pool: Arc<MemoryPool>,
    /// `max.connections`, `max.connections.per.ip`.
    pub connection_quotas: Arc<ConnectionQuotas>,
    /// What SaslHandshake v0's unframed tokens authenticate against.
    pub credentials: Arc<CredentialStore>,
    /// This node's controller listeners (`exposure`): none unless it has
    /// the controller role.
    pub controller_listeners: Vec<String>,
    /// Whether broker listeners serve the forwarded controller APIs.
    pub forwards_controller_apis: bool,
}

/// Why a connection ended, for the log.
enum Ending {
    ClientClosed,
    /// The client went away while its request was in flight.
    ClientGone {
        correlation_id: i32,
        api_key: i16,
    },
    Violation(String),
    HandlerClosed,
    Shutdown,
    WriteFailed(std::io::Error),
    AuthenticationFailed,
}

/// Serves one connection, plain TCP or TLS, until it ends.
pub async fn serve<S: Transport>(stream: S, session: Arc<Session>, ctx: Arc<ConnectionContext>) {
    let span = info_span!(
        "connection",
        id = session.connection_id,
        peer = %session.client_host,
        listener = %session.listener
    );
    async move {
        ctx.metrics.connection_opened(&session.listener);
        let ending = run(stream, &session, &ctx).await;
        ctx.metrics.connection_closed(&session.listener);
        match ending {
            Ending::ClientClosed => debug!("connection closed by client"),
            Ending::ClientGone {
                correlation_id,
                api_key,
            } => debug!(
                correlation_id,
                api_key, "client closed the connection while its request was in flight"
            ),
            Ending::HandlerClosed => debug!("connection closed by handler"),
            Ending::Shutdown => debug!("connection closed for shutdown"),
            Ending::Violation(reason) => warn!("closing connection: {reason}"),
            Ending::WriteFailed(error) => debug!("closing connection: write failed: {error}"),
            Ending::AuthenticationFailed => {
                info!(principal = %session.principal(), "closing connection: SASL authentication failed")
            }
        }
    }
    .instrument(span)
    .await
}

async fn run<S: Transport>(stream: S, session: &Arc<Session>, ctx: &ConnectionContext) -> Ending {
    let (read_half, mut write_half) = stream.into_halves();
    let mut reader = FrameReader::new(read_half);
    // This connection's metric handles: recording touches only atomics.
    let mut recorder = ConnectionRecorder::default();
    loop {
        let Frame {
            bytes: frame,
            reservation,
        } = match reader
            .read_frame(ctx.max_request_bytes, &ctx.memory_pool)
            .await
        {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ending::ClientClosed,
            Err(error) => return Ending::Violation(error.to_string()),
        };
        let received = Instant::now();
        let request_size = frame.len();
        let request = match parse(frame, session, ctx) {
            Ok(request) => request,
            Err(reason) => return Ending::Violation(reason),
        };
        let (header, body, route, flexible_response) = request;
        // A SASL connection may only authenticate until it has.
        if let Admission::Refuse(reason) = session.auth.admits(header.api_key) {
            return Ending::Violation(reason);
        }
        let correlation_id = header.correlation_id;
        let api_key = header.api_key;
        let api_version = header.api_version;
        let request_bytes = body.len();
        let request_metrics = recorder.get(
            &ctx.metrics,
            match &route {
                Route::Handler(handler) => label_of(header.api_key, &handler.info().name),
                Route::UnsupportedApiVersions => "ApiVersions",
            },
        );
        let (reply, response) = oneshot::channel();
        let request = Request {
            header,
            body,
            size: request_size,
            session: Arc::clone(session),
            route,
            flexible_response,
            timings: Timings {
                received,
                dequeued: None,
                handled: None,
                remote: Duration::ZERO,
            },
            reply,
            memos: Vec::new(),
            intercepted: Vec::new(),
        };
        if ctx.channel.send(request).await.is_err() {
            return Ending::Shutdown;
        }
        // Returning drops `response`: the worker's `reply.closed()` fires.
        let reply = tokio::select! {
            biased;
            reply = response => match reply {
                Ok(reply) => reply,
                Err(_) => return Ending::Shutdown,
            },
            () = reader.peer_gone() => {
                return Ending::ClientGone {
                    correlation_id,
                    api_key,
                }
            }
        };
        let picked_up = Instant::now();
        let throttle = reply.throttle;
        let written = match reply.response {
            // TLS buffers what it encrypts: flush so the response leaves now.
            Response::Send(frame) => match write_half.write_all(&frame).await {
                Ok(()) => write_half.flush().await.map_err(Ending::WriteFailed),
                Err(error) => Err(Ending::WriteFailed(error)),
            },
            Response::SendParts(parts) => match write_parts(&mut write_half, &parts).await {
                Ok(()) => write_half.flush().await.map_err(Ending::WriteFailed),
                Err(error) => Err(Ending::WriteFailed(error)),
            },
            Response::Nothing => Ok(()),
            Response::Close => {
                debug!(correlation_id, "handler asked to close the connection");
                Err(Ending::HandlerClosed)
            }
        };
        let sent = Instant::now();
        drop(reservation);
        let timings = reply.timings;
        let dequeued = timings.dequeued.unwrap_or(received);
        let handled = timings.handled.unwrap_or(dequeued);
        let times = RequestTimes {
            queue: dequeued.saturating_duration_since(received),
            local: handled
                .saturating_duration_since(dequeued)
                .saturating_sub(timings.remote),
            remote: timings.remote,
            throttle,
            response_queue: picked_up.saturating_duration_since(handled),
            response_send: sent.saturating_duration_since(picked_up),
            total: sent.saturating_duration_since(received),
        };
        request_metrics.record(api_version, request_bytes, &times, reply.end);
        if let Err(ending) = written {
            return ending;
        }
        // Kafka closes the connection once a failed authentication has
        // been answered.
        if session.auth.failed() {
            return Ending::AuthenticationFailed;
        }
        // After a v0 handshake the SASL tokens come unframed.
        if api_key == SASL_HANDSHAKE_KEY && api_version == 0 && session.auth.awaiting_token() {
            let outcome = sasl_v0::exchange(
                &mut reader,
                &mut write_half,
                session,
                &ctx.credentials,
                &ctx.memory_pool,
            )
            .await;
            match outcome {
                sasl_v0::Outcome::Authenticated => {}
                sasl_v0::Outcome::Failed(reason) => {
                    debug!(reason, "unframed SASL exchange failed");
                    return Ending::AuthenticationFailed;
                }
                sasl_v0::Outcome::ClientClosed => return Ending::ClientClosed,
                sasl_v0::Outcome::Violation(reason) => return Ending::Violation(reason),
                sasl_v0::Outcome::WriteFailed(error) => return Ending::WriteFailed(error),
            }
        }
        // A client quota was exceeded: the response went out at once with
        // its throttle time, and now the connection stays muted for that
        // long (KIP-219), as Kafka's throttled channels do.
        if !throttle.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(throttle) => {}
                () = reader.peer_gone() => return Ending::ClientClosed,
            }
        }
    }
}

type Parsed = (header::RequestHeader, Bytes, Route, bool);

/// Routes a frame by its ApiKey and version and parses its header with the
/// header version the serving module implies.
fn parse(frame: Bytes, session: &Session, ctx: &ConnectionContext) -> Result<Parsed, String> {
    let Some((api_key, api_version)) = header::peek_key_and_version(&frame) else {
        return Err("frame too short for a request header".to_string());
    };
    let served = exposure::serves_on(
        api_key,
        &session.listener,
        &session.security_protocol,
        &ctx.controller_listeners,
        ctx.forwards_controller_apis,
    );
    let Some(handler) = ctx.registry.handler(api_key).filter(|_| served) else {
        return Err(format!(
            "unknown api key {api_key} (version {api_version}) from {}",
            session.client_host
        ));
    };
    let info = handler.info();
    if api_version < info.min_version || api_version > info.max_version {
        if api_key == API_VERSIONS_KEY {
            // Only the correlation id is needed to answer; the rest of a
            // newer header may be laid out differently.
            let correlation_id = frame
                .get(4..8)
                .and_then(|raw| raw.try_into().ok())
                .map(i32::from_be_bytes)
                .ok_or_else(|| "truncated ApiVersions header".to_string())?;
            let header = header::RequestHeader {
                api_key,
                api_version,
                correlation_id,
                client_id: None,
            };
            return Ok((header, Bytes::new(), Route::UnsupportedApiVersions, false));
        }
        return Err(format!(
            "unsupported version {api_version} of api key {api_key} ({}: versions {} to {})",
            info.name, info.min_version, info.max_version
        ));
    }
    let flexible = info
        .first_flexible_version
        .is_some_and(|first| api_version >= first);
    let (header, body) =
        header::parse_request(frame, flexible).map_err(|error| error.to_string())?;
    let flexible_response = header::flexible_response_header(api_key, flexible);
    // A canary of this ApiKey may take the request (`plugins::rollout`).
    let handler = ctx.registry.rollouts.route(
        handler,
        api_version,
        &session.principal(),
        header.client_id.as_deref(),
    );
    Ok((header, body, Route::Handler(handler), flexible_response))
}
