//! The broker's side of the metadata log for topics (Kafka's
//! `BrokerMetadataPublisher` handing topic deltas to the ReplicaManager):
//! after every applied change, the local topic store and partition logs
//! are made to match the image.
//!
//! Every topic of the image is recorded in the local TopicManager (which
//! the rest of the host reads: transactions, groups, configs), with the
//! logs of the partitions this broker is a replica of; a topic gone from
//! the image goes from here, data and all. Planning is pure ([`plan`]);
//! carrying it out touches disks and runs off the async workers.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;
use tracing::warn;

use crate::cluster::command::ConfigResource;
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::metadata::topics::{Topic, TopicManager};

/// What to change locally so the topics match an image.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Topics to record (new or changed), with the partitions this broker
    /// holds a replica of.
    pub adopt: Vec<(Topic, Vec<i32>)>,
    /// Topics to delete here.
    pub forget: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.adopt.is_empty() && self.forget.is_empty()
    }
}

/// The changes that bring `known` (the local topics) to `image`'s.
pub fn plan(image: &MetadataImage, node_id: i32, known: &[Topic]) -> Plan {
    let mut plan = Plan::default();
    for topic in image.topics().iter() {
        let wanted = Topic {
            name: topic.name.clone(),
            id: topic.id.0,
            partitions: topic.partition_count(),
            configs: image
                .configs()
                .get(&ConfigResource::Topic(topic.name.clone()))
                .clone(),
        };
        if known.contains(&wanted) {
            continue;
        }
        let local = topic
            .partitions
            .iter()
            .filter(|(_, p)| p.replicas.contains(&node_id))
            .map(|(index, _)| *index)
            .collect();
        plan.adopt.push((wanted, local));
    }
    let in_image: BTreeSet<&str> = image.topics().iter().map(|t| t.name.as_str()).collect();
    plan.forget = known
        .iter()
        .filter(|k| !in_image.contains(k.name.as_str()))
        .map(|k| k.name.clone())
        .collect();
    plan
}

/// Carries out a plan; failures are logged and retried on the next change.
pub fn apply(plan: Plan, topics: &TopicManager, on_deleted: &dyn Fn(&str)) {
    for name in plan.forget {
        match topics.delete(&name) {
            Ok(_) => on_deleted(&name),
            Err(error) => warn!(topic = %name, "removing a deleted topic: {}", error.message),
        }
    }
    for (topic, local) in plan.adopt {
        let name = topic.name.clone();
        if let Err(error) = topics.adopt(topic, &local) {
            warn!(topic = %name, "creating the topic's partitions: {}", error.message);
        }
    }
}

/// Reconciles after every applied change until `stopped`.
pub async fn run(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    topics: Arc<TopicManager>,
    on_deleted: Arc<dyn Fn(&str) + Send + Sync>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut applied = quorum.watch();
    loop {
        let image = quorum.image();
        let plan = plan(&image, node_id, &topics.list());
        if !plan.is_empty() {
            let topics = Arc::clone(&topics);
            let on_deleted = Arc::clone(&on_deleted);
            let _ = tokio::task::spawn_blocking(move || apply(plan, &topics, on_deleted.as_ref()))
                .await;
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = stopped.changed() => return,
        }
    }
}
