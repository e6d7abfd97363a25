//! One log segment: a `<base-offset>.log` file of record batches with its
//! sparse offset and time indexes (see `index`).
//!
//! The file holds batches back to back, exactly as they were appended.
//! Roughly every `index.interval.bytes` of log the segment adds an index
//! entry for the batch about to be written: its first offset and position,
//! and the largest timestamp of everything before it. Offsets and running
//! maximum timestamps both grow along the file, so one binary search finds
//! where to start scanning for an offset or for a timestamp, and a scan
//! reads at most about one interval of batch headers before it reaches the
//! batch it wants.
//!
//! Opening a segment takes one of two paths:
//! - [`Segment::load`], for a segment known to be whole (it lies before the
//!   partition's recovery point, or the broker shut down cleanly): the index
//!   files are read and sanity-checked, and only the batches after the last
//!   index entry are read, to learn the segment's end. Opening a large log
//!   costs a few KiB of reads per segment.
//! - [`Segment::recover`], after an unclean stop: every batch is re-validated
//!   (framing, magic, CRC-32C, increasing offsets), a torn or corrupt tail is
//!   truncated, and both indexes are rebuilt.
//!
//! Positions are `u32` and offsets relative to the segment's base are `u32`
//! in index entries: the partition rolls before a segment could outgrow
//! either, as Kafka does with its 32-bit index entries.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::UNIX_EPOCH;

use super::batch::{self, BatchHeader, HEADER_SIZE};
use super::file_records::FileRecords;
use super::handles::{self, FileSlot};
use super::index::SegmentIndex;
use super::positional::{read_exact_at_unzeroed, FileWindow, SCAN_CHUNK};
use super::StorageError;

/// Kafka's default `index.interval.bytes`.
pub const INDEX_INTERVAL_BYTES: u64 = 4096;
/// Largest segment the index can address; `segment.bytes` is capped here.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;
/// Largest offset span (last offset - base offset) of one segment.
pub const MAX_RELATIVE_OFFSET: i64 = i32::MAX as i64;

/// How much recovery reads at a time.
const RECOVERY_CHUNK: usize = 1 << 20;

/// `<base offset, 20 digits>.log`, Kafka's naming.
pub fn file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

/// The base offset of a segment file name, if it is one.
pub fn parse_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A segment's file and in-memory bookkeeping. Owned by the partition's
/// state; reads go through [`SegmentView`]s taken from it.
///
/// The log file is open only while it is used (see `handles`): the segment
/// being appended to pins its handle from the first write until
/// [`Segment::seal`]; other segments take one from the handle cache.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    path: PathBuf,
    slot: Arc<FileSlot>,
    /// The writer's handle, while this is the active segment.
    pin: OnceLock<Arc<File>>,
    /// Bytes of whole, valid batches (the committed end of the file).
    size: u64,
    /// Bytes known to be fsynced.
    synced_size: u64,
    next_offset: i64,
    index: SegmentIndex,
    bytes_since_index: u64,
    /// The largest batch timestamp in the segment.
    max_timestamp: Option<i64>,
    /// The first batch's max timestamp: what `segment.ms` counts from.
    first_batch_timestamp: Option<i64>,
    /// When the segment was created (or its file last modified, for a
    /// segment found on disk): used when its batches carry no timestamp.
    created_ms: i64,
}

/// Opens a segment file that exists, for reading and writing.
fn open_existing(path: &Path) -> io::Result<File> {
    handles::retrying(|| OpenOptions::new().read(true).write(true).open(path))
}

fn file_mtime_ms(file: &File) -> i64 {
    file.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Segment {
    fn with_file(
        path: PathBuf,
        base_offset: i64,
        file: File,
        index: SegmentIndex,
    ) -> io::Result<Segment> {
        let created_ms = file_mtime_ms(&file);
        Ok(Segment {
            base_offset,
            slot: FileSlot::new(path.clone(), file)?,
            path,
            pin: OnceLock::new(),
            size: 0,
            synced_size: 0,
            next_offset: base_offset,
            index,
            bytes_since_index: 0,
            max_timestamp: None,
            first_batch_timestamp: None,
            created_ms,
        })
    }

    /// Creates a new, empty segment (log and index files) in `dir`.
    pub fn create(dir: &Path, base_offset: i64) -> io::Result<Segment> {
        let path = dir.join(file_name(base_offset));
        let file = handles::retrying(|| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
        })?;
        let index = SegmentIndex::create(dir, base_offset)?;
        Segment::with_file(path, base_offset, file, index)
    }

    /// Opens a segment known to be whole, trusting its index files and
    /// reading only the batches after the last index entry. `None` when the
    /// index files are missing or inconsistent or the tail does not parse:
    /// the caller then falls back to [`Segment::recover`].
    pub fn load(dir: &Path, base_offset: i64) -> io::Result<Option<Segment>> {
        let path = dir.join(file_name(base_offset));
        let file = open_existing(&path)?;
        let len = file.metadata()?.len();
        let Some(index) = SegmentIndex::load(dir, base_offset, len)? else {
            return Ok(None);
        };
        let last_entry = index.offset_entries().last().copied();
        let mut segment = Segment::with_file(path, base_offset, file, index)?;
        let (mut pos, mut next_offset) = match last_entry {
            Some(e) => (
                u64::from(e.position),
                base_offset + i64::from(e.relative_offset),
            ),
            None => (0, base_offset),
        };
        segment.max_timestamp = segment.index.last_timestamp();
        segment.bytes_since_index = len - pos;
        let file = segment.slot.get()?;
        let mut window = FileWindow::new(&file, len, SCAN_CHUNK);
        if len > 0 {
            let Some(Ok(first)) = window.get(0, HEADER_SIZE)?.map(BatchHeader::parse) else {
                return Ok(None);
            };
            if first.base_offset < base_offset {
                return Ok(None);
            }
            segment.first_batch_timestamp = Some(first.max_timestamp);
        }
        while pos < len {
            let Some(Ok(header)) = window.get(pos, HEADER_SIZE)?.map(BatchHeader::parse) else {
                return Ok(None);
            };
            if header.size() as u64 > len - pos || header.base_offset < next_offset {
                return Ok(None);
            }
            match window.get(pos, header.size())? {
                Some(bytes) if batch::crc_matches(bytes, &header) => {}
                _ => return Ok(None),
            }
            segment.max_timestamp = Some(
                segment
                    .max_timestamp
                    .map_or(header.max_timestamp, |m| m.max(header.max_timestamp)),
            );
            next_offset = header.next_offset();
            pos += header.size() as u64;
        }
        segment.size = len;
        segment.synced_size = len;
        segment.next_offset = next_offset;
        Ok(Some(segment))
    }

    /// Opens a segment after an unclean stop, validating every batch and
    /// rebuilding both indexes. A torn or corrupt tail — a batch that runs
    /// past the end of the file, a bad header or CRC, offsets that do not
    /// increase — is truncated away. Returns the segment and how many bytes
    /// were truncated.
    pub fn recover(dir: &Path, base_offset: i64) -> io::Result<(Segment, u64)> {
        Self::recover_after(dir, base_offset, None)
    }

    /// [`Segment::recover`] for the segment holding the recovery point: the
    /// batches before the last index entry at or below `recovery_point`
    /// were fsynced (with that entry) by a flush, so only what follows is
    /// re-validated and re-indexed. Falls back to a full recovery when the
    /// index files are unusable.
    pub fn recover_after(
        dir: &Path,
        base_offset: i64,
        recovery_point: Option<i64>,
    ) -> io::Result<(Segment, u64)> {
        let path = dir.join(file_name(base_offset));
        let file = open_existing(&path)?;
        let len = file.metadata()?.len();
        let trusted = match recovery_point.filter(|&rp| rp > base_offset) {
            Some(rp) => match SegmentIndex::load(dir, base_offset, len)? {
                Some(mut index) => {
                    let relative = u32::try_from(rp - base_offset).unwrap_or(u32::MAX);
                    index.retain_up_to(relative)?.map(|entry| (index, entry))
                }
                None => None,
            },
            None => None,
        };
        let mut start = 0u64;
        let mut segment = match trusted {
            Some((index, entry)) => {
                let mut segment = Segment::with_file(path.clone(), base_offset, file, index)?;
                start = u64::from(entry.position);
                segment.size = start;
                segment.next_offset = base_offset + i64::from(entry.relative_offset);
                segment.max_timestamp = segment.index.last_timestamp();
                segment
            }
            None => {
                let index = SegmentIndex::create(dir, base_offset)?;
                Segment::with_file(path.clone(), base_offset, file, index)?
            }
        };
        let file = segment.slot.get()?;
        let mut window = FileWindow::new(&file, len, RECOVERY_CHUNK);
        if start > 0 {
            // The trusted prefix must end where a batch with the indexed
            // offset starts; anything else means the index cannot be
            // trusted after all.
            let first = window.get(0, HEADER_SIZE)?.map(BatchHeader::parse);
            let at_start = window.get(start, HEADER_SIZE)?.map(BatchHeader::parse);
            match (first, at_start) {
                (Some(Ok(first)), Some(Ok(h))) if h.base_offset == segment.next_offset => {
                    segment.first_batch_timestamp = Some(first.max_timestamp);
                }
                _ => {
                    drop(window);
                    drop(file);
                    drop(segment);
                    return Self::recover_after(dir, base_offset, None);
                }
            }
        }
        let mut pos = start;
        let problem = loop {
            if pos == len {
                break None;
            }
            let Some(head) = window.get(pos, HEADER_SIZE)? else {
                break Some(format!("{} bytes of a torn batch header", len - pos));
            };
            let header = match BatchHeader::parse(head) {
                Ok(h) => h,
                Err(e) => break Some(e),
            };
            let size = header.size() as u64;
            if size > len - pos {
                break Some(format!(
                    "a batch of {size} bytes with only {} on disk",
                    len - pos
                ));
            }
            if header.base_offset < segment.next_offset {
                break Some(format!(
                    "batch offset {} where {} or more was expected",
                    header.base_offset, segment.next_offset
                ));
            }
            if header.last_offset() - base_offset > MAX_RELATIVE_OFFSET {
                break Some(format!(
                    "batch offset {} is too far from the segment base",
                    header.base_offset
                ));
            }
            let Some(bytes) = window.get(pos, header.size())? else {
                break Some("torn batch".to_string());
            };
            if !batch::crc_matches(bytes, &header) {
                break Some(format!(
                    "CRC mismatch in the batch at offset {}",
                    header.base_offset
                ));
            }
            segment.push_batch(
                size,
                header.base_offset,
                header.next_offset(),
                header.max_timestamp,
                INDEX_INTERVAL_BYTES,
            );
            pos += size;
        };
        let mut truncated = 0;
        if let Some(problem) = problem {
            truncated = len - pos;
            tracing::warn!(
                segment = %path.display(),
                position = pos,
                truncated_bytes = truncated,
                "truncating log segment: {problem}"
            );
            file.set_len(pos)?;
        }
        file.sync_all()?;
        segment.index.rewrite()?;
        segment.index.sync()?;
        segment.synced_size = segment.size;
        Ok((segment, truncated))
    }

    /// Books a batch just written at the end of the file (or found there by
    /// recovery): index entries, size, next offset, timestamps.
    pub fn push_batch(
        &mut self,
        size: u64,
        base_offset: i64,
        next_offset: i64,
        max_timestamp: i64,
        index_interval: u64,
    ) {
        let position = self.size;
        if position > 0 && self.bytes_since_index >= index_interval.max(1) {
            // An entry that cannot be represented is skipped: reads then
            // just scan from an earlier entry.
            if let (Ok(relative_offset), Ok(pos32)) = (
                u32::try_from(base_offset - self.base_offset),
                u32::try_from(position),
            ) {
                self.index.push(relative_offset, pos32, self.max_timestamp);
                self.bytes_since_index = 0;
            }
        }
        self.bytes_since_index += size;
        self.max_timestamp = Some(
            self.max_timestamp
                .map_or(max_timestamp, |m| m.max(max_timestamp)),
        );
        if position == 0 {
            self.first_batch_timestamp = Some(max_timestamp);
        }
        self.size += size;
        self.next_offset = next_offset;
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The handle appends write through: pinned from the first call until
    /// the segment is sealed.
    pub fn file(&self) -> io::Result<Arc<File>> {
        if let Some(file) = self.pin.get() {
            return Ok(Arc::clone(file));
        }
        let file = self.slot.get()?;
        Ok(Arc::clone(self.pin.get_or_init(|| file)))
    }

    /// A handle for reading: the writer's if there is one, else from the
    /// handle cache (opened again if it was evicted).
    fn handle(&self) -> io::Result<Arc<File>> {
        match self.pin.get() {
            Some(file) => Ok(Arc::clone(file)),
            None => self.slot.get(),
        }
    }

    /// Whether the writer's handle is pinned open.
    #[cfg(test)]
    pub fn is_pinned(&self) -> bool {
        self.pin.get().is_some()
    }

    /// The segment will not be written again (a newer one is active): its
    /// file no longer needs to stay open.
    pub fn seal(&mut self) {
        self.pin.take();
    }

    pub fn max_timestamp(&self) -> Option<i64> {
        self.max_timestamp
    }

    /// Kafka's `largestTimestamp`: the largest batch timestamp, or the
    /// file's time when the batches carry none; what `retention.ms` counts
    /// from.
    pub fn largest_timestamp(&self) -> i64 {
        match self.max_timestamp {
            Some(ts) if ts >= 0 => ts,
            _ => self.created_ms,
        }
    }

    /// How long this segment has been filling, for `segment.ms`: since its
    /// first batch's timestamp, or since it was created.
    pub fn time_waited_for_roll(&self, now_ms: i64) -> i64 {
        let from = match self.first_batch_timestamp {
            Some(ts) if ts >= 0 => ts,
            _ => self.created_ms,
        };
        now_ms.saturating_sub(from)
    }

    /// What a flush must fsync: the log file if it has unsynced bytes (with
    /// the size to reach) and the index files.
    pub fn unsynced(&self) -> io::Result<Option<(Arc<File>, u64)>> {
        if self.size > self.synced_size {
            Ok(Some((self.handle()?, self.size)))
        } else {
            Ok(None)
        }
    }

    /// Fsyncs the index files (small; rewritten first if a write failed).
    #[cfg(test)]
    pub fn sync_index(&mut self) -> io::Result<()> {
        self.index.sync()
    }

    /// The index files to fsync with the log (see `SegmentIndex`).
    pub fn index_files_to_sync(&mut self) -> io::Result<Vec<Arc<File>>> {
        self.index.files_to_sync()
    }

    pub fn mark_synced(&mut self, size: u64) {
        self.synced_size = self.synced_size.max(size);
    }

    /// Writes this segment's index files into `dir` (a partition move).
    pub fn copy_index_to(&self, dir: &Path) -> io::Result<()> {
        self.index.write_copy(dir, self.base_offset)
    }

    /// Position from which a scan finds the batch containing `offset`.
    pub fn position_for_offset(&self, offset: i64) -> u64 {
        let relative = offset.saturating_sub(self.base_offset);
        let relative = u32::try_from(relative.max(0)).unwrap_or(u32::MAX);
        self.index
            .lookup_offset(relative)
            .map_or(0, |e| u64::from(e.position))
    }

    /// Position from which a scan finds the first batch whose max timestamp
    /// is at or after `timestamp`: every record before it is older.
    pub fn position_for_timestamp(&self, timestamp: i64) -> u64 {
        match self.index.lookup_timestamp(timestamp) {
            Some(relative) => self
                .index
                .lookup_offset(relative)
                .map_or(0, |e| u64::from(e.position)),
            None => 0,
        }
    }

    /// A read handle on the committed bytes, starting at `start`. Fails
    /// only if the file must be opened and cannot be (out of descriptors).
    pub fn view(&self, start: u64) -> io::Result<SegmentView> {
        Ok(SegmentView {
            file: self.handle()?,
            path: self.path.clone(),
            base_offset: self.base_offset,
            start: start.min(self.size),
            end: self.size,
        })
    }

    /// Removes the segment's files. Open handles (readers' views) keep
    /// working on the unlinked file until they are dropped.
    pub fn delete_files(&self) -> io::Result<()> {
        let mut first_error = None;
        for path in [self.path.as_path()].into_iter().chain(self.index.paths()) {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A snapshot of a segment for reading without holding the partition lock:
/// the file handle and the committed end at the time it was taken. Bytes
/// before `end` never change, so positional reads need no lock.
#[derive(Debug)]
pub struct SegmentView {
    file: Arc<File>,
    path: PathBuf,
    base_offset: i64,
    start: u64,
    end: u64,
}

impl SegmentView {
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    fn corrupt(&self, position: u64, what: impl std::fmt::Display) -> StorageError {
        StorageError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is corrupt at position {position}: {what}",
                self.path.display()
            ),
        ))
    }

    fn header_at(
        &self,
        window: &mut FileWindow<'_>,
        pos: u64,
    ) -> Result<BatchHeader, StorageError> {
        let bytes = window
            .get(pos, HEADER_SIZE)?
            .ok_or_else(|| self.corrupt(pos, "truncated batch header"))?;
        let header = BatchHeader::parse(bytes).map_err(|e| self.corrupt(pos, e))?;
        if header.size() as u64 > self.end.saturating_sub(pos) {
            return Err(self.corrupt(pos, "batch runs past the end of the segment"));
        }
        Ok(header)
    }

    /// Where the first batch holding `offset` or a later one starts, and
    /// its size; `None` when every batch of the view ends before `offset`.
    /// Small reads: the index put the view at most about one interval
    /// before it.
    fn first_batch_from(
        &self,
        window: &mut FileWindow<'_>,
        offset: i64,
    ) -> Result<Option<(u64, u64)>, StorageError> {
        let mut first = self.start;
        while first < self.end {
            let header = self.header_at(window, first)?;
            if header.last_offset() >= offset {
                return Ok(Some((first, header.size() as u64)));
            }
            first += header.size() as u64;
        }
        Ok(None)
    }

    /// Whole batches from the one containing `offset`, up to `max_bytes`
    /// (the first one regardless with `min_one_batch`). `None` when every
    /// batch in this view ends before `offset`.
    pub fn read_from_offset(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let Some((first, first_size)) = self.first_batch_from(&mut window, offset)? else {
            return Ok(None);
        };
        let mut want = (max_bytes as u64).min(self.end - first);
        if first_size > want {
            if !min_one_batch {
                return Ok(Some(Vec::new()));
            }
            want = first_size;
        }
        // Read the whole range straight into the result with one positional
        // read, then cut it after the last whole batch.
        let mut records = window.take(first, want as usize)?;
        let mut end = 0usize;
        while records.len() - end >= HEADER_SIZE {
            let header = BatchHeader::parse(&records[end..])
                .map_err(|e| self.corrupt(first + end as u64, e))?;
            if header.size() > records.len() - end {
                break;
            }
            end += header.size();
        }
        records.truncate(end);
        Ok(Some(records))
    }

    /// The batches `read_from_offset` would read, as a range of the file
    /// instead of bytes: only their headers are read.
    pub fn file_records_from_offset(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<FileRecords>, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let Some((first, first_size)) = self.first_batch_from(&mut window, offset)? else {
            return Ok(None);
        };
        let budget = (max_bytes as u64).min(self.end - first);
        let file = Arc::clone(&self.file);
        if first_size > budget && !min_one_batch {
            return Ok(Some(FileRecords::new(file, first, 0)));
        }
        let mut end = first + first_size;
        while end < self.end {
            let next = end + self.header_at(&mut window, end)?.size() as u64;
            if next - first > budget {
                break;
            }
            end = next;
        }
        Ok(Some(FileRecords::new(file, first, (end - first) as usize)))
    }

    /// The first record at or after `timestamp` whose offset is at least
    /// `min_offset`, scanning from the view's start for the first batch whose
    /// max timestamp qualifies.
    pub fn find_timestamp_from(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            if header.max_timestamp >= timestamp && header.last_offset() >= min_offset {
                let bytes = window
                    .get(pos, header.size())?
                    .ok_or_else(|| self.corrupt(pos, "torn batch"))?;
                if let Some(found) =
                    batch::first_record_at_or_after(bytes, &header, timestamp, min_offset)
                {
                    return Ok(Some(found));
                }
            }
            pos += header.size() as u64;
        }
        Ok(None)
    }

    #[cfg(test)]
    pub fn find_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, StorageError> {
        self.find_timestamp_from(timestamp, 0)
    }

    /// The first record carrying `max`, the largest timestamp of this
    /// view's batches.
    pub fn find_max_timestamp(&self, max: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            if header.max_timestamp >= max {
                let bytes = window
                    .get(pos, header.size())?
                    .ok_or_else(|| self.corrupt(pos, "torn batch"))?;
                return Ok(Some(batch::record_with_max_timestamp(bytes, &header)));
            }
            pos += header.size() as u64;
        }
        Ok(None)
    }

    /// Calls `f` with every whole batch of the view, in order, with its
    /// position (the cleaner's and the mover's sequential read).
    pub fn for_each_batch(
        &self,
        mut f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, RECOVERY_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            let bytes = window
                .get(pos, header.size())?
                .ok_or_else(|| self.corrupt(pos, "torn batch"))?;
            f(pos, &header, bytes)?;
            pos += header.size() as u64;
        }
        Ok(())
    }

    /// Calls `f` with every batch header of the view, in order, reading
    /// only the headers (the epoch cache's rebuild).
    pub fn for_each_header(&self, mut f: impl FnMut(&BatchHeader)) -> Result<(), StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            f(&header);
            pos += header.size() as u64;
        }
        Ok(())
    }

    /// Where the first batch holding `offset` or a later one starts (the
    /// view's end if none does): truncating the file there keeps exactly
    /// the batches that end before `offset`.
    pub fn position_of_batch_with(&self, offset: i64) -> Result<u64, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            if header.last_offset() >= offset {
                return Ok(pos);
            }
            pos += header.size() as u64;
        }
        Ok(self.end)
    }

    /// The raw bytes `[from, to)` of the view's file (a partition move
    /// copies segments with it).
    pub fn copy_range(&self, from: u64, to: u64) -> io::Result<Vec<u8>> {
        let to = to.min(self.end);
        read_exact_at_unzeroed(&self.file, to.saturating_sub(from) as usize, from)
    }

    pub fn end(&self) -> u64 {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::prepare_append;
    use super::super::batch::testing::*;
    use super::super::index;
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn unzeroed_reads_are_exact_and_stop_at_the_end_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bytes");
        let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(
            read_exact_at_unzeroed(&file, 70_000, 1234).unwrap(),
            bytes[1234..71_234]
        );
        assert!(read_exact_at_unzeroed(&file, 0, 0).unwrap().is_empty());
        let past = read_exact_at_unzeroed(&file, 10, 99_995).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// Writes `n` single-record batches of `value_len` bytes, with offsets
    /// from 0 and timestamps 1000 + offset, through the segment's bookkeeping.
    fn fill(segment: &mut Segment, n: i64, value_len: usize) {
        for i in 0..n {
            let input = simple_batch(1, value_len, 1000 + i);
            let mut p = prepare_append(&input, 1 << 20, None, false).unwrap();
            let next = segment.next_offset();
            p.assign_offsets(next);
            segment
                .file()
                .unwrap()
                .write_all_at(&p.to_bytes(), segment.size())
                .unwrap();
            segment.push_batch(
                p.stored_len() as u64,
                next,
                next + 1,
                p.batches[0].max_timestamp,
                INDEX_INTERVAL_BYTES,
            );
        }
    }

    #[test]
    fn a_file_range_holds_the_batches_a_read_copies() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        // Small and large batches mixed: a header walk skips more than a
        // read-ahead chunk after the large ones.
        for value_len in [100, 40_000, 300, 300, 20_000, 17_000, 50, 100_000, 10] {
            fill(&mut s, 3, value_len);
        }
        let view = s.view(0).unwrap();
        for offset in 0..=s.next_offset() {
            for max_bytes in [0, 1, 200, 16_000, 60_000, 150_000, 1 << 30] {
                for min_one_batch in [false, true] {
                    let copied = view
                        .read_from_offset(offset, max_bytes, min_one_batch)
                        .unwrap();
                    let ranged = view
                        .file_records_from_offset(offset, max_bytes, min_one_batch)
                        .unwrap()
                        .map(|range| range.read(0, range.len()).unwrap());
                    assert_eq!(ranged, copied, "{offset} {max_bytes} {min_one_batch}");
                }
            }
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name(42), "00000000000000000042.log");
        assert_eq!(parse_file_name("00000000000000000042.log"), Some(42));
        assert_eq!(parse_file_name("42.log"), None);
        assert_eq!(parse_file_name("0000000000000000004x.log"), None);
        assert_eq!(parse_file_name("00000000000000000042.index"), None);
    }

    #[test]
    fn index_is_sparse_and_finds_offsets_and_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 200, 200); // ~270 bytes per batch, ~54 KB
        let entries = s.index.offset_entries().to_vec();
        assert!(entries.len() >= 10, "entries: {}", entries.len());
        assert!(entries.len() <= 14, "entries: {}", entries.len());
        assert_eq!(s.index.time_entries().len(), entries.len());
        for e in &entries {
            // An entry points at the start of the batch with that offset.
            let v = s.view(u64::from(e.position)).unwrap();
            let got = v
                .read_from_offset(i64::from(e.relative_offset), 1, true)
                .unwrap()
                .unwrap();
            assert_eq!(headers(&got)[0].base_offset, i64::from(e.relative_offset));
        }
        // The start position is at most about one interval before the batch.
        for offset in [0, 17, 99, 150, 199] {
            let start = s.position_for_offset(offset);
            let batch_pos = offset as u64 * (s.size() / 200);
            assert!(start <= batch_pos && batch_pos - start < INDEX_INTERVAL_BYTES + 300);
            let got = s
                .view(start)
                .unwrap()
                .read_from_offset(offset, 1, true)
                .unwrap()
                .unwrap();
            assert_eq!(headers(&got)[0].base_offset, offset);
            let ts_start = s.position_for_timestamp(1000 + offset);
            assert!(ts_start <= batch_pos && batch_pos - ts_start < INDEX_INTERVAL_BYTES + 300);
            let found = s
                .view(ts_start)
                .unwrap()
                .find_timestamp(1000 + offset)
                .unwrap();
            assert_eq!(found, Some((offset, 1000 + offset)));
        }
        assert_eq!(s.view(0).unwrap().find_timestamp(5000).unwrap(), None);
        assert_eq!(
            s.view(0).unwrap().read_from_offset(200, 100, true).unwrap(),
            None
        );
        assert_eq!(s.max_timestamp(), Some(1199));
        assert_eq!(
            s.view(s.position_for_timestamp(1199))
                .unwrap()
                .find_max_timestamp(1199)
                .unwrap(),
            Some((199, 1199))
        );
    }

    #[test]
    fn load_trusts_the_index_files_and_reads_only_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 100, 100);
        s.sync_index().unwrap();
        let (size, entries, max, next) = (
            s.size(),
            s.index.offset_entries().to_vec(),
            s.max_timestamp(),
            s.next_offset(),
        );
        drop(s);
        let l = Segment::load(dir.path(), 0).unwrap().unwrap();
        assert_eq!(
            (
                l.size(),
                l.index.offset_entries(),
                l.max_timestamp(),
                l.next_offset()
            ),
            (size, entries.as_slice(), max, next)
        );
        assert_eq!(l.first_batch_timestamp, Some(1000));
        // Appending after a load indexes like appending before it.
        let mut l = l;
        fill(&mut l, 100, 100);
        let mut fresh_dir_segment = {
            let d2 = tempfile::tempdir().unwrap();
            let mut f = Segment::create(d2.path(), 0).unwrap();
            fill(&mut f, 200, 100);
            (f.index.offset_entries().to_vec(), d2)
        };
        assert_eq!(l.index.offset_entries(), fresh_dir_segment.0.as_slice());
        fresh_dir_segment.0.clear();
        drop(l);

        // A torn index file or a missing one: load refuses, recover rebuilds.
        let index_path = dir.path().join(index::offset_index_name(0));
        let mut f = OpenOptions::new().append(true).open(&index_path).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        assert!(Segment::load(dir.path(), 0).unwrap().is_none());
        let (r, truncated) = Segment::recover(dir.path(), 0).unwrap();
        assert_eq!((truncated, r.next_offset()), (0, 200));
        drop(r);
        assert!(Segment::load(dir.path(), 0).unwrap().is_some());
        fs::remove_file(dir.path().join(index::time_index_name(0))).unwrap();
        assert!(Segment::load(dir.path(), 0).unwrap().is_none());
    }

    #[test]
    fn load_refuses_a_bad_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 10, 100);
        s.sync_index().unwrap();
        let path = s.path.clone();
        drop(s);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[0xab; 100])
            .unwrap();
        assert!(Segment::load(dir.path(), 0).unwrap().is_none());
    }

    #[test]
    fn recovery_rebuilds_the_same_index_and_cuts_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 100, 100);
        let (size, entries, max) = (
            s.size(),
            s.index.offset_entries().to_vec(),
            s.max_timestamp(),
        );
        let path = s.path.clone();
        drop(s);
        let (r, truncated) = Segment::recover(dir.path(), 0).unwrap();
        assert_eq!(
            (
                truncated,
                r.size(),
                r.index.offset_entries(),
                r.next_offset()
            ),
            (0, size, entries.as_slice(), 100)
        );
        assert_eq!(r.max_timestamp(), max);
        drop(r);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[0xab; 100])
            .unwrap();
        let (r, truncated) = Segment::recover(dir.path(), 0).unwrap();
        assert_eq!((truncated, r.size(), r.next_offset()), (100, size, 100));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        // The rebuilt index files load.
        drop(r);
        let l = Segment::load(dir.path(), 0).unwrap().unwrap();
        assert_eq!(l.index.offset_entries(), entries.as_slice());
    }

    #[test]
    fn delete_removes_all_three_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 7).unwrap();
        fill(&mut s, 3, 10);
        s.delete_files().unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn recovery_after_a_recovery_point_trusts_what_came_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 100, 100);
        s.sync_index().unwrap();
        let (size, entries, max) = (
            s.size(),
            s.index.offset_entries().to_vec(),
            s.max_timestamp(),
        );
        drop(s);
        // Corrupt a batch early on (before the recovery point) and tear the
        // tail: only the tail is looked at.
        let path = dir.path().join(file_name(0));
        let mut bytes = fs::read(&path).unwrap();
        bytes[100] ^= 0xff;
        bytes.extend_from_slice(&[7; 50]);
        fs::write(&path, &bytes).unwrap();
        let (r, truncated) = Segment::recover_after(dir.path(), 0, Some(60)).unwrap();
        assert_eq!((truncated, r.size(), r.next_offset()), (50, size, 100));
        assert_eq!(r.index.offset_entries(), entries.as_slice());
        assert_eq!(
            (r.max_timestamp(), r.first_batch_timestamp),
            (max, Some(1000))
        );
        drop(r);
        // Without a recovery point the corrupt batch cuts the segment.
        let (r, _) = Segment::recover_after(dir.path(), 0, None).unwrap();
        assert_eq!(r.next_offset(), 0);
    }
}
