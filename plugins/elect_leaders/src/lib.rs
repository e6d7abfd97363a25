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
//! - Error response (a trap or timeout): the error for every named
//!   partition and, from v1, at the top level, as Kafka's
//!   `ElectLeadersRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use gregor_sdk::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use gregor_sdk::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use gregor_sdk::{
    api_info, decode, encode, metadata, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

/// The first version with a top-level error code.
const ERROR_CODE_VERSION: i16 = 1;

struct ElectLeaders;

impl RawHandler for ElectLeaders {
    fn describe() -> ApiInfo {
        api_info::<ElectLeadersRequest>("ElectLeaders", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ElectLeadersRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let version = ctx.api_version;
        let mut response = if !cluster_allowed(Operation::Alter) {
            let error = ResponseError::ClusterAuthorizationFailed;
            failed(&request, version, error.code(), Some(&error.to_string()))
        } else if !matches!(request.election_type, 0 | 1) {
            let message = format!("Unknown election type {}", request.election_type);
            let code = ResponseError::InvalidRequest.code();
            failed(&request, version, code, Some(&message))
        } else {
            elect(&request)
        };
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error for every named partition and
    /// at the top level.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: ElectLeadersRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(&request, ctx.api_version, error_code, None))
    }
}

/// Kafka's `ElectLeadersRequest.getErrorResponse`: the error for every
/// named partition and, from v1 (v0 has no field for it), at the top level.
fn failed(
    request: &ElectLeadersRequest,
    version: i16,
    error_code: i16,
    message: Option<&str>,
) -> ElectLeadersResponse {
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
                        .map(|partition| result(*partition, error_code, message))
                        .collect(),
                )
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(if version >= ERROR_CODE_VERSION {
            error_code
        } else {
            0
        })
        .with_replica_election_results(results)
}

fn result(partition: i32, error_code: i16, message: Option<&str>) -> PartitionResult {
    PartitionResult::default()
        .with_partition_id(partition)
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

/// The top-level code and every partition's.
fn error_codes(response: &ElectLeadersResponse) -> Vec<i16> {
    let partitions = response
        .replica_election_results
        .iter()
        .flat_map(|topic| &topic.partition_result)
        .map(|partition| partition.error_code);
    std::iter::once(response.error_code)
        .chain(partitions)
        .collect()
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
                ResponseError::UnknownTopicOrPartition.code(),
                Some(&format!("No such topic as {name}")),
            ),
            Some(info) if !info.partitions.iter().any(|p| p.partition == partition) => result(
                partition,
                ResponseError::UnknownTopicOrPartition.code(),
                Some(&format!("No such partition as {name}-{partition}")),
            ),
            Some(_) => {
                let error = ResponseError::ElectionNotNeeded;
                result(partition, error.code(), Some(&error.to_string()))
            }
        })
        .collect();
    ReplicaElectionResult::default()
        .with_topic(topic.topic.clone())
        .with_partition_result(partitions)
}

gregor_sdk::export_raw_handler!(ElectLeaders);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=2 {
            let topic = ReplicaElectionResult::default().with_partition_result(vec![result(
                0,
                ResponseError::ElectionNotNeeded.code(),
                Some("not needed"),
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

    #[test]
    fn error_responses_answer_every_partition_for_every_served_version() {
        let topic = |name: &str, partitions: Vec<i32>| {
            TopicPartitions::default()
                .with_topic(TopicName(str_bytes(name)))
                .with_partitions(partitions)
        };
        let request = ElectLeadersRequest::default()
            .with_topic_partitions(Some(vec![topic("a", vec![0, 1]), topic("b", vec![2])]));
        let code = ResponseError::UnknownServerError.code();
        for version in 0..=2 {
            let response = failed(&request, version, code, None);
            let top = if version >= ERROR_CODE_VERSION {
                code
            } else {
                0
            };
            assert_eq!(
                error_codes(&response),
                vec![top, code, code, code],
                "v{version}"
            );
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
        let all = failed(&ElectLeadersRequest::default(), 2, code, None);
        assert!(all.replica_election_results.is_empty());
    }
}
