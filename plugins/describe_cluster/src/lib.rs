//! DescribeCluster (ApiKey 60): the cluster id, the brokers and the
//! controller as clients see them, as Kafka's
//! `KafkaApis.handleDescribeCluster` and `AuthHelper.computeDescribeClusterResponse`.
//!
//! - Versions 0-2. No authorization is needed to describe the cluster;
//!   with `include_cluster_authorized_operations` the response carries the
//!   operations the principal may perform on the Cluster if it may
//!   DESCRIBE the Cluster, 0 if not (Kafka's `AuthHelper`, as Metadata),
//!   else Kafka's "not requested" value (i32::MIN).
//! - v1+: a broker answers `endpoint_type` BROKER (1); asking it for
//!   controllers (2) is UNSUPPORTED_ENDPOINT_TYPE.
//! - The broker list is this node on the listener the request came in on;
//!   a KRaft broker reports a live broker as the controller id (clients
//!   cannot reach the controller quorum), here itself. v2 brokers are
//!   never fenced while they answer.
//! - Error response (a trap or timeout): the error and no brokers, as
//!   Kafka's `DescribeClusterRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_authorized_operations;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse,
};
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

/// Kafka's `EndpointType` ids.
const BROKER_ENDPOINT: i8 = 1;
/// Authorized operations when the client did not ask for them.
const NOT_REQUESTED: i32 = i32::MIN;

struct DescribeCluster;

impl Handler for DescribeCluster {
    gregor_sdk::api!(DescribeClusterRequest, 0..=2);

    fn handle(
        ctx: &RequestContext,
        request: &DescribeClusterRequest,
    ) -> Reply<DescribeClusterResponse> {
        let mut response = empty();
        // v0 requests carry no endpoint type and mean brokers.
        if ctx.api_version >= 1 && request.endpoint_type != BROKER_ENDPOINT {
            let wanted = match request.endpoint_type {
                2 => "CONTROLLER",
                _ => "UNKNOWN",
            };
            response.error_code = ResponseError::UnsupportedEndpointType.code();
            response.error_message = Some(str_bytes(&format!(
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type {wanted}"
            )));
            return response.into();
        }
        let cluster = metadata::describe_cluster();
        response.cluster_id = str_bytes(&cluster.cluster_id);
        response.controller_id = BrokerId(cluster.controller_id);
        response.brokers = cluster
            .brokers
            .iter()
            .map(|broker| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(broker.node_id))
                    .with_host(str_bytes(&broker.host))
                    .with_port(broker.port)
                    .with_rack(broker.rack.as_deref().map(str_bytes))
                    .with_is_fenced(false)
            })
            .collect();
        if request.include_cluster_authorized_operations {
            response.cluster_authorized_operations = cluster_authorized_operations();
        }
        response.into()
    }

    /// Kafka's `getErrorResponse`: the error, no brokers.
    fn failed(
        _: &RequestContext,
        _: &DescribeClusterRequest,
        error_code: i16,
    ) -> DescribeClusterResponse {
        empty().with_error_code(error_code)
    }
}

/// A broker's answer with no cluster in it yet.
fn empty() -> DescribeClusterResponse {
    DescribeClusterResponse::default()
        .with_endpoint_type(BROKER_ENDPOINT)
        .with_cluster_authorized_operations(NOT_REQUESTED)
}

gregor_sdk::export_handler!(DescribeCluster);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::{Action, Operation};
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let response = DescribeClusterResponse::default()
            .with_cluster_id(str_bytes("abc"))
            .with_brokers(vec![DescribeClusterBroker::default()
                .with_broker_id(BrokerId(1))
                .with_host(str_bytes("127.0.0.1"))
                .with_port(9092)]);
        assert_encodes_for_served_versions::<DescribeCluster>(
            &[DescribeClusterRequest::default().with_include_cluster_authorized_operations(true)],
            &[response],
        );
    }

    /// A single node whose principal may perform only this operation.
    struct Node(Operation);

    impl FakeHost for Node {
        fn authorize(&self, action: &Action) -> bool {
            action.operation == self.0
        }
        fn describe_cluster(&self) -> metadata::Cluster {
            fake::single_node_cluster()
        }
    }

    #[test]
    fn the_node_describes_itself_with_the_operations_asked_for() {
        let request = DescribeClusterRequest::default()
            .with_endpoint_type(BROKER_ENDPOINT)
            .with_include_cluster_authorized_operations(true);
        let handled = fake::handle::<DescribeCluster>(Node(Operation::Describe), 1, &request);
        let response = handled.response.expect("a response");
        let ids: Vec<i32> = response.brokers.iter().map(|b| b.broker_id.0).collect();
        assert_eq!((response.controller_id.0, ids), (1, vec![1]));
        let describe = 1 << gregor_sdk::authorize::operation_code(Operation::Describe);
        assert_eq!(response.cluster_authorized_operations, describe);
        let plain = request.with_include_cluster_authorized_operations(false);
        let response =
            fake::handle::<DescribeCluster>(Node(Operation::Describe), 1, &plain).response;
        let operations = response.map(|r| r.cluster_authorized_operations);
        assert_eq!(operations, Some(NOT_REQUESTED));
    }

    #[test]
    fn operations_are_reported_only_to_who_may_describe_the_cluster() {
        let request = DescribeClusterRequest::default()
            .with_endpoint_type(BROKER_ENDPOINT)
            .with_include_cluster_authorized_operations(true);
        let response =
            fake::handle::<DescribeCluster>(Node(Operation::Alter), 1, &request).response;
        assert_eq!(response.map(|r| r.cluster_authorized_operations), Some(0));
    }

    #[test]
    fn a_broker_is_no_controller_endpoint() {
        let request = DescribeClusterRequest::default().with_endpoint_type(2);
        let handled = fake::handle::<DescribeCluster>(Node(Operation::Describe), 1, &request);
        let unsupported = ResponseError::UnsupportedEndpointType.code();
        let response = handled.response.expect("a response");
        assert_eq!(
            (response.error_code, response.brokers.len()),
            (unsupported, 0)
        );
        assert_eq!(handled.counted_errors, vec![unsupported]);
    }
}
