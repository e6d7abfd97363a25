//! A loaded interceptor module (the `kafka-interceptor` world): what it
//! says it wraps, its pre-instantiated component and a pool of live
//! instances, reused as handler instances are (`plugins::handler`).
//!
//! Interceptors run in the same Store type as handlers, linked against the
//! same host imports, so grants, limits, the epoch deadline and logging
//! work alike; their world offers only `logging` and `metadata`, and
//! `metadata.read` must be granted like any capability. An interceptor
//! never parks: it has no import that waits. Each hook call is metered as
//! a handler call is (`plugins::metering`: guest time, host calls, bytes
//! in and out, peak memory), so `/metrics` and the admin API show what an
//! interceptor costs; the per-module CPU limit applies to handlers only.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use wasmtime::{Engine, Store, UpdateDeadline};

use crate::plugins::bindings::interceptor::{
    exports::gregor::broker::interceptor::{InterceptorInfo, Verdict},
    KafkaInterceptor, KafkaInterceptorPre,
};
use crate::plugins::bindings::RequestContext;
use crate::plugins::handler::{CallError, HandlerStats, InstanceLimits, ModuleSource};
use crate::plugins::metering;
use crate::plugins::state::{CallClock, HandlerState};
use crate::plugins::{PluginHost, WasmContext};
use crate::security::session::Session;

/// Idle instances kept per interceptor.
const MAX_IDLE_INSTANCES: usize = 32;

struct LiveInstance {
    store: Store<HandlerState>,
    bindings: KafkaInterceptor,
    calls: u64,
}

pub struct LoadedInterceptor {
    info: InterceptorInfo,
    source: ModuleSource,
    engine: Engine,
    pre: KafkaInterceptorPre<HandlerState>,
    limits: InstanceLimits,
    idle: Mutex<Vec<LiveInstance>>,
    pub stats: Arc<HandlerStats>,
}

/// Which hook a call is.
enum Hook<'a> {
    Request(&'a [u8]),
    Response(&'a [u8], &'a [u8]),
}

/// What a hook answered.
enum Answer {
    Verdict(Verdict),
    Body(Result<Vec<u8>, String>),
}

impl LoadedInterceptor {
    /// Instantiates the module once to ask what it wraps; that instance
    /// becomes the first idle one.
    pub async fn load(
        engine: &Engine,
        pre: KafkaInterceptorPre<HandlerState>,
        source: ModuleSource,
        limits: InstanceLimits,
        host: &PluginHost,
    ) -> Result<Self> {
        let stats = Arc::new(HandlerStats::default());
        let mut instance = instantiate(engine, &pre, &source.name, &limits, host, &stats)
            .await
            .context("instantiating")?;
        instance.store.data_mut().clock = CallClock::new(limits.call_timeout);
        instance.store.set_epoch_deadline(1);
        let info = instance
            .bindings
            .gregor_broker_interceptor()
            .call_describe(&mut instance.store)
            .await
            .wasm_context("calling describe()")?;
        if info.name.trim().is_empty() {
            bail!("describe() returned an empty name");
        }
        if info.api_keys.is_empty() || info.api_keys.iter().any(|key| *key < 0) {
            bail!(
                "describe() must name the ApiKeys the interceptor wraps (got {:?})",
                info.api_keys
            );
        }
        stats.instantiations.fetch_add(1, Ordering::Relaxed);
        Ok(Self {
            info,
            source,
            engine: engine.clone(),
            pre,
            limits,
            idle: Mutex::new(vec![instance]),
            stats,
        })
    }

    pub fn info(&self) -> &InterceptorInfo {
        &self.info
    }

    pub fn source(&self) -> &ModuleSource {
        &self.source
    }

    /// Whether the module said it wraps `api_key`.
    pub fn wraps(&self, api_key: i16) -> bool {
        self.info.api_keys.contains(&api_key)
    }

    /// The `on-request` hook.
    pub async fn on_request(
        &self,
        host: &PluginHost,
        session: &Arc<Session>,
        ctx: &RequestContext,
        body: &[u8],
    ) -> Result<Verdict, CallError> {
        match self.call(host, session, ctx, Hook::Request(body)).await? {
            Answer::Verdict(verdict) => Ok(verdict),
            Answer::Body(_) => Err(CallError::Trap("on-request answered a body".into())),
        }
    }

    /// The `on-response` hook, given the request as this interceptor saw
    /// it: the body to send on, or why the module refused to give one.
    pub async fn on_response(
        &self,
        host: &PluginHost,
        session: &Arc<Session>,
        ctx: &RequestContext,
        request: &[u8],
        response: &[u8],
    ) -> Result<Result<Vec<u8>, String>, CallError> {
        match self
            .call(host, session, ctx, Hook::Response(request, response))
            .await?
        {
            Answer::Body(body) => Ok(body),
            Answer::Verdict(_) => Err(CallError::Trap("on-response answered a verdict".into())),
        }
    }

    async fn call(
        &self,
        host: &PluginHost,
        session: &Arc<Session>,
        ctx: &RequestContext,
        hook: Hook<'_>,
    ) -> Result<Answer, CallError> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut instance = match pooled {
            Some(instance) => instance,
            None => {
                self.stats.instantiations.fetch_add(1, Ordering::Relaxed);
                instantiate(
                    &self.engine,
                    &self.pre,
                    &self.source.name,
                    &self.limits,
                    host,
                    &self.stats,
                )
                .await
                .map_err(|error| CallError::Instantiate(format!("{error:#}")))?
            }
        };
        {
            let state = instance.store.data_mut();
            state.session = Some(Arc::clone(session));
            state.client_id.clone_from(&ctx.client_id);
            state.clock = CallClock::new(self.limits.call_timeout);
            metering::open_call(state);
        }
        let bytes_in = match hook {
            Hook::Request(body) => body.len(),
            Hook::Response(request, response) => request.len() + response.len(),
        };
        instance.store.set_epoch_deadline(1);
        let exports = instance.bindings.gregor_broker_interceptor();
        let result = match hook {
            Hook::Request(body) => exports
                .call_on_request(&mut instance.store, ctx, body)
                .await
                .map(Answer::Verdict),
            Hook::Response(request, response) => exports
                .call_on_response(&mut instance.store, ctx, request, response)
                .await
                .map(Answer::Body),
        };
        let bytes_out = match &result {
            Ok(Answer::Verdict(Verdict::Continue(body) | Verdict::Reply(body))) => body.len(),
            Ok(Answer::Body(Ok(body))) => body.len(),
            _ => 0,
        };
        metering::close_call(instance.store.data_mut(), bytes_in, bytes_out);
        match result {
            Ok(answer) => {
                instance.calls += 1;
                self.recycle(instance);
                Ok(answer)
            }
            Err(error) => {
                if instance.store.data().clock.exhausted() {
                    self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                    Err(CallError::Timeout)
                } else {
                    self.stats.traps.fetch_add(1, Ordering::Relaxed);
                    Err(CallError::Trap(format!("{error:#}")))
                }
            }
        }
    }

    /// Returns a healthy instance to the pool, or lets it go.
    fn recycle(&self, mut instance: LiveInstance) {
        let state = instance.store.data_mut();
        state.session = None;
        state.client_id = None;
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
    pre: &KafkaInterceptorPre<HandlerState>,
    name: &Arc<str>,
    limits: &InstanceLimits,
    host: &PluginHost,
    stats: &Arc<HandlerStats>,
) -> Result<LiveInstance> {
    let mut state = HandlerState::new(
        host,
        Arc::clone(name),
        limits.memory_max,
        limits.call_timeout,
    );
    state.stats = Arc::clone(stats);
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limits);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().clock.exhausted() {
            Err(wasmtime::Error::msg("plugin call deadline exceeded"))
        } else {
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
