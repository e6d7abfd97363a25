//! AlterPartitionReassignments (ApiKey 45): move partitions to other
//! replicas, as Kafka's `ControllerApis.handleAlterPartitionReassignments`
//! and the controller's `alterPartitionReassignments`.
//!
//! - Versions 0-1. ALTER on the Cluster is required; without it the
//!   response and every partition get CLUSTER_AUTHORIZATION_FAILED.
//! - Per partition, as the controller checks it: an unknown topic or
//!   partition is UNKNOWN_TOPIC_OR_PARTITION; a target replica list must be
//!   non-empty, name registered brokers, each once
//!   (INVALID_REPLICA_ASSIGNMENT). On a single node the only valid target
//!   is the current one, so a valid reassignment completes at once (no
//!   error) and none is ever in progress: cancelling one (null replicas) is
//!   NO_REASSIGNMENT_IN_PROGRESS. v1's `allow_replication_factor_change` is
//!   echoed; with it false a different replica count would be
//!   INVALID_REPLICATION_FACTOR.
//! - Error response (a trap or timeout): the error at the top level and
//!   for every partition, as Kafka's
//!   `AlterPartitionReassignmentsRequest.getErrorResponse`.

use std::collections::{BTreeSet, HashMap};

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_response::ReassignableTopicResponse as TopicResponse;
use gregor_sdk::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use gregor_sdk::metadata::{self, TopicInfo};
use gregor_sdk::partitions::{self, TopicAnswer};
use gregor_sdk::{Handler, KafkaError, Reply, RequestContext, ResponseError};

struct AlterPartitionReassignments;

impl Handler for AlterPartitionReassignments {
    gregor_sdk::api!(AlterPartitionReassignmentsRequest, 0..=1);

    fn handle(
        _ctx: &RequestContext,
        request: &AlterPartitionReassignmentsRequest,
    ) -> Reply<AlterPartitionReassignmentsResponse> {
        let allowed = cluster_allowed(Operation::Alter);
        let registered: BTreeSet<i32> = metadata::describe_cluster()
            .brokers
            .iter()
            .map(|b| b.node_id)
            .collect();
        let mut response = AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(request.allow_replication_factor_change);
        let denied = ResponseError::ClusterAuthorizationFailed;
        if !allowed {
            response.error_code = denied.code();
            response.error_message = Some(str_bytes(&denied.to_string()));
        }
        let infos: HashMap<&str, Option<TopicInfo>> = request
            .topics
            .iter()
            .map(|t| (t.name.as_str(), metadata::topic_by_name(t.name.as_str())))
            .collect();
        response.responses =
            partitions::answer::<TopicResponse>(&request.topics, |topic, partition| {
                let name = topic.name.as_str();
                let outcome = if allowed {
                    reassign(
                        name,
                        infos.get(name).and_then(Option::as_ref),
                        partition,
                        &registered,
                        request.allow_replication_factor_change,
                    )
                } else {
                    Err(error(denied, denied.to_string()))
                };
                let (code, message) = match outcome {
                    Ok(()) => (0, None),
                    Err(error) => (error.code, error.message),
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

fn error(code: ResponseError, message: String) -> KafkaError {
    KafkaError {
        code: code.code(),
        message: Some(message),
    }
}

fn reassign(
    name: &str,
    info: Option<&TopicInfo>,
    partition: &ReassignablePartition,
    registered: &BTreeSet<i32>,
    allow_replication_factor_change: bool,
) -> Result<(), KafkaError> {
    let index = partition.partition_index;
    let Some(info) = info else {
        return Err(error(
            ResponseError::UnknownTopicOrPartition,
            format!("Unable to find a topic named {name}."),
        ));
    };
    let Some(current) = info.partitions.iter().find(|p| p.partition == index) else {
        return Err(error(
            ResponseError::UnknownTopicOrPartition,
            format!("Unable to find partition {name}:{index}."),
        ));
    };
    let Some(target) = &partition.replicas else {
        let code = ResponseError::NoReassignmentInProgress;
        return Err(error(code, code.to_string()));
    };
    let target: Vec<i32> = target.iter().map(|id| id.0).collect();
    validate_target(&target, registered)?;
    if !allow_replication_factor_change && target.len() != current.replicas.len() {
        return Err(error(
            ResponseError::InvalidReplicationFactor,
            format!(
                "The replication factor is changed from {} to {}",
                current.replicas.len(),
                target.len()
            ),
        ));
    }
    // The target is the current assignment: the reassignment is complete.
    Ok(())
}

/// The controller's `validateManualPartitionAssignment`.
fn validate_target(target: &[i32], registered: &BTreeSet<i32>) -> Result<(), KafkaError> {
    let invalid = |message: String| Err(error(ResponseError::InvalidReplicaAssignment, message));
    if target.is_empty() {
        return invalid("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    for (i, id) in sorted.iter().enumerate() {
        if !registered.contains(id) {
            return invalid(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == *id {
            return invalid(format!(
                "The manual partition assignment includes the broker {id} more than once."
            ));
        }
    }
    Ok(())
}

gregor_sdk::export_handler!(AlterPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn targets_are_checked_like_the_controller() {
        let registered = BTreeSet::from([1]);
        assert!(validate_target(&[1], &registered).is_ok());
        let code = |target: &[i32]| validate_target(target, &registered).unwrap_err().code;
        let invalid = ResponseError::InvalidReplicaAssignment.code();
        assert_eq!(code(&[]), invalid);
        assert_eq!(code(&[2]), invalid);
        assert_eq!(code(&[1, 1]), invalid);
    }

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

    /// One broker (1) and topic "t" with partition 0 on it; `admin` says
    /// whether the principal may ALTER the cluster.
    struct Cluster {
        admin: bool,
    }

    impl FakeHost for Cluster {
        fn authorize(&self, _: &Action) -> bool {
            self.admin
        }
        fn describe_cluster(&self) -> metadata::Cluster {
            fake::single_node_cluster()
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![fake::single_node_topic("t", 1)]
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
        AlterPartitionReassignmentsRequest::default().with_topics(vec![
            topic(
                "t",
                vec![
                    partition(0, Some(vec![1])),
                    partition(0, None),
                    partition(1, Some(vec![1])),
                    partition(0, Some(vec![2])),
                ],
            ),
            topic("gone", vec![partition(0, Some(vec![1]))]),
        ])
    }

    fn codes(response: &AlterPartitionReassignmentsResponse) -> Vec<i16> {
        let partitions = response.responses.iter().flat_map(|t| &t.partitions);
        partitions.map(|p| p.error_code).collect()
    }

    #[test]
    fn partitions_are_checked_as_the_controller_does() {
        let handled =
            fake::handle::<AlterPartitionReassignments>(Cluster { admin: true }, 1, &request());
        let response = handled.response.expect("a response");
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let expected = vec![
            0,
            ResponseError::NoReassignmentInProgress.code(),
            unknown,
            ResponseError::InvalidReplicaAssignment.code(),
            unknown,
        ];
        assert_eq!((response.error_code, codes(&response)), (0, expected));
    }

    #[test]
    fn without_alter_on_the_cluster_everything_is_refused() {
        let handled =
            fake::handle::<AlterPartitionReassignments>(Cluster { admin: false }, 0, &request());
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let response = handled.response.expect("a response");
        assert_eq!(
            (response.error_code, codes(&response)),
            (denied, vec![denied; 5])
        );
        assert_eq!(handled.counted_errors, vec![denied; 6]);
    }
}
