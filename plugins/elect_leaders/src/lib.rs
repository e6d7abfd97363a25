//! ElectLeaders (ApiKey 43): preferred or unclean leader election, as
//! Kafka's `ControllerApis.handleElectLeaders` and the controller's
//! `electLeaders`.
//!
//! - Versions 0-2. ALTER on the Cluster is required; without it every
//!   named partition (and, from v1, the response) gets
//!   CLUSTER_AUTHORIZATION_FAILED. An election type other than 0
//!   (preferred) or 1 (unclean) is INVALID_REQUEST the same way.
//! - The host decides and carries out each election (`metadata`'s
//!   `elect-leaders`: the controller's rules, the metadata quorum), so a
//!   module never decides who leads. Per partition: ELECTION_NOT_NEEDED
//!   (the preferred replica leads; for unclean, it has a leader),
//!   PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
//!   UNKNOWN_TOPIC_OR_PARTITION. On a single node every partition is led
//!   by its only, preferred, replica: no election is ever needed.
//! - Without a partition list ("all partitions") Kafka answers only the
//!   partitions that needed an election, under every topic.
//! - Error response (a trap or timeout): the error for every named
//!   partition and, from v1, at the top level, as Kafka's
//!   `ElectLeadersRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use gregor_sdk::kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use gregor_sdk::partitions::{self, TopicAnswer};
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

/// The first version with a top-level error code.
const ERROR_CODE_VERSION: i16 = 1;

struct ElectLeaders;

impl Handler for ElectLeaders {
    gregor_sdk::api!(ElectLeadersRequest, 0..=2);

    fn handle(ctx: &RequestContext, request: &ElectLeadersRequest) -> Reply<ElectLeadersResponse> {
        let version = ctx.api_version;
        if !cluster_allowed(Operation::Alter) {
            let error = ResponseError::ClusterAuthorizationFailed;
            refused(request, version, error.code(), Some(&error.to_string())).into()
        } else if !matches!(request.election_type, 0 | 1) {
            let message = format!("Unknown election type {}", request.election_type);
            let code = ResponseError::InvalidRequest.code();
            refused(request, version, code, Some(&message)).into()
        } else {
            elect(request).into()
        }
    }

    /// Kafka's `getErrorResponse`: the error for every named partition and
    /// at the top level.
    fn failed(
        ctx: &RequestContext,
        request: &ElectLeadersRequest,
        error_code: i16,
    ) -> ElectLeadersResponse {
        refused(request, ctx.api_version, error_code, None)
    }
}

/// Kafka's `ElectLeadersRequest.getErrorResponse`: the error for every
/// named partition and, from v1 (v0 has no field for it), at the top level.
fn refused(
    request: &ElectLeadersRequest,
    version: i16,
    error_code: i16,
    message: Option<&str>,
) -> ElectLeadersResponse {
    let topics = request.topic_partitions.iter().flatten();
    let results = partitions::answer::<ReplicaElectionResult>(topics, |_, &partition| {
        result(partition, error_code, message)
    });
    ElectLeadersResponse::default()
        .with_error_code(if version >= ERROR_CODE_VERSION {
            error_code
        } else {
            0
        })
        .with_replica_election_results(results)
}

fn result(partition: i32, error_code: i16, message: Option<&str>) -> PartitionResult {
    ReplicaElectionResult::error(&partition, error_code).with_error_message(message.map(str_bytes))
}

fn elect(request: &ElectLeadersRequest) -> ElectLeadersResponse {
    let unclean = request.election_type == 1;
    let results = match &request.topic_partitions {
        // Every partition: every topic, with the partitions elected.
        None => {
            let elected = metadata::elect_leaders(unclean, None);
            metadata::list_topics()
                .into_iter()
                .map(|topic| {
                    let partitions = elected
                        .iter()
                        .filter(|e| e.topic == topic.name)
                        .map(election_result)
                        .collect();
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(str_bytes(&topic.name)))
                        .with_partition_result(partitions)
                })
                .collect()
        }
        Some(topics) => {
            let asked: Vec<(String, i32)> = topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
                .collect();
            let mut elected = metadata::elect_leaders(unclean, Some(&asked)).into_iter();
            partitions::answer::<ReplicaElectionResult>(topics, |_, &partition| {
                match elected.next() {
                    Some(e) => election_result(&e),
                    // The host answers every partition asked, in order.
                    None => result(partition, ResponseError::UnknownServerError.code(), None),
                }
            })
        }
    };
    ElectLeadersResponse::default().with_replica_election_results(results)
}

fn election_result(e: &metadata::ElectionResult) -> PartitionResult {
    match &e.error {
        None => result(e.partition, 0, None),
        Some(error) => result(e.partition, error.code, error.message.as_deref()),
    }
}

gregor_sdk::export_handler!(ElectLeaders);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use gregor_sdk::metadata::{ElectionResult, TopicInfo};
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaError;

    fn request(topics: Option<Vec<(&str, Vec<i32>)>>) -> ElectLeadersRequest {
        let topics = topics.map(|topics| {
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(str_bytes(name)))
                        .with_partitions(partitions)
                })
                .collect()
        });
        ElectLeadersRequest::default()
            .with_election_type(0)
            .with_topic_partitions(topics)
    }

    #[test]
    fn encodes_for_every_served_version() {
        let topic = ReplicaElectionResult::default().with_partition_result(vec![result(
            0,
            ResponseError::ElectionNotNeeded.code(),
            Some("not needed"),
        )]);
        assert_encodes_for_served_versions::<ElectLeaders>(
            &[request(Some(vec![("a", vec![0, 1]), ("b", vec![2])]))],
            &[ElectLeadersResponse::default().with_replica_election_results(vec![topic])],
        );
    }

    /// Topic "t" with one partition; `admin` may ALTER the cluster.
    struct Node {
        admin: bool,
    }

    impl FakeHost for Node {
        fn authorize(&self, _: &Action) -> bool {
            self.admin
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![fake::single_node_topic("t", 1)]
        }
        /// As a single node's host answers: t-0 needs no election.
        fn elect_leaders(
            &self,
            _unclean: bool,
            partitions: Option<&[(String, i32)]>,
        ) -> Vec<ElectionResult> {
            let error = |code: ResponseError| {
                Some(KafkaError {
                    code: code.code(),
                    message: None,
                })
            };
            partitions
                .unwrap_or_default()
                .iter()
                .map(|(topic, partition)| ElectionResult {
                    topic: topic.clone(),
                    partition: *partition,
                    error: if topic == "t" && *partition == 0 {
                        error(ResponseError::ElectionNotNeeded)
                    } else {
                        error(ResponseError::UnknownTopicOrPartition)
                    },
                })
                .collect()
        }
    }

    /// A cluster where t-0 is elected and t-1 has no eligible leader.
    struct Cluster;

    impl FakeHost for Cluster {
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![fake::single_node_topic("t", 2)]
        }
        fn elect_leaders(
            &self,
            unclean: bool,
            partitions: Option<&[(String, i32)]>,
        ) -> Vec<ElectionResult> {
            assert!(unclean);
            assert!(partitions.is_none());
            vec![ElectionResult {
                topic: "t".to_string(),
                partition: 1,
                error: Some(KafkaError {
                    code: ResponseError::EligibleLeadersNotAvailable.code(),
                    message: Some("none".to_string()),
                }),
            }]
        }
    }

    #[test]
    fn all_partitions_lists_every_topic_with_the_elections_the_host_made() {
        let all = ElectLeadersRequest::default()
            .with_election_type(1)
            .with_topic_partitions(None);
        let response = fake::handle::<ElectLeaders>(Cluster, 2, &all).response;
        let topics = response.expect("a response").replica_election_results;
        assert_eq!(topics.len(), 1);
        let partitions = &topics[0].partition_result;
        assert_eq!(partitions.len(), 1);
        assert_eq!(partitions[0].partition_id, 1);
        assert_eq!(
            partitions[0].error_code,
            ResponseError::EligibleLeadersNotAvailable.code()
        );
    }

    fn codes(response: &ElectLeadersResponse) -> Vec<i16> {
        let partitions = response
            .replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result);
        partitions.map(|p| p.error_code).collect()
    }

    #[test]
    fn no_partition_of_a_single_node_needs_an_election() {
        let named = request(Some(vec![("t", vec![0, 1]), ("gone", vec![0])]));
        let response = fake::handle::<ElectLeaders>(Node { admin: true }, 2, &named).response;
        let response = response.expect("a response");
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let expected = vec![ResponseError::ElectionNotNeeded.code(), unknown, unknown];
        assert_eq!((response.error_code, codes(&response)), (0, expected));
        // All partitions: every topic, with none needing an election.
        let all = fake::handle::<ElectLeaders>(Node { admin: true }, 2, &request(None)).response;
        let all = all.expect("a response").replica_election_results;
        assert_eq!(all.len(), 1);
        assert!(all[0].partition_result.is_empty());
    }

    #[test]
    fn without_alter_every_named_partition_is_refused() {
        let named = request(Some(vec![("t", vec![0, 1])]));
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let v0 = fake::handle::<ElectLeaders>(Node { admin: false }, 0, &named);
        assert_eq!(v0.counted_errors, vec![denied; 2]);
        let v1 = fake::handle::<ElectLeaders>(Node { admin: false }, 1, &named);
        let response = v1.response.expect("a response");
        assert_eq!(
            (response.error_code, codes(&response)),
            (denied, vec![denied; 2])
        );
    }
}
