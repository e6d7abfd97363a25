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
//!   `__consumer_offsets` on a single node (`offsets_topic.rs`: Kafka's
//!   keys and values, `offsets_log.rs`: the topic on the host's log), the
//!   file `groups.log` on a cluster node for now (`groups_log.rs`, also
//!   what an earlier release's data directory is migrated from);
//!   `timers.rs`: the deadlines.
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
mod group;
pub mod group_configs;
mod groups_log;
mod member;
mod offsets;
pub mod offsets_log;
pub mod offsets_topic;
mod protocol;
mod state;
mod store;
mod timers;

use crate::error_code::ErrorCode;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tracing::info;

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

/// An answer now, or a future of it that borrows nothing (so a request
/// can wait for it outside its handler instance).
pub enum Pending<T> {
    Ready(T),
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>),
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
    /// Topics as the last consumer heartbeat saw them, for deadlines that
    /// recompute a consumer group's assignment.
    topics_view: BTreeMap<String, TopicMeta>,
}

pub struct GroupCoordinator {
    inner: Mutex<Inner>,
    timers: Arc<Timers>,
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
        Ok(Self::restore(store, snapshot, config))
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
        Ok(Self::restore(store, snapshot, config))
    }

    fn restore(store: GroupStore, snapshot: store::Snapshot, config: GroupConfig) -> Arc<Self> {
        let timers = Arc::new(Timers::default());
        let env = Env {
            store,
            timers: Arc::clone(&timers),
            config,
            group_configs: None,
        };
        let now = Instant::now();
        let mut groups = HashMap::new();
        for (id, record) in snapshot.groups {
            let mut group = Group::restore(&id, record, now);
            for member in group.members.values_mut() {
                let timeout = i64::from(member.session_timeout_ms);
                env.set_deadline(&id, member, timeout);
            }
            groups.insert(id, group);
        }
        for (id, (epoch, state_timestamp)) in snapshot.consumer_groups {
            let mut group = Group::new(&id, state_timestamp);
            group.protocol_type = Some(group::CONSUMER_PROTOCOL_TYPE.to_string());
            group.consumer = Some(consumer::ConsumerGroup::new(epoch));
            groups.insert(id, group);
        }
        let mut offsets = 0;
        for (id, stored) in snapshot.offsets {
            offsets += stored.len();
            groups
                .entry(id.clone())
                .or_insert_with(|| Group::new(&id, now_ms()))
                .offsets = stored;
        }
        info!(groups = groups.len(), offsets, "group coordinator loaded");
        timers.schedule(now + env.config.retention_check_interval, Timer::Retention);
        Arc::new(Self {
            inner: Mutex::new(Inner {
                groups,
                env,
                topics_view: BTreeMap::new(),
            }),
            timers,
        })
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
        match self.lock().join(request) {
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
        match self.lock().sync(request) {
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
        self.lock()
            .heartbeat(group_id, generation_id, member_id, group_instance_id)
    }

    pub fn leave(&self, group_id: &str, members: &[LeavingMember]) -> Result<Vec<i16>, i16> {
        self.lock().leave(group_id, members)
    }

    pub fn commit_offsets(&self, request: &CommitRequest) -> Vec<i16> {
        self.lock().commit_offsets(request)
    }

    /// TxnOffsetCommit's member check: NONE or the group's error.
    pub fn validate_txn_offset_commit(&self, request: &CommitRequest) -> i16 {
        self.lock().validate_txn_offset_commit(request)
    }

    /// Stores the offsets of a committed transaction.
    pub fn commit_transactional_offsets(&self, group_id: &str, offsets: &[OffsetCommit]) -> i16 {
        self.lock().commit_transactional_offsets(group_id, offsets)
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
        Ok(self.lock().fetch_offsets(group_id, partitions))
    }

    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        self.lock().delete_offsets(group_id, partitions)
    }

    /// Makes the coordinator follow the groups' dynamic configs
    /// (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`).
    pub fn use_group_configs(&self, configs: Arc<crate::metadata::dynamic::DynamicConfigs>) {
        self.lock().env.group_configs = Some(configs);
    }

    /// ConsumerGroupHeartbeat (KIP-848). `topics` is every topic of the
    /// cluster by name, for the assignor.
    pub fn consumer_heartbeat(
        &self,
        request: &ConsumerHeartbeat,
        topics: BTreeMap<String, TopicMeta>,
    ) -> ConsumerHeartbeatResult {
        let mut inner = self.lock();
        let result = inner.consumer_heartbeat(request, &topics);
        inner.topics_view = topics;
        result
    }

    /// ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for groups that do not
    /// exist or are not consumer-protocol groups.
    pub fn consumer_describe(&self, group_ids: &[String]) -> Vec<ConsumerGroupDescription> {
        self.lock().consumer_describe(group_ids)
    }

    pub fn delete_groups(&self, group_ids: &[String]) -> Vec<i16> {
        self.lock().delete_groups(group_ids)
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

#[cfg(test)]
mod tests;
