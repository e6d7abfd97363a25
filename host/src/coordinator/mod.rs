//! The group coordinator: Kafka's GroupCoordinator for the classic group
//! protocol, on one broker.
//!
//! Why in the host and not in a plugin: a group is shared state that many
//! connections change at once, that must outlive any handler instance, and
//! whose JoinGroup and SyncGroup calls wait for each other. Handlers stay
//! stateless (decode, authorize, call `groups`, encode) and the coordinator
//! owns membership, rebalances, deadlines and offsets.
//!
//! - `state.rs`: the five group states and their transitions.
//! - `member.rs`, `group.rs`: members and groups (Kafka's MemberMetadata
//!   and GroupMetadata).
//! - `protocol.rs`: the rebalance protocol (JoinGroup, SyncGroup,
//!   Heartbeat, LeaveGroup, expiry).
//! - `offsets.rs`: offset commits, fetches, deletes and retention.
//! - `store.rs`: where offsets and group metadata persist: records of
//!   `__consumer_offsets` (`offsets_topic.rs`: Kafka's keys and values,
//!   `offsets_log.rs`: the topic on the host's log, `consumer_records.rs`:
//!   KIP-848 members and assignments); the file
//!   `groups.log` (`groups_log.rs`) is what an earlier release's data
//!   directory is migrated from; `timers.rs`: the deadlines.
//!
//! In a cluster a broker coordinates the groups whose partition of
//! `__consumer_offsets` it leads (Kafka's `onElection`/`onResignation`,
//! driven here by the metadata image, `cluster::coordinators`): a partition
//! it becomes leader of is loaded off the lock, its groups answered
//! COORDINATOR_LOAD_IN_PROGRESS meanwhile; one it stops leading is
//! dropped, its groups answered NOT_COORDINATOR, so clients look the
//! coordinator up again. An offset commit is answered once the
//! partition's in-sync replicas have it (`offsets.commit.required.acks`
//! = -1), waited for after the lock is released.
//!
//! Concurrency: one mutex guards every group. Nothing waits while holding
//! it: a JoinGroup or SyncGroup that must wait for the rebalance leaves a
//! oneshot sender in its member and awaits the receiver after the lock is
//! released, so only that guest call is suspended, never a worker. One
//! background task sleeps until the next deadline (a session, the end of a
//! join phase, a missing SyncGroup, offset retention) and applies it. The
//! store is written under the same lock, so its record order is the order
//! of the changes.

mod assignor;
mod config;
mod consumer;
mod consumer_records;
mod group;
pub mod group_configs;
mod groups_log;
mod member;
mod offsets;
pub mod offsets_log;
pub mod offsets_topic;
mod pending_txn;
mod protocol;
mod state;
mod store;
mod timers;

use crate::error_code::ErrorCode;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tracing::{info, warn};

pub use config::GroupConfig;
pub use consumer::{
    ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResult, TopicMeta,
};
use group::Group;
use protocol::Answer;
use state::GroupState;
use store::GroupStore;
use timers::{Timer, Timers};

/// How often the expiry task wakes up with nothing due (to notice that the
/// coordinator is gone).
const IDLE_WAKE: Duration = Duration::from_secs(1);
/// How long a partition load waits before trying a log again.
const LOAD_RETRY: Duration = Duration::from_millis(200);

/// An answer now, or a future of it that borrows nothing (so a request
/// can wait for it outside its handler instance).
pub enum Pending<T> {
    Ready(T),
    Later(Pin<Box<dyn Future<Output = T> + Send>>),
}

/// An error code to come (NONE: done).
pub type Waiting = Pin<Box<dyn Future<Output = i16> + Send>>;

/// Waits until the in-sync replicas of a partition of
/// `__consumer_offsets` hold its log up to an end offset (acks=all): NONE,
/// or the error the write is answered with.
pub trait ReplicationWait: Send + Sync {
    fn replicated(&self, partition: i32, end_offset: i64) -> Waiting;
}

/// The partitions of `__consumer_offsets` a cluster node coordinates.
#[derive(Default)]
struct Ownership {
    /// The topic's partition count (0: it does not exist yet).
    partitions: i32,
    /// Each led partition's leader epoch, and whether it is loaded.
    led: HashMap<i32, (i32, bool)>,
}

#[cfg(test)]
impl<T> Pending<T> {
    /// The answer, waited for if it comes later.
    pub async fn settle(self) -> T {
        match self {
            Pending::Ready(result) => result,
            Pending::Later(wait) => wait.await,
        }
    }
}

/// A JoinGroup as the coordinator sees it. The client id and host come
/// from the request's connection.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Vec<u8>)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub require_known_member_id: bool,
    pub supports_skip_assignment: bool,
    pub reason: Option<String>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinMember>,
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// OffsetCommit v2-v4 retention time; -1 for the broker's retention.
    pub retention_time_ms: i64,
    pub offsets: Vec<OffsetCommit>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub error_code: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOverview {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub error_code: i16,
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// What every state change needs besides the group itself.
struct Env {
    store: GroupStore,
    timers: Arc<Timers>,
    config: GroupConfig,
    /// The groups' dynamic configs (GROUP resources, KIP-848), once the
    /// broker attached them.
    group_configs: Option<Arc<crate::metadata::dynamic::DynamicConfigs>>,
}

impl Env {
    /// A group's valid integer override of `name`.
    fn group_override(&self, group: &str, name: &str) -> Option<i32> {
        self.group_configs
            .as_ref()?
            .group_config(group, name)?
            .trim()
            .parse()
            .ok()
    }

    /// The group's `consumer.session.timeout.ms`, else the broker's.
    fn consumer_session_timeout_ms(&self, group: &str) -> i32 {
        self.group_override(group, group_configs::CONSUMER_SESSION_TIMEOUT_MS)
            .unwrap_or(self.config.consumer_session_timeout_ms)
    }

    /// The group's `consumer.heartbeat.interval.ms`, else the broker's.
    fn consumer_heartbeat_interval_ms(&self, group: &str) -> i32 {
        self.group_override(group, group_configs::CONSUMER_HEARTBEAT_INTERVAL_MS)
            .unwrap_or(self.config.consumer_heartbeat_interval_ms)
    }
}

struct Inner {
    groups: HashMap<String, Group>,
    env: Env,
    /// On a cluster node, the partitions whose groups are here (none on
    /// a single node, which coordinates every group).
    ownership: Option<Ownership>,
    /// Topics as the last consumer heartbeat saw them, for deadlines that
    /// recompute a consumer group's assignment.
    topics_view: BTreeMap<String, TopicMeta>,
    /// Transactional offsets waiting for their transaction's marker (a
    /// cluster node), as written to the groups' partitions.
    pending_txn: pending_txn::PendingTxnOffsets,
}

pub struct GroupCoordinator {
    inner: Mutex<Inner>,
    timers: Arc<Timers>,
    /// On a cluster node, what commits wait on for the ISR.
    replication: OnceLock<Arc<dyn ReplicationWait>>,
}

/// Wall-clock milliseconds (commit and state timestamps).
pub(crate) use crate::clock::now_ms;

impl GroupCoordinator {
    /// Opens the group store file in `dir` (a cluster node) and restores
    /// every group and offset from it. Call [`GroupCoordinator::start`] to
    /// run the deadlines.
    pub fn open(dir: &Path, config: GroupConfig) -> Result<Arc<Self>> {
        let (store, snapshot) = GroupStore::open_file(dir)
            .with_context(|| format!("opening the group store in {}", dir.display()))?;
        Ok(Self::restore(store, snapshot, config, None))
    }

    /// Restores every group and offset from `__consumer_offsets` on `log`
    /// (a single node), first migrating `dir/groups.log` if an earlier
    /// release left one.
    pub fn open_on_topic(
        log: Arc<dyn offsets_log::OffsetsLog>,
        dir: &Path,
        config: GroupConfig,
    ) -> Result<Arc<Self>> {
        let (store, snapshot) = GroupStore::open_topic(log, dir)
            .with_context(|| format!("loading the group state from {}", offsets_topic::TOPIC))?;
        Ok(Self::restore(store, snapshot, config, None))
    }

    /// A cluster node's coordinator on `__consumer_offsets` through `log`:
    /// no group until the broker leads a partition
    /// ([`GroupCoordinator::on_elected`]).
    pub fn open_in_cluster(
        log: Arc<dyn offsets_log::OffsetsLog>,
        config: GroupConfig,
    ) -> Arc<Self> {
        let store = GroupStore::open_cluster(log);
        Self::restore(
            store,
            store::Snapshot::default(),
            config,
            Some(Ownership::default()),
        )
    }

    fn restore(
        store: GroupStore,
        snapshot: store::Snapshot,
        config: GroupConfig,
        ownership: Option<Ownership>,
    ) -> Arc<Self> {
        let timers = Arc::new(Timers::default());
        let env = Env {
            store,
            timers: Arc::clone(&timers),
            config,
            group_configs: None,
        };
        let now = Instant::now();
        timers.schedule(now + env.config.retention_check_interval, Timer::Retention);
        let mut inner = Inner {
            groups: HashMap::new(),
            env,
            ownership,
            topics_view: BTreeMap::new(),
            pending_txn: pending_txn::PendingTxnOffsets::default(),
        };
        let (groups, offsets) = inner.install(snapshot, now);
        info!(groups, offsets, "group coordinator loaded");
        Arc::new(Self {
            inner: Mutex::new(inner),
            timers,
            replication: OnceLock::new(),
        })
    }

    /// From now on offset commits wait for the in-sync replicas of their
    /// partition (a cluster node's leader side). Set once.
    pub fn wait_for_replication(&self, replication: Arc<dyn ReplicationWait>) {
        let _ = self.replication.set(replication);
    }

    /// This broker leads `partition` of `__consumer_offsets` (of
    /// `partitions`) at `epoch`: its groups are loaded on a blocking
    /// thread, answered COORDINATOR_LOAD_IN_PROGRESS until then. A new
    /// epoch of a partition already led reloads it (leadership may have
    /// been elsewhere in between).
    pub fn on_elected(self: &Arc<Self>, partition: i32, epoch: i32, partitions: i32) {
        let log = {
            let mut inner = self.lock();
            let Some(ownership) = inner.ownership.as_mut() else {
                return;
            };
            ownership.partitions = partitions;
            if ownership
                .led
                .get(&partition)
                .is_some_and(|(led, _)| *led == epoch)
            {
                return;
            }
            let reload = ownership.led.insert(partition, (epoch, false)).is_some();
            if reload {
                inner.drop_partition(partition);
            }
            inner.env.store.topic_log()
        };
        let Some(log) = log else {
            return;
        };
        let coordinator = Arc::clone(self);
        tokio::task::spawn_blocking(move || coordinator.load(log.as_ref(), partition, epoch));
    }

    /// Replays `partition` and takes its groups on, unless the broker
    /// stopped leading it (at `epoch`) meanwhile. A log not there yet (the
    /// image ahead of the reconciler) is retried.
    fn load(&self, log: &dyn offsets_log::OffsetsLog, partition: i32, epoch: i32) {
        let started = Instant::now();
        loop {
            let loaded = store::load_partition(log, partition);
            let mut inner = self.lock();
            let Some(ownership) = inner.ownership.as_mut() else {
                return;
            };
            if ownership.led.get(&partition) != Some(&(epoch, false)) {
                return;
            }
            match loaded {
                Ok(snapshot) => {
                    ownership.led.insert(partition, (epoch, true));
                    let partitions = ownership.partitions;
                    inner.env.store.adopt(partitions, &snapshot);
                    for (producer_id, (epoch, records)) in &snapshot.pending_txn {
                        inner.pending_txn.restore(*producer_id, *epoch, records);
                    }
                    let (groups, offsets) = inner.install(snapshot, Instant::now());
                    info!(
                        partition,
                        epoch,
                        groups,
                        offsets,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "loaded the groups of {}-{partition}",
                        offsets_topic::TOPIC
                    );
                    return;
                }
                Err(error) => {
                    drop(inner);
                    warn!(
                        partition,
                        "cannot load {}-{partition} yet: {error}",
                        offsets_topic::TOPIC
                    );
                    std::thread::sleep(LOAD_RETRY);
                }
            }
        }
    }

    /// This broker no longer leads `partition`: its groups go (their
    /// waiting joins and syncs are told to rejoin, and find the new
    /// coordinator).
    pub fn on_resigned(&self, partition: i32) {
        let mut inner = self.lock();
        let Some(ownership) = inner.ownership.as_mut() else {
            return;
        };
        if ownership.led.remove(&partition).is_some() {
            let dropped = inner.drop_partition(partition);
            info!(
                partition,
                groups = dropped,
                "resigned as coordinator of {}-{partition}",
                offsets_topic::TOPIC
            );
        }
    }

    /// The partitions of `__consumer_offsets` whose groups are here, and
    /// whether each is loaded (a cluster node; empty on a single node).
    pub fn coordinated_partitions(&self) -> BTreeMap<i32, bool> {
        let inner = self.lock();
        inner
            .ownership
            .iter()
            .flat_map(|o| o.led.iter().map(|(p, (_, loaded))| (*p, *loaded)))
            .collect()
    }

    /// What waits until the in-sync replicas have everything written under
    /// `inner` since the last call (nothing on a single node).
    fn replicated(&self, inner: &mut Inner) -> Option<Waiting> {
        let written = inner.env.store.take_written();
        let replication = Arc::clone(self.replication.get()?);
        if written.is_empty() {
            return None;
        }
        Some(Box::pin(async move {
            for (partition, end_offset) in written {
                let code = replication.replicated(partition, end_offset).await;
                if code != ErrorCode::None.code() {
                    return code;
                }
            }
            ErrorCode::None.code()
        }))
    }

    /// Starts the task that applies deadlines, on the current tokio
    /// runtime. It ends once the coordinator is dropped.
    pub fn start(self: &Arc<Self>) -> Result<()> {
        let runtime = tokio::runtime::Handle::try_current()
            .context("the group coordinator needs a tokio runtime")?;
        let coordinator = Arc::downgrade(self);
        let timers = Arc::clone(&self.timers);
        runtime.spawn(async move {
            loop {
                let idle = Instant::now() + IDLE_WAKE;
                let wake = timers.next_deadline().map_or(idle, |next| next.min(idle));
                tokio::select! {
                    _ = tokio::time::sleep_until(wake.into()) => {}
                    _ = timers.changed.notified() => {}
                }
                let Some(coordinator) = coordinator.upgrade() else {
                    break;
                };
                coordinator.fire_due(Instant::now());
            }
        });
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }

    /// Applies every deadline due at `now`.
    fn fire_due(&self, now: Instant) {
        let due = self.timers.take_due(now);
        if due.is_empty() {
            return;
        }
        let mut inner = self.lock();
        for timer in due {
            if timer == Timer::Retention {
                inner.expire_offsets(now_ms());
                let next = now + inner.env.config.retention_check_interval;
                self.timers.schedule(next, Timer::Retention);
            } else if matches!(
                timer,
                Timer::ConsumerSession { .. } | Timer::ConsumerRevocation { .. }
            ) {
                let view = std::mem::take(&mut inner.topics_view);
                inner.on_consumer_timer(timer, now, &view);
                inner.topics_view = view;
            } else {
                inner.on_timer(timer, now);
            }
        }
    }

    /// JoinGroup: waits (suspending only the caller) until the rebalance
    /// completes, unless it can answer at once. (Handlers park instead,
    /// through [`GroupCoordinator::begin_join`].)
    #[cfg(test)]
    pub async fn join(&self, request: JoinRequest) -> JoinResult {
        self.begin_join(&request).settle().await
    }

    /// JoinGroup without waiting: the answer, or what completes when the
    /// rebalance does (it holds nothing of the caller's).
    pub fn begin_join(&self, request: &JoinRequest) -> Pending<JoinResult> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            return Pending::Ready(JoinResult::error(&request.member_id, code));
        }
        match inner.join(request) {
            Answer::Now(result) => Pending::Ready(result),
            Answer::Wait(receiver) => {
                let member_id = request.member_id.clone();
                // The member was replaced by a newer JoinGroup of its own:
                // this older call asks it to rejoin.
                Pending::Later(Box::pin(async move {
                    receiver.await.unwrap_or_else(|_| {
                        JoinResult::error(&member_id, ErrorCode::RebalanceInProgress.code())
                    })
                }))
            }
        }
    }

    /// SyncGroup: a follower waits (suspending only the caller) for the
    /// leader's assignment. (Handlers park instead, through
    /// [`GroupCoordinator::begin_sync`].)
    #[cfg(test)]
    pub async fn sync(&self, request: SyncRequest) -> SyncResult {
        self.begin_sync(&request).settle().await
    }

    /// SyncGroup without waiting: the answer, or what completes with the
    /// leader's assignment.
    pub fn begin_sync(&self, request: &SyncRequest) -> Pending<SyncResult> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            return Pending::Ready(SyncResult::error(code));
        }
        match inner.sync(request) {
            Answer::Now(result) => Pending::Ready(result),
            Answer::Wait(receiver) => Pending::Later(Box::pin(async move {
                receiver
                    .await
                    .unwrap_or_else(|_| SyncResult::error(ErrorCode::RebalanceInProgress.code()))
            })),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> i16 {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return code;
        }
        inner.heartbeat(group_id, generation_id, member_id, group_instance_id)
    }

    pub fn leave(&self, group_id: &str, members: &[LeavingMember]) -> Result<Vec<i16>, i16> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return Err(code);
        }
        inner.leave(group_id, members)
    }

    /// OffsetCommit, answered at once. (Handlers wait for the replicas
    /// through [`GroupCoordinator::begin_commit`].)
    #[cfg(test)]
    pub fn commit_offsets(&self, request: &CommitRequest) -> Vec<i16> {
        self.lock().commit_offsets(request)
    }

    /// OffsetCommit: one code per offset, once the in-sync replicas of
    /// the group's partition have the commit (at once on a single node).
    /// A commit the replicas did not take is answered with the write's
    /// error, as Kafka maps it: COORDINATOR_NOT_AVAILABLE for too few or
    /// too slow replicas, NOT_COORDINATOR when leadership moved.
    pub fn begin_commit(&self, request: &CommitRequest) -> Pending<Vec<i16>> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            return Pending::Ready(vec![code; request.offsets.len()]);
        }
        // Only this commit's writes are waited for.
        inner.env.store.take_written();
        let codes = inner.commit_offsets(request);
        let Some(replicated) = self.replicated(&mut inner) else {
            return Pending::Ready(codes);
        };
        drop(inner);
        Pending::Later(Box::pin(async move {
            let failed = replicated.await;
            codes
                .into_iter()
                .map(|code| {
                    if code == ErrorCode::None.code() {
                        failed
                    } else {
                        code
                    }
                })
                .collect()
        }))
    }

    /// TxnOffsetCommit's member check: NONE or the group's error.
    pub fn validate_txn_offset_commit(&self, request: &CommitRequest) -> i16 {
        let inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            return code;
        }
        inner.validate_txn_offset_commit(request)
    }

    /// Stores the offsets of a committed transaction.
    pub fn commit_transactional_offsets(&self, group_id: &str, offsets: &[OffsetCommit]) -> i16 {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return code;
        }
        inner.commit_transactional_offsets(group_id, offsets)
    }

    /// TxnOffsetCommit on a cluster node, whose transaction coordinator
    /// may be another broker: the offsets are written to the group's
    /// partition of `__consumer_offsets` in a transactional batch of the
    /// producer, as Kafka writes them, and wait here for the transaction's
    /// marker ([`GroupCoordinator::complete_transaction`]); answered once
    /// the partition's in-sync replicas have them, so a coordinator that
    /// fails over loses none (the next one reads them back as pending).
    /// The member check is the caller's
    /// ([`GroupCoordinator::validate_txn_offset_commit`]).
    pub fn add_pending_txn_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        offsets: &[OffsetCommit],
    ) -> Pending<i16> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return Pending::Ready(code);
        }
        let code = inner.pending_txn.admits(producer_id, producer_epoch);
        if code != ErrorCode::None.code() {
            return Pending::Ready(code);
        }
        // Only this commit's writes are waited for.
        inner.env.store.take_written();
        let now = now_ms();
        let records: Vec<store::Record> = offsets
            .iter()
            .map(|commit| offsets::offset_record(group_id, commit, now, None))
            .collect();
        let producer = (producer_id, producer_epoch);
        if let Err(error) = inner
            .env
            .store
            .append_transactional(group_id, producer, &records)
        {
            warn!(
                group = group_id,
                "cannot store transactional offsets: {error}"
            );
            return Pending::Ready(ErrorCode::CoordinatorNotAvailable.code());
        }
        let code = inner
            .pending_txn
            .add(group_id, producer_id, producer_epoch, offsets);
        let Some(replicated) = self.replicated(&mut inner) else {
            return Pending::Ready(code);
        };
        drop(inner);
        Pending::Later(Box::pin(async move {
            let failed = replicated.await;
            if code == ErrorCode::None.code() {
                failed
            } else {
                code
            }
        }))
    }

    /// A transaction marker for `partition` of `__consumer_offsets`: it is
    /// written there, then the offsets producer `producer_id` left for the
    /// groups of that partition are committed (or dropped).
    /// NOT_LEADER_OR_FOLLOWER when this broker does not coordinate the
    /// partition's groups, so the transaction coordinator retries at the
    /// new leader.
    pub fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Pending<i16> {
        let mut inner = self.lock();
        let producer = (producer_id, producer_epoch);
        let code = complete_under_lock(&mut inner, partition, producer, commit);
        if code != ErrorCode::None.code() {
            return Pending::Ready(code);
        }
        // Answered once the partition's ISR has the marker and offsets.
        match self.replicated(&mut inner) {
            None => Pending::Ready(code),
            Some(replicated) => Pending::Later(replicated),
        }
    }

    /// The partitions with transactional offsets pending here for
    /// `group_id` (a cluster node's TxnOffsetCommits).
    pub fn pending_txn_partitions(&self, group_id: &str) -> Vec<(String, i32)> {
        self.lock().pending_txn.partitions_of(group_id)
    }

    /// OffsetFetch for one group. Offsets pending in a transaction are the
    /// transaction coordinator's; the caller checks `require_stable`
    /// against it (UNSTABLE_OFFSET_COMMIT).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
        _require_stable: bool,
    ) -> Result<Vec<CommittedOffset>, i16> {
        let inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return Err(code);
        }
        Ok(inner.fetch_offsets(group_id, partitions))
    }

    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(group_id) {
            return Err(code);
        }
        inner.delete_offsets(group_id, partitions)
    }

    /// Makes the coordinator follow the groups' dynamic configs
    /// (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`).
    pub fn use_group_configs(&self, configs: Arc<crate::metadata::dynamic::DynamicConfigs>) {
        self.lock().env.group_configs = Some(configs);
    }

    /// ConsumerGroupHeartbeat, answered at once. (Handlers wait for the
    /// replicas through [`GroupCoordinator::begin_consumer_heartbeat`].)
    #[cfg(test)]
    pub fn consumer_heartbeat(
        &self,
        request: &ConsumerHeartbeat,
        topics: BTreeMap<String, TopicMeta>,
    ) -> ConsumerHeartbeatResult {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            return ConsumerHeartbeatResult::error(code, "the group is not coordinated here");
        }
        let result = inner.consumer_heartbeat(request, &topics);
        inner.topics_view = topics;
        result
    }

    /// ConsumerGroupHeartbeat (KIP-848). `topics` is every topic of the
    /// cluster by name, for the assignor. Answered once the in-sync
    /// replicas of the group's partition have the records the heartbeat
    /// wrote (at once on a single node), as Kafka answers only after its
    /// records are committed: a coordinator that fails over then knows
    /// every epoch a member was given. A write the replicas did not take
    /// is answered with its error (as an offset commit's).
    pub fn begin_consumer_heartbeat(
        &self,
        request: &ConsumerHeartbeat,
        topics: BTreeMap<String, TopicMeta>,
    ) -> Pending<ConsumerHeartbeatResult> {
        let mut inner = self.lock();
        if let Some(code) = inner.elsewhere(&request.group_id) {
            let result = ConsumerHeartbeatResult::error(code, "the group is not coordinated here");
            return Pending::Ready(result);
        }
        // Only this heartbeat's writes are waited for.
        inner.env.store.take_written();
        let result = inner.consumer_heartbeat(request, &topics);
        inner.topics_view = topics;
        let Some(replicated) = self.replicated(&mut inner) else {
            return Pending::Ready(result);
        };
        drop(inner);
        Pending::Later(Box::pin(async move {
            let code = replicated.await;
            if code == ErrorCode::None.code() || result.error_code != ErrorCode::None.code() {
                result
            } else {
                ConsumerHeartbeatResult::error(code, "the group's records were not replicated")
            }
        }))
    }

    /// ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for groups that do not
    /// exist or are not consumer-protocol groups.
    pub fn consumer_describe(&self, group_ids: &[String]) -> Vec<ConsumerGroupDescription> {
        let inner = self.lock();
        let mut described = inner.consumer_describe(group_ids);
        for description in &mut described {
            if let Some(code) = inner.elsewhere(&description.group_id) {
                description.error_code = code;
                description.error_message = None;
                description.members.clear();
            }
        }
        described
    }

    pub fn delete_groups(&self, group_ids: &[String]) -> Vec<i16> {
        let mut inner = self.lock();
        let here: Vec<String> = group_ids
            .iter()
            .filter(|id| inner.elsewhere(id).is_none())
            .cloned()
            .collect();
        let mut deleted = inner.delete_groups(&here).into_iter();
        group_ids
            .iter()
            .map(|id| match inner.elsewhere(id) {
                Some(code) => code,
                None => deleted
                    .next()
                    .unwrap_or(ErrorCode::UnknownServerError.code()),
            })
            .collect()
    }

    /// ListGroups: every group whose state and type ("classic" or
    /// "consumer") pass the filters (case-insensitive; an empty filter
    /// passes everything).
    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupOverview> {
        let states: Vec<String> = states.iter().map(|s| s.to_lowercase()).collect();
        let types: Vec<String> = types.iter().map(|t| t.to_lowercase()).collect();
        let inner = self.lock();
        let mut groups: Vec<GroupOverview> = inner
            .groups
            .values()
            .map(|group| GroupOverview {
                group_id: group.id.clone(),
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                state: group.state_name().to_string(),
                group_type: if group.consumer.is_some() {
                    "consumer"
                } else {
                    "classic"
                }
                .to_string(),
            })
            .filter(|group| {
                (states.is_empty() || states.contains(&group.state.to_lowercase()))
                    && (types.is_empty() || types.contains(&group.group_type))
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups
    }

    /// DescribeGroups: members with their metadata and assignment once the
    /// group is Stable, without them otherwise; GROUP_ID_NOT_FOUND (state
    /// Dead) for a group that does not exist.
    pub fn describe_groups(&self, group_ids: &[String]) -> Vec<GroupDescription> {
        let inner = self.lock();
        group_ids
            .iter()
            .map(|group_id| match inner.groups.get(group_id) {
                _ if inner.elsewhere(group_id).is_some() => GroupDescription {
                    error_code: inner.elsewhere(group_id).unwrap_or_default(),
                    group_id: group_id.clone(),
                    state: String::new(),
                    protocol_type: String::new(),
                    protocol: String::new(),
                    members: Vec::new(),
                },
                // A consumer-protocol group is not a classic group: Kafka
                // describes it with ConsumerGroupDescribe only.
                None
                | Some(Group {
                    consumer: Some(_), ..
                }) => GroupDescription {
                    error_code: ErrorCode::GroupIdNotFound.code(),
                    group_id: group_id.clone(),
                    state: GroupState::Dead.name().to_string(),
                    protocol_type: String::new(),
                    protocol: String::new(),
                    members: Vec::new(),
                },
                Some(group) => {
                    let stable = group.is(GroupState::Stable);
                    let protocol = if stable {
                        group.protocol_name.clone().unwrap_or_default()
                    } else {
                        String::new()
                    };
                    GroupDescription {
                        error_code: ErrorCode::None.code(),
                        group_id: group_id.clone(),
                        state: group.state().name().to_string(),
                        protocol_type: group.protocol_type.clone().unwrap_or_default(),
                        protocol: protocol.clone(),
                        members: group
                            .members
                            .values()
                            .map(|member| MemberDescription {
                                member_id: member.member_id.clone(),
                                group_instance_id: member.group_instance_id.clone(),
                                client_id: member.client_id.clone(),
                                client_host: member.client_host.clone(),
                                metadata: if stable {
                                    member.metadata(&protocol).to_vec()
                                } else {
                                    Vec::new()
                                },
                                assignment: if stable {
                                    member.assignment.clone()
                                } else {
                                    Vec::new()
                                },
                            })
                            .collect(),
                    }
                }
            })
            .collect()
    }

    /// Drops every group's committed offsets of a deleted topic (Kafka's
    /// `handleDeletedPartitions`), so that a topic created again under the
    /// same name starts without stale positions.
    pub fn on_topic_deleted(&self, topic: &str) {
        self.lock().remove_topic_offsets(topic);
    }

    /// fsyncs the store (clean shutdown).
    pub fn flush(&self) -> Result<()> {
        self.lock()
            .env
            .store
            .flush()
            .context("flushing the group store")
    }
}

/// Whether an earlier release left its group store file in `dir`.
pub fn legacy_store_exists(dir: &Path) -> bool {
    groups_log::exists(dir)
}

impl Inner {
    /// Why `group_id` is not answered here (a cluster node that does not
    /// lead its partition, or is still loading it); None when it is.
    fn elsewhere(&self, group_id: &str) -> Option<i16> {
        let ownership = self.ownership.as_ref()?;
        if ownership.partitions < 1 {
            return Some(ErrorCode::NotCoordinator.code());
        }
        let partition = offsets_topic::partition_for(group_id, ownership.partitions);
        match ownership.led.get(&partition) {
            None => Some(ErrorCode::NotCoordinator.code()),
            Some((_, false)) => Some(ErrorCode::CoordinatorLoadInProgress.code()),
            Some((_, true)) => None,
        }
    }

    /// Takes on the groups and offsets of `snapshot`, their members'
    /// sessions starting now: (groups, offsets) taken.
    fn install(&mut self, snapshot: store::Snapshot, now: Instant) -> (usize, usize) {
        let before = self.groups.len();
        for (id, record) in snapshot.groups {
            let mut group = Group::restore(&id, record, now);
            for member in group.members.values_mut() {
                let timeout = i64::from(member.session_timeout_ms);
                self.env.set_deadline(&id, member, timeout);
            }
            self.groups.insert(id, group);
        }
        let mut members = snapshot.consumer_members;
        for (id, (epoch, state_timestamp)) in snapshot.consumer_groups {
            let records = members.remove(&id).unwrap_or_default();
            let mut group = Group::new(&id, state_timestamp);
            group.protocol_type = Some(group::CONSUMER_PROTOCOL_TYPE.to_string());
            let consumer = consumer::ConsumerGroup::restore(epoch, state_timestamp, records, now);
            group.consumer = Some(consumer);
            // Sessions (and revocation deadlines) start afresh, as Kafka's.
            self.env.start_consumer_timers(&mut group, now);
            self.groups.insert(id, group);
        }
        for id in members.keys() {
            warn!(group = %id, "consumer group members without a group epoch record: ignored");
        }
        let mut offsets = 0;
        for (id, stored) in snapshot.offsets {
            offsets += stored.len();
            self.groups
                .entry(id.clone())
                .or_insert_with(|| Group::new(&id, now_ms()))
                .offsets = stored;
        }
        (self.groups.len().saturating_sub(before), offsets)
    }

    /// Forgets the groups of `partition` (no longer led here): how many.
    fn drop_partition(&mut self, partition: i32) -> usize {
        let Some(partitions) = self.ownership.as_ref().map(|o| o.partitions) else {
            return 0;
        };
        let gone: Vec<String> = self
            .groups
            .keys()
            .filter(|id| offsets_topic::partition_for(id, partitions) == partition)
            .cloned()
            .collect();
        for id in &gone {
            self.groups.remove(id);
        }
        self.pending_txn
            .forget(|group| offsets_topic::partition_for(group, partitions) == partition);
        self.env.store.forget(&gone);
        gone.len()
    }
}

/// [`GroupCoordinator::complete_transaction`] under the coordinator's
/// lock: the marker written, the producer's pending offsets of the
/// partition's groups committed or dropped.
fn complete_under_lock(
    inner: &mut Inner,
    partition: i32,
    producer: (i64, i16),
    commit: bool,
) -> i16 {
    let partitions = match inner.ownership.as_ref() {
        Some(ownership) => {
            if ownership
                .led
                .get(&partition)
                .is_none_or(|(_, loaded)| !loaded)
            {
                return ErrorCode::NotLeaderOrFollower.code();
            }
            ownership.partitions
        }
        None => return ErrorCode::None.code(),
    };
    // Only this marker's writes are waited for.
    inner.env.store.take_written();
    if let Err(error) = inner.env.store.append_marker(partition, producer, commit) {
        warn!(
            partition,
            producer_id = producer.0,
            "cannot write a transaction marker to {}: {error}",
            offsets_topic::TOPIC
        );
        return ErrorCode::KafkaStorageError.code();
    }
    let (producer_id, producer_epoch) = producer;
    let taken = inner
        .pending_txn
        .take(producer_id, producer_epoch, |group| {
            offsets_topic::partition_for(group, partitions) == partition
        });
    if !commit {
        return ErrorCode::None.code();
    }
    for (group, offsets) in taken {
        let code = inner.commit_transactional_offsets(&group, &offsets);
        if code != ErrorCode::None.code() {
            return code;
        }
    }
    ErrorCode::None.code()
}

#[cfg(test)]
mod consumer_persist_tests;
#[cfg(test)]
mod tests;
