//! How the metrics are written out: the two text formats a scraper may ask
//! for, the lock-free histogram the request phases use, and the families
//! whose values live elsewhere and are read at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, text, DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use super::{
    ConnectionQuotaCounters, GuestMemoryGauges, MemoryPoolGauges, MeterReading, PluginCounters,
    ScrapeGauges,
};
use crate::telemetry::ClientMetricsManager;

/// The text format of one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text 0.0.4: what `/metrics` served before, what
    /// `promtool check metrics` reads; the default.
    Prometheus,
    /// OpenMetrics 1.0 text: counter families named without `_total`,
    /// `le` as floats (`"5.0"`), ending in `# EOF`.
    OpenMetrics,
}

impl Exposition {
    /// The format an `Accept` header prefers: OpenMetrics only when asked
    /// for at least as strongly as plain text, as Prometheus does.
    pub fn from_accept(accept: Option<&str>) -> Self {
        let (mut openmetrics, mut plain) = (0.0f64, 0.0f64);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let quality = parts
                .filter_map(|param| param.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
                "text/plain" | "text/*" | "*/*" => plain = plain.max(quality),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= plain {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => prometheus_text::CONTENT_TYPE,
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    pub(super) fn render(self, registry: &Registry, extra: &ScrapeGauges) -> String {
        let mut scraped = Registry::default();
        scraped.register_collector(Box::new(Scraped(extra.clone())));
        let mut out = String::with_capacity(32 * 1024);
        let written = match self {
            Exposition::Prometheus => prometheus_text::encode(&mut out, registry)
                .and_then(|()| prometheus_text::encode(&mut out, &scraped)),
            Exposition::OpenMetrics => text::encode_registry(&mut out, registry)
                .and_then(|()| text::encode_registry(&mut out, &scraped))
                .and_then(|()| text::encode_eof(&mut out)),
        };
        // Writing to a String cannot fail; an encoder refusing a value
        // would leave the families before it.
        if written.is_err() {
            tracing::warn!(format = ?self, "metrics exposition stopped early");
        }
        out
    }
}

/// Histogram bucket bounds in milliseconds, and the same in nanoseconds
/// for recording.
const BOUNDS_MS: [f64; 17] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
    5000.0, 10000.0,
];
const BOUNDS_NS: [u64; 17] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// A histogram of durations in milliseconds made of atomics: observing is
/// two additions, without the mutex of prometheus-client's own histogram.
/// The count is the sum of the buckets, so `_count` always equals the
/// `+Inf` bucket.
#[derive(Debug, Clone, Default)]
pub struct TimeHistogram(Arc<Cells>);

#[derive(Debug, Default)]
struct Cells {
    /// Per bound, then past the last bound.
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

impl TimeHistogram {
    pub fn observe(&self, value: Duration) {
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        let index = BOUNDS_NS
            .iter()
            .position(|bound| nanos <= *bound)
            .unwrap_or(BOUNDS_NS.len());
        self.0.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.0.sum_ns.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl TypedMetric for TimeHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for TimeHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets = [(f64::INFINITY, 0); BOUNDS_NS.len() + 1];
        for (index, (bucket, cell)) in buckets.iter_mut().zip(&self.0.buckets).enumerate() {
            *bucket = (
                BOUNDS_MS.get(index).copied().unwrap_or(f64::INFINITY),
                cell.load(Ordering::Relaxed),
            );
        }
        let count = buckets.iter().map(|(_, count)| count).sum();
        let sum_ms = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum_ms, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    ConstCounter::new(value).encode(encoder.encode_descriptor(
        name,
        help,
        None,
        MetricType::Counter,
    )?)
}

/// The request memory pool and connection quotas (kept as plain atomics
/// by `network`) and the guest memory budget (by `plugins::limits`).
#[derive(Debug)]
pub(super) struct PoolAndQuotas {
    pub pool: Arc<MemoryPoolGauges>,
    pub quotas: Arc<ConnectionQuotaCounters>,
    pub guest_memory: Arc<GuestMemoryGauges>,
}

impl Collector for PoolAndQuotas {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pool = &self.pool;
        gauge(
            &mut encoder,
            "gregor_memory_pool_used_bytes",
            "Bytes of requests in flight reserved from queued.max.request.bytes (Kafka MemoryPoolUsed).",
            pool.used.load(Ordering::Relaxed),
        )?;
        gauge(
            &mut encoder,
            "gregor_memory_pool_capacity_bytes",
            "queued.max.request.bytes; -1 when unbounded.",
            pool.capacity.load(Ordering::Relaxed),
        )?;
        gauge(
            &mut encoder,
            "gregor_memory_pool_waiting_connections",
            "Connections waiting for request memory before reading (Kafka's muted channels, memory-pool-depleted).",
            pool.waiting.load(Ordering::Relaxed),
        )?;
        let guest = &self.guest_memory;
        gauge(
            &mut encoder,
            "gregor_plugin_memory_used_bytes",
            "Linear memory of every live module instance, counted against plugin.memory.total.max.bytes.",
            guest.used.load(Ordering::Relaxed),
        )?;
        gauge(
            &mut encoder,
            "gregor_plugin_memory_capacity_bytes",
            "plugin.memory.total.max.bytes: the most linear memory all module instances together may have.",
            guest.capacity.load(Ordering::Relaxed),
        )?;
        counter(
            &mut encoder,
            "gregor_plugin_memory_refused",
            "Module memory growths and instantiations refused because plugin.memory.total.max.bytes was reached (each fails only its own call).",
            guest.refused.load(Ordering::Relaxed),
        )?;
        let rejected = ConstCounter::new(self.quotas.rejected_per_ip.load(Ordering::Relaxed));
        let mut family = encoder.encode_descriptor(
            "gregor_connections_rejected",
            "Connections closed at once because their address had max.connections.per.ip.",
            None,
            MetricType::Counter,
        )?;
        rejected.encode(family.encode_family(&[("reason", "max.connections.per.ip")])?)?;
        counter(
            &mut encoder,
            "gregor_connections_blocked",
            "Accepted connections that waited for max.connections to free a slot (Kafka AcceptorBlockedPercent).",
            self.quotas.blocked.load(Ordering::Relaxed),
        )
    }
}

/// Reads one of a plugin's scrape-time counters.
type PluginValue = fn(&PluginCounters) -> u64;

/// What the admin endpoint read for this scrape.
#[derive(Debug)]
struct Scraped(ScrapeGauges);

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let extra = &self.0;
        gauge(
            &mut encoder,
            "gregor_request_queue_size",
            "Requests waiting for a handler worker (Kafka RequestQueueSize).",
            extra.queue_size as u64,
        )?;
        gauge(
            &mut encoder,
            "gregor_parked_requests",
            "Requests waiting outside any handler instance for data or a rebalance (Kafka PurgatorySize).",
            extra.parked_requests,
        )?;
        gauge(
            &mut encoder,
            "gregor_handler_idle_ratio",
            "Fraction of time handler workers had nothing to do (Kafka RequestHandlerAvgIdlePercent).",
            (extra.idle_ratio * 1e4).round() / 1e4,
        )?;
        let families: [(&str, &str, PluginValue); 3] = [
            (
                "gregor_plugin_calls",
                "Handler and interceptor module calls (an interceptor's api_key is -1).",
                |p| p.calls,
            ),
            (
                "gregor_plugin_traps",
                "Handler and interceptor module calls that trapped (panic, out of memory).",
                |p| p.traps,
            ),
            (
                "gregor_plugin_timeouts",
                "Handler and interceptor module calls stopped at their deadline.",
                |p| p.timeouts,
            ),
        ];
        for (name, help, value) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for plugin in &extra.plugins {
                let api_key = plugin.api_key.to_string();
                let labels = [("plugin", plugin.name.as_str()), ("api_key", &api_key)];
                ConstCounter::new(value(plugin)).encode(family.encode_family(&labels)?)?;
            }
        }
        encode_metering(&mut encoder, &extra.plugins)
    }
}

/// Reads one of a plugin's metered quantities.
type MeterValue = fn(&MeterReading) -> f64;

/// Reads a metered quantity only some plugins have (the CPU limit's).
type LimitValue = fn(&MeterReading) -> Option<f64>;

/// The metering families (`plugins::metering`), by plugin and ApiKey.
fn encode_metering(
    encoder: &mut DescriptorEncoder,
    plugins: &[PluginCounters],
) -> Result<(), std::fmt::Error> {
    let counters: [(&str, &str, MeterValue); 6] = [
        (
            "gregor_plugin_guest_seconds",
            "Time handler or interceptor module code ran: call time minus waits in host calls.",
            |m| m.guest_time.as_secs_f64(),
        ),
        (
            "gregor_plugin_host_wait_seconds",
            "Time handler module calls waited in host calls (long polls, appends, authorization).",
            |m| m.host_wait.as_secs_f64(),
        ),
        (
            "gregor_plugin_bytes_in",
            "Request (and, for an interceptor's response hook, response) body bytes handed to the module.",
            |m| m.bytes_in as f64,
        ),
        (
            "gregor_plugin_bytes_out",
            "Body bytes the handler or interceptor module returned.",
            |m| m.bytes_out as f64,
        ),
        (
            "gregor_plugin_throttled_responses",
            "Responses throttled by the module's plugin.limits.<module>.cpu.ms.per.sec.",
            |m| m.throttled_responses as f64,
        ),
        (
            "gregor_plugin_throttle_seconds",
            "Throttle time the module's CPU limit gave its responses.",
            |m| m.throttle_time.as_secs_f64(),
        ),
    ];
    for (name, help, value) in counters {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for plugin in plugins {
            let api_key = plugin.api_key.to_string();
            let labels = [("plugin", plugin.name.as_str()), ("api_key", &api_key)];
            ConstCounter::new(value(&plugin.metering)).encode(family.encode_family(&labels)?)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "gregor_plugin_host_calls",
        "Host calls of the handler or interceptor module, by import interface.",
        None,
        MetricType::Counter,
    )?;
    for plugin in plugins {
        let api_key = plugin.api_key.to_string();
        for (interface, count) in &plugin.metering.host_calls {
            let labels = [
                ("plugin", plugin.name.as_str()),
                ("api_key", &api_key),
                ("interface", *interface),
            ];
            ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
        }
    }
    let gauges: [(&str, &str, LimitValue); 2] = [
        (
            "gregor_plugin_cpu_limit_ratio",
            "plugin.limits.<module>.cpu.ms.per.sec as a fraction of one core.",
            |m| m.cpu_limit_ms_per_sec.map(|ms| ms / 1000.0),
        ),
        (
            "gregor_plugin_cpu_ratio",
            "Guest time per second measured against the module's CPU limit, as a fraction of one core.",
            |m| m.cpu_ms_per_sec.map(|ms| ms / 1000.0),
        ),
    ];
    for (name, help, value) in gauges {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for plugin in plugins {
            let Some(value) = value(&plugin.metering) else {
                continue;
            };
            let api_key = plugin.api_key.to_string();
            let labels = [("plugin", plugin.name.as_str()), ("api_key", &api_key)];
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// Client telemetry (KIP-714): pushes accepted and the latest value of
/// every metric live clients pushed, labelled with the client.
pub(super) struct ClientTelemetry(pub Arc<ClientMetricsManager>);

impl std::fmt::Debug for ClientTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTelemetry")
    }
}

impl Collector for ClientTelemetry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        counter(
            &mut encoder,
            "gregor_client_telemetry_pushes",
            "Client telemetry pushes accepted (KIP-714 PushTelemetry).",
            self.0.pushes(),
        )?;
        let latest = self.0.latest();
        if latest.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "gregor_client_metric",
            "Latest value of each metric a client pushed (KIP-714), by client instance, client id, metric name and attributes.",
            None,
            MetricType::Gauge,
        )?;
        for metric in latest {
            let mut labels = vec![
                (
                    "client_instance_id".to_string(),
                    crate::uuid::to_text(metric.client_instance_id),
                ),
                ("client_id".to_string(), metric.client_id),
                ("name".to_string(), metric.name),
            ];
            for (key, value) in metric.attributes {
                let key: String = key
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                labels.push((format!("attr_{key}"), value));
            }
            ConstGauge::new(metric.value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_choose_the_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            Exposition::from_accept(Some(prometheus)),
            Exposition::OpenMetrics
        );
        assert_eq!(Exposition::from_accept(None), Exposition::Prometheus);
        assert_eq!(Exposition::from_accept(Some("*/*")), Exposition::Prometheus);
        assert_eq!(
            Exposition::from_accept(Some("text/plain, application/openmetrics-text;q=0.5")),
            Exposition::Prometheus
        );
        assert_eq!(
            Exposition::from_accept(Some("application/openmetrics-text; q=0")),
            Exposition::Prometheus
        );
    }

    #[test]
    fn histogram_buckets_hold_their_bound() {
        let histogram = TimeHistogram::default();
        histogram.observe(Duration::from_micros(50));
        histogram.observe(Duration::from_nanos(50_001));
        histogram.observe(Duration::from_secs(11));
        let counts: Vec<u64> = histogram
            .0
            .buckets
            .iter()
            .map(|cell| cell.load(Ordering::Relaxed))
            .collect();
        assert_eq!(&counts[..2], &[1, 1]);
        assert_eq!(counts[BOUNDS_NS.len()], 1);
        assert_eq!(
            histogram.0.sum_ns.load(Ordering::Relaxed),
            50_000 + 50_001 + 11_000_000_000
        );
    }
}
