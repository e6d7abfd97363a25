//! Group coordinator settings, read by their Kafka names from the broker
//! config with Kafka's defaults (`GroupCoordinatorConfig`, `OffsetConfig`).

use std::time::Duration;

use anyhow::{bail, Result};

use crate::config::BrokerConfig;

#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of
    /// an empty group waits for more members before completing.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`
    pub max_size: usize,
    /// `offsets.retention.minutes`, in ms: how long offsets of an empty
    /// group are kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub retention_check_interval: Duration,
    /// `offset.metadata.max.bytes`
    pub offset_metadata_max_bytes: usize,
    /// `group.consumer.session.timeout.ms` (consumer protocol, KIP-848).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`
    pub consumer_max_size: usize,
    /// `group.consumer.min.session.timeout.ms` and `...max...`: the bounds
    /// of a group's `consumer.session.timeout.ms` (GROUP configs).
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` and `...max...`.
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.share.*`: the defaults and bounds of the `share.*` GROUP
    /// configs (Gregor has no share groups; the configs are only stored).
    pub share: ShareBounds,
}

/// `group.share.session.timeout.ms`, `group.share.heartbeat.interval.ms`,
/// `group.share.record.lock.duration.ms`, each as (value, min, max).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareBounds {
    pub session_timeout_ms: (i32, i32, i32),
    pub heartbeat_interval_ms: (i32, i32, i32),
    pub record_lock_duration_ms: (i32, i32, i32),
}

impl Default for ShareBounds {
    fn default() -> Self {
        Self {
            session_timeout_ms: (45_000, 45_000, 60_000),
            heartbeat_interval_ms: (5_000, 5_000, 15_000),
            record_lock_duration_ms: (30_000, 15_000, 60_000),
        }
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_check_interval: Duration::from_millis(600_000),
            offset_metadata_max_bytes: 4096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_max_size: i32::MAX as usize,
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_min_heartbeat_interval_ms: 5_000,
            consumer_max_heartbeat_interval_ms: 15_000,
            share: ShareBounds::default(),
        }
    }
}

impl GroupConfig {
    pub fn from_broker(config: &BrokerConfig) -> Result<Self> {
        let defaults = Self::default();
        let min_session_timeout_ms = int(config, "group.min.session.timeout.ms")
            .unwrap_or(Ok(defaults.min_session_timeout_ms))?;
        let max_session_timeout_ms = int(config, "group.max.session.timeout.ms")
            .unwrap_or(Ok(defaults.max_session_timeout_ms))?;
        let initial_rebalance_delay_ms = int(config, "group.initial.rebalance.delay.ms")
            .unwrap_or(Ok(defaults.initial_rebalance_delay_ms))?;
        let max_size = int(config, "group.max.size").unwrap_or(Ok(i32::MAX))?;
        let retention_minutes =
            int(config, "offsets.retention.minutes").unwrap_or(Ok(7 * 24 * 60))?;
        let check_ms = int(config, "offsets.retention.check.interval.ms").unwrap_or(Ok(600_000))?;
        let metadata_max = int(config, "offset.metadata.max.bytes").unwrap_or(Ok(4096))?;
        let consumer_session_timeout_ms =
            int(config, "group.consumer.session.timeout.ms").unwrap_or(Ok(45_000))?;
        let consumer_heartbeat_interval_ms =
            int(config, "group.consumer.heartbeat.interval.ms").unwrap_or(Ok(5_000))?;
        let consumer_max_size = int(config, "group.consumer.max.size").unwrap_or(Ok(i32::MAX))?;
        let or = |name: &str, default: i32| int(config, name).unwrap_or(Ok(default));
        let consumer_min_session_timeout_ms = or(
            "group.consumer.min.session.timeout.ms",
            defaults.consumer_min_session_timeout_ms,
        )?;
        let consumer_max_session_timeout_ms = or(
            "group.consumer.max.session.timeout.ms",
            defaults.consumer_max_session_timeout_ms,
        )?;
        let consumer_min_heartbeat_interval_ms = or(
            "group.consumer.min.heartbeat.interval.ms",
            defaults.consumer_min_heartbeat_interval_ms,
        )?;
        let consumer_max_heartbeat_interval_ms = or(
            "group.consumer.max.heartbeat.interval.ms",
            defaults.consumer_max_heartbeat_interval_ms,
        )?;
        let triple =
            |prefix: &str, (value, min, max): (i32, i32, i32)| -> Result<(i32, i32, i32)> {
                Ok((
                    or(&format!("group.share.{prefix}"), value)?,
                    or(&format!("group.share.min.{prefix}"), min)?,
                    or(&format!("group.share.max.{prefix}"), max)?,
                ))
            };
        let share = ShareBounds {
            session_timeout_ms: triple("session.timeout.ms", defaults.share.session_timeout_ms)?,
            heartbeat_interval_ms: triple(
                "heartbeat.interval.ms",
                defaults.share.heartbeat_interval_ms,
            )?,
            record_lock_duration_ms: triple(
                "record.lock.duration.ms",
                defaults.share.record_lock_duration_ms,
            )?,
        };
        if min_session_timeout_ms > max_session_timeout_ms {
            bail!("group.min.session.timeout.ms is above group.max.session.timeout.ms");
        }
        if initial_rebalance_delay_ms < 0
            || max_size < 1
            || retention_minutes < 1
            || check_ms < 1
            || consumer_session_timeout_ms < 1
            || consumer_heartbeat_interval_ms < 1
            || consumer_max_size < 1
        {
            bail!("group coordinator settings must be positive");
        }
        Ok(Self {
            min_session_timeout_ms,
            max_session_timeout_ms,
            initial_rebalance_delay_ms,
            max_size: usize::try_from(max_size).unwrap_or(usize::MAX),
            offsets_retention_ms: i64::from(retention_minutes) * 60_000,
            retention_check_interval: Duration::from_millis(check_ms.unsigned_abs().into()),
            offset_metadata_max_bytes: usize::try_from(metadata_max.max(0)).unwrap_or(0),
            consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms,
            consumer_max_size: usize::try_from(consumer_max_size).unwrap_or(usize::MAX),
            consumer_min_session_timeout_ms,
            consumer_max_session_timeout_ms,
            consumer_min_heartbeat_interval_ms,
            consumer_max_heartbeat_interval_ms,
            share,
        })
    }
}

fn int(config: &BrokerConfig, name: &str) -> Option<Result<i32>> {
    config.get(name).map(|raw| {
        raw.trim()
            .parse::<i32>()
            .map_err(|_| anyhow::anyhow!("invalid value {raw:?} for {name}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut broker = BrokerConfig::default();
        let config = GroupConfig::from_broker(&broker).unwrap();
        assert_eq!(config.initial_rebalance_delay_ms, 3000);
        assert_eq!(config.offsets_retention_ms, 10080 * 60_000);
        broker
            .set_pair("group.initial.rebalance.delay.ms=0")
            .unwrap();
        broker.set_pair("offsets.retention.minutes=1").unwrap();
        let config = GroupConfig::from_broker(&broker).unwrap();
        assert_eq!(config.initial_rebalance_delay_ms, 0);
        assert_eq!(config.offsets_retention_ms, 60_000);
        broker.set_pair("group.max.size=zero").unwrap();
        assert!(GroupConfig::from_broker(&broker).is_err());
    }
}
