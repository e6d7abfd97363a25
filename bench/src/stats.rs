//! Percentiles of latency samples.

#[derive(Debug, Clone, Copy, Default)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Percentiles in milliseconds of samples in microseconds.
pub fn latency_ms(samples: &mut [u64]) -> Latency {
    samples.sort_unstable();
    Latency {
        p50: percentile(samples, 50.0) / 1000.0,
        p99: percentile(samples, 99.0) / 1000.0,
        p999: percentile(samples, 99.9) / 1000.0,
        max: samples.last().copied().unwrap_or(0) as f64 / 1000.0,
    }
}

/// The nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64
}
