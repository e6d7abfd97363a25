//! The KafkaApis of Gregor: handler workers take requests from the
//! request channel and route each to the module serving its ApiKey.
//!
//! Each worker keeps up to `REQUESTS_PER_WORKER` requests in progress, so
//! a guest waiting briefly in a host call (an authorizer call) never holds
//! up the worker. Requests that wait for long (a long-poll fetch, a
//! JoinGroup waiting for its rebalance) are parked instead, as Kafka parks
//! them in purgatory: their handler returns, its instance is free, the
//! wait runs as a task of its own holding neither instance nor worker, and
//! the request comes back through the request channel once the wait
//! completes (`plugins::deferred`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};

use crate::broker::Broker;
use crate::config::FailurePolicy;
use crate::error_code::ErrorCode;
use crate::metrics::RequestEnd;
use crate::network::channel::{Reply, Request, RequestChannel, Response, Route};
use crate::network::header::encode_response;
use crate::plugins::bindings::RequestContext;
use crate::plugins::deferred::{Deferral, Wait};
use crate::plugins::exposure;
use crate::plugins::handler::{CallOutcome, LoadedHandler};
use crate::plugins::imports::record_set::{Answered, ResponseBody};
use crate::plugins::interception;
use crate::plugins::rollout;
use crate::quota::Client;
use crate::security::session::Session;

/// Requests one worker keeps in progress at once.
const REQUESTS_PER_WORKER: usize = 256;

pub struct KafkaApis {
    broker: Arc<Broker>,
    /// Where a parked request goes back once its wait completes.
    channel: RequestChannel,
    parked: Arc<ParkedGauge>,
}

/// Requests parked right now, waiting outside any instance (Kafka's
/// purgatory size).
#[derive(Debug, Default)]
pub struct ParkedGauge(AtomicU64);

impl ParkedGauge {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Decrements the gauge when a parked request leaves the purgatory,
/// however it leaves.
struct ParkedGuard(Arc<ParkedGauge>);

impl ParkedGuard {
    fn enter(gauge: &Arc<ParkedGauge>) -> Self {
        gauge.0.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(gauge))
    }
}

impl Drop for ParkedGuard {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl KafkaApis {
    pub fn new(broker: Arc<Broker>, channel: RequestChannel) -> Self {
        Self {
            broker,
            channel,
            parked: Arc::default(),
        }
    }

    /// Requests parked right now.
    pub fn parked(&self) -> Arc<ParkedGauge> {
        Arc::clone(&self.parked)
    }

    /// Handles one request inside its own span (connection, correlation
    /// id, ApiKey, version, client id, principal), so every log line of
    /// the request, the module's included, carries them.
    pub async fn handle(&self, request: Request) {
        let span = info_span!(
            "request",
            connection = request.session.connection_id,
            correlation_id = request.header.correlation_id,
            api_key = request.header.api_key,
            api_version = request.header.api_version,
            client_id = request.header.client_id.as_deref().unwrap_or(""),
            principal = %request.session.principal(),
        );
        self.handle_in_span(request).instrument(span).await
    }

    async fn handle_in_span(&self, mut request: Request) {
        // A parked request handled again keeps its first dequeue time: its
        // wait counts as remote time, as Kafka's purgatory time does.
        request.timings.dequeued.get_or_insert_with(Instant::now);
        let mut throttle = Duration::ZERO;
        let (response, end) = match &request.route {
            Route::UnsupportedApiVersions => (
                Response::Send(encode_response(
                    request.header.correlation_id,
                    false,
                    &self.unsupported_api_versions_body(&request.session),
                )),
                RequestEnd::UnsupportedVersion,
            ),
            Route::Handler(handler) => {
                let handler = Arc::clone(handler);
                let ctx = RequestContext {
                    api_key: request.header.api_key,
                    api_version: request.header.api_version,
                    correlation_id: request.header.correlation_id,
                    client_id: request.header.client_id.clone(),
                    principal: request.session.principal().to_string(),
                    client_host: request.session.client_host.clone(),
                    listener: request.session.listener.clone(),
                    security_protocol: request.session.security_protocol.clone(),
                };
                // Interceptors wrapping this ApiKey (`plugins::interception`).
                // A replayed (parked) request went through the request
                // hooks already: its body is the one they left.
                let replay = !request.memos.is_empty();
                let mut passed = Vec::new();
                let mut early_reply = None;
                match self.broker.registry().chain(request.header.api_key) {
                    Ok(chain) if chain.is_empty() => {}
                    Ok(chain) if replay => passed = chain,
                    Ok(chain) => {
                        let body = request.body.clone();
                        match interception::before(
                            &self.broker.plugins,
                            chain,
                            &request.session,
                            &ctx,
                            body,
                        )
                        .await
                        {
                            Ok(before) if before.close => {
                                let answer = (Response::Close, RequestEnd::ClosedByHandler);
                                return self.reply(request, answer, throttle);
                            }
                            Ok(before) => {
                                passed = before.passed;
                                request.intercepted = before.seen;
                                match before.reply {
                                    Some(reply) => early_reply = Some(reply),
                                    None => request.body = before.body,
                                }
                            }
                            Err(reason) => {
                                let answer = self.failed(&handler, &request, &ctx, reason).await;
                                return self.reply(request, answer, throttle);
                            }
                        }
                    }
                    Err(reason) => {
                        let answer = self.failed(&handler, &request, &ctx, reason).await;
                        return self.reply(request, answer, throttle);
                    }
                }
                let outcome = match early_reply {
                    Some(body) => Ok(Answered::Respond(ResponseBody::plain(body))),
                    None => {
                        match self.call_handler(&handler, &mut request, &ctx).await {
                            Ok((outcome, handler_throttle)) => {
                                throttle = handler_throttle;
                                outcome
                            }
                            // It comes back through the channel once its
                            // wait completes.
                            Err(wait) => return self.park(request, wait),
                        }
                    }
                };
                let outcome = match outcome {
                    // Interceptors read the whole response: its record
                    // sets are copied in for them.
                    Ok(Answered::Respond(body)) if !passed.is_empty() => match body.to_vec() {
                        Ok(body) => interception::after(
                            &self.broker.plugins,
                            &passed,
                            &request.intercepted,
                            &request.session,
                            &ctx,
                            body,
                        )
                        .await
                        .map(|body| Answered::Respond(ResponseBody::plain(body))),
                        Err(error) => Err(format!("cannot read the response's records: {error}")),
                    },
                    other => other,
                };
                match outcome {
                    Ok(Answered::Respond(body)) => (
                        Response::respond(
                            request.header.correlation_id,
                            request.flexible_response,
                            &body,
                        ),
                        RequestEnd::Responded,
                    ),
                    Ok(Answered::NoResponse) => (Response::Nothing, RequestEnd::NoResponse),
                    Ok(Answered::CloseConnection) => (Response::Close, RequestEnd::ClosedByHandler),
                    Err(reason) => self.failed(&handler, &request, &ctx, reason).await,
                }
            }
        };
        self.reply(request, (response, end), throttle);
    }

    /// Calls the request's handler: its outcome (an error says why the
    /// handler failed) and the throttle client quotas ask for, or the wait
    /// of a request the handler parked.
    async fn call_handler(
        &self,
        handler: &Arc<LoadedHandler>,
        request: &mut Request,
        ctx: &RequestContext,
    ) -> Result<(Result<Answered, String>, Duration), Wait> {
        let deferral = Deferral::replay(std::mem::take(&mut request.memos));
        let (outcome, report) = handler
            .call(
                &self.broker.plugins,
                &request.session,
                ctx.clone(),
                &request.body,
                request.size,
                deferral,
            )
            .await;
        self.broker.services.metrics.record_plugin_call(
            &handler.source().name,
            report.call_time,
            report.instantiate_time,
            report.peak_memory,
        );
        let rollouts = &self.broker.registry().rollouts;
        if !matches!(outcome, Ok(CallOutcome::Parked(_))) {
            rollouts.record(handler, rollout::sample(&outcome, &report));
        }
        let outcome = match outcome {
            Ok(CallOutcome::Parked(wait)) => {
                request.timings.remote += report.host_wait;
                return Err(wait);
            }
            Ok(CallOutcome::Done(outcome)) => Ok(outcome),
            Err(error) => Err(format!("handler failed: {error}")),
        };
        request.timings.remote += report.host_wait;
        // Client quotas: the handler's byte-rate throttles, and the
        // request quota, recorded here when the handler did not.
        let mut throttle_ms = report.quota.throttle_ms;
        if !report.quota.request_recorded && outcome.is_ok() {
            let client = Client::new(&ctx.principal, ctx.client_id.as_deref());
            let request_ms = self
                .broker
                .services
                .quotas
                .record_request(client, report.guest_time);
            throttle_ms = throttle_ms.max(request_ms);
        }
        let throttle = Duration::from_millis(u64::try_from(throttle_ms).unwrap_or(0));
        if let (Ok(Answered::Respond(body)), Some(shadow)) =
            (&outcome, rollouts.get(request.header.api_key))
        {
            if matches!(shadow.mode, rollout::Mode::Shadow) {
                rollout::mirror(
                    &self.broker.plugins,
                    shadow,
                    &request.session,
                    ctx,
                    &request.body,
                    request.size,
                    body.clone(),
                );
            }
        }
        Ok((outcome, throttle))
    }

    /// The answer to a request whose handler or interceptor failed
    /// (`reason`). The host has no schema for the body: the module's own
    /// error response (UNKNOWN_SERVER_ERROR for every element, from a
    /// fresh instance) answers if it has one; otherwise the connection is
    /// closed and the client reconnects and retries.
    async fn failed(
        &self,
        handler: &LoadedHandler,
        request: &Request,
        ctx: &RequestContext,
        reason: String,
    ) -> (Response, RequestEnd) {
        let policy = self
            .broker
            .services
            .config
            .plugin_failure_policy(&handler.source().name);
        let fallback = match policy {
            FailurePolicy::ErrorResponse => {
                handler
                    .error_response(
                        &self.broker.plugins,
                        &request.session,
                        ctx,
                        &request.body,
                        ErrorCode::UnknownServerError.code(),
                    )
                    .await
            }
            FailurePolicy::CloseConnection => None,
        };
        warn!(
            plugin = %handler.source().name,
            api_key = request.header.api_key,
            api_version = request.header.api_version,
            correlation_id = request.header.correlation_id,
            answered = fallback.is_some(),
            "{reason}"
        );
        match fallback {
            Some(body) => (
                Response::Send(encode_response(
                    request.header.correlation_id,
                    request.flexible_response,
                    &body,
                )),
                RequestEnd::HandlerFailed,
            ),
            None => (Response::Close, RequestEnd::HandlerFailed),
        }
    }

    /// Sends a handled request's answer back to its connection.
    fn reply(&self, mut request: Request, answer: (Response, RequestEnd), throttle: Duration) {
        let (response, end) = answer;
        let handled = Instant::now();
        request.timings.handled = Some(handled);
        debug!(
            api_key = request.header.api_key,
            api_version = request.header.api_version,
            correlation_id = request.header.correlation_id,
            client_id = request.header.client_id.as_deref().unwrap_or(""),
            principal = %request.session.principal(),
            total_us = handled.duration_since(request.timings.received).as_micros() as u64,
            "request completed"
        );
        // The connection may be gone; then there is nobody to answer.
        let _ = request.reply.send(Reply {
            response,
            timings: request.timings,
            end,
            throttle,
        });
    }

    /// Waits for a parked request's answer outside any instance and
    /// worker, then queues the request to be handled again with it. A
    /// request whose client went away meanwhile is dropped.
    fn park(&self, mut request: Request, wait: Wait) {
        let channel = self.channel.clone();
        let guard = ParkedGuard::enter(&self.parked);
        let parked_at = Instant::now();
        tokio::spawn(async move {
            let _guard = guard;
            let memo = tokio::select! {
                memo = wait => memo,
                () = request.reply.closed() => return,
            };
            request.memos.push(memo);
            request.timings.remote += parked_at.elapsed();
            // Fails only at shutdown, when nobody waits for the answer.
            let _ = channel.send(request).await;
        });
    }

    /// ApiVersions v0 with UNSUPPORTED_VERSION and the APIs the session's
    /// listener serves, so an old or new client can pick a version it
    /// shares with us.
    fn unsupported_api_versions_body(&self, session: &Session) -> Vec<u8> {
        let controllers = self
            .broker
            .plugins
            .controller
            .get()
            .map(|c| c.listeners().to_vec())
            .unwrap_or_default();
        let apis = exposure::served_apis(
            self.broker.registry().supported_apis(),
            &session.listener,
            &session.security_protocol,
            &controllers,
            self.broker.plugins.forwarder.get().is_some(),
        );
        let mut body = Vec::with_capacity(6 + apis.len() * 6);
        body.extend_from_slice(&ErrorCode::UnsupportedVersion.code().to_be_bytes());
        body.extend_from_slice(&(apis.len() as i32).to_be_bytes());
        for api in apis {
            body.extend_from_slice(&api.api_key.to_be_bytes());
            body.extend_from_slice(&api.min_version.to_be_bytes());
            body.extend_from_slice(&api.max_version.to_be_bytes());
        }
        body
    }
}

/// How much of their time the handler workers spent with nothing to do
/// (Kafka's RequestHandlerAvgIdlePercent), since start.
pub struct WorkerIdle {
    started: Instant,
    workers: usize,
    idle_nanos: AtomicU64,
}

impl WorkerIdle {
    pub fn ratio(&self) -> f64 {
        let capacity = self.started.elapsed().as_nanos() as f64 * self.workers as f64;
        if capacity <= 0.0 {
            return 1.0;
        }
        (self.idle_nanos.load(Ordering::Relaxed) as f64 / capacity).clamp(0.0, 1.0)
    }
}

/// Starts `count` handler workers on the channel. They stop once the
/// channel is closed and every request they hold is answered.
pub fn spawn_workers(
    count: usize,
    channel: &RequestChannel,
    apis: Arc<KafkaApis>,
) -> (Vec<JoinHandle<()>>, Arc<WorkerIdle>) {
    let idle = Arc::new(WorkerIdle {
        started: Instant::now(),
        workers: count,
        idle_nanos: AtomicU64::new(0),
    });
    let handles = (0..count)
        .map(|_| {
            let receiver = channel.receiver();
            let apis = Arc::clone(&apis);
            let idle = Arc::clone(&idle);
            tokio::spawn(async move {
                let mut in_progress = FuturesUnordered::new();
                let mut open = true;
                let mut idle_since = Some(Instant::now());
                while open || !in_progress.is_empty() {
                    tokio::select! {
                        Some(()) = in_progress.next(), if !in_progress.is_empty() => {
                            if in_progress.is_empty() {
                                idle_since = Some(Instant::now());
                            }
                        }
                        received = receiver.recv(), if open && in_progress.len() < REQUESTS_PER_WORKER => {
                            if let Some(since) = idle_since.take() {
                                idle.idle_nanos.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
                            }
                            match received {
                                Ok(request) => {
                                    let apis = Arc::clone(&apis);
                                    in_progress.push(async move { apis.handle(request).await });
                                }
                                Err(_) => open = false,
                            }
                        }
                    }
                }
            })
        })
        .collect();
    (handles, idle)
}
