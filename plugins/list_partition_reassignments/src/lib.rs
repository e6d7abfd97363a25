//! ListPartitionReassignments (ApiKey 46): the partition reassignments in
//! progress, as Kafka's `ControllerApis.handleListPartitionReassignments`
//! and the controller's `listPartitionReassignments`.
//!
//! - Version 0. DESCRIBE on the Cluster is required, else
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - Kafka lists only partitions whose reassignment is ongoing, for every
//!   topic (null topics) or the named existing ones. On a single node a
//!   reassignment completes the moment it is accepted (its only valid
//!   target is the current replica), so none is ever ongoing and the list
//!   is empty.
//! - Error response (a trap or timeout): the error, with the requested
//!   partitions listed and no replicas, as Kafka's
//!   `ListPartitionReassignmentsRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::list_partition_reassignments_response::OngoingTopicReassignment;
use gregor_sdk::kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use gregor_sdk::partitions;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct ListPartitionReassignments;

impl Handler for ListPartitionReassignments {
    gregor_sdk::api!(ListPartitionReassignmentsRequest, 0..=0);

    fn handle(
        _ctx: &RequestContext,
        _request: &ListPartitionReassignmentsRequest,
    ) -> Reply<ListPartitionReassignmentsResponse> {
        let mut response = ListPartitionReassignmentsResponse::default();
        if !cluster_allowed(Operation::Describe) {
            let error = ResponseError::ClusterAuthorizationFailed;
            response.error_code = error.code();
            response.error_message = Some(str_bytes(&error.to_string()));
        }
        // Kafka lists the requested partitions whose reassignment is
        // ongoing. A single node completes every reassignment the moment it
        // accepts it, so whatever the request names, none is ongoing.
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

    struct Denied;

    impl FakeHost for Denied {
        fn authorize(&self, _: &Action) -> bool {
            false
        }
    }

    #[test]
    fn nothing_is_ever_ongoing_and_describe_is_required() {
        let allowed = fake::handle::<ListPartitionReassignments>(Allowed, 0, &request());
        let allowed = allowed.response.expect("a response");
        assert_eq!((allowed.error_code, allowed.topics.len()), (0, 0));
        let denied = fake::handle::<ListPartitionReassignments>(Denied, 0, &request());
        let code = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(denied.response.map(|r| r.error_code), Some(code));
        assert_eq!(denied.counted_errors, vec![code]);
    }

    struct Allowed;

    impl FakeHost for Allowed {}
}
