//! What a handler instance's Store carries: a WASI context with nothing
//! granted, its resource limits, the services its imports call (handles
//! from the `PluginHost`, never the broker that assembles them), and the
//! identity and clock of the request being handled.
//!
//! The clock separates guest time from time spent waiting in host calls
//! (a long-poll fetch may rightly wait for seconds): the per-call deadline
//! applies to guest time only.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::cluster::controller::active::ActiveController;
use crate::cluster::membership::forward::ControllerForwarder;
use crate::plugins::authorization::Authorization;
use crate::plugins::deferred::Deferral;
use crate::plugins::handler::HandlerStats;
use crate::plugins::imports::LogBudget;
use crate::plugins::limits::GuestLimits;
use crate::plugins::metering::CallMeter;
use crate::plugins::produce_records::HeldRecords;
use crate::plugins::registry::Registry;
use crate::plugins::PluginHost;
use crate::security::session::Session;
use crate::services::Services;

pub struct HandlerState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: GuestLimits,
    pub services: Arc<Services>,
    /// What the broker serves (ApiVersions, cluster metadata).
    pub registry: Arc<Registry>,
    /// Answers the `authz` import.
    pub authorization: Arc<Authorization>,
    /// Answers the `controller` import, on a controller.
    pub controller: Arc<OnceLock<Arc<ActiveController>>>,
    /// Forwards broker-listener DescribeQuorum/UnregisterBroker, on a
    /// cluster broker.
    pub forwarder: Arc<OnceLock<Arc<ControllerForwarder>>>,
    /// The module's name, for log lines.
    pub plugin: Arc<str>,
    /// The session of the request being handled (authorization uses it).
    pub session: Option<Arc<Session>>,
    pub client_id: Option<String>,
    pub clock: CallClock,
    pub log_budget: LogBudget,
    /// What client quotas asked of the current call.
    pub quota: CallQuota,
    /// The request label of the API this module serves, for metrics.
    pub api_label: Arc<str>,
    /// Whether the current call parked its request, and the answers of
    /// the waits of a replayed one.
    pub deferral: Deferral,
    /// A shadow instance (`plugins::rollout`): its writing host calls take
    /// their dry-run variants, which validate and change nothing.
    pub dry_run: bool,
    /// The module version's own counters (error codes it reports).
    pub stats: Arc<HandlerStats>,
    /// Error codes the current call's response reported (`stats` import).
    pub call_errors: u32,
    /// What the current call used (`plugins::metering`).
    pub metering: CallMeter,
    /// The records of the Produce request being handled, when the module
    /// takes them by reference (`plugins::produce_records`).
    pub request_records: Option<HeldRecords>,
}

/// Client quota bookkeeping of one call (KIP-219): the longest throttle
/// any quota asked for (the host mutes the connection that long once the
/// response is sent), whether the handler recorded the request quota
/// itself, and the request's size for the produce byte rate.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallQuota {
    pub throttle_ms: i32,
    pub request_recorded: bool,
    pub request_size: usize,
}

impl CallQuota {
    pub fn for_request(request_size: usize) -> Self {
        Self {
            request_size,
            ..Self::default()
        }
    }

    /// Mutes the connection for at least `ms` after this response.
    pub fn throttle(&mut self, ms: i32) {
        self.throttle_ms = self.throttle_ms.max(ms);
    }
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
    pub fn new(host: &PluginHost, plugin: Arc<str>, memory_max: usize, budget: Duration) -> Self {
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: GuestLimits::new(memory_max, Arc::clone(&host.memory_budget)),
            services: Arc::clone(&host.services),
            registry: Arc::clone(&host.registry),
            authorization: Arc::clone(&host.authorization),
            controller: Arc::clone(&host.controller),
            forwarder: Arc::clone(&host.forwarder),
            plugin,
            session: None,
            client_id: None,
            clock: CallClock::new(budget),
            log_budget: LogBudget::default(),
            quota: CallQuota::default(),
            api_label: Arc::from(""),
            deferral: Deferral::default(),
            dry_run: false,
            stats: Arc::default(),
            call_errors: 0,
            metering: CallMeter::default(),
            request_records: None,
        }
    }

    /// Runs broker work that may block inside a host call (an fsync, a
    /// wait for a partition's in-sync replicas): its time is the broker's,
    /// credited to the call's host wait, not charged to the guest's budget.
    pub fn broker_work<T>(&mut self, work: impl FnOnce(&Self) -> T) -> T {
        let started = Instant::now();
        let done = work(self);
        self.clock.add_host_wait(started.elapsed());
        done
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
