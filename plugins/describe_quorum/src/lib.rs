//! DescribeQuorum (ApiKey 55): the metadata quorum's leader, epoch, high
//! watermark and voters (`kafka-metadata-quorum.sh describe`), as Kafka's
//! `ControllerApis.handleDescribeQuorum` and `KafkaRaftClient`.
//!
//! - Versions 0-2, on the controller listener only.
//! - DESCRIBE on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
//! - Only `__cluster_metadata` partition 0 exists (else
//!   UNKNOWN_TOPIC_OR_PARTITION for the partition); a node that does not
//!   lead the quorum answers NOT_LEADER_OR_FOLLOWER for it, as Kafka's Raft
//!   client does.

use gregor_sdk::controller::{self, QuorumState};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_quorum_request::TopicData as AskedTopic;
use gregor_sdk::kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{RequestContext, ResponseError};

/// The metadata log's topic partition (Kafka's `__cluster_metadata-0`).
const METADATA_TOPIC: &str = "__cluster_metadata";

gregor_sdk::cluster_api!(DescribeQuorum: DescribeQuorumRequest, 0..=2, Describe => describe);

fn describe(ctx: &RequestContext, request: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    let asks_for_metadata = matches!(
        request.topics.as_slice(),
        [topic] if topic.topic_name.0.as_str() == METADATA_TOPIC
            && matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0)
    );
    if !asks_for_metadata {
        return partition_error(request, ResponseError::UnknownTopicOrPartition.code());
    }
    match controller::describe_quorum() {
        Ok(state) => answer(state, ctx.api_version),
        Err(error) => partition_error(request, error.code),
    }
}

/// Kafka's `getPartitionLevelErrorResponse`: each asked partition with the
/// error.
fn partition_error(request: &DescribeQuorumRequest, code: i16) -> DescribeQuorumResponse {
    let asked = |topic: &AskedTopic| {
        let partitions = topic.partitions.iter().map(|p| {
            PartitionData::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        });
        TopicData::default()
            .with_topic_name(topic.topic_name.clone())
            .with_partitions(partitions.collect())
    };
    DescribeQuorumResponse::default().with_topics(request.topics.iter().map(asked).collect())
}

/// The quorum at `version` (the voters' listeners from v2).
fn answer(mut state: QuorumState, version: i16) -> DescribeQuorumResponse {
    if version < 2 {
        state.nodes.clear();
    }
    let voters = state
        .voters
        .iter()
        .map(|voter| {
            ReplicaState::default()
                .with_replica_id(BrokerId(voter.replica_id))
                .with_log_end_offset(voter.log_end_offset)
                .with_last_fetch_timestamp(-1)
                .with_last_caught_up_timestamp(-1)
        })
        .collect();
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(state.leader_id))
        .with_leader_epoch(state.leader_epoch)
        .with_high_watermark(state.high_watermark)
        .with_current_voters(voters);
    let nodes = state
        .nodes
        .into_iter()
        .map(|(id, endpoints)| {
            let listeners = endpoints
                .into_iter()
                .map(|e| {
                    Listener::default()
                        .with_name(StrBytes::from_string(e.name))
                        .with_host(StrBytes::from_string(e.host))
                        .with_port(e.port)
                })
                .collect();
            Node::default()
                .with_node_id(BrokerId(id))
                .with_listeners(listeners)
        })
        .collect();
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(str_bytes(METADATA_TOPIC)))
            .with_partitions(vec![partition])])
        .with_nodes(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::controller::{Endpoint, VoterState};
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::describe_quorum_request::PartitionData as Asked;
    use gregor_sdk::KafkaError;

    fn request(topic: &'static str) -> DescribeQuorumRequest {
        DescribeQuorumRequest::default().with_topics(vec![AskedTopic::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partitions(vec![Asked::default()])])
    }

    fn quorum() -> QuorumState {
        QuorumState {
            leader_id: 2,
            leader_epoch: 5,
            high_watermark: 40,
            voters: (1..=3)
                .map(|id| VoterState {
                    replica_id: id,
                    log_end_offset: 40,
                })
                .collect(),
            nodes: vec![(
                2,
                vec![Endpoint {
                    name: "CONTROLLER".into(),
                    host: "127.0.0.1".into(),
                    port: 9095,
                    security_protocol: 0,
                }],
            )],
        }
    }

    gregor_sdk::served_versions_test!(
        DescribeQuorum,
        [request(METADATA_TOPIC)],
        [answer(quorum(), 0)]
    );

    /// The leader answers; `leading: false` is a follower.
    struct Quorum {
        leading: bool,
    }

    impl FakeHost for Quorum {
        fn describe_quorum(&self) -> Result<QuorumState, KafkaError> {
            if self.leading {
                Ok(quorum())
            } else {
                Err(KafkaError {
                    code: ResponseError::NotLeaderOrFollower.code(),
                    message: None,
                })
            }
        }
    }

    /// DescribeQuorum for `topic` at `version`, answered by a leader or not.
    fn ask(leading: bool, version: i16, topic: &'static str) -> DescribeQuorumResponse {
        let handled = fake::handle::<DescribeQuorum>(Quorum { leading }, version, &request(topic));
        handled.response.expect("a response")
    }

    #[test]
    fn the_leader_describes_the_voters() {
        let response = ask(true, 2, METADATA_TOPIC);
        let partition = &response.topics[0].partitions[0];
        assert_eq!((partition.leader_id.0, partition.leader_epoch), (2, 5));
        let voters: Vec<i32> = partition
            .current_voters
            .iter()
            .map(|v| v.replica_id.0)
            .collect();
        assert_eq!(voters, vec![1, 2, 3]);
        assert_eq!(response.nodes[0].listeners[0].port, 9095);
    }

    #[test]
    fn a_follower_or_another_partition_answers_a_partition_error() {
        let code = |response: DescribeQuorumResponse| response.topics[0].partitions[0].error_code;
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(code(ask(false, 0, METADATA_TOPIC)), not_leader);
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(code(ask(true, 1, "t")), unknown);
    }
}
