//! ListPartitionReassignments (ApiKey 46): the partition reassignments in
//! progress, as Kafka's `ControllerApis.handleListPartitionReassignments`
//! and the controller's `listPartitionReassignments` (KIP-455).
//!
//! - Version 0. DESCRIBE on the Cluster is required, else
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - Kafka lists only partitions whose reassignment is ongoing, for every
//!   topic (null topics) or the named existing ones, each with its
//!   replicas (target and leaving together) and the adding and removing
//!   ones; the host's `metadata.list-partition-reassignments` reads them
//!   from the cluster's metadata. On a single node a reassignment
//!   completes the moment it is accepted, so the list is always empty.
//! - Error response (a trap or timeout): the error, with the requested
//!   partitions listed and no replicas, as Kafka's
//!   `ListPartitionReassignmentsRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use gregor_sdk::metadata::{self, OngoingReassignment};
use gregor_sdk::partitions;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct ListPartitionReassignments;

impl Handler for ListPartitionReassignments {
    gregor_sdk::api!(ListPartitionReassignmentsRequest, 0..=0);

    fn handle(
        _ctx: &RequestContext,
        request: &ListPartitionReassignmentsRequest,
    ) -> Reply<ListPartitionReassignmentsResponse> {
        let mut response = ListPartitionReassignmentsResponse::default();
        if !cluster_allowed(Operation::Describe) {
            let error = ResponseError::ClusterAuthorizationFailed;
            response.error_code = error.code();
            response.error_message = Some(str_bytes(&error.to_string()));
            return response.into();
        }
        let requested: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|topics| {
            topics
                .iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let ongoing = metadata::list_partition_reassignments(requested.as_deref());
        response.topics = by_topic(ongoing);
        response.into()
    }

    /// Kafka's `getErrorResponse`: the error, with each requested
    /// partition listed and no replicas.
    fn failed(
        _: &RequestContext,
        request: &ListPartitionReassignmentsRequest,
        error_code: i16,
    ) -> ListPartitionReassignmentsResponse {
        let topics = request.topics.iter().flatten();
        ListPartitionReassignmentsResponse::default()
            .with_error_code(error_code)
            .with_error_message(None)
            .with_topics(partitions::failed::<OngoingTopicReassignment>(
                topics, error_code,
            ))
    }
}

/// The host's entries grouped by topic, in the order it gave them.
fn by_topic(ongoing: Vec<OngoingReassignment>) -> Vec<OngoingTopicReassignment> {
    let ids = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for entry in ongoing {
        let partition = OngoingPartitionReassignment::default()
            .with_partition_index(entry.partition)
            .with_replicas(ids(entry.replicas))
            .with_adding_replicas(ids(entry.adding_replicas))
            .with_removing_replicas(ids(entry.removing_replicas));
        match topics.last_mut() {
            Some(last) if last.name.as_str() == entry.topic => last.partitions.push(partition),
            _ => topics.push(
                OngoingTopicReassignment::default()
                    .with_name(str_bytes(&entry.topic).into())
                    .with_partitions(vec![partition]),
            ),
        }
    }
    topics
}

gregor_sdk::export_handler!(ListPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;

    fn request() -> ListPartitionReassignmentsRequest {
        ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
            ListPartitionReassignmentsTopics::default()
                .with_name(str_bytes("a").into())
                .with_partition_indexes(vec![0, 1]),
        ]))
    }

    gregor_sdk::served_versions_test!(
        ListPartitionReassignments,
        [request()],
        [ListPartitionReassignmentsResponse::default()]
    );

    /// Two reassignments of "a" and one of "b" in progress, whatever is
    /// asked (the host filters; see `requested`).
    struct Moving;

    fn entry(topic: &str, partition: i32) -> OngoingReassignment {
        OngoingReassignment {
            topic: topic.to_string(),
            partition,
            replicas: vec![2, 3, 1],
            adding_replicas: vec![3],
            removing_replicas: vec![1],
        }
    }

    impl FakeHost for Moving {
        fn list_partition_reassignments(
            &self,
            topics: Option<&[(String, Vec<i32>)]>,
        ) -> Vec<OngoingReassignment> {
            assert_eq!(
                topics,
                Some(&[("a".to_string(), vec![0, 1])][..]),
                "the request's topics reach the host"
            );
            vec![entry("a", 0), entry("a", 1), entry("b", 0)]
        }
    }

    #[test]
    fn the_ongoing_reassignments_are_listed_by_topic() {
        let handled = fake::handle::<ListPartitionReassignments>(Moving, 0, &request());
        let response = handled.response.expect("a response");
        assert_eq!(response.error_code, 0);
        let listed: Vec<(&str, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                (t.name.as_str(), partitions)
            })
            .collect();
        assert_eq!(listed, vec![("a", vec![0, 1]), ("b", vec![0])]);
        let first = &response.topics[0].partitions[0];
        let ids = |ids: &[BrokerId]| ids.iter().map(|id| id.0).collect::<Vec<_>>();
        assert_eq!(
            (
                ids(&first.replicas),
                ids(&first.adding_replicas),
                ids(&first.removing_replicas)
            ),
            (vec![2, 3, 1], vec![3], vec![1])
        );
    }

    struct Denied;

    impl FakeHost for Denied {
        fn authorize(&self, _: &Action) -> bool {
            false
        }
    }

    #[test]
    fn describe_on_the_cluster_is_required() {
        let denied = fake::handle::<ListPartitionReassignments>(Denied, 0, &request());
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let response = denied.response.expect("a response");
        assert_eq!((response.error_code, response.topics.len()), (code, 0));
        assert_eq!(denied.counted_errors, vec![code]);
    }
}
