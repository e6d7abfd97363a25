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
use gregor_sdk::kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use gregor_sdk::kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct ListPartitionReassignments;

impl RawHandler for ListPartitionReassignments {
    fn describe() -> ApiInfo {
        api_info::<ListPartitionReassignmentsRequest>("ListPartitionReassignments", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ListPartitionReassignmentsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = ListPartitionReassignmentsResponse::default();
        if !cluster_allowed(Operation::Describe) {
            let error = ResponseError::ClusterAuthorizationFailed;
            response.error_code = error.code();
            response.error_message = Some(str_bytes(&error.to_string()));
        }
        // Kafka lists the requested partitions whose reassignment is
        // ongoing. A single node completes every reassignment the moment it
        // accepts it, so whatever `request.topics` names, none is ongoing.
        let _ = &request.topics;
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error, and the requested partitions.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: ListPartitionReassignmentsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// The request answered with `error_code`, listing each requested
/// partition with no replicas as Kafka's error response does.
fn error_response_for(
    request: &ListPartitionReassignmentsRequest,
    error_code: i16,
) -> ListPartitionReassignmentsResponse {
    let topics = request
        .topics
        .iter()
        .flatten()
        .map(|topic| {
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| OngoingPartitionReassignment::default().with_partition_index(index))
                .collect();
            OngoingTopicReassignment::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListPartitionReassignmentsResponse::default()
        .with_error_code(error_code)
        .with_error_message(None)
        .with_topics(topics)
}

gregor_sdk::export_raw_handler!(ListPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode() {
        let response = ListPartitionReassignmentsResponse::default();
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
    }

    #[test]
    fn error_responses_encode() {
        use gregor_sdk::kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
        let request = ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
            ListPartitionReassignmentsTopics::default()
                .with_name(str_bytes("a").into())
                .with_partition_indexes(vec![0, 1]),
        ]));
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(response.error_code, code);
        let shape: Vec<(String, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| p.partition_index);
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(shape, vec![("a".to_string(), vec![0, 1])]);
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
        let all = error_response_for(&ListPartitionReassignmentsRequest::default(), code);
        assert!(all.topics.is_empty());
    }
}
