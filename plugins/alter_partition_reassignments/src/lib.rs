//! AlterPartitionReassignments (ApiKey 45): move partitions to other
//! replicas, as Kafka's `ControllerApis.handleAlterPartitionReassignments`
//! and the controller's `alterPartitionReassignments` (KIP-455).
//!
//! - Versions 0-1. ALTER on the Cluster is required; without it the
//!   response and every partition get CLUSTER_AUTHORIZATION_FAILED.
//! - Each partition goes to the host's `metadata.alter-partition-reassignment`,
//!   which decides as Kafka's controller does and, in a cluster, carries
//!   the move out through the metadata quorum: an unknown topic or
//!   partition is UNKNOWN_TOPIC_OR_PARTITION; a target must be non-empty,
//!   of registered brokers, each once (INVALID_REPLICA_ASSIGNMENT); null
//!   replicas cancel the reassignment in progress
//!   (NO_REASSIGNMENT_IN_PROGRESS when there is none). The new replicas
//!   catch up and the reassignment completes when they are in sync; the
//!   answer comes once it has started. On a single node the only valid
//!   target is the current replica, so a valid reassignment is complete
//!   at once. v1's `allow_replication_factor_change` is echoed and passed
//!   on; false refuses a target of another size (INVALID_REPLICATION_FACTOR).
//! - Error response (a trap or timeout): the error at the top level and
//!   for every partition, as Kafka's
//!   `AlterPartitionReassignmentsRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_response::ReassignableTopicResponse as TopicResponse;
use gregor_sdk::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use gregor_sdk::metadata;
use gregor_sdk::partitions::{self, TopicAnswer};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct AlterPartitionReassignments;

impl Handler for AlterPartitionReassignments {
    gregor_sdk::api!(AlterPartitionReassignmentsRequest, 0..=1);

    fn handle(
        _ctx: &RequestContext,
        request: &AlterPartitionReassignmentsRequest,
    ) -> Reply<AlterPartitionReassignmentsResponse> {
        let allowed = cluster_allowed(Operation::Alter);
        let mut response = AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(request.allow_replication_factor_change);
        let denied = ResponseError::ClusterAuthorizationFailed;
        if !allowed {
            response.error_code = denied.code();
            response.error_message = Some(str_bytes(&denied.to_string()));
        }
        response.responses =
            partitions::answer::<TopicResponse>(&request.topics, |topic, partition| {
                let (code, message) = if allowed {
                    let target: Option<Vec<i32>> = partition
                        .replicas
                        .as_ref()
                        .map(|ids| ids.iter().map(|id| id.0).collect());
                    match metadata::alter_partition_reassignment(
                        topic.name.as_str(),
                        partition.partition_index,
                        target.as_deref(),
                        request.allow_replication_factor_change,
                    ) {
                        Ok(()) => (0, None),
                        Err(error) => (error.code, error.message),
                    }
                } else {
                    (denied.code(), Some(denied.to_string()))
                };
                TopicResponse::error(partition, code)
                    .with_error_message(message.as_deref().map(str_bytes))
            });
        response.into()
    }

    /// Kafka's `getErrorResponse`: the error at the top level and for
    /// every partition.
    fn failed(
        _: &RequestContext,
        request: &AlterPartitionReassignmentsRequest,
        error_code: i16,
    ) -> AlterPartitionReassignmentsResponse {
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(request.allow_replication_factor_change)
            .with_error_code(error_code)
            .with_error_message(None)
            .with_responses(partitions::failed(&request.topics, error_code))
    }
}

gregor_sdk::export_handler!(AlterPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaError;
    use std::cell::RefCell;
    use std::rc::Rc;

    type Asked = Vec<(String, i32, Option<Vec<i32>>, bool)>;

    #[test]
    fn encodes_for_every_served_version() {
        let topic = ReassignableTopic::default()
            .with_name(str_bytes("a").into())
            .with_partitions(vec![
                ReassignablePartition::default().with_partition_index(1)
            ]);
        let moved = partitions::failed(
            &[topic.clone()],
            ResponseError::InvalidReplicaAssignment.code(),
        );
        assert_encodes_for_served_versions::<AlterPartitionReassignments>(
            &[AlterPartitionReassignmentsRequest::default().with_topics(vec![topic])],
            &[AlterPartitionReassignmentsResponse::default().with_responses(moved)],
        );
    }

    /// A host that refuses partition 1 of every topic and records what
    /// it was asked; `admin` says whether the principal may ALTER the
    /// cluster.
    struct Cluster {
        admin: bool,
        asked: Rc<RefCell<Asked>>,
    }

    impl FakeHost for Cluster {
        fn authorize(&self, _: &Action) -> bool {
            self.admin
        }
        fn alter_partition_reassignment(
            &self,
            topic: &str,
            partition: i32,
            replicas: Option<&[i32]>,
            allow: bool,
        ) -> Result<(), KafkaError> {
            self.asked.borrow_mut().push((
                topic.to_string(),
                partition,
                replicas.map(<[i32]>::to_vec),
                allow,
            ));
            if partition == 1 {
                return Err(KafkaError {
                    code: ResponseError::NoReassignmentInProgress.code(),
                    message: Some("none".to_string()),
                });
            }
            Ok(())
        }
    }

    fn request() -> AlterPartitionReassignmentsRequest {
        let partition = |index, replicas: Option<Vec<i32>>| {
            ReassignablePartition::default()
                .with_partition_index(index)
                .with_replicas(replicas.map(|ids| ids.into_iter().map(BrokerId).collect()))
        };
        let topic = |name: &str, partitions| {
            ReassignableTopic::default()
                .with_name(str_bytes(name).into())
                .with_partitions(partitions)
        };
        AlterPartitionReassignmentsRequest::default()
            .with_allow_replication_factor_change(false)
            .with_topics(vec![
                topic(
                    "t",
                    vec![partition(0, Some(vec![2, 3])), partition(1, None)],
                ),
                topic("u", vec![partition(0, Some(vec![1]))]),
            ])
    }

    fn codes(response: &AlterPartitionReassignmentsResponse) -> Vec<i16> {
        let partitions = response.responses.iter().flat_map(|t| &t.partitions);
        partitions.map(|p| p.error_code).collect()
    }

    #[test]
    fn every_partition_is_decided_by_the_host() {
        let host = Cluster {
            admin: true,
            asked: Rc::default(),
        };
        let handled = fake::handle::<AlterPartitionReassignments>(host, 1, &request());
        let response = handled.response.expect("a response");
        let none = ResponseError::NoReassignmentInProgress.code();
        assert_eq!(
            (response.error_code, codes(&response)),
            (0, vec![0, none, 0])
        );
        let message = response.responses[0].partitions[1].error_message.as_deref();
        assert_eq!(message, Some("none"));
    }

    #[test]
    fn the_request_reaches_the_host_as_sent() {
        let asked = Rc::new(RefCell::new(Vec::new()));
        let host = Cluster {
            admin: true,
            asked: Rc::clone(&asked),
        };
        fake::handle::<AlterPartitionReassignments>(host, 1, &request());
        assert_eq!(
            *asked.borrow(),
            vec![
                ("t".to_string(), 0, Some(vec![2, 3]), false),
                ("t".to_string(), 1, None, false),
                ("u".to_string(), 0, Some(vec![1]), false),
            ]
        );
    }

    #[test]
    fn without_alter_on_the_cluster_everything_is_refused() {
        let host = Cluster {
            admin: false,
            asked: Rc::default(),
        };
        let handled = fake::handle::<AlterPartitionReassignments>(host, 1, &request());
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let response = handled.response.expect("a response");
        assert_eq!(
            (response.error_code, codes(&response)),
            (denied, vec![denied; 3])
        );
        assert_eq!(handled.counted_errors, vec![denied; 4]);
    }
}
