//! Dynamic group configs (GROUP config resources, KIP-848), as Kafka's
//! `GroupConfig`: a group's overrides of the coordinator's settings, set
//! with IncrementalAlterConfigs (or the legacy AlterConfigs) and stored
//! with the other dynamic configs (`metadata::dynamic`).
//!
//! - `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`
//!   override `group.consumer.session.timeout.ms` and
//!   `group.consumer.heartbeat.interval.ms` for the group's KIP-848
//!   members: the interval ConsumerGroupHeartbeat answers and the session
//!   after which a silent member is fenced, from the next heartbeat on.
//! - `share.session.timeout.ms`, `share.heartbeat.interval.ms`,
//!   `share.record.lock.duration.ms` and `share.auto.offset.reset`: Kafka
//!   4.0 accepts, validates and stores them whether or not share groups
//!   are enabled; Gregor does the same, and they have no effect (Gregor has
//!   no share groups).
//!
//! Validation is Kafka's `GroupConfig.validate` on the group's resulting
//! overrides, keys it does not name at Kafka's defaults: every name known,
//! every value parsed (INT at least 1, share.record.lock.duration.ms at
//! least 1000, share.auto.offset.reset latest or earliest), each within the
//! broker's `group.consumer.min/max.*` and `group.share.min/max.*` bounds,
//! and each session timeout above its heartbeat interval.

use std::collections::BTreeMap;

use super::GroupConfig;

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An INT of at least this much.
    Int { at_least: i32 },
    /// A STRING, one of these.
    OneOf(&'static [&'static str]),
}

/// One group config.
#[derive(Debug, Clone, Copy)]
pub struct Definition {
    pub name: &'static str,
    /// The broker config it overrides (its DescribeConfigs synonym).
    pub broker_synonym: Option<&'static str>,
    pub kind: Kind,
    /// Kafka's default, which validation assumes for a key not set.
    pub default: &'static str,
    pub doc: &'static str,
}

/// Kafka 4.0's `GroupConfig` keys, in name order.
pub const GROUP_CONFIGS: &[Definition] = &[
    Definition {
        name: CONSUMER_HEARTBEAT_INTERVAL_MS,
        broker_synonym: Some("group.consumer.heartbeat.interval.ms"),
        kind: Kind::Int { at_least: 1 },
        default: "5000",
        doc: "The heartbeat interval given to the members of a consumer group.",
    },
    Definition {
        name: CONSUMER_SESSION_TIMEOUT_MS,
        broker_synonym: Some("group.consumer.session.timeout.ms"),
        kind: Kind::Int { at_least: 1 },
        default: "45000",
        doc: "The timeout to detect client failures when using the consumer group protocol.",
    },
    Definition {
        name: SHARE_AUTO_OFFSET_RESET,
        broker_synonym: None,
        kind: Kind::OneOf(&["latest", "earliest"]),
        default: "latest",
        doc: "The strategy to initialize the share-partition start offset.",
    },
    Definition {
        name: SHARE_HEARTBEAT_INTERVAL_MS,
        broker_synonym: Some("group.share.heartbeat.interval.ms"),
        kind: Kind::Int { at_least: 1 },
        default: "5000",
        doc: "The heartbeat interval given to the members of a share group.",
    },
    Definition {
        name: SHARE_RECORD_LOCK_DURATION_MS,
        broker_synonym: Some("group.share.record.lock.duration.ms"),
        kind: Kind::Int { at_least: 1000 },
        default: "30000",
        doc: "The record acquisition lock duration in milliseconds for share groups.",
    },
    Definition {
        name: SHARE_SESSION_TIMEOUT_MS,
        broker_synonym: Some("group.share.session.timeout.ms"),
        kind: Kind::Int { at_least: 1 },
        default: "45000",
        doc: "The timeout to detect client failures when using the share group protocol.",
    },
];

pub fn definition(name: &str) -> Option<&'static Definition> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

/// The value this broker runs a group with when the group does not
/// override `def` (its broker synonym's, or Kafka's default).
pub fn broker_value(config: &GroupConfig, def: &Definition) -> String {
    match def.name {
        CONSUMER_SESSION_TIMEOUT_MS => config.consumer_session_timeout_ms.to_string(),
        CONSUMER_HEARTBEAT_INTERVAL_MS => config.consumer_heartbeat_interval_ms.to_string(),
        SHARE_SESSION_TIMEOUT_MS => config.share.session_timeout_ms.0.to_string(),
        SHARE_HEARTBEAT_INTERVAL_MS => config.share.heartbeat_interval_ms.0.to_string(),
        SHARE_RECORD_LOCK_DURATION_MS => config.share.record_lock_duration_ms.0.to_string(),
        _ => def.default.to_string(),
    }
}

/// Kafka's `ConfigDef` parsing of one value.
fn parse(def: &Definition, value: &str) -> Result<Option<i32>, String> {
    let value = value.trim();
    match def.kind {
        Kind::Int { at_least } => {
            let Ok(parsed) = value.parse::<i32>() else {
                return Err(format!(
                    "Invalid value {value} for configuration {}: Not a number of type INT",
                    def.name
                ));
            };
            if parsed < at_least {
                return Err(format!(
                    "Invalid value {value} for configuration {}: Value must be at least {at_least}",
                    def.name
                ));
            }
            Ok(Some(parsed))
        }
        Kind::OneOf(allowed) => {
            if allowed.contains(&value) {
                Ok(None)
            } else {
                Err(format!(
                    "Invalid value {value} for configuration {}: String must be one of: {}",
                    def.name,
                    allowed.join(", ")
                ))
            }
        }
    }
}

/// Kafka's `GroupConfig.validate` of a group's whole set of overrides; the
/// error is the INVALID_CONFIG message.
pub fn validate(overrides: &BTreeMap<String, String>, config: &GroupConfig) -> Result<(), String> {
    for name in overrides.keys() {
        if definition(name).is_none() {
            return Err(format!("Unknown group config name: {name}"));
        }
    }
    let mut ints = BTreeMap::new();
    for def in GROUP_CONFIGS {
        let value = overrides.get(def.name).map_or(def.default, String::as_str);
        if let Some(parsed) = parse(def, value)? {
            ints.insert(def.name, parsed);
        }
    }
    let int = |name: &str| ints.get(name).copied().unwrap_or_default();
    let share = config.share;
    let bounds: [(&str, i32, &str, i32, &str); 5] = [
        (
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            config.consumer_min_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms",
            config.consumer_max_heartbeat_interval_ms,
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            CONSUMER_SESSION_TIMEOUT_MS,
            config.consumer_min_session_timeout_ms,
            "group.consumer.min.session.timeout.ms",
            config.consumer_max_session_timeout_ms,
            "group.consumer.max.session.timeout.ms",
        ),
        (
            SHARE_HEARTBEAT_INTERVAL_MS,
            share.heartbeat_interval_ms.1,
            "group.share.min.heartbeat.interval.ms",
            share.heartbeat_interval_ms.2,
            "group.share.max.heartbeat.interval.ms",
        ),
        (
            SHARE_SESSION_TIMEOUT_MS,
            share.session_timeout_ms.1,
            "group.share.min.session.timeout.ms",
            share.session_timeout_ms.2,
            "group.share.max.session.timeout.ms",
        ),
        (
            SHARE_RECORD_LOCK_DURATION_MS,
            share.record_lock_duration_ms.1,
            "group.share.min.record.lock.duration.ms",
            share.record_lock_duration_ms.2,
            "group.share.max.record.lock.duration.ms",
        ),
    ];
    for (name, min, min_name, max, max_name) in bounds {
        let value = int(name);
        if value < min {
            return Err(format!(
                "{name} must be greater than or equal to {min_name}"
            ));
        }
        if value > max {
            return Err(format!("{name} must be less than or equal to {max_name}"));
        }
    }
    for (session, heartbeat) in [
        (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
        (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    ] {
        if int(session) <= int(heartbeat) {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn validation_follows_kafka() {
        let config = GroupConfig::default();
        assert_eq!(validate(&BTreeMap::new(), &config), Ok(()));
        assert_eq!(
            validate(&set(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "7000")]), &config),
            Ok(())
        );
        assert_eq!(
            validate(&set(&[("nope", "1")]), &config),
            Err("Unknown group config name: nope".into())
        );
        assert_eq!(
            validate(&set(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "1000")]), &config),
            Err(
                "consumer.heartbeat.interval.ms must be greater than or equal to \
                 group.consumer.min.heartbeat.interval.ms"
                    .into()
            )
        );
        assert_eq!(
            validate(&set(&[(CONSUMER_SESSION_TIMEOUT_MS, "90000")]), &config),
            Err("consumer.session.timeout.ms must be less than or equal to \
                 group.consumer.max.session.timeout.ms"
                .into())
        );
        assert!(
            validate(&set(&[(CONSUMER_SESSION_TIMEOUT_MS, "x")]), &config)
                .unwrap_err()
                .contains("Not a number of type INT")
        );
        assert!(validate(&set(&[(SHARE_AUTO_OFFSET_RESET, "none")]), &config).is_err());
        assert_eq!(
            validate(&set(&[(SHARE_AUTO_OFFSET_RESET, "earliest")]), &config),
            Ok(())
        );
        // The session must stay above the heartbeat interval.
        let wide = GroupConfig {
            consumer_min_session_timeout_ms: 1000,
            consumer_max_heartbeat_interval_ms: 60_000,
            ..GroupConfig::default()
        };
        assert_eq!(
            validate(
                &set(&[
                    (CONSUMER_SESSION_TIMEOUT_MS, "10000"),
                    (CONSUMER_HEARTBEAT_INTERVAL_MS, "10000")
                ]),
                &wide
            ),
            Err(
                "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                    .into()
            )
        );
    }

    #[test]
    fn broker_values_are_the_coordinator_settings() {
        let config = GroupConfig {
            consumer_heartbeat_interval_ms: 6000,
            ..GroupConfig::default()
        };
        let heartbeat = definition(CONSUMER_HEARTBEAT_INTERVAL_MS).unwrap();
        assert_eq!(broker_value(&config, heartbeat), "6000");
        let reset = definition(SHARE_AUTO_OFFSET_RESET).unwrap();
        assert_eq!(broker_value(&config, reset), "latest");
    }
}
