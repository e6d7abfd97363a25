//! AlterPartition (ApiKey 56): a partition leader asks the active
//! controller to change the partition's ISR (or leader recovery state), as
//! Kafka's `ControllerApis.handleAlterPartitionRequest`.
//!
//! - Versions 2-3 (topics by id; v3 names ISR members with their broker
//!   epochs), on the controller listener only.
//! - CLUSTER_ACTION on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
//! - The controller's rules decide each partition (`controller.alter-partition`):
//!   FENCED_LEADER_EPOCH for an old leader epoch, INVALID_UPDATE_VERSION for
//!   a stale partition epoch, INELIGIBLE_REPLICA, UNKNOWN_TOPIC_ID, ...;
//!   STALE_BROKER_EPOCH or NOT_CONTROLLER answer the whole request.

use gregor_sdk::controller::{self, PartitionChange, PartitionState};
use gregor_sdk::ids::from_kafka_uuid;
use gregor_sdk::kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use gregor_sdk::kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerId,
};
use gregor_sdk::{AnswerError, RequestContext};

gregor_sdk::cluster_api!(AlterPartition: AlterPartitionRequest, 2..=3, ClusterAction => alter);

fn alter(ctx: &RequestContext, request: &AlterPartitionRequest) -> AlterPartitionResponse {
    let version = ctx.api_version;
    let changes: Vec<PartitionChange> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| PartitionChange {
                topic_id: from_kafka_uuid(topic.topic_id),
                partition: p.partition_index,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                new_isr: if version >= 3 {
                    p.new_isr_with_epochs
                        .iter()
                        .map(|b| b.broker_id.0)
                        .collect()
                } else {
                    p.new_isr.iter().map(|b| b.0).collect()
                },
                leader_recovery_state: p.leader_recovery_state,
            })
        })
        .collect();
    let states =
        match controller::alter_partition(request.broker_id.0, request.broker_epoch, &changes) {
            Ok(states) => states,
            Err(error) => {
                return AlterPartitionResponse::default().with_error_code(error.error_code())
            }
        };
    // The answers come in the order of the changes: topic by topic.
    let mut states = states.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .zip(states.by_ref())
                .map(|(p, state)| partition(p.partition_index, state))
                .collect();
            TopicData::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionResponse::default().with_topics(topics)
}

fn partition(index: i32, state: PartitionState) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(state.error.error_code())
        .with_leader_id(BrokerId(state.leader_id))
        .with_leader_epoch(state.leader_epoch)
        .with_isr(state.isr.into_iter().map(BrokerId).collect())
        .with_leader_recovery_state(state.leader_recovery_state)
        .with_partition_epoch(state.partition_epoch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::{Action, Operation};
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::alter_partition_request::{
        BrokerState, PartitionData as Change, TopicData as Topic,
    };
    use gregor_sdk::uuid::Uuid;
    use gregor_sdk::{KafkaError, ResponseError};

    const TOPIC: Uuid = Uuid::from_u64_pair(1, 2);

    fn request(version: i16, partition_epochs: &[i32]) -> AlterPartitionRequest {
        let partitions = partition_epochs
            .iter()
            .enumerate()
            .map(|(index, epoch)| {
                let change = Change::default()
                    .with_partition_index(index as i32)
                    .with_leader_epoch(4)
                    .with_partition_epoch(*epoch);
                if version >= 3 {
                    change.with_new_isr_with_epochs(vec![
                        BrokerState::default().with_broker_id(BrokerId(1)),
                        BrokerState::default().with_broker_id(BrokerId(2)),
                    ])
                } else {
                    change.with_new_isr(vec![BrokerId(1), BrokerId(2)])
                }
            })
            .collect();
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(1))
            .with_broker_epoch(9)
            .with_topics(vec![Topic::default()
                .with_topic_id(TOPIC)
                .with_partitions(partitions)])
    }

    gregor_sdk::served_versions_test!(
        AlterPartition,
        [request(2, &[0])],
        [
            AlterPartitionResponse::default().with_topics(vec![TopicData::default()
                .with_topic_id(TOPIC)
                .with_partitions(vec![partition(
                    0,
                    PartitionState {
                        error: None,
                        leader_id: 1,
                        leader_epoch: 4,
                        isr: vec![1, 2],
                        leader_recovery_state: 0,
                        partition_epoch: 7,
                    }
                )])])
        ]
    );

    /// Every partition is at partition epoch 6: an older one is refused.
    struct Controller;

    impl FakeHost for Controller {
        fn authorize(&self, action: &Action) -> bool {
            action.operation == Operation::ClusterAction
        }
        fn alter_partition(
            &self,
            broker_id: i32,
            broker_epoch: i64,
            changes: &[PartitionChange],
        ) -> Result<Vec<PartitionState>, KafkaError> {
            if (broker_id, broker_epoch) != (1, 9) {
                return Err(KafkaError {
                    code: ResponseError::StaleBrokerEpoch.code(),
                    message: None,
                });
            }
            Ok(changes
                .iter()
                .map(|change| {
                    let current = change.partition_epoch == 6;
                    PartitionState {
                        error: (!current).then(|| KafkaError {
                            code: ResponseError::InvalidUpdateVersion.code(),
                            message: None,
                        }),
                        leader_id: 1,
                        leader_epoch: 4,
                        isr: if current {
                            change.new_isr.clone()
                        } else {
                            vec![1]
                        },
                        leader_recovery_state: 0,
                        partition_epoch: if current { 7 } else { 6 },
                    }
                })
                .collect())
        }
    }

    #[test]
    fn each_partition_is_decided_by_the_controller() {
        for version in [2, 3] {
            let response =
                fake::handle::<AlterPartition>(Controller, version, &request(version, &[6, 5]))
                    .response
                    .unwrap();
            let partitions = &response.topics[0].partitions;
            let got: Vec<(i32, i16, usize, i32)> = partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.error_code,
                        p.isr.len(),
                        p.partition_epoch,
                    )
                })
                .collect();
            let stale = ResponseError::InvalidUpdateVersion.code();
            assert_eq!(got, vec![(0, 0, 2, 7), (1, stale, 1, 6)], "v{version}");
        }
    }

    #[test]
    fn a_stale_broker_epoch_fails_the_request() {
        let stale = request(3, &[6]).with_broker_epoch(8);
        let response = fake::handle::<AlterPartition>(Controller, 3, &stale)
            .response
            .unwrap();
        assert_eq!(
            (response.error_code, response.topics.len()),
            (ResponseError::StaleBrokerEpoch.code(), 0)
        );
    }
}
