//! Broker metrics in Prometheus text format, served at `/metrics` on the
//! admin endpoint. Names follow Prometheus conventions; each family's help
//! text names its Kafka equivalent (kafka.network RequestMetrics,
//! kafka.server BrokerTopicMetrics, ...), so dashboards translate directly.
//!
//! Everything is kept behind one mutex: a request records all of its
//! observations in one short critical section, and a scrape renders a
//! consistent snapshot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Histogram bucket bounds in milliseconds.
const BUCKETS_MS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
    5000.0, 10000.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, value_ms: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS_MS.len()];
        }
        if let Some(index) = BUCKETS_MS.iter().position(|bound| value_ms <= *bound) {
            self.counts[index] += 1;
        }
        self.sum += value_ms;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (index, bound) in BUCKETS_MS.iter().enumerate() {
            cumulative += self.counts.get(index).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// The phases of one request, Kafka's RequestMetrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestTimes {
    pub queue: Duration,
    pub local: Duration,
    pub remote: Duration,
    pub throttle: Duration,
    pub response_queue: Duration,
    pub response_send: Duration,
    pub total: Duration,
}

/// How a request ended, for the error counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestEnd {
    Responded,
    NoResponse,
    ClosedByHandler,
    HandlerFailed,
    UnsupportedVersion,
}

const PHASES: &[(&str, &str)] = &[
    (
        "gregor_request_queue_time_ms",
        "Time a request waits in the request channel (Kafka RequestQueueTimeMs).",
    ),
    (
        "gregor_request_local_time_ms",
        "Time the handler module computes (Kafka LocalTimeMs).",
    ),
    (
        "gregor_request_remote_time_ms",
        "Time the handler waits in host calls such as a long-poll fetch (Kafka RemoteTimeMs).",
    ),
    (
        "gregor_request_throttle_time_ms",
        "Time the response is held for quotas (Kafka ThrottleTimeMs).",
    ),
    (
        "gregor_response_queue_time_ms",
        "Time the response waits for its connection (Kafka ResponseQueueTimeMs).",
    ),
    (
        "gregor_response_send_time_ms",
        "Time to write the response (Kafka ResponseSendTimeMs).",
    ),
    (
        "gregor_request_total_time_ms",
        "Time from request read to response written (Kafka TotalTimeMs).",
    ),
];

/// A per-topic counter family: name, help and how to read it.
type TopicFamily = (&'static str, &'static str, fn(&TopicStats) -> u64);

#[derive(Debug, Default, Clone)]
struct TopicStats {
    bytes_in: u64,
    bytes_out: u64,
    messages_in: u64,
    failed_produce: u64,
    failed_fetch: u64,
}

#[derive(Debug, Default, Clone)]
struct PluginStats {
    call_time: Histogram,
    instantiate_time: Histogram,
    peak_memory: u64,
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, i16), u64>,
    request_bytes: BTreeMap<String, u64>,
    phases: BTreeMap<(String, usize), Histogram>,
    errors: BTreeMap<(String, &'static str), u64>,
    response_errors: BTreeMap<(String, i16), u64>,
    topics: BTreeMap<String, TopicStats>,
    connections: BTreeMap<String, i64>,
    plugins: BTreeMap<String, PluginStats>,
    loads: u64,
    load_failures: u64,
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    /// Kept by `network::memory_pool` without this mutex.
    pub memory_pool: MemoryPoolGauges,
    /// Kept by `network::connection_quotas`.
    pub connection_quotas: ConnectionQuotaCounters,
}

/// The request memory pool (`queued.max.request.bytes`).
#[derive(Debug, Default)]
pub struct MemoryPoolGauges {
    /// The budget in bytes; -1 when unbounded.
    pub capacity: AtomicI64,
    pub used: AtomicI64,
    /// Connections waiting for room to read their next request.
    pub waiting: AtomicI64,
}

/// Connections the connection quotas turned away or held back.
#[derive(Debug, Default)]
pub struct ConnectionQuotaCounters {
    /// Closed at once: their address had `max.connections.per.ip`.
    pub rejected_per_ip: AtomicU64,
    /// Accepted while `max.connections` (or a listener's) was reached,
    /// so they waited for a slot.
    pub blocked: AtomicU64,
}

/// Kafka's request label: Fetch is split into consumer and follower
/// fetches; a single node only has consumers.
pub fn request_label(api_key: i16, api_name: &str) -> String {
    if api_key == 1 {
        "FetchConsumer".to_string()
    } else {
        api_name.to_string()
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Escapes a label value for the text format.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    pub fn record_request(
        &self,
        request: &str,
        version: i16,
        bytes: usize,
        times: &RequestTimes,
        end: RequestEnd,
    ) {
        let mut inner = self.lock();
        *inner
            .requests
            .entry((request.to_string(), version))
            .or_default() += 1;
        *inner.request_bytes.entry(request.to_string()).or_default() += bytes as u64;
        let values = [
            times.queue,
            times.local,
            times.remote,
            times.throttle,
            times.response_queue,
            times.response_send,
            times.total,
        ];
        for (index, value) in values.into_iter().enumerate() {
            inner
                .phases
                .entry((request.to_string(), index))
                .or_default()
                .observe(ms(value));
        }
        let error = match end {
            RequestEnd::Responded | RequestEnd::NoResponse => None,
            RequestEnd::ClosedByHandler => Some("CLOSED_BY_HANDLER"),
            RequestEnd::HandlerFailed => Some("HANDLER_FAILED"),
            RequestEnd::UnsupportedVersion => Some("UNSUPPORTED_VERSION"),
        };
        if let Some(error) = error {
            *inner
                .errors
                .entry((request.to_string(), error))
                .or_default() += 1;
        }
    }

    /// Error codes a module reported in its responses.
    pub fn record_response_errors(&self, request: &str, codes: &[i16]) {
        let mut inner = self.lock();
        for code in codes.iter().filter(|code| **code != 0) {
            *inner
                .response_errors
                .entry((request.to_string(), *code))
                .or_default() += 1;
        }
    }

    pub fn record_produce(&self, topic: &str, bytes: usize, messages: u64, failed: bool) {
        let mut inner = self.lock();
        let stats = inner.topics.entry(topic.to_string()).or_default();
        if failed {
            stats.failed_produce += 1;
        } else {
            stats.bytes_in += bytes as u64;
            stats.messages_in += messages;
        }
    }

    pub fn record_fetch(&self, topic: &str, bytes: usize, failed: bool) {
        let mut inner = self.lock();
        let stats = inner.topics.entry(topic.to_string()).or_default();
        if failed {
            stats.failed_fetch += 1;
        } else {
            stats.bytes_out += bytes as u64;
        }
    }

    pub fn connection_opened(&self, listener: &str) {
        *self
            .lock()
            .connections
            .entry(listener.to_string())
            .or_default() += 1;
    }

    pub fn connection_closed(&self, listener: &str) {
        *self
            .lock()
            .connections
            .entry(listener.to_string())
            .or_default() -= 1;
    }

    pub fn record_plugin_call(
        &self,
        plugin: &str,
        call_time: Duration,
        instantiate_time: Option<Duration>,
        peak_memory: usize,
    ) {
        let mut inner = self.lock();
        let stats = inner.plugins.entry(plugin.to_string()).or_default();
        stats.call_time.observe(ms(call_time));
        if let Some(instantiate) = instantiate_time {
            stats.instantiate_time.observe(ms(instantiate));
        }
        stats.peak_memory = stats.peak_memory.max(peak_memory as u64);
    }

    pub fn record_load(&self, ok: bool) {
        let mut inner = self.lock();
        if ok {
            inner.loads += 1;
        } else {
            inner.load_failures += 1;
        }
    }

    /// Renders every family; `extra` appends gauges read at scrape time.
    pub fn render(&self, extra: &ScrapeGauges) -> String {
        let inner = self.lock();
        let mut out = String::with_capacity(16 * 1024);
        family(
            &mut out,
            "gregor_requests_total",
            "counter",
            "Requests by API and version (Kafka RequestsPerSec).",
        );
        for ((request, version), count) in &inner.requests {
            let _ = writeln!(
                out,
                "gregor_requests_total{{request=\"{}\",version=\"{version}\"}} {count}",
                label(request)
            );
        }
        family(
            &mut out,
            "gregor_request_bytes_total",
            "counter",
            "Request bytes by API (Kafka RequestBytes).",
        );
        for (request, bytes) in &inner.request_bytes {
            let _ = writeln!(
                out,
                "gregor_request_bytes_total{{request=\"{}\"}} {bytes}",
                label(request)
            );
        }
        family(&mut out, "gregor_request_errors_total", "counter", "Requests the host saw fail, by API and reason (Kafka ErrorsPerSec for host-visible failures).");
        for ((request, error), count) in &inner.errors {
            let _ = writeln!(
                out,
                "gregor_request_errors_total{{request=\"{}\",error=\"{error}\"}} {count}",
                label(request)
            );
        }
        family(
            &mut out,
            "gregor_response_errors_total",
            "counter",
            "Error codes in responses by API, as reported by the handler modules (Kafka ErrorsPerSec by error).",
        );
        for ((request, code), count) in &inner.response_errors {
            let _ = writeln!(
                out,
                "gregor_response_errors_total{{request=\"{}\",code=\"{code}\"}} {count}",
                label(request)
            );
        }
        for (index, (name, help)) in PHASES.iter().enumerate() {
            family(&mut out, name, "histogram", help);
            for ((request, phase), histogram) in &inner.phases {
                if *phase == index {
                    histogram.render(&mut out, name, &format!("request=\"{}\"", label(request)));
                }
            }
        }
        let topic_families: [TopicFamily; 5] = [
            (
                "gregor_topic_bytes_in_total",
                "Bytes appended per topic (Kafka BytesInPerSec).",
                |s| s.bytes_in,
            ),
            (
                "gregor_topic_bytes_out_total",
                "Bytes fetched per topic (Kafka BytesOutPerSec).",
                |s| s.bytes_out,
            ),
            (
                "gregor_topic_messages_in_total",
                "Records appended per topic (Kafka MessagesInPerSec).",
                |s| s.messages_in,
            ),
            (
                "gregor_topic_failed_produce_requests_total",
                "Failed partition appends per topic (Kafka FailedProduceRequestsPerSec).",
                |s| s.failed_produce,
            ),
            (
                "gregor_topic_failed_fetch_requests_total",
                "Failed partition fetches per topic (Kafka FailedFetchRequestsPerSec).",
                |s| s.failed_fetch,
            ),
        ];
        for (name, help, value) in topic_families {
            family(&mut out, name, "counter", help);
            for (topic, stats) in &inner.topics {
                let _ = writeln!(out, "{name}{{topic=\"{}\"}} {}", label(topic), value(stats));
            }
        }
        family(
            &mut out,
            "gregor_connections",
            "gauge",
            "Open connections per listener (Kafka connection-count).",
        );
        for (listener, count) in &inner.connections {
            let _ = writeln!(
                out,
                "gregor_connections{{listener=\"{}\"}} {count}",
                label(listener)
            );
        }
        family(
            &mut out,
            "gregor_request_queue_size",
            "gauge",
            "Requests waiting for a handler worker (Kafka RequestQueueSize).",
        );
        let _ = writeln!(out, "gregor_request_queue_size {}", extra.queue_size);
        family(
            &mut out,
            "gregor_parked_requests",
            "gauge",
            "Requests waiting outside any handler instance for data or a rebalance (Kafka PurgatorySize).",
        );
        let _ = writeln!(out, "gregor_parked_requests {}", extra.parked_requests);
        let pool = &self.memory_pool;
        family(&mut out, "gregor_memory_pool_used_bytes", "gauge", "Bytes of requests in flight reserved from queued.max.request.bytes (Kafka MemoryPoolUsed).");
        let _ = writeln!(
            out,
            "gregor_memory_pool_used_bytes {}",
            pool.used.load(Ordering::Relaxed)
        );
        family(
            &mut out,
            "gregor_memory_pool_capacity_bytes",
            "gauge",
            "queued.max.request.bytes; -1 when unbounded.",
        );
        let _ = writeln!(
            out,
            "gregor_memory_pool_capacity_bytes {}",
            pool.capacity.load(Ordering::Relaxed)
        );
        family(&mut out, "gregor_memory_pool_waiting_connections", "gauge", "Connections waiting for request memory before reading (Kafka's muted channels, memory-pool-depleted).");
        let _ = writeln!(
            out,
            "gregor_memory_pool_waiting_connections {}",
            pool.waiting.load(Ordering::Relaxed)
        );
        let quotas = &self.connection_quotas;
        family(
            &mut out,
            "gregor_connections_rejected_total",
            "counter",
            "Connections closed at once because their address had max.connections.per.ip.",
        );
        let _ = writeln!(
            out,
            "gregor_connections_rejected_total{{reason=\"max.connections.per.ip\"}} {}",
            quotas.rejected_per_ip.load(Ordering::Relaxed)
        );
        family(&mut out, "gregor_connections_blocked_total", "counter", "Accepted connections that waited for max.connections to free a slot (Kafka AcceptorBlockedPercent).");
        let _ = writeln!(
            out,
            "gregor_connections_blocked_total {}",
            quotas.blocked.load(Ordering::Relaxed)
        );
        family(&mut out, "gregor_handler_idle_ratio", "gauge", "Fraction of time handler workers had nothing to do (Kafka RequestHandlerAvgIdlePercent).");
        let _ = writeln!(out, "gregor_handler_idle_ratio {:.4}", extra.idle_ratio);
        family(
            &mut out,
            "gregor_plugin_calls_total",
            "counter",
            "Handler module calls.",
        );
        family(
            &mut out,
            "gregor_plugin_traps_total",
            "counter",
            "Handler module calls that trapped (panic, out of memory).",
        );
        family(
            &mut out,
            "gregor_plugin_timeouts_total",
            "counter",
            "Handler module calls stopped at their deadline.",
        );
        for plugin in &extra.plugins {
            let labels = format!(
                "plugin=\"{}\",api_key=\"{}\"",
                label(&plugin.name),
                plugin.api_key
            );
            let _ = writeln!(
                out,
                "gregor_plugin_calls_total{{{labels}}} {}",
                plugin.calls
            );
            let _ = writeln!(
                out,
                "gregor_plugin_traps_total{{{labels}}} {}",
                plugin.traps
            );
            let _ = writeln!(
                out,
                "gregor_plugin_timeouts_total{{{labels}}} {}",
                plugin.timeouts
            );
        }
        family(
            &mut out,
            "gregor_plugin_call_time_ms",
            "histogram",
            "Time of one handler module call, waits included.",
        );
        for (plugin, stats) in &inner.plugins {
            stats.call_time.render(
                &mut out,
                "gregor_plugin_call_time_ms",
                &format!("plugin=\"{}\"", label(plugin)),
            );
        }
        family(
            &mut out,
            "gregor_plugin_instantiate_time_ms",
            "histogram",
            "Time to create a new module instance.",
        );
        for (plugin, stats) in &inner.plugins {
            stats.instantiate_time.render(
                &mut out,
                "gregor_plugin_instantiate_time_ms",
                &format!("plugin=\"{}\"", label(plugin)),
            );
        }
        family(
            &mut out,
            "gregor_plugin_peak_memory_bytes",
            "gauge",
            "Largest linear memory any instance of the module reached.",
        );
        for (plugin, stats) in &inner.plugins {
            let _ = writeln!(
                out,
                "gregor_plugin_peak_memory_bytes{{plugin=\"{}\"}} {}",
                label(plugin),
                stats.peak_memory
            );
        }
        family(
            &mut out,
            "gregor_plugin_loads_total",
            "counter",
            "Modules loaded or reloaded successfully.",
        );
        let _ = writeln!(out, "gregor_plugin_loads_total {}", inner.loads);
        family(
            &mut out,
            "gregor_plugin_load_failures_total",
            "counter",
            "Modules refused at load or reload.",
        );
        let _ = writeln!(
            out,
            "gregor_plugin_load_failures_total {}",
            inner.load_failures
        );
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Values read from elsewhere at scrape time.
#[derive(Debug, Default)]
pub struct ScrapeGauges {
    pub queue_size: usize,
    pub parked_requests: u64,
    pub idle_ratio: f64,
    pub plugins: Vec<PluginCounters>,
}

#[derive(Debug)]
pub struct PluginCounters {
    pub name: String,
    pub api_key: i16,
    pub calls: u64,
    pub traps: u64,
    pub timeouts: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let metrics = Metrics::default();
        let times = RequestTimes {
            total: Duration::from_millis(3),
            ..RequestTimes::default()
        };
        metrics.record_request("Produce", 9, 100, &times, RequestEnd::Responded);
        metrics.record_request("Produce", 9, 50, &times, RequestEnd::HandlerFailed);
        metrics.record_produce("orders", 1000, 10, false);
        let text = metrics.render(&ScrapeGauges::default());
        assert!(text.contains("gregor_requests_total{request=\"Produce\",version=\"9\"} 2"));
        assert!(text.contains("gregor_request_bytes_total{request=\"Produce\"} 150"));
        assert!(text.contains(
            "gregor_request_errors_total{request=\"Produce\",error=\"HANDLER_FAILED\"} 1"
        ));
        assert!(
            text.contains("gregor_request_total_time_ms_bucket{request=\"Produce\",le=\"5\"} 2")
        );
        assert!(
            text.contains("gregor_request_total_time_ms_bucket{request=\"Produce\",le=\"2.5\"} 0")
        );
        assert!(text.contains("gregor_topic_bytes_in_total{topic=\"orders\"} 1000"));
        assert!(text.contains("gregor_topic_messages_in_total{topic=\"orders\"} 10"));
    }
}
