//! OffsetForLeaderEpoch (ApiKey 23): where a leader epoch ends in each
//! partition's log, as Kafka's `KafkaApis.handleOffsetForLeaderEpochRequest`
//! and `LeaderEpochFileCache.endOffsetFor`. Consumers use it after a leader
//! change to detect log truncation (KIP-320).
//!
//! - Versions 2-4 (Kafka 4 no longer serves v0-1).
//! - CLUSTER_ACTION on the Cluster allows every topic; otherwise DESCRIBE on
//!   each Topic, and unauthorized partitions get TOPIC_AUTHORIZATION_FAILED.
//! - Leader epochs on a single node: every partition has had one leader
//!   since it was created, in epoch 0 (the epoch every stored batch
//!   carries, and what Metadata reports), starting at the log start offset.
//!   So, as Kafka's epoch cache answers with one entry `(0, log start)`:
//!   epoch 0 ends at the log end offset; a later epoch is unknown (-1, -1);
//!   -1 is undefined (-1, -1); an earlier epoch ends where epoch 0 starts.
//! - A `current_leader_epoch` other than -1 is checked against epoch 0:
//!   newer is UNKNOWN_LEADER_EPOCH, older is FENCED_LEADER_EPOCH.
//! - Error response (a trap or timeout): every partition with the error and
//!   an undefined epoch and offset, as Kafka's
//!   `OffsetsForLeaderEpochRequest.getErrorResponse`.

use gregor_sdk::authorize::{allowed_names, cluster_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use gregor_sdk::{
    api_info, decode, encode, log, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError, NONE,
};

/// The only leader epoch a single node's partitions have.
const LEADER_EPOCH: i32 = 0;
/// Kafka's NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH.
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_OFFSET: i64 = -1;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const READ_UNCOMMITTED: i8 = 0;

struct OffsetForLeaderEpoch;

impl RawHandler for OffsetForLeaderEpoch {
    fn describe() -> ApiInfo {
        api_info::<OffsetForLeaderEpochRequest>("OffsetForLeaderEpoch", 2, 4)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: OffsetForLeaderEpochRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let all_allowed = cluster_allowed(Operation::ClusterAction);
        let allowed = (!all_allowed).then(|| {
            let names = request.topics.iter().map(|t| t.topic.as_str());
            allowed_names(Operation::Describe, ResourceType::Topic, names)
        });
        let mut response = OffsetForLeaderEpochResponse::default();
        for topic in &request.topics {
            let name = topic.topic.as_str();
            let authorized = allowed
                .as_ref()
                .is_none_or(|allowed| allowed.contains(name));
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    if authorized {
                        end_offset(name, partition)
                    } else {
                        let denied = ResponseError::TopicAuthorizationFailed.code();
                        error(partition.partition, denied)
                    }
                })
                .collect();
            response.topics.push(
                OffsetForLeaderTopicResult::default()
                    .with_topic(topic.topic.clone())
                    .with_partitions(partitions),
            );
        }
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: OffsetForLeaderEpochRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// Every partition of the request answered with `error_code`.
fn error_response_for(
    request: &OffsetForLeaderEpochRequest,
    error_code: i16,
) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| error(partition.partition, error_code))
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

fn error_codes(response: &OffsetForLeaderEpochResponse) -> Vec<i16> {
    response
        .topics
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| partition.error_code)
        .collect()
}

/// A partition answered with an error and an undefined epoch and offset.
fn error(partition: i32, error_code: i16) -> EpochEndOffset {
    EpochEndOffset::default()
        .with_partition(partition)
        .with_error_code(error_code)
        .with_leader_epoch(UNDEFINED_EPOCH)
        .with_end_offset(UNDEFINED_OFFSET)
}

fn end_offset(topic: &str, partition: &OffsetForLeaderPartition) -> EpochEndOffset {
    let index = partition.partition;
    let current = partition.current_leader_epoch;
    if current != UNDEFINED_EPOCH {
        if current > LEADER_EPOCH {
            return error(index, ResponseError::UnknownLeaderEpoch.code());
        }
        if current < LEADER_EPOCH {
            return error(index, ResponseError::FencedLeaderEpoch.code());
        }
    }
    let end = log::list_offset(topic, index, LATEST, READ_UNCOMMITTED);
    if end.error_code != NONE {
        return error(index, end.error_code);
    }
    let (epoch, offset) = match epoch_end(partition.leader_epoch, end.offset) {
        EpochEnd::Known(epoch, offset) => (epoch, offset),
        EpochEnd::StartOfFirstEpoch(epoch) => {
            let start = log::list_offset(topic, index, EARLIEST, READ_UNCOMMITTED);
            (
                epoch,
                if start.error_code == NONE {
                    start.offset
                } else {
                    0
                },
            )
        }
    };
    EpochEndOffset::default()
        .with_partition(index)
        .with_error_code(NONE)
        .with_leader_epoch(epoch)
        .with_end_offset(offset)
}

#[derive(Debug, PartialEq, Eq)]
enum EpochEnd {
    Known(i32, i64),
    /// An epoch before the first one: it ends where the first one starts.
    StartOfFirstEpoch(i32),
}

/// Kafka's `LeaderEpochFileCache.endOffsetFor` over the single entry
/// (epoch 0, log start offset).
fn epoch_end(requested: i32, log_end_offset: i64) -> EpochEnd {
    if requested == UNDEFINED_EPOCH || requested > LEADER_EPOCH {
        EpochEnd::Known(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    } else if requested == LEADER_EPOCH {
        EpochEnd::Known(LEADER_EPOCH, log_end_offset)
    } else {
        EpochEnd::StartOfFirstEpoch(requested)
    }
}

gregor_sdk::export_raw_handler!(OffsetForLeaderEpoch);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn epochs_end_as_kafkas_cache_says() {
        assert_eq!(epoch_end(0, 42), EpochEnd::Known(0, 42));
        assert_eq!(epoch_end(1, 42), EpochEnd::Known(-1, -1));
        assert_eq!(epoch_end(-1, 42), EpochEnd::Known(-1, -1));
        assert_eq!(epoch_end(-3, 42), EpochEnd::StartOfFirstEpoch(-3));
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 2..=4 {
            let topic = OffsetForLeaderTopicResult::default()
                .with_partitions(vec![error(0, ResponseError::FencedLeaderEpoch.code())]);
            let response = OffsetForLeaderEpochResponse::default().with_topics(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_answer_every_partition_for_every_served_version() {
        use gregor_sdk::ids::str_bytes;
        use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic;
        let topic = |name: &str, partitions: &[i32]| {
            OffsetForLeaderTopic::default()
                .with_topic(str_bytes(name).into())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            OffsetForLeaderPartition::default()
                                .with_partition(p)
                                .with_leader_epoch(0)
                        })
                        .collect(),
                )
        };
        let request = OffsetForLeaderEpochRequest::default()
            .with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(error_codes(&response), vec![code; 3]);
        let shape: Vec<(String, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| p.partition);
                (t.topic.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])]
        );
        let undefined = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| (p.leader_epoch, p.end_offset) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET));
        assert!(undefined);
        for version in 2..=4 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
