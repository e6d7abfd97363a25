//! The consumer group protocol (KIP-848): members heartbeat with
//! ConsumerGroupHeartbeat, the coordinator runs the assignor and hands each
//! member its partitions incrementally, with no group-wide barrier.
//!
//! The model (Kafka's `ConsumerGroup` and `CurrentAssignmentBuilder`):
//! - A group epoch counts changes of membership, subscriptions or
//!   subscribed topics' partitions. Each change recomputes the target
//!   assignment (the assignment epoch catches up with the group epoch).
//! - Each member has an epoch and a current assignment and converges on its
//!   target one heartbeat at a time: partitions it must give up are revoked
//!   first (it keeps its epoch until it reports them released); it then
//!   moves to the target epoch and gets every target partition nobody else
//!   still owns; partitions still owned elsewhere come on later heartbeats
//!   once released. So a partition is never owned by two members at once.
//! - A member that stops heartbeating for `group.consumer.session.timeout.ms`
//!   or does not revoke within its rebalance timeout is removed (fenced).
//!
//! - Members, their subscriptions and assignments persist in
//!   `__consumer_offsets` as Kafka's records ([`super::consumer_records`]):
//!   after every change the records that differ from those last written
//!   are appended, so a coordinator that loads the group (failover or
//!   restart) takes every member on at its epoch; their session timers
//!   start afresh then, as Kafka's do.
//!
//! Not done here (see the closing report): regular-expression
//! subscriptions, rack-aware assignment, keeping a static member's place
//! across its restart (member epoch -2 is treated as leaving).

use crate::error_code::ErrorCode;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::assignor::{self, Assignment, MemberSpec};
use super::consumer_records::{
    ConsumerRecords, CurrentAssignment, MemberMetadata, SubscribedTopic,
};
use super::group::Group;
use super::state::GroupState;
use super::store::Record;
use super::timers::Timer;
use super::{now_ms, Env, Inner};

/// A ConsumerGroupHeartbeat as the coordinator sees it.
#[derive(Debug, Clone)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub server_assignor: Option<String>,
    /// Partitions the member says it owns; None when unchanged.
    pub owned: Option<Vec<(u128, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's full assignment, when it changed.
    pub assignment: Option<Vec<(u128, Vec<i32>)>>,
}

impl ConsumerHeartbeatResult {
    pub(super) fn error(error_code: i16, message: &str) -> Self {
        Self {
            error_code,
            error_message: Some(message.to_string()),
            member_id: None,
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// A topic as the coordinator needs it: its id and partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicMeta {
    pub id: u128,
    pub partitions: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub assignment: Vec<(u128, Vec<i32>)>,
    pub target_assignment: Vec<(u128, Vec<i32>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    /// At the target epoch with its whole target.
    Stable,
    /// Must report partitions released before moving on.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions others still own.
    UnreleasedPartitions,
}

pub struct ConsumerMember {
    member_id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    subscribed: BTreeSet<String>,
    server_assignor: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    assigned: Assignment,
    pending_revocation: Assignment,
    /// The assignment last sent to the member.
    sent: Option<Assignment>,
    deadline: Instant,
    armed: Option<Instant>,
}

/// A consumer group's protocol state (its offsets live in `Group`).
pub struct ConsumerGroup {
    pub epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, ConsumerMember>,
    target: BTreeMap<String, Assignment>,
    assignor: String,
    /// Partition counts of the subscribed topics the target was computed for.
    topics: BTreeMap<String, TopicMeta>,
    /// The member and assignment records last written (or loaded).
    stored: ConsumerRecords,
    /// The group epoch record last written: (epoch, state timestamp).
    stored_epoch: Option<(i32, i64)>,
}

impl ConsumerGroup {
    pub fn new(epoch: i32) -> Self {
        Self {
            epoch,
            assignment_epoch: epoch,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            assignor: assignor::UNIFORM.to_string(),
            topics: BTreeMap::new(),
            stored: ConsumerRecords::default(),
            stored_epoch: None,
        }
    }

    /// The group as its records left it (`state_timestamp`: its epoch
    /// record's), members' sessions starting at `now`.
    pub fn restore(
        epoch: i32,
        state_timestamp: i64,
        records: ConsumerRecords,
        now: Instant,
    ) -> Self {
        let mut group = Self::new(epoch);
        group.stored_epoch = Some((epoch, state_timestamp));
        if let Some(target_epoch) = records.target_epoch {
            group.assignment_epoch = target_epoch;
        }
        group.topics = records
            .topics
            .iter()
            .flatten()
            .map(|t| {
                let meta = TopicMeta {
                    id: t.id,
                    partitions: t.partitions,
                };
                (t.name.clone(), meta)
            })
            .collect();
        group.target = records
            .targets
            .iter()
            .map(|(id, target)| (id.clone(), to_assignment(target)))
            .collect();
        for (id, meta) in &records.members {
            let current = records.current.get(id);
            let state = match current.map_or(0, |c| c.state) {
                0 => MemberState::Stable,
                1 => MemberState::UnrevokedPartitions,
                // 2, or a state this build does not know: reconciled again.
                _ => MemberState::UnreleasedPartitions,
            };
            let member = ConsumerMember {
                member_id: id.clone(),
                instance_id: meta.instance_id.clone(),
                rack_id: meta.rack_id.clone(),
                client_id: meta.client_id.clone(),
                client_host: meta.client_host.clone(),
                rebalance_timeout_ms: meta.rebalance_timeout_ms,
                subscribed: meta.subscribed_topic_names.iter().cloned().collect(),
                server_assignor: meta.server_assignor.clone(),
                epoch: current.map_or(0, |c| c.member_epoch),
                previous_epoch: current.map_or(-1, |c| c.previous_member_epoch),
                state,
                assigned: current
                    .map(|c| to_assignment(&c.assigned))
                    .unwrap_or_default(),
                pending_revocation: current
                    .map(|c| to_assignment(&c.pending_revocation))
                    .unwrap_or_default(),
                // Sent again on the first heartbeat to the new coordinator.
                sent: None,
                deadline: now,
                armed: None,
            };
            group.members.insert(id.clone(), member);
        }
        group.assignor = group.preferred_assignor();
        group.stored = records;
        group
    }

    /// The records of the group's members (`only`: of that member), as
    /// they are now.
    fn records(&self, only: Option<&str>) -> ConsumerRecords {
        let wanted = |id: &str| only.is_none_or(|only| only == id);
        let members = self.members.values().filter(|m| wanted(&m.member_id));
        let mut records = ConsumerRecords {
            topics: Some(
                self.topics
                    .iter()
                    .map(|(name, meta)| SubscribedTopic {
                        id: meta.id,
                        name: name.clone(),
                        partitions: meta.partitions,
                    })
                    .collect(),
            ),
            target_epoch: Some(self.assignment_epoch),
            ..ConsumerRecords::default()
        };
        for m in members {
            let id = m.member_id.clone();
            let metadata = MemberMetadata {
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                subscribed_topic_regex: None,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                server_assignor: m.server_assignor.clone(),
            };
            records.members.insert(id.clone(), metadata);
            if let Some(target) = self.target.get(&id) {
                records.targets.insert(id.clone(), to_list(target));
            }
            let state = match m.state {
                MemberState::Stable => 0,
                MemberState::UnrevokedPartitions => 1,
                MemberState::UnreleasedPartitions => 2,
            };
            let current = CurrentAssignment {
                member_epoch: m.epoch,
                previous_member_epoch: m.previous_epoch,
                state,
                assigned: to_list(&m.assigned),
                pending_revocation: to_list(&m.pending_revocation),
            };
            records.current.insert(id, current);
        }
        records
    }

    /// (group epoch, assignment epoch, every member's records as now).
    #[cfg(test)]
    pub(super) fn state_for_test(&self) -> (i32, i32, ConsumerRecords) {
        (self.epoch, self.assignment_epoch, self.records(None))
    }

    /// The records written for the group (what a compaction keeps).
    pub fn stored_records(&self) -> &ConsumerRecords {
        &self.stored
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's consumer group state names.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// OffsetCommit checks of the consumer protocol.
    pub fn validate_offset_commit(&self, member_id: &str, member_epoch: i32) -> Option<i16> {
        if member_epoch < 0 && member_id.is_empty() {
            return (!self.members.is_empty()).then_some(ErrorCode::UnknownMemberId.code());
        }
        match self.members.get(member_id) {
            None => Some(ErrorCode::UnknownMemberId.code()),
            Some(member) if member.epoch != member_epoch => {
                Some(ErrorCode::StaleMemberEpoch.code())
            }
            Some(_) => None,
        }
    }

    /// Topics any member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    /// Whether (topic id, partition) is owned by a member other than `except`.
    fn owned_elsewhere(&self, except: &str, topic: u128, partition: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != except
                && (m
                    .assigned
                    .get(&topic)
                    .is_some_and(|p| p.contains(&partition))
                    || m.pending_revocation
                        .get(&topic)
                        .is_some_and(|p| p.contains(&partition)))
        })
    }

    /// The assignor most members ask for, else the default.
    fn preferred_assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(name) = member.server_assignor.as_deref() {
                *votes.entry(name).or_default() += 1;
            }
        }
        let best = votes.values().copied().max().unwrap_or(0);
        votes
            .into_iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_string())
            .unwrap_or_else(|| assignor::UNIFORM.to_string())
    }

    /// The subscribed topics' metadata as the topics view shows it now.
    fn current_topics(&self, view: &BTreeMap<String, TopicMeta>) -> BTreeMap<String, TopicMeta> {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|name| view.get(&name).map(|meta| (name, *meta)))
            .collect()
    }

    /// Recomputes the target assignment for the current group epoch.
    fn compute_target(&mut self, view: &BTreeMap<String, TopicMeta>) {
        self.topics = self.current_topics(view);
        self.assignor = self.preferred_assignor();
        let partitions: BTreeMap<u128, i32> = self
            .topics
            .values()
            .map(|meta| (meta.id, meta.partitions))
            .collect();
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|member| MemberSpec {
                member_id: &member.member_id,
                topics: member
                    .subscribed
                    .iter()
                    .filter_map(|name| self.topics.get(name).map(|meta| meta.id))
                    .collect(),
                current: self.target.get(&member.member_id),
            })
            .collect();
        let target = assignor::assign(&self.assignor, &specs, &partitions);
        self.target = target;
        self.assignment_epoch = self.epoch;
    }

    /// Kafka's `CurrentAssignmentBuilder`: moves one member towards its
    /// target. `owned` is what the member reported owning, if anything.
    fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Assignment>,
        now: Instant,
    ) -> Option<Instant> {
        let target_epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let (state, epoch, assigned) = match self.members.get(member_id) {
            Some(m) => (m.state, m.epoch, m.assigned.clone()),
            None => return None,
        };
        if state == MemberState::UnrevokedPartitions {
            let released = match (owned, self.members.get(member_id)) {
                (Some(owned), Some(m)) => m.pending_revocation.iter().all(|(topic, partitions)| {
                    owned.get(topic).is_none_or(|o| o.is_disjoint(partitions))
                }),
                _ => false,
            };
            if !released {
                return None;
            }
            if let Some(m) = self.members.get_mut(member_id) {
                m.pending_revocation.clear();
            }
        } else if state == MemberState::Stable && epoch == target_epoch {
            return None;
        }
        // Compute the next step towards the target: what stays, what must
        // be revoked first, what can be handed out now.
        let topics: BTreeSet<u128> = assigned.keys().chain(target.keys()).copied().collect();
        let mut stays = Assignment::new();
        let mut next = Assignment::new();
        let mut revoke = Assignment::new();
        let mut unreleased = false;
        for topic in topics {
            let current = assigned.get(&topic).cloned().unwrap_or_default();
            let wanted = target.get(&topic).cloned().unwrap_or_default();
            let stay: BTreeSet<i32> = current.intersection(&wanted).copied().collect();
            let gone: BTreeSet<i32> = current.difference(&wanted).copied().collect();
            let mut grown = stay.clone();
            for &p in wanted.difference(&current) {
                if self.owned_elsewhere(member_id, topic, p) {
                    unreleased = true;
                } else {
                    grown.insert(p);
                }
            }
            if !gone.is_empty() {
                revoke.insert(topic, gone);
            }
            if !stay.is_empty() {
                stays.insert(topic, stay);
            }
            if !grown.is_empty() {
                next.insert(topic, grown);
            }
        }
        let member = self.members.get_mut(member_id)?;
        if !revoke.is_empty() {
            // Revoke first; nothing new until the member has let go.
            member.assigned = stays;
            member.pending_revocation = revoke;
            member.state = MemberState::UnrevokedPartitions;
            return Some(now + millis(member.rebalance_timeout_ms));
        }
        member.assigned = next;
        if member.epoch != target_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = target_epoch;
        }
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        None
    }
}

fn to_assignment(owned: &[(u128, Vec<i32>)]) -> Assignment {
    let mut assignment = Assignment::new();
    for (topic, partitions) in owned {
        if !partitions.is_empty() {
            assignment
                .entry(*topic)
                .or_default()
                .extend(partitions.iter().copied());
        }
    }
    assignment
}

fn to_list(assignment: &Assignment) -> Vec<(u128, Vec<i32>)> {
    assignment
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(topic, partitions)| (*topic, partitions.iter().copied().collect()))
        .collect()
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0))
}

impl Env {
    fn consumer_session(&self, group_id: &str, member: &mut ConsumerMember) {
        member.deadline = Instant::now() + millis(self.consumer_session_timeout_ms(group_id));
        if member.armed.is_none_or(|armed| armed > member.deadline) {
            member.armed = Some(member.deadline);
            self.timers.schedule(
                member.deadline,
                Timer::ConsumerSession {
                    group: group_id.to_string(),
                    member: member.member_id.clone(),
                },
            );
        }
    }

    /// A loaded group's members' deadlines: their sessions, and the
    /// rebalance timeout of those still revoking, from `now`.
    pub(super) fn start_consumer_timers(&self, group: &mut Group, now: Instant) {
        let Some(consumer) = group.consumer.as_mut() else {
            return;
        };
        for member in consumer.members.values_mut() {
            self.consumer_session(&group.id, member);
            if member.state == MemberState::UnrevokedPartitions {
                self.timers.schedule(
                    now + millis(member.rebalance_timeout_ms),
                    Timer::ConsumerRevocation {
                        group: group.id.clone(),
                        member: member.member_id.clone(),
                        epoch: member.epoch,
                    },
                );
            }
        }
    }

    /// Appends the group's records that changed since the last write (or
    /// load), in one append: only `member`'s when the group's epochs are
    /// unchanged (a heartbeat that moved one member), else every one.
    pub(super) fn persist_consumer_group(&mut self, group: &mut Group, member: Option<&str>) {
        let Some(consumer) = group.consumer.as_mut() else {
            return;
        };
        let epoch = (consumer.epoch, group.state_timestamp);
        let group_wide = consumer.stored_epoch != Some(epoch)
            || consumer.stored.target_epoch != Some(consumer.assignment_epoch);
        let only = if group_wide { None } else { member };
        let now = consumer.records(only);
        let (before, after) = consumer.stored.diff(&now, only);
        let epoch_changed = consumer.stored_epoch != Some(epoch);
        if before.is_empty() && after.is_empty() && !epoch_changed {
            return;
        }
        let wrap = |record| Record::Consumer {
            group: group.id.clone(),
            record,
        };
        let mut records: Vec<Record> = before.into_iter().map(wrap).collect();
        if epoch_changed {
            records.push(Record::ConsumerGroup {
                group: group.id.clone(),
                epoch: epoch.0,
                state_timestamp: epoch.1,
            });
        }
        records.extend(after.into_iter().map(wrap));
        if let Err(error) = self.store.append(&records) {
            warn!(group = %group.id, "cannot store consumer group records: {error}");
            return;
        }
        consumer.stored.update(now, only);
        consumer.stored_epoch = Some(epoch);
    }

    /// A membership or subscription change: bump the group epoch and
    /// recompute the target.
    fn bump_epoch(&mut self, group: &mut Group, view: &BTreeMap<String, TopicMeta>, reason: &str) {
        let Some(consumer) = group.consumer.as_mut() else {
            return;
        };
        consumer.epoch = consumer.epoch.wrapping_add(1);
        consumer.compute_target(view);
        info!(
            group = %group.id,
            epoch = consumer.epoch,
            members = consumer.members.len(),
            assignor = %consumer.assignor,
            "consumer group target assignment computed ({reason})"
        );
        if consumer.members.is_empty() {
            group.state_timestamp = now_ms();
        }
    }
}

impl Inner {
    /// ConsumerGroupHeartbeat; what changed is stored before the answer.
    pub(super) fn consumer_heartbeat(
        &mut self,
        request: &ConsumerHeartbeat,
        view: &BTreeMap<String, TopicMeta>,
    ) -> ConsumerHeartbeatResult {
        let result = self.consumer_heartbeat_unstored(request, view);
        let Inner { groups, env, .. } = self;
        if let Some(group) = groups.get_mut(&request.group_id) {
            env.persist_consumer_group(group, Some(&request.member_id));
        }
        result
    }

    fn consumer_heartbeat_unstored(
        &mut self,
        request: &ConsumerHeartbeat,
        view: &BTreeMap<String, TopicMeta>,
    ) -> ConsumerHeartbeatResult {
        let Inner { groups, env, .. } = self;
        let interval = env.consumer_heartbeat_interval_ms(&request.group_id);
        if request.group_id.is_empty() {
            return ConsumerHeartbeatResult::error(
                ErrorCode::InvalidRequest.code(),
                "GroupId can't be empty.",
            );
        }
        if let Some(assignor) = &request.server_assignor {
            if !assignor::ASSIGNORS.contains(&assignor.as_str()) {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::UnsupportedAssignor.code(),
                    &format!("ServerAssignor {assignor} is not supported. Supported assignors: uniform, range."),
                );
            }
        }
        let joining = request.member_epoch == 0;
        if !groups.contains_key(&request.group_id) {
            if !joining {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::UnknownMemberId.code(),
                    &format!(
                        "Member {} is not a member of group {}.",
                        request.member_id, request.group_id
                    ),
                );
            }
            groups.insert(
                request.group_id.clone(),
                Group::new(&request.group_id, now_ms()),
            );
        }
        let Some(group) = groups.get_mut(&request.group_id) else {
            return ConsumerHeartbeatResult::error(
                ErrorCode::CoordinatorNotAvailable.code(),
                "The group is gone.",
            );
        };
        if group.consumer.is_none() {
            // An empty classic group (offsets only) becomes a consumer group.
            if !group.members.is_empty() || !group.is(GroupState::Empty) {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::GroupIdNotFound.code(),
                    &format!("Group {} is not a consumer group.", group.id),
                );
            }
            group.consumer = Some(ConsumerGroup::new(group.generation_id.max(0)));
            group.protocol_type = Some("consumer".to_string());
        }
        let now = Instant::now();
        let Some(consumer) = group.consumer.as_mut() else {
            return ConsumerHeartbeatResult::error(
                ErrorCode::CoordinatorNotAvailable.code(),
                "The group is gone.",
            );
        };

        // Leaving: -1, or -2 for a static member's temporary leave.
        if request.member_epoch < 0 {
            if consumer.members.remove(&request.member_id).is_none() {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::UnknownMemberId.code(),
                    &format!(
                        "Member {} is not a member of group {}.",
                        request.member_id, group.id
                    ),
                );
            }
            consumer.target.remove(&request.member_id);
            info!(group = %group.id, member = %request.member_id, "consumer left the group");
            env.bump_epoch(group, view, "a member left");
            return ConsumerHeartbeatResult {
                error_code: ErrorCode::None.code(),
                error_message: None,
                member_id: Some(request.member_id.clone()),
                member_epoch: request.member_epoch,
                heartbeat_interval_ms: interval,
                assignment: None,
            };
        }

        let mut changed = false;
        let member_id = if joining {
            let member_id = if request.member_id.is_empty() {
                super::protocol::generate_member_id("consumer")
            } else {
                request.member_id.clone()
            };
            if let Some(instance) = &request.instance_id {
                let holder = consumer
                    .members
                    .values()
                    .find(|m| m.instance_id.as_ref() == Some(instance) && m.member_id != member_id)
                    .map(|m| m.member_id.clone());
                if let Some(holder) = holder {
                    return ConsumerHeartbeatResult::error(
                        ErrorCode::UnreleasedInstanceId.code(),
                        &format!("Static member {instance} is still held by member {holder}."),
                    );
                }
            }
            let Some(subscribed) = &request.subscribed_topic_names else {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::InvalidRequest.code(),
                    "SubscribedTopicNames must be set in first request.",
                );
            };
            if consumer.members.len() >= env.config.consumer_max_size
                && !consumer.members.contains_key(&member_id)
            {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::GroupMaxSizeReached.code(),
                    "The group is full.",
                );
            }
            // A (re)join starts from nothing.
            consumer.members.insert(
                member_id.clone(),
                ConsumerMember {
                    member_id: member_id.clone(),
                    instance_id: request.instance_id.clone(),
                    rack_id: request.rack_id.clone(),
                    client_id: request.client_id.clone(),
                    client_host: request.client_host.clone(),
                    rebalance_timeout_ms: request.rebalance_timeout_ms,
                    subscribed: subscribed.iter().cloned().collect(),
                    server_assignor: request.server_assignor.clone(),
                    epoch: 0,
                    previous_epoch: -1,
                    state: MemberState::Stable,
                    assigned: Assignment::new(),
                    pending_revocation: Assignment::new(),
                    sent: None,
                    deadline: now,
                    armed: None,
                },
            );
            info!(group = %group.id, member = %member_id, "consumer joined the group");
            changed = true;
            member_id
        } else {
            let Some(member) = consumer.members.get_mut(&request.member_id) else {
                return ConsumerHeartbeatResult::error(
                    ErrorCode::UnknownMemberId.code(),
                    &format!(
                        "Member {} is not a member of group {}.",
                        request.member_id, group.id
                    ),
                );
            };
            if request.member_epoch != member.epoch {
                // A lost answer: the previous epoch is fine if the member
                // owns nothing beyond what it was given.
                let owned_ok = request.owned.as_ref().is_some_and(|owned| {
                    to_assignment(owned).iter().all(|(topic, partitions)| {
                        member
                            .assigned
                            .get(topic)
                            .is_some_and(|a| partitions.is_subset(a))
                    })
                });
                if !(request.member_epoch == member.previous_epoch && owned_ok) {
                    return ConsumerHeartbeatResult::error(
                        ErrorCode::FencedMemberEpoch.code(),
                        &format!(
                            "The consumer group member has a smaller member epoch ({}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                            request.member_epoch, member.epoch
                        ),
                    );
                }
            }
            if let Some(subscribed) = &request.subscribed_topic_names {
                let subscribed: BTreeSet<String> = subscribed.iter().cloned().collect();
                if subscribed != member.subscribed {
                    member.subscribed = subscribed;
                    changed = true;
                }
            }
            if request.server_assignor.is_some()
                && request.server_assignor != member.server_assignor
            {
                member.server_assignor = request.server_assignor.clone();
                changed = true;
            }
            if request.rack_id.is_some() {
                member.rack_id = request.rack_id.clone();
            }
            if request.rebalance_timeout_ms > 0 {
                member.rebalance_timeout_ms = request.rebalance_timeout_ms;
            }
            request.member_id.clone()
        };

        // Partition counts of subscribed topics changed (topic created,
        // deleted or grown): the target must be recomputed too.
        let topics_changed = consumer.current_topics(view) != consumer.topics;
        if changed || topics_changed {
            let reason = if changed {
                "membership or subscription changed"
            } else {
                "subscribed topics changed"
            };
            env.bump_epoch(group, view, reason);
        }
        let Some(consumer) = group.consumer.as_mut() else {
            return ConsumerHeartbeatResult::error(
                ErrorCode::CoordinatorNotAvailable.code(),
                "The group is gone.",
            );
        };
        let owned = request.owned.as_deref().map(to_assignment);
        if let Some(deadline) = consumer.reconcile(&member_id, owned.as_ref(), now) {
            if let Some(member) = consumer.members.get(&member_id) {
                env.timers.schedule(
                    deadline,
                    Timer::ConsumerRevocation {
                        group: group.id.clone(),
                        member: member_id.clone(),
                        epoch: member.epoch,
                    },
                );
            }
        }
        let Some(member) = consumer.members.get_mut(&member_id) else {
            return ConsumerHeartbeatResult::error(
                ErrorCode::UnknownMemberId.code(),
                "The member is gone.",
            );
        };
        env.consumer_session(&group.id, member);
        // Send the assignment when it changed, on a (re)join, or when the
        // member's view differs from ours.
        let differs = owned.as_ref().is_some_and(|o| *o != member.assigned);
        let send = joining || member.sent.as_ref() != Some(&member.assigned) || differs;
        let assignment = send.then(|| {
            member.sent = Some(member.assigned.clone());
            to_list(&member.assigned)
        });
        ConsumerHeartbeatResult {
            error_code: ErrorCode::None.code(),
            error_message: None,
            member_id: Some(member_id),
            member_epoch: member.epoch,
            heartbeat_interval_ms: interval,
            assignment,
        }
    }

    /// ConsumerGroupDescribe.
    pub(super) fn consumer_describe(&self, group_ids: &[String]) -> Vec<ConsumerGroupDescription> {
        group_ids
            .iter()
            .map(|group_id| {
                let missing = |message: String| ConsumerGroupDescription {
                    error_code: ErrorCode::GroupIdNotFound.code(),
                    error_message: Some(message),
                    group_id: group_id.clone(),
                    state: "Dead".to_string(),
                    group_epoch: -1,
                    assignment_epoch: -1,
                    assignor_name: String::new(),
                    members: Vec::new(),
                };
                let Some(group) = self.groups.get(group_id) else {
                    return missing(format!("Group {group_id} not found."));
                };
                let Some(consumer) = &group.consumer else {
                    return missing(format!("Group {group_id} is not a consumer group."));
                };
                ConsumerGroupDescription {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    group_id: group_id.clone(),
                    state: consumer.state_name().to_string(),
                    group_epoch: consumer.epoch,
                    assignment_epoch: consumer.assignment_epoch,
                    assignor_name: consumer.assignor.clone(),
                    members: consumer
                        .members
                        .values()
                        .map(|m| ConsumerMemberDescription {
                            member_id: m.member_id.clone(),
                            instance_id: m.instance_id.clone(),
                            rack_id: m.rack_id.clone(),
                            member_epoch: m.epoch,
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                            assignment: to_list(&m.assigned),
                            target_assignment: consumer
                                .target
                                .get(&m.member_id)
                                .map(to_list)
                                .unwrap_or_default(),
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// A consumer member's session ended, or it did not revoke in time.
    pub(super) fn on_consumer_timer(
        &mut self,
        timer: Timer,
        now: Instant,
        view: &BTreeMap<String, TopicMeta>,
    ) {
        let Inner { groups, env, .. } = self;
        let (group_id, member_id, revocation_epoch) = match timer {
            Timer::ConsumerSession { group, member } => (group, member, None),
            Timer::ConsumerRevocation {
                group,
                member,
                epoch,
            } => (group, member, Some(epoch)),
            _ => return,
        };
        let Some(group) = groups.get_mut(&group_id) else {
            return;
        };
        let Some(consumer) = group.consumer.as_mut() else {
            return;
        };
        let Some(member) = consumer.members.get_mut(&member_id) else {
            return;
        };
        let reason = match revocation_epoch {
            Some(epoch) => {
                if member.state != MemberState::UnrevokedPartitions || member.epoch != epoch {
                    return;
                }
                "did not revoke its partitions within the rebalance timeout"
            }
            None => {
                if member.armed.is_some_and(|armed| armed <= now) {
                    member.armed = None;
                }
                if member.deadline > now {
                    if member.armed.is_none() {
                        member.armed = Some(member.deadline);
                        env.timers.schedule(
                            member.deadline,
                            Timer::ConsumerSession {
                                group: group_id.clone(),
                                member: member_id.clone(),
                            },
                        );
                    }
                    return;
                }
                "session expired"
            }
        };
        info!(group = %group_id, member = %member_id, "removing consumer: {reason}");
        consumer.members.remove(&member_id);
        consumer.target.remove(&member_id);
        env.bump_epoch(group, view, reason);
        env.persist_consumer_group(group, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> BTreeMap<String, TopicMeta> {
        BTreeMap::from([(
            "t".to_string(),
            TopicMeta {
                id: 7,
                partitions: 4,
            },
        )])
    }

    fn member(id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: id.into(),
            instance_id: None,
            rack_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1000,
            subscribed: BTreeSet::from(["t".to_string()]),
            server_assignor: None,
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            sent: None,
            deadline: Instant::now(),
            armed: None,
        }
    }

    fn partitions(group: &ConsumerGroup, id: &str) -> BTreeSet<i32> {
        group.members[id]
            .assigned
            .get(&7)
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn partitions_move_only_after_revocation() {
        let now = Instant::now();
        let mut group = ConsumerGroup::new(0);
        group.members.insert("a".into(), member("a"));
        group.epoch = 1;
        group.compute_target(&view());
        assert_eq!(group.reconcile("a", None, now), None);
        assert_eq!(partitions(&group, "a").len(), 4);
        assert_eq!(group.state_name(), "Stable");

        // b joins: a must give up two partitions before b gets them.
        group.members.insert("b".into(), member("b"));
        group.epoch = 2;
        group.compute_target(&view());
        assert!(group.reconcile("b", None, now).is_none());
        assert_eq!(group.members["b"].state, MemberState::UnreleasedPartitions);
        assert!(partitions(&group, "b").is_empty(), "a still owns them");
        assert!(
            group.reconcile("a", None, now).is_some(),
            "a starts revoking"
        );
        assert_eq!(group.members["a"].state, MemberState::UnrevokedPartitions);
        assert_eq!(group.members["a"].epoch, 1, "epoch kept until revoked");
        assert_eq!(group.state_name(), "Reconciling");
        // a reports it released them.
        let kept = group.members["a"].assigned.clone();
        assert_eq!(group.reconcile("a", Some(&kept), now), None);
        assert_eq!(group.members["a"].epoch, 2);
        group.reconcile("b", None, now);
        assert_eq!(partitions(&group, "b").len(), 2);
        assert!(partitions(&group, "a").is_disjoint(&partitions(&group, "b")));
        assert_eq!(group.state_name(), "Stable");
    }
}
