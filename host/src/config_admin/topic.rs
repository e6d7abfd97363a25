//! TOPIC: every topic config with its effective value; changes are the
//! topic's overrides, stored with the topic and applied to its partition
//! logs at once.

use std::sync::Arc;

use super::{ConfigError, Configs, DescribedSynonym, Description, StoredConfigs};
use crate::error_code::ErrorCode;
use crate::metadata::broker_config::ConfigType;
use crate::metadata::topic_config::{self, Kind, Synonym};
use crate::metadata::topics::{self, TopicManager};

pub(super) struct TopicConfigs {
    pub(super) topics: Arc<TopicManager>,
}

impl StoredConfigs for TopicConfigs {
    fn describe_configs(&self, name: &str) -> Result<Vec<Description>, ConfigError> {
        topics::validate_name(name)?;
        let Some(configs) = self.topics.configs(name) else {
            return Err(no_such_topic(name));
        };
        Ok(configs
            .into_iter()
            .map(|entry| {
                let def = topic_config::definition(entry.name);
                Description {
                    name: entry.name.to_string(),
                    value: Some(entry.value),
                    source: entry.source,
                    read_only: false,
                    sensitive: false,
                    synonyms: entry.synonyms.into_iter().map(described).collect(),
                    config_type: def.map_or(ConfigType::Unknown, |def| topic_type(def.kind)),
                    documentation: Some(topic_doc(entry.name).to_string()),
                }
            })
            .collect())
    }

    fn check_name(&self, name: &str) -> Result<(), ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::invalid_request(
                "Default topic resources are not allowed.",
            ));
        }
        topics::validate_name(name)?;
        Ok(())
    }

    fn current(&self, name: &str) -> Result<Configs, ConfigError> {
        Ok(self
            .topics
            .get(name)
            .map(|topic| topic.configs)
            .unwrap_or_default())
    }

    fn is_list(&self, config: &str) -> Result<bool, ConfigError> {
        topic_is_list(config)
    }

    fn default_of(&self, config: &str) -> Option<String> {
        topic_config::definition(config).map(|def| def.default.to_string())
    }

    /// The topic's new overrides, then (even when validating only) that the
    /// topic exists, as the controller checks them.
    fn validate(&self, name: &str, configs: &Configs) -> Result<(), ConfigError> {
        for (key, value) in configs {
            topic_config::validate(key, value).map_err(ConfigError::invalid_config)?;
        }
        if self.topics.get(name).is_none() {
            return Err(no_such_topic(name));
        }
        Ok(())
    }

    fn persist(&self, name: &str, configs: Configs) -> Result<(), ConfigError> {
        self.topics.set_configs(name, configs)?;
        Ok(())
    }
}

fn no_such_topic(name: &str) -> ConfigError {
    ConfigError::new(
        ErrorCode::UnknownTopicOrPartition.code(),
        format!("The topic '{name}' does not exist."),
    )
}

fn described(synonym: Synonym) -> DescribedSynonym {
    DescribedSynonym {
        name: synonym.name,
        value: Some(synonym.value),
        source: synonym.source,
    }
}

fn topic_type(kind: Kind) -> ConfigType {
    match kind {
        Kind::Long { .. } => ConfigType::Long,
        Kind::Int { .. } => ConfigType::Int,
        Kind::Double => ConfigType::Double,
        Kind::Bool => ConfigType::Boolean,
        Kind::OneOf(_) => ConfigType::String,
        Kind::ListOf(_) => ConfigType::List,
    }
}

pub(super) fn topic_is_list(name: &str) -> Result<bool, ConfigError> {
    Ok(topic_config::definition(name).is_some_and(|def| matches!(def.kind, Kind::ListOf(_))))
}

/// Short documentation of a topic config (DescribeConfigs v3+).
fn topic_doc(name: &str) -> &'static str {
    match name {
        "cleanup.policy" => "How old segments are removed: delete (by retention), compact (keep the latest value per key), or both.",
        "compression.type" => "Compression of stored batches; producer keeps the producer's codec.",
        "delete.retention.ms" => "How long tombstones of a compacted topic are kept.",
        "file.delete.delay.ms" => "How long a deleted segment's files linger before removal.",
        "flush.messages" => "Fsync the log after this many messages.",
        "flush.ms" => "Fsync the log when its oldest unflushed data is this old.",
        "index.interval.bytes" => "Log bytes between two offset index entries.",
        "max.compaction.lag.ms" => "The longest a record stays uncompacted.",
        "max.message.bytes" => "The largest record batch the topic accepts.",
        "message.downconversion.enable" => "Whether Fetch v0-3 (the old message formats) is answered with down-converted records; false: UNSUPPORTED_VERSION.",
        "message.timestamp.after.max.ms" => "How far in the future a CreateTime timestamp may be.",
        "message.timestamp.before.max.ms" => "How far in the past a CreateTime timestamp may be.",
        "message.timestamp.type" => "CreateTime (the producer's) or LogAppendTime (the broker's).",
        "min.cleanable.dirty.ratio" => "Dirty share of a log that triggers compaction.",
        "min.compaction.lag.ms" => "The shortest a record stays uncompacted.",
        "min.insync.replicas" => "Replicas that must acknowledge an acks=all write.",
        "preallocate" => "Preallocate segment files.",
        "retention.bytes" => "The most a partition keeps before old segments are deleted (-1: no limit).",
        "retention.ms" => "How long records are kept before their segment is deleted (-1: forever).",
        "segment.bytes" => "Size at which a new segment is rolled.",
        "segment.index.bytes" => "Size of a segment's offset index.",
        "segment.jitter.ms" => "Random jitter subtracted from segment.ms.",
        "segment.ms" => "Age at which a new segment is rolled.",
        "unclean.leader.election.enable" => "Whether an out-of-sync replica may become leader.",
        _ => "",
    }
}
