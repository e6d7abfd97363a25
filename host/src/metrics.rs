//! Broker metrics, served at `/metrics` on the admin endpoint through the
//! `prometheus-client` crate: the Prometheus text format (0.0.4) by default,
//! OpenMetrics text when the scraper asks for it ([`Exposition`]). Names
//! follow Prometheus conventions; each family's help text names its Kafka
//! equivalent (kafka.network RequestMetrics, kafka.server
//! BrokerTopicMetrics, ...), so dashboards translate directly.
//!
//! Recording takes no lock shared by requests: every series is a set of
//! atomics ([`Counter`], [`TimeHistogram`]), and the handles of one request
//! label, topic or plugin are looked up once and then kept, so a request
//! only adds to atomics. A connection keeps its own handles
//! ([`ConnectionRecorder`]); the remaining look-ups by name take a read
//! lock, and a write lock only the first time a name is seen. A scrape
//! reads the atomics one by one, so it is not a snapshot across families.

mod exposition;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use exposition::{Exposition, TimeHistogram};

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

impl RequestTimes {
    fn phases(&self) -> [Duration; PHASES.len()] {
        [
            self.queue,
            self.local,
            self.remote,
            self.throttle,
            self.response_queue,
            self.response_send,
            self.total,
        ]
    }
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

impl RequestEnd {
    fn error(self) -> Option<&'static str> {
        match self {
            RequestEnd::Responded | RequestEnd::NoResponse => None,
            RequestEnd::ClosedByHandler => Some("CLOSED_BY_HANDLER"),
            RequestEnd::HandlerFailed => Some("HANDLER_FAILED"),
            RequestEnd::UnsupportedVersion => Some("UNSUPPORTED_VERSION"),
        }
    }
}

/// The request-phase histograms, in [`RequestTimes::phases`] order.
const PHASES: [(&str, &str); 7] = [
    (
        "gregor_request_queue_time_ms",
        "Time a request waits in the request channel (Kafka RequestQueueTimeMs)",
    ),
    (
        "gregor_request_local_time_ms",
        "Time the handler module computes (Kafka LocalTimeMs)",
    ),
    (
        "gregor_request_remote_time_ms",
        "Time the handler waits in host calls such as a long-poll fetch (Kafka RemoteTimeMs)",
    ),
    (
        "gregor_request_throttle_time_ms",
        "Time the response is held for quotas (Kafka ThrottleTimeMs)",
    ),
    (
        "gregor_response_queue_time_ms",
        "Time the response waits for its connection (Kafka ResponseQueueTimeMs)",
    ),
    (
        "gregor_response_send_time_ms",
        "Time to write the response (Kafka ResponseSendTimeMs)",
    ),
    (
        "gregor_request_total_time_ms",
        "Time from request read to response written (Kafka TotalTimeMs)",
    ),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    request: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestVersionLabels {
    request: String,
    version: i16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestErrorLabels {
    request: String,
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseErrorLabels {
    request: String,
    code: i16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabels {
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// The registered families: cloning one shares its series.
#[derive(Clone, Default)]
struct Families {
    requests: Family<RequestVersionLabels, Counter>,
    request_bytes: Family<RequestLabels, Counter>,
    request_errors: Family<RequestErrorLabels, Counter>,
    response_errors: Family<ResponseErrorLabels, Counter>,
    phases: [Family<RequestLabels, TimeHistogram>; PHASES.len()],
    topic_bytes_in: Family<TopicLabels, Counter>,
    topic_bytes_out: Family<TopicLabels, Counter>,
    topic_messages_in: Family<TopicLabels, Counter>,
    topic_failed_produce: Family<TopicLabels, Counter>,
    topic_failed_fetch: Family<TopicLabels, Counter>,
    connections: Family<ListenerLabels, Gauge>,
    plugin_call_time: Family<PluginLabels, TimeHistogram>,
    plugin_instantiate_time: Family<PluginLabels, TimeHistogram>,
    plugin_peak_memory: Family<PluginLabels, Gauge>,
    plugin_loads: Counter,
    plugin_load_failures: Counter,
}

impl Families {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "gregor_requests",
            "Requests by API and version (Kafka RequestsPerSec)",
            self.requests.clone(),
        );
        registry.register(
            "gregor_request_bytes",
            "Request bytes by API (Kafka RequestBytes)",
            self.request_bytes.clone(),
        );
        registry.register(
            "gregor_request_errors",
            "Requests the host saw fail, by API and reason (Kafka ErrorsPerSec for host-visible failures)",
            self.request_errors.clone(),
        );
        registry.register(
            "gregor_response_errors",
            "Error codes in responses by API, as reported by the handler modules (Kafka ErrorsPerSec by error)",
            self.response_errors.clone(),
        );
        for ((name, help), family) in PHASES.iter().zip(&self.phases) {
            registry.register(*name, *help, family.clone());
        }
        let topics = [
            (
                "gregor_topic_bytes_in",
                "Bytes appended per topic (Kafka BytesInPerSec)",
                &self.topic_bytes_in,
            ),
            (
                "gregor_topic_bytes_out",
                "Bytes fetched per topic (Kafka BytesOutPerSec)",
                &self.topic_bytes_out,
            ),
            (
                "gregor_topic_messages_in",
                "Records appended per topic (Kafka MessagesInPerSec)",
                &self.topic_messages_in,
            ),
            (
                "gregor_topic_failed_produce_requests",
                "Failed partition appends per topic (Kafka FailedProduceRequestsPerSec)",
                &self.topic_failed_produce,
            ),
            (
                "gregor_topic_failed_fetch_requests",
                "Failed partition fetches per topic (Kafka FailedFetchRequestsPerSec)",
                &self.topic_failed_fetch,
            ),
        ];
        for (name, help, family) in topics {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "gregor_connections",
            "Open connections per listener (Kafka connection-count)",
            self.connections.clone(),
        );
        registry.register(
            "gregor_plugin_call_time_ms",
            "Time of one handler module call, waits included",
            self.plugin_call_time.clone(),
        );
        registry.register(
            "gregor_plugin_instantiate_time_ms",
            "Time to create a new module instance",
            self.plugin_instantiate_time.clone(),
        );
        registry.register(
            "gregor_plugin_peak_memory_bytes",
            "Largest linear memory any instance of the module reached",
            self.plugin_peak_memory.clone(),
        );
        registry.register(
            "gregor_plugin_loads",
            "Modules loaded or reloaded successfully",
            self.plugin_loads.clone(),
        );
        registry.register(
            "gregor_plugin_load_failures",
            "Modules refused at load or reload",
            self.plugin_load_failures.clone(),
        );
    }
}

/// Request versions whose counters a [`RequestMetrics`] keeps at hand;
/// higher (or negative) ones are looked up in the family.
const CACHED_VERSIONS: usize = 32;

/// One request label's series, looked up once.
pub struct RequestMetrics {
    label: String,
    versions: [OnceLock<Counter>; CACHED_VERSIONS],
    bytes: Counter,
    phases: [TimeHistogram; PHASES.len()],
    families: Families,
}

impl RequestMetrics {
    fn new(label: &str, families: &Families) -> Self {
        let labels = RequestLabels {
            request: label.to_string(),
        };
        Self {
            label: label.to_string(),
            versions: std::array::from_fn(|_| OnceLock::new()),
            bytes: families.request_bytes.get_or_create_owned(&labels),
            phases: std::array::from_fn(|index| {
                families.phases[index].get_or_create_owned(&labels)
            }),
            families: families.clone(),
        }
    }

    /// The `request` label these series carry.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Counts one request and observes its phases: atomic additions only,
    /// once this version has been seen.
    pub fn record(&self, version: i16, bytes: usize, times: &RequestTimes, end: RequestEnd) {
        let labels = || RequestVersionLabels {
            request: self.label.clone(),
            version,
        };
        let requests = &self.families.requests;
        match usize::try_from(version)
            .ok()
            .and_then(|index| self.versions.get(index))
        {
            Some(cached) => cached
                .get_or_init(|| requests.get_or_create_owned(&labels()))
                .inc(),
            None => requests.get_or_create(&labels()).inc(),
        };
        self.bytes.inc_by(bytes as u64);
        for (histogram, value) in self.phases.iter().zip(times.phases()) {
            histogram.observe(value);
        }
        if let Some(error) = end.error() {
            self.families
                .request_errors
                .get_or_create(&RequestErrorLabels {
                    request: self.label.clone(),
                    error,
                })
                .inc();
        }
    }
}

/// One topic's BrokerTopicMetrics.
struct TopicMetrics {
    bytes_in: Counter,
    bytes_out: Counter,
    messages_in: Counter,
    failed_produce: Counter,
    failed_fetch: Counter,
}

/// One handler module's call metrics.
struct PluginMetrics {
    call_time: TimeHistogram,
    instantiate_time: TimeHistogram,
    peak_memory: Gauge,
}

/// Handles by name: a read lock to find one, a write lock only to add one.
struct Handles<T>(RwLock<HashMap<String, Arc<T>>>);

impl<T> Default for Handles<T> {
    fn default() -> Self {
        Self(RwLock::new(HashMap::new()))
    }
}

impl<T> Handles<T> {
    fn get(&self, name: &str, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(found) = crate::sync::read(&self.0).get(name) {
            return Arc::clone(found);
        }
        let mut handles = crate::sync::write(&self.0);
        Arc::clone(
            handles
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(make())),
        )
    }
}

pub struct Metrics {
    registry: Registry,
    families: Families,
    requests: Handles<RequestMetrics>,
    topics: Handles<TopicMetrics>,
    plugins: Handles<PluginMetrics>,
    /// Kept by `network::memory_pool`.
    pub memory_pool: Arc<MemoryPoolGauges>,
    /// Kept by `network::connection_quotas`.
    pub connection_quotas: Arc<ConnectionQuotaCounters>,
    /// Kept by `plugins::limits`.
    pub guest_memory: Arc<GuestMemoryGauges>,
}

impl Default for Metrics {
    fn default() -> Self {
        let families = Families::default();
        let memory_pool = Arc::new(MemoryPoolGauges::default());
        let connection_quotas = Arc::new(ConnectionQuotaCounters::default());
        let guest_memory = Arc::new(GuestMemoryGauges::default());
        let mut registry = Registry::default();
        families.register(&mut registry);
        registry.register_collector(Box::new(exposition::PoolAndQuotas {
            pool: Arc::clone(&memory_pool),
            quotas: Arc::clone(&connection_quotas),
            guest_memory: Arc::clone(&guest_memory),
        }));
        Self {
            registry,
            families,
            requests: Handles::default(),
            topics: Handles::default(),
            plugins: Handles::default(),
            memory_pool,
            connection_quotas,
            guest_memory,
        }
    }
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

/// The linear memory of every live module instance, against
/// `plugin.memory.total.max.bytes`.
#[derive(Debug, Default)]
pub struct GuestMemoryGauges {
    pub capacity: AtomicI64,
    pub used: AtomicI64,
    /// Memory growths (and instantiations) refused because the total
    /// would have passed the capacity.
    pub refused: AtomicU64,
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
    label_of(api_key, api_name).to_string()
}

/// [`request_label`] without allocating.
pub fn label_of(api_key: i16, api_name: &str) -> &str {
    if api_key == 1 {
        "FetchConsumer"
    } else {
        api_name
    }
}

impl Metrics {
    /// Also exposes the client telemetry (KIP-714) pushed to `telemetry`.
    pub fn with_client_telemetry(
        mut self,
        telemetry: Arc<crate::telemetry::ClientMetricsManager>,
    ) -> Self {
        self.registry
            .register_collector(Box::new(exposition::ClientTelemetry(telemetry)));
        self
    }

    /// The series of one request label, created the first time.
    pub fn request_metrics(&self, request: &str) -> Arc<RequestMetrics> {
        self.requests
            .get(request, || RequestMetrics::new(request, &self.families))
    }

    pub fn record_request(
        &self,
        request: &str,
        version: i16,
        bytes: usize,
        times: &RequestTimes,
        end: RequestEnd,
    ) {
        self.request_metrics(request)
            .record(version, bytes, times, end);
    }

    /// Error codes a module reported in its responses.
    pub fn record_response_errors(&self, request: &str, codes: &[i16]) {
        for code in codes.iter().filter(|code| **code != 0) {
            self.families
                .response_errors
                .get_or_create(&ResponseErrorLabels {
                    request: request.to_string(),
                    code: *code,
                })
                .inc();
        }
    }

    fn topic(&self, topic: &str) -> Arc<TopicMetrics> {
        self.topics.get(topic, || {
            let labels = TopicLabels {
                topic: topic.to_string(),
            };
            let f = &self.families;
            TopicMetrics {
                bytes_in: f.topic_bytes_in.get_or_create_owned(&labels),
                bytes_out: f.topic_bytes_out.get_or_create_owned(&labels),
                messages_in: f.topic_messages_in.get_or_create_owned(&labels),
                failed_produce: f.topic_failed_produce.get_or_create_owned(&labels),
                failed_fetch: f.topic_failed_fetch.get_or_create_owned(&labels),
            }
        })
    }

    pub fn record_produce(&self, topic: &str, bytes: usize, messages: u64, failed: bool) {
        let stats = self.topic(topic);
        if failed {
            stats.failed_produce.inc();
        } else {
            stats.bytes_in.inc_by(bytes as u64);
            stats.messages_in.inc_by(messages);
        }
    }

    pub fn record_fetch(&self, topic: &str, bytes: usize, failed: bool) {
        let stats = self.topic(topic);
        if failed {
            stats.failed_fetch.inc();
        } else {
            stats.bytes_out.inc_by(bytes as u64);
        }
    }

    fn connections(&self, listener: &str) -> Gauge {
        self.families
            .connections
            .get_or_create_owned(&ListenerLabels {
                listener: listener.to_string(),
            })
    }

    pub fn connection_opened(&self, listener: &str) {
        self.connections(listener).inc();
    }

    pub fn connection_closed(&self, listener: &str) {
        self.connections(listener).dec();
    }

    pub fn record_plugin_call(
        &self,
        plugin: &str,
        call_time: Duration,
        instantiate_time: Option<Duration>,
        peak_memory: usize,
    ) {
        let stats = self.plugins.get(plugin, || {
            let labels = PluginLabels {
                plugin: plugin.to_string(),
            };
            let f = &self.families;
            PluginMetrics {
                call_time: f.plugin_call_time.get_or_create_owned(&labels),
                instantiate_time: f.plugin_instantiate_time.get_or_create_owned(&labels),
                peak_memory: f.plugin_peak_memory.get_or_create_owned(&labels),
            }
        });
        stats.call_time.observe(call_time);
        if let Some(instantiate) = instantiate_time {
            stats.instantiate_time.observe(instantiate);
        }
        let peak = i64::try_from(peak_memory).unwrap_or(i64::MAX);
        stats.peak_memory.inner().fetch_max(peak, Ordering::Relaxed);
    }

    pub fn record_load(&self, ok: bool) {
        if ok {
            self.families.plugin_loads.inc();
        } else {
            self.families.plugin_load_failures.inc();
        }
    }

    /// Every family in the Prometheus text format (0.0.4); `extra`
    /// appends gauges read at scrape time.
    pub fn render(&self, extra: &ScrapeGauges) -> String {
        self.render_as(extra, Exposition::Prometheus)
    }

    /// Every family in `format` (see [`Exposition::from_accept`]).
    pub fn render_as(&self, extra: &ScrapeGauges, format: Exposition) -> String {
        format.render(&self.registry, extra)
    }
}

/// A connection's own handles for the requests it records, so recording
/// needs no shared look-up once a connection has seen an API.
#[derive(Default)]
pub struct ConnectionRecorder {
    recent: Vec<Arc<RequestMetrics>>,
}

impl ConnectionRecorder {
    /// The series for `request`, from this connection's handles or, the
    /// first time, from `metrics`.
    pub fn get(&mut self, metrics: &Metrics, request: &str) -> &RequestMetrics {
        let index = match self.recent.iter().position(|m| m.label == request) {
            Some(index) => index,
            None => {
                self.recent.push(metrics.request_metrics(request));
                self.recent.len() - 1
            }
        };
        &self.recent[index]
    }
}

/// Values read from elsewhere at scrape time.
#[derive(Debug, Default, Clone)]
pub struct ScrapeGauges {
    pub queue_size: usize,
    pub parked_requests: u64,
    pub idle_ratio: f64,
    pub plugins: Vec<PluginCounters>,
}

#[derive(Debug, Clone, Default)]
pub struct PluginCounters {
    pub name: String,
    pub api_key: i16,
    pub calls: u64,
    pub traps: u64,
    pub timeouts: u64,
    pub metering: MeterReading,
}

/// What a module version's calls cost (`plugins::metering`), read at
/// scrape time.
#[derive(Debug, Clone, Default)]
pub struct MeterReading {
    /// Time the guest ran (call time minus host waits).
    pub guest_time: Duration,
    /// Time its calls waited in async host calls.
    pub host_wait: Duration,
    /// Host calls by import interface (those called at least once).
    pub host_calls: Vec<(&'static str, u64)>,
    /// Request bodies handed in and response bodies handed back.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The largest linear memory an instance reached.
    pub peak_memory: u64,
    /// Responses its CPU limit throttled, and for how long in all.
    pub throttled_responses: u64,
    pub throttle_time: Duration,
    /// `plugin.limits.<module>.cpu.ms.per.sec`, and the rate measured
    /// against it; None when unlimited.
    pub cpu_limit_ms_per_sec: Option<f64>,
    pub cpu_ms_per_sec: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

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
        assert!(
            text.contains("# TYPE gregor_requests_total counter"),
            "{text}"
        );
        assert!(text.contains("gregor_request_bytes_total{request=\"Produce\"} 150"));
        assert!(text.contains(
            "gregor_request_errors_total{request=\"Produce\",error=\"HANDLER_FAILED\"} 1"
        ));
        assert!(
            text.contains("gregor_request_total_time_ms_bucket{request=\"Produce\",le=\"5\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("gregor_request_total_time_ms_bucket{request=\"Produce\",le=\"2.5\"} 0")
        );
        assert!(
            text.contains("gregor_request_total_time_ms_bucket{request=\"Produce\",le=\"+Inf\"} 2")
        );
        assert_eq!(
            sample(
                &text,
                "gregor_request_total_time_ms_sum{request=\"Produce\"}"
            ),
            Some(6.0)
        );
        assert!(text.contains("gregor_topic_bytes_in_total{topic=\"orders\"} 1000"));
        assert!(text.contains("gregor_topic_messages_in_total{topic=\"orders\"} 10"));
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn openmetrics_names_counters_by_family_and_ends_with_eof() {
        let metrics = Metrics::default();
        metrics.record_request(
            "Metadata",
            12,
            10,
            &RequestTimes::default(),
            RequestEnd::Responded,
        );
        let text = metrics.render_as(&ScrapeGauges::default(), Exposition::OpenMetrics);
        assert!(text.contains("# TYPE gregor_requests counter"), "{text}");
        assert!(text.contains("gregor_requests_total{request=\"Metadata\",version=\"12\"} 1"));
        assert!(text.contains("le=\"5.0\""), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn observations_past_the_last_bound_count_only_in_inf() {
        let metrics = Metrics::default();
        metrics.record_plugin_call("slow", Duration::from_secs(20), None, 4096);
        metrics.record_plugin_call("slow", Duration::from_millis(1), None, 1024);
        let text = metrics.render(&ScrapeGauges::default());
        let series = "gregor_plugin_call_time_ms_bucket{plugin=\"slow\",le=";
        assert_eq!(sample(&text, &format!("{series}\"10000\"}}")), Some(1.0));
        assert_eq!(sample(&text, &format!("{series}\"+Inf\"}}")), Some(2.0));
        assert_eq!(
            sample(&text, "gregor_plugin_call_time_ms_count{plugin=\"slow\"}"),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, "gregor_plugin_peak_memory_bytes{plugin=\"slow\"}"),
            Some(4096.0)
        );
    }

    #[test]
    fn a_connection_recorder_shares_the_series_of_its_label() {
        let metrics = Metrics::default();
        let mut one = ConnectionRecorder::default();
        let mut two = ConnectionRecorder::default();
        let times = RequestTimes::default();
        for recorder in [&mut one, &mut two] {
            recorder
                .get(&metrics, "ApiVersions")
                .record(3, 20, &times, RequestEnd::Responded);
            recorder.get(&metrics, "ApiVersions").record(
                40,
                20,
                &times,
                RequestEnd::UnsupportedVersion,
            );
        }
        let text = metrics.render(&ScrapeGauges::default());
        let requests = "gregor_requests_total{request=\"ApiVersions\",version=";
        assert_eq!(sample(&text, &format!("{requests}\"3\"}}")), Some(2.0));
        assert_eq!(sample(&text, &format!("{requests}\"40\"}}")), Some(2.0));
        assert_eq!(
            sample(&text, "gregor_request_bytes_total{request=\"ApiVersions\"}"),
            Some(80.0)
        );
        assert_eq!(
            sample(
                &text,
                "gregor_request_errors_total{request=\"ApiVersions\",error=\"UNSUPPORTED_VERSION\"}"
            ),
            Some(2.0)
        );
    }

    #[test]
    fn scrape_gauges_and_pool_atomics_are_rendered() {
        let metrics = Metrics::default();
        metrics.memory_pool.capacity.store(-1, Ordering::Relaxed);
        metrics
            .connection_quotas
            .rejected_per_ip
            .store(3, Ordering::Relaxed);
        metrics.connection_opened("PLAINTEXT");
        metrics.connection_opened("PLAINTEXT");
        metrics.connection_closed("PLAINTEXT");
        let gauges = ScrapeGauges {
            queue_size: 4,
            parked_requests: 2,
            idle_ratio: 0.25,
            plugins: vec![PluginCounters {
                name: "chaos".into(),
                api_key: 1099,
                calls: 7,
                traps: 1,
                timeouts: 0,
                metering: MeterReading {
                    guest_time: Duration::from_millis(1500),
                    host_calls: vec![("log", 4)],
                    bytes_in: 300,
                    cpu_limit_ms_per_sec: Some(250.0),
                    cpu_ms_per_sec: Some(100.0),
                    ..MeterReading::default()
                },
            }],
        };
        for format in [Exposition::Prometheus, Exposition::OpenMetrics] {
            let text = metrics.render_as(&gauges, format);
            assert_eq!(
                sample(&text, "gregor_memory_pool_capacity_bytes"),
                Some(-1.0)
            );
            assert_eq!(
                sample(
                    &text,
                    "gregor_connections_rejected_total{reason=\"max.connections.per.ip\"}"
                ),
                Some(3.0)
            );
            assert_eq!(
                sample(&text, "gregor_connections{listener=\"PLAINTEXT\"}"),
                Some(1.0)
            );
            assert_eq!(sample(&text, "gregor_request_queue_size"), Some(4.0));
            assert_eq!(sample(&text, "gregor_parked_requests"), Some(2.0));
            assert_eq!(sample(&text, "gregor_handler_idle_ratio"), Some(0.25));
            assert_eq!(
                sample(
                    &text,
                    "gregor_plugin_traps_total{plugin=\"chaos\",api_key=\"1099\"}"
                ),
                Some(1.0)
            );
            let chaos = "{plugin=\"chaos\",api_key=\"1099\"}";
            assert_eq!(
                sample(&text, &format!("gregor_plugin_guest_seconds_total{chaos}")),
                Some(1.5)
            );
            assert_eq!(
                sample(&text, &format!("gregor_plugin_bytes_in_total{chaos}")),
                Some(300.0)
            );
            assert_eq!(
                sample(
                    &text,
                    "gregor_plugin_host_calls_total{plugin=\"chaos\",api_key=\"1099\",interface=\"log\"}"
                ),
                Some(4.0)
            );
            assert_eq!(
                sample(&text, &format!("gregor_plugin_cpu_limit_ratio{chaos}")),
                Some(0.25)
            );
            assert_eq!(
                sample(&text, &format!("gregor_plugin_cpu_ratio{chaos}")),
                Some(0.1)
            );
        }
    }
}
