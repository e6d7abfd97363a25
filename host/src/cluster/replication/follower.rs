//! Leader or follower, partition by partition, as the metadata image says
//! (Kafka's `ReplicaManager.applyDelta` and its ReplicaFetcherManager).
//!
//! After every applied change (and once a second, to retry what failed):
//! - a partition this broker leads becomes led in its leader epoch
//!   (`LogStore::become_leader`: the epoch starts at the log end offset
//!   and is stamped on every batch appended from now on);
//! - a partition this broker is a replica of, led by another broker, is
//!   followed by that leader's fetcher ([`fetcher::Fetcher`], one per
//!   leader broker), which learns the leader epoch to fetch in;
//! - a fetcher with nothing left to follow stops.
//!
//! Nothing is done before the image has caught up with this start of the
//! broker (the reconciler's test): an older image may name old leaders.
//! The logs themselves are created by the reconciler; a fetcher retries
//! until the log is there.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use super::fetcher::{FetchSettings, Fetcher, FollowerHighWatermarks, Target, Targets};
use super::leader_channel::{InterBroker, LeaderChannel};
use crate::cluster::command::{Uuid, NO_LEADER};
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::cluster::reconciler::caught_up;
use crate::config::BrokerConfig;
use crate::log::{LogStore, TopicPartition};
use crate::replica::EpochEnds;
use crate::services::Services;

/// The leader side's lookup of where an epoch ends (for a follower's
/// diverging epoch), from the partition's epoch cache.
pub struct LogEpochs(pub Arc<dyn LogStore>);

impl EpochEnds for LogEpochs {
    fn end_offset_for(&self, tp: &TopicPartition, epoch: i32) -> Option<(i32, i64)> {
        self.0
            .end_offset_for_epoch(tp, epoch)
            .ok()
            .filter(|(epoch, end)| *epoch >= 0 && *end >= 0)
    }
}

/// How often failed steps are retried without a metadata change.
const RETRY: Duration = Duration::from_secs(1);

/// What the follower manager runs with.
pub struct Replication {
    pub quorum: Arc<dyn Quorum<MetadataImage>>,
    pub node_id: i32,
    /// This start's registration, for the caught-up test.
    pub incarnation: Uuid,
    pub services: Arc<Services>,
    /// `inter.broker.listener.name` (where leaders are fetched from) and
    /// the login there.
    pub inter_broker: InterBroker,
    /// This broker's epoch (-1 until registered), sent in every fetch.
    pub broker_epoch: Arc<AtomicI64>,
    pub settings: FetchSettings,
    pub high_watermarks: Arc<FollowerHighWatermarks>,
}

/// Kafka's `replica.fetch.*` and `replica.socket.timeout.ms` from the
/// broker config, with Kafka's defaults.
pub fn settings(config: &BrokerConfig) -> FetchSettings {
    let defaults = FetchSettings::default();
    let int = |name: &str, default: i32| {
        config
            .get(name)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|v| *v >= 0)
            .unwrap_or(default)
    };
    let millis = |name: &str, default: Duration| {
        config.millis(name, u64::try_from(default.as_millis()).unwrap_or(u64::MAX))
    };
    FetchSettings {
        max_wait: millis("replica.fetch.wait.max.ms", defaults.max_wait),
        min_bytes: int("replica.fetch.min.bytes", defaults.min_bytes),
        max_bytes: int("replica.fetch.response.max.bytes", defaults.max_bytes),
        partition_max_bytes: int("replica.fetch.max.bytes", defaults.partition_max_bytes),
        backoff: millis("replica.fetch.backoff.ms", defaults.backoff),
        socket_timeout: millis("replica.socket.timeout.ms", defaults.socket_timeout),
    }
}

/// The roles `image` gives `node_id`: the partitions it leads with their
/// epochs, and those it follows, by leader.
pub fn roles(
    image: &MetadataImage,
    node_id: i32,
) -> (BTreeMap<TopicPartition, i32>, BTreeMap<i32, Targets>) {
    let mut led = BTreeMap::new();
    let mut followed: BTreeMap<i32, Targets> = BTreeMap::new();
    for topic in image.topics().iter() {
        for (index, partition) in &topic.partitions {
            if !partition.replicas.contains(&node_id) {
                continue;
            }
            let tp = TopicPartition::new(topic.name.clone(), *index);
            if partition.leader == node_id {
                led.insert(tp, partition.leader_epoch);
            } else if partition.leader != NO_LEADER {
                followed.entry(partition.leader).or_default().insert(
                    tp,
                    Target {
                        topic_id: topic.id.0,
                        leader_epoch: partition.leader_epoch,
                    },
                );
            }
        }
    }
    (led, followed)
}

impl Replication {
    /// Runs until `stopped`.
    pub async fn run(self, mut stopped: watch::Receiver<bool>) {
        let mut applied = self.quorum.watch();
        // The epochs each led partition was made leader in.
        let mut led_in: HashMap<TopicPartition, i32> = HashMap::new();
        let mut fetchers: HashMap<i32, watch::Sender<Targets>> = HashMap::new();
        loop {
            let image = self.quorum.image();
            if caught_up(&image, self.node_id, self.incarnation) {
                let (led, followed) = roles(&image, self.node_id);
                self.lead(&led, &mut led_in).await;
                fetchers.retain(|leader, targets| {
                    let keep = followed.contains_key(leader);
                    if !keep {
                        info!(
                            leader,
                            "no partition left to follow there: stopping its fetcher"
                        );
                        for tp in targets.borrow().keys() {
                            self.high_watermarks.forget(tp);
                        }
                    }
                    keep
                });
                for (leader, targets) in followed {
                    match fetchers.get(&leader) {
                        Some(sender) => {
                            let before = sender.borrow().clone();
                            for tp in before.keys().filter(|tp| !targets.contains_key(*tp)) {
                                self.high_watermarks.forget(tp);
                            }
                            sender.send_if_modified(|current| {
                                let changed = *current != targets;
                                *current = targets;
                                changed
                            });
                        }
                        None => {
                            let (sender, receiver) = watch::channel(targets);
                            self.spawn_fetcher(leader, receiver);
                            fetchers.insert(leader, sender);
                        }
                    }
                }
            }
            tokio::select! {
                changed = applied.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RETRY) => {}
                _ = stopped.changed() => return,
            }
        }
    }

    /// Makes this broker the leader of `led` in their epochs; a failure
    /// (the log not created yet) is retried on the next pass.
    async fn lead(
        &self,
        led: &BTreeMap<TopicPartition, i32>,
        led_in: &mut HashMap<TopicPartition, i32>,
    ) {
        led_in.retain(|tp, _| led.contains_key(tp));
        let due: Vec<(TopicPartition, i32)> = led
            .iter()
            .filter(|(tp, epoch)| led_in.get(*tp) != Some(*epoch))
            .map(|(tp, epoch)| (tp.clone(), *epoch))
            .collect();
        if due.is_empty() {
            return;
        }
        let services = Arc::clone(&self.services);
        let high_watermarks = Arc::clone(&self.high_watermarks);
        let done =
            tokio::task::spawn_blocking(move || {
                due.into_iter()
                .filter(|(tp, epoch)| match services.logs.become_leader(tp, *epoch) {
                    Ok(()) => {
                        let high_watermark = high_watermarks.get(tp);
                        info!(partition = %tp, leader_epoch = epoch, ?high_watermark, "leading the partition");
                        if let Some(high_watermark) = high_watermark {
                            services.replica.seed_high_watermark(tp, high_watermark);
                        }
                        true
                    }
                    Err(error) => {
                        tracing::debug!(partition = %tp, %error, "cannot lead yet");
                        false
                    }
                })
                .collect::<Vec<_>>()
            })
            .await;
        match done {
            Ok(done) => led_in.extend(done),
            Err(error) => warn!(%error, "becoming leader failed"),
        }
    }

    fn spawn_fetcher(&self, leader: i32, targets: watch::Receiver<Targets>) {
        info!(leader, "starting a replica fetcher");
        let fetcher = Fetcher {
            node_id: self.node_id,
            leader,
            broker_epoch: Arc::clone(&self.broker_epoch),
            services: Arc::clone(&self.services),
            settings: self.settings,
            high_watermarks: Arc::clone(&self.high_watermarks),
            targets,
            channel: LeaderChannel::new(
                Arc::clone(&self.quorum),
                leader,
                self.inter_broker.clone(),
                self.node_id,
                self.settings.socket_timeout,
            ),
        };
        tokio::spawn(fetcher.run());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::testing::Log;

    #[test]
    fn each_replica_leads_or_follows_its_partitions() {
        let mut log = Log::with_brokers(3);
        log.topic("a", &[&[1, 2, 3], &[2, 3, 1], &[3, 1]]);
        log.topic("b", &[&[2, 3]]);
        let (led, followed) = roles(&log.image, 1);
        assert_eq!(
            led.keys().cloned().collect::<Vec<_>>(),
            [TopicPartition::new("a", 0)]
        );
        let by_leader: Vec<(i32, Vec<TopicPartition>)> = followed
            .iter()
            .map(|(leader, targets)| (*leader, targets.keys().cloned().collect()))
            .collect();
        assert_eq!(
            by_leader,
            [
                (2, vec![TopicPartition::new("a", 1)]),
                (3, vec![TopicPartition::new("a", 2)])
            ]
        );
        let (led, followed) = roles(&log.image, 9);
        assert!(led.is_empty() && followed.is_empty());
    }
}
