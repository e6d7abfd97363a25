//! The metadata image as the leader's [`PartitionSource`]: leader, epochs
//! and ISR from the replicated image, `min.insync.replicas` from the
//! topic's effective configs (the topic override, else the broker's),
//! which brokers may join an ISR from their registrations.

use std::sync::Arc;

use super::leader::{PartitionInfo, PartitionSource};
use crate::cluster::image::{MetadataImage, PartitionRegistration};
use crate::cluster::quorum::Quorum;
use crate::log::TopicPartition;
use crate::metadata::topics::TopicManager;

pub struct ImagePartitions {
    pub quorum: Arc<dyn Quorum<MetadataImage>>,
    pub topics: Arc<TopicManager>,
}

fn info(topic_id: u128, partition: &PartitionRegistration) -> PartitionInfo {
    PartitionInfo {
        topic_id,
        leader: partition.leader,
        leader_epoch: partition.leader_epoch,
        partition_epoch: partition.partition_epoch,
        replicas: partition.replicas.clone(),
        isr: partition.isr.clone(),
    }
}

impl PartitionSource for ImagePartitions {
    fn partition(&self, tp: &TopicPartition) -> Option<PartitionInfo> {
        let image = self.quorum.image();
        let topic = image.topics().get(&tp.topic)?;
        Some(info(topic.id.0, topic.partition(tp.partition)?))
    }

    fn led_by(&self, node: i32) -> Vec<(TopicPartition, PartitionInfo)> {
        let image = self.quorum.image();
        image
            .topics()
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .filter(|(_, p)| p.leader == node)
                    .map(|(index, p)| {
                        (
                            TopicPartition::new(&topic.name, *index),
                            info(topic.id.0, p),
                        )
                    })
            })
            .collect()
    }

    fn min_insync_replicas(&self, topic: &str) -> usize {
        self.topics
            .configs(topic)
            .and_then(|configs| {
                configs
                    .into_iter()
                    .find(|config| config.name == "min.insync.replicas")
                    .and_then(|config| config.value.parse().ok())
            })
            .unwrap_or(1)
    }

    fn may_join_isr(&self, id: i32) -> bool {
        self.quorum.image().cluster().is_active(id)
    }
}
