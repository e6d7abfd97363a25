//! Topic configs: the names Kafka defines, the broker config each one
//! defaults to, and validation. A topic's effective config is its own
//! override, else the broker's value, else Kafka's default, and
//! DescribeConfigs-style answers carry where each value came from.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::metadata::broker_config;
use crate::metadata::dynamic::BrokerLayers;

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
    // Kafka 3.9's (Kafka 4 removed it with the old message formats).
    def(
        "message.downconversion.enable",
        Some("log.message.downconversion.enable"),
        "true",
        Kind::Bool,
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

/// Where an effective value comes from, highest precedence first (Kafka's
/// DescribeConfigs config sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The topic's own override (DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// A broker config set with AlterConfigs for this broker.
    DynamicBroker,
    /// A broker config set with AlterConfigs for every broker.
    DynamicDefaultBroker,
    /// The broker's config file or `--set`.
    StaticBroker,
    /// Kafka's default.
    Default,
    /// A CLIENT_METRICS subscription's config.
    ClientMetrics,
    /// A logger's level (BROKER_LOGGER, DYNAMIC_BROKER_LOGGER_CONFIG).
    BrokerLogger,
    /// A group's override (GROUP, DYNAMIC_GROUP_CONFIG).
    Group,
}

/// One place a value could come from, as DescribeConfigs synonyms list them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synonym {
    pub name: String,
    pub value: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveConfig {
    pub name: &'static str,
    pub value: String,
    pub source: Source,
    /// Every place the value could come from, highest precedence first;
    /// the first is where `value` came from (empty: Kafka's topic default).
    pub synonyms: Vec<Synonym>,
}

/// The broker-level values topic configs fall back to: the dynamic
/// per-broker and cluster-wide configs (AlterConfigs), then the static
/// config, then Kafka's broker defaults.
#[derive(Debug, Clone, Copy)]
pub struct BrokerView<'a> {
    pub layers: &'a BrokerLayers,
    pub config: &'a BrokerConfig,
}

impl BrokerView<'_> {
    /// Every value set for `name` in the three settable layers, highest
    /// precedence first, then Kafka's default if it has one.
    pub fn entries(&self, name: &str) -> Vec<Synonym> {
        let mut out = Vec::new();
        let layers: [(Option<&str>, Source); 3] = [
            (
                self.layers.per_broker.get(name).map(String::as_str),
                Source::DynamicBroker,
            ),
            (
                self.layers.cluster_default.get(name).map(String::as_str),
                Source::DynamicDefaultBroker,
            ),
            (self.config.explicit(name), Source::StaticBroker),
        ];
        for (value, source) in layers {
            if let Some(value) = value {
                out.push(Synonym {
                    name: name.to_string(),
                    value: value.to_string(),
                    source,
                });
            }
        }
        if let Some(default) = broker_config::definition(name).and_then(|def| def.default) {
            out.push(Synonym {
                name: name.to_string(),
                value: default.to_string(),
                source: Source::Default,
            });
        }
        out
    }

    /// The synonyms of a broker config group (`names`, most precise first)
    /// in Kafka's order: layer by layer, and within a layer by name.
    pub fn group_entries(&self, names: &[(&str, i64)]) -> Vec<(Synonym, i64)> {
        let per_name: Vec<(Vec<Synonym>, i64)> = names
            .iter()
            .map(|(name, factor)| (self.entries(name), *factor))
            .collect();
        let mut out = Vec::new();
        for source in [
            Source::DynamicBroker,
            Source::DynamicDefaultBroker,
            Source::StaticBroker,
            Source::Default,
        ] {
            for (entries, factor) in &per_name {
                for entry in entries.iter().filter(|entry| entry.source == source) {
                    out.push((entry.clone(), *factor));
                }
            }
        }
        out
    }

    /// The effective value of a broker config: the first set in its
    /// synonym group (converted to its unit), with where it came from.
    pub fn value(&self, name: &str) -> Option<(String, Source)> {
        let group = broker_config::group_of(name);
        let own_factor = group
            .iter()
            .find(|(synonym, _)| *synonym == name)
            .map(|(_, factor)| *factor)
            .unwrap_or(1);
        if group.is_empty() {
            return self
                .entries(name)
                .into_iter()
                .next()
                .map(|entry| (entry.value, entry.source))
                .or_else(|| {
                    self.config
                        .get(name)
                        .map(|v| (v.to_string(), Source::Default))
                });
        }
        self.group_entries(&group)
            .into_iter()
            .find_map(|(entry, factor)| {
                if factor == own_factor {
                    Some((entry.value, entry.source))
                } else {
                    // A synonym in another unit: convert through ms.
                    let ms = broker_config::convert(&entry.value, factor)?;
                    let value = ms.parse::<i64>().ok()? / own_factor;
                    Some((value.to_string(), entry.source))
                }
            })
    }
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

/// Every topic config with its effective value, source and synonyms: the
/// topic's override, else the first broker synonym set (dynamic per-broker,
/// dynamic cluster-wide, static, Kafka's broker default), else Kafka's
/// topic default.
pub fn effective(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerView<'_>,
) -> Vec<EffectiveConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| effective_one(def, overrides, broker))
        .collect()
}

fn effective_one(
    def: &'static TopicConfigDef,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerView<'_>,
) -> EffectiveConfig {
    let mut synonyms = Vec::new();
    let mut chosen: Option<(String, Source)> = None;
    if let Some(value) = overrides.get(def.name) {
        synonyms.push(Synonym {
            name: def.name.to_string(),
            value: value.clone(),
            source: Source::Topic,
        });
        chosen = Some((value.clone(), Source::Topic));
    }
    let group = def.broker_key.map(broker_config::synonyms).unwrap_or(&[]);
    for (entry, factor) in broker.group_entries(group) {
        if chosen.is_none() {
            if let Some(value) = broker_config::convert(&entry.value, factor) {
                chosen = Some((value, entry.source));
            }
        }
        synonyms.push(entry);
    }
    let (value, source) = chosen.unwrap_or_else(|| (def.default.to_string(), Source::Default));
    EffectiveConfig {
        name: def.name,
        value,
        source,
        synonyms,
    }
}

/// The effective value of one topic config.
pub fn effective_value(
    name: &str,
    overrides: &BTreeMap<String, String>,
    broker: &BrokerView<'_>,
) -> Option<String> {
    definition(name).map(|def| effective_one(def, overrides, broker).value)
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
        let layers = BrokerLayers::default();
        let view = BrokerView {
            layers: &layers,
            config: &broker,
        };
        let all = effective(&overrides, &view);
        let find = |name: &str| all.iter().find(|e| e.name == name).unwrap().clone();
        assert_eq!(find("segment.bytes").source, Source::Topic);
        assert_eq!(find("retention.ms").value, "5000");
        assert_eq!(find("retention.ms").source, Source::StaticBroker);
        assert_eq!(find("cleanup.policy").source, Source::Default);
        assert_eq!(find("segment.ms").value, "604800000");
    }

    #[test]
    fn dynamic_layers_and_synonyms() {
        let mut broker = BrokerConfig::default();
        broker.set_pair("log.retention.hours=2").unwrap();
        let mut layers = BrokerLayers::default();
        let view = |layers: &BrokerLayers| {
            effective_value(
                "retention.ms",
                &BTreeMap::new(),
                &BrokerView {
                    layers,
                    config: &broker,
                },
            )
        };
        assert_eq!(view(&layers).as_deref(), Some("7200000"));
        layers
            .cluster_default
            .insert("log.retention.minutes".into(), "3".into());
        assert_eq!(view(&layers).as_deref(), Some("180000"));
        layers
            .per_broker
            .insert("log.retention.ms".into(), "42".into());
        assert_eq!(view(&layers).as_deref(), Some("42"));
        let all = effective(
            &BTreeMap::new(),
            &BrokerView {
                layers: &layers,
                config: &broker,
            },
        );
        let retention = all.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(retention.source, Source::DynamicBroker);
        let sources: Vec<(&str, Source)> = retention
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.source))
            .collect();
        assert_eq!(
            sources,
            vec![
                ("log.retention.ms", Source::DynamicBroker),
                ("log.retention.minutes", Source::DynamicDefaultBroker),
                ("log.retention.hours", Source::StaticBroker),
                ("log.retention.hours", Source::Default),
            ]
        );
        let view = BrokerView {
            layers: &layers,
            config: &broker,
        };
        assert_eq!(
            view.value("log.retention.hours").map(|v| v.0).as_deref(),
            Some("0")
        );
        assert_eq!(
            view.value("log.retention.ms"),
            Some(("42".to_string(), Source::DynamicBroker))
        );
    }
}
