//! Client quotas: Kafka's ClientQuotaManagers (produce and fetch byte
//! rates, request time, controller mutations) and the client quota store
//! behind DescribeClientQuotas and AlterClientQuotas.
//!
//! Why it is built this way:
//! - **Kafka's arithmetic, exactly.** A rate is a windowed sum over
//!   `quota.window.num` samples of `quota.window.size.seconds` (Kafka's
//!   `Rate` over a `SampledStat`, with its "at least N-1 full windows" rule
//!   for young sensors); a violation throttles for `(rate - quota) / quota *
//!   window` ms, so that waiting that long brings the rate back to the
//!   quota. Mutations use Kafka's token bucket (KIP-599). This is what makes
//!   a throttled client converge on the configured rate.
//! - **Kafka's entity resolution.** A request's (user, client-id) finds its
//!   quota at the most specific of eight levels (user+client-id down to the
//!   default client-id), and the sensor it records into is shared by every
//!   client of that entity (a user quota is shared by all of its clients).
//!   As in Kafka, a quota type records nothing until some quota of that type
//!   has been set since start-up.
//! - **Durable admin state.** Quota entities live in a crash-safe JSON
//!   document beside the topic store; a change is durable, then visible.
//! - **One seam for a cluster.** On a node of a cluster the quotas are the
//!   metadata log's: a validated change goes to a [`QuotaLog`] (the
//!   cluster proposes it), and the store follows what the log applied
//!   ([`QuotaManager::replace`]). A single node has no log and works as
//!   before.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::info;

use crate::durable::JsonFile;
use crate::error_code::ErrorCode;
use crate::metadata::bounds;

const FILE_NAME: &str = "quotas.json";
const FORMAT_VERSION: u32 = 1;

/// Sensors nobody recorded into for this long are dropped (Kafka's
/// InactiveSensorExpirationTimeSeconds).
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);

/// Kafka's `Errors.POLICY_VIOLATION.message()`, which AlterClientQuotas
/// answers every entry with when the request is over the record cap.
pub const POLICY_VIOLATION_MESSAGE: &str =
    "Request parameters do not satisfy the configured policy.";

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// The quota types and their config keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
    Request,
    ControllerMutation,
}

impl QuotaKind {
    const ALL: [QuotaKind; 4] = [
        QuotaKind::Produce,
        QuotaKind::Fetch,
        QuotaKind::Request,
        QuotaKind::ControllerMutation,
    ];

    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
            QuotaKind::ControllerMutation => "controller_mutation_rate",
        }
    }

    fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.key() == key)
    }

    /// Byte rates are whole numbers (LONG configs); the others are doubles.
    fn integral(self) -> bool {
        matches!(self, QuotaKind::Produce | QuotaKind::Fetch)
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaError {
    pub code: i16,
    pub message: String,
}

impl QuotaError {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::InvalidRequest.code(),
            message: message.into(),
        }
    }
}

/// A quota entity: entity type to name (None: the type's default entity).
pub type Entity = BTreeMap<String, Option<String>>;

/// Quota values by key (`producer_byte_rate`, ...).
pub type QuotaValues = BTreeMap<String, f64>;

/// How a DescribeClientQuotas filter component matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    Exact(String),
    Default,
    Specified,
}

/// One change of AlterClientQuotas: a key set to a value or removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaOp {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredEntity {
    entity: Vec<(String, Option<String>)>,
    values: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Document {
    version: u32,
    entities: Vec<StoredEntity>,
}

/// Kafka's windowed rate (`Rate` over a `WindowedSum`).
#[derive(Debug, Clone)]
struct Sample {
    value: f64,
    event_count: u64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now: i64) -> Self {
        Self {
            value: 0.0,
            event_count: 0,
            start_ms: now,
            last_event_ms: now,
        }
    }

    fn reset(&mut self, now: i64) {
        *self = Sample::new(now);
    }
}

#[derive(Debug, Clone)]
struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    fn new() -> Self {
        Self {
            samples: Vec::new(),
            current: 0,
        }
    }

    fn record(&mut self, value: f64, now: i64, window: &WindowConfig) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        let complete = self
            .samples
            .get(self.current)
            .is_some_and(|sample| now - sample.start_ms >= window.window_ms);
        if complete {
            // One extra slot for the sample overlapping the window's start.
            let max_samples = window.samples + 1;
            self.current = (self.current + 1) % max_samples;
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now));
            } else if let Some(sample) = self.samples.get_mut(self.current) {
                sample.reset(now);
            }
        }
        if let Some(sample) = self.samples.get_mut(self.current) {
            sample.value += value;
            sample.event_count += 1;
            sample.last_event_ms = now;
        }
    }

    fn purge(&mut self, now: i64, window: &WindowConfig) {
        let expire_age = window.samples as i64 * window.window_ms;
        for sample in &mut self.samples {
            if now - sample.last_event_ms >= expire_age {
                sample.reset(now);
            }
        }
    }

    /// The time the rate is computed over: since the oldest sample, but at
    /// least N-1 full windows (a young sensor does not look fast).
    fn window_size_ms(&mut self, now: i64, window: &WindowConfig) -> i64 {
        self.purge(now, window);
        let oldest = self
            .samples
            .iter()
            .map(|sample| sample.start_ms)
            .min()
            .unwrap_or(now);
        let mut elapsed = now - oldest;
        let full_windows = elapsed / window.window_ms;
        let min_full_windows = window.samples as i64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * window.window_ms;
        }
        elapsed.max(1)
    }

    /// Units per second.
    fn measure(&mut self, now: i64, window: &WindowConfig) -> f64 {
        self.purge(now, window);
        let total: f64 = self.samples.iter().map(|sample| sample.value).sum();
        let size_ms = self.window_size_ms(now, window);
        total / (size_ms as f64 / 1000.0)
    }
}

/// Kafka's TokenBucket (controller mutations): starts full with a burst of
/// `samples * window * quota`, refills at the quota rate.
#[derive(Debug, Clone)]
struct TokenBucket {
    tokens: f64,
    last_update_ms: i64,
}

impl TokenBucket {
    fn refill(&mut self, quota: f64, now: i64, window: &WindowConfig) {
        let burst = window.samples as f64 * (window.window_ms as f64 / 1000.0) * quota;
        let elapsed = (now - self.last_update_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + quota * elapsed).min(burst);
        self.last_update_ms = now;
    }
}

#[derive(Debug, Clone, Copy)]
struct WindowConfig {
    samples: usize,
    window_ms: i64,
}

#[derive(Debug)]
struct Sensor {
    rate: Rate,
    bucket: Option<TokenBucket>,
    last_used: Instant,
}

/// Kafka's throttle time for a rate over its quota: `(rate - quota) /
/// quota * window`, the wait that brings the rate back to the quota, at
/// most `cap` ms.
fn throttle_of(rate: f64, limit: f64, size_ms: i64, cap: Option<i64>) -> i32 {
    let throttle = ((rate - limit) / limit * size_ms as f64).round();
    let throttle = cap.map_or(throttle, |cap| throttle.min(cap as f64));
    throttle.clamp(0.0, f64::from(i32::MAX)) as i32
}

/// One windowed rate against one fixed limit, outside the client quotas:
/// Kafka's arithmetic, throttling at most one window as the request quota
/// does. The per-module CPU limits (`plugins::metering`) are made of it.
#[derive(Debug)]
pub struct RateLimit {
    limit: f64,
    window: WindowConfig,
    started: Instant,
    rate: Mutex<Rate>,
}

impl RateLimit {
    /// The limit, in units per second.
    pub fn limit(&self) -> f64 {
        self.limit
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Records `value` and returns the throttle time in ms (0 while the
    /// rate is within the limit).
    pub fn record(&self, value: f64) -> i32 {
        let now = self.now_ms();
        let mut rate = crate::sync::lock(&self.rate);
        rate.record(value, now, &self.window);
        let measured = rate.measure(now, &self.window);
        if measured <= self.limit {
            return 0;
        }
        let size_ms = rate.window_size_ms(now, &self.window);
        throttle_of(measured, self.limit, size_ms, Some(self.window.window_ms))
    }

    /// The rate now, in units per second.
    pub fn measure(&self) -> f64 {
        let now = self.now_ms();
        crate::sync::lock(&self.rate).measure(now, &self.window)
    }
}

/// Which entity levels have had a quota of a type since start-up
/// (Kafka's QuotaTypes bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Enabled {
    client_id: bool,
    user: bool,
    user_client_id: bool,
}

impl Enabled {
    fn any(self) -> bool {
        self.client_id || self.user || self.user_client_id
    }

    fn count(self) -> usize {
        usize::from(self.client_id) + usize::from(self.user) + usize::from(self.user_client_id)
    }
}

struct Inner {
    entities: BTreeMap<Entity, BTreeMap<String, f64>>,
    enabled: [Enabled; 4],
    sensors: HashMap<(QuotaKind, String, String), Sensor>,
    last_purge: Instant,
}

/// Where a validated quota change goes on a node of a cluster: proposed
/// to the metadata log and, once applied, brought into this store
/// ([`QuotaManager::replace`]) before the answer.
pub trait QuotaLog: Send + Sync {
    fn alter(&self, entity: &Entity, ops: &[QuotaOp]) -> Result<(), QuotaError>;
}

pub struct QuotaManager {
    /// Set on a node of a cluster: changes go there.
    log: OnceLock<Arc<dyn QuotaLog>>,
    file: JsonFile,
    window: WindowConfig,
    started: Instant,
    write_lock: Mutex<()>,
    inner: Mutex<Inner>,
}

/// A request's identity as quotas see it: the principal's name (without
/// its type) and the client id.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

impl<'a> Client<'a> {
    /// From a principal string ("User:alice") and the request's client id.
    pub fn new(principal: &'a str, client_id: Option<&'a str>) -> Self {
        let user = principal
            .split_once(':')
            .map_or(principal, |(_, name)| name);
        Self {
            user,
            client_id: client_id.unwrap_or(""),
        }
    }
}

impl QuotaManager {
    /// Opens the quota store in `dir` with the broker's
    /// `quota.window.num` and `quota.window.size.seconds`.
    pub fn from_config(config: &crate::config::BrokerConfig, dir: &Path) -> anyhow::Result<Self> {
        use crate::metadata::broker_config::static_number;
        let samples = static_number(config, "quota.window.num")?;
        let seconds = static_number(config, "quota.window.size.seconds")?;
        let samples = usize::try_from(samples)?;
        let window = Duration::from_secs(u64::try_from(seconds)?);
        Self::open(dir, samples, window)
            .map_err(|error| anyhow::anyhow!("opening the client quota store: {error}"))
    }

    /// Opens the quota store in `dir`; `samples` and `window` are
    /// `quota.window.num` and `quota.window.size.seconds`.
    pub fn open(dir: &Path, samples: usize, window: Duration) -> io::Result<Self> {
        let file = JsonFile::open(dir, FILE_NAME)?;
        let document = file
            .load_versioned(FORMAT_VERSION, |document: &Document| document.version)?
            .unwrap_or(Document {
                version: FORMAT_VERSION,
                entities: Vec::new(),
            });
        let mut inner = Inner {
            entities: BTreeMap::new(),
            enabled: [Enabled::default(); 4],
            sensors: HashMap::new(),
            last_purge: Instant::now(),
        };
        for stored in document.entities {
            let entity: Entity = stored.entity.into_iter().collect();
            for key in stored.values.keys() {
                if let Some(kind) = QuotaKind::from_key(key) {
                    enable(&mut inner.enabled[kind.index()], &entity);
                }
            }
            inner.entities.insert(entity, stored.values);
        }
        if !inner.entities.is_empty() {
            info!(entities = inner.entities.len(), "client quotas loaded");
        }
        Ok(Self {
            log: OnceLock::new(),
            file,
            window: WindowConfig {
                samples: samples.max(1),
                window_ms: i64::try_from(window.as_millis()).unwrap_or(1000).max(1),
            },
            started: Instant::now(),
            write_lock: Mutex::new(()),
            inner: Mutex::new(inner),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The most a request quota throttles: one window (Kafka caps the
    /// request quota's throttle time; byte rates are not capped).
    fn window_ms(&self) -> i64 {
        self.window.window_ms
    }

    // ------------------------------------------------------ enforcement

    /// Records `value` for the client and returns the throttle time in ms.
    fn record(&self, kind: QuotaKind, client: Client<'_>, value: f64) -> i32 {
        let now = self.now_ms();
        let window = self.window;
        let mut inner = self.lock();
        if !inner.enabled[kind.index()].any() {
            return 0;
        }
        let (tags, limit) = inner.resolve(kind, client);
        inner.maybe_purge();
        let sensor = inner.sensor(kind, tags);
        sensor.rate.record(value, now, &window);
        let Some(limit) = limit else {
            return 0;
        };
        let rate = sensor.rate.measure(now, &window);
        if rate <= limit {
            return 0;
        }
        let size_ms = sensor.rate.window_size_ms(now, &window);
        let cap = (kind == QuotaKind::Request).then(|| self.window_ms());
        throttle_of(rate, limit, size_ms, cap)
    }

    /// A standalone rate against `limit` (units per second) with this
    /// store's windows, throttling as the request quota does.
    pub fn rate_limit(&self, limit: f64) -> RateLimit {
        RateLimit {
            limit,
            window: self.window,
            started: Instant::now(),
            rate: Mutex::new(Rate::new()),
        }
    }

    /// Produce: records a request of `bytes`.
    pub fn record_produce(&self, client: Client<'_>, bytes: usize) -> i32 {
        self.record(QuotaKind::Produce, client, bytes as f64)
    }

    /// Fetch: records a response of `bytes`.
    pub fn record_fetch(&self, client: Client<'_>, bytes: i64) -> i32 {
        self.record(QuotaKind::Fetch, client, bytes.max(0) as f64)
    }

    /// Takes back fetch bytes (a throttled fetch returns nothing).
    pub fn unrecord_fetch(&self, client: Client<'_>, bytes: i64) {
        let now = self.now_ms();
        let window = self.window;
        let mut inner = self.lock();
        if !inner.enabled[QuotaKind::Fetch.index()].any() {
            return;
        }
        let (tags, _) = inner.resolve(QuotaKind::Fetch, client);
        inner
            .sensor(QuotaKind::Fetch, tags)
            .rate
            .record(-(bytes.max(0) as f64), now, &window);
    }

    /// Fetch: the most bytes a fetch may return without certainly being
    /// throttled: the quota times N-1 windows (None: no quota).
    pub fn fetch_window_bytes(&self, client: Client<'_>) -> Option<i64> {
        let inner = self.lock();
        if !inner.enabled[QuotaKind::Fetch.index()].any() {
            return None;
        }
        let (_, limit) = inner.resolve(QuotaKind::Fetch, client);
        let windows = (self.window.samples.saturating_sub(1)) as f64;
        limit.map(|limit| {
            let bytes = limit * windows * (self.window.window_ms as f64 / 1000.0);
            bytes.min(i64::MAX as f64) as i64
        })
    }

    /// Request quota: records `thread_time` of handler time as a
    /// percentage of one thread and returns the throttle time.
    pub fn record_request(&self, client: Client<'_>, thread_time: Duration) -> i32 {
        let percent_seconds = thread_time.as_nanos() as f64 * 100.0 / 1e9;
        self.record(QuotaKind::Request, client, percent_seconds)
    }

    /// Controller mutations: `(error code, throttle ms)`, as Kafka's
    /// Strict- and PermissiveControllerMutationQuota answer them. Strict
    /// mode refuses a mutation while the bucket is already below zero
    /// (recording nothing) and never throttles one it accepts, however far
    /// that takes the bucket below zero; permissive mode records every
    /// mutation and throttles once the bucket is below zero.
    pub fn record_mutations(&self, client: Client<'_>, mutations: u32, strict: bool) -> (i16, i32) {
        let now = self.now_ms();
        let window = self.window;
        let mut inner = self.lock();
        if !inner.enabled[QuotaKind::ControllerMutation.index()].any() {
            return (0, 0);
        }
        let (tags, limit) = inner.resolve(QuotaKind::ControllerMutation, client);
        inner.maybe_purge();
        let sensor = inner.sensor(QuotaKind::ControllerMutation, tags);
        let Some(limit) = limit.filter(|limit| *limit > 0.0) else {
            sensor.rate.record(f64::from(mutations), now, &window);
            return (0, 0);
        };
        let burst = window.samples as f64 * (window.window_ms as f64 / 1000.0) * limit;
        let bucket = sensor.bucket.get_or_insert(TokenBucket {
            tokens: burst,
            last_update_ms: now,
        });
        bucket.refill(limit, now, &window);
        // The time that brings the bucket back to zero at the quota rate.
        let throttle_of = |tokens: f64| {
            (-tokens / limit * 1000.0)
                .round()
                .clamp(0.0, f64::from(i32::MAX)) as i32
        };
        if strict && bucket.tokens < 0.0 {
            return (
                ErrorCode::ThrottlingQuotaExceeded.code(),
                throttle_of(bucket.tokens),
            );
        }
        bucket.tokens = (bucket.tokens - f64::from(mutations)).min(burst);
        let tokens = bucket.tokens;
        sensor.rate.record(f64::from(mutations), now, &window);
        if strict || tokens >= 0.0 {
            (0, 0)
        } else {
            (0, throttle_of(tokens))
        }
    }

    // ------------------------------------------------------------ admin

    /// DescribeClientQuotas, as Kafka's ClientQuotasImage answers it.
    pub fn describe(
        &self,
        components: &[(String, Match)],
        strict: bool,
    ) -> Result<Vec<(Entity, QuotaValues)>, QuotaError> {
        let mut exact: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        let mut typed: Vec<&str> = Vec::new();
        for (entity_type, matching) in components {
            let entity_type = entity_type.as_str();
            if entity_type.is_empty() {
                return Err(QuotaError::invalid("Invalid empty entity type."));
            }
            if exact.contains_key(entity_type) || typed.contains(&entity_type) {
                return Err(QuotaError::invalid(format!(
                    "Entity type {entity_type} cannot appear more than once in the filter."
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&entity_type) {
                return Err(QuotaError {
                    code: ErrorCode::UnsupportedVersion.code(),
                    message: format!("Unsupported entity type {entity_type}"),
                });
            }
            match matching {
                Match::Exact(name) => {
                    exact.insert(entity_type, Some(name.as_str()));
                }
                Match::Default => {
                    exact.insert(entity_type, None);
                }
                Match::Specified => typed.push(entity_type),
            }
        }
        let mentions = |t: &str| exact.contains_key(t) || typed.contains(&t);
        if mentions(IP) && (mentions(USER) || mentions(CLIENT_ID)) {
            return Err(QuotaError::invalid(
                "Invalid entity filter component combination. IP filter component should not be \
                 used with user or clientId filter component.",
            ));
        }
        let inner = self.lock();
        Ok(inner
            .entities
            .iter()
            .filter(|(entity, _)| {
                if strict && entity.len() != exact.len() + typed.len() {
                    return false;
                }
                exact
                    .iter()
                    .all(|(t, name)| entity.get(*t).is_some_and(|have| have.as_deref() == *name))
                    && typed.iter().all(|t| entity.contains_key(*t))
            })
            .map(|(entity, values)| (entity.clone(), values.clone()))
            .collect())
    }

    /// AlterClientQuotas for one entity, as Kafka's ClientQuotaControlManager
    /// validates it; durable and applied on return.
    pub fn alter(
        &self,
        entity: &[(String, Option<String>)],
        ops: &[QuotaOp],
        validate_only: bool,
    ) -> Result<(), QuotaError> {
        if entity.is_empty() {
            return Err(QuotaError::invalid("Invalid empty client quota entity"));
        }
        // Each op is a record in Kafka's controller, which refuses more
        // than MAX_RECORDS_PER_USER_OP in one operation.
        if !bounds::records_fit(ops.len()) {
            return Err(QuotaError {
                code: ErrorCode::PolicyViolation.code(),
                message: POLICY_VIOLATION_MESSAGE.to_string(),
            });
        }
        let mut validated: Entity = BTreeMap::new();
        for (entity_type, name) in entity {
            if validated.contains_key(entity_type) {
                return Err(QuotaError::invalid(format!(
                    "Invalid client quota entity, duplicate entity entry {entity_type}"
                )));
            }
            if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
                return Err(QuotaError::invalid(format!(
                    "Unhandled client quota entity type: {entity_type}"
                )));
            }
            if name.as_deref() == Some("") {
                return Err(QuotaError::invalid(format!(
                    "Empty {entity_type} not supported"
                )));
            }
            validated.insert(entity_type.clone(), name.clone());
        }
        if validated.contains_key(IP) {
            if validated.len() > 1 {
                return Err(QuotaError::invalid(
                    "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
                ));
            }
            // Kafka's connection_creation_rate limits accepting
            // connections, which Gregor's listeners do not do.
            return Err(QuotaError::invalid(
                "IP quotas (connection_creation_rate) are not supported by Gregor",
            ));
        }
        let mut seen = HashSet::new();
        for op in ops {
            if !seen.insert(op.key.as_str()) {
                return Err(QuotaError::invalid(format!(
                    "Duplicate quota key {} not updating quota for this entity",
                    op.key
                )));
            }
            if op.remove {
                continue;
            }
            let Some(kind) = QuotaKind::from_key(&op.key) else {
                return Err(QuotaError::invalid(format!(
                    "Invalid configuration key {}",
                    op.key
                )));
            };
            if op.value.is_nan() || op.value <= 0.0 {
                return Err(QuotaError::invalid(format!(
                    "Quota {} must be greater than 0",
                    op.key
                )));
            }
            if kind.integral() {
                if op.value > i64::MAX as f64 {
                    return Err(QuotaError::invalid(format!(
                        "Proposed value for {} is too large for a LONG.",
                        op.key
                    )));
                }
                if (op.value % 1.0).abs() > 1e-6 {
                    return Err(QuotaError::invalid(format!(
                        "{} cannot be a fractional value.",
                        op.key
                    )));
                }
            }
        }
        if validate_only {
            return Ok(());
        }
        if let Some(log) = self.log.get() {
            return log.alter(&validated, ops);
        }
        let _writer = crate::sync::lock(&self.write_lock);
        let mut entities = self.lock().entities.clone();
        apply_ops(&mut entities, &validated, ops);
        self.store(entities)?;
        info!(entity = ?validated, "client quotas changed");
        Ok(())
    }

    /// Sends every later change to `log` (a node of a cluster).
    pub fn follow(&self, log: Arc<dyn QuotaLog>) {
        let _ = self.log.set(log);
    }

    /// Every entity with its quotas.
    pub fn entities(&self) -> BTreeMap<Entity, QuotaValues> {
        self.lock().entities.clone()
    }

    /// Makes the store hold exactly `entities` (what the metadata log
    /// applied), durably; nothing happens when it already does.
    pub fn replace(&self, entities: BTreeMap<Entity, QuotaValues>) -> Result<(), QuotaError> {
        let _writer = crate::sync::lock(&self.write_lock);
        if self.lock().entities == entities {
            return Ok(());
        }
        self.store(entities)
    }

    /// Persists `entities`, then makes them the quotas in force (a quota
    /// type, once set, stays enabled, as in Kafka). The caller holds the
    /// write lock.
    fn store(&self, entities: BTreeMap<Entity, QuotaValues>) -> Result<(), QuotaError> {
        let document = Document {
            version: FORMAT_VERSION,
            entities: entities
                .iter()
                .map(|(entity, values)| StoredEntity {
                    entity: entity.iter().map(|(t, n)| (t.clone(), n.clone())).collect(),
                    values: values.clone(),
                })
                .collect(),
        };
        self.file.store(&document).map_err(|error| QuotaError {
            code: ErrorCode::KafkaStorageError.code(),
            message: error.to_string(),
        })?;
        let mut inner = self.lock();
        for (entity, values) in &entities {
            for key in values.keys() {
                if let Some(kind) = QuotaKind::from_key(key) {
                    enable(&mut inner.enabled[kind.index()], entity);
                }
            }
        }
        inner.entities = entities;
        Ok(())
    }
}

/// Applies validated `ops` to `entity`'s quotas in `entities`, dropping an
/// entity left with none (Kafka then describes nothing for it). The broker's
/// store and the metadata image's quotas both alter this way.
pub fn apply_ops(entities: &mut BTreeMap<Entity, QuotaValues>, entity: &Entity, ops: &[QuotaOp]) {
    let values = entities.entry(entity.clone()).or_default();
    for op in ops {
        if op.remove {
            values.remove(&op.key);
        } else {
            values.insert(op.key.clone(), op.value);
        }
    }
    if values.is_empty() {
        entities.remove(entity);
    }
}

fn enable(enabled: &mut Enabled, entity: &Entity) {
    match (entity.contains_key(USER), entity.contains_key(CLIENT_ID)) {
        (true, true) => enabled.user_client_id = true,
        (true, false) => enabled.user = true,
        (false, true) => enabled.client_id = true,
        (false, false) => {}
    }
}

fn entity_of(user: Option<Option<&str>>, client_id: Option<Option<&str>>) -> Entity {
    let mut entity = Entity::new();
    if let Some(user) = user {
        entity.insert(USER.to_string(), user.map(str::to_string));
    }
    if let Some(client_id) = client_id {
        entity.insert(CLIENT_ID.to_string(), client_id.map(str::to_string));
    }
    entity
}

impl Inner {
    /// The quota of `kind` an entity has, if any.
    fn quota(
        &self,
        kind: QuotaKind,
        user: Option<Option<&str>>,
        client_id: Option<Option<&str>>,
    ) -> Option<f64> {
        self.entities
            .get(&entity_of(user, client_id))
            .and_then(|values| values.get(kind.key()).copied())
    }

    fn has(
        &self,
        kind: QuotaKind,
        user: Option<Option<&str>>,
        client_id: Option<Option<&str>>,
    ) -> bool {
        self.quota(kind, user, client_id).is_some()
    }

    /// Kafka's DefaultQuotaCallback: the (user, client-id) tags of the
    /// sensor a client records into, and the quota that applies to them.
    fn resolve(&self, kind: QuotaKind, client: Client<'_>) -> ((String, String), Option<f64>) {
        let enabled = self.enabled[kind.index()];
        let (user, id) = (client.user, client.client_id);
        let tags = if enabled.count() <= 1 {
            if enabled.user {
                (user, "")
            } else if enabled.user_client_id {
                (user, id)
            } else {
                ("", id)
            }
        } else if self.has(kind, Some(Some(user)), Some(Some(id)))
            || self.has(kind, Some(Some(user)), Some(None))
        {
            (user, id)
        } else if self.has(kind, Some(Some(user)), None) {
            (user, "")
        } else if self.has(kind, Some(None), Some(Some(id)))
            || self.has(kind, Some(None), Some(None))
        {
            (user, id)
        } else if self.has(kind, Some(None), None) {
            (user, "")
        } else {
            ("", id)
        };
        let limit = self.limit(kind, tags.0, tags.1);
        ((tags.0.to_string(), tags.1.to_string()), limit)
    }

    /// Kafka's `quotaLimit` for sensor tags.
    fn limit(&self, kind: QuotaKind, user: &str, id: &str) -> Option<f64> {
        if !user.is_empty() && !id.is_empty() {
            self.quota(kind, Some(Some(user)), Some(Some(id)))
                .or_else(|| self.quota(kind, Some(Some(user)), Some(None)))
                .or_else(|| self.quota(kind, Some(None), Some(Some(id))))
                .or_else(|| self.quota(kind, Some(None), Some(None)))
        } else if !user.is_empty() {
            self.quota(kind, Some(Some(user)), None)
                .or_else(|| self.quota(kind, Some(None), None))
        } else if !id.is_empty() {
            self.quota(kind, None, Some(Some(id)))
                .or_else(|| self.quota(kind, None, Some(None)))
        } else {
            // A client with neither (empty client id, tags by client id):
            // the default client-id quota applies.
            self.quota(kind, None, Some(None))
        }
    }

    fn sensor(&mut self, kind: QuotaKind, tags: (String, String)) -> &mut Sensor {
        let sensor = self
            .sensors
            .entry((kind, tags.0, tags.1))
            .or_insert_with(|| Sensor {
                rate: Rate::new(),
                bucket: None,
                last_used: Instant::now(),
            });
        sensor.last_used = Instant::now();
        sensor
    }

    fn maybe_purge(&mut self) {
        if self.last_purge.elapsed() < Duration::from_secs(60) {
            return;
        }
        self.last_purge = Instant::now();
        self.sensors
            .retain(|_, sensor| sensor.last_used.elapsed() < SENSOR_EXPIRY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> (tempfile::TempDir, QuotaManager) {
        let dir = tempfile::tempdir().unwrap();
        let manager = QuotaManager::open(dir.path(), 11, Duration::from_secs(1)).unwrap();
        (dir, manager)
    }

    fn set(manager: &QuotaManager, entity: &[(&str, Option<&str>)], key: &str, value: f64) {
        let entity: Vec<(String, Option<String>)> = entity
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect();
        manager
            .alter(
                &entity,
                &[QuotaOp {
                    key: key.into(),
                    value,
                    remove: false,
                }],
                false,
            )
            .unwrap();
    }

    #[test]
    fn rate_follows_kafkas_window_rules() {
        let window = WindowConfig {
            samples: 11,
            window_ms: 1000,
        };
        let mut rate = Rate::new();
        rate.record(1000.0, 0, &window);
        // A young sensor is measured over at least 10 full windows.
        assert!((rate.measure(0, &window) - 100.0).abs() < 1e-9);
        for second in 1..=20 {
            rate.record(1000.0, second * 1000, &window);
        }
        // Steady 1000/s: 11 retained samples (10 s to 20 s) over the 10 s
        // since the oldest began; the one just begun counts in full, as in
        // Kafka.
        let measured = rate.measure(20_000, &window);
        assert!((measured - 1100.0).abs() < 1e-9, "{measured}");
        assert!((rate.measure(20_500, &window) - 11_000.0 / 10.5).abs() < 1e-9);
        // Idle past every sample: back to nothing.
        assert_eq!(rate.measure(60_000, &window), 0.0);
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_quota() {
        let (_dir, manager) = manager();
        let client = Client::new("User:alice", Some("producer-1"));
        assert_eq!(manager.record_produce(client, 1 << 20), 0, "no quota yet");
        set(
            &manager,
            &[(CLIENT_ID, Some("producer-1"))],
            "producer_byte_rate",
            1000.0,
        );
        // 20000 bytes at once over a 10 s minimum window: 2000/s, double the
        // quota: throttle for (2000 - 1000) / 1000 * 10 s.
        assert_eq!(manager.record_produce(client, 20_000), 10_000);
        let other = Client::new("User:alice", Some("other"));
        assert_eq!(
            manager.record_produce(other, 20_000),
            0,
            "other client ids are free"
        );
    }

    #[test]
    fn a_rate_limit_throttles_at_most_one_window() {
        let (_dir, manager) = manager();
        let limit = manager.rate_limit(10.0);
        // 50 over the young sensor's 10 s: 5/s, within 10/s.
        assert_eq!(limit.record(50.0), 0);
        // 250 more: 30/s, twice over: (30 - 10) / 10 * 10 s, capped at 1 s.
        assert_eq!(limit.record(250.0), 1000);
        assert!((limit.measure() - 30.0).abs() < 0.5);
    }

    #[test]
    fn entities_resolve_like_kafka() {
        let (_dir, manager) = manager();
        set(&manager, &[(USER, None)], "consumer_byte_rate", 100.0);
        set(
            &manager,
            &[(USER, Some("bob"))],
            "consumer_byte_rate",
            500.0,
        );
        set(
            &manager,
            &[(USER, Some("bob")), (CLIENT_ID, Some("c1"))],
            "consumer_byte_rate",
            900.0,
        );
        set(&manager, &[(CLIENT_ID, None)], "consumer_byte_rate", 50.0);
        let inner = manager.lock();
        let limit = |user: &str, id: &str| {
            inner.resolve(
                QuotaKind::Fetch,
                Client {
                    user,
                    client_id: id,
                },
            )
        };
        assert_eq!(
            limit("bob", "c1"),
            (("bob".into(), "c1".into()), Some(900.0))
        );
        assert_eq!(limit("bob", "c2"), (("bob".into(), "".into()), Some(500.0)));
        assert_eq!(limit("eve", "c2"), (("eve".into(), "".into()), Some(100.0)));
        drop(inner);
        let bytes = manager.fetch_window_bytes(Client::new("User:eve", Some("x")));
        assert_eq!(bytes, Some(1000));
    }

    #[test]
    fn admin_validates_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let manager = QuotaManager::open(dir.path(), 11, Duration::from_secs(1)).unwrap();
        let entity = vec![(USER.to_string(), Some("alice".to_string()))];
        let op = |key: &str, value: f64| QuotaOp {
            key: key.into(),
            value,
            remove: false,
        };
        for bad in [
            op("producer_byte_rate", 1.5),
            op("producer_byte_rate", 0.0),
            op("nope", 1.0),
        ] {
            let error = manager.alter(&entity, &[bad], false).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidRequest.code());
        }
        let ip = vec![(IP.to_string(), Some("127.0.0.1".to_string()))];
        assert!(manager
            .alter(&ip, &[op("connection_creation_rate", 5.0)], false)
            .is_err());
        manager
            .alter(&entity, &[op("request_percentage", 12.5)], true)
            .unwrap();
        assert!(
            manager.describe(&[], false).unwrap().is_empty(),
            "validate only"
        );
        manager
            .alter(
                &entity,
                &[
                    op("request_percentage", 12.5),
                    op("producer_byte_rate", 1024.0),
                ],
                false,
            )
            .unwrap();
        drop(manager);
        let manager = QuotaManager::open(dir.path(), 11, Duration::from_secs(1)).unwrap();
        let all = manager
            .describe(&[(USER.to_string(), Match::Exact("alice".into()))], true)
            .unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].1.get("producer_byte_rate"), Some(&1024.0));
        assert!(manager
            .describe(&[(CLIENT_ID.to_string(), Match::Specified)], false)
            .unwrap()
            .is_empty());
        let remove = QuotaOp {
            key: "request_percentage".into(),
            value: 0.0,
            remove: true,
        };
        manager.alter(&entity, &[remove], false).unwrap();
        let all = manager.describe(&[], false).unwrap();
        assert_eq!(all[0].1.len(), 1);
        assert_eq!(
            manager
                .describe(&[("group".into(), Match::Specified)], false)
                .unwrap_err()
                .code,
            ErrorCode::UnsupportedVersion.code()
        );
    }

    #[test]
    fn mutations_use_a_token_bucket() {
        let (_dir, manager) = manager();
        set(&manager, &[(USER, None)], "controller_mutation_rate", 1.0);
        let client = Client::new("User:alice", None);
        // A burst of 11 tokens: a strict request for 20 goes through
        // unthrottled (the bucket was not empty), leaving it at -9.
        assert_eq!(manager.record_mutations(client, 20, true), (0, 0));
        // The next strict one is refused, with the time to refill to zero,
        // and records nothing.
        let (code, throttle) = manager.record_mutations(client, 1, true);
        assert_eq!(code, ErrorCode::ThrottlingQuotaExceeded.code());
        assert!((8000..=9000).contains(&throttle), "{throttle}");
        let (code, again) = manager.record_mutations(client, 1, true);
        assert_eq!(code, ErrorCode::ThrottlingQuotaExceeded.code());
        assert!(again <= throttle, "{again} after {throttle}");
        // A permissive one is accepted and throttled for the new deficit.
        let (code, throttle) = manager.record_mutations(client, 3, false);
        assert_eq!(code, 0);
        assert!((11000..=12000).contains(&throttle), "{throttle}");
        // Another client id of the same user shares the user's bucket.
        let other = Client::new("User:alice", Some("other"));
        assert_eq!(
            manager.record_mutations(other, 1, true).0,
            ErrorCode::ThrottlingQuotaExceeded.code()
        );
        // Under the default user's quota each user has a bucket of its own.
        let bob = Client::new("User:bob", None);
        assert_eq!(manager.record_mutations(bob, 11, false), (0, 0));
    }

    #[test]
    fn more_ops_than_one_operation_may_write_are_refused() {
        let (_dir, manager) = manager();
        let entity = vec![(USER.to_string(), Some("alice".to_string()))];
        let ops: Vec<QuotaOp> = (0..=bounds::MAX_RECORDS_PER_USER_OP)
            .map(|i| QuotaOp {
                key: format!("key{i}"),
                value: 0.0,
                remove: true,
            })
            .collect();
        for validate_only in [true, false] {
            let error = manager.alter(&entity, &ops, validate_only).unwrap_err();
            assert_eq!(error.code, ErrorCode::PolicyViolation.code());
            assert_eq!(error.message, POLICY_VIOLATION_MESSAGE);
        }
        // Under the cap, the same removals are a duplicate-free no-op.
        let fits = &ops[..bounds::MAX_RECORDS_PER_USER_OP];
        assert!(manager.alter(&entity, fits, true).is_ok());
    }
}
