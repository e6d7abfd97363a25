//! The leader-epoch cache of one partition (Kafka's `LeaderEpochFileCache`,
//! KIP-101 and KIP-279): for every leader epoch the log holds data of, the
//! offset where that epoch's data starts.
//!
//! Why it exists: after a leader change, a replica must find where its log
//! and the new leader's part ways. Offsets alone cannot tell (a former
//! leader may hold an unreplicated tail at offsets the new leader has
//! filled with other records); (epoch, start offset) pairs can. The end of
//! epoch `e` is the start of the next epoch, so the leader answers "where
//! does epoch `e` end?" ([`EpochCache::end_offset_for`]) and a follower cuts
//! its log there ([`EpochCache::diverging`] is the leader's check on a
//! Fetch, KIP-320's `diverging_epoch`).
//!
//! Entries come from the log itself: the leader assigns its epoch at the
//! log end offset when it becomes leader and stamps every batch it appends
//! with it; a follower assigns each fetched batch's partition leader epoch
//! at its base offset. Epochs and start offsets both grow strictly; an
//! entry that breaks that (a new epoch at an offset an older epoch already
//! covers, after a truncation) removes the conflicting tail first.
//!
//! Persisted next to the segments as `leader-epoch-checkpoint`, in Kafka's
//! text format (version 0, the entry count, then `epoch start-offset` per
//! line), replaced atomically whenever the entries change. A missing or
//! malformed file is rebuilt from the batch headers by the partition.

use std::fs;
use std::io;
use std::path::Path;

/// The checkpoint's file name in the partition directory (Kafka's).
pub const CHECKPOINT: &str = "leader-epoch-checkpoint";
const VERSION: u32 = 0;

/// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_OFFSET: i64 = -1;

/// One leader epoch and the first offset of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// A partition's epochs in ascending order (both fields strictly grow).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.latest().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`. Nothing changes when
    /// it is already the latest epoch at that offset or earlier; entries
    /// at a higher-or-equal epoch or at-or-after offset are dropped first
    /// (Kafka's `maybeTruncateNonMonotonicEntries`). Returns whether the
    /// entries changed (the checkpoint is then due). Negative values are
    /// ignored: a batch of a leader that recorded no epoch.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if !self.would_change(epoch, start_offset) {
            return false;
        }
        let removed_from = self
            .entries
            .iter()
            .rposition(|e| e.epoch < epoch && e.start_offset < start_offset)
            .map_or(0, |i| i + 1);
        let removed = self.entries.split_off(removed_from);
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|e| e.start_offset != start_offset)
        {
            tracing::warn!(
                epoch,
                start_offset,
                ?removed,
                "a new leader epoch entry replaced conflicting ones"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Whether [`Self::assign`] of `epoch` at `start_offset` would change
    /// the entries.
    fn would_change(&self, epoch: i32, start_offset: i64) -> bool {
        epoch >= 0
            && start_offset >= 0
            && !self
                .latest()
                .is_some_and(|l| l.epoch == epoch && l.start_offset <= start_offset)
    }

    /// The entries after [`Self::assign`] of each (epoch, start offset) in
    /// turn, or None when that changes nothing: an append in the current
    /// epoch, nearly every append, copies nothing.
    pub fn assigned(&self, starts: impl IntoIterator<Item = (i32, i64)>) -> Option<EpochCache> {
        let mut changed: Option<EpochCache> = None;
        for (epoch, start_offset) in starts {
            if changed
                .as_ref()
                .unwrap_or(self)
                .would_change(epoch, start_offset)
            {
                changed
                    .get_or_insert_with(|| self.clone())
                    .assign(epoch, start_offset);
            }
        }
        changed
    }

    /// Kafka's `endOffsetFor`: the epoch at or below `requested` that the
    /// log knows and the offset where its data ends, given the log end
    /// offset. The latest epoch ends at the log end offset; an epoch
    /// between two known ones is answered with the lower one, ending where
    /// the higher one starts; an epoch below every known one ends where
    /// the first starts; -1 or an epoch above the latest is unknown
    /// ([`UNDEFINED_EPOCH`], [`UNDEFINED_OFFSET`]).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        const UNKNOWN: (i32, i64) = (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        if requested == UNDEFINED_EPOCH {
            return UNKNOWN;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.iter().position(|e| e.epoch > requested);
        let Some(higher) = higher else {
            return UNKNOWN;
        };
        let start_of_higher = self.entries[higher].start_offset;
        match higher.checked_sub(1) {
            Some(floor) => (self.entries[floor].epoch, start_of_higher),
            None => (requested, start_of_higher),
        }
    }

    /// The leader's check of a follower's Fetch (KIP-320, Kafka's
    /// `Partition.fetchRecords`): with the epoch of the last batch the
    /// follower has and its fetch offset, where the follower's log leaves
    /// this one, as (epoch, end offset) to truncate to; `None` when the
    /// follower's log is a prefix of this one.
    pub fn diverging(
        &self,
        last_fetched_epoch: i32,
        fetch_offset: i64,
        log_end_offset: i64,
    ) -> Option<(i32, i64)> {
        if last_fetched_epoch < 0 {
            return None;
        }
        let (epoch, end) = self.end_offset_for(last_fetched_epoch, log_end_offset);
        (epoch < last_fetched_epoch || end < fetch_offset).then_some((epoch, end))
    }

    /// The epoch of the data at `offset` (Kafka's `epochForOffset`).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// The log was truncated to `end_offset`: entries starting at or after
    /// it go. Returns whether any did.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// The log now starts at `start_offset`: entries wholly before it go
    /// and the one covering it starts there. Returns whether any changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let covering = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        let Some(last_before) = covering.checked_sub(1) else {
            return false;
        };
        let epoch = self.entries[last_before].epoch;
        if last_before == 0 && self.entries[0].start_offset == start_offset {
            return false;
        }
        self.entries.drain(..=last_before);
        self.entries.insert(
            0,
            EpochEntry {
                epoch,
                start_offset,
            },
        );
        true
    }

    pub fn clear(&mut self) -> bool {
        let changed = !self.entries.is_empty();
        self.entries.clear();
        changed
    }

    /// Reads `<dir>/leader-epoch-checkpoint`. `Ok(None)` when the file is
    /// missing or does not parse (logged): the caller rebuilds the entries
    /// from the log.
    pub fn load(dir: &Path) -> io::Result<Option<EpochCache>> {
        crate::durable::discard_unfinished(dir, CHECKPOINT)?;
        let path = dir.join(CHECKPOINT);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match parse(&text) {
            Ok(cache) => Ok(Some(cache)),
            Err(why) => {
                tracing::warn!(path = %path.display(), "rebuilding a malformed leader epoch checkpoint: {why}");
                Ok(None)
            }
        }
    }

    /// Replaces `<dir>/leader-epoch-checkpoint` with the entries; out of
    /// descriptors, tried once more after the segment handle cache shrank.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        let mut text = format!("{VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        super::handles::retrying(|| crate::durable::replace(dir, CHECKPOINT, text.as_bytes()))
    }
}

fn parse(text: &str) -> Result<EpochCache, String> {
    let mut lines = text.lines();
    let version: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no version line")?;
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no entry count")?;
    let mut cache = EpochCache::default();
    for line in lines.by_ref().take(count) {
        let mut fields = line.split(' ');
        let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("malformed entry {line:?}"));
        };
        let epoch: i32 = epoch
            .parse()
            .map_err(|_| format!("bad epoch in {line:?}"))?;
        let start_offset: i64 = offset
            .parse()
            .map_err(|_| format!("bad offset in {line:?}"))?;
        let grows = cache
            .latest()
            .is_none_or(|l| l.epoch < epoch && l.start_offset < start_offset);
        if epoch < 0 || start_offset < 0 || !grows {
            return Err(format!("entry {line:?} out of order"));
        }
        cache.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    if cache.entries.len() != count || lines.next().is_some() {
        return Err(format!(
            "{count} entries announced, {} found",
            cache.entries.len()
        ));
    }
    Ok(cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::default();
        for &(epoch, start) in entries {
            assert!(c.assign(epoch, start));
        }
        c
    }

    fn pairs(c: &EpochCache) -> Vec<(i32, i64)> {
        c.entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn assigned_copies_only_when_something_changes() {
        let c = cache(&[(0, 0), (2, 10)]);
        // The current epoch at or after its start, and no-epoch batches.
        assert_eq!(c.assigned([(2, 10), (2, 15), (-1, 20)]), None);
        let next = c.assigned([(2, 20), (3, 25), (3, 30)]).unwrap();
        assert_eq!(pairs(&next), [(0, 0), (2, 10), (3, 25)]);
        assert_eq!(pairs(&c), [(0, 0), (2, 10)]);
    }

    #[test]
    fn assign_keeps_epochs_and_offsets_growing() {
        let mut c = cache(&[(0, 0), (2, 10)]);
        // The latest epoch again, later: nothing to record.
        assert!(!c.assign(2, 15));
        assert!(!c.assign(-1, 20));
        assert!(c.assign(4, 20));
        assert_eq!(pairs(&c), [(0, 0), (2, 10), (4, 20)]);
        // A lower epoch at a later offset (a former leader's tail seen
        // again after truncation): the conflicting entries go.
        assert!(c.assign(3, 25));
        assert_eq!(pairs(&c), [(0, 0), (2, 10), (3, 25)]);
        // A higher epoch at an offset an older one covers.
        assert!(c.assign(5, 10));
        assert_eq!(pairs(&c), [(0, 0), (5, 10)]);
        // The latest epoch at an earlier offset moves its start back.
        assert!(c.assign(5, 8));
        assert_eq!(pairs(&c), [(0, 0), (5, 8)]);
    }

    #[test]
    fn end_offsets_follow_kafkas_end_offset_for() {
        let c = cache(&[(1, 5), (3, 20), (6, 40)]);
        let leo = 55;
        // The latest epoch ends at the log end offset.
        assert_eq!(c.end_offset_for(6, leo), (6, leo));
        // A known epoch ends where the next one starts.
        assert_eq!(c.end_offset_for(3, leo), (3, 40));
        assert_eq!(c.end_offset_for(1, leo), (1, 20));
        // An epoch between known ones: the one below it, ending where the
        // next one starts.
        assert_eq!(c.end_offset_for(4, leo), (3, 40));
        assert_eq!(c.end_offset_for(2, leo), (1, 20));
        // Below every known epoch: ends where the first one starts.
        assert_eq!(c.end_offset_for(0, leo), (0, 5));
        // Unknown: above the latest, or undefined.
        assert_eq!(c.end_offset_for(7, leo), (-1, -1));
        assert_eq!(c.end_offset_for(-1, leo), (-1, -1));
        assert_eq!(EpochCache::default().end_offset_for(0, leo), (-1, -1));
    }

    #[test]
    fn a_diverging_follower_is_told_where_to_truncate() {
        // Leader: epoch 1 from 0, epoch 3 from 10, log end 30.
        let leader = cache(&[(1, 0), (3, 10)]);
        // The follower's last batch is from epoch 3 and it is behind: no
        // divergence.
        assert_eq!(leader.diverging(3, 25, 30), None);
        assert_eq!(leader.diverging(1, 10, 30), None);
        // A former leader of epoch 2 (unknown here) with data up to 14:
        // truncate to where epoch 1 ends.
        assert_eq!(leader.diverging(2, 14, 30), Some((1, 10)));
        // Epoch 1 data past where epoch 1 ended here.
        assert_eq!(leader.diverging(1, 12, 30), Some((1, 10)));
        // A follower without epochs is not checked.
        assert_eq!(leader.diverging(-1, 12, 30), None);
    }

    #[test]
    fn truncation_from_either_end() {
        let mut c = cache(&[(0, 0), (2, 10), (4, 20)]);
        assert!(!c.truncate_from_end(25));
        assert!(c.truncate_from_end(20));
        assert_eq!(pairs(&c), [(0, 0), (2, 10)]);
        assert!(!c.truncate_from_start(0));
        assert!(c.truncate_from_start(12));
        assert_eq!(pairs(&c), [(2, 12)]);
        assert!(!c.truncate_from_start(5));
        assert_eq!(c.epoch_for_offset(11), None);
        assert_eq!(c.epoch_for_offset(30), Some(2));
        assert!(c.clear());
        assert!(c.is_empty());
    }

    #[test]
    fn the_checkpoint_round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(EpochCache::load(dir.path()).unwrap(), None);
        let c = cache(&[(0, 0), (3, 17)]);
        c.write(dir.path()).unwrap();
        let text = fs::read_to_string(dir.path().join(CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n2\n0 0\n3 17\n");
        assert_eq!(EpochCache::load(dir.path()).unwrap(), Some(c));
        for bad in [
            "",
            "1\n0\n",
            "0\n2\n0 0\n",
            "0\n1\nx 0\n",
            "0\n2\n3 0\n1 5\n",
            "0\n1\n0 0 0\n",
        ] {
            fs::write(dir.path().join(CHECKPOINT), bad).unwrap();
            assert_eq!(EpochCache::load(dir.path()).unwrap(), None, "{bad:?}");
        }
    }
}
