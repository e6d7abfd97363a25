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

use gregor_sdk::authz::Operation;
use gregor_sdk::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use gregor_sdk::partitions::{self, allowed_topics};
use gregor_sdk::{txn, Handler, Reply, RequestContext, ResponseError};

struct DescribeProducers;

impl Handler for DescribeProducers {
    gregor_sdk::api!(DescribeProducersRequest, 0..=0);

    fn handle(
        _ctx: &RequestContext,
        request: &DescribeProducersRequest,
    ) -> Reply<DescribeProducersResponse> {
        let authorized = allowed_topics::<TopicResponse>(Operation::Read, &request.topics);
        let topics = partitions::answer_allowed::<TopicResponse>(
            &request.topics,
            |name| authorized.contains(name),
            ResponseError::TopicAuthorizationFailed.code(),
            |topic, &index| partition(topic.name.as_str(), index),
        );
        DescribeProducersResponse::default()
            .with_topics(topics)
            .into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn failed(
        _: &RequestContext,
        request: &DescribeProducersRequest,
        error_code: i16,
    ) -> DescribeProducersResponse {
        DescribeProducersResponse::default()
            .with_topics(partitions::failed(&request.topics, error_code))
    }
}

fn partition(topic: &str, index: i32) -> PartitionResponse {
    let response = PartitionResponse::default().with_partition_index(index);
    match txn::describe_producers(topic, index) {
        Err(error) => response.with_error_code(error.code),
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

gregor_sdk::export_handler!(DescribeProducers);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::describe_producers_request::TopicRequest;
    use gregor_sdk::kafka_protocol::messages::TopicName;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let topic = TopicRequest::default()
            .with_name(TopicName(str_bytes("a")))
            .with_partition_indexes(vec![0, 1]);
        let producer = ProducerState::default()
            .with_producer_id(ProducerId(7))
            .with_last_sequence(3);
        let partition = PartitionResponse::default().with_active_producers(vec![producer]);
        let answered = TopicResponse::default().with_partitions(vec![partition]);
        assert_encodes_for_served_versions::<DescribeProducers>(
            &[DescribeProducersRequest::default().with_topics(vec![topic])],
            &[DescribeProducersResponse::default().with_topics(vec![answered])],
        );
    }
}
