//! Committed offsets (Kafka's OffsetMetadataManager for classic groups):
//! OffsetCommit with its generation checks, OffsetFetch, OffsetDelete,
//! DeleteGroups, and the retention that expires the offsets of groups
//! nobody uses any more (`offsets.retention.minutes`).

use crate::error_code::ErrorCode;

use tracing::{info, warn};

use super::group::Group;
use super::state::GroupState;
use super::store::{OffsetRecord, Record};
use super::{now_ms, CommitRequest, CommittedOffset, Inner};

impl Inner {
    /// OffsetCommit: one error per offset, in order.
    pub(super) fn commit_offsets(&mut self, request: &CommitRequest) -> Vec<i16> {
        let count = request.offsets.len();
        let Inner { groups, env, .. } = self;
        if !groups.contains_key(&request.group_id) {
            if request.generation_id >= 0 {
                // A commit from an old generation of a group that is gone.
                return vec![ErrorCode::IllegalGeneration.code(); count];
            }
            // A consumer that stores offsets without group management.
            info!(group = %request.group_id, "creating a simple group on its first offset commit");
            groups.insert(
                request.group_id.clone(),
                Group::new(&request.group_id, now_ms()),
            );
        }
        let Some(group) = groups.get_mut(&request.group_id) else {
            return vec![ErrorCode::CoordinatorNotAvailable.code(); count];
        };
        if let Some(consumer) = &group.consumer {
            // Consumer protocol (OffsetCommit v9): the member epoch fences
            // zombies; an empty member id with a negative epoch is an admin
            // commit, allowed only while the group is empty.
            if let Some(error) =
                consumer.validate_offset_commit(&request.member_id, request.generation_id)
            {
                return vec![error; count];
            }
        } else if let Some(error) = validate_offset_commit(group, request) {
            return vec![error; count];
        }
        match group.state() {
            _ if group.consumer.is_some() => {}
            GroupState::Empty => {}
            GroupState::Stable | GroupState::PreparingRebalance => {
                // A commit from a member counts as a heartbeat.
                if let Some(member) = group.members.get_mut(&request.member_id) {
                    let timeout = i64::from(member.session_timeout_ms);
                    env.set_deadline(&group.id, member, timeout);
                }
            }
            GroupState::CompletingRebalance => {
                return vec![ErrorCode::RebalanceInProgress.code(); count]
            }
            GroupState::Dead => return vec![ErrorCode::CoordinatorNotAvailable.code(); count],
        }
        let now = now_ms();
        let expire_timestamp =
            (request.retention_time_ms >= 0).then(|| now.saturating_add(request.retention_time_ms));
        let mut errors = Vec::with_capacity(count);
        let mut records = Vec::new();
        for commit in &request.offsets {
            let metadata_len = commit.metadata.as_deref().map_or(0, str::len);
            if metadata_len > env.config.offset_metadata_max_bytes {
                errors.push(ErrorCode::OffsetMetadataTooLarge.code());
                continue;
            }
            errors.push(ErrorCode::None.code());
            records.push(offset_record(&group.id, commit, now, expire_timestamp));
        }
        if let Err(error) = env.store.append(&records) {
            warn!(group = %group.id, "cannot store offset commit: {error}");
            for code in errors
                .iter_mut()
                .filter(|code| **code == ErrorCode::None.code())
            {
                *code = ErrorCode::CoordinatorNotAvailable.code();
            }
            return errors;
        }
        remember_offsets(group, records);
        self.maybe_compact();
        errors
    }

    /// TxnOffsetCommit's member check (KIP-447), made when the offsets are
    /// sent: a client that names no generation and no member (before v3)
    /// is not checked; otherwise the member must be current, as for
    /// OffsetCommit. A group that does not exist yet is accepted; it is
    /// created when the transaction commits.
    pub(super) fn validate_txn_offset_commit(&self, request: &CommitRequest) -> i16 {
        let unchecked = request.generation_id < 0
            && request.member_id.is_empty()
            && request.group_instance_id.is_none();
        let Some(group) = self.groups.get(&request.group_id) else {
            return if unchecked || request.generation_id < 0 {
                ErrorCode::None.code()
            } else {
                ErrorCode::IllegalGeneration.code()
            };
        };
        if unchecked {
            return ErrorCode::None.code();
        }
        let error = match &group.consumer {
            Some(consumer) => {
                consumer.validate_offset_commit(&request.member_id, request.generation_id)
            }
            None => validate_offset_commit(group, request),
        };
        error.unwrap_or(ErrorCode::None.code())
    }

    /// The offsets of a committed transaction, stored without member checks
    /// (Kafka writes them when the commit marker reaches the offsets
    /// topic, whatever the group has done since). Creates the group if
    /// needed.
    pub(super) fn commit_transactional_offsets(
        &mut self,
        group_id: &str,
        offsets: &[super::OffsetCommit],
    ) -> i16 {
        let now = now_ms();
        let records: Vec<Record> = offsets
            .iter()
            .map(|commit| offset_record(group_id, commit, now, None))
            .collect();
        if let Err(error) = self.env.store.append(&records) {
            warn!(
                group = group_id,
                "cannot store transactional offsets: {error}"
            );
            return ErrorCode::CoordinatorNotAvailable.code();
        }
        let group = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id, now));
        remember_offsets(group, records);
        self.maybe_compact();
        ErrorCode::None.code()
    }

    /// OffsetFetch for one group: the named partitions, or all of them.
    pub(super) fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<CommittedOffset> {
        let group = self.groups.get(group_id);
        let lookup = |topic: &str, partition: i32| {
            let stored = group.and_then(|g| g.offsets.get(&(topic.to_string(), partition)));
            CommittedOffset {
                topic: topic.to_string(),
                partition,
                offset: stored.map_or(-1, |s| s.offset),
                leader_epoch: stored.map_or(-1, |s| s.leader_epoch),
                metadata: stored.map(|s| s.metadata.clone()).unwrap_or_default(),
                error_code: ErrorCode::None.code(),
            }
        };
        match partitions {
            Some(partitions) => partitions.iter().map(|(t, p)| lookup(t, *p)).collect(),
            None => group
                .map(|g| g.offsets.keys().map(|(t, p)| lookup(t, *p)).collect())
                .unwrap_or_default(),
        }
    }

    /// OffsetDelete: a group error, or one error per partition.
    pub(super) fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let Some(group) = self.groups.get(group_id) else {
            return Err(ErrorCode::GroupIdNotFound.code());
        };
        let errors: Vec<i16> = match group.state() {
            GroupState::Dead => return Err(ErrorCode::GroupIdNotFound.code()),
            _ if group.has_no_members() => vec![ErrorCode::None.code(); partitions.len()],
            _ if group.is_consumer_group() => partitions
                .iter()
                .map(|(topic, _)| {
                    if group.is_subscribed_to(topic) {
                        ErrorCode::GroupSubscribedToTopic.code()
                    } else {
                        ErrorCode::None.code()
                    }
                })
                .collect(),
            _ => return Err(ErrorCode::NonEmptyGroup.code()),
        };
        let doomed: Vec<(String, i32)> = partitions
            .iter()
            .zip(&errors)
            .filter(|(key, error)| {
                **error == ErrorCode::None.code() && group.offsets.contains_key(*key)
            })
            .map(|(key, _)| key.clone())
            .collect();
        let records: Vec<Record> = doomed
            .iter()
            .map(|(topic, partition)| Record::OffsetDeleted {
                group: group_id.to_string(),
                topic: topic.clone(),
                partition: *partition,
            })
            .collect();
        if let Err(error) = self.env.store.append(&records) {
            warn!(group = group_id, "cannot store offset deletion: {error}");
            return Err(ErrorCode::CoordinatorNotAvailable.code());
        }
        if let Some(group) = self.groups.get_mut(group_id) {
            for key in &doomed {
                group.offsets.remove(key);
            }
        }
        if !doomed.is_empty() {
            info!(group = group_id, offsets = doomed.len(), "deleted offsets");
        }
        self.remove_if_unused(group_id);
        Ok(errors)
    }

    /// DeleteGroups: one error per group id.
    pub(super) fn delete_groups(&mut self, group_ids: &[String]) -> Vec<i16> {
        group_ids
            .iter()
            .map(|group_id| {
                let Some(group) = self.groups.get(group_id) else {
                    return ErrorCode::GroupIdNotFound.code();
                };
                match group.state() {
                    GroupState::Dead => ErrorCode::GroupIdNotFound.code(),
                    _ if group.has_no_members() => match self.delete_group(group_id) {
                        Ok(()) => ErrorCode::None.code(),
                        Err(error) => error,
                    },
                    _ => ErrorCode::NonEmptyGroup.code(),
                }
            })
            .collect()
    }

    fn delete_group(&mut self, group_id: &str) -> Result<(), i16> {
        let record = Record::GroupDeleted {
            group: group_id.to_string(),
        };
        if let Err(error) = self.env.store.append(&[record]) {
            warn!(group = group_id, "cannot store group deletion: {error}");
            return Err(ErrorCode::CoordinatorNotAvailable.code());
        }
        if let Some(mut group) = self.groups.remove(group_id) {
            group.transition_to(GroupState::Dead, now_ms());
            info!(
                group = group_id,
                offsets = group.offsets.len(),
                "deleted group"
            );
        }
        Ok(())
    }

    /// Kafka's `cleanupGroupMetadata`: an empty group without offsets is
    /// gone.
    fn remove_if_unused(&mut self, group_id: &str) {
        let unused = self.groups.get(group_id).is_some_and(|g| {
            g.has_no_members() && g.offsets.is_empty() && g.pending_members.is_empty()
        });
        if unused {
            let _ = self.delete_group(group_id);
        }
    }

    /// Removes the offsets of a deleted topic from every group; empty
    /// groups left without offsets go too.
    pub(super) fn remove_topic_offsets(&mut self, topic: &str) {
        let records: Vec<Record> = self
            .groups
            .values()
            .flat_map(|group| {
                group
                    .offsets
                    .keys()
                    .filter(|(t, _)| t == topic)
                    .map(|(t, partition)| Record::OffsetDeleted {
                        group: group.id.clone(),
                        topic: t.clone(),
                        partition: *partition,
                    })
            })
            .collect();
        if records.is_empty() {
            return;
        }
        if let Err(error) = self.env.store.append(&records) {
            warn!(
                topic,
                "cannot store the removal of a deleted topic's offsets: {error}"
            );
            return;
        }
        let mut touched = Vec::new();
        for group in self.groups.values_mut() {
            let before = group.offsets.len();
            group.offsets.retain(|(t, _), _| t != topic);
            if group.offsets.len() != before {
                touched.push(group.id.clone());
            }
        }
        info!(
            topic,
            offsets = records.len(),
            "removed the offsets of a deleted topic"
        );
        for group_id in touched {
            self.remove_if_unused(&group_id);
        }
    }

    /// Expires offsets as Kafka does (`removeExpiredOffsets`): all offsets
    /// of an empty group once it has been empty for the retention period;
    /// in a stable consumer group, offsets of topics nobody subscribes to
    /// any more, by commit time; for a group that only commits (no
    /// protocol), each offset by its commit time. An explicit expiry
    /// timestamp (OffsetCommit v2-v4) wins. Empty groups left without
    /// offsets are deleted.
    pub(super) fn expire_offsets(&mut self, now: i64) {
        let retention = self.env.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut expired_total = 0usize;
        for group in self.groups.values() {
            let (base_is_state, skip_subscribed) = match (&group.protocol_type, group.state()) {
                _ if group.consumer.is_some() => (group.has_no_members(), !group.has_no_members()),
                (Some(_), GroupState::Empty) => (true, false),
                (Some(_), GroupState::Stable)
                    if group.is_consumer_group() && group.subscribed_topics.is_some() =>
                {
                    (false, true)
                }
                (None, _) => (false, false),
                _ => continue,
            };
            for ((topic, partition), stored) in &group.offsets {
                if skip_subscribed && group.is_subscribed_to(topic) {
                    continue;
                }
                let expired = match stored.expire_timestamp {
                    Some(at) => now >= at,
                    None => {
                        let base = if base_is_state {
                            group.state_timestamp
                        } else {
                            stored.commit_timestamp
                        };
                        now.saturating_sub(base) >= retention
                    }
                };
                if expired {
                    expired_total += 1;
                    records.push(Record::OffsetDeleted {
                        group: group.id.clone(),
                        topic: topic.clone(),
                        partition: *partition,
                    });
                }
            }
        }
        if let Err(error) = self.env.store.append(&records) {
            warn!("cannot store expired offsets: {error}");
            return;
        }
        let mut touched = Vec::new();
        for record in records {
            if let Record::OffsetDeleted {
                group,
                topic,
                partition,
            } = record
            {
                if let Some(g) = self.groups.get_mut(&group) {
                    g.offsets.remove(&(topic, partition));
                }
                touched.push(group);
            }
        }
        // Groups that are empty with no offsets are removed, whether their
        // offsets just expired or they never had any.
        let unused: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.has_no_members() && g.offsets.is_empty() && g.pending_members.is_empty())
            .map(|g| g.id.clone())
            .collect();
        for group_id in unused {
            let _ = self.delete_group(&group_id);
        }
        if expired_total > 0 {
            touched.sort();
            touched.dedup();
            info!(offsets = expired_total, groups = ?touched, "expired offsets");
        }
        self.maybe_compact();
    }

    /// Rewrites the store once it has grown well past the live state.
    pub(super) fn maybe_compact(&mut self) {
        if !self.env.store.wants_compaction() {
            return;
        }
        let live = self.live_records();
        let before = self.env.store.len();
        match self.env.store.rewrite(&live) {
            Ok(()) => info!(
                before_bytes = before,
                after_bytes = self.env.store.len(),
                "compacted the group store"
            ),
            Err(error) => warn!("cannot compact the group store: {error}"),
        }
    }

    /// The whole current state as store records.
    pub(super) fn live_records(&self) -> Vec<Record> {
        let mut records = Vec::new();
        let mut ids: Vec<&String> = self.groups.keys().collect();
        ids.sort();
        for id in ids {
            let Some(group) = self.groups.get(id) else {
                continue;
            };
            if let Some(consumer) = &group.consumer {
                records.push(Record::ConsumerGroup {
                    group: id.clone(),
                    epoch: consumer.epoch,
                    state_timestamp: group.state_timestamp,
                });
                for record in consumer.stored_records().to_records() {
                    records.push(Record::Consumer {
                        group: id.clone(),
                        record,
                    });
                }
            } else if group.generation_id > 0 || group.protocol_type.is_some() {
                records.push(Record::Group {
                    group: id.clone(),
                    value: group.record(),
                });
            }
            for ((topic, partition), value) in &group.offsets {
                records.push(Record::Offset {
                    group: id.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: value.clone(),
                });
            }
        }
        records
    }
}

/// Kafka's `validateOffsetCommit` for classic groups.
/// The store record of one committed offset.
pub(super) fn offset_record(
    group_id: &str,
    commit: &super::OffsetCommit,
    now: i64,
    expire_timestamp: Option<i64>,
) -> Record {
    Record::Offset {
        group: group_id.to_string(),
        topic: commit.topic.clone(),
        partition: commit.partition,
        value: OffsetRecord {
            offset: commit.offset,
            leader_epoch: commit.leader_epoch,
            metadata: commit.metadata.clone().unwrap_or_default(),
            commit_timestamp: now,
            expire_timestamp,
        },
    }
}

/// Applies stored offset records to the group in memory.
fn remember_offsets(group: &mut Group, records: Vec<Record>) {
    for record in records {
        if let Record::Offset {
            topic,
            partition,
            value,
            ..
        } = record
        {
            group.offsets.insert((topic, partition), value);
        }
    }
}

fn validate_offset_commit(group: &Group, request: &CommitRequest) -> Option<i16> {
    if group.is(GroupState::Dead) {
        return Some(ErrorCode::CoordinatorNotAvailable.code());
    }
    if request.generation_id < 0 && group.is(GroupState::Empty) {
        // The admin client, or a consumer without group management.
        return None;
    }
    if request.generation_id >= 0
        || !request.member_id.is_empty()
        || request.group_instance_id.is_some()
    {
        if let Some(instance) = request.group_instance_id.as_deref() {
            match group.static_members.get(instance) {
                Some(current) if *current != request.member_id => {
                    return Some(ErrorCode::FencedInstanceId.code())
                }
                Some(_) => {}
                None => return Some(ErrorCode::UnknownMemberId.code()),
            }
        }
        if !group.members.contains_key(&request.member_id) {
            return Some(ErrorCode::UnknownMemberId.code());
        }
        if request.generation_id != group.generation_id {
            return Some(ErrorCode::IllegalGeneration.code());
        }
        return None;
    }
    if !group.is(GroupState::Empty) {
        // Only members may commit for a group that has members.
        return Some(ErrorCode::UnknownMemberId.code());
    }
    None
}
