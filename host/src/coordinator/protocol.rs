//! The classic rebalance protocol, as Kafka's GroupCoordinator runs it:
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and what their deadlines
//! do when they pass.
//!
//! A rebalance: a join (or a member leaving or expiring) moves the group to
//! PreparingRebalance; the join phase ends when every known member has
//! rejoined or the rebalance timeout passes (for an empty group, after
//! `group.initial.rebalance.delay.ms`, extended while new members keep
//! coming). Members that did not rejoin are dropped, a new generation
//! starts with the protocol the members vote for, and every waiting
//! JoinGroup is answered (the leader gets every member's metadata): the
//! group is CompletingRebalance. The leader's SyncGroup carries the
//! assignment, which is stored and handed to every waiting SyncGroup: the
//! group is Stable. A member that misses its session timeout is removed,
//! which starts another rebalance.
//!
//! Everything here runs under the coordinator's lock and never waits: a
//! JoinGroup or SyncGroup that must wait leaves a oneshot sender in its
//! member and returns the receiver for the caller to await.

use crate::error_code::ErrorCode;

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{info, warn};

use super::group::{Group, JoinPhase};
use super::member::Member;
use super::state::GroupState;
use super::timers::Timer;
use super::{
    now_ms, Env, Inner, JoinMember, JoinRequest, JoinResult, LeavingMember, SyncRequest, SyncResult,
};

/// How long a new member may wait in JoinGroup before it is dropped
/// (Kafka's `NewMemberJoinTimeoutMs`): its connection is busy with the
/// JoinGroup, so it cannot heartbeat, and a client that gave up must not
/// hold the rebalance forever.
const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// A JoinGroup or SyncGroup answered at once, or one that must wait.
pub enum Answer<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0))
}

impl JoinResult {
    pub fn error(member_id: &str, error_code: i16) -> Self {
        Self {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

impl SyncResult {
    pub fn error(error_code: i16) -> Self {
        Self {
            error_code,
            protocol_type: None,
            protocol_name: None,
            assignment: Vec::new(),
        }
    }
}

/// Kafka's member ids: the client id (or instance id) and a random UUID.
pub(super) fn generate_member_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique enough without the OS source: time and a counter.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&now_ms().to_be_bytes());
        bytes[8..].copy_from_slice(&n.to_be_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{prefix}-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Kafka's `validateCurrentMember`: a static member must be the one its
/// instance id maps to (else FENCED_INSTANCE_ID); any member must exist.
fn validate_current_member(
    group: &Group,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Option<i16> {
    if let Some(instance) = group_instance_id {
        match group.static_members.get(instance) {
            Some(current) if current != member_id => {
                return Some(ErrorCode::FencedInstanceId.code())
            }
            Some(_) => {}
            None => return Some(ErrorCode::UnknownMemberId.code()),
        }
    }
    if !group.members.contains_key(member_id) {
        return Some(ErrorCode::UnknownMemberId.code());
    }
    None
}

/// Every member's id and metadata for the selected protocol (the leader's
/// JoinGroup answer).
fn current_member_metadata(group: &Group) -> Vec<JoinMember> {
    let protocol = group.protocol_name.as_deref().unwrap_or_default();
    group
        .members
        .values()
        .map(|member| JoinMember {
            member_id: member.member_id.clone(),
            group_instance_id: member.group_instance_id.clone(),
            metadata: member.metadata(protocol).to_vec(),
        })
        .collect()
}

/// The current generation as a JoinGroup answer for `member_id`.
fn generation_answer(group: &Group, member_id: &str, members: Vec<JoinMember>) -> JoinResult {
    JoinResult {
        error_code: ErrorCode::None.code(),
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id: member_id.to_string(),
        members,
    }
}

impl Env {
    /// Kafka's `completeAndScheduleNextExpiration`: the member's session
    /// now ends `timeout_ms` from now.
    pub(super) fn set_deadline(&self, group_id: &str, member: &mut Member, timeout_ms: i64) {
        member.deadline = Instant::now() + millis(timeout_ms);
        if member.armed.is_none_or(|armed| armed > member.deadline) {
            member.armed = Some(member.deadline);
            self.timers.schedule(
                member.deadline,
                Timer::Session {
                    group: group_id.to_string(),
                    member: member.member_id.clone(),
                },
            );
        }
    }

    fn heartbeat_member(&self, group: &mut Group, member_id: &str) {
        if let Some(member) = group.members.get_mut(member_id) {
            let timeout = i64::from(member.session_timeout_ms);
            self.set_deadline(&group.id, member, timeout);
        }
    }

    /// Stores the group's metadata; a failure is logged and returned.
    pub(super) fn store_group(&mut self, group: &Group) -> Result<(), i16> {
        let record = super::store::Record::Group {
            group: group.id.clone(),
            value: group.record(),
        };
        self.store.append(&[record]).map_err(|error| {
            warn!(group = %group.id, "cannot store group metadata: {error}");
            ErrorCode::CoordinatorNotAvailable.code()
        })
    }

    fn maybe_prepare_rebalance(&mut self, group: &mut Group, reason: &str) {
        if matches!(
            group.state(),
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        ) {
            self.prepare_rebalance(group, reason);
        }
    }

    /// Starts a rebalance: cancels a pending assignment, then waits for
    /// members to rejoin (an empty group first waits the initial delay).
    pub(super) fn prepare_rebalance(&mut self, group: &mut Group, reason: &str) {
        if group.is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(group, ErrorCode::RebalanceInProgress.code());
        }
        group.pending_sync.clear();
        let was_empty = group.is(GroupState::Empty);
        if !group.transition_to(GroupState::PreparingRebalance, now_ms()) {
            return;
        }
        group.rebalance_round += 1;
        let rebalance_timeout = i64::from(group.rebalance_timeout_ms());
        let delay = if was_empty {
            let initial = i64::from(self.config.initial_rebalance_delay_ms);
            group.join_phase = JoinPhase::Initial {
                delay_ms: initial,
                remaining_ms: (rebalance_timeout - initial).max(0),
            };
            initial
        } else {
            group.join_phase = JoinPhase::Normal;
            rebalance_timeout
        };
        info!(
            group = %group.id,
            generation = group.generation_id,
            "preparing to rebalance ({reason})"
        );
        self.timers.schedule(
            Instant::now() + millis(delay),
            Timer::Join {
                group: group.id.clone(),
                round: group.rebalance_round,
            },
        );
        self.maybe_complete_join(group);
    }

    /// Completes the join phase early once everybody has rejoined (not
    /// during the initial delay, which always runs its course).
    pub(super) fn maybe_complete_join(&mut self, group: &mut Group) {
        if group.is(GroupState::PreparingRebalance)
            && group.join_phase == JoinPhase::Normal
            && group.has_all_members_joined()
        {
            self.complete_join(group);
        }
    }

    /// Kafka's `onCompleteJoin`: drop dynamic members that did not rejoin,
    /// start the next generation and answer every waiting JoinGroup.
    fn complete_join(&mut self, group: &mut Group) {
        let absent: Vec<String> = group
            .members
            .values()
            .filter(|member| !member.is_awaiting_join() && !member.is_static())
            .map(|member| member.member_id.clone())
            .collect();
        if !absent.is_empty() {
            info!(group = %group.id, members = ?absent, "removing members that did not rejoin");
        }
        for member_id in &absent {
            group.remove(member_id);
        }
        if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
            warn!(group = %group.id, "no member rejoined; waiting another rebalance timeout");
            group.join_phase = JoinPhase::Normal;
            self.timers.schedule(
                Instant::now() + millis(i64::from(group.rebalance_timeout_ms())),
                Timer::Join {
                    group: group.id.clone(),
                    round: group.rebalance_round,
                },
            );
            return;
        }
        self.init_next_generation(group);
        if group.is(GroupState::Empty) {
            info!(group = %group.id, generation = group.generation_id, "group is now empty");
            let _ = self.store_group(group);
            return;
        }
        info!(
            group = %group.id,
            generation = group.generation_id,
            members = group.members.len(),
            protocol = group.protocol_name.as_deref().unwrap_or_default(),
            "stabilized group"
        );
        let leader_members = current_member_metadata(group);
        let ids: Vec<String> = group.members.keys().cloned().collect();
        for member_id in ids {
            let members = if group.is_leader(&member_id) {
                leader_members.clone()
            } else {
                Vec::new()
            };
            let answer = generation_answer(group, &member_id, members);
            if let Some(member) = group.members.get_mut(&member_id) {
                member.complete_join(answer);
                member.is_new = false;
                let timeout = i64::from(member.session_timeout_ms);
                self.set_deadline(&group.id, member, timeout);
            }
            group.pending_sync.insert(member_id);
        }
        self.timers.schedule(
            Instant::now() + millis(i64::from(group.rebalance_timeout_ms())),
            Timer::Sync {
                group: group.id.clone(),
                generation: group.generation_id,
            },
        );
    }

    fn init_next_generation(&mut self, group: &mut Group) {
        group.generation_id = group.generation_id.wrapping_add(1);
        let now = now_ms();
        if group.members.is_empty() {
            group.protocol_name = None;
            group.subscribed_topics = group.compute_subscribed_topics();
            group.transition_to(GroupState::Empty, now);
        } else {
            group.protocol_name = group.select_protocol();
            group.subscribed_topics = group.compute_subscribed_topics();
            group.transition_to(GroupState::CompletingRebalance, now);
        }
        group.pending_sync.clear();
    }

    fn reset_and_propagate_assignment_error(&mut self, group: &mut Group, error: i16) {
        for member in group.members.values_mut() {
            member.assignment.clear();
        }
        self.propagate_assignment(group, error);
    }

    /// Answers every waiting SyncGroup with its member's assignment (or
    /// the error) and restarts those members' sessions.
    fn propagate_assignment(&mut self, group: &mut Group, error: i16) {
        let (protocol_type, protocol_name) = if error == ErrorCode::None.code() {
            (group.protocol_type.clone(), group.protocol_name.clone())
        } else {
            (None, None)
        };
        for member in group.members.values_mut() {
            let answer = SyncResult {
                error_code: error,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment: member.assignment.clone(),
            };
            if member.complete_sync(answer) {
                let timeout = i64::from(member.session_timeout_ms);
                self.set_deadline(&group.id, member, timeout);
            }
        }
    }

    /// Kafka's `removeMemberAndUpdateGroup`.
    fn remove_member_and_update_group(&mut self, group: &mut Group, member_id: &str) {
        if let Some(mut member) = group.remove(member_id) {
            member.complete_join(JoinResult::error("", ErrorCode::UnknownMemberId.code()));
        }
        match group.state() {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(group, &format!("removing member {member_id}"))
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(group),
        }
    }

    /// A new member (no member id, or a pending one now used) joins.
    fn add_member_and_rebalance(
        &mut self,
        group: &mut Group,
        request: &JoinRequest,
        member_id: String,
        reason: &str,
    ) -> oneshot::Receiver<JoinResult> {
        let (sender, receiver) = oneshot::channel();
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: request.group_instance_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            session_timeout_ms: request.session_timeout_ms,
            protocol_type: request.protocol_type.clone(),
            protocols: request.protocols.clone(),
            assignment: Vec::new(),
            awaiting_join: Some(sender),
            awaiting_sync: None,
            is_new: true,
            deadline: Instant::now(),
            armed: None,
        };
        if group.is(GroupState::PreparingRebalance) && group.generation_id == 0 {
            group.new_member_added = true;
        }
        group.add(member);
        if let Some(member) = group.members.get_mut(&member_id) {
            self.set_deadline(&group.id, member, NEW_MEMBER_JOIN_TIMEOUT_MS);
        }
        self.maybe_prepare_rebalance(group, &format!("adding new member {member_id} ({reason})"));
        receiver
    }

    /// A known member rejoins with (possibly) new protocols.
    fn update_member_and_rebalance(
        &mut self,
        group: &mut Group,
        request: &JoinRequest,
        reason: &str,
    ) -> Answer<JoinResult> {
        let (sender, receiver) = oneshot::channel();
        let Some(member) = group.members.get_mut(&request.member_id) else {
            return Answer::Now(JoinResult::error(
                &request.member_id,
                ErrorCode::UnknownMemberId.code(),
            ));
        };
        member.protocols = request.protocols.clone();
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_timeout_ms = request.session_timeout_ms;
        member.awaiting_join = Some(sender);
        self.maybe_prepare_rebalance(group, reason);
        Answer::Wait(receiver)
    }

    /// A static member rejoins without its member id (a restarted
    /// instance): it takes over the old member's place under a new id,
    /// fencing the old id, and a stable group rebalances only if the
    /// selected protocol would change (KIP-345).
    fn update_static_member_and_rebalance(
        &mut self,
        group: &mut Group,
        request: &JoinRequest,
        old_id: &str,
        new_id: String,
    ) -> Answer<JoinResult> {
        let Some(mut member) = group.members.remove(old_id) else {
            return Answer::Now(JoinResult::error("", ErrorCode::UnknownMemberId.code()));
        };
        let current_leader = group.leader_id.clone();
        member.complete_join(JoinResult::error(
            old_id,
            ErrorCode::FencedInstanceId.code(),
        ));
        member.complete_sync(SyncResult::error(ErrorCode::FencedInstanceId.code()));
        member.member_id = new_id.clone();
        member.armed = None;
        if group.is_leader(old_id) {
            group.leader_id = Some(new_id.clone());
        }
        if let Some(instance) = &request.group_instance_id {
            group
                .static_members
                .insert(instance.clone(), new_id.clone());
        }
        group.pending_sync.remove(old_id);
        let timeout = i64::from(request.session_timeout_ms);
        self.set_deadline(&group.id, &mut member, timeout);
        let (sender, receiver) = oneshot::channel();
        member.protocols = request.protocols.clone();
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_timeout_ms = request.session_timeout_ms;
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.awaiting_join = Some(sender);
        group.members.insert(new_id.clone(), member);
        info!(group = %group.id, old = old_id, new = %new_id, "static member rejoined under a new member id");

        match group.state() {
            GroupState::Stable => {
                if group.select_protocol() != group.protocol_name {
                    self.maybe_prepare_rebalance(
                        group,
                        "a rejoining static member changes the selected protocol",
                    );
                    return Answer::Wait(receiver);
                }
                let answer = match self.store_group(group) {
                    Err(error) => JoinResult::error("", error),
                    Ok(()) if request.supports_skip_assignment => {
                        // JoinGroup v9+: tell a rejoining static leader that
                        // it leads, but must not run the assignment again.
                        let is_leader = group.is_leader(&new_id);
                        let members = if is_leader {
                            current_member_metadata(group)
                        } else {
                            Vec::new()
                        };
                        let mut answer = generation_answer(group, &new_id, members);
                        answer.skip_assignment = is_leader;
                        answer
                    }
                    Ok(()) => {
                        // Older versions: answer with the old leader id, so
                        // a rejoining leader does not assign as leader.
                        let mut answer = generation_answer(group, &new_id, Vec::new());
                        answer.leader = current_leader.unwrap_or_default();
                        answer
                    }
                };
                if let Some(member) = group.members.get_mut(&new_id) {
                    member.complete_join(answer);
                }
            }
            GroupState::CompletingRebalance => {
                // The leader may already have assigned to the old id.
                self.prepare_rebalance(
                    group,
                    "a static member rejoined during CompletingRebalance",
                );
            }
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => {
                warn!(group = %group.id, state = group.state().name(), "static member found in an unexpected state");
                if let Some(member) = group.members.get_mut(&new_id) {
                    member.complete_join(JoinResult::error(
                        &new_id,
                        ErrorCode::UnknownMemberId.code(),
                    ));
                }
            }
        }
        Answer::Wait(receiver)
    }
}

impl Inner {
    /// JoinGroup.
    pub(super) fn join(&mut self, request: &JoinRequest) -> Answer<JoinResult> {
        let Inner { groups, env, .. } = self;
        let member_id = request.member_id.as_str();
        if request.group_id.is_empty() {
            return Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::InvalidGroupId.code(),
            ));
        }
        if request.session_timeout_ms < env.config.min_session_timeout_ms
            || request.session_timeout_ms > env.config.max_session_timeout_ms
        {
            return Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::InvalidSessionTimeout.code(),
            ));
        }
        let unknown = member_id.is_empty();
        if !groups.contains_key(&request.group_id) {
            if !unknown {
                return Answer::Now(JoinResult::error(
                    member_id,
                    ErrorCode::UnknownMemberId.code(),
                ));
            }
            groups.insert(
                request.group_id.clone(),
                Group::new(&request.group_id, now_ms()),
            );
        }
        let Some(group) = groups.get_mut(&request.group_id) else {
            return Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::CoordinatorNotAvailable.code(),
            ));
        };
        if group.consumer.is_some() {
            if !group.has_no_members() {
                // Classic members cannot join a group of the consumer protocol.
                return Answer::Now(JoinResult::error(
                    member_id,
                    ErrorCode::InconsistentGroupProtocol.code(),
                ));
            }
            // An empty consumer group goes back to the classic protocol.
            group.consumer = None;
            group.protocol_type = None;
        }
        let accepted = match group.state() {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                group
                    .members
                    .get(member_id)
                    .is_some_and(|m| m.is_awaiting_join())
                    || group.num_awaiting_join() < env.config.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.members.contains_key(member_id) || group.members.len() < env.config.max_size
            }
        };
        let answer = if !accepted {
            env.remove_member_and_update_group(group, member_id);
            Answer::Now(JoinResult::error("", ErrorCode::GroupMaxSizeReached.code()))
        } else if unknown {
            env.new_member_join(group, request)
        } else {
            env.current_member_join(group, request)
        };
        if group.is(GroupState::PreparingRebalance) {
            env.maybe_complete_join(group);
        }
        answer
    }

    /// SyncGroup.
    pub(super) fn sync(&mut self, request: &SyncRequest) -> Answer<SyncResult> {
        let Inner { groups, env, .. } = self;
        if request.group_id.is_empty() {
            return Answer::Now(SyncResult::error(ErrorCode::InvalidGroupId.code()));
        }
        let Some(group) = groups.get_mut(&request.group_id) else {
            return Answer::Now(SyncResult::error(ErrorCode::UnknownMemberId.code()));
        };
        let invalid = if group.is(GroupState::Dead) {
            Some(ErrorCode::CoordinatorNotAvailable.code())
        } else {
            validate_current_member(
                group,
                &request.member_id,
                request.group_instance_id.as_deref(),
            )
            .or_else(|| {
                if request.generation_id != group.generation_id {
                    Some(ErrorCode::IllegalGeneration.code())
                } else if request
                    .protocol_type
                    .as_ref()
                    .is_some_and(|t| group.protocol_type.as_ref() != Some(t))
                    || request
                        .protocol_name
                        .as_ref()
                        .is_some_and(|n| group.protocol_name.as_ref() != Some(n))
                {
                    Some(ErrorCode::InconsistentGroupProtocol.code())
                } else {
                    None
                }
            })
        };
        if let Some(error) = invalid {
            return Answer::Now(SyncResult::error(error));
        }
        match group.state() {
            GroupState::Empty | GroupState::Dead => {
                Answer::Now(SyncResult::error(ErrorCode::UnknownMemberId.code()))
            }
            GroupState::PreparingRebalance => {
                Answer::Now(SyncResult::error(ErrorCode::RebalanceInProgress.code()))
            }
            GroupState::Stable => {
                group.pending_sync.remove(&request.member_id);
                env.heartbeat_member(group, &request.member_id);
                let assignment = group
                    .members
                    .get(&request.member_id)
                    .map(|member| member.assignment.clone())
                    .unwrap_or_default();
                Answer::Now(SyncResult {
                    error_code: ErrorCode::None.code(),
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment,
                })
            }
            GroupState::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                if let Some(member) = group.members.get_mut(&request.member_id) {
                    member.awaiting_sync = Some(sender);
                }
                group.pending_sync.remove(&request.member_id);
                if group.is_leader(&request.member_id) {
                    info!(
                        group = %group.id,
                        generation = group.generation_id,
                        members = group.members.len(),
                        "assignment received from the leader"
                    );
                    for member in group.members.values_mut() {
                        member.assignment = request
                            .assignments
                            .iter()
                            .find(|(id, _)| *id == member.member_id)
                            .map(|(_, assignment)| assignment.clone())
                            .unwrap_or_default();
                    }
                    match env.store_group(group) {
                        Ok(()) => {
                            env.propagate_assignment(group, ErrorCode::None.code());
                            group.transition_to(GroupState::Stable, now_ms());
                        }
                        Err(error) => {
                            env.reset_and_propagate_assignment_error(group, error);
                            env.maybe_prepare_rebalance(group, "storing the assignment failed");
                        }
                    }
                }
                Answer::Wait(receiver)
            }
        }
    }

    /// Heartbeat.
    pub(super) fn heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> i16 {
        let Inner { groups, env, .. } = self;
        if group_id.is_empty() {
            return ErrorCode::InvalidGroupId.code();
        }
        let Some(group) = groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId.code();
        };
        if group.is(GroupState::Dead) {
            return ErrorCode::CoordinatorNotAvailable.code();
        }
        if let Some(error) = validate_current_member(group, member_id, group_instance_id) {
            return error;
        }
        if generation_id != group.generation_id {
            return ErrorCode::IllegalGeneration.code();
        }
        match group.state() {
            GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId.code(),
            GroupState::CompletingRebalance | GroupState::Stable => {
                env.heartbeat_member(group, member_id);
                ErrorCode::None.code()
            }
            GroupState::PreparingRebalance => {
                env.heartbeat_member(group, member_id);
                ErrorCode::RebalanceInProgress.code()
            }
        }
    }

    /// LeaveGroup: a group-level error or one error per member.
    pub(super) fn leave(
        &mut self,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> Result<Vec<i16>, i16> {
        let Inner { groups, env, .. } = self;
        if group_id.is_empty() {
            return Err(ErrorCode::InvalidGroupId.code());
        }
        let Some(group) = groups.get_mut(group_id) else {
            return Ok(vec![ErrorCode::UnknownMemberId.code(); leaving.len()]);
        };
        if group.is(GroupState::Dead) {
            return Err(ErrorCode::CoordinatorNotAvailable.code());
        }
        let mut errors = Vec::with_capacity(leaving.len());
        for member in leaving {
            let reason = member.reason.as_deref().unwrap_or("not provided");
            let error = if member.member_id.is_empty() {
                // Removal of a static member by its instance id alone (admin).
                match member
                    .group_instance_id
                    .as_ref()
                    .and_then(|instance| group.static_members.get(instance).cloned())
                {
                    Some(current) => {
                        info!(group = %group.id, member = %current, "member left the group ({reason})");
                        env.remove_member_and_update_group(group, &current);
                        ErrorCode::None.code()
                    }
                    None => ErrorCode::UnknownMemberId.code(),
                }
            } else if group.pending_members.remove(&member.member_id) {
                if group.is(GroupState::PreparingRebalance) {
                    env.maybe_complete_join(group);
                }
                ErrorCode::None.code()
            } else {
                match validate_current_member(
                    group,
                    &member.member_id,
                    member.group_instance_id.as_deref(),
                ) {
                    Some(error) => error,
                    None => {
                        info!(group = %group.id, member = %member.member_id, "member left the group ({reason})");
                        env.remove_member_and_update_group(group, &member.member_id);
                        ErrorCode::None.code()
                    }
                }
            };
            errors.push(error);
        }
        Ok(errors)
    }

    /// A deadline passed.
    pub(super) fn on_timer(&mut self, timer: Timer, now: Instant) {
        let Inner { groups, env, .. } = self;
        match timer {
            Timer::Session { group, member } => {
                let Some(group) = groups.get_mut(&group) else {
                    return;
                };
                let Some(state) = group.members.get_mut(&member) else {
                    return;
                };
                if state.armed.is_some_and(|armed| armed <= now) {
                    state.armed = None;
                }
                if state.deadline > now {
                    if state.armed.is_none() {
                        let timeout = state.deadline.saturating_duration_since(now);
                        state.armed = Some(state.deadline);
                        env.timers.schedule(
                            now + timeout,
                            Timer::Session {
                                group: group.id.clone(),
                                member,
                            },
                        );
                    }
                    return;
                }
                if state.exempt_from_expiry() {
                    return;
                }
                info!(group = %group.id, member = %member, "member's session expired; removing it from the group");
                env.remove_member_and_update_group(group, &member);
            }
            Timer::PendingMember { group, member } => {
                let Some(group) = groups.get_mut(&group) else {
                    return;
                };
                if group.pending_members.remove(&member) {
                    info!(group = %group.id, member = %member, "pending member expired");
                    if group.is(GroupState::PreparingRebalance) {
                        env.maybe_complete_join(group);
                    }
                }
            }
            Timer::Join { group, round } => {
                let Some(group) = groups.get_mut(&group) else {
                    return;
                };
                if round != group.rebalance_round || !group.is(GroupState::PreparingRebalance) {
                    return;
                }
                match group.join_phase {
                    JoinPhase::Initial {
                        delay_ms,
                        remaining_ms,
                    } if group.new_member_added && remaining_ms > 0 => {
                        group.new_member_added = false;
                        let delay = delay_ms.min(remaining_ms);
                        group.join_phase = JoinPhase::Initial {
                            delay_ms,
                            remaining_ms: (remaining_ms - delay).max(0),
                        };
                        env.timers.schedule(
                            now + millis(delay),
                            Timer::Join {
                                group: group.id.clone(),
                                round,
                            },
                        );
                    }
                    _ => {
                        group.new_member_added = false;
                        group.join_phase = JoinPhase::Normal;
                        env.complete_join(group);
                    }
                }
            }
            Timer::Sync { group, generation } => {
                let Some(group) = groups.get_mut(&group) else {
                    return;
                };
                if generation != group.generation_id
                    || !matches!(
                        group.state(),
                        GroupState::CompletingRebalance | GroupState::Stable
                    )
                    || group.pending_sync.is_empty()
                {
                    return;
                }
                let missing: Vec<String> = group.pending_sync.iter().cloned().collect();
                info!(group = %group.id, members = ?missing, "removing members that did not send SyncGroup in time");
                for member_id in &missing {
                    group.remove(member_id);
                }
                env.prepare_rebalance(group, "members did not sync in time");
            }
            Timer::Retention | Timer::ConsumerSession { .. } | Timer::ConsumerRevocation { .. } => {
            }
        }
    }
}

impl Env {
    fn new_member_join(&mut self, group: &mut Group, request: &JoinRequest) -> Answer<JoinResult> {
        if group.is(GroupState::Dead) {
            return Answer::Now(JoinResult::error(
                "",
                ErrorCode::CoordinatorNotAvailable.code(),
            ));
        }
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return Answer::Now(JoinResult::error(
                "",
                ErrorCode::InconsistentGroupProtocol.code(),
            ));
        }
        let prefix = request
            .group_instance_id
            .as_deref()
            .unwrap_or(&request.client_id);
        let new_id = generate_member_id(prefix);
        let reason = request.reason.as_deref().unwrap_or("not provided");
        if let Some(instance) = &request.group_instance_id {
            return match group.static_members.get(instance).cloned() {
                Some(old_id) => {
                    self.update_static_member_and_rebalance(group, request, &old_id, new_id)
                }
                None => Answer::Wait(self.add_member_and_rebalance(group, request, new_id, reason)),
            };
        }
        if request.require_known_member_id {
            // KIP-394: the member must come back with this id, so that a
            // client that never gets the answer leaves no member behind.
            group.pending_members.insert(new_id.clone());
            self.timers.schedule(
                Instant::now() + millis(i64::from(request.session_timeout_ms)),
                Timer::PendingMember {
                    group: group.id.clone(),
                    member: new_id.clone(),
                },
            );
            return Answer::Now(JoinResult::error(
                &new_id,
                ErrorCode::MemberIdRequired.code(),
            ));
        }
        Answer::Wait(self.add_member_and_rebalance(group, request, new_id, reason))
    }

    fn current_member_join(
        &mut self,
        group: &mut Group,
        request: &JoinRequest,
    ) -> Answer<JoinResult> {
        let member_id = request.member_id.as_str();
        if group.is(GroupState::Dead) {
            return Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::CoordinatorNotAvailable.code(),
            ));
        }
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::InconsistentGroupProtocol.code(),
            ));
        }
        let reason = request.reason.as_deref().unwrap_or("not provided");
        if group.pending_members.contains(member_id) {
            if request.group_instance_id.is_some() {
                // A pending member id is only ever handed to dynamic members.
                return Answer::Now(JoinResult::error(
                    member_id,
                    ErrorCode::UnknownMemberId.code(),
                ));
            }
            return Answer::Wait(self.add_member_and_rebalance(
                group,
                request,
                member_id.to_string(),
                reason,
            ));
        }
        if let Some(error) =
            validate_current_member(group, member_id, request.group_instance_id.as_deref())
        {
            return Answer::Now(JoinResult::error(member_id, error));
        }
        let (is_leader, matches) = match group.members.get(member_id) {
            Some(member) => (
                group.is_leader(member_id),
                member.matches(&request.protocols),
            ),
            None => {
                return Answer::Now(JoinResult::error(
                    member_id,
                    ErrorCode::UnknownMemberId.code(),
                ))
            }
        };
        match group.state() {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(
                group,
                request,
                &format!("member {member_id} joining during PreparingRebalance ({reason})"),
            ),
            GroupState::CompletingRebalance if matches => {
                // It lost the JoinGroup answer: send the same one again.
                let members = if is_leader {
                    current_member_metadata(group)
                } else {
                    Vec::new()
                };
                Answer::Now(generation_answer(group, member_id, members))
            }
            GroupState::CompletingRebalance => self.update_member_and_rebalance(
                group,
                request,
                &format!("member {member_id} changed its metadata ({reason})"),
            ),
            GroupState::Stable if is_leader || !matches => self.update_member_and_rebalance(
                group,
                request,
                &format!("member {member_id} rejoining a stable group ({reason})"),
            ),
            GroupState::Stable => Answer::Now(generation_answer(group, member_id, Vec::new())),
            GroupState::Empty | GroupState::Dead => Answer::Now(JoinResult::error(
                member_id,
                ErrorCode::UnknownMemberId.code(),
            )),
        }
    }
}
