//! DescribeTopicPartitions (ApiKey 75): topics and their partitions, a page
//! at a time (KIP-966), as Kafka's `DescribeTopicPartitionsRequestHandler`
//! and `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`.
//!
//! - Version 0. No topics named: every topic the principal may DESCRIBE
//!   (others silently left out); named topics without DESCRIBE get
//!   TOPIC_AUTHORIZATION_FAILED (with a zero id), unknown ones
//!   UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
//!   name).
//! - Pagination: topics in name order from the cursor's topic (and, in it,
//!   the cursor's partition), at most `response_partition_limit` partitions
//!   (capped by `max.request.partition.size.limit`, at least 1). When the
//!   limit cuts a topic, or is reached before the next topic, `next_cursor`
//!   says where to continue. A cursor whose topic is not among the named
//!   ones, or with a negative partition, is INVALID_REQUEST for every
//!   named topic.
//! - Partitions as Metadata reports them on a single node: this node
//!   leads every partition in epoch 0 and is its only replica and ISR; the
//!   ELR lists are empty. Each topic carries its authorized operations.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every named topic with the error.

use std::collections::BTreeSet;

use gregor_sdk::authorize::{allowed_names, authorized_operations};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::{str_bytes, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use gregor_sdk::metadata::{self, TopicInfo};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// Kafka's default `max.request.partition.size.limit`.
const DEFAULT_PARTITION_LIMIT: i32 = 2000;
const MAX_NAME_LENGTH: usize = 249;

struct DescribeTopicPartitions;

impl Handler for DescribeTopicPartitions {
    gregor_sdk::api!(DescribeTopicPartitionsRequest, 0..=0);

    fn handle(
        ctx: &RequestContext,
        request: &DescribeTopicPartitionsRequest,
    ) -> Reply<DescribeTopicPartitionsResponse> {
        match describe(request) {
            Ok(response) => response.into(),
            Err(error) => Self::failed(ctx, request, error.code()).into(),
        }
    }

    /// Kafka's `getErrorResponse`: every named topic with the error.
    fn failed(
        _: &RequestContext,
        request: &DescribeTopicPartitionsRequest,
        error_code: i16,
    ) -> DescribeTopicPartitionsResponse {
        let topics = request
            .topics
            .iter()
            .map(|topic| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(topic.name.clone()))
                    .with_error_code(error_code)
                    .with_is_internal(false)
            })
            .collect();
        DescribeTopicPartitionsResponse::default().with_topics(topics)
    }
}

fn describe(
    request: &DescribeTopicPartitionsRequest,
) -> Result<DescribeTopicPartitionsResponse, ResponseError> {
    let fetch_all = request.topics.is_empty();
    let cursor_topic = request
        .cursor
        .as_ref()
        .map_or(String::new(), |c| c.topic_name.to_string());
    let topics: BTreeSet<String> = if fetch_all {
        metadata::list_topics()
            .into_iter()
            .map(|t| t.name)
            .filter(|name| *name >= cursor_topic)
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.to_string())
            .filter(|name| *name >= cursor_topic)
            .collect()
    };
    if let Some(cursor) = &request.cursor {
        if !fetch_all && !topics.contains(cursor.topic_name.as_str()) {
            return Err(ResponseError::InvalidRequest);
        }
        if cursor.partition_index < 0 {
            return Err(ResponseError::InvalidRequest);
        }
    }
    let allowed = allowed_names(
        Operation::Describe,
        ResourceType::Topic,
        topics.iter().map(String::as_str),
    );
    let (authorized, unauthorized): (Vec<&String>, Vec<&String>) = topics
        .iter()
        .partition(|name| allowed.contains(name.as_str()));

    let configured = metadata::broker_config("max.request.partition.size.limit")
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(DEFAULT_PARTITION_LIMIT);
    let mut remaining = configured.min(request.response_partition_limit).max(1);
    let node = metadata::describe_cluster().controller_id;
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in authorized {
        if remaining <= 0 {
            // Every earlier topic is complete: continue at this one.
            response.next_cursor = Some(cursor(name, 0));
            break;
        }
        let start = if *name == cursor_topic {
            request.cursor.as_ref().map_or(0, |c| c.partition_index)
        } else {
            0
        };
        let Some(info) = metadata::topic_by_name(name) else {
            if !fetch_all {
                let error = if valid_name(name) {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::InvalidTopicException
                };
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(TopicName(str_bytes(name))))
                        .with_error_code(error.code()),
                );
            }
            continue;
        };
        let count = i32::try_from(info.partitions.len()).unwrap_or(i32::MAX);
        let upper = count.min(start.saturating_add(remaining));
        let partitions: Vec<DescribeTopicPartitionsResponsePartition> = (start..upper)
            .filter_map(|index| partition(&info, index, node))
            .collect();
        remaining -= i32::try_from(partitions.len()).unwrap_or(i32::MAX);
        response.topics.push(topic(&info, partitions));
        if upper < count {
            response.next_cursor = Some(cursor(name, upper));
            break;
        }
    }
    let names: Vec<String> = response
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let operations = authorized_operations(ResourceType::Topic, &names);
    for (topic, operations) in response
        .topics
        .iter_mut()
        .filter(|t| t.error_code == 0)
        .zip(operations)
    {
        topic.topic_authorized_operations = operations;
    }
    if !fetch_all {
        for name in unauthorized {
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_name(Some(TopicName(str_bytes(name))))
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
        }
    }
    Ok(response)
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(str_bytes(topic)))
        .with_partition_index(partition)
}

fn topic(
    info: &TopicInfo,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&info.name))))
        .with_topic_id(to_kafka_uuid(info.topic_id))
        .with_is_internal(info.is_internal)
        .with_partitions(partitions)
}

fn partition(
    info: &TopicInfo,
    index: i32,
    node: i32,
) -> Option<DescribeTopicPartitionsResponsePartition> {
    let partition = info.partitions.iter().find(|p| p.partition == index)?;
    let ids = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect::<Vec<_>>();
    Some(
        DescribeTopicPartitionsResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(if partition.leader_id >= 0 {
                partition.leader_id
            } else {
                node
            }))
            .with_leader_epoch(partition.leader_epoch)
            .with_replica_nodes(ids(&partition.replicas))
            .with_isr_nodes(ids(&partition.isr))
            .with_eligible_leader_replicas(Some(Vec::new()))
            .with_last_known_elr(Some(Vec::new()))
            .with_offline_replicas(ids(&partition.offline_replicas)),
    )
}

/// Kafka's topic name rules (`Topic.validate`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= MAX_NAME_LENGTH
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

gregor_sdk::export_handler!(DescribeTopicPartitions);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn names_are_checked_like_kafka() {
        assert!(valid_name("orders.v1_x-y"));
        assert!(!valid_name(".."));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"a".repeat(250)));
    }

    #[test]
    fn encodes_for_every_served_version() {
        let response = DescribeTopicPartitionsResponse::default()
            .with_topics(vec![DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(TopicName(str_bytes("t"))))
                .with_partitions(vec![
                    DescribeTopicPartitionsResponsePartition::default()
                        .with_eligible_leader_replicas(Some(Vec::new())),
                ])])
            .with_next_cursor(Some(cursor("t", 3)));
        let topic = |name: &str| TopicRequest::default().with_name(TopicName(str_bytes(name)));
        let request =
            DescribeTopicPartitionsRequest::default().with_topics(vec![topic("a"), topic("b")]);
        assert_encodes_for_served_versions::<DescribeTopicPartitions>(&[request], &[response]);
    }
}
