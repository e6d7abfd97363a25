//! A classic group (Kafka's `GroupMetadata`): its state, generation,
//! protocol, leader, members (dynamic and static), the members still owing
//! a JoinGroup or SyncGroup, and its committed offsets.
//!
//! This file holds the bookkeeping only; the rebalance protocol that moves
//! a group between states lives in `protocol.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use tracing::error;

use super::consumer::ConsumerGroup;
use super::member::{subscription_topics, Member};
use super::state::GroupState;
use super::store::{GroupRecord, MemberRecord, OffsetRecord};

/// The protocol type of Kafka consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Which deadline the current join phase waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinPhase {
    /// The first rebalance of an empty group: wait `delay_ms` more, up to
    /// `remaining_ms` in total, while new members keep arriving.
    Initial { delay_ms: i64, remaining_ms: i64 },
    /// Complete as soon as every member has rejoined, or at the deadline.
    Normal,
}

pub struct Group {
    pub id: String,
    state: GroupState,
    /// Wall-clock ms of the last state change.
    pub state_timestamp: i64,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation_id: i32,
    pub leader_id: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// group.instance.id -> member id.
    pub static_members: HashMap<String, String>,
    /// Ids handed out with MEMBER_ID_REQUIRED, not yet used to join.
    pub pending_members: HashSet<String>,
    /// Members of this generation that still owe a SyncGroup.
    pub pending_sync: HashSet<String>,
    /// A member joined during the initial delay, which may be extended.
    pub new_member_added: bool,
    /// Counts prepared rebalances; join timers carry the round they were
    /// set for so that a stale one is ignored.
    pub rebalance_round: u64,
    pub join_phase: JoinPhase,
    /// Topics the members subscribe to (consumer protocol), if known.
    pub subscribed_topics: Option<BTreeSet<String>>,
    pub offsets: BTreeMap<(String, i32), OffsetRecord>,
    /// Set when the group speaks the consumer protocol (KIP-848) instead of
    /// the classic one; the classic fields then stay unused.
    pub consumer: Option<ConsumerGroup>,
}

impl Group {
    pub fn new(id: &str, now_ms: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            state_timestamp: now_ms,
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashSet::new(),
            pending_sync: HashSet::new(),
            new_member_added: false,
            rebalance_round: 0,
            join_phase: JoinPhase::Normal,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            consumer: None,
        }
    }

    /// No members of either protocol (an Empty group).
    pub fn has_no_members(&self) -> bool {
        self.is(GroupState::Empty) && self.consumer.as_ref().is_none_or(|c| c.is_empty())
    }

    /// The group's state name as ListGroups reports it.
    pub fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(consumer) => consumer.state_name(),
            None => self.state.name(),
        }
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    /// Moves to `to` if Kafka allows it from the current state.
    pub fn transition_to(&mut self, to: GroupState, now_ms: i64) -> bool {
        if !to.allowed_from(self.state) {
            error!(
                group = %self.id,
                from = self.state.name(),
                to = to.name(),
                "refused an invalid group state transition"
            );
            return false;
        }
        self.state = to;
        self.state_timestamp = now_ms;
        true
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn is_consumer_group(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    pub fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|member| member.is_awaiting_join())
            .count()
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join() && self.pending_members.is_empty()
    }

    /// The largest rebalance timeout among the members.
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|member| member.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Adds a member (its join waiter, if any, already set).
    pub fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member; a new leader is picked if it led.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let removed = self.members.remove(member_id);
        if let Some(instance) = removed.as_ref().and_then(|m| m.group_instance_id.as_ref()) {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_members.remove(member_id);
        self.pending_sync.remove(member_id);
        removed
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<&str> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for member in self.members.values() {
            for (name, _) in &member.protocols {
                *counts.entry(name.as_str()).or_default() += 1;
            }
        }
        let total = self.members.len();
        let mut candidates: Vec<&str> = counts
            .into_iter()
            .filter(|(_, count)| *count == total)
            .map(|(name, _)| name)
            .collect();
        candidates.sort_unstable();
        candidates
    }

    /// Whether a member with this protocol type and these protocols may
    /// join: into an empty group with any, else with the group's type and
    /// at least one protocol every member supports.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        if self.is(GroupState::Empty) {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols
            .iter()
            .any(|(name, _)| candidates.contains(&name.as_str()))
    }

    /// Kafka's `selectProtocol`: each member votes for its most preferred
    /// protocol among those all members support; the most votes win (ties
    /// go to the name first in order).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(vote) = member.vote(&candidates) {
                *votes.entry(vote).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_string())
    }

    /// The union of the consumer members' subscribed topics; None when the
    /// group does not speak the consumer protocol or a subscription does
    /// not parse.
    pub fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.is_consumer_group() {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for member in self.members.values() {
            topics.extend(subscription_topics(member.metadata(protocol))?);
        }
        Some(topics)
    }

    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        if let Some(consumer) = &self.consumer {
            return consumer.subscribed_topics().contains(topic);
        }
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => true,
        }
    }

    /// If the leader has not rejoined, makes any member that did the
    /// leader. False when nobody rejoined.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|member| member.is_awaiting_join())
        {
            return true;
        }
        match self
            .members
            .values()
            .find(|member| member.is_awaiting_join())
        {
            Some(member) => {
                self.leader_id = Some(member.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// The group's metadata as the store keeps it.
    pub fn record(&self) -> GroupRecord {
        let protocol = self.protocol_name.clone();
        GroupRecord {
            protocol_type: self.protocol_type.clone(),
            generation: self.generation_id,
            protocol: protocol.clone(),
            leader: self.leader_id.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .values()
                .map(|member| MemberRecord {
                    member_id: member.member_id.clone(),
                    group_instance_id: member.group_instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    session_timeout_ms: member.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .map(|p| member.metadata(p).to_vec())
                        .unwrap_or_default(),
                    assignment: member.assignment.clone(),
                })
                .collect(),
        }
    }

    /// A group as loaded from the store: Stable with its members if it
    /// had any, else Empty.
    pub fn restore(id: &str, record: GroupRecord, now: std::time::Instant) -> Self {
        let mut group = Group::new(id, record.state_timestamp);
        group.protocol_type = record.protocol_type;
        group.protocol_name = record.protocol;
        group.generation_id = record.generation;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        for stored in record.members {
            let member = Member {
                member_id: stored.member_id,
                group_instance_id: stored.group_instance_id,
                client_id: stored.client_id,
                client_host: stored.client_host,
                rebalance_timeout_ms: stored.rebalance_timeout_ms,
                session_timeout_ms: stored.session_timeout_ms,
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                protocols: vec![(protocol.clone(), stored.subscription)],
                assignment: stored.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                deadline: now,
                armed: None,
            };
            group.add(member);
        }
        if let Some(leader) = record.leader.filter(|id| group.members.contains_key(id)) {
            group.leader_id = Some(leader);
        }
        if !group.members.is_empty() {
            group.state = GroupState::Stable;
        }
        group.subscribed_topics = group.compute_subscribed_topics();
        group
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    pub fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Vec::new()))
                .collect(),
            assignment: Vec::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: true,
            deadline: Instant::now(),
            armed: None,
        }
    }

    #[test]
    fn protocol_selection_votes_among_common_protocols() {
        let mut group = Group::new("g", 0);
        group.add(member("a", &["range", "roundrobin"]));
        group.transition_to(GroupState::PreparingRebalance, 0);
        group.add(member("b", &["roundrobin", "range"]));
        group.add(member("c", &["roundrobin", "sticky"]));
        assert_eq!(group.select_protocol().as_deref(), Some("roundrobin"));
        assert!(group.supports_protocols("consumer", &[("roundrobin".into(), vec![])]));
        assert!(!group.supports_protocols("consumer", &[("range".into(), vec![])]));
        assert!(!group.supports_protocols("connect", &[("roundrobin".into(), vec![])]));
    }

    #[test]
    fn leader_moves_when_it_leaves_or_does_not_rejoin() {
        let mut group = Group::new("g", 0);
        group.add(member("a", &["range"]));
        group.add(member("b", &["range"]));
        assert!(group.is_leader("a"));
        group.remove("a");
        assert!(group.is_leader("b"));
        group.add(member("c", &["range"]));
        assert!(!group.maybe_elect_new_joined_leader());
        let (tx, _rx) = tokio::sync::oneshot::channel();
        group.members.get_mut("c").unwrap().awaiting_join = Some(tx);
        assert!(group.maybe_elect_new_joined_leader());
        assert!(group.is_leader("c"));
    }
}
