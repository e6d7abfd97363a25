//! Broker configuration with Kafka's property names.
//!
//! Values come from an optional `server.properties`-style file and
//! `--set key=value` overrides. Everything is kept as text, like Kafka's
//! `KafkaConfig` originals, so that handlers can read any broker config by
//! name (`metadata.broker-config`); the typed accessors below give the
//! values the host itself acts on, with Kafka's defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Broker properties by Kafka name.
#[derive(Debug, Clone, Default)]
pub struct BrokerConfig {
    props: BTreeMap<String, String>,
}

/// What the host does when a handler call traps or times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Send the module's error response (UNKNOWN_SERVER_ERROR for every
    /// element) if it has one, else close the connection. The default.
    ErrorResponse,
    /// Always close the connection.
    CloseConnection,
}

/// A listener parsed from `listeners`, e.g. `PLAINTEXT://127.0.0.1:9092`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// `plugin.limits.<module>.cpu.ms.per.sec`, around the module's name.
const PLUGIN_LIMITS_PREFIX: &str = "plugin.limits.";
const CPU_LIMIT_SUFFIX: &str = ".cpu.ms.per.sec";

/// Defaults the broker uses when a property is not set.
const DEFAULTS: &[(&str, &str)] = &[
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("log.dirs", "./data"),
    ("plugin.dir", "./build/plugins"),
    ("node.id", "1"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    ("socket.request.max.bytes", "104857600"),
    ("message.max.bytes", "1048588"),
    ("log.segment.bytes", "1073741824"),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.cleanup.policy", "delete"),
    ("log.retention.ms", "604800000"),
    ("log.retention.bytes", "-1"),
    ("log.segment.ms", "604800000"),
    ("min.insync.replicas", "1"),
    ("queued.max.requests", "500"),
    // A finite budget for the requests in flight (Kafka's default, -1, is
    // unbounded): 1.5 x the default socket.request.max.bytes, so one
    // largest request fits and a client holding one still leaves 50 MiB
    // for everyone else.
    ("queued.max.request.bytes", "157286400"),
    ("max.connections", "2147483647"),
    ("max.connections.per.ip", "2147483647"),
    ("max.connections.per.ip.overrides", ""),
    ("num.io.threads", "8"),
    ("plugin.call.timeout.ms", "5000"),
    ("plugin.memory.max.bytes", "268435456"),
    ("plugin.memory.recycle.bytes", "33554432"),
    ("plugin.memory.total.max.bytes", "0"),
    ("fetch.max.bytes", "57671680"),
    ("plugin.instance.max.calls", "100000"),
    ("allow.everyone.if.no.acl.found", "false"),
    ("super.users", ""),
    ("authorizer", ""),
    ("admin.listener", "127.0.0.1:9644"),
    ("plugin.watch.interval.ms", "250"),
    // Security (security/settings.rs reads these).
    (
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    (
        "sasl.enabled.mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    ),
    ("ssl.client.auth", "none"),
    ("sasl.bootstrap.users", ""),
];

impl BrokerConfig {
    /// Reads a properties file: `key=value` lines, `#` or `!` comments.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let mut config = Self::default();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            config
                .set_pair(line)
                .with_context(|| format!("{}:{}", path.display(), number + 1))?;
        }
        Ok(config)
    }

    /// A config of `key=value` pairs, for tests (panics on a bad pair).
    #[cfg(test)]
    pub fn from_pairs(pairs: &[&str]) -> Self {
        let mut config = Self::default();
        for pair in pairs {
            if let Err(error) = config.set_pair(pair) {
                panic!("config pair {pair}: {error}");
            }
        }
        config
    }

    /// Applies one `key=value` override.
    pub fn set_pair(&mut self, pair: &str) -> Result<()> {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("expected key=value, got {pair:?}");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("empty config name in {pair:?}");
        }
        self.props.insert(key.to_string(), value.trim().to_string());
        Ok(())
    }

    /// The value of a property, falling back to the broker's default.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str).or_else(|| {
            DEFAULTS
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| *value)
        })
    }

    /// Every property name with a value: the broker's defaults and what
    /// was set.
    pub fn known_names(&self) -> Vec<String> {
        DEFAULTS
            .iter()
            .map(|(name, _)| name.to_string())
            .chain(self.props.keys().cloned())
            .collect()
    }

    /// The properties set whose names start with `prefix`, in name order.
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.props
            .range(prefix.to_string()..)
            .take_while(move |(name, _)| name.starts_with(prefix))
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// The value only if it was set explicitly (file or override).
    pub fn explicit(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str)
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<T> {
        let raw = self.get(name).unwrap_or_default();
        raw.parse()
            .map_err(|_| anyhow::anyhow!("invalid value {raw:?} for {name}"))
    }

    fn flag(&self, name: &str) -> Result<bool> {
        match self.get(name).unwrap_or_default() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => bail!("invalid value {other:?} for {name}: expected true or false"),
        }
    }

    /// Checks every value the host acts on, so a bad config fails at start;
    /// the listeners' security settings are checked beside it by
    /// `security::settings::validate`, which reads this config from above.
    pub fn validate(&self) -> Result<()> {
        self.listeners()?;
        self.node_id()?;
        self.num_partitions()?;
        self.auto_create_topics()?;
        self.socket_request_max_bytes()?;
        self.message_max_bytes()?;
        self.segment_bytes()?;
        self.queued_max_requests()?;
        self.queued_max_request_bytes()?;
        self.max_connections()?;
        for listener in self.listeners()? {
            self.listener_max_connections(&listener.name)?;
        }
        self.max_connections_per_ip()?;
        self.io_threads()?;
        self.plugin_call_timeout_ms()?;
        self.plugin_memory_max_bytes()?;
        self.plugin_memory_total_max_bytes()?;
        self.plugin_instance_max_calls()?;
        for (name, value) in &self.props {
            if name.starts_with("plugin.failure.policy.")
                && !matches!(value.as_str(), "error-response" | "close-connection")
            {
                bail!("{name} must be error-response or close-connection, not {value:?}");
            }
            if let Some(module) = name
                .strip_prefix(PLUGIN_LIMITS_PREFIX)
                .and_then(|rest| rest.strip_suffix(CPU_LIMIT_SUFFIX))
            {
                self.plugin_cpu_limit(module)?;
            }
            if name.starts_with(crate::plugin_grants::CONFIG_PREFIX) {
                crate::plugin_grants::parse(value)
                    .map_err(|error| anyhow::anyhow!("{name}: {error}"))?;
            }
        }
        self.plugin_memory_recycle_bytes()?;
        self.fetch_max_bytes()?;
        self.admin_listener()?;
        self.plugin_watch_interval()?;
        Ok(())
    }

    pub fn listeners(&self) -> Result<Vec<ListenerSpec>> {
        let raw = self.get("listeners").unwrap_or_default();
        let mut listeners = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            listeners.push(parse_listener(item)?);
        }
        if listeners.is_empty() {
            bail!("listeners is empty");
        }
        Ok(listeners)
    }

    pub fn node_id(&self) -> Result<i32> {
        self.parsed("node.id")
    }

    /// The first of `log.dirs`: where broker-wide files (`meta.properties`,
    /// the metadata store) live.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dirs()
            .into_iter()
            .next()
            .unwrap_or_else(|| PathBuf::from("./data"))
    }

    /// Every directory of `log.dirs` (comma-separated, else `log.dir`), in
    /// order; partitions are spread across them.
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        let raw = self
            .get("log.dirs")
            .or_else(|| self.get("log.dir"))
            .unwrap_or("./data");
        let dirs: Vec<PathBuf> = raw
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        if dirs.is_empty() {
            vec![PathBuf::from("./data")]
        } else {
            dirs
        }
    }

    /// A duration property in milliseconds, with a default.
    pub fn millis(&self, name: &str, default: u64) -> std::time::Duration {
        let ms = self
            .get(name)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default);
        std::time::Duration::from_millis(ms)
    }

    pub fn plugin_dir(&self) -> PathBuf {
        PathBuf::from(self.get("plugin.dir").unwrap_or("./build/plugins"))
    }

    /// Where compiled components are cached: `plugin.cache.dir`, else
    /// `$GREGOR_CACHE_DIR`, else `~/.cache/gregor`, else inside the log dir.
    pub fn plugin_cache_dir(&self) -> PathBuf {
        if let Some(dir) = self.props.get("plugin.cache.dir") {
            return PathBuf::from(dir);
        }
        if let Some(dir) = std::env::var_os("GREGOR_CACHE_DIR") {
            return PathBuf::from(dir);
        }
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".cache").join("gregor"),
            None => self.log_dir().join(".plugin-cache"),
        }
    }

    pub fn num_partitions(&self) -> Result<i32> {
        let value: i32 = self.parsed("num.partitions")?;
        if value < 1 {
            bail!("num.partitions must be at least 1");
        }
        Ok(value)
    }

    pub fn auto_create_topics(&self) -> Result<bool> {
        self.flag("auto.create.topics.enable")
    }

    pub fn socket_request_max_bytes(&self) -> Result<usize> {
        self.parsed("socket.request.max.bytes")
    }

    pub fn message_max_bytes(&self) -> Result<usize> {
        self.parsed("message.max.bytes")
    }

    pub fn segment_bytes(&self) -> Result<u64> {
        self.parsed("log.segment.bytes")
    }

    pub fn queued_max_requests(&self) -> Result<usize> {
        let value: usize = self.parsed("queued.max.requests")?;
        Ok(value.max(1))
    }

    /// The budget for the bytes of requests in flight
    /// (`queued.max.request.bytes`); `None` (unbounded) when it is 0 or
    /// less, as in Kafka. At least `socket.request.max.bytes`, so that the
    /// largest request fits into an empty budget.
    pub fn queued_max_request_bytes(&self) -> Result<Option<usize>> {
        let value: i64 = self.parsed("queued.max.request.bytes")?;
        let Ok(bytes) = usize::try_from(value) else {
            return Ok(None);
        };
        if bytes == 0 {
            return Ok(None);
        }
        let max_request = self.socket_request_max_bytes()?;
        if bytes < max_request {
            bail!(
                "queued.max.request.bytes ({bytes}) must be larger or equal to \
                 socket.request.max.bytes ({max_request})"
            );
        }
        Ok(Some(bytes))
    }

    /// Connections the broker holds at once; at the limit listeners stop
    /// accepting until one closes.
    pub fn max_connections(&self) -> Result<i32> {
        self.non_negative("max.connections")
    }

    /// `listener.name.<listener>.max.connections`, if set (the listener
    /// name lower-cased, as in Kafka's listener prefix).
    pub fn listener_max_connections(&self, listener: &str) -> Result<Option<i32>> {
        let name = format!("listener.name.{}.max.connections", listener.to_lowercase());
        if self.get(&name).is_none() {
            return Ok(None);
        }
        self.non_negative(&name).map(Some)
    }

    /// Connections one address may hold; 0 only with overrides (Kafka's rule).
    pub fn max_connections_per_ip(&self) -> Result<i32> {
        let value = self.non_negative("max.connections.per.ip")?;
        if value == 0 && self.max_connections_per_ip_overrides()?.is_empty() {
            bail!(
                "max.connections.per.ip can be set to zero only if \
                 max.connections.per.ip.overrides property is set"
            );
        }
        Ok(value)
    }

    /// `max.connections.per.ip.overrides`: `host:count` pairs, comma
    /// separated, the count after the last `:` (so IPv6 hosts work).
    pub fn max_connections_per_ip_overrides(&self) -> Result<Vec<(String, i32)>> {
        let name = "max.connections.per.ip.overrides";
        let raw = self.get(name).unwrap_or_default().trim();
        let mut overrides = Vec::new();
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((host, count)) = entry.rsplit_once(':') else {
                bail!("{name}: {entry:?} is not host:count");
            };
            let host = host.trim();
            let valid_host = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c));
            if !valid_host {
                bail!("{name} contains invalid addresses : {host}");
            }
            let count: i32 = count
                .trim()
                .parse()
                .with_context(|| format!("{name}: invalid count in {entry:?}"))?;
            overrides.push((host.to_string(), count));
        }
        Ok(overrides)
    }

    fn non_negative(&self, name: &str) -> Result<i32> {
        let value: i32 = self.parsed(name)?;
        if value < 0 {
            bail!("{name} must be at least 0, not {value}");
        }
        Ok(value)
    }

    pub fn io_threads(&self) -> Result<usize> {
        let value: usize = self.parsed("num.io.threads")?;
        Ok(value.max(1))
    }

    pub fn plugin_call_timeout_ms(&self) -> Result<u64> {
        self.parsed("plugin.call.timeout.ms")
    }

    pub fn plugin_memory_max_bytes(&self) -> Result<usize> {
        self.parsed("plugin.memory.max.bytes")
    }

    /// The most linear memory all module instances together may have
    /// (`plugins::limits`). 0, the default, is half of the machine's
    /// memory (`MemTotal`; 4 GiB where /proc/meminfo cannot be read), as
    /// a JVM's default heap is a fraction of it; it must leave room for
    /// the request pool, the page cache and the broker itself.
    pub fn plugin_memory_total_max_bytes(&self) -> Result<usize> {
        let bytes: usize = self.parsed("plugin.memory.total.max.bytes")?;
        if bytes > 0 {
            return Ok(bytes);
        }
        let machine = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_total_bytes(&text))
            .unwrap_or(8 << 30);
        Ok(machine / 2)
    }

    /// An instance whose memory grew past this is dropped after its call,
    /// so one large fetch does not pin its memory in the pool.
    pub fn plugin_memory_recycle_bytes(&self) -> Result<usize> {
        self.parsed("plugin.memory.recycle.bytes")
    }

    /// The most a fetch response carries, whatever the client asks
    /// (Kafka's broker-side `fetch.max.bytes`).
    pub fn fetch_max_bytes(&self) -> Result<usize> {
        self.parsed("fetch.max.bytes")
    }

    pub fn plugin_instance_max_calls(&self) -> Result<u64> {
        self.parsed("plugin.instance.max.calls")
    }

    /// Where the admin HTTP endpoint listens; None when disabled (empty).
    pub fn admin_listener(&self) -> Result<Option<SocketAddr>> {
        let raw = self.get("admin.listener").unwrap_or_default().trim();
        if raw.is_empty() {
            return Ok(None);
        }
        raw.parse()
            .map(Some)
            .with_context(|| format!("admin.listener {raw:?} is not HOST:PORT with an IP host"))
    }

    /// How often the plugin directory is checked for changes.
    pub fn plugin_watch_interval(&self) -> Result<std::time::Duration> {
        let ms: u64 = self.parsed("plugin.watch.interval.ms")?;
        Ok(std::time::Duration::from_millis(ms.max(10)))
    }

    /// What a failed call of this module's handler does
    /// (`plugin.failure.policy.<module>`). Both policies fail closed: the
    /// request is never passed on as if it had succeeded.
    pub fn plugin_failure_policy(&self, module: &str) -> FailurePolicy {
        match self.get(&format!("plugin.failure.policy.{module}")) {
            Some("close-connection") => FailurePolicy::CloseConnection,
            _ => FailurePolicy::ErrorResponse,
        }
    }

    /// `plugin.limits.<module>.cpu.ms.per.sec`: the guest time a module
    /// may use per second before its responses are throttled
    /// (`plugins::metering`); None when unlimited.
    pub fn plugin_cpu_limit(&self, module: &str) -> Result<Option<f64>> {
        let name = format!("{PLUGIN_LIMITS_PREFIX}{module}{CPU_LIMIT_SUFFIX}");
        let Some(raw) = self.get(&name) else {
            return Ok(None);
        };
        match raw.trim().parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms > 0.0 => Ok(Some(ms)),
            _ => bail!("invalid value {raw:?} for {name}: expected a positive number of ms"),
        }
    }

    /// The authorizer module's file stem, if one is configured.
    pub fn authorizer(&self) -> Option<&str> {
        self.get("authorizer").filter(|name| !name.is_empty())
    }
}

fn parse_listener(item: &str) -> Result<ListenerSpec> {
    let Some((name, address)) = item.split_once("://") else {
        bail!("listener {item:?} is not NAME://host:port");
    };
    let Some((host, port)) = address.rsplit_once(':') else {
        bail!("listener {item:?} has no port");
    };
    let port: u16 = port
        .parse()
        .with_context(|| format!("listener {item:?} has an invalid port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(ListenerSpec {
        name: name.to_string(),
        host: if host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            host.to_string()
        },
        port,
    })
}

impl ListenerSpec {
    /// The socket address to bind.
    pub fn bind_address(&self) -> Result<SocketAddr> {
        let host = if self.host == "localhost" {
            "127.0.0.1"
        } else {
            self.host.as_str()
        };
        format!("{host}:{}", self.port)
            .parse()
            .or_else(|_| format!("[{host}]:{}", self.port).parse())
            .with_context(|| format!("listener host {:?} is not an IP address", self.host))
    }
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<usize> {
    let kib: usize = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.num_partitions().unwrap(), 1);
        config.set_pair("num.partitions=3").unwrap();
        assert_eq!(config.num_partitions().unwrap(), 3);
        assert!(config.set_pair("novalue").is_err());
        config.set_pair("auto.create.topics.enable=maybe").unwrap();
        assert!(config.validate().is_err());
    }

    #[test]
    fn guest_memory_total_is_half_the_machine_unless_set() {
        assert_eq!(
            mem_total_bytes("MemFree: 5 kB\nMemTotal:       24576000 kB\n"),
            Some(24_576_000 * 1024)
        );
        assert_eq!(mem_total_bytes("MemTotal: lots\n"), None);
        let mut config = BrokerConfig::default();
        let auto = config.plugin_memory_total_max_bytes().unwrap();
        assert!(auto >= 1 << 20, "{auto}");
        config
            .set_pair("plugin.memory.total.max.bytes=1073741824")
            .unwrap();
        assert_eq!(config.plugin_memory_total_max_bytes().unwrap(), 1 << 30);
        config.set_pair("plugin.memory.total.max.bytes=-1").unwrap();
        assert!(config.validate().is_err());
    }

    #[test]
    fn admission_limits() {
        let mut config = BrokerConfig::default();
        assert_eq!(
            config.queued_max_request_bytes().unwrap(),
            Some(157_286_400)
        );
        assert_eq!(config.max_connections().unwrap(), i32::MAX);
        assert_eq!(config.listener_max_connections("PLAINTEXT").unwrap(), None);
        config.set_pair("queued.max.request.bytes=-1").unwrap();
        assert_eq!(config.queued_max_request_bytes().unwrap(), None);
        config.set_pair("queued.max.request.bytes=1000").unwrap();
        assert!(config.validate().is_err(), "below socket.request.max.bytes");
        config.set_pair("socket.request.max.bytes=1000").unwrap();
        config
            .set_pair("listener.name.plaintext.max.connections=7")
            .unwrap();
        config.validate().unwrap();
        assert_eq!(
            config.listener_max_connections("PLAINTEXT").unwrap(),
            Some(7)
        );
        config.set_pair("max.connections=-1").unwrap();
        assert!(config.validate().is_err());
        config.set_pair("max.connections=0").unwrap();
        config.set_pair("max.connections.per.ip=0").unwrap();
        assert!(config.validate().is_err(), "zero per IP needs overrides");
        config
            .set_pair("max.connections.per.ip.overrides=host-1:5, ::1:3,127.0.0.1:0")
            .unwrap();
        config.validate().unwrap();
        assert_eq!(
            config.max_connections_per_ip_overrides().unwrap(),
            vec![
                ("host-1".to_string(), 5),
                ("::1".to_string(), 3),
                ("127.0.0.1".to_string(), 0)
            ]
        );
        for bad in ["nocount", "a b:1", "host:x", ":3"] {
            config
                .set_pair(&format!("max.connections.per.ip.overrides={bad}"))
                .unwrap();
            assert!(config.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn listeners_parse() {
        let mut config = BrokerConfig::default();
        config
            .set_pair("listeners=PLAINTEXT://127.0.0.1:9092, INTERNAL://localhost:9093")
            .unwrap();
        let listeners = config.listeners().unwrap();
        assert_eq!(listeners.len(), 2);
        assert_eq!(listeners[1].name, "INTERNAL");
        assert_eq!(listeners[1].bind_address().unwrap().port(), 9093);
        config.set_pair("listeners=PLAINTEXT://nohost").unwrap();
        assert!(config.listeners().is_err());
    }
}
