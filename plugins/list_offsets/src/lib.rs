//! ListOffsets (ApiKey 2): the offset for a timestamp, or the earliest /
//! latest / max-timestamp offset, of each partition, as Kafka's
//! `KafkaApis.handleListOffsetRequest` (v1 and above) and
//! `ReplicaManager.fetchOffset`.
//!
//! - Versions 1-10 (Kafka 4 no longer serves v0).
//! - DESCRIBE on each Topic, asked once for the whole request; unauthorized
//!   partitions get TOPIC_AUTHORIZATION_FAILED.
//! - A partition named twice in a request is INVALID_REQUEST (each time), and
//!   a special timestamp newer than the request version is
//!   UNSUPPORTED_VERSION: -1 latest and -2 earliest from v1, -3 max timestamp
//!   from v7, -4 earliest local from v8, -5 latest tiered from v9.
//! - Everything else goes to the host's `log.list-offset` with the request's
//!   isolation level. A found offset carries the leader epoch (v4+): always 0
//!   on our single node, whose partitions never change leader.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error, offset and
//!   timestamp -1.

use std::collections::HashSet;

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::list_offsets_request::ListOffsetsTopic;
use gregor_sdk::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse as PartitionResponse, ListOffsetsTopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use gregor_sdk::log::{self, OffsetAnswer};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError, NONE,
};

/// The leader epoch of every partition on a single node.
const LEADER_EPOCH: i32 = 0;

struct ListOffsets;

impl RawHandler for ListOffsets {
    fn describe() -> ApiInfo {
        api_info::<ListOffsetsRequest>("ListOffsets", 1, 10)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ListOffsetsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let version = ctx.api_version;
        let names = request.topics.iter().map(|topic| topic.name.as_str());
        let authorized = allowed_names(Operation::Describe, ResourceType::Topic, names);
        let duplicates = duplicate_partitions(&request.topics);

        let mut response = ListOffsetsResponse::default();
        for topic in &request.topics {
            let name = topic.name.as_str();
            let topic_authorized = authorized.contains(name);
            let partitions = topic.partitions.iter().map(|partition| {
                let (index, timestamp) = (partition.partition_index, partition.timestamp);
                if !topic_authorized {
                    partition_error(index, ResponseError::TopicAuthorizationFailed.code())
                } else if duplicates.contains(&(name, index)) {
                    partition_error(index, ResponseError::InvalidRequest.code())
                } else if !timestamp_supported(timestamp, version) {
                    partition_error(index, ResponseError::UnsupportedVersion.code())
                } else {
                    let answer = log::list_offset(name, index, timestamp, request.isolation_level);
                    partition_answer(index, version, answer)
                }
            });
            response.topics.push(
                ListOffsetsTopicResponse::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions.collect()),
            );
        }
        gregor_sdk::count_errors(
            response
                .topics
                .iter()
                .flat_map(|topic| topic.partitions.iter().map(|p| p.error_code)),
        );
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: ListOffsetsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(&request, error_code))
    }
}

/// The request answered with one error for every partition it names.
fn failed(request: &ListOffsetsRequest, error_code: i16) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| partition_error(partition.partition_index, error_code))
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// The partitions a request names more than once, as Kafka's
/// `ListOffsetsRequest.duplicatePartitions`.
fn duplicate_partitions(topics: &[ListOffsetsTopic]) -> HashSet<(&str, i32)> {
    let mut seen = HashSet::new();
    topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.as_str();
            topic
                .partitions
                .iter()
                .map(move |p| (name, p.partition_index))
        })
        .filter(|partition| !seen.insert(*partition))
        .collect()
}

/// Whether the request version knows this timestamp: any time in ms, or a
/// special (negative) one from the version that introduced it.
fn timestamp_supported(timestamp: i64, version: i16) -> bool {
    let since = match timestamp {
        0.. => return true,
        -2..=-1 => 1,
        -3 => 7,
        -4 => 8,
        -5 => 9,
        _ => return false,
    };
    version >= since
}

fn partition_answer(index: i32, version: i16, answer: OffsetAnswer) -> PartitionResponse {
    let error_code = offset_error_for_version(version, answer.error_code);
    if error_code != NONE {
        return partition_error(index, error_code);
    }
    let found = answer.offset >= 0;
    let leader_epoch = if found && version >= 4 {
        LEADER_EPOCH
    } else {
        -1
    };
    PartitionResponse::default()
        .with_partition_index(index)
        .with_timestamp(answer.timestamp)
        .with_offset(answer.offset)
        .with_leader_epoch(leader_epoch)
}

/// OFFSET_NOT_AVAILABLE arrived in v5; older clients get the retriable
/// LEADER_NOT_AVAILABLE instead, as Kafka sends them.
fn offset_error_for_version(version: i16, error_code: i16) -> i16 {
    if version < 5 && error_code == ResponseError::OffsetNotAvailable.code() {
        ResponseError::LeaderNotAvailable.code()
    } else {
        error_code
    }
}

/// A partition without an offset, as Kafka's `buildErrorResponse`.
fn partition_error(index: i32, error_code: i16) -> PartitionResponse {
    PartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(error_code)
        .with_timestamp(-1)
        .with_offset(-1)
}

gregor_sdk::export_raw_handler!(ListOffsets);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
    use gregor_sdk::kafka_protocol::protocol::{Encodable, StrBytes};

    fn topic(name: &'static str, partitions: &[i32]) -> ListOffsetsTopic {
        ListOffsetsTopic::default()
            .with_name(StrBytes::from_static_str(name).into())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| ListOffsetsPartition::default().with_partition_index(p))
                    .collect(),
            )
    }

    #[test]
    fn finds_partitions_named_twice() {
        let topics = [
            topic("a", &[0, 1, 0]),
            topic("b", &[0]),
            topic("a", &[1, 2]),
        ];
        let duplicates = duplicate_partitions(&topics);
        assert_eq!(duplicates, HashSet::from([("a", 0), ("a", 1)]));
    }

    #[test]
    fn special_timestamps_need_their_version() {
        assert!(timestamp_supported(1_700_000_000_000, 1));
        assert!(timestamp_supported(-1, 1) && timestamp_supported(-2, 1));
        assert!(!timestamp_supported(-3, 6) && timestamp_supported(-3, 7));
        assert!(!timestamp_supported(-4, 7) && timestamp_supported(-4, 8));
        assert!(!timestamp_supported(-5, 8) && timestamp_supported(-5, 9));
        assert!(!timestamp_supported(-6, 10));
    }

    #[test]
    fn answers_map_like_kafka() {
        let answer = |error_code, offset| OffsetAnswer {
            error_code,
            offset,
            timestamp: 5,
        };
        let found = partition_answer(1, 4, answer(NONE, 42));
        assert_eq!(
            (found.offset, found.timestamp, found.leader_epoch),
            (42, 5, LEADER_EPOCH)
        );
        assert_eq!(partition_answer(1, 3, answer(NONE, 42)).leader_epoch, -1);
        assert_eq!(partition_answer(1, 4, answer(NONE, -1)).leader_epoch, -1);
        let unavailable = ResponseError::OffsetNotAvailable.code();
        let old = partition_answer(1, 4, answer(unavailable, 42));
        assert_eq!(old.error_code, ResponseError::LeaderNotAvailable.code());
        assert_eq!((old.offset, old.timestamp), (-1, -1));
        assert_eq!(
            partition_answer(1, 5, answer(unavailable, 42)).error_code,
            unavailable
        );
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 1..=10 {
            let answer = OffsetAnswer {
                error_code: NONE,
                offset: 42,
                timestamp: 5,
            };
            let partitions = vec![
                partition_answer(0, version, answer),
                partition_error(1, ResponseError::InvalidRequest.code()),
            ];
            let topic = ListOffsetsTopicResponse::default().with_partitions(partitions);
            let response = ListOffsetsResponse::default().with_topics(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request =
            ListOffsetsRequest::default().with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let response = failed(&request, code);
        let shape: Vec<(&str, Vec<(i32, i16, i64, i64)>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code, p.offset, p.timestamp));
                (t.name.as_str(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a", vec![(0, code, -1, -1), (1, code, -1, -1)]),
                ("b", vec![(2, code, -1, -1)])
            ]
        );
        for version in 1..=10 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
