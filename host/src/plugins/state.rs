//! What a handler instance's Store carries: a WASI context with nothing
//! granted, its resource limits, the broker services its imports call,
//! and the identity and clock of the request being handled.
//!
//! The clock separates guest time from time spent waiting in host calls
//! (a long-poll fetch may rightly wait for seconds): the per-call deadline
//! applies to guest time only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::broker::Broker;
use crate::channel::Session;
use crate::plugins::imports::LogBudget;
use crate::plugins::limits::GuestLimits;

pub struct HandlerState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: GuestLimits,
    pub broker: Arc<Broker>,
    /// The module's name, for log lines.
    pub plugin: Arc<str>,
    /// The session of the request being handled (authorization uses it).
    pub session: Option<Arc<Session>>,
    pub client_id: Option<String>,
    pub clock: CallClock,
    pub log_budget: LogBudget,
    /// The request label of the API this module serves, for metrics.
    pub api_label: Arc<str>,
}

/// Guest-time accounting for the current call.
#[derive(Debug, Clone, Copy)]
pub struct CallClock {
    started: Instant,
    host_wait: Duration,
    budget: Duration,
}

impl CallClock {
    pub fn new(budget: Duration) -> Self {
        Self {
            started: Instant::now(),
            host_wait: Duration::ZERO,
            budget,
        }
    }

    /// Time the guest itself has run in this call.
    pub fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.host_wait)
    }

    pub fn exhausted(&self) -> bool {
        self.guest_time() > self.budget
    }

    /// Time spent waiting in host calls so far.
    pub fn host_wait(&self) -> Duration {
        self.host_wait
    }

    /// Credits time spent waiting in a host call.
    pub fn add_host_wait(&mut self, waited: Duration) {
        self.host_wait += waited;
    }
}

impl HandlerState {
    pub fn new(broker: Arc<Broker>, plugin: Arc<str>, memory_max: usize, budget: Duration) -> Self {
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: GuestLimits::new(memory_max),
            broker,
            plugin,
            session: None,
            client_id: None,
            clock: CallClock::new(budget),
            log_budget: LogBudget::default(),
            api_label: Arc::from(""),
        }
    }
}

impl WasiView for HandlerState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
