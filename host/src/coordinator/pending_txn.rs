//! Transactional offsets a cluster node's group coordinator holds until
//! their transaction ends (Kafka's `pendingTransactionalOffsetCommits`).
//!
//! In a cluster the group's coordinator and the transaction's are
//! usually different brokers. As in Kafka, TxnOffsetCommit is answered by
//! the group's coordinator, which keeps the offsets aside by producer id;
//! the transaction coordinator, completing the transaction, sends a
//! marker for the group's partition of `__consumer_offsets` to its leader
//! (WriteTxnMarkers), and that marker makes the offsets committed, or
//! discards them. A marker for an older epoch than the offsets' leaves
//! them (a newer instance of the producer wrote them).
//!
//! The offsets are also in the group's partition of `__consumer_offsets`,
//! as Kafka writes them: a transactional batch of the producer, ended by
//! the marker. A broker that becomes the partition's leader reads back
//! the ones no marker ended yet ([`PendingTxnOffsets::restore`]), so a
//! group coordinator that fails over before the marker loses none.

use std::collections::HashMap;

use super::store::Record;
use super::OffsetCommit;
use crate::error_code::ErrorCode;

/// One producer's pending offsets, by group.
#[derive(Default)]
struct Pending {
    epoch: i16,
    groups: HashMap<String, Vec<OffsetCommit>>,
}

#[derive(Default)]
pub struct PendingTxnOffsets {
    by_producer: HashMap<i64, Pending>,
}

impl PendingTxnOffsets {
    /// Adds offsets of producer `producer_id` at `epoch` for `group`: a
    /// later offset for the same partition replaces an earlier one. An
    /// epoch older than the one already pending is INVALID_PRODUCER_EPOCH;
    /// a newer one drops what the older instance left.
    pub fn add(
        &mut self,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: &[OffsetCommit],
    ) -> i16 {
        let pending = self.by_producer.entry(producer_id).or_default();
        if !pending.groups.is_empty() && epoch < pending.epoch {
            return ErrorCode::InvalidProducerEpoch.code();
        }
        if epoch > pending.epoch {
            pending.groups.clear();
        }
        pending.epoch = epoch;
        let held = pending.groups.entry(group.to_string()).or_default();
        for offset in offsets {
            held.retain(|o| {
                (o.topic.as_str(), o.partition) != (offset.topic.as_str(), offset.partition)
            });
            held.push(offset.clone());
        }
        ErrorCode::None.code()
    }

    /// Whether producer `producer_id` at `epoch` may add offsets:
    /// INVALID_PRODUCER_EPOCH when an instance with a newer epoch has some
    /// pending.
    pub fn admits(&self, producer_id: i64, epoch: i16) -> i16 {
        match self.by_producer.get(&producer_id) {
            Some(pending) if !pending.groups.is_empty() && epoch < pending.epoch => {
                ErrorCode::InvalidProducerEpoch.code()
            }
            _ => ErrorCode::None.code(),
        }
    }

    /// Takes back what a loaded partition holds pending for `producer_id`
    /// (its offset records, read from the log).
    pub fn restore(&mut self, producer_id: i64, epoch: i16, records: &[Record]) {
        let mut by_group: HashMap<&str, Vec<OffsetCommit>> = HashMap::new();
        for record in records {
            if let Record::Offset {
                group,
                topic,
                partition,
                value,
            } = record
            {
                by_group.entry(group).or_default().push(OffsetCommit {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: value.offset,
                    leader_epoch: value.leader_epoch,
                    metadata: Some(value.metadata.clone()),
                });
            }
        }
        for (group, offsets) in by_group {
            self.add(group, producer_id, epoch, &offsets);
        }
    }

    /// Drops what is pending for the groups `gone` selects (their
    /// partition is no longer led here: its next leader reads them back).
    pub fn forget(&mut self, gone: impl Fn(&str) -> bool) {
        self.by_producer.retain(|_, pending| {
            pending.groups.retain(|group, _| !gone(group));
            !pending.groups.is_empty()
        });
    }

    /// Takes the offsets of `producer_id` for the groups `in_partition`
    /// selects, if the marker's `epoch` is not older than theirs.
    pub fn take(
        &mut self,
        producer_id: i64,
        epoch: i16,
        in_partition: impl Fn(&str) -> bool,
    ) -> Vec<(String, Vec<OffsetCommit>)> {
        let Some(pending) = self.by_producer.get_mut(&producer_id) else {
            return Vec::new();
        };
        if epoch < pending.epoch {
            return Vec::new();
        }
        let groups: Vec<String> = pending
            .groups
            .keys()
            .filter(|group| in_partition(group))
            .cloned()
            .collect();
        let taken = groups
            .into_iter()
            .filter_map(|group| pending.groups.remove_entry(&group))
            .collect();
        if pending.groups.is_empty() {
            self.by_producer.remove(&producer_id);
        }
        taken
    }

    /// The partitions with offsets pending for `group` (OffsetFetch's
    /// require_stable).
    pub fn partitions_of(&self, group: &str) -> Vec<(String, i32)> {
        self.by_producer
            .values()
            .filter_map(|pending| pending.groups.get(group))
            .flatten()
            .map(|offset| (offset.topic.clone(), offset.partition))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(partition: i32, offset: i64) -> OffsetCommit {
        OffsetCommit {
            topic: "in".into(),
            partition,
            offset,
            leader_epoch: -1,
            metadata: None,
        }
    }

    #[test]
    fn offsets_wait_for_their_marker_and_epochs_fence() {
        let mut pending = PendingTxnOffsets::default();
        assert_eq!(pending.add("g", 7, 1, &[offset(0, 5)]), 0);
        assert_eq!(pending.add("g", 7, 1, &[offset(0, 9), offset(1, 2)]), 0);
        assert_eq!(pending.add("h", 7, 1, &[offset(0, 1)]), 0);
        // A zombie with the older epoch is refused.
        assert_eq!(
            pending.add("g", 7, 0, &[offset(0, 100)]),
            ErrorCode::InvalidProducerEpoch.code()
        );
        assert_eq!(pending.partitions_of("g").len(), 2);
        // An older marker leaves them; the marker for g's partition takes g's.
        assert!(pending.take(7, 0, |_| true).is_empty());
        let taken = pending.take(7, 1, |group| group == "g");
        assert_eq!(taken.len(), 1);
        let offsets: Vec<(i32, i64)> = taken[0].1.iter().map(|o| (o.partition, o.offset)).collect();
        assert_eq!(offsets, vec![(0, 9), (1, 2)]);
        assert!(pending.partitions_of("g").is_empty());
        assert_eq!(pending.take(7, 1, |_| true).len(), 1);
        assert!(pending.by_producer.is_empty());
    }
}
