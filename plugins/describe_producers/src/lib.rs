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
//!   epoch, last sequence and last timestamp; the coordinator epoch and
//!   transaction start offset are -1: no producer has a transaction open.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use gregor_sdk::{
    api_info, decode, respond, txn, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

struct DescribeProducers;

impl Handler for DescribeProducers {
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
                let allowed = authorized.get(topic.name.as_str()) == Some(&true);
                let partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        if allowed {
                            partition(topic.name.as_str(), index)
                        } else {
                            PartitionResponse::default()
                                .with_partition_index(index)
                                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        }
                    })
                    .collect();
                TopicResponse::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
        respond(
            &ctx,
            &DescribeProducersResponse::default().with_topics(topics),
        )
    }
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

gregor_sdk::export_handler!(DescribeProducers);
