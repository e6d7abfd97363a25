//! Client telemetry (KIP-714), Kafka's ClientMetricsManager: which metrics
//! a client should push and how often, and what to do with them.
//!
//! Subscriptions are the CLIENT_METRICS config resources (`metrics`,
//! `interval.ms`, `match`). A client instance (identified by the UUID the
//! broker hands out) gets the union of the metrics of every subscription
//! whose selectors all match it and the shortest of their intervals; the
//! subscription id is a checksum of that, so a client notices when its
//! subscription changed. Instances are re-evaluated when subscriptions
//! change and forgotten after three push intervals without a request.
//!
//! Pushes are checked as Kafka checks them (rate, subscription id,
//! compression, size, termination) and then exported: every metric is
//! logged at debug level, a summary at info level, and the latest value of
//! each metric per client is kept for `/metrics`.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info};

use crate::config_admin::client_metrics::{self, MatchPattern, DEFAULT_PUSH_INTERVAL_MS};
use crate::error_code::ErrorCode;
use crate::metadata::dynamic::DynamicConfigs;

/// Client instances are forgotten after this long without a request, or
/// three push intervals if longer (Kafka's cache expiry).
const INSTANCE_EXPIRY: Duration = Duration::from_secs(60);
/// Most client instances kept (Kafka's cache size).
const MAX_INSTANCES: usize = 16384;
/// Most distinct metrics kept per client instance for `/metrics`.
const MAX_METRICS_PER_CLIENT: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryError {
    pub code: i16,
    pub message: String,
}

fn error(code: i16, message: String) -> TelemetryError {
    TelemetryError { code, message }
}

/// What identifies a client for `match` selectors.
#[derive(Debug, Clone, Default)]
pub struct ClientAttributes {
    pub client_id: String,
    pub software_name: Option<String>,
    pub software_version: Option<String>,
    pub source_address: String,
    pub source_port: Option<u16>,
}

/// A subscription as GetTelemetrySubscriptions answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub client_instance_id: u128,
    pub subscription_id: i32,
    pub push_interval_ms: i32,
    pub telemetry_max_bytes: i32,
    pub requested_metrics: Vec<String>,
}

struct Instance {
    attributes: ClientAttributes,
    subscription_id: i32,
    subscription_version: u64,
    metrics: Vec<String>,
    push_interval_ms: i32,
    last_get: Option<Instant>,
    last_push: Option<Instant>,
    last_seen: Instant,
    terminating: bool,
}

/// A metric's attributes as key=value pairs.
pub type Attributes = Vec<(String, String)>;
/// One decoded data point: metric name, attributes, value.
pub type Point = (String, Attributes, f64);
type MetricKey = (u128, String, Attributes);

/// The latest value of one pushed metric.
#[derive(Debug, Clone, PartialEq)]
pub struct PushedMetric {
    pub client_instance_id: u128,
    pub client_id: String,
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

pub struct ClientMetricsManager {
    configs: Arc<DynamicConfigs>,
    max_bytes: i32,
    instances: Mutex<HashMap<u128, Instance>>,
    /// Latest value per (client instance, metric name, attributes).
    latest: Mutex<BTreeMap<MetricKey, PushedMetric>>,
    pushes: std::sync::atomic::AtomicU64,
}

impl ClientMetricsManager {
    /// With the broker's `telemetry.max.bytes`.
    pub fn from_config(
        config: &crate::config::BrokerConfig,
        configs: Arc<DynamicConfigs>,
    ) -> anyhow::Result<Self> {
        let max_bytes =
            crate::metadata::broker_config::static_number(config, "telemetry.max.bytes")?;
        Ok(Self::new(configs, i32::try_from(max_bytes)?))
    }

    pub fn new(configs: Arc<DynamicConfigs>, max_bytes: i32) -> Self {
        Self {
            configs,
            max_bytes,
            instances: Mutex::new(HashMap::new()),
            latest: Mutex::new(BTreeMap::new()),
            pushes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u128, Instance>> {
        crate::sync::lock(&self.instances)
    }

    /// Pushes accepted since start.
    pub fn pushes(&self) -> u64 {
        self.pushes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The metrics and interval of the subscriptions `attributes` match.
    fn evaluate(
        &self,
        instance_id: u128,
        attributes: &ClientAttributes,
    ) -> (Vec<String>, i32, i32) {
        let mut metrics: Vec<String> = Vec::new();
        let mut interval = DEFAULT_PUSH_INTERVAL_MS;
        let mut all = false;
        for configs in self.configs.client_metrics().values() {
            let patterns = configs
                .get("match")
                .and_then(|value| client_metrics::parse_match_patterns(value).ok())
                .unwrap_or_default();
            if !matches(&patterns, instance_id, attributes) {
                continue;
            }
            for metric in configs
                .get("metrics")
                .map(String::as_str)
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
            {
                all |= metric == "*";
                if !metrics.iter().any(|m| m == metric) {
                    metrics.push(metric.to_string());
                }
            }
            if let Some(ms) = configs
                .get("interval.ms")
                .and_then(|v| v.trim().parse::<i32>().ok())
            {
                interval = interval.min(ms);
            }
        }
        if all {
            metrics = vec!["*".to_string()];
        }
        metrics.sort();
        let id = subscription_id(&metrics, interval, instance_id);
        (metrics, interval, id)
    }

    /// GetTelemetrySubscriptions.
    pub fn get_subscription(
        &self,
        requested_id: u128,
        attributes: ClientAttributes,
    ) -> Result<Subscription, TelemetryError> {
        let now = Instant::now();
        let version = self.configs.version();
        let mut instances = self.lock();
        expire(&mut instances, now);
        let instance_id = if requested_id == 0 {
            new_instance_id(&instances)
        } else {
            requested_id
        };
        let instance = self.instance(&mut instances, instance_id, attributes, version, now);
        // Asking again before the push interval passed is throttled.
        let last = instance.last_get.max(instance.last_push);
        if let Some(last) = last {
            if now.duration_since(last) < interval(instance.push_interval_ms) {
                return Err(error(
                    ErrorCode::ThrottlingQuotaExceeded.code(),
                    format!(
                        "Request from the client [{}] arrived before the next push interval time",
                        crate::uuid::to_text(instance_id)
                    ),
                ));
            }
        }
        instance.last_get = Some(now);
        Ok(Subscription {
            client_instance_id: instance_id,
            subscription_id: instance.subscription_id,
            push_interval_ms: instance.push_interval_ms,
            telemetry_max_bytes: self.max_bytes,
            requested_metrics: instance.metrics.clone(),
        })
    }

    /// The instance, created or re-evaluated if subscriptions changed.
    fn instance<'a>(
        &self,
        instances: &'a mut HashMap<u128, Instance>,
        id: u128,
        attributes: ClientAttributes,
        version: u64,
        now: Instant,
    ) -> &'a mut Instance {
        if !instances.contains_key(&id) && instances.len() >= MAX_INSTANCES {
            if let Some(oldest) = instances
                .iter()
                .min_by_key(|(_, instance)| instance.last_seen)
                .map(|(id, _)| *id)
            {
                instances.remove(&oldest);
            }
        }
        let fresh = |attributes: ClientAttributes, terminating: bool| {
            let (metrics, push_interval_ms, subscription_id) = self.evaluate(id, &attributes);
            Instance {
                attributes,
                subscription_id,
                subscription_version: version,
                metrics,
                push_interval_ms,
                last_get: None,
                last_push: None,
                last_seen: now,
                terminating,
            }
        };
        let instance = match instances.entry(id) {
            Entry::Occupied(entry) => {
                let instance = entry.into_mut();
                if instance.subscription_version < version {
                    *instance = fresh(instance.attributes.clone(), instance.terminating);
                }
                instance
            }
            Entry::Vacant(entry) => entry.insert(fresh(attributes, false)),
        };
        instance.last_seen = now;
        instance
    }

    /// PushTelemetry, first step: the checks Kafka makes before exporting.
    pub fn accept_push(
        &self,
        instance_id: u128,
        attributes: ClientAttributes,
        subscription_id: i32,
        terminating: bool,
        compression_type: i8,
        metrics_bytes: u32,
    ) -> Result<(), TelemetryError> {
        if instance_id <= 1 {
            return Err(error(
                ErrorCode::InvalidRequest.code(),
                format!(
                    "Invalid request from the client [{}], invalid client instance id",
                    crate::uuid::to_text(instance_id)
                ),
            ));
        }
        let now = Instant::now();
        let version = self.configs.version();
        let max_bytes = self.max_bytes;
        let mut instances = self.lock();
        expire(&mut instances, now);
        let instance = self.instance(&mut instances, instance_id, attributes, version, now);
        let id = crate::uuid::to_text(instance_id);
        let result = (|| {
            if instance.terminating {
                return Err(error(
                    ErrorCode::InvalidRequest.code(),
                    format!(
                        "Client [{id}] sent the previous request with state terminating to TRUE, \
                         can not accept any requests after that"
                    ),
                ));
            }
            // A push right after a subscription fetch is always welcome
            // (clients jitter their interval); otherwise wait the interval.
            let can_accept = match (instance.last_get, instance.last_push) {
                (Some(get), Some(push)) if get > push => true,
                (Some(_), None) => true,
                (_, Some(push)) => now.duration_since(push) >= interval(instance.push_interval_ms),
                (None, None) => true,
            };
            if can_accept {
                instance.last_push = Some(now);
            } else if !terminating {
                return Err(error(
                    ErrorCode::ThrottlingQuotaExceeded.code(),
                    format!(
                        "Request from the client [{id}] arrived before the next push interval time"
                    ),
                ));
            }
            if subscription_id != instance.subscription_id {
                return Err(error(
                    ErrorCode::UnknownSubscriptionId.code(),
                    format!("Unknown client subscription id for the client [{id}]"),
                ));
            }
            if !(0..=4).contains(&compression_type) {
                return Err(error(
                    ErrorCode::UnsupportedCompressionType.code(),
                    format!("Unknown compression type [{compression_type}] is received in telemetry request from [{id}]"),
                ));
            }
            if i64::from(metrics_bytes) > i64::from(max_bytes) {
                return Err(error(
                    ErrorCode::TelemetryTooLarge.code(),
                    format!("Telemetry request from [{id}] is larger than the maximum allowed size [{max_bytes}]"),
                ));
            }
            Ok(())
        })();
        instance.terminating = terminating;
        result
    }

    /// PushTelemetry, second step: exports the decoded points.
    pub fn export(&self, instance_id: u128, points: Vec<Point>) {
        let client_id = self
            .lock()
            .get(&instance_id)
            .map(|instance| instance.attributes.client_id.clone())
            .unwrap_or_default();
        self.pushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = crate::uuid::to_text(instance_id);
        info!(
            client_instance_id = %id,
            client_id = %client_id,
            points = points.len(),
            "client telemetry pushed"
        );
        let mut latest = crate::sync::lock(&self.latest);
        for (name, attributes, value) in points {
            debug!(client_instance_id = %id, metric = %name, ?attributes, value, "client metric");
            let key = (instance_id, name.clone(), attributes.clone());
            let known = latest
                .range((instance_id, String::new(), Vec::new())..)
                .take_while(|(k, _)| k.0 == instance_id)
                .count();
            if !latest.contains_key(&key) && known >= MAX_METRICS_PER_CLIENT {
                continue;
            }
            latest.insert(
                key,
                PushedMetric {
                    client_instance_id: instance_id,
                    client_id: client_id.clone(),
                    name,
                    attributes,
                    value,
                },
            );
        }
    }

    /// The latest value of every pushed metric of live client instances.
    pub fn latest(&self) -> Vec<PushedMetric> {
        let live: Vec<u128> = self.lock().keys().copied().collect();
        let mut latest = crate::sync::lock(&self.latest);
        latest.retain(|key, _| live.contains(&key.0));
        latest.values().cloned().collect()
    }
}

fn interval(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0))
}

fn expire(instances: &mut HashMap<u128, Instance>, now: Instant) {
    instances.retain(|_, instance| {
        let ttl = INSTANCE_EXPIRY.max(interval(instance.push_interval_ms) * 3);
        now.duration_since(instance.last_seen) < ttl
    });
}

fn matches(patterns: &[MatchPattern], instance_id: u128, attributes: &ClientAttributes) -> bool {
    patterns.iter().all(|pattern| {
        let value = match pattern.attribute.as_str() {
            "client_instance_id" => Some(crate::uuid::to_text(instance_id)),
            "client_id" => Some(attributes.client_id.clone()),
            "client_software_name" => attributes.software_name.clone(),
            "client_software_version" => attributes.software_version.clone(),
            "client_source_address" => Some(attributes.source_address.clone()),
            "client_source_port" => attributes.source_port.map(|p| p.to_string()),
            _ => None,
        };
        value.is_some_and(|value| pattern.regex.is_match(&value))
    })
}

/// Kafka's `computeSubscriptionId`: a CRC-32C of the metrics and interval,
/// mixed with the instance id.
fn subscription_id(metrics: &[String], interval_ms: i32, instance_id: u128) -> i32 {
    let text = format!("[{}]{interval_ms}", metrics.join(", "));
    let crc = crc32c::crc32c(text.as_bytes());
    let (high, low) = crate::uuid::halves(instance_id);
    // Java's Uuid.hashCode: xor of the halves, folded to 32 bits.
    let mixed = high ^ low;
    let hash = ((mixed >> 32) ^ mixed) as u32;
    (crc ^ hash) as i32
}

/// A fresh random instance id, never zero or Kafka's reserved ids.
fn new_instance_id(instances: &HashMap<u128, Instance>) -> u128 {
    loop {
        let id = u128::from_be_bytes(crate::uuid::random_bytes());
        if id > 1 && !instances.contains_key(&id) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> (tempfile::TempDir, Arc<DynamicConfigs>, ClientMetricsManager) {
        let dir = tempfile::tempdir().unwrap();
        let configs = Arc::new(DynamicConfigs::open(dir.path()).unwrap());
        let manager = ClientMetricsManager::new(Arc::clone(&configs), 1 << 20);
        (dir, configs, manager)
    }

    fn client(id: &str) -> ClientAttributes {
        ClientAttributes {
            client_id: id.to_string(),
            source_address: "127.0.0.1".into(),
            ..ClientAttributes::default()
        }
    }

    #[test]
    fn subscriptions_follow_matching_configs() {
        let (_dir, configs, manager) = manager();
        let empty = manager.get_subscription(0, client("a")).unwrap();
        assert!(empty.requested_metrics.is_empty());
        assert_eq!(empty.push_interval_ms, DEFAULT_PUSH_INTERVAL_MS);
        configs
            .set_client_metrics(
                "producers",
                BTreeMap::from([
                    ("metrics".into(), "org.apache.kafka.producer.".into()),
                    ("interval.ms".into(), "1000".into()),
                    ("match".into(), "client_id=perf-.*".into()),
                ]),
            )
            .unwrap();
        let sub = manager.get_subscription(0, client("perf-1")).unwrap();
        assert_eq!(sub.requested_metrics, vec!["org.apache.kafka.producer."]);
        assert_eq!(sub.push_interval_ms, 1000);
        let other = manager.get_subscription(0, client("other")).unwrap();
        assert!(other.requested_metrics.is_empty());
        // Asking again at once is throttled.
        let again = manager.get_subscription(sub.client_instance_id, client("perf-1"));
        assert_eq!(
            again.unwrap_err().code,
            ErrorCode::ThrottlingQuotaExceeded.code()
        );
        // A push right after the fetch is accepted, a second one is early.
        let id = sub.client_instance_id;
        assert!(manager
            .accept_push(id, client("perf-1"), sub.subscription_id, false, 0, 100)
            .is_ok());
        assert_eq!(
            manager
                .accept_push(id, client("perf-1"), sub.subscription_id, false, 0, 100)
                .unwrap_err()
                .code,
            ErrorCode::ThrottlingQuotaExceeded.code()
        );
        manager.export(
            id,
            vec![(
                "org.apache.kafka.producer.record.queue.time.avg".into(),
                Vec::new(),
                1.5,
            )],
        );
        assert_eq!(manager.latest().len(), 1);
        assert_eq!(manager.pushes(), 1);
    }

    #[test]
    fn pushes_are_checked_like_kafka() {
        let (_dir, _configs, manager) = manager();
        // Each check on a fresh instance: a push right after its
        // subscription fetch is always within the interval.
        let push = |subscription_delta: i32, compression: i8, bytes: u32, terminating: bool| {
            let sub = manager.get_subscription(0, client("c")).unwrap();
            manager
                .accept_push(
                    sub.client_instance_id,
                    client("c"),
                    sub.subscription_id + subscription_delta,
                    terminating,
                    compression,
                    bytes,
                )
                .map_err(|e| e.code)
        };
        assert_eq!(
            push(1, 0, 10, false),
            Err(ErrorCode::UnknownSubscriptionId.code())
        );
        assert_eq!(
            push(0, 9, 10, false),
            Err(ErrorCode::UnsupportedCompressionType.code())
        );
        assert_eq!(
            push(0, 0, 2 << 20, false),
            Err(ErrorCode::TelemetryTooLarge.code())
        );
        assert_eq!(push(0, 0, 10, false), Ok(()));
        assert_eq!(
            manager
                .accept_push(0, client("c"), 0, false, 0, 0)
                .unwrap_err()
                .code,
            ErrorCode::InvalidRequest.code()
        );
        // After a terminating push, nothing more is accepted.
        let sub = manager.get_subscription(0, client("t")).unwrap();
        let id = sub.client_instance_id;
        let again = |terminating| {
            manager
                .accept_push(id, client("t"), sub.subscription_id, terminating, 0, 10)
                .map_err(|e| e.code)
        };
        assert_eq!(again(true), Ok(()));
        assert_eq!(again(true), Err(ErrorCode::InvalidRequest.code()));
    }
}
