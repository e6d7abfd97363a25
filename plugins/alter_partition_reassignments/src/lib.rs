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

use std::collections::BTreeSet;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use gregor_sdk::metadata::{self, TopicInfo};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, KafkaError, Outcome,
    RawHandler, RequestContext, ResponseError,
};

struct AlterPartitionReassignments;

impl RawHandler for AlterPartitionReassignments {
    fn describe() -> ApiInfo {
        api_info::<AlterPartitionReassignmentsRequest>("AlterPartitionReassignments", 0, 1)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: AlterPartitionReassignmentsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let allowed = cluster_allowed(Operation::Alter);
        let registered: BTreeSet<i32> = metadata::describe_cluster()
            .brokers
            .iter()
            .map(|b| b.node_id)
            .collect();
        let mut response = AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(request.allow_replication_factor_change);
        if !allowed {
            let error = ResponseError::ClusterAuthorizationFailed;
            response.error_code = error.code();
            response.error_message = Some(str_bytes(&error.to_string()));
        }
        for topic in &request.topics {
            let info = metadata::topic_by_name(topic.name.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let outcome = if allowed {
                        reassign(
                            topic.name.as_str(),
                            info.as_ref(),
                            partition,
                            &registered,
                            request.allow_replication_factor_change,
                        )
                    } else {
                        let error = ResponseError::ClusterAuthorizationFailed;
                        Err(KafkaError {
                            code: error.code(),
                            message: Some(error.to_string()),
                        })
                    };
                    let (code, message) = match outcome {
                        Ok(()) => (0, None),
                        Err(error) => (error.code, error.message),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(partition.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.as_deref().map(str_bytes))
                })
                .collect();
            response.responses.push(
                ReassignableTopicResponse::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error at the top level and for
    /// every partition.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: AlterPartitionReassignmentsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// The request answered with `error_code`, at the top level and for every
/// partition.
fn error_response_for(
    request: &AlterPartitionReassignmentsRequest,
    error_code: i16,
) -> AlterPartitionReassignmentsResponse {
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(partition.partition_index)
                        .with_error_code(error_code)
                        .with_error_message(None)
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change)
        .with_error_code(error_code)
        .with_error_message(None)
        .with_responses(responses)
}

/// The top-level code and every partition's.
fn error_codes(response: &AlterPartitionReassignmentsResponse) -> Vec<i16> {
    let partitions = response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
        .map(|partition| partition.error_code);
    std::iter::once(response.error_code)
        .chain(partitions)
        .collect()
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

gregor_sdk::export_raw_handler!(AlterPartitionReassignments);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

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
    fn responses_encode_for_every_served_version() {
        for version in 0..=1 {
            let topic = ReassignableTopicResponse::default().with_partitions(vec![
                ReassignablePartitionResponse::default().with_error_code(85),
            ]);
            let response =
                AlterPartitionReassignmentsResponse::default().with_responses(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_answer_every_partition_for_every_served_version() {
        use gregor_sdk::kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
        let topic = |name: &str, partitions: &[i32]| {
            ReassignableTopic::default()
                .with_name(str_bytes(name).into())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| ReassignablePartition::default().with_partition_index(p))
                        .collect(),
                )
        };
        let request = AlterPartitionReassignmentsRequest::default()
            .with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(error_codes(&response), vec![code; 4]);
        let shape: Vec<(String, Vec<i32>)> = response
            .responses
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter().map(|p| p.partition_index);
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])]
        );
        for version in 0..=1 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
