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

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use gregor_sdk::{
    api_info, decode, request_throttle_ms, respond, ApiInfo, Handler, Outcome, RequestContext,
    ResponseError,
};

struct ListPartitionReassignments;

impl Handler for ListPartitionReassignments {
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
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }
}

gregor_sdk::export_handler!(ListPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode() {
        let response = ListPartitionReassignmentsResponse::default();
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
    }
}
