//! A segment's two sparse indexes, kept in memory and in Kafka-style files
//! next to its `.log`, so that opening a large log does not need to read it.
//!
//! - `<base>.index`: 8-byte entries `relative offset: u32 | position: u32`
//!   (big endian): the first offset of a batch and where the batch starts.
//! - `<base>.timeindex`: 12-byte entries `timestamp: i64 | relative offset:
//!   u32`: every record with an offset below `base + relative offset` has a
//!   timestamp at or before `timestamp`.
//!
//! Both get an entry at the same points, roughly every `index.interval.bytes`
//! of log (the time index only when the largest timestamp grew since its
//! last entry, so its timestamps strictly increase, as Kafka's do). A lookup
//! is a binary search that puts a scan at most about one interval before the
//! batch it wants.
//!
//! Lookups use the entries in memory, so the files hold no descriptor: new
//! entries are appended to a file when the log is flushed (the file opened
//! for that, written, fsynced and closed), which is also when they must be
//! durable. They are derived data: a file that fails its sanity check when
//! loaded (size not a multiple of the entry, an entry out of order or past
//! the end of the log) is simply rebuilt from the log, and a segment that
//! crash recovery re-validates gets both rebuilt; a segment whose entries
//! were not flushed before a crash lies after the recovery point, so it is
//! re-validated and re-indexed. A write that fails marks the file stale;
//! the next flush rewrites it from memory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const OFFSET_ENTRY_SIZE: usize = 8;
pub const TIME_ENTRY_SIZE: usize = 12;

/// `<base offset, 20 digits>.index`.
pub fn offset_index_name(base_offset: i64) -> String {
    format!("{base_offset:020}.index")
}

/// `<base offset, 20 digits>.timeindex`.
pub fn time_index_name(base_offset: i64) -> String {
    format!("{base_offset:020}.timeindex")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

/// Entries of one index file, in memory and on disk.
#[derive(Debug)]
struct IndexFile<E> {
    path: PathBuf,
    entries: Vec<E>,
    /// How many of `entries` the file holds.
    written: usize,
    /// A write failed: the file no longer matches `entries`.
    stale: bool,
    /// Entries appended since the last fsync.
    dirty: bool,
}

trait Entry: Copy {
    const SIZE: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
}

impl Entry for OffsetEntry {
    const SIZE: usize = OFFSET_ENTRY_SIZE;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

impl Entry for TimeEntry {
    const SIZE: usize = TIME_ENTRY_SIZE;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[..8]);
        TimeEntry {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
}

impl<E: Entry> IndexFile<E> {
    /// An index of no entries whose file is created empty (truncating
    /// what was there).
    fn create(path: PathBuf) -> io::Result<Self> {
        open_file(&path, true)?;
        Ok(IndexFile {
            path,
            entries: Vec::new(),
            written: 0,
            stale: false,
            dirty: true,
        })
    }

    /// Reads the file's entries; `None` if its size is not a whole number
    /// of entries.
    fn read(path: PathBuf) -> io::Result<Option<Self>> {
        let file = super::handles::retrying(|| File::open(&path))?;
        let len = file.metadata()?.len();
        if len % E::SIZE as u64 != 0 {
            return Ok(None);
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0)?;
        let entries: Vec<E> = bytes.chunks_exact(E::SIZE).map(E::decode).collect();
        Ok(Some(IndexFile {
            path,
            written: entries.len(),
            entries,
            stale: false,
            dirty: false,
        }))
    }

    /// Adds an entry in memory; the file gets it at the next flush.
    fn push(&mut self, entry: E) {
        self.entries.push(entry);
        self.dirty = true;
    }

    /// Makes the file hold exactly `entries` (after a rebuild or a failure).
    fn rewrite(&mut self) -> io::Result<File> {
        let file = open_file(&self.path, false)?;
        self.stale = true;
        file.set_len(0)?;
        self.written = 0;
        self.write_pending(&file)?;
        self.dirty = true;
        Ok(file)
    }

    /// Writes the entries the file does not have yet at its end.
    fn write_pending(&mut self, file: &File) -> io::Result<()> {
        let mut bytes = Vec::with_capacity((self.entries.len() - self.written) * E::SIZE);
        for e in &self.entries[self.written..] {
            e.encode(&mut bytes);
        }
        if let Err(e) = file.write_all_at(&bytes, (self.written * E::SIZE) as u64) {
            tracing::warn!(index = %self.path.display(), "index write failed, rewriting it at the next flush: {e}");
            self.stale = true;
            return Err(e);
        }
        self.written = self.entries.len();
        self.stale = false;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        if let Some(file) = self.take_sync()? {
            file.sync_data()?;
        }
        Ok(())
    }

    /// The file to fsync if entries changed since the last call, with the
    /// new entries written (the whole file rewritten if a write failed).
    fn take_sync(&mut self) -> io::Result<Option<Arc<File>>> {
        if !self.dirty && !self.stale {
            return Ok(None);
        }
        let file = if self.stale {
            self.rewrite()?
        } else {
            let file = open_file(&self.path, false)?;
            self.write_pending(&file)?;
            file
        };
        self.dirty = false;
        Ok(Some(Arc::new(file)))
    }

    /// Keeps the first `n` entries.
    fn truncate_entries(&mut self, n: usize) -> io::Result<()> {
        if n < self.entries.len() {
            self.entries.truncate(n);
            self.dirty = true;
        }
        if self.written > n {
            open_file(&self.path, false)?.set_len((n * E::SIZE) as u64)?;
            self.written = n;
        }
        Ok(())
    }
}

/// Opens an index file for writing, creating it if needed.
fn open_file(path: &Path, truncate: bool) -> io::Result<File> {
    super::handles::retrying(|| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(path)
    })
}

/// Both indexes of a segment.
#[derive(Debug)]
pub struct SegmentIndex {
    offsets: IndexFile<OffsetEntry>,
    times: IndexFile<TimeEntry>,
}

impl SegmentIndex {
    /// Empty indexes, truncating whatever files were there.
    pub fn create(dir: &Path, base_offset: i64) -> io::Result<Self> {
        Ok(SegmentIndex {
            offsets: IndexFile::create(dir.join(offset_index_name(base_offset)))?,
            times: IndexFile::create(dir.join(time_index_name(base_offset)))?,
        })
    }

    /// Loads the index files of a segment whose log holds `log_size` bytes.
    /// `None` when either file is missing, torn or inconsistent: the caller
    /// then rebuilds both from the log. Entries at or past the end of the
    /// log (left by a write the log did not keep) are dropped.
    pub fn load(dir: &Path, base_offset: i64, log_size: u64) -> io::Result<Option<Self>> {
        let offsets_path = dir.join(offset_index_name(base_offset));
        let times_path = dir.join(time_index_name(base_offset));
        if !offsets_path.is_file() || !times_path.is_file() {
            return Ok(None);
        }
        let (Some(mut offsets), Some(mut times)) = (
            IndexFile::<OffsetEntry>::read(offsets_path)?,
            IndexFile::<TimeEntry>::read(times_path)?,
        ) else {
            return Ok(None);
        };
        let offset_entries = std::mem::take(&mut offsets.entries);
        let time_entries = std::mem::take(&mut times.entries);
        let ordered = offset_entries
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position)
            && offset_entries.first().is_none_or(|e| e.position > 0)
            && time_entries.windows(2).all(|w| {
                w[0].timestamp < w[1].timestamp && w[0].relative_offset <= w[1].relative_offset
            });
        if !ordered {
            return Ok(None);
        }
        let keep = offset_entries.partition_point(|e| u64::from(e.position) < log_size);
        let last_relative = keep
            .checked_sub(1)
            .map_or(0, |i| offset_entries[i].relative_offset);
        // A time entry names the offset of an offset entry; one beyond the
        // kept offset entries was written for log bytes that are gone.
        let keep_times = time_entries.partition_point(|e| e.relative_offset <= last_relative);
        let time_entries_valid = time_entries[..keep_times].iter().all(|t| {
            offset_entries[..keep]
                .binary_search_by_key(&t.relative_offset, |e| e.relative_offset)
                .is_ok()
        });
        if !time_entries_valid {
            return Ok(None);
        }
        offsets.entries = offset_entries;
        times.entries = time_entries;
        offsets.truncate_entries(keep)?;
        times.truncate_entries(keep_times)?;
        Ok(Some(SegmentIndex { offsets, times }))
    }

    /// Keeps the entries for offsets up to `relative_offset` (those a flush
    /// made durable with their log bytes) and returns the last one kept.
    pub fn retain_up_to(&mut self, relative_offset: u32) -> io::Result<Option<OffsetEntry>> {
        let keep = self
            .offsets
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        self.offsets.truncate_entries(keep)?;
        let last = self.offsets.entries.last().copied();
        let last_relative = last.map_or(0, |e| e.relative_offset);
        let keep_times = if last.is_some() {
            self.times
                .entries
                .partition_point(|t| t.relative_offset <= last_relative)
        } else {
            0
        };
        self.times.truncate_entries(keep_times)?;
        Ok(last)
    }

    /// Adds an entry for the batch starting at `position` with first offset
    /// `relative_offset`; `max_timestamp_before` is the largest timestamp of
    /// every batch before it (`None` for none).
    pub fn push(&mut self, relative_offset: u32, position: u32, max_timestamp_before: Option<i64>) {
        self.offsets.push(OffsetEntry {
            relative_offset,
            position,
        });
        if let Some(ts) = max_timestamp_before {
            if self.times.entries.last().is_none_or(|t| ts > t.timestamp) {
                self.times.push(TimeEntry {
                    timestamp: ts,
                    relative_offset,
                });
            }
        }
    }

    pub fn offset_entries(&self) -> &[OffsetEntry] {
        &self.offsets.entries
    }

    #[cfg(test)]
    pub fn time_entries(&self) -> &[TimeEntry] {
        &self.times.entries
    }

    /// The last offset entry at or before `relative_offset`.
    pub fn lookup_offset(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let e = &self.offsets.entries;
        let i = e.partition_point(|x| x.relative_offset <= relative_offset);
        i.checked_sub(1).map(|i| e[i])
    }

    /// The relative offset from which every record may be at or after
    /// `timestamp`: the entry of the largest indexed timestamp below it.
    pub fn lookup_timestamp(&self, timestamp: i64) -> Option<u32> {
        let e = &self.times.entries;
        let i = e.partition_point(|x| x.timestamp < timestamp);
        i.checked_sub(1).map(|i| e[i].relative_offset)
    }

    /// The largest timestamp recorded in the time index.
    pub fn last_timestamp(&self) -> Option<i64> {
        self.times.entries.last().map(|t| t.timestamp)
    }

    pub fn sync(&mut self) -> io::Result<()> {
        self.offsets.sync()?;
        self.times.sync()
    }

    /// The index files changed since the last call, to fsync outside the
    /// partition's locks.
    pub fn files_to_sync(&mut self) -> io::Result<Vec<Arc<File>>> {
        let mut files = Vec::new();
        files.extend(self.offsets.take_sync()?);
        files.extend(self.times.take_sync()?);
        Ok(files)
    }

    /// Replaces both files' contents with the in-memory entries.
    pub fn rewrite(&mut self) -> io::Result<()> {
        self.offsets.rewrite()?;
        self.times.rewrite()?;
        Ok(())
    }

    /// Writes both indexes' entries as new files in `dir` (a partition
    /// move copies a segment's indexes this way).
    pub fn write_copy(&self, dir: &Path, base_offset: i64) -> io::Result<()> {
        let mut offsets =
            IndexFile::<OffsetEntry>::create(dir.join(offset_index_name(base_offset)))?;
        offsets.entries = self.offsets.entries.clone();
        offsets.sync()?;
        let mut times = IndexFile::<TimeEntry>::create(dir.join(time_index_name(base_offset)))?;
        times.entries = self.times.entries.clone();
        times.sync()
    }

    pub fn paths(&self) -> [&Path; 2] {
        [&self.offsets.path, &self.times.path]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = SegmentIndex::create(dir.path(), 100).unwrap();
        index.push(10, 4096, Some(50));
        index.push(20, 8192, Some(50)); // no new time entry: not larger
        index.push(30, 12288, Some(70));
        index.sync().unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join(offset_index_name(100)))
                .unwrap()
                .len(),
            24
        );
        let loaded = SegmentIndex::load(dir.path(), 100, 20000).unwrap().unwrap();
        assert_eq!(loaded.offset_entries(), index.offset_entries());
        assert_eq!(loaded.time_entries().len(), 2);
        assert_eq!(loaded.lookup_offset(25).unwrap().position, 8192);
        assert_eq!(loaded.lookup_offset(5), None);
        assert_eq!(loaded.lookup_timestamp(50), None);
        assert_eq!(loaded.lookup_timestamp(51), Some(10));
        assert_eq!(loaded.lookup_timestamp(71), Some(30));
        // Entries past the end of the log are dropped, files cut to match.
        let cut = SegmentIndex::load(dir.path(), 100, 9000).unwrap().unwrap();
        assert_eq!(cut.offset_entries().len(), 2);
        assert_eq!(cut.time_entries().len(), 1);
    }

    #[test]
    fn torn_or_disordered_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = SegmentIndex::create(dir.path(), 0).unwrap();
        index.push(10, 4096, Some(5));
        index.sync().unwrap();
        drop(index);
        let path = dir.path().join(offset_index_name(0));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(1);
        std::fs::write(&path, &bytes).unwrap();
        assert!(SegmentIndex::load(dir.path(), 0, 10000).unwrap().is_none());
        // Two entries in the wrong order.
        let mut bad = Vec::new();
        OffsetEntry {
            relative_offset: 9,
            position: 9000,
        }
        .encode(&mut bad);
        OffsetEntry {
            relative_offset: 3,
            position: 4000,
        }
        .encode(&mut bad);
        std::fs::write(&path, &bad).unwrap();
        assert!(SegmentIndex::load(dir.path(), 0, 10000).unwrap().is_none());
        std::fs::remove_file(&path).unwrap();
        assert!(SegmentIndex::load(dir.path(), 0, 10000).unwrap().is_none());
    }
}
