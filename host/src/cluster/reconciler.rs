//! The broker's side of the metadata log for topics (Kafka's
//! `BrokerMetadataPublisher` handing topic deltas to the ReplicaManager):
//! after every applied change, the local topic store and partition logs
//! are made to match the image.
//!
//! Every topic of the image is recorded in the local TopicManager (which
//! the rest of the host reads: transactions, groups, configs), with the
//! logs of the partitions this broker is a replica of; a topic gone from
//! the image goes from here, data and all. Planning is pure ([`plan`],
//! [`strays`]); carrying it out touches disks and runs off the async
//! workers.
//!
//! Nothing is done before the image has caught up: after a restart the
//! image is the last snapshot until the leader's log is re-applied, and
//! acting on it would delete topics created since (or an older
//! incarnation's data would replace the current one). Caught up is
//! Kafka's test: the image holds this broker's own registration, which
//! the leader appended after everything committed before it. Then, once,
//! the stray logs go: partitions found on disk that the image does not
//! make this broker a replica of (their topic deleted while it was down,
//! or placed elsewhere). That is Kafka's behaviour since 3.7 (KAFKA-14616,
//! KAFKA-16234: stray replicas are found on the first metadata publish and
//! deleted); Kafka matches logs by the topic id of `partition.metadata`,
//! Gregor's logs carry none, so a topic recreated under the same name is
//! told apart by the topic id of the local store ([`TopicManager::adopt`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;
use tracing::warn;

use crate::cluster::command::{ConfigResource, Uuid};
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::log::TopicPartition;
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

/// The logs among `local` that `image` gives `node_id` no replica of.
pub fn strays(
    image: &MetadataImage,
    node_id: i32,
    local: &[TopicPartition],
) -> Vec<TopicPartition> {
    local
        .iter()
        .filter(|tp| {
            image
                .partition(&tp.topic, tp.partition)
                .is_none_or(|p| !p.replicas.contains(&node_id))
        })
        .cloned()
        .collect()
}

/// Whether `image` has caught up with this start of the broker: it holds
/// the registration of this incarnation.
pub fn caught_up(image: &MetadataImage, node_id: i32, incarnation: Uuid) -> bool {
    image
        .cluster()
        .broker(node_id)
        .is_some_and(|broker| broker.incarnation_id == incarnation)
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

/// Reconciles after every applied change until `stopped`, from the
/// moment the image holds `incarnation`'s registration; the stray logs go
/// on the first pass.
pub async fn run(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    incarnation: Uuid,
    topics: Arc<TopicManager>,
    on_deleted: Arc<dyn Fn(&str) + Send + Sync>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut applied = quorum.watch();
    let mut first = true;
    loop {
        let image = quorum.image();
        if caught_up(&image, node_id, incarnation) {
            let plan = plan(&image, node_id, &topics.list());
            let sweep = std::mem::take(&mut first);
            if !plan.is_empty() || sweep {
                let topics = Arc::clone(&topics);
                let on_deleted = Arc::clone(&on_deleted);
                let quorum = Arc::clone(&quorum);
                let _ = tokio::task::spawn_blocking(move || {
                    apply(plan, &topics, on_deleted.as_ref());
                    if sweep {
                        remove_strays(quorum.as_ref(), node_id, &topics);
                    }
                })
                .await;
            }
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = stopped.changed() => return,
        }
    }
}

/// Removes the stray logs; a failure is logged (they are looked for again
/// at the next start). The logs are listed before the image is taken: a
/// log created meanwhile (a CreateTopics through this broker adopts at
/// once) came from an image no newer than that one, so it is not taken
/// for a stray.
fn remove_strays(quorum: &dyn Quorum<MetadataImage>, node_id: i32, topics: &TopicManager) {
    let local = topics.local_partitions();
    let stray = strays(&quorum.image(), node_id, &local);
    if stray.is_empty() {
        return;
    }
    warn!(
        count = stray.len(),
        "removing stray partition logs (not replicas of this broker in the metadata image)"
    );
    if let Err(error) = topics.remove_logs(&stray) {
        warn!("removing stray partition logs: {}", error.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::testing::Log;

    #[test]
    fn strays_are_the_logs_the_image_places_elsewhere_or_nowhere() {
        let mut log = Log::with_brokers(3);
        log.topic("a", &[&[1, 2], &[2, 3]]);
        let local: Vec<TopicPartition> = [("a", 0), ("a", 1), ("gone", 0), ("a", 5)]
            .iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect();
        let expect = |names: &[(&str, i32)]| -> Vec<TopicPartition> {
            names
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect()
        };
        assert_eq!(
            strays(&log.image, 1, &local),
            expect(&[("a", 1), ("gone", 0), ("a", 5)])
        );
        assert_eq!(
            strays(&log.image, 2, &local),
            expect(&[("gone", 0), ("a", 5)])
        );
        // A broker the image gives nothing: every log is stray.
        assert_eq!(strays(&log.image, 9, &local), local);
    }

    #[test]
    fn caught_up_once_this_incarnation_is_registered() {
        let mut log = Log::default();
        assert!(!caught_up(&log.image, 1, Uuid(1)));
        // A stale image holds the previous incarnation's registration.
        log.register(1);
        assert!(caught_up(&log.image, 1, Uuid(1)));
        assert!(!caught_up(&log.image, 1, Uuid(2)));
        assert!(!caught_up(&log.image, 2, Uuid(1)));
    }
}
