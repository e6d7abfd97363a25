//! CreateTopics (ApiKey 19): create topics, or with `validate_only` check
//! that they could be created, as Kafka's `handleCreateTopicsRequest`
//! (the KRaft controller's semantics).
//!
//! - CREATE on the Cluster allows every topic; otherwise CREATE is asked per
//!   topic, and a topic without it gets TOPIC_AUTHORIZATION_FAILED.
//! - A topic named more than once gets one INVALID_REQUEST ("Duplicate topic
//!   name."); `__cluster_metadata` may never be created.
//! - The host validates names, partition counts, the replication factor
//!   against the brokers and the configs, and answers Kafka's error codes
//!   (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, ...), passed on per topic
//!   with their message.
//! - Manual replica assignments go to the host as the request names them
//!   (`new-topic.replica-assignment`), which checks them as Kafka's
//!   controller does (registered brokers, each once, the same number per
//!   partition, partitions 0..n, num_partitions and replication_factor left
//!   at -1: else INVALID_REPLICA_ASSIGNMENT or INVALID_REQUEST) and places
//!   the replicas as they say.
//! - Kafka's controller caps, checked before anything is created, with
//!   `validate_only` too: if the topics it would consider (duplicates and
//!   unauthorized ones left out) ask for more than 10000 partitions, or the
//!   valid ones would write more than 10000 records (a topic, each
//!   partition, each config), every topic gets POLICY_VIOLATION with
//!   Kafka's message ("Excessively large number of partitions per
//!   request." / "Unable to perform excessively large batch operation.").
//! - v5+: the new topic's partition count, replication factor and configs
//!   (sorted, sensitive values hidden), only for a principal that may
//!   DESCRIBE_CONFIGS the topic; otherwise topic_config_error_code is
//!   TOPIC_AUTHORIZATION_FAILED. v7+: the topic id.
//! - The controller mutation quota (`controller_mutation_rate`, KIP-599)
//!   counts the new partitions (not with `validate_only`): from v6 a client
//!   whose quota is already exceeded gets THROTTLING_QUOTA_EXCEEDED for the
//!   topic, and a topic accepted is not throttled; older versions are
//!   always accepted and throttled once over the quota. The response
//!   carries the larger of that throttle time and the request quota's.
//! - Versions 0-7: Kafka 4 removed v0-1 (KIP-896); Gregor serves them
//!   through v2 for Kafka 3.x-era clients (see [`v0_1`]).
//! - Error response (a trap or timeout): every topic with the error, as
//!   Kafka's `CreateTopicsRequest.getErrorResponse`.

mod v0_1;

use gregor_sdk::AnswerError;
use std::collections::HashMap;

use gregor_sdk::authorize::{allowed_names, cluster_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::configs::source_code;
use gregor_sdk::ids::{str_bytes, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::create_topics_request::CreatableTopic;
use gregor_sdk::kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use gregor_sdk::metadata::{self, NewTopic, TopicInfo};
use gregor_sdk::quotas;
use gregor_sdk::request_caps;
use gregor_sdk::{Handler, KafkaError, Reply, RequestContext, ResponseError};

/// The KRaft metadata log's topic, which Kafka never lets a client create.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// The first version whose mutation quota is strict (KIP-599).
const STRICT_SINCE_VERSION: i16 = 6;

/// Kafka's message for THROTTLING_QUOTA_EXCEEDED (`Errors.THROTTLING_QUOTA_EXCEEDED.message()`).
const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

struct CreateTopics;

impl Handler for CreateTopics {
    gregor_sdk::api!(CreateTopicsRequest, 0..=7);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0_1::LEGACY);

    fn handle(ctx: &RequestContext, request: &CreateTopicsRequest) -> Reply<CreateTopicsResponse> {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for topic in &request.topics {
            *count.entry(topic.name.as_str()).or_default() += 1;
        }
        let names = || count.keys().copied();
        let creatable = (!cluster_allowed(Operation::Create))
            .then(|| allowed_names(Operation::Create, ResourceType::Topic, names()));
        let describable = allowed_names(Operation::DescribeConfigs, ResourceType::Topic, names());
        let may_create = |name: &str| creatable.as_ref().is_none_or(|c| c.contains(name));

        // Kafka's controller sees the request without duplicates and
        // topics the principal may not create, and bounds its partitions
        // before anything else: over the cap, every topic is refused.
        let default_partitions = default_partitions();
        let requested: usize = request
            .topics
            .iter()
            .filter(|t| count.get(t.name.as_str()) == Some(&1) && may_create(t.name.as_str()))
            .map(|t| {
                request_caps::requested_partitions(
                    t.num_partitions,
                    t.assignments.len(),
                    default_partitions,
                )
            })
            .fold(0, usize::saturating_add);
        if requested > request_caps::MAX_PARTITIONS_PER_BATCH {
            return refuse_all(request, request_caps::TOO_MANY_PARTITIONS);
        }

        // Validate every topic first: the records the valid ones would
        // write (a topic, its partitions, its configs) are bounded for the
        // request as a whole, validate_only or not, as Kafka's controller
        // does before it writes any.
        let mut checked = Vec::new();
        let mut records = 0usize;
        for topic in &request.topics {
            let name = topic.name.as_str();
            // Each name is answered once, at its first mention.
            let Some(mentions) = count.insert(name, 0) else {
                continue;
            };
            let reject = |error: ResponseError, message: &str| {
                Checked::Done(failed(topic, error.code(), Some(message)))
            };
            let outcome = match mentions {
                0 => continue,
                1 if name == CLUSTER_METADATA_TOPIC => reject(
                    ResponseError::InvalidRequest,
                    &format!("Creation of internal topic {name} is prohibited."),
                ),
                1 if !may_create(name) => reject(
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.",
                ),
                1 => match validate(topic) {
                    Ok((new_topic, info)) => {
                        records = records
                            .saturating_add(1 + info.partitions.len() + new_topic.configs.len());
                        Checked::Valid(topic, new_topic, info)
                    }
                    Err(error) if error.code == request_caps::POLICY_VIOLATION => {
                        let message = error
                            .message
                            .as_deref()
                            .unwrap_or(request_caps::TOO_MANY_RECORDS);
                        return refuse_all(request, message);
                    }
                    Err(error) => {
                        Checked::Done(failed(topic, error.code, error.message.as_deref()))
                    }
                },
                _ => reject(ResponseError::InvalidRequest, "Duplicate topic name."),
            };
            checked.push(outcome);
        }
        if records > request_caps::MAX_RECORDS_PER_USER_OP {
            return refuse_all(request, request_caps::TOO_MANY_RECORDS);
        }

        let mut response = CreateTopicsResponse::default();
        let mut mutation_throttle = 0;
        for outcome in checked {
            let result = match outcome {
                Checked::Done(result) => result,
                Checked::Valid(topic, new_topic, info) => create(
                    topic,
                    new_topic,
                    info,
                    request.validate_only,
                    ctx.api_version,
                    describable.contains(topic.name.as_str()),
                    &mut mutation_throttle,
                ),
            };
            response.topics.push(result);
        }
        // The SDK raises it to the request quota's.
        response.throttle_time_ms = mutation_throttle;
        response.into()
    }

    /// Kafka's `getErrorResponse`: every topic with the error.
    fn failed(
        _: &RequestContext,
        request: &CreateTopicsRequest,
        error_code: i16,
    ) -> CreateTopicsResponse {
        error_response_for(request, error_code, None)
    }
}

/// A topic of the request once validated: answered, or ready to create.
enum Checked<'a> {
    Done(CreatableTopicResult),
    Valid(&'a CreatableTopic, NewTopic, TopicInfo),
}

/// Every topic of the request (as named, duplicates too) answered with
/// `error_code`.
fn error_response_for(
    request: &CreateTopicsRequest,
    error_code: i16,
    message: Option<&str>,
) -> CreateTopicsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| failed(topic, error_code, message))
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

/// The whole request refused with POLICY_VIOLATION, as Kafka answers a
/// request over its caps (`CreateTopicsRequest.getErrorResponse`).
fn refuse_all(request: &CreateTopicsRequest, message: &str) -> Reply<CreateTopicsResponse> {
    error_response_for(request, request_caps::POLICY_VIOLATION, Some(message)).into()
}

/// The broker's `num.partitions`, which a topic asking for -1 gets.
fn default_partitions() -> i32 {
    metadata::broker_config("num.partitions")
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(1)
}

/// Checks one topic through the host without creating it.
fn validate(topic: &CreatableTopic) -> Result<(NewTopic, TopicInfo), KafkaError> {
    let new_topic = new_topic(topic);
    let checked = metadata::create_topic(&new_topic, true)?;
    Ok((new_topic, checked))
}

/// Creates one validated topic through the host (with `validate_only`,
/// answers with what validation found).
fn create(
    topic: &CreatableTopic,
    new_topic: NewTopic,
    checked: TopicInfo,
    validate_only: bool,
    version: i16,
    may_describe_configs: bool,
    mutation_throttle: &mut i32,
) -> CreatableTopicResult {
    let created = if validate_only {
        Ok(checked)
    } else {
        let partitions = u32::try_from(checked.partitions.len()).unwrap_or(u32::MAX);
        let answer = quotas::record_mutations(partitions, version >= STRICT_SINCE_VERSION);
        *mutation_throttle = (*mutation_throttle).max(answer.throttle_time_ms);
        if answer.error.error_code() != 0 {
            Err(KafkaError {
                code: answer.error.error_code(),
                message: Some(THROTTLED_MESSAGE.into()),
            })
        } else {
            metadata::create_topic(&new_topic, false)
        }
    };
    let info = match created {
        Ok(info) => info,
        Err(error) => return failed(topic, error.code, error.message.as_deref()),
    };
    let mut result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_topic_id(to_kafka_uuid(info.topic_id))
        .with_error_message(None);
    if version < 5 {
        return result;
    }
    if !may_describe_configs {
        result.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
        return result;
    }
    result.num_partitions = i32::try_from(info.partitions.len()).unwrap_or(i32::MAX);
    result.replication_factor = replication_factor(&info);
    result.configs = Some(if validate_only {
        requested_configs(topic)
    } else {
        topic_configs(topic.name.as_str())
    });
    result
}

/// The host's new-topic for a request topic, manual assignments as the
/// request names them.
fn new_topic(topic: &CreatableTopic) -> NewTopic {
    NewTopic {
        name: topic.name.to_string(),
        num_partitions: topic.num_partitions,
        replication_factor: topic.replication_factor,
        configs: topic
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
        replica_assignment: topic
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|id| id.0).collect(),
                )
            })
            .collect(),
    }
}

/// The replication factor of a created topic: the replica count of its
/// first partition, as Kafka reports it.
fn replication_factor(info: &TopicInfo) -> i16 {
    info.partitions
        .first()
        .and_then(|p| i16::try_from(p.replicas.len()).ok())
        .unwrap_or(-1)
}

/// The configs of a created topic, sorted by name as Kafka returns them;
/// sensitive values are not disclosed.
fn topic_configs(name: &str) -> Vec<CreatableTopicConfigs> {
    let mut entries = metadata::topic_configs(name).unwrap_or_default();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
        .into_iter()
        .map(|entry| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(&entry.name))
                .with_value(
                    entry
                        .value
                        .filter(|_| !entry.is_sensitive)
                        .map(|v| str_bytes(&v)),
                )
                .with_read_only(entry.read_only)
                .with_config_source(source_code(entry.source))
                .with_is_sensitive(entry.is_sensitive)
        })
        .collect()
}

/// With validate_only nothing is created, so the configs reported are the
/// ones the request sets (topic overrides).
fn requested_configs(topic: &CreatableTopic) -> Vec<CreatableTopicConfigs> {
    let mut configs: Vec<CreatableTopicConfigs> = topic
        .configs
        .iter()
        .map(|c| {
            CreatableTopicConfigs::default()
                .with_name(c.name.clone())
                .with_value(c.value.clone())
                .with_config_source(source_code(metadata::ConfigSource::DynamicTopicConfig))
        })
        .collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    configs
}

fn failed(topic: &CreatableTopic, error_code: i16, message: Option<&str>) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

gregor_sdk::export_handler!(CreateTopics);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_for_every_served_version() {
        use gregor_sdk::testing::assert_encodes_for_served_versions;
        let named = |name: &str| CreatableTopic::default().with_name(str_bytes(name).into());
        let request = CreateTopicsRequest::default().with_topics(vec![named("a"), named("b")]);
        let refused = failed(
            &named("a"),
            request_caps::POLICY_VIOLATION,
            Some("too large"),
        );
        let created = CreatableTopicResult::default()
            .with_name(str_bytes("b").into())
            .with_error_message(None);
        assert_encodes_for_served_versions::<CreateTopics>(
            &[request],
            &[CreateTopicsResponse::default().with_topics(vec![refused, created])],
        );
    }

    #[test]
    fn assignments_go_to_the_host_as_named() {
        use gregor_sdk::kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        use gregor_sdk::kafka_protocol::messages::BrokerId;
        let assignment = |partition, brokers: [i32; 2]| {
            CreatableReplicaAssignment::default()
                .with_partition_index(partition)
                .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
        };
        let topic = CreatableTopic::default()
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![assignment(1, [2, 1]), assignment(0, [1, 2])]);
        let new = new_topic(&topic);
        assert_eq!(new.replica_assignment, [(1, vec![2, 1]), (0, vec![1, 2])]);
        assert_eq!((new.num_partitions, new.replication_factor), (-1, -1));
    }
}
