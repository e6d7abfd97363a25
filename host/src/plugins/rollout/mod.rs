//! Rolling out a new version of a handler module beside the serving one
//! (`gregor plugins canary|shadow|promote|rollback`).
//!
//! - A canary serves a share of the live requests of its ApiKey: those of
//!   selected principals or client ids, and `percent` of the rest, spread
//!   evenly. Both versions' calls, traps, timeouts, error responses and
//!   latency are kept per version over a sliding window; once the canary
//!   has served `plugin.canary.min.calls` in it, it is rolled back by
//!   itself when its trap rate, error rate or p99 latency exceeds the
//!   serving version's by the configured margin (`settings`).
//! - A shadow serves nobody: after the serving version answered a request,
//!   the shadow handles a copy of it (`shadow`) with its writes dry-run
//!   (`imports::dry_run`), and the two responses are compared field by
//!   field (`compare`); differences are counted and sampled into the log.
//! - Promote writes the new version over the module's file and swaps it in
//!   as a hot reload does; rollback just stops routing to it. Requests
//!   already routed keep the version they were given (an `Arc`), so
//!   neither drops or fails a request.
//!
//! A new version is loaded under the name, file and grants of the module
//! it would replace, so it can never do more than that module may. One
//! rollout per ApiKey at a time. Rollouts live in memory: a restart ends
//! them (the serving version is whatever the plugin directory holds).

pub mod compare;
pub mod metrics;
pub mod ops;
pub mod settings;
mod shadow;
pub mod window;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::plugins::handler::LoadedHandler;
use crate::sync::{read, write};

pub use settings::RolloutSettings;
pub use shadow::mirror;
use window::{Sample, Summary, VersionWindow};

/// Ended rollouts kept for the admin API.
const HISTORY: usize = 16;

/// Which requests a canary serves.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Selector {
    /// Of the requests not selected by principal or client id (0-100).
    pub percent: u32,
    pub principals: Vec<String>,
    pub client_ids: Vec<String>,
}

impl Selector {
    /// Whether the `n`-th request routed (from 0) goes to the canary.
    fn selects(&self, n: u64, principal: &str, client_id: Option<&str>) -> bool {
        if self.principals.iter().any(|p| p == principal)
            || client_id.is_some_and(|id| self.client_ids.iter().any(|c| c == id))
        {
            return true;
        }
        // `percent` of every hundred, evenly spread: the n-th request is
        // selected when it crosses the next multiple.
        let percent = u64::from(self.percent.min(100));
        (n + 1) * percent / 100 > n * percent / 100
    }
}

/// What the new version does.
#[derive(Debug, Clone)]
pub enum Mode {
    Canary(Selector),
    Shadow,
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Mode::Canary(_) => "canary",
            Mode::Shadow => "shadow",
        }
    }
}

/// What shadows found.
#[derive(Debug, Default)]
pub struct ShadowStats {
    pub compared: AtomicU64,
    /// Responses with at least one differing field.
    pub mismatches: AtomicU64,
    /// Differences by field family (`compare::Difference::family`).
    pub fields: Mutex<BTreeMap<String, u64>>,
    /// Requests not mirrored, by reason (busy, parked, failed).
    pub dropped: Mutex<BTreeMap<&'static str, u64>>,
    /// The last difference logged.
    pub last: Mutex<Option<String>>,
    /// Shadow calls running now.
    pub in_flight: AtomicUsize,
}

impl ShadowStats {
    fn drop_one(&self, reason: &'static str) {
        if let Ok(mut dropped) = self.dropped.lock() {
            *dropped.entry(reason).or_default() += 1;
        }
    }
}

/// A new version of one module, beside its serving version.
pub struct Rollout {
    pub mode: Mode,
    pub candidate: Arc<LoadedHandler>,
    /// The module the new version would replace.
    pub module: Arc<str>,
    /// What promote writes over the module's file.
    pub bytes: Arc<Vec<u8>>,
    pub serving_hash: String,
    pub settings: RolloutSettings,
    pub started_at: SystemTime,
    pub serving: VersionWindow,
    pub canary: VersionWindow,
    pub shadow: ShadowStats,
    routed: AtomicU64,
}

impl Rollout {
    pub fn new(
        mode: Mode,
        serving: &LoadedHandler,
        candidate: Arc<LoadedHandler>,
        bytes: Vec<u8>,
        settings: RolloutSettings,
    ) -> Self {
        Self {
            mode,
            module: Arc::clone(&serving.source().name),
            serving_hash: serving.source().content_hash.clone(),
            candidate,
            bytes: Arc::new(bytes),
            settings,
            started_at: SystemTime::now(),
            serving: VersionWindow::default(),
            canary: VersionWindow::default(),
            shadow: ShadowStats::default(),
            routed: AtomicU64::new(0),
        }
    }

    fn api_key(&self) -> i16 {
        self.candidate.info().api_key
    }

    /// Why the canary must go, once it has served enough calls of the
    /// window to be judged.
    pub fn verdict(&self) -> Option<String> {
        let window = self.settings.window();
        let canary = self.canary.recent(window);
        let serving = self.serving.recent(window);
        judge(&self.settings, &canary, &serving)
    }

    fn status(&self) -> Value {
        let window = self.settings.window();
        let mut value = json!({
            "api_key": self.api_key(),
            "api": self.candidate.info().name,
            "module": self.module.as_ref(),
            "mode": self.mode.name(),
            "started_at_ms": millis(self.started_at),
            "serving": {
                "version": short(&self.serving_hash),
                "sha256": self.serving_hash,
                "window": self.serving.recent(window),
                "total": self.serving.totals(window),
            },
            "candidate": {
                "version": short(&self.candidate.source().content_hash),
                "sha256": self.candidate.source().content_hash,
                "versions": format!("{}-{}", self.candidate.info().min_version, self.candidate.info().max_version),
                "window": self.canary.recent(window),
                "total": self.canary.totals(window),
                "error_codes": codes_json(&self.candidate.stats.error_code_counts()),
            },
            "settings": self.settings,
        });
        match &self.mode {
            Mode::Canary(selector) => {
                value["selector"] = json!(selector);
                value["verdict"] = json!(self.verdict());
            }
            Mode::Shadow => {
                let stats = &self.shadow;
                value["shadow"] = json!({
                    "compared": stats.compared.load(Ordering::Relaxed),
                    "mismatches": stats.mismatches.load(Ordering::Relaxed),
                    "fields": stats.fields.lock().map(|f| f.clone()).unwrap_or_default(),
                    "dropped": stats.dropped.lock().map(|d| d.clone()).unwrap_or_default(),
                    "last_difference": stats.last.lock().ok().and_then(|last| last.clone()),
                });
            }
        }
        value
    }
}

/// The rule of automatic rollback: with at least `min_calls` canary calls
/// in the window, its trap rate, error rate or p99 may exceed the serving
/// version's by no more than the margins (p99 only once the serving
/// version has as many calls, so both percentiles mean something).
pub fn judge(settings: &RolloutSettings, canary: &Summary, serving: &Summary) -> Option<String> {
    if canary.calls < settings.min_calls.max(1) {
        return None;
    }
    let percent = |rate: f64| rate * 100.0;
    if canary.trap_rate() > serving.trap_rate() + settings.max_trap_rate_increase {
        return Some(format!(
            "trap rate {:.1}% against the serving version's {:.1}% over the last {} canary calls \
             (plugin.canary.max.trap.rate.increase {})",
            percent(canary.trap_rate()),
            percent(serving.trap_rate()),
            canary.calls,
            settings.max_trap_rate_increase
        ));
    }
    if canary.error_rate() > serving.error_rate() + settings.max_error_rate_increase {
        return Some(format!(
            "error rate {:.1}% against the serving version's {:.1}% over the last {} canary calls \
             (plugin.canary.max.error.rate.increase {})",
            percent(canary.error_rate()),
            percent(serving.error_rate()),
            canary.calls,
            settings.max_error_rate_increase
        ));
    }
    if serving.calls >= settings.min_calls
        && canary.p99_ms > serving.p99_ms + settings.max_p99_increase_ms
    {
        return Some(format!(
            "p99 {:.1} ms against the serving version's {:.1} ms over the last {} canary calls \
             (plugin.canary.max.p99.increase.ms {})",
            canary.p99_ms, serving.p99_ms, canary.calls, settings.max_p99_increase_ms
        ));
    }
    None
}

/// A rollout that ended, for the admin API.
#[derive(Debug, Clone, Serialize)]
pub struct Ended {
    pub api_key: i16,
    pub module: String,
    pub mode: &'static str,
    pub version: String,
    /// promoted, rolled back, rolled back automatically.
    pub outcome: &'static str,
    pub reason: Option<String>,
    pub at_ms: u64,
    pub candidate_calls: u64,
}

/// The rollouts in progress, by ApiKey, and the last ended ones.
#[derive(Default)]
pub struct Rollouts {
    active: RwLock<BTreeMap<i16, Arc<Rollout>>>,
    /// How many are active: the request path looks no further when none.
    count: AtomicUsize,
    ended: Mutex<VecDeque<Ended>>,
    /// By outcome, for `/metrics`.
    pub outcomes: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl Rollouts {
    pub fn get(&self, api_key: i16) -> Option<Arc<Rollout>> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        read(&self.active).get(&api_key).cloned()
    }

    pub fn active(&self) -> Vec<Arc<Rollout>> {
        read(&self.active).values().cloned().collect()
    }

    /// Starts a rollout; refused while its ApiKey has one.
    pub fn start(&self, rollout: Rollout) -> Result<String, String> {
        let mut active = write(&self.active);
        let key = rollout.api_key();
        if let Some(running) = active.get(&key) {
            return Err(format!(
                "a {} of {} (api key {key}) is already running: promote or roll it back first",
                running.mode.name(),
                running.module
            ));
        }
        let what = match &rollout.mode {
            Mode::Canary(selector) => format!(
                "canary {} of {} (api key {key}) serving {}% of requests{}{}",
                short(&rollout.candidate.source().content_hash),
                rollout.module,
                selector.percent,
                listed(" and principals ", &selector.principals),
                listed(" and client ids ", &selector.client_ids),
            ),
            Mode::Shadow => format!(
                "shadow {} of {} (api key {key}) mirroring requests, writes dry-run",
                short(&rollout.candidate.source().content_hash),
                rollout.module
            ),
        };
        active.insert(key, Arc::new(rollout));
        self.count.store(active.len(), Ordering::Relaxed);
        info!("{what}");
        Ok(what)
    }

    /// Ends the rollout of `module`, returning it.
    pub fn finish(
        &self,
        module: &str,
        outcome: &'static str,
        reason: Option<String>,
    ) -> Result<Arc<Rollout>, String> {
        let rollout = self
            .active()
            .into_iter()
            .find(|rollout| rollout.module.as_ref() == module)
            .ok_or_else(|| format!("no rollout of {module} is running"))?;
        self.end(&rollout, outcome, reason);
        Ok(rollout)
    }

    /// Removes `rollout` if it is still the active one of its ApiKey.
    fn end(&self, rollout: &Arc<Rollout>, outcome: &'static str, reason: Option<String>) -> bool {
        {
            let mut active = write(&self.active);
            let key = rollout.api_key();
            if !active
                .get(&key)
                .is_some_and(|current| Arc::ptr_eq(current, rollout))
            {
                return false;
            }
            active.remove(&key);
            self.count.store(active.len(), Ordering::Relaxed);
        }
        let window = rollout.settings.window();
        let ended = Ended {
            api_key: rollout.api_key(),
            module: rollout.module.to_string(),
            mode: rollout.mode.name(),
            version: short(&rollout.candidate.source().content_hash).to_string(),
            outcome,
            reason,
            at_ms: millis(SystemTime::now()),
            candidate_calls: rollout.canary.totals(window).calls,
        };
        if let Ok(mut outcomes) = self.outcomes.lock() {
            *outcomes
                .entry((outcome, rollout.module.to_string()))
                .or_default() += 1;
        }
        if let Ok(mut history) = self.ended.lock() {
            history.push_front(ended);
            history.truncate(HISTORY);
        }
        true
    }

    /// The version a request of `api_version` goes to: the canary when its
    /// selector picks the request and it serves that version with the
    /// same header flexibility; the serving version otherwise.
    pub fn route(
        &self,
        serving: Arc<LoadedHandler>,
        api_version: i16,
        principal: &str,
        client_id: Option<&str>,
    ) -> Arc<LoadedHandler> {
        let Some(rollout) = self.get(serving.info().api_key) else {
            return serving;
        };
        let Mode::Canary(selector) = &rollout.mode else {
            return serving;
        };
        if !compatible(&serving, &rollout.candidate, api_version) {
            return serving;
        }
        let n = rollout.routed.fetch_add(1, Ordering::Relaxed);
        if selector.selects(n, principal, client_id) {
            Arc::clone(&rollout.candidate)
        } else {
            serving
        }
    }

    /// Counts one call of `handler` for its rollout, if it has one; a
    /// canary call may end the rollout (automatic rollback).
    pub fn record(&self, handler: &Arc<LoadedHandler>, sample: Sample) {
        let Some(rollout) = self.get(handler.info().api_key) else {
            return;
        };
        let window = rollout.settings.window();
        if !Arc::ptr_eq(&rollout.candidate, handler) {
            rollout.serving.push(sample, window);
            return;
        }
        rollout.canary.push(sample, window);
        if !matches!(rollout.mode, Mode::Canary(_)) || !rollout.settings.auto_rollback {
            return;
        }
        if let Some(reason) = rollout.verdict() {
            if self.end(&rollout, "rolled back automatically", Some(reason.clone())) {
                warn!(
                    module = %rollout.module,
                    api_key = rollout.api_key(),
                    version = short(&rollout.candidate.source().content_hash),
                    "canary rolled back automatically: {reason}"
                );
            }
        }
    }

    /// Everything the admin API shows.
    pub fn status(&self) -> Value {
        let active: Vec<Value> = self.active().iter().map(|r| r.status()).collect();
        let ended: Vec<Ended> = self
            .ended
            .lock()
            .map(|history| history.iter().cloned().collect())
            .unwrap_or_default();
        json!({ "active": active, "ended": ended })
    }
}

/// Whether both versions serve `api_version` with the same header.
fn compatible(serving: &LoadedHandler, candidate: &LoadedHandler, api_version: i16) -> bool {
    let (a, b) = (serving.info(), candidate.info());
    let flexible = |first: Option<i16>| first.is_some_and(|first| api_version >= first);
    (b.min_version..=b.max_version).contains(&api_version)
        && flexible(a.first_flexible_version) == flexible(b.first_flexible_version)
}

/// A call's sample from what the runtime reported.
pub fn sample(
    result: &Result<crate::plugins::handler::CallOutcome, crate::plugins::handler::CallError>,
    report: &crate::plugins::handler::CallReport,
) -> Sample {
    use crate::plugins::handler::CallError;
    Sample {
        latency: report.call_time,
        trapped: matches!(result, Err(CallError::Trap(_) | CallError::Instantiate(_))),
        timed_out: matches!(result, Err(CallError::Timeout)),
        errored: report.error_codes > 0,
    }
}

/// A version as the metrics and the CLI name it: its hash's first 12.
pub fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn listed(prefix: &str, names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!("{prefix}{}", names.join(", "))
    }
}

fn codes_json(codes: &BTreeMap<i16, u64>) -> Value {
    codes
        .iter()
        .map(|(code, count)| (code.to_string(), json!(count)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings() -> RolloutSettings {
        RolloutSettings::from_config(&crate::config::BrokerConfig::default()).expect("defaults")
    }

    fn summary(calls: u64, traps: u64, errors: u64, p99_ms: f64) -> Summary {
        Summary {
            calls,
            traps,
            timeouts: 0,
            error_responses: errors,
            p99_ms,
        }
    }

    #[test]
    fn percent_is_spread_evenly_and_exactly() {
        let selector = Selector {
            percent: 10,
            ..Selector::default()
        };
        let picked: Vec<u64> = (0..100)
            .filter(|&n| selector.selects(n, "User:a", None))
            .collect();
        assert_eq!(picked.len(), 10);
        assert!(
            picked.windows(2).all(|pair| pair[1] - pair[0] == 10),
            "{picked:?}"
        );
        let half = Selector {
            percent: 50,
            ..Selector::default()
        };
        assert_eq!(
            (0..1000)
                .filter(|&n| half.selects(n, "User:a", None))
                .count(),
            500
        );
        let none = Selector::default();
        assert!(!(0..1000).any(|n| none.selects(n, "User:a", None)));
    }

    #[test]
    fn principals_and_client_ids_are_always_selected() {
        let selector = Selector {
            percent: 0,
            principals: vec!["User:alice".into()],
            client_ids: vec!["beta-app".into()],
        };
        assert!(selector.selects(0, "User:alice", None));
        assert!(selector.selects(0, "User:bob", Some("beta-app")));
        assert!(!selector.selects(0, "User:bob", Some("other")));
    }

    #[test]
    fn judged_only_past_min_calls_and_by_margin() {
        let settings = settings();
        let healthy = summary(100, 0, 0, 2.0);
        assert_eq!(judge(&settings, &summary(19, 19, 0, 1.0), &healthy), None);
        let trapping = judge(&settings, &summary(20, 20, 0, 1.0), &healthy).expect("rolled back");
        assert!(trapping.starts_with("trap rate 100.0%"), "{trapping}");
        let erring = judge(&settings, &summary(40, 0, 40, 1.0), &healthy).expect("rolled back");
        assert!(erring.starts_with("error rate 100.0%"), "{erring}");
        // Within the margin of a serving version that errs as much.
        assert_eq!(
            judge(&settings, &summary(40, 0, 2, 1.0), &summary(40, 0, 1, 1.0)),
            None
        );
        let slow = judge(&settings, &summary(40, 0, 0, 900.0), &healthy).expect("rolled back");
        assert!(slow.starts_with("p99 900.0 ms"), "{slow}");
        assert_eq!(
            judge(&settings, &summary(40, 0, 0, 900.0), &summary(3, 0, 0, 1.0)),
            None
        );
    }

    #[test]
    fn samples_follow_the_call() {
        use crate::plugins::handler::{CallError, CallReport};
        let report = CallReport {
            call_time: Duration::from_millis(3),
            error_codes: 2,
            ..CallReport::default()
        };
        let trapped = sample(&Err(CallError::Trap("x".into())), &report);
        assert!(trapped.trapped && !trapped.timed_out && trapped.errored);
        let timed_out = sample(&Err(CallError::Timeout), &CallReport::default());
        assert!(timed_out.timed_out && !timed_out.errored);
    }
}
