//! DeleteRecords (ApiKey 21): move partitions' log start offsets forward,
//! as Kafka's `KafkaApis.handleDeleteRecordsRequest` and
//! `ReplicaManager.deleteRecords`.
//!
//! - Versions 0-2 (v2 flexible).
//! - DELETE on each Topic, asked once for the whole request; the partitions
//!   of an unauthorized topic get TOPIC_AUTHORIZATION_FAILED.
//! - Each partition goes to the host's `log.delete-records`: the offset -1
//!   means the high watermark; beyond the high watermark is
//!   OFFSET_OUT_OF_RANGE; a topic whose `cleanup.policy` lacks `delete` is
//!   POLICY_VIOLATION; an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
//!   Records below the new log start offset can no longer be fetched, and
//!   whole segments below it are deleted.
//! - The answer carries the partition's low watermark (its log start offset
//!   afterwards), -1 on error. On a single node it is final at once, so
//!   `timeout_ms` never expires.
//! - Error response (a trap or timeout): every partition with the error and
//!   no low watermark, as Kafka's `DeleteRecordsRequest.getErrorResponse`.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use gregor_sdk::log;
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`.
const INVALID_LOW_WATERMARK: i64 = -1;

struct DeleteRecords;

impl RawHandler for DeleteRecords {
    fn describe() -> ApiInfo {
        api_info::<DeleteRecordsRequest>("DeleteRecords", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DeleteRecordsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let names = request.topics.iter().map(|topic| topic.name.as_str());
        let authorized = allowed_names(Operation::Delete, ResourceType::Topic, names);

        let mut response = DeleteRecordsResponse::default();
        for topic in &request.topics {
            let name = topic.name.as_str();
            let allowed = authorized.contains(name);
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let index = partition.partition_index;
                    if !allowed {
                        return result(index, ResponseError::TopicAuthorizationFailed.code(), -1);
                    }
                    let outcome = log::delete_records(name, index, partition.offset);
                    result(index, outcome.error_code, outcome.low_watermark)
                })
                .collect();
            response.topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: DeleteRecordsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// Every partition of the request answered with `error_code`.
fn error_response_for(request: &DeleteRecordsRequest, error_code: i16) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    result(partition.partition_index, error_code, INVALID_LOW_WATERMARK)
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}

fn error_codes(response: &DeleteRecordsResponse) -> Vec<i16> {
    response
        .topics
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| partition.error_code)
        .collect()
}

fn result(index: i32, error_code: i16, low_watermark: i64) -> DeleteRecordsPartitionResult {
    DeleteRecordsPartitionResult::default()
        .with_partition_index(index)
        .with_error_code(error_code)
        .with_low_watermark(if error_code == 0 {
            low_watermark
        } else {
            INVALID_LOW_WATERMARK
        })
}

gregor_sdk::export_raw_handler!(DeleteRecords);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn errors_carry_no_low_watermark() {
        assert_eq!(result(3, 0, 42).low_watermark, 42);
        let failed = result(3, ResponseError::OffsetOutOfRange.code(), 42);
        assert_eq!(failed.low_watermark, INVALID_LOW_WATERMARK);
        assert_eq!(failed.partition_index, 3);
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=2 {
            let topic = DeleteRecordsTopicResult::default().with_partitions(vec![result(0, 0, 7)]);
            let response = DeleteRecordsResponse::default().with_topics(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_answer_every_partition_for_every_served_version() {
        use gregor_sdk::ids::str_bytes;
        use gregor_sdk::kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        let topic = |name: &str, partitions: &[i32]| {
            DeleteRecordsTopic::default()
                .with_name(str_bytes(name).into())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            DeleteRecordsPartition::default()
                                .with_partition_index(p)
                                .with_offset(5)
                        })
                        .collect(),
                )
        };
        let request = DeleteRecordsRequest::default()
            .with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(error_codes(&response), vec![code; 3]);
        let shape: Vec<(String, Vec<(i32, i64)>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.low_watermark));
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a".to_string(), vec![(0, -1), (1, -1)]),
                ("b".to_string(), vec![(2, -1)])
            ]
        );
        for version in 0..=2 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
