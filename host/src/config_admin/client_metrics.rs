//! CLIENT_METRICS: KIP-714 subscriptions (`metrics`, `interval.ms`,
//! `match`), validated as Kafka's ClientMetricsConfigs and stored with
//! the dynamic configs, where client telemetry (`telemetry`) reads them;
//! the `match` selectors are parsed here for both.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex_automata::meta::Regex;

use super::{ConfigError, Configs, Description, StoredConfigs};
use crate::metadata::broker_config::ConfigType;
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::topic_config::Source;

pub(super) struct ClientMetricsConfigs {
    pub(super) dynamic: Arc<DynamicConfigs>,
}

/// The client-metrics subscription configs (KIP-714).
const CLIENT_METRICS_CONFIGS: &[(&str, ConfigType, &str)] = &[
    (
        "interval.ms",
        ConfigType::Int,
        "How often matching clients push their metrics (100 to 3600000 ms).",
    ),
    (
        "match",
        ConfigType::List,
        "Client selectors NAME=REGEX (client_instance_id, client_id, client_software_name, \
         client_software_version, client_source_address, client_source_port); none: every client.",
    ),
    (
        "metrics",
        ConfigType::List,
        "Metric name prefixes the clients should push; * for all.",
    ),
];
const CLIENT_MATCH_NAMES: &[&str] = &[
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];
pub const DEFAULT_PUSH_INTERVAL_MS: i32 = 5 * 60 * 1000;

impl StoredConfigs for ClientMetricsConfigs {
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::invalid_request(
                "Client metrics subscription name must not be empty",
            ));
        }
        Ok(self
            .dynamic
            .client_metrics_of(name)
            .into_iter()
            .map(|(key, value)| {
                let def = CLIENT_METRICS_CONFIGS.iter().find(|(n, _, _)| *n == key);
                Description {
                    name: key,
                    value: Some(value),
                    source: Source::ClientMetrics,
                    read_only: false,
                    sensitive: false,
                    synonyms: Vec::new(),
                    config_type: def.map_or(ConfigType::Unknown, |d| d.1),
                    documentation: def.map(|d| d.2.to_string()),
                }
            })
            .collect())
    }

    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::invalid_request(
                "Subscription name can't be empty",
            ));
        }
        Ok(())
    }

    fn current(&self, name: &str) -> Result<Configs, ConfigError> {
        Ok(self.dynamic.client_metrics_of(name))
    }

    fn is_list(&self, config: &str) -> Result<bool, ConfigError> {
        Ok(CLIENT_METRICS_CONFIGS
            .iter()
            .any(|(n, t, _)| *n == config && *t == ConfigType::List))
    }

    fn validate(&self, _name: &str, configs: &Configs) -> Result<(), ConfigError> {
        validate_client_metrics(configs)
    }

    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError> {
        self.dynamic
            .set_client_metrics(name, configs)
            .map_err(ConfigError::storage)
    }
}

/// Kafka's ClientMetricsConfigs validation.
pub fn validate_client_metrics(configs: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (key, value) in configs {
        match key.as_str() {
            "metrics" => {}
            "interval.ms" => {
                let interval = value.trim().parse::<i64>().map_err(|_| {
                    ConfigError::invalid_config(format!(
                        "Invalid value {value} for configuration interval.ms: Not a number of type INT"
                    ))
                })?;
                if !(100..=3_600_000).contains(&interval) {
                    return Err(ConfigError::invalid_config(format!(
                        "Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
                    )));
                }
            }
            "match" => {
                parse_match_patterns(value)?;
            }
            other => {
                return Err(ConfigError::invalid_config(format!(
                    "Unknown client metrics configuration: {other}"
                )))
            }
        }
    }
    Ok(())
}

/// A client selector of a subscription: attribute name and a regex that
/// must match the whole attribute value.
pub struct MatchPattern {
    pub attribute: String,
    pub regex: Regex,
}

/// Parses `match` (comma-separated NAME=REGEX), as Kafka's
/// `parseMatchingPatterns`.
pub fn parse_match_patterns(value: &str) -> Result<Vec<MatchPattern>, ConfigError> {
    let mut patterns = Vec::new();
    for pattern in value.split(',').filter(|p| !p.trim().is_empty()) {
        let illegal =
            || ConfigError::invalid_config(format!("Illegal client matching pattern: {pattern}"));
        let parts: Vec<&str> = pattern.split('=').collect();
        let [name, regex] = parts.as_slice() else {
            return Err(illegal());
        };
        let name = name.trim();
        if !CLIENT_MATCH_NAMES.contains(&name) {
            return Err(illegal());
        }
        let regex = Regex::new(&format!("^(?:{})$", regex.trim())).map_err(|_| illegal())?;
        patterns.push(MatchPattern {
            attribute: name.to_string(),
            regex,
        });
    }
    Ok(patterns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;

    #[test]
    fn client_metrics_are_validated() {
        let ok = BTreeMap::from([
            (
                "metrics".to_string(),
                "org.apache.kafka.producer.".to_string(),
            ),
            ("interval.ms".to_string(), "1000".to_string()),
            (
                "match".to_string(),
                "client_id=perf.*,client_software_name=librdkafka".to_string(),
            ),
        ]);
        assert!(validate_client_metrics(&ok).is_ok());
        let patterns = parse_match_patterns("client_id=perf.*").unwrap();
        assert!(patterns[0].regex.is_match("perf-1"));
        assert!(!patterns[0].regex.is_match("xperf"));
        for (key, value) in [
            ("interval.ms", "5"),
            ("match", "client_colour=red"),
            ("match", "client_id"),
            ("match", "client_id=(("),
            ("colour", "red"),
        ] {
            let bad = BTreeMap::from([(key.to_string(), value.to_string())]);
            assert_eq!(
                validate_client_metrics(&bad).unwrap_err().code,
                ErrorCode::InvalidConfig.code(),
                "{key}={value}"
            );
        }
    }
}
