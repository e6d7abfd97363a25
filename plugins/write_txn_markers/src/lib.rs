//! WriteTxnMarkers (ApiKey 27): append commit or abort control batches to
//! partitions, as Kafka's `KafkaApis.handleWriteTxnMarkersRequest`. In Kafka
//! the transaction coordinator sends it to partition leaders at EndTxn, and
//! `kafka-transactions.sh abort` (Admin `abortTransaction`, KIP-664) sends
//! it to close a hanging transaction. Gregor's coordinator writes the
//! markers of partitions its broker leads through the host and sends the
//! others here, to their leaders, as Kafka's does; a marker for a
//! partition of `__consumer_offsets` ends the transaction's pending
//! offsets of that partition's groups (the host's `txn.write-markers`).
//!
//! - Versions 0-1. Kafka 4 dropped v0 (KIP-896), v1's fields without
//!   flexible encoding; Gregor serves it through v1 (see [`v0`]).
//! - ALTER or CLUSTER_ACTION on the Cluster (Kafka asks for ALTER first so
//!   an admin may abort), else every partition CLUSTER_AUTHORIZATION_FAILED.
//! - Per marker (one producer): a partition that does not exist is
//!   UNKNOWN_TOPIC_OR_PARTITION; the others go to the host's
//!   `txn.write-markers`, which appends the marker with the producer's epoch
//!   and the coordinator epoch. Results are grouped by producer id, as
//!   Kafka's response is (markers for the same producer merge).
//! - Exempt from request quotas, as in Kafka (a cluster action): the
//!   request is recorded as exempt, so it is neither counted nor muted, and
//!   the response has no throttle.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition of every marker with the error.

mod v0;

use std::collections::HashMap;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::groups::partition_counts;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use gregor_sdk::kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{
    ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use gregor_sdk::txn::{self, by_topic, PartitionCodes, TopicPartition};
use gregor_sdk::{quotas, Handler, Reply, RequestContext, ResponseError};

struct WriteTxnMarkers;

impl Handler for WriteTxnMarkers {
    gregor_sdk::api!(WriteTxnMarkersRequest, 0..=1);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0::LEGACY);

    fn handle(
        _ctx: &RequestContext,
        request: &WriteTxnMarkersRequest,
    ) -> Reply<WriteTxnMarkersResponse> {
        if cluster_allowed(Operation::Alter) || cluster_allowed(Operation::ClusterAction) {
            write(request)
        } else {
            failed(request, ResponseError::ClusterAuthorizationFailed.code())
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: every partition of every marker.
    fn failed(
        _: &RequestContext,
        request: &WriteTxnMarkersRequest,
        error_code: i16,
    ) -> WriteTxnMarkersResponse {
        failed(request, error_code)
    }

    /// Kafka's `sendResponseExemptThrottle`: a cluster action is exempt.
    fn throttle(_: &RequestContext, _: &WriteTxnMarkersRequest, _: &mut WriteTxnMarkersResponse) {
        quotas::record_request(true);
    }
}

/// One marker's partition and its outcome.
struct Written {
    producer_id: i64,
    topic: String,
    partition: i32,
    error_code: i16,
}

fn write(request: &WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let names = request
        .markers
        .iter()
        .flat_map(|marker| &marker.topics)
        .map(|topic| topic.name.as_str());
    let counts = partition_counts(names);
    let exists = |topic: &str, partition: i32| {
        counts
            .get(topic)
            .is_some_and(|count| (0..*count).contains(&partition))
    };
    let mut written = Vec::new();
    for marker in &request.markers {
        let partitions = marker_partitions(marker);
        let known: Vec<TopicPartition> = partitions
            .iter()
            .filter(|(topic, partition)| exists(topic, *partition))
            .map(|(topic, partition)| TopicPartition {
                topic: topic.clone(),
                partition: *partition,
            })
            .collect();
        let codes = if known.is_empty() {
            PartitionCodes::new(Vec::new())
        } else {
            PartitionCodes::new(txn::write_markers(
                marker.producer_id.0,
                marker.producer_epoch,
                marker.transaction_result,
                marker.coordinator_epoch,
                &known,
            ))
        };
        for (topic, partition) in partitions {
            let error_code = if exists(&topic, partition) {
                codes.get(&topic, partition)
            } else {
                ResponseError::UnknownTopicOrPartition.code()
            };
            written.push(Written {
                producer_id: marker.producer_id.0,
                topic,
                partition,
                error_code,
            });
        }
    }
    response(written)
}

fn marker_partitions(marker: &WritableTxnMarker) -> Vec<(String, i32)> {
    marker
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partition_indexes
                .iter()
                .map(move |&partition| (topic.name.to_string(), partition))
        })
        .collect()
}

fn failed(request: &WriteTxnMarkersRequest, error_code: i16) -> WriteTxnMarkersResponse {
    let written = request.markers.iter().flat_map(|marker| {
        marker_partitions(marker)
            .into_iter()
            .map(move |(topic, partition)| Written {
                producer_id: marker.producer_id.0,
                topic,
                partition,
                error_code,
            })
    });
    response(written)
}

/// Kafka's response shape: one result per producer id (first appearance
/// order), its partitions grouped by topic, a partition named twice
/// answered once with its last outcome (Kafka keeps a map per producer).
fn response(written: impl IntoIterator<Item = Written>) -> WriteTxnMarkersResponse {
    let mut producers: Vec<(i64, Vec<(String, i32)>)> = Vec::new();
    let mut producer_index: HashMap<i64, usize> = HashMap::new();
    let mut codes: HashMap<(i64, String, i32), i16> = HashMap::new();
    for w in written {
        let key = (w.producer_id, w.topic.clone(), w.partition);
        if codes.insert(key, w.error_code).is_some() {
            continue;
        }
        let index = *producer_index.entry(w.producer_id).or_insert_with(|| {
            producers.push((w.producer_id, Vec::new()));
            producers.len() - 1
        });
        producers[index].1.push((w.topic, w.partition));
    }
    let markers = producers
        .into_iter()
        .map(|(producer_id, partitions)| {
            let partitions = partitions.into_iter().map(|(topic, partition)| {
                let error_code = codes
                    .get(&(producer_id, topic.clone(), partition))
                    .copied()
                    .unwrap_or(ResponseError::UnknownServerError.code());
                let result = WritableTxnMarkerPartitionResult::default()
                    .with_partition_index(partition)
                    .with_error_code(error_code);
                (topic, result)
            });
            let topics = by_topic(partitions)
                .into_iter()
                .map(|(topic, partitions)| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(TopicName(str_bytes(&topic)))
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(ProducerId(producer_id))
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

gregor_sdk::export_handler!(WriteTxnMarkers);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::write_txn_markers_request::WritableTxnMarkerTopic;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn marker(producer_id: i64, topics: &[(&str, &[i32])]) -> WritableTxnMarker {
        WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(str_bytes(name)))
                            .with_partition_indexes(partitions.to_vec())
                    })
                    .collect(),
            )
    }

    /// Per producer, per topic, (partition, error code).
    type Shape = Vec<(i64, Vec<(String, Vec<(i32, i16)>)>)>;

    fn shape(response: &WriteTxnMarkersResponse) -> Shape {
        response
            .markers
            .iter()
            .map(|m| {
                let topics = m.topics.iter().map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.error_code));
                    (t.name.to_string(), partitions.collect())
                });
                (m.producer_id.0, topics.collect())
            })
            .collect()
    }

    #[test]
    fn markers_of_one_producer_merge_and_encode() {
        let request = WriteTxnMarkersRequest::default().with_markers(vec![
            marker(7, &[("a", &[0, 1])]),
            marker(8, &[("b", &[0])]),
            marker(7, &[("b", &[2]), ("a", &[1])]),
        ]);
        let response = failed(&request, 31);
        assert_eq!(
            shape(&response),
            vec![
                (
                    7,
                    vec![
                        ("a".to_string(), vec![(0, 31), (1, 31)]),
                        ("b".to_string(), vec![(2, 31)])
                    ]
                ),
                (8, vec![("b".to_string(), vec![(0, 31)])]),
            ]
        );
        assert_encodes_for_served_versions::<WriteTxnMarkers>(&[request], &[response]);
    }

    #[test]
    fn a_partition_named_twice_keeps_its_last_outcome() {
        let written = [0, 3].map(|error_code| Written {
            producer_id: 1,
            topic: "a".into(),
            partition: 0,
            error_code,
        });
        assert_eq!(
            shape(&response(written)),
            vec![(1, vec![("a".to_string(), vec![(0, 3)])])]
        );
    }
}
