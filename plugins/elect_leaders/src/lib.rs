//! ElectLeaders (ApiKey 43): preferred or unclean leader election, as
//! Kafka's `ControllerApis.handleElectLeaders` and the controller's
//! `electLeaders`.
//!
//! - Versions 0-2. ALTER on the Cluster is required; without it every
//!   named partition (and, from v1, the response) gets
//!   CLUSTER_AUTHORIZATION_FAILED. An election type other than 0
//!   (preferred) or 1 (unclean) is INVALID_REQUEST the same way.
//! - On a single node every partition is led by its only (and preferred)
//!   replica, so no election is ever needed: a named partition gets
//!   ELECTION_NOT_NEEDED, an unknown one UNKNOWN_TOPIC_OR_PARTITION.
//!   Without a partition list ("all partitions") Kafka leaves out the
//!   partitions that need no election, so every topic is listed with none.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use gregor_sdk::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use gregor_sdk::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use gregor_sdk::{
    api_info, decode, metadata, request_throttle_ms, respond, ApiInfo, Handler, Outcome,
    RequestContext, ResponseError,
};

struct ElectLeaders;

impl Handler for ElectLeaders {
    fn describe() -> ApiInfo {
        api_info::<ElectLeadersRequest>("ElectLeaders", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ElectLeadersRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = if !cluster_allowed(Operation::Alter) {
            failed(&request, ResponseError::ClusterAuthorizationFailed, None)
        } else if !matches!(request.election_type, 0 | 1) {
            let message = format!("Unknown election type {}", request.election_type);
            failed(&request, ResponseError::InvalidRequest, Some(message))
        } else {
            elect(&request)
        };
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }
}

/// Kafka's `ElectLeadersRequest.getErrorResponse`: the error at the top
/// level and for every named partition.
fn failed(
    request: &ElectLeadersRequest,
    error: ResponseError,
    message: Option<String>,
) -> ElectLeadersResponse {
    let message = message.unwrap_or_else(|| error.to_string());
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| result(*partition, error, &message))
                        .collect(),
                )
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(error.code())
        .with_replica_election_results(results)
}

fn result(partition: i32, error: ResponseError, message: &str) -> PartitionResult {
    PartitionResult::default()
        .with_partition_id(partition)
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(message)))
}

fn elect(request: &ElectLeadersRequest) -> ElectLeadersResponse {
    let results = match &request.topic_partitions {
        // Every topic, leaving out partitions that need no election: all.
        None => metadata::list_topics()
            .into_iter()
            .map(|topic| {
                ReplicaElectionResult::default()
                    .with_topic(TopicName(str_bytes(&topic.name)))
                    .with_partition_result(Vec::new())
            })
            .collect(),
        Some(topics) => topics.iter().map(elect_named).collect(),
    };
    ElectLeadersResponse::default().with_replica_election_results(results)
}

fn elect_named(topic: &TopicPartitions) -> ReplicaElectionResult {
    let name = topic.topic.as_str();
    let info = metadata::topic_by_name(name);
    let partitions = topic
        .partitions
        .iter()
        .map(|&partition| match &info {
            None => result(
                partition,
                ResponseError::UnknownTopicOrPartition,
                &format!("No such topic as {name}"),
            ),
            Some(info) if !info.partitions.iter().any(|p| p.partition == partition) => result(
                partition,
                ResponseError::UnknownTopicOrPartition,
                &format!("No such partition as {name}-{partition}"),
            ),
            Some(_) => {
                let error = ResponseError::ElectionNotNeeded;
                result(partition, error, &error.to_string())
            }
        })
        .collect();
    ReplicaElectionResult::default()
        .with_topic(topic.topic.clone())
        .with_partition_result(partitions)
}

gregor_sdk::export_handler!(ElectLeaders);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=2 {
            let topic = ReplicaElectionResult::default().with_partition_result(vec![result(
                0,
                ResponseError::ElectionNotNeeded,
                "not needed",
            )]);
            let response = ElectLeadersResponse::default()
                .with_error_code(if version >= 1 { 31 } else { 0 })
                .with_replica_election_results(vec![topic]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
