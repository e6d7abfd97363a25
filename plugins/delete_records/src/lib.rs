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

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use gregor_sdk::log;
use gregor_sdk::{
    api_info, decode, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`.
const INVALID_LOW_WATERMARK: i64 = -1;

struct DeleteRecords;

impl Handler for DeleteRecords {
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
            let allowed = authorized.get(name) == Some(&true);
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
        respond(&ctx, &response)
    }
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

gregor_sdk::export_handler!(DeleteRecords);

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
}
