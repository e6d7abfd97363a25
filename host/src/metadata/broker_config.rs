//! The broker configs Gregor knows by Kafka's names: their type, Kafka's
//! default, whether they can change while the broker runs (KIP-226 dynamic
//! configs) and a line of documentation, as DescribeConfigs reports them.
//!
//! Dynamic broker configs are the broker-wide defaults of topic configs
//! (`log.retention.ms` for `retention.ms`, ...): changing one reaches every
//! partition log at once. Everything else is read at start-up and is
//! read-only here, as in Kafka. Some topic defaults have synonyms in other
//! units (`log.retention.hours`); the first one set wins, most precise
//! first, as Kafka resolves them.

/// Kafka's DescribeConfigs config types (lower-case in Kafka's documented
/// config list, which `config_admin::catalog` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigType {
    Unknown,
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

/// One broker config.
#[derive(Debug, Clone, Copy)]
pub struct BrokerConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// Kafka's default, if it has one.
    pub default: Option<&'static str>,
    /// Whether AlterConfigs may change it (per broker and cluster-wide).
    pub dynamic: bool,
    /// Smallest value for numbers.
    pub min: Option<i64>,
    pub doc: &'static str,
}

const LONG_MAX: &str = "9223372036854775807";

const fn def(
    name: &'static str,
    config_type: ConfigType,
    default: Option<&'static str>,
    dynamic: bool,
    min: Option<i64>,
    doc: &'static str,
) -> BrokerConfigDef {
    BrokerConfigDef {
        name,
        config_type,
        default,
        dynamic,
        min,
        doc,
    }
}

use ConfigType::{Boolean, Double, Int, List, Long, Password};

/// Every broker config Gregor reports, sorted by name.
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    def("admin.listener", ConfigType::String, Some("127.0.0.1:9644"), false, None, "Gregor: where the admin HTTP endpoint (plugins, /metrics) listens; empty disables it."),
    def("allow.everyone.if.no.acl.found", Boolean, Some("false"), false, None, "Whether a resource without any ACL is open to everyone (the ACL authorizer)."),
    def("authorizer", ConfigType::String, Some(""), false, None, "Gregor: the authorizer module (file stem in plugin.dir); empty allows everything."),
    def("auto.create.topics.enable", Boolean, Some("true"), false, None, "Create a topic when a client asks for metadata of one that does not exist."),
    def("compression.type", ConfigType::String, Some("producer"), true, None, "Default compression of topics (producer keeps the producer's codec)."),
    def("default.replication.factor", Int, Some("1"), false, Some(1), "Replication factor of automatically created topics."),
    def("delegation.token.expiry.check.interval.ms", Long, Some("3600000"), false, Some(1), "How often expired delegation tokens are removed."),
    def("delegation.token.expiry.time.ms", Long, Some("86400000"), false, Some(1), "How long a delegation token lives until it must be renewed."),
    def("delegation.token.max.lifetime.ms", Long, Some("604800000"), false, Some(1), "The longest a delegation token can be renewed for."),
    def("delegation.token.secret.key", Password, None, false, None, "Secret that signs delegation tokens; tokens are disabled without it."),
    def("delete.topic.enable", Boolean, Some("true"), false, None, "Whether topics may be deleted."),
    def("fetch.max.bytes", Int, Some("57671680"), false, Some(1024), "The most bytes a fetch response carries, whatever the client asks."),
    def("listeners", ConfigType::String, Some("PLAINTEXT://127.0.0.1:9092"), false, None, "Listeners as NAME://host:port, comma separated."),
    def("log.cleaner.backoff.ms", Long, Some("15000"), false, Some(0), "How long the cleaner sleeps when there is nothing to clean."),
    def("log.cleaner.delete.retention.ms", Long, Some("86400000"), true, Some(0), "Default for topics' delete.retention.ms: how long tombstones of compacted topics are kept."),
    def("log.cleaner.enable", Boolean, Some("true"), false, None, "Run the log cleaner for compacted topics."),
    def("log.cleaner.max.compaction.lag.ms", Long, Some(LONG_MAX), true, Some(1), "Default for topics' max.compaction.lag.ms."),
    def("log.cleaner.min.cleanable.ratio", Double, Some("0.5"), true, None, "Default for topics' min.cleanable.dirty.ratio."),
    def("log.cleaner.min.compaction.lag.ms", Long, Some("0"), true, Some(0), "Default for topics' min.compaction.lag.ms."),
    def("log.cleanup.policy", List, Some("delete"), true, None, "Default for topics' cleanup.policy: delete, compact or both."),
    def("log.dirs", ConfigType::String, Some("./data"), false, None, "Directories holding the partition logs and the broker's metadata."),
    def("log.flush.interval.messages", Long, Some(LONG_MAX), true, Some(1), "Default for topics' flush.messages: fsync after this many messages."),
    def("log.flush.interval.ms", Long, None, true, Some(0), "Default for topics' flush.ms: fsync when data is older than this."),
    def("log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), false, Some(0), "How often recovery points are checkpointed."),
    def("log.flush.scheduler.interval.ms", Long, Some(LONG_MAX), false, None, "Fallback for log.flush.interval.ms."),
    def("log.index.interval.bytes", Int, Some("4096"), true, Some(0), "Default for topics' index.interval.bytes."),
    def("log.index.size.max.bytes", Int, Some("10485760"), true, Some(4), "Default for topics' segment.index.bytes."),
    def("log.message.downconversion.enable", Boolean, Some("true"), true, None, "Default for topics' message.downconversion.enable: whether Fetch v0-3 gets down-converted records (Kafka 3.9; removed in Kafka 4)."),
    def("log.message.timestamp.after.max.ms", Long, Some("3600000"), true, Some(0), "Default for topics' message.timestamp.after.max.ms."),
    def("log.message.timestamp.before.max.ms", Long, Some(LONG_MAX), true, Some(0), "Default for topics' message.timestamp.before.max.ms."),
    def("log.message.timestamp.type", ConfigType::String, Some("CreateTime"), true, None, "Default for topics' message.timestamp.type: CreateTime or LogAppendTime."),
    def("log.preallocate", Boolean, Some("false"), true, None, "Default for topics' preallocate."),
    def("log.retention.bytes", Long, Some("-1"), true, Some(-1), "Default for topics' retention.bytes: the most a partition keeps (-1: no limit)."),
    def("log.retention.check.interval.ms", Long, Some("300000"), false, Some(1), "How often old segments are checked for deletion."),
    def("log.retention.hours", Int, Some("168"), true, None, "Default retention in hours (log.retention.ms and log.retention.minutes take precedence)."),
    def("log.retention.minutes", Int, None, true, None, "Default retention in minutes (log.retention.ms takes precedence)."),
    def("log.retention.ms", Long, None, true, Some(-1), "Default for topics' retention.ms: how long data is kept (-1: forever)."),
    def("log.roll.hours", Int, Some("168"), true, Some(1), "Default segment age in hours before a new one is rolled (log.roll.ms takes precedence)."),
    def("log.roll.jitter.hours", Int, Some("0"), true, Some(0), "Default segment roll jitter in hours (log.roll.jitter.ms takes precedence)."),
    def("log.roll.jitter.ms", Long, None, true, Some(0), "Default for topics' segment.jitter.ms."),
    def("log.roll.ms", Long, None, true, Some(1), "Default for topics' segment.ms."),
    def("log.segment.bytes", Int, Some("1073741824"), true, Some(14), "Default for topics' segment.bytes."),
    def("log.segment.delete.delay.ms", Long, Some("60000"), true, Some(0), "Default for topics' file.delete.delay.ms."),
    def("max.connections", Int, Some("2147483647"), false, Some(0), "Connections the broker holds at once; at the limit listeners wait for one to close (listener.name.<listener>.max.connections per listener)."),
    def("max.connections.per.ip", Int, Some("2147483647"), false, Some(0), "Connections one address may hold; a new one over the limit is closed at once."),
    def("max.connections.per.ip.overrides", ConfigType::String, Some(""), false, None, "Per-address maximums, host:count comma separated."),
    def("max.request.partition.size.limit", Int, Some("2000"), false, Some(1), "The most partitions a DescribeTopicPartitions response carries."),
    def("message.max.bytes", Int, Some("1048588"), true, Some(0), "Default for topics' max.message.bytes: the largest record batch accepted."),
    def("min.insync.replicas", Int, Some("1"), true, Some(1), "Default for topics' min.insync.replicas."),
    def("node.id", Int, Some("1"), false, Some(0), "This node's id."),
    def("num.io.threads", Int, Some("8"), false, Some(1), "Handler workers taking requests from the request channel."),
    def("num.partitions", Int, Some("1"), false, Some(1), "Partitions of automatically created topics."),
    def("plugin.call.timeout.ms", Long, Some("5000"), false, Some(1), "Gregor: guest time a handler call may take."),
    def("plugin.dir", ConfigType::String, Some("./build/plugins"), false, None, "Gregor: the directory of handler and authorizer modules."),
    def("plugin.instance.max.calls", Long, Some("100000"), false, Some(1), "Gregor: calls before a module instance is recycled."),
    def("plugin.memory.max.bytes", Long, Some("268435456"), false, Some(1), "Gregor: linear memory limit of a module instance."),
    def("plugin.memory.recycle.bytes", Long, Some("33554432"), false, Some(1), "Gregor: an instance whose memory grew past this is recycled."),
    def("plugin.memory.total.max.bytes", Long, Some("0"), false, Some(0), "Gregor: linear memory limit of all module instances together; 0 is half of the machine's memory."),
    def("plugin.watch.interval.ms", Long, Some("250"), false, Some(10), "Gregor: how often the plugin directory is checked for changes."),
    def("queued.max.request.bytes", Long, Some("157286400"), false, None, "Bytes of requests in flight before connections stop reading; -1 is unbounded (Kafka's default; Gregor's is 150 MiB)."),
    def("queued.max.requests", Int, Some("500"), false, Some(1), "Requests the request channel holds before connections wait."),
    def("quota.window.num", Int, Some("11"), false, Some(1), "Samples kept for client quotas."),
    def("quota.window.size.seconds", Int, Some("1"), false, Some(1), "Length of one client quota sample."),
    def("sasl.bootstrap.users", Password, None, false, None, "Gregor: SCRAM users created at start-up (user:password, comma separated)."),
    def("socket.request.max.bytes", Int, Some("104857600"), false, Some(1), "The largest request accepted."),
    def("ssl.key.password", Password, None, false, None, "Password of the listener's private key (Gregor takes unencrypted PEM keys only and refuses it at start-up)."),
    def("super.users", ConfigType::String, Some(""), false, None, "Principals the ACL authorizer always allows, separated by ';'."),
    def("telemetry.max.bytes", Int, Some("1048576"), false, Some(1), "The largest client telemetry push accepted (KIP-714)."),
    def("unclean.leader.election.enable", Boolean, Some("false"), true, None, "Default for topics' unclean.leader.election.enable."),
];

pub fn definition(name: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS.iter().find(|def| def.name == name)
}

/// The broker configs that give a topic config its broker-wide default,
/// most precise first, with the factor that turns each into the topic
/// config's unit (milliseconds).
pub fn synonyms(broker_key: &str) -> &'static [(&'static str, i64)] {
    match broker_key {
        "log.retention.ms" => &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
        "log.roll.ms" => &[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
        "log.roll.jitter.ms" => &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", 3_600_000),
        ],
        "log.flush.interval.ms" => &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
        "log.retention.bytes" => &[("log.retention.bytes", 1)],
        "log.cleanup.policy" => &[("log.cleanup.policy", 1)],
        "compression.type" => &[("compression.type", 1)],
        "log.cleaner.delete.retention.ms" => &[("log.cleaner.delete.retention.ms", 1)],
        "log.segment.delete.delay.ms" => &[("log.segment.delete.delay.ms", 1)],
        "log.flush.interval.messages" => &[("log.flush.interval.messages", 1)],
        "log.index.interval.bytes" => &[("log.index.interval.bytes", 1)],
        "log.cleaner.max.compaction.lag.ms" => &[("log.cleaner.max.compaction.lag.ms", 1)],
        "message.max.bytes" => &[("message.max.bytes", 1)],
        "log.message.timestamp.after.max.ms" => &[("log.message.timestamp.after.max.ms", 1)],
        "log.message.timestamp.before.max.ms" => &[("log.message.timestamp.before.max.ms", 1)],
        "log.message.timestamp.type" => &[("log.message.timestamp.type", 1)],
        "log.message.downconversion.enable" => &[("log.message.downconversion.enable", 1)],
        "log.cleaner.min.cleanable.ratio" => &[("log.cleaner.min.cleanable.ratio", 1)],
        "log.cleaner.min.compaction.lag.ms" => &[("log.cleaner.min.compaction.lag.ms", 1)],
        "min.insync.replicas" => &[("min.insync.replicas", 1)],
        "log.preallocate" => &[("log.preallocate", 1)],
        "log.segment.bytes" => &[("log.segment.bytes", 1)],
        "log.index.size.max.bytes" => &[("log.index.size.max.bytes", 1)],
        "unclean.leader.election.enable" => &[("unclean.leader.election.enable", 1)],
        _ => &[],
    }
}

/// The synonym group a broker config belongs to (itself alone if none).
pub fn group_of(name: &str) -> Vec<(&'static str, i64)> {
    for key in [
        "log.retention.ms",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.flush.interval.ms",
    ] {
        let group = synonyms(key);
        if group.iter().any(|(synonym, _)| *synonym == name) {
            return group.to_vec();
        }
    }
    match definition(name) {
        Some(def) => vec![(def.name, 1)],
        None => Vec::new(),
    }
}

/// A broker config value in a topic config's unit: `raw` times `factor`,
/// or `raw` itself for factor 1. None when a value that needs converting
/// is not a number.
pub fn convert(raw: &str, factor: i64) -> Option<String> {
    if factor == 1 {
        return Some(raw.to_string());
    }
    raw.trim()
        .parse::<i64>()
        .ok()
        .map(|value| value.saturating_mul(factor).to_string())
}

/// Names that look like secrets (for configs Gregor has no definition of,
/// such as other subsystems' passwords): never disclosed.
pub fn looks_sensitive(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas",
        "credential",
        "private.key",
        "bootstrap.users",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// Checks a value for a dynamic broker config; the error is the
/// INVALID_CONFIG message.
pub fn validate(def: &BrokerConfigDef, value: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {}: {why}",
            def.name
        ))
    };
    match def.config_type {
        Int | Long => {
            let Ok(number) = value.trim().parse::<i64>() else {
                return invalid("Not a number of type INT or LONG");
            };
            if def.config_type == Int && i32::try_from(number).is_err() {
                return invalid("Not a 32-bit integer");
            }
            if let Some(min) = def.min {
                if number < min {
                    return invalid(&format!("Value must be at least {min}"));
                }
            }
        }
        Double => {
            if value.trim().parse::<f64>().map(f64::is_finite) != Ok(true) {
                return invalid("Not a number of type DOUBLE");
            }
        }
        Boolean => {
            if !matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false") {
                return invalid("Expected value to be either true or false");
            }
        }
        List => {
            if def.name == "log.cleanup.policy" {
                let items: Vec<&str> = value.split(',').map(str::trim).collect();
                if items
                    .iter()
                    .any(|item| !["delete", "compact"].contains(item))
                {
                    return invalid("Items must be among: delete, compact");
                }
            }
        }
        ConfigType::String => {
            let allowed: &[&str] = match def.name {
                "compression.type" => {
                    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]
                }
                "log.message.timestamp.type" => &["CreateTime", "LogAppendTime"],
                _ => &[],
            };
            if !allowed.is_empty() && !allowed.contains(&value.trim()) {
                return invalid(&format!("String must be one of: {}", allowed.join(", ")));
            }
        }
        ConfigType::Unknown | ConfigType::Short | ConfigType::Class | Password => {}
    }
    Ok(())
}

/// A numeric broker config read at start-up: its static value, else
/// Kafka's default; a value that is not a number or is below its minimum
/// fails start-up with a message naming it.
pub fn static_number(config: &crate::config::BrokerConfig, name: &str) -> anyhow::Result<i64> {
    let def = definition(name);
    let raw = config
        .explicit(name)
        .or_else(|| def.and_then(|def| def.default))
        .ok_or_else(|| anyhow::anyhow!("{name} has no value"))?;
    let value: i64 = raw
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("invalid value {raw:?} for {name}: not a number"))?;
    if let Some(min) = def.and_then(|def| def.min) {
        if value < min {
            anyhow::bail!("invalid value {value} for {name}: must be at least {min}");
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_unique() {
        let names: Vec<&str> = BROKER_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn synonyms_convert_units() {
        assert_eq!(convert("168", 3_600_000).as_deref(), Some("604800000"));
        assert_eq!(convert("x", 60_000), None);
        assert_eq!(convert("delete", 1).as_deref(), Some("delete"));
        let group = group_of("log.retention.hours");
        assert_eq!(group.first().map(|g| g.0), Some("log.retention.ms"));
        assert_eq!(
            group_of("message.max.bytes"),
            vec![("message.max.bytes", 1)]
        );
        assert!(group_of("no.such").is_empty());
    }

    #[test]
    fn dynamic_values_are_validated() {
        let def = definition("log.retention.ms").unwrap();
        assert!(validate(def, "1000").is_ok());
        assert!(validate(def, "-2").is_err());
        assert!(validate(def, "soon").is_err());
        let policy = definition("log.cleanup.policy").unwrap();
        assert!(validate(policy, "compact,delete").is_ok());
        assert!(validate(policy, "shred").is_err());
        assert!(validate(definition("message.max.bytes").unwrap(), "99999999999").is_err());
        assert!(looks_sensitive("ssl.keystore.password"));
        assert!(looks_sensitive(
            "listener.name.sasl_plaintext.sasl.bootstrap.users"
        ));
        assert_eq!(
            definition("sasl.bootstrap.users").map(|d| d.config_type),
            Some(Password)
        );
        assert!(!looks_sensitive("log.retention.ms"));
    }
}
