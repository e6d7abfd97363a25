//! The coordinators on a cluster node, driven by the metadata image
//! (Kafka's `BrokerMetadataPublisher` calling each coordinator's
//! `onElection` and `onResignation`): the group coordinator for the
//! partitions of `__consumer_offsets`, the transaction coordinator for
//! those of `__transaction_state`; and the acks=all wait of their writes.
//!
//! After every applied change, the partitions of each topic this broker
//! leads (with their leader epochs) are compared with the last ones seen:
//! a partition newly led, or led at a new epoch, is handed to its
//! coordinator to load; one no longer led is dropped ([`Elected`]).
//! Nothing is done before the image has caught up with this start of the
//! broker (as the reconciler): a stale image could name it the leader of
//! a partition that moved while it was down.
//!
//! An offset commit is answered once the in-sync replicas of its partition
//! have it: `offsets.commit.required.acks` (Kafka's default -1; 1 answers
//! after the leader's write) within `offsets.commit.timeout.ms`, the
//! write's errors mapped as Kafka's GroupMetadataManager maps them. A
//! transaction state write waits the same way, always for the ISR (Kafka's
//! TransactionStateManager appends with `requiredAcks = -1`), within
//! `transaction.state.log.write.timeout.ms` (5 s).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use tokio::sync::watch;

use crate::cluster::command::Uuid;
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::cluster::reconciler::caught_up;
use crate::cluster::replication::leader::LeaderReplication;
use crate::config::BrokerConfig;
use crate::coordinator::offsets_topic::TOPIC;
use crate::coordinator::{GroupCoordinator, ReplicationWait, Waiting};
use crate::error_code::ErrorCode;
use crate::log::TopicPartition;
use crate::transactions::{SharedEffects, TransactionStore};

/// Kafka's `offsets.commit.required.acks`.
pub const REQUIRED_ACKS: &str = "offsets.commit.required.acks";
/// Kafka's `offsets.commit.timeout.ms`.
pub const COMMIT_TIMEOUT_MS: &str = "offsets.commit.timeout.ms";
const DEFAULT_COMMIT_TIMEOUT_MS: u64 = 5_000;
/// How long a `__transaction_state` write waits for the ISR.
pub const TXN_WRITE_TIMEOUT_MS: &str = "transaction.state.log.write.timeout.ms";

/// The partitions of `topic` `node_id` leads, by leader epoch, and the
/// topic's partition count (0 when it does not exist).
pub fn led_partitions(
    image: &MetadataImage,
    topic: &str,
    node_id: i32,
) -> (BTreeMap<i32, i32>, i32) {
    let Some(topic) = image.topic(topic) else {
        return (BTreeMap::new(), 0);
    };
    let led = topic
        .partitions
        .iter()
        .filter(|(_, p)| p.leader == node_id)
        .map(|(index, p)| (*index, p.leader_epoch))
        .collect();
    (led, topic.partition_count())
}

/// A coordinator whose state is partitioned over an internal topic.
pub trait Elected: Send + Sync {
    /// The internal topic.
    fn topic(&self) -> &'static str;
    /// This broker leads `partition` (of `partitions`) at `epoch`.
    fn elected(&self, partition: i32, epoch: i32, partitions: i32);
    /// This broker no longer leads `partition`.
    fn resigned(&self, partition: i32);
}

/// The group coordinator on `__consumer_offsets`.
pub struct Groups(pub Arc<GroupCoordinator>);

impl Elected for Groups {
    fn topic(&self) -> &'static str {
        TOPIC
    }
    fn elected(&self, partition: i32, epoch: i32, partitions: i32) {
        self.0.on_elected(partition, epoch, partitions);
    }
    fn resigned(&self, partition: i32) {
        self.0.on_resigned(partition);
    }
}

/// The transaction coordinator on `__transaction_state`, with what it
/// completes a loaded partition's prepared transactions through.
pub struct Transactions {
    pub store: Arc<TransactionStore>,
    pub effects: SharedEffects,
}

impl Elected for Transactions {
    fn topic(&self) -> &'static str {
        crate::transactions::state_topic::TOPIC
    }
    fn elected(&self, partition: i32, epoch: i32, _partitions: i32) {
        self.store
            .on_elected(partition, epoch, Arc::clone(&self.effects));
    }
    fn resigned(&self, partition: i32) {
        self.store.on_resigned(partition);
    }
}

/// Follows the image until `stopped`, electing and resigning each
/// coordinator's partitions as their leadership changes.
pub async fn run(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    incarnation: Uuid,
    coordinators: Vec<Box<dyn Elected>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut applied = quorum.watch();
    let mut led: Vec<BTreeMap<i32, i32>> = vec![BTreeMap::new(); coordinators.len()];
    loop {
        let image = quorum.image();
        if caught_up(&image, node_id, incarnation) {
            for (coordinator, led) in coordinators.iter().zip(led.iter_mut()) {
                let (now, partitions) = led_partitions(&image, coordinator.topic(), node_id);
                for (partition, epoch) in &now {
                    if led.get(partition) != Some(epoch) {
                        coordinator.elected(*partition, *epoch, partitions);
                    }
                }
                for partition in led.keys().filter(|p| !now.contains_key(p)) {
                    coordinator.resigned(*partition);
                }
                *led = now;
            }
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = stopped.changed() => return,
        }
    }
}

/// The leader side of replication, as what a coordinator's writes to its
/// topic wait on.
pub struct IsrWait {
    topic: &'static str,
    replication: Arc<LeaderReplication>,
    timeout: Duration,
    /// -1: wait for the ISR; 1: the leader's write is the answer.
    required_acks: i16,
}

impl IsrWait {
    pub fn new(config: &BrokerConfig, replication: Arc<LeaderReplication>) -> Result<Self> {
        let required_acks = match config.get(REQUIRED_ACKS).map(str::trim) {
            None => -1,
            Some(raw) => match raw.parse::<i16>() {
                Ok(acks @ (-1 | 1)) => acks,
                _ => bail!("{REQUIRED_ACKS}={raw}: must be -1 or 1"),
            },
        };
        Ok(Self {
            topic: TOPIC,
            replication,
            timeout: config.millis(COMMIT_TIMEOUT_MS, DEFAULT_COMMIT_TIMEOUT_MS),
            required_acks,
        })
    }

    /// `__transaction_state`'s writes: always acks=all, within
    /// `transaction.state.log.write.timeout.ms` (5 s, as offset commits).
    pub fn transaction_state(config: &BrokerConfig, replication: Arc<LeaderReplication>) -> Self {
        Self {
            topic: crate::transactions::state_topic::TOPIC,
            replication,
            timeout: config.millis(TXN_WRITE_TIMEOUT_MS, DEFAULT_COMMIT_TIMEOUT_MS),
            required_acks: -1,
        }
    }
}

impl ReplicationWait for IsrWait {
    fn replicated(&self, partition: i32, end_offset: i64) -> Waiting {
        let replication = Arc::clone(&self.replication);
        let timeout = self.timeout;
        let required_acks = self.required_acks;
        let topic = self.topic;
        Box::pin(async move {
            let tp = TopicPartition::new(topic, partition);
            // Not led here (any more, or not yet on the replication side).
            if replication.high_watermark(&tp).is_none() {
                return ErrorCode::NotCoordinator.code();
            }
            if required_acks != -1 || !replication.must_wait(&tp, end_offset) {
                return ErrorCode::None.code();
            }
            let min_isr = replication.min_insync_replicas(topic);
            let code = replication
                .await_replicated(&tp, end_offset, min_isr, timeout)
                .await;
            commit_error(code).code()
        })
    }
}

/// Kafka's mapping of a failed `__consumer_offsets` write to what the
/// commit is answered with.
fn commit_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_writes_are_answered_as_kafka_answers_commits() {
        assert_eq!(
            commit_error(ErrorCode::RequestTimedOut),
            ErrorCode::CoordinatorNotAvailable
        );
        assert_eq!(
            commit_error(ErrorCode::NotEnoughReplicasAfterAppend),
            ErrorCode::CoordinatorNotAvailable
        );
        assert_eq!(
            commit_error(ErrorCode::NotLeaderOrFollower),
            ErrorCode::NotCoordinator
        );
        assert_eq!(commit_error(ErrorCode::None), ErrorCode::None);
    }
}
