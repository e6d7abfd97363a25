//! The leader's AlterPartition requests (Kafka's AlterPartitionManager):
//! ISR changes decided by [`super::leader`] go, batched, to the active
//! controller over the broker's controller channel (the one membership
//! uses), as AlterPartition v2 (topics by id, the partition epoch each
//! change was decided on). The leader applies a change only when the
//! image shows it; a refused or unanswered change is handed back so the
//! leader may decide again on the state it then sees.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_request::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, BrokerId};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::leader::{IsrChange, LeaderReplication};
use crate::cluster::membership::wire::ControllerChannel;
use crate::error_code::ErrorCode;

/// The version sent: the first with topic ids.
const VERSION: i16 = 2;
/// A pause after a request failed as a whole (no controller).
const BACKOFF: Duration = Duration::from_millis(100);

/// One request for every change queued: topics by id, in order.
pub fn request(broker_id: i32, broker_epoch: i64, changes: &[IsrChange]) -> AlterPartitionRequest {
    let mut topics: BTreeMap<u128, Vec<PartitionData>> = BTreeMap::new();
    for change in changes {
        topics.entry(change.topic_id).or_default().push(
            PartitionData::default()
                .with_partition_index(change.tp.partition)
                .with_leader_epoch(change.leader_epoch)
                .with_partition_epoch(change.partition_epoch)
                .with_new_isr(change.new_isr.iter().copied().map(BrokerId).collect()),
        );
    }
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(broker_id))
        .with_broker_epoch(broker_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(id, partitions)| {
                    TopicData::default()
                        .with_topic_id(uuid::Uuid::from_u128(id))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// Sends the leader's changes until `stopped`.
pub async fn run(
    leader: Arc<LeaderReplication>,
    mut channel: ControllerChannel,
    broker_id: i32,
    broker_epoch: Arc<AtomicI64>,
    mut changes: mpsc::UnboundedReceiver<IsrChange>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let first = tokio::select! {
            change = changes.recv() => change,
            _ = stopped.changed() => return,
        };
        let Some(first) = first else { return };
        let mut batch = vec![first];
        while let Ok(more) = changes.try_recv() {
            batch.push(more);
        }
        let epoch = broker_epoch.load(Ordering::Acquire);
        let answer = channel
            .send(&request(broker_id, epoch, &batch), VERSION)
            .await;
        let response = match answer {
            Ok(response) if response.error_code == ErrorCode::None.code() => response,
            Ok(response) => {
                if response.error_code == ErrorCode::NotController.code() {
                    channel.reset();
                }
                warn!(
                    code = response.error_code,
                    "AlterPartition refused as a whole"
                );
                fail_all(&leader, &batch).await;
                continue;
            }
            Err(error) => {
                warn!(%error, "AlterPartition not answered");
                fail_all(&leader, &batch).await;
                continue;
            }
        };
        for topic in &response.topics {
            let topic_id = topic.topic_id.as_u128();
            for partition in &topic.partitions {
                let change = batch.iter().find(|c| {
                    c.topic_id == topic_id && c.tp.partition == partition.partition_index
                });
                let Some(change) = change else { continue };
                if partition.error_code == ErrorCode::None.code() {
                    debug!(partition = %change.tp, isr = ?partition.isr, "ISR changed");
                } else if partition.error_code == ErrorCode::NewLeaderElected.code() {
                    // The change completed a reassignment that moved the
                    // leadership: the image tells this broker it follows.
                    info!(partition = %change.tp, "ISR changed, completing a reassignment; a new leader was elected");
                    leader.change_failed(change);
                } else {
                    warn!(partition = %change.tp, code = partition.error_code, "ISR change refused");
                    leader.change_failed(change);
                }
            }
        }
    }
}

async fn fail_all(leader: &LeaderReplication, batch: &[IsrChange]) {
    for change in batch {
        leader.change_failed(change);
    }
    tokio::time::sleep(BACKOFF).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::TopicPartition;

    #[test]
    fn changes_are_grouped_by_topic_id() {
        let change = |topic: &str, id, partition, isr: &[i32]| IsrChange {
            tp: TopicPartition::new(topic, partition),
            topic_id: id,
            leader_epoch: 2,
            partition_epoch: 5,
            new_isr: isr.to_vec(),
        };
        let changes = [
            change("a", 1, 0, &[1, 2]),
            change("b", 2, 0, &[1]),
            change("a", 1, 3, &[1, 3]),
        ];
        let request = request(1, 44, &changes);
        assert_eq!((request.broker_id.0, request.broker_epoch), (1, 44));
        assert_eq!(request.topics.len(), 2);
        let a = &request.topics[0];
        assert_eq!(a.topic_id.as_u128(), 1);
        let indexes: Vec<i32> = a.partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(indexes, vec![0, 3]);
        assert_eq!(a.partitions[1].new_isr, vec![BrokerId(1), BrokerId(3)]);
        assert_eq!(a.partitions[1].partition_epoch, 5);
    }
}
