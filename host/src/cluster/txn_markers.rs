//! Transaction markers for partitions led by other brokers (Kafka's
//! `TransactionMarkerChannelManager`): the transaction coordinator
//! completing a transaction sends each marker whose partition another
//! broker leads to that leader as a real WriteTxnMarkers request (v1, one
//! marker and one partition per request), on the leader's inter-broker
//! listener (logged in first when it is SASL_PLAINTEXT, through the same
//! [`LeaderChannel`] the replica fetchers use), where the
//! `write_txn_markers` module serves it (authorized as CLUSTER_ACTION).
//! Where each partition is led comes from the metadata image at the time
//! of the send.
//!
//! A send that fails (no connection, no answer in time) is
//! NOT_LEADER_OR_FOLLOWER for the coordinator, which keeps the
//! transaction prepared and retries, as Kafka's channel manager retries
//! until the marker is written or the partition is gone. One connection
//! per leader, reused; sends to one leader go one at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::runtime::Handle;

use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::cluster::replication::leader_channel::{InterBroker, LeaderChannel};
use crate::error_code::ErrorCode;
use crate::log::TopicPartition;
use crate::transactions::MarkerRoute;

/// The WriteTxnMarkers version sent (Kafka 4's oldest and newest).
const VERSION: i16 = 1;

pub struct MarkerChannels {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    /// `inter.broker.listener.name` and the login there.
    inter_broker: InterBroker,
    timeout: Duration,
    runtime: Handle,
    channels: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<LeaderChannel>>>>,
}

impl MarkerChannels {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        node_id: i32,
        inter_broker: InterBroker,
        timeout: Duration,
        runtime: Handle,
    ) -> Self {
        Self {
            quorum,
            node_id,
            inter_broker,
            timeout,
            runtime,
            channels: Mutex::new(HashMap::new()),
        }
    }

    fn channel(&self, leader: i32) -> Arc<tokio::sync::Mutex<LeaderChannel>> {
        let mut channels = crate::sync::lock(&self.channels);
        Arc::clone(channels.entry(leader).or_insert_with(|| {
            Arc::new(tokio::sync::Mutex::new(LeaderChannel::new(
                Arc::clone(&self.quorum),
                leader,
                self.inter_broker.clone(),
                self.node_id,
                self.timeout,
            )))
        }))
    }
}

/// The one marker's request.
fn request(
    partition: &TopicPartition,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> WriteTxnMarkersRequest {
    let topic = WritableTxnMarkerTopic::default()
        .with_name(TopicName(StrBytes::from_string(partition.topic.clone())))
        .with_partition_indexes(vec![partition.partition]);
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_transaction_result(commit)
        .with_topics(vec![topic])
        .with_coordinator_epoch(coordinator_epoch);
    WriteTxnMarkersRequest::default().with_markers(vec![marker])
}

impl MarkerRoute for MarkerChannels {
    fn leader(&self, partition: &TopicPartition) -> Option<i32> {
        let image = self.quorum.image();
        let topic = image.topic(&partition.topic)?;
        topic.partitions.get(&partition.partition).map(|p| p.leader)
    }

    fn partitions(&self, topic: &str) -> Option<i32> {
        self.quorum
            .image()
            .topic(topic)
            .map(|t| t.partition_count())
    }

    fn this_broker(&self) -> i32 {
        self.node_id
    }

    fn send(
        &self,
        leader: i32,
        partition: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        let channel = self.channel(leader);
        let request = request(partition, producer_id, epoch, commit, coordinator_epoch);
        let exchange = async move {
            let mut channel = channel.lock().await;
            channel.send(&request, VERSION).await
        };
        let answer = match Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(|| self.runtime.block_on(exchange)),
            Err(_) => self.runtime.block_on(exchange),
        };
        let response = match answer {
            Ok(response) => response,
            Err(why) => {
                tracing::warn!(leader, topic = %partition.topic, partition = partition.partition, "sending a transaction marker failed: {why}");
                return ErrorCode::NotLeaderOrFollower.code();
            }
        };
        response
            .markers
            .iter()
            .filter(|m| m.producer_id.0 == producer_id)
            .flat_map(|m| &m.topics)
            .filter(|t| t.name.0.as_str() == partition.topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition.partition)
            .map_or(ErrorCode::UnknownServerError.code(), |p| p.error_code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_marker_one_partition() {
        let r = request(&TopicPartition::new("out", 3), 7, 2, true, 4);
        assert_eq!(r.markers.len(), 1);
        let m = &r.markers[0];
        assert_eq!(
            (
                m.producer_id.0,
                m.producer_epoch,
                m.transaction_result,
                m.coordinator_epoch
            ),
            (7, 2, true, 4)
        );
        assert_eq!(m.topics[0].name.0.as_str(), "out");
        assert_eq!(m.topics[0].partition_indexes, vec![3]);
    }
}
