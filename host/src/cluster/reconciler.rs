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
//!
//! Replica sets change without the topic changing (a reassignment, KIP-455):
//! every pass also creates the log of each partition the image newly makes
//! this broker a replica of (its leader's fetcher fills it), and deletes the
//! log of each partition of a topic in the image that no longer has a
//! replica here (a reassignment moved it away). Deleting is only done by
//! the reconciler's own passes, once caught up; the passes a request runs
//! at once ([`sync`], so a client's next request finds its topic) create
//! but never delete. Every pass reads the image and changes the logs under
//! the TopicManager's reconcile hold, so a pass planned on an older image
//! cannot re-create a log a newer one just deleted.

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
    /// Partitions of unchanged topics whose logs are to be created here
    /// (a replica newly placed on this broker).
    pub open: Vec<(String, Vec<i32>)>,
    /// Logs of topics in the image that no longer have a replica here.
    pub remove: Vec<TopicPartition>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.adopt.is_empty()
            && self.forget.is_empty()
            && self.open.is_empty()
            && self.remove.is_empty()
    }
}

/// Whether the replicas are to be deleted too ([`apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The reconciler's own passes, on an image caught up.
    Remove,
    /// A pass a request runs at once: create, never delete.
    Keep,
}

/// The changes that bring `known` (the local topics) and `local` (the
/// partition logs here) to `image`'s.
pub fn plan(
    image: &MetadataImage,
    node_id: i32,
    known: &[Topic],
    local: &[TopicPartition],
) -> Plan {
    let mut plan = Plan::default();
    for topic in image.topics().iter() {
        let replicas_here = || -> Vec<i32> {
            topic
                .partitions
                .iter()
                .filter(|(_, p)| p.replicas.contains(&node_id))
                .map(|(index, _)| *index)
                .collect()
        };
        plan.remove.extend(
            local
                .iter()
                .filter(|tp| tp.topic == topic.name)
                .filter(|tp| {
                    topic
                        .partition(tp.partition)
                        .is_none_or(|p| !p.replicas.contains(&node_id))
                })
                .cloned(),
        );
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
            let missing: Vec<i32> = replicas_here()
                .into_iter()
                .filter(|index| {
                    local
                        .binary_search(&TopicPartition::new(&topic.name, *index))
                        .is_err()
                })
                .collect();
            if !missing.is_empty() {
                plan.open.push((topic.name.clone(), missing));
            }
            continue;
        }
        plan.adopt.push((wanted, replicas_here()));
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

/// Brings the local topics and logs to the quorum's image now, under the
/// TopicManager's reconcile hold (the image is read inside it).
pub fn sync(
    quorum: &dyn Quorum<MetadataImage>,
    node_id: i32,
    topics: &TopicManager,
    removal: Removal,
    on_deleted: &dyn Fn(&str),
) {
    let _hold = topics.reconcile_hold();
    let mut plan = plan(
        &quorum.image(),
        node_id,
        &topics.list(),
        &topics.local_partitions(),
    );
    if removal == Removal::Keep {
        plan.remove.clear();
    }
    apply(plan, topics, on_deleted);
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
    for (name, partitions) in plan.open {
        if let Err(error) = topics.open_replicas(&name, &partitions) {
            warn!(topic = %name, ?partitions, "creating new replicas' logs: {}", error.message);
        }
    }
    if !plan.remove.is_empty() {
        if let Err(error) = topics.remove_logs(&plan.remove) {
            warn!(partitions = ?plan.remove, "removing logs of replicas moved away: {}", error.message);
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
            let due = !plan(&image, node_id, &topics.list(), &topics.local_partitions()).is_empty();
            let sweep = std::mem::take(&mut first);
            if due || sweep {
                let topics = Arc::clone(&topics);
                let on_deleted = Arc::clone(&on_deleted);
                let quorum = Arc::clone(&quorum);
                let done = tokio::task::spawn_blocking(move || {
                    sync(
                        quorum.as_ref(),
                        node_id,
                        &topics,
                        Removal::Remove,
                        on_deleted.as_ref(),
                    );
                    if sweep {
                        remove_strays(quorum.as_ref(), node_id, &topics);
                    }
                })
                .await;
                if let Err(error) = done {
                    warn!(%error, "reconciling the topics failed");
                }
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
    let _hold = topics.reconcile_hold();
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
    fn a_moved_replica_is_created_on_its_new_broker_and_removed_from_the_old() {
        use crate::cluster::command::{Command, PartitionChangeRecord};
        let mut log = Log::with_brokers(3);
        let id = log.topic("a", &[&[1], &[2]]);
        let known = vec![Topic {
            name: "a".to_string(),
            id: id.0,
            partitions: 2,
            configs: Default::default(),
        }];
        let tp = |p| TopicPartition::new("a", p);
        assert!(plan(&log.image, 2, &known, &[tp(1)]).is_empty());
        // a-0 moved from broker 1 to broker 2 (a completed reassignment).
        log.ok(&Command::ChangePartition(PartitionChangeRecord {
            replicas: Some(vec![2]),
            isr: Some(vec![2]),
            leader: Some(2),
            ..PartitionChangeRecord::new(id, 0, 0)
        }));
        let on_two = plan(&log.image, 2, &known, &[tp(1)]);
        assert_eq!(on_two.open, vec![("a".to_string(), vec![0])]);
        assert!(on_two.adopt.is_empty() && on_two.remove.is_empty());
        let on_one = plan(&log.image, 1, &known, &[tp(0)]);
        assert_eq!(on_one.remove, vec![tp(0)]);
        assert!(on_one.open.is_empty() && on_one.adopt.is_empty());
        // A topic not yet known here is adopted with its replicas here.
        let fresh = plan(&log.image, 2, &[], &[]);
        assert_eq!(fresh.adopt.len(), 1);
        assert_eq!(fresh.adopt[0].1, vec![0, 1]);
        assert!(fresh.open.is_empty());
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
