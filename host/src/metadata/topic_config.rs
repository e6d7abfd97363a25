//! Topic configs: the names Kafka defines, the broker config each one
//! defaults to, and validation. A topic's effective config is its own
//! override, else the broker's value, else Kafka's default, and
//! DescribeConfigs-style answers carry where each value came from.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Long {
        min: i64,
    },
    Int {
        min: i64,
    },
    Double,
    Bool,
    OneOf(&'static [&'static str]),
    /// A comma-separated list whose items are each one of these.
    ListOf(&'static [&'static str]),
}

/// One topic config Kafka defines.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigDef {
    pub name: &'static str,
    /// The broker property it falls back to, if any.
    pub broker_key: Option<&'static str>,
    pub default: &'static str,
    pub kind: Kind,
}

const LONG_MAX: &str = "9223372036854775807";

/// The topic configs Gregor accepts, with Kafka's defaults.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        Some("log.cleanup.policy"),
        "delete",
        Kind::ListOf(&["delete", "compact"]),
    ),
    def(
        "compression.type",
        Some("compression.type"),
        "producer",
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    def(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        "86400000",
        Kind::Long { min: 0 },
    ),
    def(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        "60000",
        Kind::Long { min: 0 },
    ),
    def(
        "flush.messages",
        Some("log.flush.interval.messages"),
        LONG_MAX,
        Kind::Long { min: 1 },
    ),
    def(
        "flush.ms",
        Some("log.flush.interval.ms"),
        LONG_MAX,
        Kind::Long { min: 0 },
    ),
    def(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        "4096",
        Kind::Int { min: 0 },
    ),
    def(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        LONG_MAX,
        Kind::Long { min: 1 },
    ),
    def(
        "max.message.bytes",
        Some("message.max.bytes"),
        "1048588",
        Kind::Int { min: 0 },
    ),
    def(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        "3600000",
        Kind::Long { min: 0 },
    ),
    def(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        LONG_MAX,
        Kind::Long { min: 0 },
    ),
    def(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        "CreateTime",
        Kind::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    def(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
        Kind::Double,
    ),
    def(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        "0",
        Kind::Long { min: 0 },
    ),
    def(
        "min.insync.replicas",
        Some("min.insync.replicas"),
        "1",
        Kind::Int { min: 1 },
    ),
    def("preallocate", Some("log.preallocate"), "false", Kind::Bool),
    def(
        "retention.bytes",
        Some("log.retention.bytes"),
        "-1",
        Kind::Long { min: -1 },
    ),
    def(
        "retention.ms",
        Some("log.retention.ms"),
        "604800000",
        Kind::Long { min: -1 },
    ),
    def(
        "segment.bytes",
        Some("log.segment.bytes"),
        "1073741824",
        Kind::Int { min: 14 },
    ),
    def(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        "10485760",
        Kind::Int { min: 4 },
    ),
    def(
        "segment.jitter.ms",
        Some("log.roll.jitter.ms"),
        "0",
        Kind::Long { min: 0 },
    ),
    def(
        "segment.ms",
        Some("log.roll.ms"),
        "604800000",
        Kind::Long { min: 1 },
    ),
    def(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        "false",
        Kind::Bool,
    ),
];

const fn def(
    name: &'static str,
    broker_key: Option<&'static str>,
    default: &'static str,
    kind: Kind,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        broker_key,
        default,
        kind,
    }
}

/// Where an effective value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Topic,
    StaticBroker,
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveConfig {
    pub name: &'static str,
    pub value: String,
    pub source: Source,
}

pub fn definition(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|def| def.name == name)
}

/// Checks one topic config; the error is Kafka's INVALID_CONFIG message.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let Some(def) = definition(name) else {
        return Err(format!("Unknown topic config name: {name}"));
    };
    let invalid = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    match def.kind {
        Kind::Long { min } | Kind::Int { min } => {
            let Ok(number) = value.trim().parse::<i64>() else {
                return invalid("Not a number");
            };
            if matches!(def.kind, Kind::Int { .. }) && i32::try_from(number).is_err() {
                return invalid("Not a 32-bit integer");
            }
            if number < min {
                return invalid(&format!("Value must be at least {min}"));
            }
        }
        Kind::Double => {
            if value.trim().parse::<f64>().is_err() {
                return invalid("Not a number");
            }
        }
        Kind::Bool => {
            if !matches!(value.trim().to_ascii_lowercase().as_str(), "true" | "false") {
                return invalid("Expected value to be either true or false");
            }
        }
        Kind::OneOf(allowed) => {
            if !allowed.contains(&value.trim()) {
                return invalid(&format!("String must be one of: {}", allowed.join(", ")));
            }
        }
        Kind::ListOf(allowed) => {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            if items.iter().any(|item| !allowed.contains(item)) {
                return invalid(&format!("Items must be among: {}", allowed.join(", ")));
            }
        }
    }
    Ok(())
}

/// Every topic config with its effective value and source.
pub fn effective(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Vec<EffectiveConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            if let Some(value) = overrides.get(def.name) {
                return EffectiveConfig {
                    name: def.name,
                    value: value.clone(),
                    source: Source::Topic,
                };
            }
            match def.broker_key.and_then(|key| broker.explicit(key)) {
                Some(value) => EffectiveConfig {
                    name: def.name,
                    value: value.to_string(),
                    source: Source::StaticBroker,
                },
                None => EffectiveConfig {
                    name: def.name,
                    value: def.default.to_string(),
                    source: Source::Default,
                },
            }
        })
        .collect()
}

/// The effective value of one config.
pub fn effective_value(
    name: &str,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Option<String> {
    effective(overrides, broker)
        .into_iter()
        .find(|entry| entry.name == name)
        .map(|entry| entry.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_kafka() {
        assert!(validate("retention.ms", "1000").is_ok());
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert!(validate("segment.bytes", "99999999999").is_err());
        assert!(validate("no.such.config", "1")
            .unwrap_err()
            .contains("Unknown topic config"));
    }

    #[test]
    fn effective_values_and_sources() {
        let mut broker = BrokerConfig::default();
        broker.set_pair("log.retention.ms=5000").unwrap();
        let mut overrides = BTreeMap::new();
        overrides.insert("segment.bytes".to_string(), "1024".to_string());
        let all = effective(&overrides, &broker);
        let find = |name: &str| all.iter().find(|e| e.name == name).unwrap().clone();
        assert_eq!(find("segment.bytes").source, Source::Topic);
        assert_eq!(find("retention.ms").value, "5000");
        assert_eq!(find("retention.ms").source, Source::StaticBroker);
        assert_eq!(find("cleanup.policy").source, Source::Default);
    }
}
