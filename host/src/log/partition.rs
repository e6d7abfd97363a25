//! One partition's log: its segments, appends, reads and offsets.
//!
//! Locking (see the module doc of `log` for why):
//! - `append_lock` serializes appenders of this partition. An appender
//!   validates and copies its batches *before* taking it, then holds it while
//!   it assigns offsets, rolls if needed and writes.
//! - `state` (segment list, sizes, index, config) is a read-write lock held
//!   only for bookkeeping, never across file I/O. A write becomes visible to
//!   readers when the appender publishes the new size under the write lock,
//!   so readers never see a partial batch.
//!
//! Offsets are contiguous: each segment starts where the previous one ends,
//! and the high watermark is the log end offset (a single node commits what
//! it writes).

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::batch;
use super::segment::{self, Segment, MAX_RELATIVE_OFFSET, MAX_SEGMENT_BYTES};
use super::{
    create_dir_durably, sync_dir, AppendInfo, LogConfig, PartitionOffsets, ReadResult,
    StorageError, TopicPartition,
};

// Nothing panics while holding these locks, but a poisoned lock must not take
// the partition down with it: the state is updated in single steps.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct State {
    config: LogConfig,
    /// Ordered by base offset; never empty.
    segments: Vec<Segment>,
    /// Set when the topic is deleted: every later call fails.
    deleted: bool,
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

    fn log_start_offset(&self) -> i64 {
        self.segments.first().map_or(0, Segment::base_offset)
    }

    fn log_end_offset(&self) -> i64 {
        self.segments.last().map_or(0, Segment::next_offset)
    }

    /// The segment whose range holds `offset` (the last one starting at or
    /// before it).
    fn segment_for(&self, offset: i64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.base_offset() <= offset);
        i.checked_sub(1).map(|i| &self.segments[i])
    }
}

fn no_segments() -> StorageError {
    StorageError::Io(io::Error::other("partition has no log segment"))
}

/// A partition's log.
#[derive(Debug)]
pub struct Partition {
    tp: TopicPartition,
    dir: PathBuf,
    append_lock: Mutex<()>,
    state: RwLock<State>,
}

impl Partition {
    /// Opens the partition directory `dir`, creating it if needed, and
    /// recovers its segments.
    ///
    /// Recovery validates every segment. A torn or corrupt tail is
    /// truncated; if that happens in a segment that is not the last, the
    /// later segments are deleted, as Kafka does, because offsets must stay
    /// contiguous. With no segment at all the log starts empty at offset 0.
    pub fn open(
        dir: PathBuf,
        tp: TopicPartition,
        config: LogConfig,
    ) -> Result<Partition, StorageError> {
        create_dir_durably(&dir)?;
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

        let mut segments: Vec<Segment> = Vec::with_capacity(bases.len().max(1));
        let mut discard_from = bases.len();
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
            let (segment, truncated) = Segment::recover(&dir.join(segment::file_name(base)), base)?;
            segments.push(segment);
            if truncated > 0 && i + 1 < bases.len() {
                discard_from = i + 1;
                break;
            }
        }
        if discard_from < bases.len() {
            for &base in &bases[discard_from..] {
                tracing::warn!(partition = %tp, "deleting segment {base} after a corrupt segment");
                fs::remove_file(dir.join(segment::file_name(base)))?;
            }
            sync_dir(&dir)?;
        }
        if segments.is_empty() {
            segments.push(Segment::create(&dir, 0)?);
            sync_dir(&dir)?;
        }

        Ok(Partition {
            tp,
            dir,
            append_lock: Mutex::new(()),
            state: RwLock::new(State {
                config,
                segments,
                deleted: false,
            }),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn set_config(&self, config: LogConfig) {
        write(&self.state).config = config;
    }

    /// Stops all further use of the partition (topic deletion). Waits for an
    /// append in progress to finish.
    pub fn mark_deleted(&self) {
        let _append = lock(&self.append_lock);
        write(&self.state).deleted = true;
    }

    pub fn append(&self, batches: &[u8], now_ms: i64) -> Result<AppendInfo, StorageError> {
        let (max_message_bytes, log_append_time) = {
            let state = read(&self.state);
            let config = &state.live()?.config;
            (
                config.max_message_bytes,
                config.log_append_time.then_some(now_ms),
            )
        };
        let mut prepared = batch::prepare_append(batches, max_message_bytes, log_append_time)?;
        let bytes = prepared.buf.len() as u64;

        let _append = lock(&self.append_lock);
        let (mut file, mut position, base_offset, roll) = {
            let state = read(&self.state);
            let state = state.live()?;
            let active = state.active()?;
            let base_offset = active.next_offset();
            let next = base_offset
                .checked_add(prepared.offset_count)
                .ok_or_else(|| StorageError::InvalidRecord("offsets overflow".into()))?;
            let segment_bytes = state.config.segment_bytes.clamp(1, MAX_SEGMENT_BYTES);
            let roll = !active.is_empty()
                && (active.size() + bytes > segment_bytes
                    || next - 1 - active.base_offset() > MAX_RELATIVE_OFFSET);
            (active.file(), active.size(), base_offset, roll)
        };
        if roll {
            let segment = Segment::create(&self.dir, base_offset)?;
            file = segment.file();
            position = 0;
            // Publish the (empty) segment before anything else can fail, so
            // a retry appends to it rather than trying to create it again.
            write(&self.state).segments.push(segment);
            sync_dir(&self.dir)?;
        }

        let last_offset = prepared.assign_offsets(base_offset);
        if let Err(e) = file.write_all_at(&prepared.buf, position) {
            // Leave no partial batch behind: cut the file back.
            if let Err(e2) = file.set_len(position) {
                tracing::error!(partition = %self.tp, "cannot truncate after a failed write: {e2}");
            }
            return Err(e.into());
        }

        let log_start_offset = {
            let mut state = write(&self.state);
            let active = state.segments.last_mut().ok_or_else(no_segments)?;
            let mut offset = base_offset;
            for b in &prepared.batches {
                let next = offset + i64::from(b.last_offset_delta) + 1;
                active.push_batch(b.size as u64, offset, next, b.max_timestamp);
                offset = next;
            }
            state.log_start_offset()
        };

        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time_ms: log_append_time.unwrap_or(-1),
            log_start_offset,
            record_count: prepared.record_count,
            bytes: prepared.buf.len(),
        })
    }

    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError> {
        let (high_watermark, log_start_offset, mut view) = {
            let state = read(&self.state);
            let state = state.live()?;
            let (start, end) = (state.log_start_offset(), state.log_end_offset());
            if offset < start || offset > end {
                return Err(StorageError::OffsetOutOfRange);
            }
            let segment = match state.segment_for(offset) {
                Some(s) if offset < end => s,
                _ => {
                    return Ok(ReadResult {
                        records: Vec::new(),
                        high_watermark: end,
                        log_start_offset: start,
                    })
                }
            };
            (
                end,
                start,
                segment.view(segment.position_for_offset(offset)),
            )
        };
        loop {
            if let Some(records) = view.read_from_offset(offset, max_bytes, min_one_batch)? {
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
            };
            match next {
                Some(v) => view = v,
                None => {
                    return Ok(ReadResult {
                        records: Vec::new(),
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
            log_start_offset: state.log_start_offset(),
            high_watermark: state.log_end_offset(),
        })
    }

    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        let view = {
            let state = read(&self.state);
            let state = state.live()?;
            let segment = state.segments.iter().find(|s| {
                s.max_timestamp()
                    .is_some_and(|m| m.timestamp >= timestamp_ms)
            });
            match segment {
                Some(s) => s.view(s.position_for_timestamp(timestamp_ms)),
                None => return Ok(None),
            }
        };
        view.find_timestamp(timestamp_ms)
    }

    pub fn max_timestamp(&self) -> Result<Option<(i64, i64)>, StorageError> {
        let found = {
            let state = read(&self.state);
            let state = state.live()?;
            let mut best: Option<(&Segment, segment::MaxTimestamp)> = None;
            for s in &state.segments {
                if let Some(m) = s.max_timestamp() {
                    if best.is_none_or(|(_, b)| m.timestamp > b.timestamp) {
                        best = Some((s, m));
                    }
                }
            }
            best.map(|(s, m)| (s.view(0), m.batch_position))
        };
        match found {
            Some((view, position)) => view.max_timestamp_at(position).map(Some),
            None => Ok(None),
        }
    }

    /// Fsyncs the bytes appended since the last flush, then the directory.
    pub fn flush(&self) -> Result<(), StorageError> {
        let pending: Vec<_> = {
            let state = read(&self.state);
            if state.deleted {
                return Ok(());
            }
            state
                .segments
                .iter()
                .filter_map(|s| s.unsynced().map(|(f, size)| (s.base_offset(), f, size)))
                .collect()
        };
        let synced = pending
            .iter()
            .try_for_each(|(_, file, _)| file.sync_data())
            .and_then(|()| sync_dir(&self.dir));
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::testing::*;
    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn config(segment_bytes: u64) -> LogConfig {
        LogConfig {
            segment_bytes,
            ..LogConfig::default()
        }
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

    #[test]
    fn rolls_when_the_active_segment_would_exceed_segment_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = simple_batch(10, 100, 0); // ~1.2 KB
        let p = Partition::open(path.clone(), tp(), config(3 * batch.len() as u64)).unwrap();
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
        let p = Partition::open(path.clone(), tp(), config(100)).unwrap();
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
        let batch = simple_batch(5, 50, 0);
        let p = Partition::open(path.clone(), tp(), config(2 * batch.len() as u64)).unwrap();
        for _ in 0..5 {
            p.append(&batch, 0).unwrap();
        }
        drop(p);
        let p = Partition::open(path, tp(), config(2 * batch.len() as u64)).unwrap();
        assert_eq!(read(&p.state).segments.len(), 3);
        assert_eq!(p.offsets().unwrap().high_watermark, 25);
        assert_eq!(p.append(&batch, 0).unwrap().base_offset, 25);
    }

    #[test]
    fn corruption_in_an_older_segment_drops_the_later_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let batch = simple_batch(5, 50, 0);
        let p = Partition::open(path.clone(), tp(), config(2 * batch.len() as u64)).unwrap();
        for _ in 0..5 {
            p.append(&batch, 0).unwrap();
        }
        drop(p);
        // Flip a byte in the second batch of the first segment.
        let first = path.join(segment::file_name(0));
        let mut bytes = fs::read(&first).unwrap();
        let at = batch.len() + 70;
        bytes[at] ^= 0xff;
        fs::write(&first, &bytes).unwrap();
        let p = Partition::open(path.clone(), tp(), LogConfig::default()).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 5);
        assert_eq!(segment_files(&path), vec![segment::file_name(0)]);
        assert_eq!(p.append(&batch, 0).unwrap().base_offset, 5);
    }

    #[test]
    fn deleted_partition_refuses_everything() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(dir.path().join("t-0"), tp(), LogConfig::default()).unwrap();
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
            let mut p = batch::prepare_append(&simple_batch(n, 10, 0), 1 << 20, None).unwrap();
            next = p.assign_offsets(next) + 1;
            out.extend(p.buf);
        }
        out
    }

    #[test]
    fn a_read_in_an_offset_gap_continues_in_the_next_segment() {
        // Segment 0 holds offsets 0..5, segment 10 starts at 10 (as after
        // compaction): offsets 5..10 do not exist.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        fs::create_dir(&path).unwrap();
        fs::write(path.join(segment::file_name(0)), stored(0, &[2, 3])).unwrap();
        fs::write(path.join(segment::file_name(10)), stored(10, &[4])).unwrap();
        let p = Partition::open(path, tp(), LogConfig::default()).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 14);
        let r = p.read(7, 1 << 20, true).unwrap();
        assert_eq!(headers(&r.records)[0].base_offset, 10);
        let r = p.read(3, 1 << 20, true).unwrap();
        assert_eq!(headers(&r.records)[0].base_offset, 2);
    }

    #[test]
    fn an_empty_segment_left_by_a_crash_after_a_roll_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        fs::create_dir(&path).unwrap();
        fs::write(path.join(segment::file_name(0)), stored(0, &[2, 3])).unwrap();
        fs::write(path.join(segment::file_name(5)), b"").unwrap();
        let p = Partition::open(path.clone(), tp(), LogConfig::default()).unwrap();
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
        let path = dir.path().join("t-0");
        fs::create_dir(&path).unwrap();
        fs::write(path.join(segment::file_name(0)), stored(0, &[2, 3])).unwrap();
        fs::write(path.join(segment::file_name(3)), stored(3, &[4])).unwrap();
        let p = Partition::open(path.clone(), tp(), LogConfig::default()).unwrap();
        assert_eq!(p.offsets().unwrap().high_watermark, 5);
        assert_eq!(segment_files(&path), vec![segment::file_name(0)]);
    }

    #[test]
    fn flush_syncs_only_what_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let p = Partition::open(dir.path().join("t-0"), tp(), config(200)).unwrap();
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        let unsynced = |p: &Partition| -> usize {
            read(&p.state)
                .segments
                .iter()
                .filter(|s| s.unsynced().is_some())
                .count()
        };
        assert_eq!(unsynced(&p), 2);
        p.flush().unwrap();
        assert_eq!(unsynced(&p), 0);
        p.append(&simple_batch(2, 50, 0), 0).unwrap();
        assert_eq!(unsynced(&p), 1);
    }
}
