//! BROKER_LOGGER: this broker's loggers (`runtime_loggers`), as Kafka's
//! ConfigHelper and RuntimeLoggerManager (KIP-412): every logger with its
//! effective level (DYNAMIC_BROKER_LOGGER_CONFIG, never read-only); SET
//! and DELETE change levels at once and are not persisted. The name must
//! be this node's id. Unknown loggers and levels are INVALID_CONFIG;
//! deleting the root logger's level, APPEND and SUBTRACT are
//! INVALID_REQUEST; the legacy AlterConfigs refuses the type.

use super::{node_id_of, AlterEntry, AlterOp, ConfigError, ConfigResource, Configs, Description};
use crate::error_code::ErrorCode;
use crate::metadata::broker_config::ConfigType;
use crate::metadata::topic_config::Source;
use crate::runtime_loggers::{self, Change, Level, RuntimeLoggers, ROOT_LOGGER, VALID_LEVELS};

pub(super) struct BrokerLoggers {
    pub(super) node_id: i32,
}

impl ConfigResource for BrokerLoggers {
    fn describe(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        self.describe_broker_loggers(name)
    }

    fn incremental_alter(
        &self,
        name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        self.alter_broker_loggers(name, entries, validate_only)
    }

    /// Legacy AlterConfigs never supported broker loggers.
    fn replace(&self, _: &str, _: Configs, _: bool) -> Result<(), ConfigError> {
        Err(ConfigError::invalid_request("Unknown resource type 8"))
    }
}

fn loggers() -> Result<&'static RuntimeLoggers, ConfigError> {
    runtime_loggers::installed().ok_or_else(|| {
        ConfigError::invalid_request("Runtime log levels are not available in this process")
    })
}

impl BrokerLoggers {
    /// Kafka's ConfigHelper for BROKER_LOGGER: every logger with its effective
    /// level.
    fn describe_broker_loggers(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::invalid_request("Broker id must not be empty"));
        }
        if node_id_of(name, "Broker id")? != self.node_id {
            return Err(ConfigError::invalid_request(format!(
                "Unexpected broker id, expected {} but received {name}",
                self.node_id
            )));
        }
        Ok(loggers()?
            .loggers()
            .into_iter()
            .map(|(name, level)| Description {
                name,
                value: Some(level.name().to_string()),
                source: Source::BrokerLogger,
                read_only: false,
                sensitive: false,
                synonyms: Vec::new(),
                config_type: ConfigType::Unknown,
                documentation: None,
            })
            .collect())
    }

    /// Kafka's RuntimeLoggerManager: the node id, then every operation is
    /// validated (an existing logger, a valid level, no root DELETE, no APPEND
    /// or SUBTRACT) before any is applied.
    fn alter_broker_loggers(
        &self,
        name: &str,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        if node_id_of(name, "Node id")? != self.node_id {
            return Err(ConfigError::invalid_request(format!(
                "Unexpected node id. Expected {}, but received {name}",
                self.node_id
            )));
        }
        let loggers = loggers()?;
        let changes = logger_changes(entries, |logger| loggers.exists(logger))?;
        if validate_only {
            return Ok(());
        }
        loggers
            .apply(&changes)
            .map_err(|message| ConfigError::new(ErrorCode::UnknownServerError.code(), message))
    }
}

/// The changes IncrementalAlterConfigs asks of the loggers, validated as
/// Kafka's `validateLogLevelConfigs`, in order: SET needs an existing logger
/// and a valid level, DELETE an existing logger other than the root;
/// APPEND and SUBTRACT are refused.
fn logger_changes(
    entries: &[AlterEntry],
    exists: impl Fn(&str) -> bool,
) -> Result<Vec<Change>, ConfigError> {
    let exists = |logger: &str| {
        if exists(logger) {
            Ok(())
        } else {
            Err(ConfigError::invalid_config(format!(
                "Logger {logger} does not exist!"
            )))
        }
    };
    let mut changes = Vec::with_capacity(entries.len());
    for entry in entries {
        let logger = entry.name.as_str();
        match entry.op {
            AlterOp::Set => {
                exists(logger)?;
                let value = entry.value.as_deref().unwrap_or_default();
                let Some(level) = Level::parse_kafka(value) else {
                    return Err(ConfigError::invalid_config(format!(
                        "Cannot set the log level of {logger} to {value} as it is not a \
                         supported log level. Valid log levels are {VALID_LEVELS}"
                    )));
                };
                changes.push(Change {
                    logger: logger.to_string(),
                    level: Some(level),
                });
            }
            AlterOp::Delete => {
                exists(logger)?;
                if logger == ROOT_LOGGER {
                    return Err(ConfigError::invalid_request(format!(
                        "Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                    )));
                }
                changes.push(Change {
                    logger: logger.to_string(),
                    level: None,
                });
            }
            AlterOp::Append | AlterOp::Subtract => {
                return Err(ConfigError::invalid_request(format!(
                    "{} operation is not allowed for the BROKER_LOGGER resource",
                    entry.op.name()
                )));
            }
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_admin::tests::entry;

    #[test]
    fn broker_logger_changes_are_validated_as_kafka() {
        let exists = |logger: &str| matches!(logger, "root" | "gregor" | "gregor::apis");
        let changes = logger_changes(
            &[
                entry("gregor::apis", AlterOp::Set, Some("DEBUG")),
                entry("gregor", AlterOp::Delete, None),
                entry("root", AlterOp::Set, Some("FATAL")),
            ],
            exists,
        )
        .unwrap();
        assert_eq!(
            changes,
            [
                Change {
                    logger: "gregor::apis".into(),
                    level: Some(Level::Debug)
                },
                Change {
                    logger: "gregor".into(),
                    level: None
                },
                Change {
                    logger: "root".into(),
                    level: Some(Level::Fatal)
                },
            ]
        );
        let refused = |op, name: &str, value: Option<&str>| {
            logger_changes(&[entry(name, op, value)], exists).unwrap_err()
        };
        let bad_level = refused(AlterOp::Set, "gregor", Some("debug"));
        assert_eq!(bad_level.code, ErrorCode::InvalidConfig.code());
        assert_eq!(
            bad_level.message,
            "Cannot set the log level of gregor to debug as it is not a supported log level. \
             Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"
        );
        assert_eq!(
            refused(AlterOp::Set, "gregor", Some("OFF")).code,
            ErrorCode::InvalidConfig.code()
        );
        let unknown = refused(AlterOp::Set, "nope", Some("INFO"));
        assert_eq!(
            (unknown.code, unknown.message.as_str()),
            (
                ErrorCode::InvalidConfig.code(),
                "Logger nope does not exist!"
            )
        );
        assert_eq!(
            refused(AlterOp::Delete, "nope", None).code,
            ErrorCode::InvalidConfig.code()
        );
        let root = refused(AlterOp::Delete, "root", None);
        assert_eq!(root.code, ErrorCode::InvalidRequest.code());
        assert_eq!(
            root.message,
            "Removing the log level of the root logger is not allowed"
        );
        let append = refused(AlterOp::Append, "gregor", Some("INFO"));
        assert_eq!(
            (append.code, append.message.as_str()),
            (
                ErrorCode::InvalidRequest.code(),
                "APPEND operation is not allowed for the BROKER_LOGGER resource"
            )
        );
        assert_eq!(
            refused(AlterOp::Subtract, "gregor", Some("INFO")).code,
            ErrorCode::InvalidRequest.code()
        );
        // Nothing is applied when a later operation is refused.
        assert!(logger_changes(
            &[
                entry("gregor", AlterOp::Set, Some("DEBUG")),
                entry("gregor::apis", AlterOp::Set, Some("LOUD")),
            ],
            exists
        )
        .is_err());
    }
}
