//! The leader side of replication (Kafka's `Partition` as leader): per
//! partition this broker leads, what it knows of each follower, the high
//! watermark, the acks=all waits, and the ISR changes it asks the
//! controller for.
//!
//! The metadata image is the truth for leader, epochs and ISR: every
//! access first compares the image's partition with the state kept here. A
//! new leader epoch starts the state afresh (followers unknown, the
//! watermark at the one this broker last had as a follower, as Kafka's
//! `Partition.makeLeader` keeps the local high watermark; at the log start
//! when it had none); a new partition epoch
//! takes the image's ISR and ends any AlterPartition in flight. So the
//! leader applies an ISR change only once the controller committed it.
//!
//! While an AlterPartition is in flight the high watermark is computed on
//! the *maximal* ISR (the committed one plus a joining follower, the
//! leaving ones still in), as Kafka's PendingExpandIsr/PendingShrinkIsr
//! states do, so the watermark never counts a replica the controller may
//! not have accepted.
//!
//! acks=all waits ([`LeaderReplication::await_replicated`]) are async and
//! suspend only the calling guest: they sleep on a per-partition watch that
//! every watermark or ISR change bumps.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::isr::{self, Follower};
use crate::error_code::ErrorCode;
use crate::log::{LogStore, TopicPartition};
use crate::purgatory::FetchPurgatory;
use crate::replica::{FollowerFetch, PartitionReplication};
use crate::sync::lock;

/// Kafka's `replica.lag.time.max.ms` default.
pub const DEFAULT_LAG_TIME_MAX: Duration = Duration::from_millis(30_000);
/// How long an AlterPartition may stay unanswered before it is sent again.
const ALTER_RETRY: Duration = Duration::from_secs(5);
/// How often an acks=all wait looks at the image even without a change
/// here (a leadership moved by the controller is seen this way).
const WAIT_RECHECK: Duration = Duration::from_millis(100);

/// A partition as the metadata image has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub topic_id: u128,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// Where partitions' leaders and ISRs come from (the metadata image).
pub trait PartitionSource: Send + Sync {
    fn partition(&self, tp: &TopicPartition) -> Option<PartitionInfo>;
    /// Every partition `node` leads.
    fn led_by(&self, node: i32) -> Vec<(TopicPartition, PartitionInfo)>;
    /// The topic's `min.insync.replicas`.
    fn min_insync_replicas(&self, topic: &str) -> usize;
    /// Whether broker `id` may join an ISR (Kafka's
    /// `isReplicaIsrEligible`: registered, not fenced, not in controlled
    /// shutdown); the controller would refuse it with INELIGIBLE_REPLICA.
    fn may_join_isr(&self, id: i32) -> bool;
}

/// An ISR change for the controller (one AlterPartition partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub tp: TopicPartition,
    pub topic_id: u128,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

struct LeaderState {
    leader_epoch: i32,
    partition_epoch: i32,
    topic_id: u128,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    /// The ISR asked for and when, until the image shows a new epoch.
    pending: Option<(Vec<i32>, Instant)>,
    followers: HashMap<i32, Follower>,
    high_watermark: i64,
    /// The leader's LEO when this epoch began.
    epoch_start_offset: i64,
    changed: watch::Sender<()>,
}

impl LeaderState {
    fn new(
        info: &PartitionInfo,
        node: i32,
        high_watermark: i64,
        log_end: i64,
        now: Instant,
    ) -> Self {
        let followers = info
            .replicas
            .iter()
            .filter(|id| **id != node)
            .map(|id| (*id, Follower::new(now)))
            .collect();
        Self {
            leader_epoch: info.leader_epoch,
            partition_epoch: info.partition_epoch,
            topic_id: info.topic_id,
            replicas: info.replicas.clone(),
            isr: info.isr.clone(),
            pending: None,
            followers,
            high_watermark,
            epoch_start_offset: log_end,
            changed: watch::Sender::new(()),
        }
    }

    /// The committed ISR with the pending change's members added.
    fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some((pending, _)) = &self.pending {
            for id in pending {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }

    /// Recomputes the watermark against the leader's LEO; true if it
    /// advanced.
    fn update_high_watermark(&mut self, node: i32, log_end: i64) -> bool {
        let followers = &self.followers;
        let lowest = isr::lowest_end_offset(node, log_end, &self.maximal_isr(), |id| {
            followers.get(&id).map(|f| f.log_end_offset)
        });
        let next = isr::advanced(self.high_watermark, lowest).min(log_end);
        let moved = next > self.high_watermark;
        self.high_watermark = next;
        moved
    }

    fn alone(&self, node: i32) -> bool {
        self.isr == [node] && self.pending.is_none()
    }
}

pub struct LeaderReplication {
    node_id: i32,
    source: Arc<dyn PartitionSource>,
    logs: Arc<dyn LogStore>,
    /// Consumers waiting for data are woken when the watermark moves.
    purgatory: Arc<FetchPurgatory>,
    lag_max: Duration,
    states: Mutex<HashMap<TopicPartition, Arc<Mutex<LeaderState>>>>,
    /// The high watermarks this broker had as a follower of partitions it
    /// now leads: where their watermarks start.
    seeds: Mutex<HashMap<TopicPartition, i64>>,
    /// Where ISR changes go (the AlterPartition sender).
    alter: mpsc::UnboundedSender<IsrChange>,
}

impl LeaderReplication {
    pub fn new(
        node_id: i32,
        source: Arc<dyn PartitionSource>,
        logs: Arc<dyn LogStore>,
        purgatory: Arc<FetchPurgatory>,
        lag_max: Duration,
        alter: mpsc::UnboundedSender<IsrChange>,
    ) -> Self {
        Self {
            node_id,
            source,
            logs,
            purgatory,
            lag_max,
            states: Mutex::new(HashMap::new()),
            seeds: Mutex::new(HashMap::new()),
            alter,
        }
    }

    /// The partition's state as the image has it now, or None when this
    /// broker does not lead it. Applies a new epoch from the image.
    fn state(&self, tp: &TopicPartition) -> Option<Arc<Mutex<LeaderState>>> {
        let Some(info) = self
            .source
            .partition(tp)
            .filter(|p| p.leader == self.node_id)
        else {
            lock(&self.states).remove(tp);
            return None;
        };
        self.state_for(tp, &info)
    }

    fn state_for(
        &self,
        tp: &TopicPartition,
        info: &PartitionInfo,
    ) -> Option<Arc<Mutex<LeaderState>>> {
        let offsets = self.logs.offsets(tp).ok()?;
        let now = Instant::now();
        let start = || {
            let seed = lock(&self.seeds).remove(tp);
            seed.unwrap_or(offsets.log_start_offset)
                .clamp(offsets.log_start_offset, offsets.high_watermark)
        };
        let state = {
            let mut states = lock(&self.states);
            let entry = states.entry(tp.clone()).or_insert_with(|| {
                Arc::new(Mutex::new(LeaderState::new(
                    info,
                    self.node_id,
                    start(),
                    offsets.high_watermark,
                    now,
                )))
            });
            Arc::clone(entry)
        };
        let mut guard = lock(&state);
        if guard.leader_epoch != info.leader_epoch {
            *guard = LeaderState::new(info, self.node_id, start(), offsets.high_watermark, now);
        } else if guard.partition_epoch != info.partition_epoch {
            guard.partition_epoch = info.partition_epoch;
            guard.isr.clone_from(&info.isr);
            guard.replicas.clone_from(&info.replicas);
            guard.pending = None;
            for id in &info.replicas {
                if *id != self.node_id {
                    guard
                        .followers
                        .entry(*id)
                        .or_insert_with(|| Follower::new(now));
                }
            }
            guard.followers.retain(|id, _| info.replicas.contains(id));
            guard.changed.send_replace(());
        }
        if guard.update_high_watermark(self.node_id, offsets.high_watermark) {
            guard.changed.send_replace(());
            self.purgatory.appended(tp);
        }
        drop(guard);
        Some(state)
    }

    /// This broker leads `tp` after following it with `high_watermark`:
    /// its watermark starts there, not at the log start, so what was
    /// committed stays readable across a failover. Every ISR member had
    /// the records below it, so it is never past the new ISR's end.
    pub fn seed_high_watermark(&self, tp: &TopicPartition, high_watermark: i64) {
        lock(&self.seeds).insert(tp.clone(), high_watermark);
        // A state new in this epoch takes the seed itself; one already
        // there (a produce came first) is raised to it.
        let Some(state) = self.state(tp) else {
            return;
        };
        if lock(&self.seeds).remove(tp).is_none() {
            return;
        }
        let Ok(offsets) = self.logs.offsets(tp) else {
            return;
        };
        let mut guard = lock(&state);
        let seeded = high_watermark.min(offsets.high_watermark);
        if seeded > guard.high_watermark {
            guard.high_watermark = seeded;
            guard.changed.send_replace(());
            drop(guard);
            self.purgatory.appended(tp);
        }
    }

    /// The high watermark consumers read up to; None when this broker
    /// does not lead the partition.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        let state = self.state(tp)?;
        let guard = lock(&state);
        Some(guard.high_watermark)
    }

    /// The committed ISR's size, for `min.insync.replicas` (None: not
    /// the leader).
    pub fn isr_size(&self, tp: &TopicPartition) -> Option<usize> {
        let state = self.state(tp)?;
        let guard = lock(&state);
        Some(guard.isr.len())
    }

    pub fn min_insync_replicas(&self, topic: &str) -> usize {
        self.source.min_insync_replicas(topic)
    }

    /// The leader epoch of a partition this broker leads.
    pub fn leader_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        let state = self.state(tp)?;
        let guard = lock(&state);
        Some(guard.leader_epoch)
    }

    /// A follower fetched at `fetch_offset` (its LEO): its state, the
    /// watermark, and an ISR expansion when it caught up.
    /// NOT_LEADER_OR_FOLLOWER when this broker does not lead the partition
    /// or `replica` is not one of its replicas.
    pub fn follower_fetched(
        &self,
        tp: &TopicPartition,
        replica: i32,
        fetch_offset: i64,
    ) -> Result<FollowerFetch, ErrorCode> {
        let state = self.state(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
        let log_end = self
            .logs
            .offsets(tp)
            .map_err(|_| ErrorCode::NotLeaderOrFollower)?
            .high_watermark;
        let now = Instant::now();
        let mut guard = lock(&state);
        let Some(follower) = guard.followers.get_mut(&replica) else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        follower.fetched(fetch_offset.min(log_end), log_end, now);
        let follower_end = follower.log_end_offset;
        let joins = !guard.isr.contains(&replica)
            && isr::may_join(follower_end, guard.high_watermark, guard.epoch_start_offset)
            && self.source.may_join_isr(replica);
        if joins && self.may_send(&guard, now) {
            let mut new_isr = guard.isr.clone();
            new_isr.push(replica);
            self.send(tp, &mut guard, new_isr, now);
        }
        if guard.update_high_watermark(self.node_id, log_end) {
            guard.changed.send_replace(());
            self.purgatory.appended(tp);
        }
        Ok(FollowerFetch {
            high_watermark: guard.high_watermark,
        })
    }

    /// What `follower_fetched` answers `replica` without its fetch: the
    /// high watermark, NOT_LEADER_OR_FOLLOWER as there; nothing of the
    /// follower, the ISR or the watermark changes (a shadow's dry run).
    pub fn follower_view(
        &self,
        tp: &TopicPartition,
        replica: i32,
    ) -> Result<FollowerFetch, ErrorCode> {
        let state = self.state(tp).ok_or(ErrorCode::NotLeaderOrFollower)?;
        let guard = lock(&state);
        if !guard.followers.contains_key(&replica) {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        Ok(FollowerFetch {
            high_watermark: guard.high_watermark,
        })
    }

    /// An append landed: a leader alone in its ISR moves its watermark.
    pub fn appended(&self, tp: &TopicPartition) {
        let _ = self.state(tp);
    }

    /// Whether a write of `[.., required)` needs waiting for: false when
    /// this leader is alone in its ISR (its write is the commit).
    pub fn must_wait(&self, tp: &TopicPartition, required: i64) -> bool {
        self.state(tp).is_some_and(|state| {
            let guard = lock(&state);
            !guard.alone(self.node_id) && guard.high_watermark < required
        })
    }

    /// acks=all: waits until the watermark reaches `required` (every ISR
    /// member has the write) or `timeout` passes. NOT_ENOUGH_REPLICAS_AFTER_APPEND
    /// when it is reached with the ISR shrunk below `min_isr`, REQUEST_TIMED_OUT
    /// at the deadline, NOT_LEADER_OR_FOLLOWER when leadership moved.
    pub async fn await_replicated(
        &self,
        tp: &TopicPartition,
        required: i64,
        min_isr: usize,
        timeout: Duration,
    ) -> ErrorCode {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let Some(state) = self.state(tp) else {
                return ErrorCode::NotLeaderOrFollower;
            };
            let mut changed = {
                let guard = lock(&state);
                if guard.high_watermark >= required {
                    return if guard.isr.len() < min_isr {
                        ErrorCode::NotEnoughReplicasAfterAppend
                    } else {
                        ErrorCode::None
                    };
                }
                guard.changed.subscribe()
            };
            let recheck = (tokio::time::Instant::now() + WAIT_RECHECK).min(deadline);
            tokio::select! {
                _ = changed.changed() => {}
                () = tokio::time::sleep_until(recheck) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return ErrorCode::RequestTimedOut;
            }
        }
    }

    /// One round of Kafka's `maybeShrinkIsr` over every partition this
    /// broker leads: out-of-sync followers leave the ISR.
    pub fn shrink_out_of_sync(&self) {
        let now = Instant::now();
        for (tp, info) in self.source.led_by(self.node_id) {
            let Some(state) = self.state_for(&tp, &info) else {
                continue;
            };
            let Ok(offsets) = self.logs.offsets(&tp) else {
                continue;
            };
            let mut guard = lock(&state);
            if !self.may_send(&guard, now) {
                continue;
            }
            let followers = &guard.followers;
            let out = isr::out_of_sync(
                self.node_id,
                &guard.isr,
                offsets.high_watermark,
                now,
                self.lag_max,
                |id| followers.get(&id).copied(),
            );
            if out.is_empty() {
                continue;
            }
            tracing::info!(partition = %tp, ?out, lag_max = ?self.lag_max, "followers out of sync leave the ISR");
            let new_isr = guard
                .isr
                .iter()
                .copied()
                .filter(|id| !out.contains(id))
                .collect();
            self.send(&tp, &mut guard, new_isr, now);
        }
        let led: Vec<TopicPartition> = lock(&self.states).keys().cloned().collect();
        for tp in led {
            let _ = self.state(&tp);
        }
    }

    /// The controller refused or lost a change: it may be decided again.
    pub fn change_failed(&self, change: &IsrChange) {
        if let Some(state) = lock(&self.states).get(&change.tp) {
            let mut guard = lock(state);
            if guard.partition_epoch == change.partition_epoch {
                guard.pending = None;
            }
        }
    }

    fn may_send(&self, state: &LeaderState, now: Instant) -> bool {
        state
            .pending
            .as_ref()
            .is_none_or(|(_, sent)| now.saturating_duration_since(*sent) >= ALTER_RETRY)
    }

    fn send(&self, tp: &TopicPartition, state: &mut LeaderState, new_isr: Vec<i32>, now: Instant) {
        let change = IsrChange {
            tp: tp.clone(),
            topic_id: state.topic_id,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            new_isr: new_isr.clone(),
        };
        if self.alter.send(change).is_ok() {
            state.pending = Some((new_isr, now));
        }
    }

    /// The ISR-shrink clock, every half `replica.lag.time.max.ms` (as
    /// Kafka's `isr-expiration` task), until `stopped`.
    pub async fn run(self: Arc<Self>, mut stopped: watch::Receiver<bool>) {
        let every = (self.lag_max / 2).max(Duration::from_millis(10));
        let mut ticks = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.changed() => return,
            }
            let this = Arc::clone(&self);
            if tokio::task::spawn_blocking(move || this.shrink_out_of_sync())
                .await
                .is_err()
            {
                tracing::error!("the ISR check panicked");
            }
        }
    }
}

/// The ReplicaManager's view of the leader side (the inherent methods
/// above).
impl PartitionReplication for LeaderReplication {
    fn seed_high_watermark(&self, tp: &TopicPartition, high_watermark: i64) {
        LeaderReplication::seed_high_watermark(self, tp, high_watermark);
    }

    fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        LeaderReplication::high_watermark(self, tp)
    }

    fn isr_size(&self, tp: &TopicPartition) -> Option<usize> {
        LeaderReplication::isr_size(self, tp)
    }

    fn min_insync_replicas(&self, topic: &str) -> usize {
        LeaderReplication::min_insync_replicas(self, topic)
    }

    fn leader_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        LeaderReplication::leader_epoch(self, tp)
    }

    fn follower_fetched(
        &self,
        tp: &TopicPartition,
        replica: i32,
        fetch_offset: i64,
    ) -> Result<FollowerFetch, ErrorCode> {
        LeaderReplication::follower_fetched(self, tp, replica, fetch_offset)
    }

    fn follower_view(&self, tp: &TopicPartition, replica: i32) -> Result<FollowerFetch, ErrorCode> {
        LeaderReplication::follower_view(self, tp, replica)
    }

    fn must_wait(&self, tp: &TopicPartition, required: i64) -> bool {
        LeaderReplication::must_wait(self, tp, required)
    }

    fn await_replicated<'a>(
        &'a self,
        tp: &'a TopicPartition,
        required: i64,
        min_isr: usize,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = ErrorCode> + Send + 'a>> {
        Box::pin(LeaderReplication::await_replicated(
            self, tp, required, min_isr, timeout,
        ))
    }
}

#[cfg(test)]
mod tests;
