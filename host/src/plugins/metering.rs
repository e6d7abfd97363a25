//! Metering of handler and interceptor modules: what each module version
//! costs the broker (guest time, time its calls waited in the host, host
//! calls per import interface, bytes crossing the boundary, peak linear
//! memory), read by `/metrics` and the admin API's `GET /plugins`
//! (an interceptor's hook calls are metered as a handler's calls are,
//! `plugins::interceptor`); and the optional per-module CPU limit of a
//! handler, `plugin.limits.<module>.cpu.ms.per.sec`, which throttles as a Kafka request quota does rather than failing: a response
//! past the limit carries `throttle_time_ms` and the host mutes the
//! connection that long after sending it.
//!
//! Why it is built this way:
//! - **Guest time is the call clock's** (`state::CallClock`: wall time in
//!   the call minus the waits in async host calls), the figure the call
//!   deadline and the request quota already use. Short synchronous host
//!   calls count as guest time; telling them apart would need wasmtime's
//!   call hooks, a callback on every boundary crossing.
//! - **Host calls are counted where wasmtime already goes once per call**:
//!   every import interface is linked with its own accessor
//!   ([`link_counted`]) that bumps a per-call counter in the Store. No
//!   import implementation changes, and an interface added later without
//!   an entry here still works (it is linked, just not counted).
//! - **A call adds to atomics once, at its end** ([`close_call`]); only a
//!   limited module's rate takes a mutex.
//! - **The limit reuses the client quotas' arithmetic** (`quota::RateLimit`,
//!   the broker's `quota.window.*`): guest milliseconds per second against
//!   the limit, a throttle of `(rate - limit) / limit * window`, at most
//!   one window. The handler's `quotas.record-request` (the SDK's
//!   `request_throttle_ms`, asked before the response is encoded) gets
//!   the larger of the client quota's and the module limit's throttle, so
//!   the response says it; a module that never asks still has its
//!   connection muted. Exempt requests (inter-broker) and shadow versions
//!   are metered but never throttled.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use serde_json::{json, Value};
use wasmtime::component::{HasSelf, Linker};

use crate::metrics::MeterReading;
use crate::plugins::bindings::handler::gregor::broker;
use crate::plugins::state::HandlerState;
use crate::quota::RateLimit;

/// The import interfaces whose calls are counted, in counter order.
pub const INTERFACES: [&str; 15] = [
    "logging",
    "log",
    "metadata",
    "authz",
    "stats",
    "groups",
    "sasl",
    "scram-credentials",
    "acl-admin",
    "txn",
    "configs",
    "quotas",
    "delegation-tokens",
    "telemetry",
    "controller",
];

/// What the current call has used so far, kept in its Store.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallMeter {
    host_calls: [u32; INTERFACES.len()],
    /// Guest time already recorded against the module's limit.
    cpu_recorded: Duration,
    /// The module limit's throttle for this call.
    cpu_throttle_ms: i32,
}

/// A module version's totals, and its CPU limit.
#[derive(Debug, Default)]
pub struct Meter {
    guest_ns: AtomicU64,
    host_wait_ns: AtomicU64,
    host_calls: [AtomicU64; INTERFACES.len()],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    peak_memory: AtomicU64,
    throttled: AtomicU64,
    throttle_ms: AtomicU64,
    limit: Option<RateLimit>,
}

impl Meter {
    /// `limit` counts guest milliseconds per second.
    pub fn new(limit: Option<RateLimit>) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Records the call's guest time not yet recorded against the limit;
    /// the throttle it earns (0 when unlimited or within the limit).
    fn record_cpu(&self, call: &mut CallMeter, guest_time: Duration) -> i32 {
        let Some(limit) = &self.limit else {
            return 0;
        };
        let fresh = guest_time.saturating_sub(call.cpu_recorded);
        call.cpu_recorded = call.cpu_recorded.max(guest_time);
        limit.record(fresh.as_secs_f64() * 1000.0)
    }

    /// The largest linear memory an instance reached so far.
    pub fn peak_memory(&self) -> u64 {
        self.peak_memory.load(Relaxed)
    }

    /// The totals so far.
    pub fn reading(&self) -> MeterReading {
        let host_calls = INTERFACES
            .iter()
            .zip(&self.host_calls)
            .map(|(name, count)| (*name, count.load(Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect();
        MeterReading {
            guest_time: Duration::from_nanos(self.guest_ns.load(Relaxed)),
            host_wait: Duration::from_nanos(self.host_wait_ns.load(Relaxed)),
            host_calls,
            bytes_in: self.bytes_in.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            peak_memory: self.peak_memory.load(Relaxed),
            throttled_responses: self.throttled.load(Relaxed),
            throttle_time: Duration::from_millis(self.throttle_ms.load(Relaxed)),
            cpu_limit_ms_per_sec: self.limit.as_ref().map(RateLimit::limit),
            cpu_ms_per_sec: self.limit.as_ref().map(RateLimit::measure),
        }
    }
}

/// The admin API's view of a reading (`GET /plugins`, `metering`).
pub fn to_json(reading: &MeterReading) -> Value {
    let host_calls: serde_json::Map<String, Value> = reading
        .host_calls
        .iter()
        .map(|(name, count)| (name.to_string(), json!(count)))
        .collect();
    json!({
        "guest_time_us": reading.guest_time.as_micros() as u64,
        "host_wait_us": reading.host_wait.as_micros() as u64,
        "host_calls": host_calls,
        "bytes_in": reading.bytes_in,
        "bytes_out": reading.bytes_out,
        "peak_memory_bytes": reading.peak_memory,
        "throttled_responses": reading.throttled_responses,
        "throttle_time_ms": reading.throttle_time.as_millis() as u64,
        "cpu_limit_ms_per_sec": reading.cpu_limit_ms_per_sec,
        "cpu_ms_per_sec": reading.cpu_ms_per_sec,
    })
}

/// Starts a call's metering.
pub fn open_call(state: &mut HandlerState) {
    state.metering = CallMeter::default();
}

/// The module limit's throttle for a request quota asked mid-call
/// (`quotas.record-request`): records the guest time so far.
pub fn request_throttle(state: &mut HandlerState) -> i32 {
    let guest_time = state.clock.guest_time();
    let throttle = state
        .stats
        .meter
        .record_cpu(&mut state.metering, guest_time);
    state.metering.cpu_throttle_ms = state.metering.cpu_throttle_ms.max(throttle);
    throttle
}

/// Ends a call's metering: records the rest of its guest time against the
/// limit (throttling the connection if the handler never asked for its
/// request throttle) and adds the call to the module's totals.
/// `bytes_in` is the request body, `bytes_out` the response body.
pub fn close_call(state: &mut HandlerState, bytes_in: usize, bytes_out: usize) {
    let guest_time = state.clock.guest_time();
    let meter = &state.stats.meter;
    let rest = meter.record_cpu(&mut state.metering, guest_time);
    if !state.quota.request_recorded && !state.dry_run {
        state.metering.cpu_throttle_ms = state.metering.cpu_throttle_ms.max(rest);
    }
    let call = state.metering;
    if call.cpu_throttle_ms > 0 {
        state.quota.throttle(call.cpu_throttle_ms);
        meter.throttled.fetch_add(1, Relaxed);
        meter
            .throttle_ms
            .fetch_add(u64::try_from(call.cpu_throttle_ms).unwrap_or(0), Relaxed);
    }
    let nanos = |time: Duration| u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
    meter.guest_ns.fetch_add(nanos(guest_time), Relaxed);
    meter
        .host_wait_ns
        .fetch_add(nanos(state.clock.host_wait()), Relaxed);
    for (total, count) in meter.host_calls.iter().zip(call.host_calls) {
        if count > 0 {
            total.fetch_add(u64::from(count), Relaxed);
        }
    }
    meter.bytes_in.fetch_add(bytes_in as u64, Relaxed);
    meter.bytes_out.fetch_add(bytes_out as u64, Relaxed);
    let peak = state.limits.peak_memory() as u64;
    meter.peak_memory.fetch_max(peak, Relaxed);
}

/// The accessor of interface `I`: counts the call, then hands the state
/// to the import's implementation.
fn counted<const I: usize>(state: &mut HandlerState) -> &mut HandlerState {
    if let Some(count) = state.metering.host_calls.get_mut(I) {
        *count = count.saturating_add(1);
    }
    state
}

/// Relinks every import interface of [`INTERFACES`] (already linked by the
/// world's `add_to_linker`) through a counting accessor.
pub fn link_counted(linker: &mut Linker<HandlerState>) -> anyhow::Result<()> {
    macro_rules! relink {
        ($($index:literal => $interface:ident),* $(,)?) => {
            $(
                broker::$interface::add_to_linker::<HandlerState, HasSelf<HandlerState>>(
                    linker,
                    counted::<$index>,
                )
                .map_err(anyhow::Error::from)?;
            )*
        };
    }
    linker.allow_shadowing(true);
    relink!(
        0 => logging,
        1 => log,
        2 => metadata,
        3 => authz,
        4 => stats,
        5 => groups,
        6 => sasl,
        7 => scram_credentials,
        8 => acl_admin,
        9 => txn,
        10 => configs,
        11 => quotas,
        12 => delegation_tokens,
        13 => telemetry,
        14 => controller,
    );
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_follow_the_wit_files() {
        let wit = concat!(
            include_str!("../../../wit/logging.wit"),
            include_str!("../../../wit/log.wit"),
            include_str!("../../../wit/metadata.wit"),
            include_str!("../../../wit/authz.wit"),
            include_str!("../../../wit/stats.wit"),
            include_str!("../../../wit/groups.wit"),
            include_str!("../../../wit/security.wit"),
            include_str!("../../../wit/txn.wit"),
            include_str!("../../../wit/configs.wit"),
            include_str!("../../../wit/quotas.wit"),
            include_str!("../../../wit/tokens.wit"),
            include_str!("../../../wit/telemetry.wit"),
            include_str!("../../../wit/controller.wit"),
        );
        for name in INTERFACES {
            assert!(
                wit.contains(&format!("interface {name} {{")),
                "no interface {name}"
            );
        }
    }

    #[test]
    fn a_limited_meter_records_each_guest_time_once() {
        let dir = tempfile::tempdir().unwrap();
        let quotas =
            crate::quota::QuotaManager::open(dir.path(), 11, Duration::from_secs(1)).unwrap();
        // 1 ms of guest time per second, over the young rate's 10 s.
        let meter = Meter::new(Some(quotas.rate_limit(1.0)));
        let mut call = CallMeter::default();
        assert_eq!(meter.record_cpu(&mut call, Duration::from_millis(5)), 0);
        // The same 5 ms again adds nothing.
        assert_eq!(meter.record_cpu(&mut call, Duration::from_millis(5)), 0);
        assert!(meter.record_cpu(&mut call, Duration::from_millis(30)) > 0);
        assert_eq!(meter.reading().cpu_limit_ms_per_sec, Some(1.0));
        let unlimited = Meter::default();
        assert_eq!(unlimited.record_cpu(&mut call, Duration::from_secs(10)), 0);
        assert_eq!(unlimited.reading().cpu_ms_per_sec, None);
    }
}
