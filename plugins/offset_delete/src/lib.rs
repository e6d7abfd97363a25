//! OffsetDelete (ApiKey 47): delete a group's committed offsets for some
//! partitions, as Kafka's `KafkaApis.handleOffsetDeleteRequest`.
//!
//! - Version 0.
//! - DELETE on the Group, else GROUP_AUTHORIZATION_FAILED for the whole
//!   request; then READ on each Topic (else TOPIC_AUTHORIZATION_FAILED), and
//!   the topic and partition must exist (else UNKNOWN_TOPIC_OR_PARTITION).
//! - The coordinator refuses topics the group's members still subscribe to
//!   (GROUP_SUBSCRIBED_TO_TOPIC), or a whole non-empty group that is not a
//!   consumer group (NON_EMPTY_GROUP); a group that does not exist is
//!   GROUP_ID_NOT_FOUND. A group-level error answers only the partitions
//!   that failed before reaching the coordinator, as Kafka does.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error at the top level, no partitions.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, group_allowed, partition_counts, partition_error, TopicPartition};
use gregor_sdk::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use gregor_sdk::kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

struct OffsetDelete;

impl Handler for OffsetDelete {
    gregor_sdk::api!(OffsetDeleteRequest, 0..=0);

    fn handle(_ctx: &RequestContext, request: &OffsetDeleteRequest) -> Reply<OffsetDeleteResponse> {
        if group_allowed(Operation::Delete, &request.group_id) {
            delete(request)
        } else {
            OffsetDeleteResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code())
        }
        .into()
    }
}

/// Checks each partition and deletes the offsets of those that pass.
fn delete(request: &OffsetDeleteRequest) -> OffsetDeleteResponse {
    let names = || request.topics.iter().map(|t| t.name.as_str());
    let authorized = allowed_names(Operation::Read, ResourceType::Topic, names());
    let counts = partition_counts(names());
    // (topic, partition, code); None: ask the coordinator.
    let mut answers: Vec<(TopicName, i32, Option<i16>)> = Vec::new();
    let mut doomed = Vec::new();
    for topic in &request.topics {
        for partition in &topic.partitions {
            let index = partition.partition_index;
            let error = partition_error(&authorized, &counts, &topic.name, index);
            if error.is_none() {
                doomed.push(TopicPartition {
                    topic: topic.name.to_string(),
                    partition: index,
                });
            }
            answers.push((topic.name.clone(), index, error));
        }
    }
    let mut top = NONE;
    if !doomed.is_empty() {
        match groups::delete_offsets(&request.group_id, &doomed) {
            Ok(entries) => {
                let mut codes = gregor_sdk::codes(entries).into_iter();
                for (_, _, code) in answers.iter_mut().filter(|a| a.2.is_none()) {
                    *code = codes.next();
                }
            }
            Err(error) => top = error.code,
        }
    }
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for (name, index, code) in answers {
        let Some(code) = code else { continue };
        let partition = OffsetDeleteResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(code);
        match topics.iter_mut().find(|t| t.name == name) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(name)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    OffsetDeleteResponse::default()
        .with_error_code(top)
        .with_topics(topics)
}

gregor_sdk::export_handler!(OffsetDelete);

gregor_sdk::served_versions_test!(
    OffsetDelete,
    [OffsetDeleteRequest::default()],
    [OffsetDeleteResponse::default()
        .with_topics(vec![OffsetDeleteResponseTopic::default().with_partitions(
            vec![OffsetDeleteResponsePartition::default().with_error_code(86)]
        )])]
);
