//! DescribeTransactions (ApiKey 65): the coordinator's view of transactional
//! ids (state, producer id and epoch, timeout, start time, partitions), as
//! Kafka's `KafkaApis.handleDescribeTransactionsRequest` and
//! `TransactionCoordinator.handleDescribeTransactions` (what
//! `kafka-transactions.sh describe` shows).
//!
//! - Version 0 (flexible).
//! - DESCRIBE on each TransactionalId, asked once for the request, else
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it. An empty id is
//!   INVALID_REQUEST; an id the coordinator does not know, or one being
//!   expired (Dead), is TRANSACTIONAL_ID_NOT_FOUND.
//! - The partitions are grouped by topic and, as in Kafka, only topics the
//!   principal may DESCRIBE are shown (the others are left out silently).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every transactional id with the error.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
    TransactionalId,
};
use gregor_sdk::txn::{self, by_topic, TransactionDescription};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct DescribeTransactions;

impl Handler for DescribeTransactions {
    gregor_sdk::api!(DescribeTransactionsRequest, 0..=0);

    fn handle(
        _ctx: &RequestContext,
        request: &DescribeTransactionsRequest,
    ) -> Reply<DescribeTransactionsResponse> {
        let ids = request.transactional_ids.iter().map(|id| id.as_str());
        let allowed = allowed_names(Operation::Describe, ResourceType::TransactionalId, ids);
        let described: Vec<(&TransactionalId, Result<TransactionDescription, i16>)> = request
            .transactional_ids
            .iter()
            .map(|id| {
                let answer = if !allowed.contains(id.as_str()) {
                    Err(ResponseError::TransactionalIdAuthorizationFailed.code())
                } else {
                    describe(id)
                };
                (id, answer)
            })
            .collect();
        let topics = described
            .iter()
            .filter_map(|(_, answer)| answer.as_ref().ok())
            .flat_map(|description| &description.partitions)
            .map(|partition| partition.topic.as_str());
        let visible = allowed_names(Operation::Describe, ResourceType::Topic, topics);
        let states = described.into_iter().map(|(id, answer)| match answer {
            Err(error_code) => failed(id, error_code),
            Ok(description) => transaction_state(id, description, |topic| visible.contains(topic)),
        });
        DescribeTransactionsResponse::default()
            .with_transaction_states(states.collect())
            .into()
    }

    /// Kafka's `getErrorResponse`: every transactional id with the error.
    fn failed(
        _: &RequestContext,
        request: &DescribeTransactionsRequest,
        error_code: i16,
    ) -> DescribeTransactionsResponse {
        let states = request
            .transactional_ids
            .iter()
            .map(|id| failed(id, error_code));
        DescribeTransactionsResponse::default().with_transaction_states(states.collect())
    }
}

/// The coordinator's answer for one authorized id.
fn describe(id: &TransactionalId) -> Result<TransactionDescription, i16> {
    if id.is_empty() {
        return Err(ResponseError::InvalidRequest.code());
    }
    match txn::describe_transaction(id) {
        // Dead: being expired, as good as gone (Kafka hides it too).
        Ok(description) if description.state == "Dead" => {
            Err(ResponseError::TransactionalIdNotFound.code())
        }
        answer => answer.map_err(|error| error.code),
    }
}

fn failed(id: &TransactionalId, error_code: i16) -> TransactionState {
    TransactionState::default()
        .with_transactional_id(id.clone())
        .with_error_code(error_code)
}

fn transaction_state(
    id: &TransactionalId,
    description: TransactionDescription,
    visible: impl Fn(&str) -> bool,
) -> TransactionState {
    let partitions = description
        .partitions
        .into_iter()
        .filter(|partition| visible(&partition.topic))
        .map(|partition| (partition.topic, partition.partition));
    let topics = by_topic(partitions)
        .into_iter()
        .map(|(topic, partitions)| {
            TopicData::default()
                .with_topic(TopicName(str_bytes(&topic)))
                .with_partitions(partitions)
        })
        .collect();
    TransactionState::default()
        .with_transactional_id(id.clone())
        .with_transaction_state(str_bytes(&description.state))
        .with_transaction_timeout_ms(description.timeout_ms)
        .with_transaction_start_time_ms(description.start_timestamp_ms)
        .with_producer_id(ProducerId(description.producer_id))
        .with_producer_epoch(description.producer_epoch)
        .with_topics(topics)
}

gregor_sdk::export_handler!(DescribeTransactions);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::txn::TopicPartition;

    #[test]
    fn partitions_are_grouped_by_topic_and_filtered() {
        let partition = |topic: &str, partition| TopicPartition {
            topic: topic.into(),
            partition,
        };
        let description = TransactionDescription {
            state: "Ongoing".into(),
            producer_id: 5,
            producer_epoch: 2,
            timeout_ms: 60000,
            start_timestamp_ms: 1000,
            partitions: vec![
                partition("a", 1),
                partition("secret", 0),
                partition("b", 0),
                partition("a", 0),
            ],
        };
        let id = TransactionalId(str_bytes("t"));
        let state = transaction_state(&id, description, |topic| topic != "secret");
        let topics: Vec<(String, Vec<i32>)> = state
            .topics
            .iter()
            .map(|t| (t.topic.to_string(), t.partitions.clone()))
            .collect();
        assert_eq!(
            topics,
            vec![("a".to_string(), vec![1, 0]), ("b".to_string(), vec![0])]
        );
        assert_eq!(state.transaction_state.as_str(), "Ongoing");
        assert_eq!(state.producer_id.0, 5);
        let response = DescribeTransactionsResponse::default()
            .with_transaction_states(vec![state, failed(&id, 53)]);
        let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![id]);
        assert_encodes_for_served_versions::<DescribeTransactions>(&[request], &[response]);
    }
}
