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
//! - Manual replica assignments must name registered brokers, each once, the
//!   same number per partition, for partitions 0..n, with num_partitions and
//!   replication_factor left at -1; anything else is INVALID_REPLICA_ASSIGNMENT
//!   or INVALID_REQUEST as in Kafka.
//! - v5+: the new topic's partition count, replication factor and configs
//!   (sorted, sensitive values hidden), only for a principal that may
//!   DESCRIBE_CONFIGS the topic; otherwise topic_config_error_code is
//!   TOPIC_AUTHORIZATION_FAILED. v7+: the topic id.

use std::collections::{BTreeSet, HashMap};

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
use gregor_sdk::{
    api_info, decode, respond, ApiInfo, Handler, KafkaError, Outcome, RequestContext,
    ResponseError,
};

/// The KRaft metadata log's topic, which Kafka never lets a client create.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

struct CreateTopics;

impl Handler for CreateTopics {
    fn describe() -> ApiInfo {
        api_info::<CreateTopicsRequest>("CreateTopics", 2, 7)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: CreateTopicsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut count: HashMap<&str, usize> = HashMap::new();
        for topic in &request.topics {
            *count.entry(topic.name.as_str()).or_default() += 1;
        }
        let names = || count.keys().copied();
        let creatable = (!cluster_allowed(Operation::Create))
            .then(|| allowed_names(Operation::Create, ResourceType::Topic, names()));
        let describable = allowed_names(Operation::DescribeConfigs, ResourceType::Topic, names());

        let mut response = CreateTopicsResponse::default();
        for topic in &request.topics {
            let name = topic.name.as_str();
            // Each name is answered once, at its first mention.
            let Some(mentions) = count.insert(name, 0) else {
                continue;
            };
            let result = match mentions {
                0 => continue,
                1 if name == CLUSTER_METADATA_TOPIC => {
                    let message = format!("Creation of internal topic {name} is prohibited.");
                    failed(topic, ResponseError::InvalidRequest, &message)
                }
                1 if creatable.as_ref().is_some_and(|c| c.get(name) != Some(&true)) => {
                    failed(topic, ResponseError::TopicAuthorizationFailed, "Authorization failed.")
                }
                1 => create(
                    topic,
                    request.validate_only,
                    ctx.api_version,
                    describable.get(name) == Some(&true),
                ),
                _ => failed(topic, ResponseError::InvalidRequest, "Duplicate topic name."),
            };
            response.topics.push(result);
        }
        respond(&ctx, &response)
    }
}

/// Creates one topic (or validates it) through the host.
fn create(
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
    may_describe_configs: bool,
) -> CreatableTopicResult {
    let info = match new_topic(topic)
        .and_then(|new_topic| metadata::create_topic(&new_topic, validate_only))
    {
        Ok(info) => info,
        Err(error) => {
            let mut result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_error_code(error.code)
                .with_error_message(error.message.as_deref().map(str_bytes));
            result.configs = Some(Vec::new());
            return result;
        }
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
        result.configs = Some(Vec::new());
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

/// The host's new-topic for a request topic. Manual assignments become a
/// partition count and replication factor once they are checked as Kafka's
/// controller checks them.
fn new_topic(topic: &CreatableTopic) -> Result<NewTopic, KafkaError> {
    let mut new_topic = NewTopic {
        name: topic.name.to_string(),
        num_partitions: topic.num_partitions,
        replication_factor: topic.replication_factor,
        configs: topic
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
    };
    if topic.assignments.is_empty() {
        return Ok(new_topic);
    }
    let invalid_request = |message: &str| error(ResponseError::InvalidRequest, message.to_string());
    if topic.replication_factor != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ));
    }
    if topic.num_partitions != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ));
    }
    let invalid = |message: String| error(ResponseError::InvalidReplicaAssignment, message);
    let registered: BTreeSet<i32> = metadata::describe_cluster()
        .brokers
        .iter()
        .map(|b| b.node_id)
        .collect();
    let mut partitions = BTreeSet::new();
    let mut replication_factor: Option<usize> = None;
    for assignment in &topic.assignments {
        let partition = assignment.partition_index;
        if !partitions.insert(partition) {
            return Err(invalid(format!(
                "Found multiple manual partition assignments for partition {partition}"
            )));
        }
        let mut brokers: Vec<i32> = assignment.broker_ids.iter().map(|id| id.0).collect();
        if brokers.is_empty() {
            return Err(invalid(
                "The manual partition assignment includes an empty replica list.".to_string(),
            ));
        }
        brokers.sort_unstable();
        if let Some(id) = brokers.iter().find(|id| !registered.contains(id)) {
            return Err(invalid(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if let Some(pair) = brokers.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {} more than once.",
                pair[0]
            )));
        }
        match replication_factor {
            Some(expected) if expected != brokers.len() => {
                return Err(invalid(format!(
                    "The manual partition assignment includes a partition with {} replica(s), but \
                     this is not consistent with previous partitions, which have {expected} replica(s).",
                    brokers.len()
                )));
            }
            _ => replication_factor = Some(brokers.len()),
        }
    }
    if !partitions.iter().copied().eq(0..partitions.len() as i32) {
        return Err(invalid(
            "partitions should be a consecutive 0-based integer sequence".to_string(),
        ));
    }
    new_topic.num_partitions = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
    new_topic.replication_factor = replication_factor
        .and_then(|n| i16::try_from(n).ok())
        .unwrap_or(i16::MAX);
    Ok(new_topic)
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
                .with_value(entry.value.filter(|_| !entry.is_sensitive).map(|v| str_bytes(&v)))
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

fn failed(topic: &CreatableTopic, code: ResponseError, message: &str) -> CreatableTopicResult {
    let mut result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_error_code(code.code())
        .with_error_message(Some(str_bytes(message)));
    result.configs = Some(Vec::new());
    result
}

fn error(code: ResponseError, message: String) -> KafkaError {
    KafkaError {
        code: code.code(),
        message: Some(message),
    }
}

gregor_sdk::export_handler!(CreateTopics);
