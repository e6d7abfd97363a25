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

use gregor_sdk::authz::Operation;
use gregor_sdk::kafka_protocol::messages::delete_records_response::DeleteRecordsTopicResult;
use gregor_sdk::kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use gregor_sdk::partitions::{self, allowed_topics, TopicAnswer};
use gregor_sdk::AnswerError;
use gregor_sdk::{log, Handler, Reply, RequestContext, ResponseError, NONE};

struct DeleteRecords;

impl Handler for DeleteRecords {
    gregor_sdk::api!(DeleteRecordsRequest, 0..=2);

    fn handle(
        _ctx: &RequestContext,
        request: &DeleteRecordsRequest,
    ) -> Reply<DeleteRecordsResponse> {
        let authorized =
            allowed_topics::<DeleteRecordsTopicResult>(Operation::Delete, &request.topics);
        let denied = ResponseError::TopicAuthorizationFailed.code();
        let topics = partitions::answer_allowed::<DeleteRecordsTopicResult>(
            &request.topics,
            |name| authorized.contains(name),
            denied,
            |topic, partition| {
                let index = partition.partition_index;
                let outcome = log::delete_records(topic.name.as_str(), index, partition.offset);
                let result = DeleteRecordsTopicResult::error(partition, outcome.error.error_code());
                if outcome.error.error_code() == NONE {
                    result.with_low_watermark(outcome.low_watermark)
                } else {
                    result
                }
            },
        );
        DeleteRecordsResponse::default().with_topics(topics).into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error and no
    /// low watermark.
    fn failed(
        _: &RequestContext,
        request: &DeleteRecordsRequest,
        error_code: i16,
    ) -> DeleteRecordsResponse {
        DeleteRecordsResponse::default()
            .with_topics(partitions::failed(&request.topics, error_code))
    }
}

gregor_sdk::export_handler!(DeleteRecords);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let topic = DeleteRecordsTopic::default()
            .with_name(str_bytes("a").into())
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(1)
                .with_offset(5)]);
        let request = DeleteRecordsRequest::default().with_topics(vec![topic.clone()]);
        let failed = partitions::failed(&[topic], ResponseError::OffsetOutOfRange.code());
        assert_encodes_for_served_versions::<DeleteRecords>(
            &[request],
            &[DeleteRecordsResponse::default().with_topics(failed)],
        );
    }
}
