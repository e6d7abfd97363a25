//! One partition's log: its segments, appends, reads, offsets, flushes,
//! retention and DeleteRecords. Compaction lives in `cleaner` and moving
//! between log directories in `manager`, both on top of this.
//!
//! Locking (see the module doc of `log` for why):
//! - `append_lock` serializes appenders of this partition. An appender
//!   validates and copies its batches *before* taking it, then holds it while
//!   it assigns offsets, rolls if needed and writes.
//! - `state` (segment list, sizes, indexes, offsets, config) is a read-write
//!   lock held only for bookkeeping, never across log file I/O (an index
//!   entry — a few bytes written to the page cache — is the one exception).
//!   A write becomes visible to readers when the appender publishes the new
//!   size under the write lock, so readers never see a partial batch.
//! - `maintenance` serializes the operations that replace or remove whole
//!   segments (retention, the cleaner, a move to another directory), so
//!   each sees a segment list only it changes apart from appends.
//! - `flush_lock` serializes flushes, so the recovery point only grows.
//!
//! Offsets only grow: each segment starts at or after the previous one's
//! end (a compacted log has gaps), and the high watermark is the log end
//! offset (a single node commits what it writes). The log start offset is
//! at or after the first segment's base: DeleteRecords can move it into a
//! segment.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use crate::sync::{lock, read, write};

use super::batch;
use super::epoch_cache::EpochCache;
use super::file_records::Records;
use super::positional;
use super::segment::{self, Segment, SegmentView, MAX_RELATIVE_OFFSET, MAX_SEGMENT_BYTES};
use super::{
    create_dir_durably, sync_dir, AppendInfo, LogConfig, PartitionOffsets, ReadResult,
    StorageError, TopicPartition,
};

/// What the log directory's checkpoints say about a partition being opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenHints {
    /// The broker stopped cleanly: every segment is whole.
    pub clean_shutdown: bool,
    /// Offsets below this were fsynced (recovery-point checkpoint).
    pub recovery_point: Option<i64>,
    /// The log start offset checkpoint.
    pub log_start_offset: Option<i64>,
    /// Where the dirty (not yet compacted) part of the log begins.
    pub cleaner_offset: Option<i64>,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) config: LogConfig,
    /// Ordered by base offset; never empty.
    pub(super) segments: Vec<Segment>,
    /// Set when the topic is deleted: every later call fails.
    pub(super) deleted: bool,
    pub(super) log_start_offset: i64,
    /// Offsets below this are fsynced.
    pub(super) recovery_point: i64,
    /// Records appended since the partition opened, and how many of them a
    /// flush covered: `flush.messages` compares the difference.
    appended_records: i64,
    flushed_records: i64,
    /// When the last flush finished (ms), for `flush.ms`.
    last_flush_ms: i64,
    /// A segment rolled since the last flush: flush the finished one soon.
    pub(super) roll_pending_flush: bool,
    /// The first offset the cleaner has not compacted yet.
    pub(super) first_dirty_offset: i64,
    /// The earliest delete horizon of a tombstone the cleaner kept: a new
    /// cleaning is due once it passes.
    pub(super) next_tombstone_expiry: Option<i64>,
    /// Where each leader epoch's data starts (checkpointed in the
    /// partition directory).
    pub(super) epochs: EpochCache,
    /// The epoch this broker stamps on the batches it appends as leader:
    /// 0 on a single node, set by [`Partition::become_leader`] in a
    /// cluster.
    leader_epoch: i32,
}

/// Who an append comes from: the leader assigns offsets and its epoch, a
/// follower keeps the leader's.
#[derive(Clone, Copy, Debug)]
enum Origin {
    Leader { log_append_time: Option<i64> },
    Follower,
}

impl State {
    fn live(&self) -> Result<&Self, StorageError> {
        if self.deleted {
            Err(StorageError::UnknownTopicOrPartition)
        } else {
            Ok(self)
        }
    }

    fn active(&self) -> Result<&Segment, StorageError> {
        self.segments.last().ok_or_else(no_segments)
    }

    pub(super) fn log_end_offset(&self) -> i64 {
        self.segments.last().map_or(0, Segment::next_offset)
    }

    /// The segment whose range holds `offset` (the last one starting at or
    /// before it).
    fn segment_for(&self, offset: i64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.base_offset() <= offset);
        i.checked_sub(1).map(|i| &self.segments[i])
    }

    fn size(&self) -> u64 {
        self.segments.iter().map(Segment::size).sum()
    }
}

pub(super) fn no_segments() -> StorageError {
    StorageError::Io(io::Error::other("partition has no log segment"))
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A partition's log.
#[derive(Debug)]
pub struct Partition {
    pub(super) tp: TopicPartition,
    /// `<log dir>/<topic>-<partition>`; changes when the partition moves.
    pub(super) dir: RwLock<PathBuf>,
    pub(super) append_lock: Mutex<()>,
    pub(super) maintenance: Mutex<()>,
    flush_lock: Mutex<()>,
    pub(super) state: RwLock<State>,
}

/// Removes what an interrupted cleaning or move left in a partition
/// directory: `.cleaned` files are an unfinished rewrite (the originals are
/// intact), `.swap` files a finished one whose originals may be partly
/// deleted, so the swap is completed. Orphan index files are removed.
fn tidy_dir(dir: &Path) -> Result<(), StorageError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        if let Some(name) = entry?.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    let mut changed = false;
    for name in &names {
        if name.ends_with(".cleaned") {
            fs::remove_file(dir.join(name))?;
            changed = true;
        }
    }
    for name in &names {
        let Some(log_name) = name.strip_suffix(".swap") else {
            continue;
        };
        let Some(base) = segment::parse_file_name(log_name) else {
            fs::remove_file(dir.join(name))?;
            changed = true;
            continue;
        };
        // The swap file was fsynced before any original was touched: read
        // its end, drop the originals it replaces, then put it in place.
        let end = super::cleaner::swap_end_offset(&dir.join(name))?;
        for other in &names {
            if let Some(b) = segment::parse_file_name(other) {
                if b > base && b < end {
                    remove_segment_files(dir, b)?;
                }
            }
        }
        fs::rename(dir.join(name), dir.join(log_name))?;
        remove_index_files(dir, base)?;
        tracing::info!(dir = %dir.display(), base, "completed an interrupted segment swap");
        changed = true;
    }
    // Index files whose log is gone.
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let stem = name
            .strip_suffix(".index")
            .or_else(|| name.strip_suffix(".timeindex"));
        if let Some(stem) = stem {
            if !dir.join(format!("{stem}.log")).exists() {
                fs::remove_file(entry.path())?;
                changed = true;
            }
        }
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The partition's epoch cache: its checkpoint, else rebuilt from the batch
/// headers (a log written before epochs were kept holds epoch 0 only), cut
/// to the log's bounds. A log with no epoch at all is in epoch 0 from its
/// end: every partition's first leader has epoch 0.
///
/// The checkpoint is rewritten only when the result differs from it: an
/// unchanged one rewritten (and fsynced) by every partition at every start
/// was 1 ms of a 10,000-partition broker's start-up per partition.
fn load_epochs(
    dir: &Path,
    segments: &[Segment],
    log_start_offset: i64,
    log_end_offset: i64,
) -> Result<EpochCache, StorageError> {
    let checkpoint = EpochCache::load(dir)?;
    let mut epochs = match &checkpoint {
        Some(epochs) => epochs.clone(),
        None => {
            let mut epochs = EpochCache::default();
            for segment in segments {
                segment.view(0)?.for_each_header(|header| {
                    epochs.assign(header.partition_leader_epoch, header.base_offset);
                })?;
            }
            epochs
        }
    };
    epochs.truncate_from_end(log_end_offset);
    epochs.truncate_from_start(log_start_offset);
    if epochs.is_empty() {
        epochs.assign(0, log_end_offset);
    }
    if checkpoint.as_ref() != Some(&epochs) {
        epochs.write(dir)?;
    }
    Ok(epochs)
}

/// Removes the segment `base`'s log and index files, those there are.
pub(super) fn remove_segment_files(dir: &Path, base: i64) -> io::Result<()> {
    remove_if_present(&dir.join(segment::file_name(base)))?;
    remove_index_files(dir, base)
}

/// Removes the segment `base`'s index files (rebuilt from its log).
pub(super) fn remove_index_files(dir: &Path, base: i64) -> io::Result<()> {
    remove_if_present(&dir.join(super::index::offset_index_name(base)))?;
    remove_if_present(&dir.join(super::index::time_index_name(base)))
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl Partition {
    /// Opens the partition directory `dir`, creating it if needed, and
    /// loads or recovers its segments.
    ///
    /// Segments that end at or before the recovery point (all of them after
    /// a clean shutdown) are loaded from their index files; in the one
    /// holding the recovery point the batches after it, and every later
    /// segment, are re-validated. A torn or
    /// corrupt tail is truncated; if that happens in a segment that is not
    /// the last, the later segments are deleted, as Kafka does, because
    /// offsets must stay in order. With no segment at all the log starts
    /// empty at offset 0.
    pub fn open(
        dir: PathBuf,
        tp: TopicPartition,
        config: LogConfig,
        hints: OpenHints,
    ) -> Result<Partition, StorageError> {
        create_dir_durably(&dir)?;
        tidy_dir(&dir)?;
        let mut bases = Vec::new();
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if let Some(base) = entry
                .file_name()
                .to_str()
                .and_then(segment::parse_file_name)
            {
                bases.push(base);
            }
        }
        bases.sort_unstable();

        let recovery_point = if hints.clean_shutdown {
            i64::MAX
        } else {
            hints.recovery_point.unwrap_or(0)
        };
        let mut segments: Vec<Segment> = Vec::with_capacity(bases.len().max(1));
        let mut discard_from = bases.len();
        let mut recovering = false;
        let mut recovered = 0usize;
        for (i, &base) in bases.iter().enumerate() {
            if let Some(prev) = segments.last() {
                if base < prev.next_offset() {
                    tracing::warn!(
                        partition = %tp,
                        "segment {base} overlaps the previous one, which ends at {}",
                        prev.next_offset()
                    );
                    discard_from = i;
                    break;
                }
            }
            let below_recovery_point = bases.get(i + 1).is_some_and(|&next| next <= recovery_point)
                || hints.clean_shutdown;
            recovering |= !below_recovery_point;
            let loaded = if recovering {
                None
            } else {
                Segment::load(&dir, base)?
            };
            let (segment, truncated) = match loaded {
                Some(segment) => (segment, 0),
                None => {
                    recovered += 1;
                    // Only what follows the recovery point is re-validated.
                    let trusted = (!hints.clean_shutdown).then_some(recovery_point);
                    Segment::recover_after(&dir, base, trusted)?
                }
            };
            segments.push(segment);
            if truncated > 0 && i + 1 < bases.len() {
                discard_from = i + 1;
                break;
            }
        }
        if discard_from < bases.len() {
            for &base in &bases[discard_from..] {
                tracing::warn!(partition = %tp, "deleting segment {base} after a corrupt segment");
                remove_segment_files(&dir, base)?;
            }
            sync_dir(&dir)?;
        }
        if recovered > 0 {
            tracing::info!(partition = %tp, segments = recovered, "recovered log segments");
        }
        if segments.is_empty() {
            segments.push(Segment::create(&dir, 0)?);
            sync_dir(&dir)?;
        }
        let first_base = segments.first().map_or(0, Segment::base_offset);
        let log_end_offset = segments.last().map_or(0, Segment::next_offset);
        let log_start_offset = hints
            .log_start_offset
            .unwrap_or(first_base)
            .clamp(first_base, log_end_offset.max(first_base));
        let first_dirty_offset = hints
            .cleaner_offset
            .unwrap_or(log_start_offset)
            .clamp(log_start_offset, log_end_offset.max(log_start_offset));
        let epochs = load_epochs(&dir, &segments, log_start_offset, log_end_offset)?;
        let leader_epoch = epochs.latest_epoch().unwrap_or(0);

        Ok(Partition {
            tp,
            dir: RwLock::new(dir),
            append_lock: Mutex::new(()),
            maintenance: Mutex::new(()),
            flush_lock: Mutex::new(()),
            state: RwLock::new(State {
                config,
                segments,
                deleted: false,
                log_start_offset,
                // Loaded segments were fsynced; recovered ones were fsynced
                // by recovery.
                recovery_point: log_end_offset,
                appended_records: 0,
                flushed_records: 0,
                last_flush_ms: now_ms(),
                roll_pending_flush: false,
                first_dirty_offset,
                next_tombstone_expiry: None,
                epochs,
                leader_epoch,
            }),
        })
    }

    pub fn dir(&self) -> PathBuf {
        read(&self.dir).clone()
    }

    pub fn set_config(&self, config: LogConfig) {
        write(&self.state).config = config;
    }

    pub fn config(&self) -> LogConfig {
        read(&self.state).config.clone()
    }

    pub fn is_deleted(&self) -> bool {
        read(&self.state).deleted
    }

    /// Stops all further use of the partition (topic deletion). Waits for an
    /// append or maintenance in progress to finish.
    pub fn mark_deleted(&self) {
        let _maintenance = lock(&self.maintenance);
        let _append = lock(&self.append_lock);
        write(&self.state).deleted = true;
    }

    /// The leader's append: validates `batches`, assigns offsets from the
    /// log end offset and stamps the partition's leader epoch.
    pub fn append(&self, batches: &[u8], now_ms: i64) -> Result<AppendInfo, StorageError> {
        let (max_message_bytes, log_append_time, compact) = {
            let state = read(&self.state);
            let config = &state.live()?.config;
            (
                config.max_message_bytes,
                config.log_append_time.then_some(now_ms),
                config.compact,
            )
        };
        let prepared = batch::prepare_append(batches, max_message_bytes, log_append_time, compact)?;
        self.write(prepared, Origin::Leader { log_append_time }, now_ms)
    }

    /// A follower's append of batches fetched from its leader (Kafka's
    /// `appendAsFollower`): stored verbatim with the leader's offsets and
    /// epochs, each new epoch entered in the epoch cache. Batches must
    /// start at or after the log end offset; those wholly before it (a
    /// fetch that raced a truncation) are skipped. An empty log whose end
    /// is inside the first batch (it was started at the leader's log start
    /// offset) restarts at that batch's base offset, as Kafka does.
    pub fn append_replicated(&self, batches: &[u8]) -> Result<AppendInfo, StorageError> {
        let mut prepared = batch::prepare_replicated(batches)?;
        let (log_end, empty) = {
            let state = read(&self.state);
            let state = state.live()?;
            (state.log_end_offset(), state.size() == 0)
        };
        let stale = prepared
            .batches
            .iter()
            .take_while(|b| b.base_offset() + i64::from(b.last_offset_delta) < log_end)
            .count();
        if stale > 0 {
            let fresh = prepared
                .batches
                .get(stale)
                .map_or(prepared.stored_len(), |b| b.position);
            prepared = batch::prepare_replicated(&batches[fresh..])?;
        }
        if let Some(first) = prepared.batches.first() {
            let base = first.base_offset();
            if base < log_end && empty {
                self.truncate_fully_and_start_at(base)?;
            }
        }
        self.write(prepared, Origin::Follower, now_ms())
    }

    /// Writes prepared batches at the end of the log, all or nothing.
    fn write(
        &self,
        mut prepared: batch::PreparedAppend<'_>,
        origin: Origin,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let bytes = prepared.stored_len() as u64;
        let append = lock(&self.append_lock);
        let (mut file, mut position, base_offset, next, roll, index_interval, leader_epoch) = {
            let state = read(&self.state);
            let state = state.live()?;
            let active = state.active()?;
            let log_end = active.next_offset();
            let (base_offset, next) = match origin {
                Origin::Leader { .. } => {
                    let next = log_end
                        .checked_add(prepared.offset_count)
                        .ok_or_else(|| StorageError::InvalidRecord("offsets overflow".into()))?;
                    (log_end, next)
                }
                Origin::Follower => {
                    let Some(first) = prepared.batches.first() else {
                        return Ok(AppendInfo {
                            base_offset: log_end,
                            last_offset: log_end - 1,
                            log_append_time_ms: -1,
                            log_start_offset: state.log_start_offset,
                            record_count: 0,
                            bytes: 0,
                        });
                    };
                    let base = first.base_offset();
                    if base < log_end {
                        return Err(StorageError::InvalidRecord(format!(
                            "replicated batches start at offset {base}, below the log end offset {log_end}"
                        )));
                    }
                    (base, base + prepared.offset_count)
                }
            };
            let config = &state.config;
            let segment_bytes = config.segment_bytes.clamp(1, MAX_SEGMENT_BYTES);
            let roll = !active.is_empty()
                && (active.size() + bytes > segment_bytes
                    || next - 1 - active.base_offset() > MAX_RELATIVE_OFFSET
                    || active.time_waited_for_roll(now_ms) > config.segment_ms);
            (
                active.file()?,
                active.size(),
                base_offset,
                next,
                roll,
                config.index_interval_bytes,
                state.leader_epoch,
            )
        };
        if roll {
            let dir = self.dir();
            let segment = Segment::create(&dir, base_offset)?;
            file = segment.file()?;
            position = 0;
            // Publish the (empty) segment before anything else can fail, so
            // a retry appends to it rather than trying to create it again.
            {
                let mut state = write(&self.state);
                if let Some(previous) = state.segments.last_mut() {
                    previous.seal();
                }
                state.segments.push(segment);
                state.roll_pending_flush = true;
            }
            sync_dir(&dir)?;
        }

        if let Origin::Leader { .. } = origin {
            prepared.assign_offsets(base_offset);
            prepared.stamp_leader_epoch(leader_epoch);
        }
        // New epochs are checkpointed before their records are written, as
        // Kafka assigns them before the segment append: if the checkpoint
        // cannot be saved nothing is stored and the error is the answer; a
        // checkpoint entry whose records then fail to land is past the log
        // end, and dropped on the next open or replaced by the next save.
        let epochs = read(&self.state).live()?.epochs.assigned(
            prepared
                .batches
                .iter()
                .map(|b| (b.leader_epoch(), b.base_offset())),
        );
        if let Some(epochs) = &epochs {
            epochs.write(&self.dir())?;
        }
        if let Err(e) =
            positional::write_all_vectored_at(&file, &mut prepared.io_slices(), position)
        {
            // Leave no partial batch behind: cut the file back.
            if let Err(e2) = file.set_len(position) {
                tracing::error!(partition = %self.tp, "cannot truncate after a failed write: {e2}");
            }
            return Err(e.into());
        }

        let (log_start_offset, flush_due) = {
            let mut state = write(&self.state);
            let state = &mut *state;
            let active = state.segments.last_mut().ok_or_else(no_segments)?;
            for b in &prepared.batches {
                let offset = b.base_offset();
                let next = offset + i64::from(b.last_offset_delta) + 1;
                active.push_batch(b.size as u64, offset, next, b.max_timestamp, index_interval);
            }
            // Every change to the epochs holds the append lock: nothing
            // changed them since the clone above.
            if let Some(epochs) = epochs {
                state.epochs = epochs;
            }
            state.appended_records += prepared.record_count as i64;
            let unflushed = state.appended_records - state.flushed_records;
            (
                state.log_start_offset,
                unflushed >= state.config.flush_messages,
            )
        };
        drop(append);
        if flush_due {
            // `flush.messages`: the append is acknowledged only once durable.
            self.flush()?;
        }

        let log_append_time = match origin {
            Origin::Leader { log_append_time } => log_append_time,
            Origin::Follower => None,
        };
        Ok(AppendInfo {
            base_offset,
            last_offset: next - 1,
            log_append_time_ms: log_append_time.unwrap_or(-1),
            log_start_offset,
            record_count: prepared.record_count,
            bytes: prepared.stored_len(),
        })
    }

    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError> {
        self.read_with(offset, |view| {
            view.read_from_offset(offset, max_bytes, min_one_batch)
        })
    }

    /// As `read`, the batches left in the segment file (a fetch sends
    /// them from there).
    pub fn read_records(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult<Records>, StorageError> {
        self.read_with(offset, |view| {
            let found = view.file_records_from_offset(offset, max_bytes, min_one_batch)?;
            Ok(found.map(Records::File))
        })
    }

    /// Reads with `read` from the segment holding `offset`, or from the
    /// next one when a gap in the offsets leaves nothing in it.
    fn read_with<R: Default>(
        &self,
        offset: i64,
        read_view: impl Fn(&SegmentView) -> Result<Option<R>, StorageError>,
    ) -> Result<ReadResult<R>, StorageError> {
        let (high_watermark, log_start_offset, mut view) = {
            let state = read(&self.state);
            let state = state.live()?;
            let (start, end) = (state.log_start_offset, state.log_end_offset());
            if offset < start || offset > end {
                return Err(StorageError::OffsetOutOfRange);
            }
            let segment = match state.segment_for(offset) {
                Some(s) if offset < end => s,
                _ => {
                    return Ok(ReadResult {
                        records: R::default(),
                        high_watermark: end,
                        log_start_offset: start,
                    })
                }
            };
            (
                end,
                start,
                segment.view(segment.position_for_offset(offset))?,
            )
        };
        loop {
            if let Some(records) = read_view(&view)? {
                return Ok(ReadResult {
                    records,
                    high_watermark,
                    log_start_offset,
                });
            }
            // Every batch of this segment ends before `offset` (a gap in the
            // offsets): continue with the next segment.
            let next = {
                let state = read(&self.state);
                let base = view.base_offset();
                state
                    .segments
                    .iter()
                    .find(|s| s.base_offset() > base)
                    .map(|s| s.view(0))
                    .transpose()?
            };
            match next {
                Some(v) => view = v,
                None => {
                    return Ok(ReadResult {
                        records: R::default(),
                        high_watermark,
                        log_start_offset,
                    })
                }
            }
        }
    }

    pub fn offsets(&self) -> Result<PartitionOffsets, StorageError> {
        let state = read(&self.state);
        let state = state.live()?;
        Ok(PartitionOffsets {
            log_start_offset: state.log_start_offset,
            high_watermark: state.log_end_offset(),
        })
    }

    /// This broker leads the partition from now on in `epoch` (Kafka's
    /// `makeLeader`): the epoch starts at the log end offset and is
    /// stamped on every batch appended from now on.
    pub fn become_leader(&self, epoch: i32) -> Result<(), StorageError> {
        let _append = lock(&self.append_lock);
        let epochs = {
            let state = read(&self.state);
            let state = state.live()?;
            state.epochs.assigned([(epoch, state.log_end_offset())])
        };
        // Saved first: the epoch is stamped on batches only once its
        // checkpoint entry is durable.
        if let Some(epochs) = &epochs {
            epochs.write(&self.dir())?;
        }
        let mut state = write(&self.state);
        if state.deleted {
            return Err(StorageError::UnknownTopicOrPartition);
        }
        state.leader_epoch = epoch;
        if let Some(epochs) = epochs {
            state.epochs = epochs;
        }
        Ok(())
    }

    pub fn leader_epoch(&self) -> Result<i32, StorageError> {
        Ok(read(&self.state).live()?.leader_epoch)
    }

    /// The epoch cache's entries, oldest first.
    pub fn epochs(&self) -> Result<EpochCache, StorageError> {
        Ok(read(&self.state).live()?.epochs.clone())
    }

    /// Kafka's `endOffsetForEpoch`: the epoch at or below `epoch` this log
    /// knows and where its data ends (see [`EpochCache::end_offset_for`]).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Result<(i32, i64), StorageError> {
        let state = read(&self.state);
        let state = state.live()?;
        Ok(state.epochs.end_offset_for(epoch, state.log_end_offset()))
    }

    /// Truncates the log to `offset` (Kafka's `truncateTo`): every batch
    /// holding `offset` or a later one goes, so the new log end offset is
    /// at or below it (batches are whole). Epochs starting at or after the
    /// new end go too. Below the first segment the log is emptied and
    /// starts at `offset`. Returns the new log end offset.
    pub fn truncate_to(&self, offset: i64) -> Result<i64, StorageError> {
        let (end, empty_epoch, below_first_segment) = {
            let state = read(&self.state);
            let state = state.live()?;
            let end = state.log_end_offset();
            (
                end,
                state.epochs.latest().is_some_and(|e| e.start_offset >= end),
                state
                    .segments
                    .first()
                    .is_none_or(|s| s.base_offset() >= offset),
            )
        };
        if offset >= end {
            return if empty_epoch {
                self.forget_epochs_from_end()
            } else {
                Ok(end)
            };
        }
        if below_first_segment {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(offset);
        }
        let _maintenance = lock(&self.maintenance);
        let _append = lock(&self.append_lock);
        let dir = self.dir();
        let (removed, epochs, end) = {
            let mut state = write(&self.state);
            let state = &mut *state;
            if state.deleted {
                return Err(StorageError::UnknownTopicOrPartition);
            }
            if offset >= state.log_end_offset() {
                return Ok(state.log_end_offset());
            }
            let keep = state.segments.partition_point(|s| s.base_offset() < offset);
            let removed: Vec<Segment> = state.segments.drain(keep..).collect();
            let last = state.segments.pop().ok_or_else(no_segments)?;
            let base = last.base_offset();
            let position = last.view(0)?.position_of_batch_with(offset)?;
            let last = if position < last.size() {
                last.file()?.set_len(position)?;
                drop(last);
                // Re-indexes only what follows the last index entry kept.
                Segment::recover_after(&dir, base, Some(offset))?.0
            } else {
                last
            };
            state.segments.push(last);
            let end = state.log_end_offset();
            state.log_start_offset = state.log_start_offset.min(end);
            state.recovery_point = state.recovery_point.min(end);
            state.first_dirty_offset = state.first_dirty_offset.min(end);
            let epochs = state
                .epochs
                .truncate_from_end(end)
                .then(|| state.epochs.clone());
            (removed, epochs, end)
        };
        for segment in &removed {
            segment.delete_files()?;
        }
        sync_dir(&dir)?;
        if let Some(epochs) = epochs {
            epochs.write(&dir)?;
        }
        tracing::info!(partition = %self.tp, offset, log_end_offset = end, "truncated the log");
        Ok(end)
    }

    /// Truncation at or past the log end removes no record, but epochs
    /// that start at the end go, as Kafka's `truncateTo` does: a broker
    /// that became leader and appended nothing holds an epoch with no
    /// records, and as a follower it would send that epoch as its last
    /// fetched one and be told to diverge at its own log end, forever.
    fn forget_epochs_from_end(&self) -> Result<i64, StorageError> {
        let _append = lock(&self.append_lock);
        let (end, epochs) = {
            let mut state = write(&self.state);
            if state.deleted {
                return Err(StorageError::UnknownTopicOrPartition);
            }
            let end = state.log_end_offset();
            let epochs = state
                .epochs
                .truncate_from_end(end)
                .then(|| state.epochs.clone());
            (end, epochs)
        };
        if let Some(epochs) = epochs {
            epochs.write(&self.dir())?;
            tracing::info!(partition = %self.tp, log_end_offset = end, "dropped leader epochs with no records after them");
        }
        Ok(end)
    }

    /// Empties the log and starts it again at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): a follower whose log ends before the
    /// leader's log start offset has nothing worth keeping.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), StorageError> {
        let _maintenance = lock(&self.maintenance);
        let _append = lock(&self.append_lock);
        let dir = self.dir();
        let mut state = write(&self.state);
        if state.deleted {
            return Err(StorageError::UnknownTopicOrPartition);
        }
        for segment in state.segments.drain(..) {
            segment.delete_files()?;
        }
        state.segments.push(Segment::create(&dir, offset)?);
        state.log_start_offset = offset;
        state.recovery_point = offset;
        state.first_dirty_offset = offset;
        state.epochs.clear();
        let epochs = state.epochs.clone();
        drop(state);
        sync_dir(&dir)?;
        epochs.write(&dir)?;
        tracing::info!(partition = %self.tp, offset, "emptied the log to start again at the leader's log start offset");
        Ok(())
    }

    /// Bytes of log data (the sum of the segments), as DescribeLogDirs
    /// reports a partition's size.
    pub fn size(&self) -> u64 {
        read(&self.state).size()
    }

    /// The first record at or after `timestamp_ms` and at or after the log
    /// start offset: the first segment whose largest timestamp qualifies,
    /// searched from its time index.
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        let (views, log_start_offset) = {
            let state = read(&self.state);
            let state = state.live()?;
            let lso = state.log_start_offset;
            // The first candidate, and the ones after it in case every
            // qualifying record of a segment is below the log start offset.
            let views: Vec<_> = state
                .segments
                .iter()
                .filter(|s| s.next_offset() > lso)
                .filter(|s| s.max_timestamp().is_some_and(|m| m >= timestamp_ms))
                .map(|s| {
                    let start = if s.base_offset() >= lso {
                        s.position_for_timestamp(timestamp_ms)
                    } else {
                        s.position_for_offset(lso)
                            .min(s.position_for_timestamp(timestamp_ms))
                    };
                    s.view(start)
                })
                .collect::<Result<_, _>>()?;
            (views, lso)
        };
        for view in views {
            if let Some(found) = view.find_timestamp_from(timestamp_ms, log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    pub fn max_timestamp(&self) -> Result<Option<(i64, i64)>, StorageError> {
        let found = {
            let state = read(&self.state);
            let state = state.live()?;
            let mut best: Option<(&Segment, i64)> = None;
            for s in &state.segments {
                if let Some(m) = s.max_timestamp() {
                    if best.is_none_or(|(_, b)| m > b) {
                        best = Some((s, m));
                    }
                }
            }
            best.map(|(s, m)| (s.view(s.position_for_timestamp(m)), m))
        };
        match found {
            Some((view, max)) => view?.find_max_timestamp(max),
            None => Ok(None),
        }
    }

    /// Fsyncs the bytes appended since the last flush, the index files and
    /// the directory, then advances the recovery point to what was synced.
    pub fn flush(&self) -> Result<(), StorageError> {
        let _flushing = lock(&self.flush_lock);
        let (pending, index_files, log_end_offset, appended) = {
            let mut state = write(&self.state);
            if state.deleted {
                return Ok(());
            }
            let mut pending = Vec::new();
            let mut index_files = Vec::new();
            for s in &mut state.segments {
                if let Some((file, size)) = s.unsynced()? {
                    // Index entries only come with log bytes.
                    index_files.extend(s.index_files_to_sync()?);
                    pending.push((s.base_offset(), file, size));
                }
            }
            state.roll_pending_flush = false;
            (
                pending,
                index_files,
                state.log_end_offset(),
                state.appended_records,
            )
        };
        let dir = self.dir();
        let synced = pending
            .iter()
            .map(|(_, file, _)| file)
            .chain(&index_files)
            .try_for_each(|file| file.sync_data())
            .and_then(|()| sync_dir(&dir));
        let mut state = write(&self.state);
        if let Err(e) = synced {
            // A topic deleted meanwhile has nothing left to flush.
            return if state.deleted { Ok(()) } else { Err(e.into()) };
        }
        for (base, _, size) in pending {
            if let Some(s) = state.segments.iter_mut().find(|s| s.base_offset() == base) {
                s.mark_synced(size);
            }
        }
        state.recovery_point = state.recovery_point.max(log_end_offset);
        state.flushed_records = state.flushed_records.max(appended);
        state.last_flush_ms = now_ms();
        Ok(())
    }

    /// Whether the scheduler should flush now: a segment rolled, or
    /// `flush.ms` passed with unflushed data.
    pub fn flush_due(&self, now_ms: i64) -> bool {
        let state = read(&self.state);
        if state.deleted {
            return false;
        }
        let unflushed = state.recovery_point < state.log_end_offset();
        state.roll_pending_flush
            || (unflushed && now_ms.saturating_sub(state.last_flush_ms) >= state.config.flush_ms)
    }

    /// Recovery point, log start offset and first dirty offset, for the
    /// checkpoints.
    pub fn checkpoint_values(&self) -> (i64, i64, i64) {
        let state = read(&self.state);
        (
            state.recovery_point,
            state.log_start_offset,
            state.first_dirty_offset,
        )
    }

    /// DeleteRecords: moves the log start offset up to `offset` (-1 is the
    /// high watermark) and returns the new log start offset. As Kafka, a
    /// compact-only topic refuses (POLICY_VIOLATION), an offset beyond the
    /// high watermark is OFFSET_OUT_OF_RANGE and an offset below the log
    /// start offset changes nothing.
    pub fn delete_records(&self, offset: i64) -> Result<i64, StorageError> {
        let lso = {
            let mut state = write(&self.state);
            if state.deleted {
                return Err(StorageError::UnknownTopicOrPartition);
            }
            if !state.config.delete {
                return Err(StorageError::PolicyViolation(format!(
                    "Records of partition {} can not be deleted due to the configured policy",
                    self.tp
                )));
            }
            let high_watermark = state.log_end_offset();
            let offset = if offset == -1 { high_watermark } else { offset };
            if offset < 0 || offset > high_watermark {
                return Err(StorageError::OffsetOutOfRange);
            }
            if offset > state.log_start_offset {
                state.log_start_offset = offset;
                state.first_dirty_offset = state.first_dirty_offset.max(offset);
            }
            state.log_start_offset
        };
        {
            let _append = lock(&self.append_lock);
            self.trim_epochs_to_log_start()?;
        }
        self.delete_old_segments(now_ms())?;
        Ok(lso)
    }

    /// Drops the epochs wholly before the log start offset (Kafka's
    /// `truncateFromStart`); called under the append lock, which orders
    /// the checkpoint writes.
    fn trim_epochs_to_log_start(&self) -> Result<(), StorageError> {
        let epochs = {
            let mut state = write(&self.state);
            let start = state.log_start_offset;
            state
                .epochs
                .truncate_from_start(start)
                .then(|| state.epochs.clone())
        };
        match epochs {
            Some(epochs) => Ok(epochs.write(&self.dir())?),
            None => Ok(()),
        }
    }

    /// Deletes whole segments as Kafka's `deleteOldSegments` does: with the
    /// delete policy, those whose newest record is older than
    /// `retention.ms` and the oldest ones while the log exceeds
    /// `retention.bytes`; with any policy, those wholly below the log start
    /// offset. Deleting every segment first rolls a new empty one, so the
    /// log end offset stays. Returns how many segments went.
    pub fn delete_old_segments(&self, now_ms: i64) -> Result<usize, StorageError> {
        let _maintenance = lock(&self.maintenance);
        let _append = lock(&self.append_lock);
        let dir = self.dir();
        let removed: Vec<Segment> = {
            let mut state = write(&self.state);
            if state.deleted {
                return Ok(0);
            }
            let n = deletable_segments(&state, now_ms);
            if n == 0 {
                return Ok(0);
            }
            if n == state.segments.len() {
                let end = state.log_end_offset();
                let segment = Segment::create(&dir, end)?;
                state.segments.push(segment);
            }
            let removed: Vec<Segment> = state.segments.drain(..n).collect();
            let first_base = state.segments.first().map_or(0, Segment::base_offset);
            state.log_start_offset = state.log_start_offset.max(first_base);
            state.first_dirty_offset = state.first_dirty_offset.max(state.log_start_offset);
            removed
        };
        for segment in &removed {
            segment.delete_files()?;
        }
        sync_dir(&dir)?;
        self.trim_epochs_to_log_start()?;
        tracing::info!(
            partition = %self.tp,
            segments = removed.len(),
            "deleted old log segments"
        );
        Ok(removed.len())
    }
}

/// How many segments, from the oldest, retention deletes.
fn deletable_segments(state: &State, now_ms: i64) -> usize {
    let segments = &state.segments;
    let config = &state.config;
    // Never the last segment while it is empty (nothing to delete there).
    let limit = match segments.last() {
        Some(last) if last.is_empty() => segments.len() - 1,
        _ => segments.len(),
    };
    let by_start_offset = segments[..limit]
        .iter()
        .enumerate()
        .take_while(|(i, _)| {
            segments
                .get(i + 1)
                .is_some_and(|next| next.base_offset() <= state.log_start_offset)
        })
        .count();
    if !config.delete {
        return by_start_offset;
    }
    let by_time = if config.retention_ms < 0 {
        0
    } else {
        segments[..limit]
            .iter()
            .take_while(|s| now_ms.saturating_sub(s.largest_timestamp()) > config.retention_ms)
            .count()
    };
    let by_size = if config.retention_bytes < 0 {
        0
    } else {
        let total: u64 = segments.iter().map(Segment::size).sum();
        match total.checked_sub(config.retention_bytes as u64) {
            None | Some(0) => 0,
            Some(mut diff) => segments[..limit]
                .iter()
                .take_while(|s| {
                    if s.size() <= diff {
                        diff -= s.size();
                        true
                    } else {
                        false
                    }
                })
                .count(),
        }
    };
    by_start_offset.max(by_time).max(by_size)
}

#[cfg(test)]
mod tests {
    use super::super::batch::testing::*;
    use super::*;
    use std::fs::OpenOptions;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn config(segment_bytes: u64) -> LogConfig {
        LogConfig {
            segment_bytes,
            ..LogConfig::default()
        }
    }

    /// Five batches of five records appended at two batches a segment (to
    /// offset 25, in three segments), the partition closed again; the batch.
    fn five_batches_in_three_segments(path: &Path) -> Vec<u8> {
        let batch = simple_batch(5, 50, 0);
        let p = open(path, config(2 * batch.len() as u64)).unwrap();
        for _ in 0..5 {
            p.append(&batch, 0).unwrap();
        }
        batch
    }

    /// Partition `t-0` under `dir` made of these segment files (base
    /// offset, contents) as a crash or compaction left them, then opened.
    fn with_segments<const N: usize>(
        dir: &Path,
        segments: [(i64, Vec<u8>); N],
    ) -> (PathBuf, Partition) {
        let path = dir.join("t-0");
        fs::create_dir(&path).unwrap();
        for (base_offset, contents) in segments {
            fs::write(path.join(segment::file_name(base_offset)), contents).unwrap();
        }
        let p = open(&path, LogConfig::default()).unwrap();
        (path, p)
    }

    fn open(path: &Path, config: LogConfig) -> Result<Partition, StorageError> {
        Partition::open(path.to_path_buf(), tp(), config, OpenHints::default())
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".log"))
            .collect();
        names.sort();
        names
    }

    fn epoch_pairs(p: &Partition) -> Vec<(i32, i64)> {
        p.epochs()
            .unwrap()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    /// Everything stored, segment after segment.
    fn all_bytes(p: &Partition) -> Vec<u8> {
        let offsets = p.offsets().unwrap();
        let mut out = Vec::new();
        let mut next = offsets.log_start_offset;
        while next < offsets.high_watermark {
            let records = p.read(next, 1 << 30, true).unwrap().records;
            next = headers(&records).last().unwrap().next_offset();
            out.extend(records);
        }
        out
    }

    #[test]
    fn the_leader_stamps_its_epoch_and_enters_it_in_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let p = open(&path, LogConfig::default()).unwrap();
        // A new partition is in epoch 0 from its start.
        assert_eq!(epoch_pairs(&p), [(0, 0)]);
        p.append(&simple_batch(3, 10, 0), 0).unwrap();
        p.become_leader(4).unwrap();
        assert_eq!(p.end_offset_for_epoch(0).unwrap(), (0, 3));
        p.append(&simple_batch(2, 10, 0), 0).unwrap();
        let stored = all_bytes(&p);
        let epochs: Vec<i32> = headers(&stored)
            .iter()
            .map(|h| h.partition_leader_epoch)
            .collect();
        assert_eq!(epochs, [0, 4]);
        assert_eq!(epoch_pairs(&p), [(0, 0), (4, 3)]);
        assert_eq!(p.end_offset_for_epoch(4).unwrap(), (4, 5));
        assert_eq!(p.end_offset_for_epoch(2).unwrap(), (0, 3));
        // The checkpoint survives a restart; without it the cache is
        // rebuilt from the batch headers.
        drop(p);
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(epoch_pairs(&p), [(0, 0), (4, 3)]);
        drop(p);
        fs::remove_file(path.join(crate::log::epoch_cache::CHECKPOINT)).unwrap();
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(epoch_pairs(&p), [(0, 0), (4, 3)]);
    }

    #[test]
    fn a_follower_stores_the_leaders_batches_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let leader = open(&dir.path().join("leader"), LogConfig::default()).unwrap();
        leader.append(&simple_batch(3, 10, 0), 0).unwrap();
        leader.become_leader(2).unwrap();
        leader.append(&simple_batch(4, 10, 0), 0).unwrap();
        leader.append(&simple_batch(1, 10, 0), 0).unwrap();
        let follower = open(&dir.path().join("follower"), config(200)).unwrap();
        // Fetched in two pieces; the first ends with part of a batch.
        let data = all_bytes(&leader);
        let first_two = headers(&data)[..2].iter().map(|h| h.size()).sum::<usize>();
        let info = follower.append_replicated(&data[..first_two + 20]).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 6));
        assert_eq!(follower.offsets().unwrap().high_watermark, 7);
        // A repeated fetch of what it has is skipped.
        follower.append_replicated(&data[..first_two]).unwrap();
        let info = follower.append_replicated(&data).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (7, 7));
        assert_eq!(all_bytes(&follower), data);
        assert_eq!(epoch_pairs(&follower), [(0, 0), (2, 3)]);
        // A batch wholly below the log end (a fetch that raced a
        // truncation) is skipped; one after a gap (compaction) is kept.
        let mut earlier = simple_batch(1, 10, 0);
        earlier[..8].copy_from_slice(&5i64.to_be_bytes());
        assert_eq!(follower.append_replicated(&earlier).unwrap().bytes, 0);
        assert_eq!(all_bytes(&follower), data);
        let mut later = simple_batch(1, 10, 0);
        later[..8].copy_from_slice(&20i64.to_be_bytes());
        let info = follower.append_replicated(&later).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (20, 20));
        assert_eq!(follower.offsets().unwrap().high_watermark, 21);
        let mut corrupt = data.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        assert!(matches!(
            follower.append_replicated(&corrupt),
            Err(StorageError::CorruptMessage(_))
        ));
    }

    #[test]
    fn opening_leaves_an_unchanged_epoch_checkpoint_alone() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let checkpoint = path.join(crate::log::epoch_cache::CHECKPOINT);
        let inode = || fs::metadata(&checkpoint).unwrap().ino();
        drop(open(&path, LogConfig::default()).unwrap());
        let empty = inode();
        let p = open(&path, LogConfig::default()).unwrap();
        // A rewrite renames a new file into place: another inode.
        assert_eq!(inode(), empty);
        p.become_leader(2).unwrap();
        p.append(&simple_batch(2, 10, 0), 0).unwrap();
        drop(p);
        let written = inode();
        assert_ne!(written, empty);
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(inode(), written);
        assert_eq!(epoch_pairs(&p), [(2, 0)]);
    }

    #[test]
    fn a_new_epoch_whose_checkpoint_cannot_be_saved_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let leader = open(&dir.path().join("leader"), LogConfig::default()).unwrap();
        leader.become_leader(3).unwrap();
        leader.append(&simple_batch(2, 10, 0), 0).unwrap();
        let data = all_bytes(&leader);
        let path = dir.path().join("follower");
        let follower = open(&path, LogConfig::default()).unwrap();
        // A directory where the checkpoint's temporary file goes: every
        // save fails.
        let blocker = crate::durable::tmp_path(&path, crate::log::epoch_cache::CHECKPOINT);
        fs::create_dir(&blocker).unwrap();
        assert!(follower.append_replicated(&data).is_err());
        assert_eq!(follower.offsets().unwrap().high_watermark, 0);
        assert_eq!(epoch_pairs(&follower), [(0, 0)]);
        assert!(follower.become_leader(5).is_err());
        assert_eq!(follower.leader_epoch().unwrap(), 0);
        assert_eq!(epoch_pairs(&follower), [(0, 0)]);
        // Appends that start no epoch need no save and go on.
        follower.append(&simple_batch(1, 10, 0), 0).unwrap();
        assert_eq!(follower.offsets().unwrap().high_watermark, 1);
        fs::remove_dir(&blocker).unwrap();
        follower.truncate_to(0).unwrap();
        let info = follower.append_replicated(&data).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (0, 1));
        assert_eq!(all_bytes(&follower), data);
        assert_eq!(epoch_pairs(&follower), [(3, 0)]);
        drop(follower);
        let follower = open(&path, LogConfig::default()).unwrap();
        assert_eq!(epoch_pairs(&follower), [(3, 0)]);
    }

    #[test]
    fn truncation_cuts_whole_batches_and_their_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch_len = simple_batch(5, 50, 0).len() as u64;
        let p = open(&path, config(2 * batch_len)).unwrap();
        for epoch in 0..6 {
            p.become_leader(epoch).unwrap();
            p.append(&simple_batch(5, 50, 0), 0).unwrap();
        }
        // Three segments of two batches: 0..10, 10..20, 20..30.
        assert_eq!(segment_files(&path).len(), 3);
        // Inside the batch 10..15: it goes, with everything after it.
        assert_eq!(p.truncate_to(12).unwrap(), 10);
        assert_eq!(p.offsets().unwrap().high_watermark, 10);
        assert_eq!(segment_files(&path).len(), 2);
        assert_eq!(epoch_pairs(&p), [(0, 0), (1, 5)]);
        assert_eq!(p.checkpoint_values().0.min(10), p.checkpoint_values().0);
        // Appends continue at the new end, in a new epoch.
        p.become_leader(7).unwrap();
        assert_eq!(
            p.append(&simple_batch(2, 50, 0), 0).unwrap().base_offset,
            10
        );
        assert_eq!(epoch_pairs(&p), [(0, 0), (1, 5), (7, 10)]);
        // Inside the first segment, after a reopen (index files kept).
        drop(p);
        let p = open(&path, config(2 * batch_len)).unwrap();
        assert_eq!(p.truncate_to(7).unwrap(), 5);
        assert_eq!(headers(&all_bytes(&p)).len(), 1);
        assert_eq!(epoch_pairs(&p), [(0, 0)]);
        // Beyond the end: nothing.
        assert_eq!(p.truncate_to(100).unwrap(), 5);
        // At the first segment's base: empty, starting there.
        assert_eq!(p.truncate_to(0).unwrap(), 0);
        assert_eq!(
            p.offsets().unwrap(),
            PartitionOffsets {
                log_start_offset: 0,
                high_watermark: 0
            }
        );
        drop(p);
        let p = open(&path, config(2 * batch_len)).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 0);
    }

    #[test]
    fn truncating_at_the_end_drops_an_epoch_led_without_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let p = open(&path, LogConfig::default()).unwrap();
        p.become_leader(4).unwrap();
        p.append(&simple_batch(5, 10, 0), 0).unwrap();
        // Led epoch 5 and appended nothing (paused, then deposed).
        p.become_leader(5).unwrap();
        assert_eq!(epoch_pairs(&p), [(4, 0), (5, 5)]);
        // At the end and beyond: no record goes, the empty epoch does.
        assert_eq!(p.truncate_to(5).unwrap(), 5);
        assert_eq!(epoch_pairs(&p), [(4, 0)]);
        assert_eq!(p.truncate_to(100).unwrap(), 5);
        assert_eq!(headers(&all_bytes(&p)).len(), 1);
        // The checkpoint file says so too.
        drop(p);
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(epoch_pairs(&p), [(4, 0)]);
    }

    #[test]
    fn a_former_leaders_diverging_tail_is_cut_to_the_new_leaders_log() {
        let dir = tempfile::tempdir().unwrap();
        // A led epoch 0 and wrote 0..8; B has 0..5 of it.
        let a = open(&dir.path().join("a"), LogConfig::default()).unwrap();
        a.append(&simple_batch(5, 10, 0), 0).unwrap();
        a.append(&simple_batch(3, 10, 0), 0).unwrap();
        let b = open(&dir.path().join("b"), LogConfig::default()).unwrap();
        let first = headers(&all_bytes(&a))[0].size();
        b.append_replicated(&all_bytes(&a)[..first]).unwrap();
        // B leads epoch 1 and writes 5..9 of its own.
        b.become_leader(1).unwrap();
        b.append(&simple_batch(4, 20, 0), 0).unwrap();
        // A follows B: where does A's last epoch end on B?
        let last = a.epochs().unwrap().latest_epoch().unwrap();
        let (epoch, end) = b.end_offset_for_epoch(last).unwrap();
        assert_eq!((epoch, end), (0, 5));
        let diverging = b.epochs().unwrap().diverging(last, 8, 9);
        assert_eq!(diverging, Some((0, 5)));
        assert_eq!(a.truncate_to(end).unwrap(), 5);
        let from = a.offsets().unwrap().high_watermark;
        a.append_replicated(&b.read(from, 1 << 20, true).unwrap().records)
            .unwrap();
        assert_eq!(all_bytes(&a), all_bytes(&b));
        assert_eq!(epoch_pairs(&a), epoch_pairs(&b));
    }

    #[test]
    fn a_follower_behind_the_leaders_start_starts_again_there() {
        let dir = tempfile::tempdir().unwrap();
        let leader = open(&dir.path().join("leader"), LogConfig::default()).unwrap();
        // Recent records: DeleteRecords also applies retention.
        let now = now_ms();
        leader.append(&simple_batch(5, 10, now), now).unwrap();
        leader.append(&simple_batch(5, 10, now), now).unwrap();
        leader.delete_records(7).unwrap();
        let follower = open(&dir.path().join("follower"), LogConfig::default()).unwrap();
        follower.truncate_fully_and_start_at(7).unwrap();
        assert_eq!(follower.offsets().unwrap().log_start_offset, 7);
        // The leader answers with the batch holding 7, which starts at 5.
        let records = leader.read(7, 1 << 20, true).unwrap().records;
        follower.append_replicated(&records).unwrap();
        let o = follower.offsets().unwrap();
        assert_eq!((o.log_start_offset, o.high_watermark), (5, 10));
        assert_eq!(follower.read(5, 1 << 20, true).unwrap().records, records);
    }

    #[test]
    fn rolls_when_the_active_segment_would_exceed_segment_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = simple_batch(10, 100, 0); // ~1.2 KB
        let p = open(&path, config(3 * batch.len() as u64)).unwrap();
        for i in 0..7 {
            let info = p.append(&batch, 0).unwrap();
            assert_eq!(info.base_offset, i * 10);
        }
        // Three batches per segment: 0..30, 30..60, 60..70.
        assert_eq!(
            segment_files(&path),
            vec![
                segment::file_name(0),
                segment::file_name(30),
                segment::file_name(60)
            ]
        );
        let sizes: Vec<u64> = read(&p.state).segments.iter().map(Segment::size).collect();
        assert_eq!(
            sizes,
            vec![
                3 * batch.len() as u64,
                3 * batch.len() as u64,
                batch.len() as u64
            ]
        );
        // Reads cross segment boundaries batch by batch.
        for offset in 0..70 {
            let r = p.read(offset, 1, true).unwrap();
            let h = headers(&r.records);
            assert_eq!(h.len(), 1);
            assert_eq!(h[0].base_offset, offset / 10 * 10);
        }
        // A read stays within one segment.
        let r = p.read(25, 1 << 20, false).unwrap();
        assert_eq!(
            headers(&r.records)
                .iter()
                .map(|h| h.base_offset)
                .collect::<Vec<_>>(),
            vec![20]
        );
    }

    #[test]
    fn a_batch_larger_than_segment_bytes_gets_a_segment_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let p = open(&path, config(100)).unwrap();
        for _ in 0..3 {
            p.append(&simple_batch(2, 200, 0), 0).unwrap();
        }
        assert_eq!(segment_files(&path).len(), 3);
        assert_eq!(p.offsets().unwrap().high_watermark, 6);
    }

    #[test]
    fn reopening_after_a_roll_keeps_every_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = five_batches_in_three_segments(&path);
        let p = open(&path, config(2 * batch.len() as u64)).unwrap();
        assert_eq!(read(&p.state).segments.len(), 3);
        assert_eq!(p.offsets().unwrap().high_watermark, 25);
        assert_eq!(p.append(&batch, 0).unwrap().base_offset, 25);
    }

    #[test]
    fn corruption_in_an_older_segment_drops_the_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = five_batches_in_three_segments(&path);
        // Flip a byte in the second batch of the first segment.
        let first = path.join(segment::file_name(0));
        let mut bytes = fs::read(&first).unwrap();
        let at = batch.len() + 70;
        bytes[at] ^= 0xff;
        fs::write(&first, &bytes).unwrap();
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 5);
        assert_eq!(segment_files(&path), vec![segment::file_name(0)]);
        assert_eq!(p.append(&batch, 0).unwrap().base_offset, 5);
    }

    #[test]
    fn deleted_partition_refuses_everything() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(&dir.path().join("t-0"), LogConfig::default()).unwrap();
        p.append(&simple_batch(1, 1, 0), 0).unwrap();
        p.mark_deleted();
        assert!(matches!(
            p.append(&simple_batch(1, 1, 0), 0),
            Err(StorageError::UnknownTopicOrPartition)
        ));
        assert!(matches!(
            p.read(0, 100, true),
            Err(StorageError::UnknownTopicOrPartition)
        ));
        assert!(matches!(
            p.offsets(),
            Err(StorageError::UnknownTopicOrPartition)
        ));
    }

    /// Stored bytes for batches of `counts` records each, offsets from `base`.
    fn stored(base: i64, counts: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut next = base;
        for &n in counts {
            let input = simple_batch(n, 10, 0);
            let mut p = batch::prepare_append(&input, 1 << 20, None, false).unwrap();
            next = p.assign_offsets(next) + 1;
            out.extend(p.to_bytes());
        }
        out
    }

    #[test]
    fn a_read_in_an_offset_gap_continues_in_the_next_segment() {
        // Segment 0 holds offsets 0..5, segment 10 starts at 10 (as after
        // compaction): offsets 5..10 do not exist.
        let dir = tempfile::tempdir().unwrap();
        let (_, p) = with_segments(
            dir.path(),
            [(0, stored(0, &[2, 3])), (10, stored(10, &[4]))],
        );
        assert_eq!(p.offsets().unwrap().high_watermark, 14);
        let r = p.read(7, 1 << 20, true).unwrap();
        assert_eq!(headers(&r.records)[0].base_offset, 10);
        let r = p.read(3, 1 << 20, true).unwrap();
        assert_eq!(headers(&r.records)[0].base_offset, 2);
    }

    #[test]
    fn an_empty_segment_left_by_a_crash_after_a_roll_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let (path, p) = with_segments(dir.path(), [(0, stored(0, &[2, 3])), (5, vec![])]);
        assert_eq!(p.offsets().unwrap().high_watermark, 5);
        assert_eq!(p.append(&simple_batch(1, 1, 0), 0).unwrap().base_offset, 5);
        assert!(
            fs::metadata(path.join(segment::file_name(5)))
                .unwrap()
                .len()
                > 0
        );
        assert_eq!(segment_files(&path).len(), 2);
        assert_eq!(
            headers(&p.read(5, 1 << 20, true).unwrap().records)[0].base_offset,
            5
        );
    }

    #[test]
    fn an_overlapping_segment_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let (path, p) = with_segments(dir.path(), [(0, stored(0, &[2, 3])), (3, stored(3, &[4]))]);
        assert_eq!(p.offsets().unwrap().high_watermark, 5);
        assert_eq!(segment_files(&path), vec![segment::file_name(0)]);
    }

    #[test]
    fn flush_syncs_only_what_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(&dir.path().join("t-0"), config(200)).unwrap();
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        let unsynced = |p: &Partition| -> usize {
            read(&p.state)
                .segments
                .iter()
                .filter(|s| s.unsynced().unwrap().is_some())
                .count()
        };
        assert_eq!(unsynced(&p), 2);
        p.flush().unwrap();
        assert_eq!(unsynced(&p), 0);
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        assert_eq!(unsynced(&p), 1);
    }

    #[test]
    fn rolls_by_segment_ms_from_the_first_batch_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let config = LogConfig {
            segment_ms: 1000,
            ..LogConfig::default()
        };
        let p = open(&path, config).unwrap();
        p.append(&simple_batch(1, 10, 10_000), 10_000).unwrap();
        p.append(&simple_batch(1, 10, 10_500), 10_900).unwrap();
        assert_eq!(segment_files(&path).len(), 1);
        // More than segment.ms after the first batch's timestamp.
        p.append(&simple_batch(1, 10, 11_001), 11_001).unwrap();
        assert_eq!(segment_files(&path).len(), 2);
        assert!(read(&p.state).roll_pending_flush);
        assert!(p.flush_due(11_002));
        p.flush().unwrap();
        assert!(!p.flush_due(11_002));
        assert_eq!(p.checkpoint_values().0, 3);
    }

    #[test]
    fn flush_messages_and_flush_ms() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            flush_messages: 4,
            flush_ms: 50,
            ..LogConfig::default()
        };
        let p = open(&dir.path().join("t-0"), config).unwrap();
        p.append(&simple_batch(3, 10, 0), 0).unwrap();
        assert_eq!(p.checkpoint_values().0, 0, "3 records: not yet");
        p.append(&simple_batch(1, 10, 0), 0).unwrap();
        assert_eq!(p.checkpoint_values().0, 4, "flushed at 4 records");
        p.append(&simple_batch(1, 10, 0), 0).unwrap();
        assert!(!p.flush_due(now_ms()));
        assert!(p.flush_due(now_ms() + 51));
    }

    #[test]
    fn only_segments_after_the_recovery_point_are_revalidated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = simple_batch(5, 50, 0);
        let per_segment = 40;
        let p = open(&path, config(per_segment * batch.len() as u64)).unwrap();
        for _ in 0..(3 * per_segment) {
            p.append(&batch, 0).unwrap();
        }
        p.flush().unwrap();
        drop(p);
        // Three segments of 200 offsets. Corrupt a byte early in segment 0,
        // before its last index entry: below the recovery point it is
        // loaded from its index, not re-validated.
        let first = path.join(segment::file_name(0));
        let mut bytes = fs::read(&first).unwrap();
        bytes[70] ^= 0xff;
        fs::write(&first, &bytes).unwrap();
        let hints = OpenHints {
            recovery_point: Some(400),
            ..OpenHints::default()
        };
        let p = Partition::open(path.clone(), tp(), LogConfig::default(), hints).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 600);
        drop(p);
        // With no recovery point everything is re-validated and the log is
        // cut at the corrupt batch.
        let p = open(&path, LogConfig::default()).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 0);
    }

    #[test]
    fn a_torn_tail_after_the_recovery_point_is_truncated_and_reindexed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let p = open(&path, LogConfig::default()).unwrap();
        for i in 0..200 {
            p.append(&simple_batch(2, 100, i), 0).unwrap();
        }
        p.flush().unwrap();
        let size = p.size();
        drop(p);
        let log = path.join(segment::file_name(0));
        let f = OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(size - 10).unwrap();
        drop(f);
        // The index files still have entries for the torn batch's region.
        let hints = OpenHints {
            recovery_point: Some(100),
            ..OpenHints::default()
        };
        let p = Partition::open(path.clone(), tp(), LogConfig::default(), hints).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 398);
        for offset in [0, 101, 396, 397] {
            let r = p.read(offset, 1, true).unwrap();
            assert_eq!(headers(&r.records)[0].base_offset, offset / 2 * 2);
        }
        assert_eq!(
            p.append(&simple_batch(1, 1, 0), 0).unwrap().base_offset,
            398
        );
    }

    #[test]
    fn retention_by_time_size_and_log_start_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch_len = simple_batch(5, 50, 0).len() as u64;
        let p = open(&path, config(2 * batch_len)).unwrap();
        // Timestamps 1000, 2000, ... one batch each: segments of two batches.
        for i in 0..6 {
            p.append(&simple_batch(5, 50, 1000 * (i + 1)), 0).unwrap();
        }
        assert_eq!(segment_files(&path).len(), 3);
        // retention.ms: segment 0 (newest 2004) is older than 10_000 - 7000.
        p.set_config(LogConfig {
            retention_ms: 7000,
            ..config(2 * batch_len)
        });
        assert_eq!(p.delete_old_segments(10_000).unwrap(), 1);
        assert_eq!(p.offsets().unwrap().log_start_offset, 10);
        assert!(matches!(
            p.read(5, 100, true),
            Err(StorageError::OffsetOutOfRange)
        ));
        // retention.bytes: two batches too many -> one more segment goes.
        p.set_config(LogConfig {
            retention_bytes: 2 * batch_len as i64,
            ..config(2 * batch_len)
        });
        assert_eq!(p.delete_old_segments(10_000).unwrap(), 1);
        assert_eq!(p.offsets().unwrap().log_start_offset, 20);
        assert_eq!(segment_files(&path), vec![segment::file_name(20)]);
        // Everything expired: the active segment goes too, after a roll.
        p.set_config(LogConfig {
            retention_ms: 0,
            ..config(2 * batch_len)
        });
        assert_eq!(p.delete_old_segments(100_000).unwrap(), 1);
        let o = p.offsets().unwrap();
        assert_eq!((o.log_start_offset, o.high_watermark), (30, 30));
        assert_eq!(segment_files(&path), vec![segment::file_name(30)]);
        assert_eq!(p.append(&simple_batch(1, 1, 0), 0).unwrap().base_offset, 30);
        // The compact policy alone never deletes by time.
        p.set_config(LogConfig {
            retention_ms: 0,
            delete: false,
            compact: true,
            ..config(2 * batch_len)
        });
        assert_eq!(p.delete_old_segments(100_000).unwrap(), 0);
    }

    #[test]
    fn delete_records_moves_the_log_start_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch_len = simple_batch(5, 50, 0).len() as u64;
        let no_time_retention = LogConfig {
            retention_ms: -1,
            ..config(2 * batch_len)
        };
        let p = open(&path, no_time_retention).unwrap();
        for i in 0..6 {
            p.append(&simple_batch(5, 50, 1000 * i), 0).unwrap();
        }
        assert_eq!(p.delete_records(3).unwrap(), 3);
        // Inside the first segment: it stays, but reads below 3 fail.
        assert_eq!(segment_files(&path).len(), 3);
        assert!(matches!(
            p.read(2, 100, true),
            Err(StorageError::OffsetOutOfRange)
        ));
        assert_eq!(
            headers(&p.read(3, 1, true).unwrap().records)[0].base_offset,
            0
        );
        // Below the current start: nothing changes.
        assert_eq!(p.delete_records(1).unwrap(), 3);
        // Timestamps below the log start offset are not answered.
        assert_eq!(p.offset_for_timestamp(0).unwrap(), Some((3, 3)));
        // Past the first segment: it is deleted.
        assert_eq!(p.delete_records(12).unwrap(), 12);
        assert_eq!(segment_files(&path).len(), 2);
        assert!(matches!(
            p.delete_records(31),
            Err(StorageError::OffsetOutOfRange)
        ));
        assert!(matches!(
            p.delete_records(-7),
            Err(StorageError::OffsetOutOfRange)
        ));
        assert_eq!(p.delete_records(-1).unwrap(), 30);
        assert_eq!(p.offsets().unwrap().log_start_offset, 30);
        // A reopened log starts where the checkpoint says.
        drop(p);
        let hints = OpenHints {
            log_start_offset: Some(30),
            clean_shutdown: true,
            ..OpenHints::default()
        };
        let p = Partition::open(path, tp(), LogConfig::default(), hints).unwrap();
        assert_eq!(p.offsets().unwrap().log_start_offset, 30);
        // Compact-only topics refuse.
        p.set_config(LogConfig {
            delete: false,
            compact: true,
            ..LogConfig::default()
        });
        assert!(matches!(
            p.delete_records(30),
            Err(StorageError::PolicyViolation(_))
        ));
    }
}
