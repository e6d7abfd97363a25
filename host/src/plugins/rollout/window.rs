//! What one module version did during a rollout: totals since the rollout
//! began, and the calls of the last window, from which the rates and the
//! 99th percentile latency the canary is judged by are taken.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Calls kept per window at most (the oldest go first past it).
const MAX_SAMPLES: usize = 8192;

/// One call of a version.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub latency: Duration,
    /// Trapped, or could not be instantiated.
    pub trapped: bool,
    pub timed_out: bool,
    /// The response carried at least one error code.
    pub errored: bool,
}

/// Rates and latency of a window (or the totals).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Summary {
    pub calls: u64,
    pub traps: u64,
    pub timeouts: u64,
    pub error_responses: u64,
    pub p99_ms: f64,
}

impl Summary {
    /// The share of calls that trapped or timed out.
    pub fn trap_rate(&self) -> f64 {
        ratio(self.traps + self.timeouts, self.calls)
    }

    /// The share of responses that carried an error code.
    pub fn error_rate(&self) -> f64 {
        ratio(self.error_responses, self.calls)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[derive(Debug, Default)]
pub struct VersionWindow {
    recent: Mutex<VecDeque<(Instant, Sample)>>,
    calls: AtomicU64,
    traps: AtomicU64,
    timeouts: AtomicU64,
    error_responses: AtomicU64,
    latency_us: AtomicU64,
}

impl VersionWindow {
    pub fn push(&self, sample: Sample, window: Duration) {
        let count = |counter: &AtomicU64, yes: bool| {
            if yes {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        };
        count(&self.calls, true);
        count(&self.traps, sample.trapped);
        count(&self.timeouts, sample.timed_out);
        count(&self.error_responses, sample.errored);
        let micros = u64::try_from(sample.latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us.fetch_add(micros, Ordering::Relaxed);
        let now = Instant::now();
        if let Ok(mut recent) = self.recent.lock() {
            recent.push_back((now, sample));
            while recent.len() > MAX_SAMPLES
                || recent
                    .front()
                    .is_some_and(|(at, _)| now.duration_since(*at) > window)
            {
                recent.pop_front();
            }
        }
    }

    /// The calls of the last `window`.
    pub fn recent(&self, window: Duration) -> Summary {
        let Ok(recent) = self.recent.lock() else {
            return Summary::default();
        };
        let now = Instant::now();
        let samples: Vec<Sample> = recent
            .iter()
            .filter(|(at, _)| now.duration_since(*at) <= window)
            .map(|(_, sample)| *sample)
            .collect();
        drop(recent);
        let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
        latencies.sort_unstable();
        Summary {
            calls: samples.len() as u64,
            traps: samples.iter().filter(|s| s.trapped).count() as u64,
            timeouts: samples.iter().filter(|s| s.timed_out).count() as u64,
            error_responses: samples.iter().filter(|s| s.errored).count() as u64,
            p99_ms: percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        }
    }

    /// Everything since the rollout began (p99 of the last window).
    pub fn totals(&self, window: Duration) -> Summary {
        Summary {
            calls: self.calls.load(Ordering::Relaxed),
            traps: self.traps.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            error_responses: self.error_responses.load(Ordering::Relaxed),
            p99_ms: self.recent(window).p99_ms,
        }
    }

    /// The summed latency of every call, for `_sum` in `/metrics`.
    pub fn latency_sum(&self) -> Duration {
        Duration::from_micros(self.latency_us.load(Ordering::Relaxed))
    }
}

/// The `q` quantile of sorted values (nearest rank); zero when empty.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ms: u64, trapped: bool, errored: bool) -> Sample {
        Sample {
            latency: Duration::from_millis(ms),
            trapped,
            timed_out: false,
            errored,
        }
    }

    #[test]
    fn rates_and_p99_over_the_window() {
        let window = VersionWindow::default();
        let span = Duration::from_secs(60);
        for i in 0..100 {
            window.push(sample(i + 1, i % 10 == 0, i % 4 == 0), span);
        }
        let recent = window.recent(span);
        assert_eq!(recent.calls, 100);
        assert!((recent.trap_rate() - 0.10).abs() < 1e-9);
        assert!((recent.error_rate() - 0.25).abs() < 1e-9);
        assert!((recent.p99_ms - 99.0).abs() < 1e-9);
        assert_eq!(window.totals(span).calls, 100);
    }

    #[test]
    fn old_calls_leave_the_window_but_stay_in_the_totals() {
        let window = VersionWindow::default();
        window.push(sample(1, true, false), Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
        window.push(sample(1, false, false), Duration::from_millis(10));
        let recent = window.recent(Duration::from_millis(10));
        assert_eq!((recent.calls, recent.traps), (1, 0));
        assert_eq!(window.totals(Duration::from_millis(10)).traps, 1);
    }

    #[test]
    fn percentile_of_nothing_is_zero() {
        assert_eq!(percentile(&[], 0.99), Duration::ZERO);
        assert_eq!(
            percentile(&[Duration::from_millis(3)], 0.99),
            Duration::from_millis(3)
        );
    }
}
