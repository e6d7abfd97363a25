//! The rollout settings, read from the broker config when a canary or a
//! shadow starts (a change applies to the next rollout). Every name and
//! default is listed in PLUGINS.md, "Rolling out a new version".

use std::time::Duration;

use serde::Serialize;

use crate::config::BrokerConfig;

/// How a canary is judged and a shadow is bounded.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutSettings {
    /// `plugin.canary.window.ms`: the calls compared are those of this
    /// last stretch of time.
    pub window_ms: u64,
    /// `plugin.canary.min.calls`: the canary is judged once it has served
    /// this many calls in the window.
    pub min_calls: u64,
    /// `plugin.canary.auto.rollback`: roll back by itself when a margin
    /// is exceeded (otherwise only report it).
    pub auto_rollback: bool,
    /// `plugin.canary.max.trap.rate.increase`: how much higher the
    /// canary's share of trapped or timed-out calls may be than the
    /// serving version's (0.01: one percentage point).
    pub max_trap_rate_increase: f64,
    /// `plugin.canary.max.error.rate.increase`: the same for responses
    /// carrying an error code.
    pub max_error_rate_increase: f64,
    /// `plugin.canary.max.p99.increase.ms`: how much slower its 99th
    /// percentile call may be.
    pub max_p99_increase_ms: f64,
    /// `plugin.shadow.max.in.flight`: shadow calls running at once; a
    /// request arriving past it is not mirrored (counted as dropped).
    pub shadow_max_in_flight: usize,
    /// `plugin.shadow.ignore.fields`: response fields (last path segment)
    /// not compared, because they differ between any two runs.
    pub shadow_ignore_fields: Vec<String>,
    /// `plugin.shadow.log.every`: the first differing response is logged,
    /// then every n-th.
    pub shadow_log_every: u64,
}

const DEFAULT_IGNORED: &str = "throttle_time_ms,base_offset,log_append_time_ms";

impl RolloutSettings {
    pub fn from_config(config: &BrokerConfig) -> Result<Self, String> {
        let ignored = config
            .get("plugin.shadow.ignore.fields")
            .unwrap_or(DEFAULT_IGNORED);
        Ok(Self {
            window_ms: number(config, "plugin.canary.window.ms", 30_000)?,
            min_calls: number(config, "plugin.canary.min.calls", 20)?,
            auto_rollback: number(config, "plugin.canary.auto.rollback", true)?,
            max_trap_rate_increase: rate(config, "plugin.canary.max.trap.rate.increase", 0.01)?,
            max_error_rate_increase: rate(config, "plugin.canary.max.error.rate.increase", 0.05)?,
            max_p99_increase_ms: number(config, "plugin.canary.max.p99.increase.ms", 250.0)?,
            shadow_max_in_flight: number(config, "plugin.shadow.max.in.flight", 8)?,
            shadow_ignore_fields: ignored
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(str::to_string)
                .collect(),
            shadow_log_every: number::<u64>(config, "plugin.shadow.log.every", 100)?.max(1),
        })
    }

    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms.max(1))
    }
}

fn number<T: std::str::FromStr>(
    config: &BrokerConfig,
    name: &str,
    default: T,
) -> Result<T, String> {
    match config.get(name) {
        None => Ok(default),
        Some(raw) => raw
            .trim()
            .parse()
            .map_err(|_| format!("invalid value {raw:?} for {name}")),
    }
}

fn rate(config: &BrokerConfig, name: &str, default: f64) -> Result<f64, String> {
    let value: f64 = number(config, name, default)?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{name} is a fraction between 0 and 1, got {value}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let defaults = RolloutSettings::from_config(&BrokerConfig::default()).expect("defaults");
        assert_eq!(defaults.min_calls, 20);
        assert!(defaults.auto_rollback);
        assert!(defaults
            .shadow_ignore_fields
            .contains(&"base_offset".to_string()));
        let config = BrokerConfig::from_pairs(&[
            "plugin.canary.min.calls=5",
            "plugin.canary.auto.rollback=false",
            "plugin.shadow.ignore.fields=",
        ]);
        let set = RolloutSettings::from_config(&config).expect("overrides");
        assert_eq!(set.min_calls, 5);
        assert!(!set.auto_rollback);
        assert!(set.shadow_ignore_fields.is_empty());
    }

    #[test]
    fn bad_values_name_the_setting() {
        let config = BrokerConfig::from_pairs(&["plugin.canary.max.error.rate.increase=5"]);
        let error = RolloutSettings::from_config(&config).expect_err("refused");
        assert!(
            error.contains("plugin.canary.max.error.rate.increase"),
            "{error}"
        );
    }
}
