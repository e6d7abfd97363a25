//! A loaded handler module: its declared API, its pre-instantiated
//! component and a pool of live instances reused across requests.
//!
//! Handlers keep no state of their own (state lives in host services), so
//! reuse is safe. An instance is thrown away after a trap or a timeout
//! (its Store is unusable then), when its memory grew past the recycle
//! bound, and after `plugin.instance.max.calls` calls. A call that parks
//! its request (`plugins::deferred`) gives its instance back at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use bytes::Bytes;
use tracing::debug;
use wasmtime::{Engine, Store, UpdateDeadline};

use crate::metrics::request_label;
use crate::plugins::bindings::handler::exports::gregor::broker::handler::Answer;
use crate::plugins::bindings::handler::{KafkaHandler, KafkaHandlerPre};
use crate::plugins::bindings::{ApiInfo, Outcome, RequestContext};
use crate::plugins::deferred::{Deferral, Wait};
use crate::plugins::imports::record_set::Answered;
use crate::plugins::metering::{self, Meter};
use crate::plugins::produce_records::{self, HeldRecords};
use crate::plugins::state::{CallClock, CallQuota, HandlerState};
use crate::plugins::{PluginHost, WasmContext};
use crate::security::session::Session;

/// Idle instances kept per module.
const MAX_IDLE_INSTANCES: usize = 32;

/// Limits applied to every instance of a module.
#[derive(Debug, Clone, Copy)]
pub struct InstanceLimits {
    pub memory_max: usize,
    /// Retire an instance whose memory grew past this after a call.
    pub recycle_memory: usize,
    pub call_timeout: Duration,
    pub max_calls: u64,
}

/// Where a module came from.
#[derive(Debug, Clone)]
pub struct ModuleSource {
    pub name: Arc<str>,
    pub path: std::path::PathBuf,
    pub content_hash: String,
    pub loaded_at: SystemTime,
    /// What the module was granted at its load, and what it uses.
    pub grants: crate::plugins::grants::Grants,
    /// It imports `log.request-records`: a Produce request's records stay
    /// in the host and its body comes without them
    /// (`plugins::produce_records`).
    pub takes_request_records: bool,
}

/// Call and failure counters of a module version, and the error codes
/// its responses reported (the `stats` import), by code.
#[derive(Debug, Default)]
pub struct HandlerStats {
    pub calls: AtomicU64,
    pub traps: AtomicU64,
    pub timeouts: AtomicU64,
    pub instantiations: AtomicU64,
    pub error_codes: Mutex<BTreeMap<i16, u64>>,
    /// What its calls cost, and its CPU limit (`plugins::metering`).
    pub meter: Meter,
}

impl HandlerStats {
    /// Counts the non-zero codes of one response.
    pub fn count_error_codes(&self, codes: &[i16]) {
        let Ok(mut counts) = self.error_codes.lock() else {
            return;
        };
        for &code in codes.iter().filter(|&&code| code != 0) {
            *counts.entry(code).or_default() += 1;
        }
    }

    /// The error codes counted so far.
    pub fn error_code_counts(&self) -> BTreeMap<i16, u64> {
        self.error_codes
            .lock()
            .map(|counts| counts.clone())
            .unwrap_or_default()
    }
}

/// What one call cost, for the request and plugin metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallReport {
    /// Time spent waiting in host calls (Kafka's RemoteTime).
    pub host_wait: Duration,
    /// The whole call, waits included.
    pub call_time: Duration,
    /// Set when the call needed a new instance.
    pub instantiate_time: Option<Duration>,
    pub peak_memory: usize,
    /// Guest time of the call (the request quota's thread time).
    pub guest_time: Duration,
    /// Non-zero error codes the response reported (`stats` import).
    pub error_codes: u32,
    /// What client quotas asked: mute the connection this long, and
    /// whether the handler recorded the request quota itself.
    pub quota: CallQuota,
}

/// What a call ended with.
pub enum CallOutcome {
    /// The handler's answer, record sets it referenced taken back.
    Done(Answered),
    /// The handler parked its request: once this completes, handle it
    /// again with the memo it yields (see `plugins::deferred`).
    Parked(Wait),
}

/// Why a call produced no outcome.
#[derive(Debug)]
pub enum CallError {
    /// The guest ran past its deadline.
    Timeout,
    /// The guest trapped (panic, out of memory, bad import use).
    Trap(String),
    /// A new instance could not be created.
    Instantiate(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout => write!(f, "deadline exceeded"),
            CallError::Trap(message) => write!(f, "trapped: {message}"),
            CallError::Instantiate(message) => write!(f, "cannot instantiate: {message}"),
        }
    }
}

struct LiveInstance {
    store: Store<HandlerState>,
    bindings: KafkaHandler,
    calls: u64,
}

pub struct LoadedHandler {
    info: ApiInfo,
    /// The API's metrics label (`request` in `/metrics`).
    label: Arc<str>,
    source: ModuleSource,
    engine: Engine,
    pre: KafkaHandlerPre<HandlerState>,
    limits: InstanceLimits,
    idle: Mutex<Vec<LiveInstance>>,
    pub stats: Arc<HandlerStats>,
    /// A shadow version: every instance runs its writes dry
    /// (`plugins::rollout`).
    dry_run: bool,
}

impl LoadedHandler {
    /// Instantiates the module once to ask what it serves; that instance
    /// becomes the first idle one.
    pub async fn load(
        engine: &Engine,
        pre: KafkaHandlerPre<HandlerState>,
        source: ModuleSource,
        limits: InstanceLimits,
        host: &PluginHost,
    ) -> Result<Self> {
        let cpu_limit = host
            .services
            .config
            .plugin_cpu_limit(&source.name)?
            .map(|ms_per_sec| host.services.quotas.rate_limit(ms_per_sec));
        let stats = Arc::new(HandlerStats {
            meter: Meter::new(cpu_limit),
            ..HandlerStats::default()
        });
        let mut instance = instantiate(engine, &pre, &source.name, &limits, host, &stats, false)
            .await
            .context("instantiating")?;
        instance.store.data_mut().clock = CallClock::new(limits.call_timeout);
        instance.store.set_epoch_deadline(1);
        let info = instance
            .bindings
            .gregor_broker_handler()
            .call_describe(&mut instance.store)
            .await
            .wasm_context("calling describe()")?;
        validate_info(&info)?;
        let handler = Self {
            label: Arc::from(request_label(info.api_key, &info.name)),
            info,
            source,
            engine: engine.clone(),
            pre,
            limits,
            idle: Mutex::new(vec![instance]),
            stats,
            dry_run: false,
        };
        handler.stats.instantiations.fetch_add(1, Ordering::Relaxed);
        Ok(handler)
    }

    pub fn info(&self) -> &ApiInfo {
        &self.info
    }

    pub fn source(&self) -> &ModuleSource {
        &self.source
    }

    /// This version as a shadow: its instances, the pooled ones included,
    /// take the dry-run variants of the host calls that write.
    pub fn into_dry_run(mut self) -> Self {
        self.dry_run = true;
        if let Ok(idle) = self.idle.get_mut() {
            for instance in idle.iter_mut() {
                instance.store.data_mut().dry_run = true;
            }
        }
        self
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// Handles one request on a pooled (or new) instance; `request_size`
    /// is the whole request's size (header and body), as quotas count it.
    pub async fn call(
        &self,
        host: &PluginHost,
        session: &Arc<Session>,
        ctx: RequestContext,
        body: &Bytes,
        request_size: usize,
        deferral: Deferral,
    ) -> (Result<CallOutcome, CallError>, CallReport) {
        let started = Instant::now();
        let mut report = CallReport::default();
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut instance = match pooled {
            Some(instance) => instance,
            None => {
                self.stats.instantiations.fetch_add(1, Ordering::Relaxed);
                let created = instantiate(
                    &self.engine,
                    &self.pre,
                    &self.source.name,
                    &self.limits,
                    host,
                    &self.stats,
                    self.dry_run,
                )
                .await;
                report.instantiate_time = Some(started.elapsed());
                match created {
                    Ok(instance) => instance,
                    Err(error) => {
                        report.call_time = started.elapsed();
                        return (Err(CallError::Instantiate(format!("{error:#}"))), report);
                    }
                }
            }
        };
        {
            let state = instance.store.data_mut();
            state.session = Some(Arc::clone(session));
            state.client_id.clone_from(&ctx.client_id);
            state.clock = CallClock::new(self.limits.call_timeout);
            state.api_label = Arc::clone(&self.label);
            state.quota = CallQuota::for_request(request_size);
            state.deferral = deferral;
            state.call_errors = 0;
            metering::open_call(state);
        }
        let (body, held) = self.guest_body(&ctx, body);
        instance.store.data_mut().request_records = held;
        instance.store.set_epoch_deadline(1);
        let result = instance
            .bindings
            .gregor_broker_handler()
            .call_handle(&mut instance.store, &ctx, &body)
            .await;
        instance.store.data_mut().request_records = None;
        // Bytes that crossed the boundary: a referencing answer's record
        // sets stay in the host.
        let response_size = match &result {
            Ok(Answer::Outcome(Outcome::Respond(response))) => response.len(),
            Ok(Answer::RespondReferencing(referencing)) => referencing.body.len(),
            _ => 0,
        };
        metering::close_call(instance.store.data_mut(), body.len(), response_size);
        report.call_time = started.elapsed();
        report.host_wait = instance.store.data().clock.host_wait();
        report.guest_time = instance.store.data().clock.guest_time();
        report.quota = instance.store.data().quota;
        report.peak_memory = instance.store.data().limits.peak_memory();
        report.error_codes = instance.store.data().call_errors;
        let parked = instance.store.data_mut().deferral.take_parked();
        let outcome = match (result, parked) {
            // Parked: the guest's outcome (or a trap after it parked)
            // stands for nothing.
            (Ok(answer), Some(wait)) => {
                // Its record sets are freed; an instance whose answer
                // names handles it does not own is not reused.
                if instance.store.data_mut().take_answer(answer).is_ok() {
                    instance.calls += 1;
                    self.recycle(instance);
                }
                Ok(CallOutcome::Parked(wait))
            }
            (Err(_), Some(wait)) => Ok(CallOutcome::Parked(wait)),
            (Ok(answer), None) => match instance.store.data_mut().take_answer(answer) {
                Ok(answered) => {
                    instance.calls += 1;
                    self.recycle(instance);
                    Ok(CallOutcome::Done(answered))
                }
                Err(error) => {
                    self.stats.traps.fetch_add(1, Ordering::Relaxed);
                    Err(CallError::Trap(format!("{error:#}")))
                }
            },
            (Err(error), None) => {
                if instance.store.data().clock.exhausted() {
                    self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                    Err(CallError::Timeout)
                } else {
                    self.stats.traps.fetch_add(1, Ordering::Relaxed);
                    Err(CallError::Trap(format!("{error:#}")))
                }
            }
        };
        (outcome, report)
    }

    /// The body the guest gets, and the records the host keeps for it:
    /// a v3+ Produce body without its records for a module that takes them
    /// by reference; else (or when the walk refuses the body, which the
    /// module's own decoding then answers) the body as it came.
    fn guest_body<'a>(
        &self,
        ctx: &RequestContext,
        body: &'a Bytes,
    ) -> (std::borrow::Cow<'a, [u8]>, Option<HeldRecords>) {
        let applies = self.source.takes_request_records
            && ctx.api_key == produce_records::API_KEY
            && ctx.api_version >= produce_records::FIRST_VERSION;
        if !applies {
            return (std::borrow::Cow::Borrowed(&body[..]), None);
        }
        match produce_records::split(ctx.api_version, body) {
            Ok(split) => (std::borrow::Cow::Owned(split.body), Some(split.records)),
            Err(reason) => {
                debug!(
                    plugin = %self.source.name,
                    correlation_id = ctx.correlation_id,
                    "produce body handed over whole: {reason}"
                );
                (std::borrow::Cow::Borrowed(&body[..]), None)
            }
        }
    }

    /// Asks a fresh instance for the module's error response to a request
    /// whose `handle` call failed (Kafka's `getErrorResponse`). None when
    /// the module has none, or when this call fails too.
    pub async fn error_response(
        &self,
        host: &PluginHost,
        session: &Arc<Session>,
        ctx: &RequestContext,
        body: &[u8],
        error_code: i16,
    ) -> Option<Vec<u8>> {
        let mut instance = instantiate(
            &self.engine,
            &self.pre,
            &self.source.name,
            &self.limits,
            host,
            &self.stats,
            self.dry_run,
        )
        .await
        .ok()?;
        self.stats.instantiations.fetch_add(1, Ordering::Relaxed);
        {
            let state = instance.store.data_mut();
            state.session = Some(Arc::clone(session));
            state.client_id.clone_from(&ctx.client_id);
            state.clock = CallClock::new(self.limits.call_timeout);
        }
        instance.store.set_epoch_deadline(1);
        let answer = instance
            .bindings
            .gregor_broker_handler()
            .call_error_response(&mut instance.store, ctx, body, error_code)
            .await
            .ok()?;
        self.recycle(instance);
        answer
    }

    /// Returns a healthy instance to the pool, or lets it go.
    fn recycle(&self, mut instance: LiveInstance) {
        let state = instance.store.data_mut();
        state.session = None;
        state.client_id = None;
        state.deferral = Deferral::default();
        let worn_out = instance.calls >= self.limits.max_calls
            || state.limits.peak_memory() > self.limits.recycle_memory;
        if worn_out {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE_INSTANCES {
                idle.push(instance);
            }
        }
    }
}

async fn instantiate(
    engine: &Engine,
    pre: &KafkaHandlerPre<HandlerState>,
    name: &Arc<str>,
    limits: &InstanceLimits,
    host: &PluginHost,
    stats: &Arc<HandlerStats>,
    dry_run: bool,
) -> Result<LiveInstance> {
    let mut state = HandlerState::new(
        host,
        Arc::clone(name),
        limits.memory_max,
        limits.call_timeout,
    );
    state.stats = Arc::clone(stats);
    state.dry_run = dry_run;
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limits);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().clock.exhausted() {
            Err(wasmtime::Error::msg("plugin call deadline exceeded"))
        } else {
            // Let other requests run on this thread while a guest computes.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store.set_epoch_deadline(1);
    let bindings = pre.instantiate_async(&mut store).await?;
    Ok(LiveInstance {
        store,
        bindings,
        calls: 0,
    })
}

/// A module's self-description must make sense before it may serve.
fn validate_info(info: &ApiInfo) -> Result<()> {
    if info.api_key < 0 {
        anyhow::bail!("describe() returned a negative api key {}", info.api_key);
    }
    if info.min_version < 0 || info.min_version > info.max_version {
        anyhow::bail!(
            "describe() returned an invalid version range {}..={}",
            info.min_version,
            info.max_version
        );
    }
    if info.name.trim().is_empty() {
        anyhow::bail!("describe() returned an empty name");
    }
    Ok(())
}
