//! OffsetCommit (ApiKey 8): a consumer stores its position, as Kafka's
//! `KafkaApis.handleOffsetCommitRequest`.
//!
//! - Versions 2-9 (Kafka 4 dropped v0-1). v2-4 carry a retention time, v6
//!   the leader epoch, v7 the group_instance_id.
//! - READ on the Group first (else every partition gets
//!   GROUP_AUTHORIZATION_FAILED), then READ on each Topic (else
//!   TOPIC_AUTHORIZATION_FAILED); a topic or partition that does not exist
//!   is UNKNOWN_TOPIC_OR_PARTITION. The rest goes to the coordinator, which
//!   checks generation and membership (a generation of -1 from a consumer
//!   without group management commits into an empty group) and stores the
//!   offsets with their metadata, returned as is by OffsetFetch.
//! - Answers keep the request's order of topics and partitions.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{
    self, group_allowed, opt_string, partition_counts, partition_error, OffsetCommit as Commit,
};
use gregor_sdk::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use gregor_sdk::kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct OffsetCommit;

impl RawHandler for OffsetCommit {
    fn describe() -> ApiInfo {
        api_info::<OffsetCommitRequest>("OffsetCommit", 2, 9)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: OffsetCommitRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        // One code per partition in request order; None: ask the coordinator.
        let mut codes: Vec<Vec<Option<i16>>> = Vec::new();
        if !group_allowed(Operation::Read, &request.group_id) {
            let denied = ResponseError::GroupAuthorizationFailed.code();
            for topic in &request.topics {
                codes.push(vec![Some(denied); topic.partitions.len()]);
            }
        } else {
            let names = || request.topics.iter().map(|t| t.name.as_str());
            let authorized = allowed_names(Operation::Read, ResourceType::Topic, names());
            let counts = partition_counts(names());
            let mut commits = Vec::new();
            for topic in &request.topics {
                let mut topic_codes = Vec::new();
                for partition in &topic.partitions {
                    let error = partition_error(
                        &authorized,
                        &counts,
                        &topic.name,
                        partition.partition_index,
                    );
                    if error.is_none() {
                        commits.push(Commit {
                            topic: topic.name.to_string(),
                            partition: partition.partition_index,
                            offset: partition.committed_offset,
                            leader_epoch: partition.committed_leader_epoch,
                            metadata: opt_string(&partition.committed_metadata),
                        });
                    }
                    topic_codes.push(error);
                }
                codes.push(topic_codes);
            }
            let results = if commits.is_empty() {
                Vec::new()
            } else {
                groups::commit_offsets(
                    &request.group_id,
                    request.generation_id_or_member_epoch,
                    &request.member_id,
                    opt_string(&request.group_instance_id).as_deref(),
                    request.retention_time_ms,
                    &commits,
                )
            };
            let mut results = results.into_iter();
            for code in codes.iter_mut().flatten().filter(|code| code.is_none()) {
                *code = Some(
                    results
                        .next()
                        .unwrap_or(ResponseError::UnknownServerError.code()),
                );
            }
        }
        let codes = codes
            .into_iter()
            .map(|topic| topic.into_iter().map(Option::unwrap_or_default).collect())
            .collect();
        let mut response = response(&request, codes);
        gregor_sdk::count_errors(
            response
                .topics
                .iter()
                .flat_map(|topic| &topic.partitions)
                .map(|partition| partition.error_code),
        );
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: OffsetCommitRequest = decode(&ctx, &body).ok()?;
        let codes = same_code(&request, error_code);
        encode(&ctx, &response(&request, codes))
    }
}

/// One code per partition, per topic, in request order.
type Codes = Vec<Vec<i16>>;

fn same_code(request: &OffsetCommitRequest, code: i16) -> Codes {
    request
        .topics
        .iter()
        .map(|topic| vec![code; topic.partitions.len()])
        .collect()
}

fn response(request: &OffsetCommitRequest, codes: Codes) -> OffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .zip(codes)
        .map(|(topic, codes)| {
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .zip(codes)
                        .map(|(p, code)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

gregor_sdk::export_raw_handler!(OffsetCommit);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use gregor_sdk::kafka_protocol::messages::TopicName;
    use gregor_sdk::kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 2..=9 {
            let partition = OffsetCommitResponsePartition::default().with_error_code(22);
            let topic = OffsetCommitResponseTopic::default().with_partitions(vec![partition]);
            let response = OffsetCommitResponse::default().with_topics(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let topic = |name: &'static str, partitions: &[i32]| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| OffsetCommitRequestPartition::default().with_partition_index(p))
                        .collect(),
                )
        };
        let request =
            OffsetCommitRequest::default().with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let code = ResponseError::UnknownServerError.code();
        let response = response(&request, same_code(&request, code));
        let shape: Vec<(&str, Vec<(i32, i16)>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code));
                (t.name.as_str(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![("a", vec![(0, code), (1, code)]), ("b", vec![(2, code)])]
        );
        for version in 2..=9 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
