//! DescribeProducers (ApiKey 61): the idempotent producers each partition
//! holds sequence state for, as Kafka's
//! `KafkaApis.handleDescribeProducersRequest` and
//! `ReplicaManager.activeProducerState` (what `kafka-transactions.sh
//! describe-producers` shows).
//!
//! - Version 0 (flexible).
//! - READ on each Topic, asked once for the whole request; partitions of
//!   unauthorized topics get TOPIC_AUTHORIZATION_FAILED.
//! - A partition this broker does not host is UNKNOWN_TOPIC_OR_PARTITION
//!   (the host's `txn.describe-producers`). Each producer comes with its
//!   epoch, last sequence, last timestamp and the first offset of its open
//!   transaction in the partition (-1 if none); the coordinator epoch is
//!   -1, as the markers Gregor writes carry none.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, txn, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct DescribeProducers;

impl RawHandler for DescribeProducers {
    fn describe() -> ApiInfo {
        api_info::<DescribeProducersRequest>("DescribeProducers", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DescribeProducersRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let names = request.topics.iter().map(|topic| topic.name.as_str());
        let authorized = allowed_names(Operation::Read, ResourceType::Topic, names);
        let topics = request
            .topics
            .iter()
            .map(|topic| {
                let allowed = authorized.contains(topic.name.as_str());
                let partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        if allowed {
                            partition(topic.name.as_str(), index)
                        } else {
                            partition_error(index, ResponseError::TopicAuthorizationFailed.code())
                        }
                    })
                    .collect();
                TopicResponse::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        let mut response = DescribeProducersResponse::default().with_topics(topics);
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: DescribeProducersRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(&request, error_code))
    }
}

fn partition_error(index: i32, error_code: i16) -> PartitionResponse {
    PartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(error_code)
}

/// The request answered with one error for every partition it names.
fn failed(request: &DescribeProducersRequest, error_code: i16) -> DescribeProducersResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| partition_error(index, error_code))
                .collect();
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn error_codes(response: &DescribeProducersResponse) -> Vec<i16> {
    response
        .topics
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| partition.error_code)
        .collect()
}

fn partition(topic: &str, index: i32) -> PartitionResponse {
    let response = PartitionResponse::default().with_partition_index(index);
    match txn::describe_producers(topic, index) {
        Err(error_code) => response.with_error_code(error_code),
        Ok(producers) => response.with_active_producers(
            producers
                .into_iter()
                .map(|producer| {
                    ProducerState::default()
                        .with_producer_id(ProducerId(producer.producer_id))
                        .with_producer_epoch(i32::from(producer.producer_epoch))
                        .with_last_sequence(producer.last_sequence)
                        .with_last_timestamp(producer.last_timestamp)
                        .with_coordinator_epoch(-1)
                        .with_current_txn_start_offset(producer.current_txn_start_offset)
                })
                .collect(),
        ),
    }
}

gregor_sdk::export_raw_handler!(DescribeProducers);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::describe_producers_request::TopicRequest;
    use gregor_sdk::kafka_protocol::messages::TopicName;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let topic = |name: &str, partitions: &[i32]| {
            TopicRequest::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partition_indexes(partitions.to_vec())
        };
        let request = DescribeProducersRequest::default()
            .with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let response = failed(&request, code);
        assert_eq!(error_codes(&response), vec![code, code, code]);
        let indexes: Vec<i32> = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.partition_index)
            .collect();
        assert_eq!(indexes, vec![0, 1, 2]);
        let encoded = response.encode(&mut Vec::new(), 0);
        assert!(encoded.is_ok(), "{encoded:?}");
    }
}
