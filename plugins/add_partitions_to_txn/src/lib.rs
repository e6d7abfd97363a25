//! AddPartitionsToTxn (ApiKey 24): a transactional producer registers the
//! partitions it is about to write, so that EndTxn knows where to put the
//! commit or abort markers. As Kafka's
//! `KafkaApis.handleAddPartitionsToTxnRequest` and
//! `TransactionCoordinator.handleAddPartitionsToTransaction`.
//!
//! - Versions 0-5; flexible from v3. v0-3 come from clients and carry one
//!   transaction; v4+ batch transactions and come from brokers (KIP-890
//!   verification, `verify_only`), so they need CLUSTER_ACTION on the
//!   Cluster (else only the top-level CLUSTER_AUTHORIZATION_FAILED) and no
//!   per-id or per-topic ACLs.
//! - v0-3: WRITE on the TransactionalId (else every partition
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each Topic, asked
//!   once; Kafka's internal topics are never authorized.
//! - A transaction is all or nothing: if any of its partitions is
//!   unauthorized (TOPIC_AUTHORIZATION_FAILED) or unknown
//!   (UNKNOWN_TOPIC_OR_PARTITION), nothing is added and the others get
//!   OPERATION_NOT_ATTEMPTED. Otherwise the host's `txn.add-partitions`
//!   checks the producer id and epoch and makes the transaction Ongoing
//!   (or, with `verify_only`, only checks the partitions are in it). v0-1
//!   clients get INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED.
//! - A partition named twice is answered once, as Kafka keeps a set.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: v0-3 every partition with the error, v4+ the
//!   top-level error alone.

use std::collections::HashSet;

use gregor_sdk::authorize::{allowed_names, cluster_allowed, transactional_id_allowed, Allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{partition_counts, partition_error};
use gregor_sdk::ids::{is_internal_topic, str_bytes};
use gregor_sdk::kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use gregor_sdk::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName,
};
use gregor_sdk::txn::{self, by_topic, fenced_for_version, PartitionCodes, TopicPartition};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// The first version that may carry PRODUCER_FENCED (KIP-588).
const FENCED_VERSION: i16 = 2;
/// The first version of the batched, broker-to-broker form.
const BATCHED_VERSION: i16 = 4;

struct AddPartitionsToTxn;

impl Handler for AddPartitionsToTxn {
    gregor_sdk::api!(AddPartitionsToTxnRequest, 0..=5);

    fn handle(
        ctx: &RequestContext,
        request: &AddPartitionsToTxnRequest,
    ) -> Reply<AddPartitionsToTxnResponse> {
        let version = ctx.api_version;
        if version < BATCHED_VERSION {
            let transaction = Transaction {
                id: request.v3_and_below_transactional_id.as_str(),
                producer_id: request.v3_and_below_producer_id.0,
                producer_epoch: request.v3_and_below_producer_epoch,
                verify_only: false,
                topics: &request.v3_and_below_topics,
            };
            AddPartitionsToTxnResponse::default()
                .with_results_by_topic_v3_and_below(add(&transaction, version))
        } else if !cluster_allowed(Operation::ClusterAction) {
            failed(
                request,
                version,
                ResponseError::ClusterAuthorizationFailed.code(),
            )
        } else {
            let results = request.transactions.iter().map(|t| {
                let transaction = Transaction {
                    id: t.transactional_id.as_str(),
                    producer_id: t.producer_id.0,
                    producer_epoch: t.producer_epoch,
                    verify_only: t.verify_only,
                    topics: &t.topics,
                };
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(t.transactional_id.clone())
                    .with_topic_results(add(&transaction, version))
            });
            AddPartitionsToTxnResponse::default().with_results_by_transaction(results.collect())
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: v0-3 every partition with the error,
    /// v4+ the top-level error alone.
    fn failed(
        ctx: &RequestContext,
        request: &AddPartitionsToTxnRequest,
        error_code: i16,
    ) -> AddPartitionsToTxnResponse {
        failed(request, ctx.api_version, error_code)
    }
}

/// One transaction of the request, whichever form it came in.
struct Transaction<'a> {
    id: &'a str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: &'a [AddPartitionsToTxnTopic],
}

/// Checks and adds one transaction's partitions; a result per partition.
fn add(transaction: &Transaction, version: i16) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions = distinct_partitions(transaction.topics);
    // v0-3 come from the producer itself; v4+ from a broker already
    // authorized for the whole cluster.
    let from_client = version < BATCHED_VERSION;
    if from_client && !transactional_id_allowed(Operation::Write, transaction.id) {
        let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
        return topic_results(partitions.into_iter().map(|p| (p, denied)));
    }
    let names = || partitions.iter().map(|(topic, _)| topic.as_str());
    let authorized: Allowed = if from_client {
        allowed_names(
            Operation::Write,
            ResourceType::Topic,
            names().filter(|name| !is_internal_topic(name)),
        )
    } else {
        names().map(str::to_string).collect()
    };
    let counts = partition_counts(names());
    let checks = partitions
        .iter()
        .map(|(topic, partition)| partition_error(&authorized, &counts, topic, *partition))
        .collect();
    let codes = match not_attempted(checks) {
        Some(codes) => codes,
        None if partitions.is_empty() => Vec::new(),
        None => {
            let asked: Vec<TopicPartition> = partitions
                .iter()
                .map(|(topic, partition)| TopicPartition {
                    topic: topic.clone(),
                    partition: *partition,
                })
                .collect();
            let results = PartitionCodes::new(txn::add_partitions(
                transaction.id,
                transaction.producer_id,
                transaction.producer_epoch,
                &asked,
                transaction.verify_only,
            ));
            partitions
                .iter()
                .map(|(topic, partition)| {
                    fenced_for_version(results.get(topic, *partition), version, FENCED_VERSION)
                })
                .collect()
        }
    };
    topic_results(partitions.into_iter().zip(codes))
}

/// Kafka's all-or-nothing rule: when any partition failed its checks, the
/// transaction is not touched and the partitions that passed get
/// OPERATION_NOT_ATTEMPTED. None when every partition passed.
fn not_attempted(checks: Vec<Option<i16>>) -> Option<Vec<i16>> {
    if checks.iter().all(Option::is_none) {
        return None;
    }
    let skipped = ResponseError::OperationNotAttempted.code();
    Some(
        checks
            .into_iter()
            .map(|check| check.unwrap_or(skipped))
            .collect(),
    )
}

/// The request's partitions, each once, in request order.
fn distinct_partitions(topics: &[AddPartitionsToTxnTopic]) -> Vec<(String, i32)> {
    let mut seen = HashSet::new();
    topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |&partition| (topic.name.to_string(), partition))
        })
        .filter(|key| seen.insert(key.clone()))
        .collect()
}

fn topic_results(
    codes: impl IntoIterator<Item = ((String, i32), i16)>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let results = codes.into_iter().map(|((topic, partition), code)| {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(partition)
            .with_partition_error_code(code);
        (topic, result)
    });
    by_topic(results)
        .into_iter()
        .map(|(topic, partitions)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(str_bytes(&topic)))
                .with_results_by_partition(partitions)
        })
        .collect()
}

/// The request answered with one error: per partition before v4, at the
/// top level from v4.
fn failed(
    request: &AddPartitionsToTxnRequest,
    version: i16,
    error_code: i16,
) -> AddPartitionsToTxnResponse {
    if version < BATCHED_VERSION {
        let partitions = distinct_partitions(&request.v3_and_below_topics);
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topic_results(
            partitions.into_iter().map(|p| (p, error_code)),
        ))
    } else {
        AddPartitionsToTxnResponse::default().with_error_code(error_code)
    }
}

gregor_sdk::export_handler!(AddPartitionsToTxn);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
    use gregor_sdk::kafka_protocol::messages::TransactionalId;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaResponse;

    fn topic(name: &str, partitions: &[i32]) -> AddPartitionsToTxnTopic {
        AddPartitionsToTxnTopic::default()
            .with_name(TopicName(str_bytes(name)))
            .with_partitions(partitions.to_vec())
    }

    #[test]
    fn one_failed_partition_stops_the_whole_transaction() {
        let denied = ResponseError::TopicAuthorizationFailed.code();
        let skipped = ResponseError::OperationNotAttempted.code();
        assert_eq!(
            not_attempted(vec![None, Some(denied), None]),
            Some(vec![skipped, denied, skipped])
        );
        assert_eq!(not_attempted(vec![None, None]), None);
        assert_eq!(not_attempted(Vec::new()), None);
    }

    #[test]
    fn partitions_named_twice_are_answered_once() {
        let topics = [
            topic("a", &[0, 1, 0]),
            topic("b", &[2]),
            topic("a", &[1, 3]),
        ];
        assert_eq!(
            distinct_partitions(&topics),
            vec![
                ("a".to_string(), 0),
                ("a".to_string(), 1),
                ("b".to_string(), 2),
                ("a".to_string(), 3),
            ]
        );
        let results = topic_results(distinct_partitions(&topics).into_iter().map(|p| (p, 0)));
        let shape: Vec<(String, Vec<i32>)> = results
            .iter()
            .map(|t| {
                let partitions = t.results_by_partition.iter().map(|p| p.partition_index);
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![("a".to_string(), vec![0, 1, 3]), ("b".to_string(), vec![2])]
        );
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_topics(vec![topic("a", &[0, 1])])
            .with_transactions(vec![AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(str_bytes("t")))
                .with_topics(vec![topic("a", &[0])])]);
        for version in 0..=5 {
            let response = failed(&request, version, code);
            if version < BATCHED_VERSION {
                assert_eq!(response.error_codes(), vec![0, code, code], "v{version}");
            } else {
                assert_eq!(response.error_codes(), vec![code], "v{version}");
            }
        }
        assert_encodes_for_served_versions::<AddPartitionsToTxn>(&[request], &[]);
    }

    #[test]
    fn batched_responses_encode() {
        let result = AddPartitionsToTxnResult::default()
            .with_transactional_id(TransactionalId(str_bytes("t")))
            .with_topic_results(topic_results([(("a".to_string(), 0), 0)]));
        let response =
            AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![result]);
        for version in 4..=5 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
