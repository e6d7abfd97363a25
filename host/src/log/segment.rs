//! One log segment: a `<base-offset>.log` file of record batches plus its
//! sparse in-memory index.
//!
//! The file holds batches back to back, exactly as they were appended. The
//! index has an entry roughly every [`INDEX_INTERVAL_BYTES`] of log (Kafka's
//! `index.interval.bytes`): the base offset and file position of a batch and
//! the largest batch timestamp seen *before* that position. Offsets and
//! running-max timestamps both grow along the file, so one binary search
//! finds where to start scanning for an offset or for a timestamp, and a scan
//! reads at most about one interval of headers before it reaches the batch it
//! wants. The index is rebuilt from the file whenever the segment is opened
//! (recovery validates every batch anyway); writing it to disk is a later
//! optimisation for very large logs.
//!
//! Positions are stored as `u32` and offsets relative to the segment's base
//! as `u32` (16 bytes per entry): the partition rolls before a segment
//! could outgrow either, as Kafka does with its 32-bit index entries.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{self, BatchHeader, HEADER_SIZE};
use super::StorageError;

/// Bytes of log between two index entries.
pub const INDEX_INTERVAL_BYTES: u64 = 4096;
/// Largest segment the index can address; `segment.bytes` is capped here.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;
/// Largest offset span (last offset - base offset) of one segment.
pub const MAX_RELATIVE_OFFSET: i64 = i32::MAX as i64;

/// How much recovery reads at a time.
const RECOVERY_CHUNK: usize = 1 << 20;
/// Read-ahead when scanning batch headers (fetch, timestamp lookups).
const SCAN_CHUNK: usize = 16 * 1024;

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

#[derive(Clone, Copy, Debug)]
struct IndexEntry {
    relative_offset: u32,
    position: u32,
    max_timestamp_before: i64,
}

/// The largest batch timestamp of a segment and where that batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxTimestamp {
    pub timestamp: i64,
    pub batch_position: u64,
}

/// A segment's file and in-memory bookkeeping. Owned by the partition's
/// state; file I/O goes through [`SegmentView`]s taken from it.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    path: PathBuf,
    file: Arc<File>,
    /// Bytes of whole, valid batches (the committed end of the file).
    size: u64,
    /// Bytes known to be fsynced.
    synced_size: u64,
    next_offset: i64,
    index: Vec<IndexEntry>,
    bytes_since_index: u64,
    max_timestamp: Option<MaxTimestamp>,
}

impl Segment {
    fn with_file(path: PathBuf, base_offset: i64, file: File) -> Segment {
        Segment {
            base_offset,
            path,
            file: Arc::new(file),
            size: 0,
            synced_size: 0,
            next_offset: base_offset,
            index: Vec::new(),
            bytes_since_index: 0,
            max_timestamp: None,
        }
    }

    /// Creates a new, empty segment file in `dir`.
    pub fn create(dir: &Path, base_offset: i64) -> io::Result<Segment> {
        let path = dir.join(file_name(base_offset));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Segment::with_file(path, base_offset, file))
    }

    /// Opens an existing segment, validating every batch and rebuilding the
    /// index. A torn or corrupt tail — a batch that runs past the end of the
    /// file, a bad header or CRC, offsets that do not increase — is truncated
    /// away. Returns the segment and how many bytes were truncated.
    pub fn recover(path: &Path, base_offset: i64) -> io::Result<(Segment, u64)> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        let mut segment = Segment::with_file(path.to_path_buf(), base_offset, file);
        let file = Arc::clone(&segment.file);
        let mut window = FileWindow::new(&file, len, RECOVERY_CHUNK);
        let mut pos = 0u64;
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
            segment.file.set_len(pos)?;
            segment.file.sync_all()?;
        }
        Ok((segment, truncated))
    }

    /// Books a batch just written at the end of the file (or found there by
    /// recovery): size, next offset, index entry, max timestamp.
    pub fn push_batch(
        &mut self,
        size: u64,
        base_offset: i64,
        next_offset: i64,
        max_timestamp: i64,
    ) {
        let position = self.size;
        if position > 0 && self.bytes_since_index >= INDEX_INTERVAL_BYTES {
            // An entry that cannot be represented is skipped: reads then
            // just scan from an earlier entry.
            if let (Ok(relative_offset), Ok(pos32)) = (
                u32::try_from(base_offset - self.base_offset),
                u32::try_from(position),
            ) {
                self.index.push(IndexEntry {
                    relative_offset,
                    position: pos32,
                    max_timestamp_before: self.max_timestamp.map_or(i64::MIN, |m| m.timestamp),
                });
                self.bytes_since_index = 0;
            }
        }
        self.bytes_since_index += size;
        if self
            .max_timestamp
            .is_none_or(|m| max_timestamp > m.timestamp)
        {
            self.max_timestamp = Some(MaxTimestamp {
                timestamp: max_timestamp,
                batch_position: position,
            });
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

    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    pub fn max_timestamp(&self) -> Option<MaxTimestamp> {
        self.max_timestamp
    }

    /// Bytes written but not yet fsynced, as `(file, size to reach)`.
    pub fn unsynced(&self) -> Option<(Arc<File>, u64)> {
        (self.size > self.synced_size).then(|| (self.file(), self.size))
    }

    pub fn mark_synced(&mut self, size: u64) {
        self.synced_size = self.synced_size.max(size);
    }

    /// Position from which a scan finds the batch containing `offset`.
    pub fn position_for_offset(&self, offset: i64) -> u64 {
        let i = self
            .index
            .partition_point(|e| self.base_offset + i64::from(e.relative_offset) <= offset);
        if i == 0 {
            0
        } else {
            u64::from(self.index[i - 1].position)
        }
    }

    /// Position from which a scan finds the first batch whose max timestamp
    /// is at or after `timestamp`: every batch before it is older.
    pub fn position_for_timestamp(&self, timestamp: i64) -> u64 {
        let i = self
            .index
            .partition_point(|e| e.max_timestamp_before < timestamp);
        if i == 0 {
            0
        } else {
            u64::from(self.index[i - 1].position)
        }
    }

    /// A read handle on the committed bytes, starting at `start`.
    pub fn view(&self, start: u64) -> SegmentView {
        SegmentView {
            file: self.file(),
            path: self.path.clone(),
            base_offset: self.base_offset,
            start: start.min(self.size),
            end: self.size,
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

    /// Whole batches from the one containing `offset`, up to `max_bytes`
    /// (the first one regardless with `min_one_batch`). `None` when every
    /// batch in this view ends before `offset`.
    pub fn read_from_offset(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        // Find the first batch with small reads: the index put us at most
        // about one interval before it.
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut first = self.start;
        let first_size = loop {
            if first >= self.end {
                return Ok(None);
            }
            let header = self.header_at(&mut window, first)?;
            if header.last_offset() >= offset {
                break header.size() as u64;
            }
            first += header.size() as u64;
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

    /// The first record at or after `timestamp` in this view, scanning from
    /// its start for the first batch whose max timestamp qualifies.
    pub fn find_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let mut pos = self.start;
        while pos < self.end {
            let header = self.header_at(&mut window, pos)?;
            if header.max_timestamp >= timestamp {
                let bytes = window
                    .get(pos, header.size())?
                    .ok_or_else(|| self.corrupt(pos, "torn batch"))?;
                return Ok(Some(batch::first_record_at_or_after(
                    bytes, &header, timestamp,
                )));
            }
            pos += header.size() as u64;
        }
        Ok(None)
    }

    /// The record holding the max timestamp of the batch at `position`.
    pub fn max_timestamp_at(&self, position: u64) -> Result<(i64, i64), StorageError> {
        let mut window = FileWindow::new(&self.file, self.end, SCAN_CHUNK);
        let header = self.header_at(&mut window, position)?;
        let bytes = window
            .get(position, header.size())?
            .ok_or_else(|| self.corrupt(position, "torn batch"))?;
        Ok(batch::record_with_max_timestamp(bytes, &header))
    }
}

/// Buffered positional reads over `[0, limit)` of a file: scans of many small
/// headers cost one `read_at` per chunk rather than one per header.
struct FileWindow<'a> {
    file: &'a File,
    limit: u64,
    chunk: usize,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> FileWindow<'a> {
    fn new(file: &'a File, limit: u64, chunk: usize) -> FileWindow<'a> {
        FileWindow {
            file,
            limit,
            chunk,
            start: 0,
            buf: Vec::new(),
        }
    }

    fn covers(&self, pos: u64, end: u64) -> bool {
        pos >= self.start && end <= self.start + self.buf.len() as u64
    }

    /// `len` bytes at `pos`, or `None` if they extend past the limit.
    fn get(&mut self, pos: u64, len: usize) -> io::Result<Option<&[u8]>> {
        let end = match pos.checked_add(len as u64) {
            Some(end) if end <= self.limit => end,
            _ => return Ok(None),
        };
        if !self.covers(pos, end) {
            let want = (len.max(self.chunk) as u64).min(self.limit - pos) as usize;
            self.buf.clear();
            self.buf.resize(want, 0);
            if let Err(e) = self.file.read_exact_at(&mut self.buf, pos) {
                self.buf.clear();
                return Err(e);
            }
            self.start = pos;
        }
        let off = (pos - self.start) as usize;
        Ok(Some(&self.buf[off..off + len]))
    }

    /// A copy of `len` bytes at `pos`, from the buffer when it has them.
    fn take(&mut self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        if self.covers(pos, pos + len as u64) {
            let off = (pos - self.start) as usize;
            return Ok(self.buf[off..off + len].to_vec());
        }
        let mut out = vec![0; len];
        self.file.read_exact_at(&mut out, pos)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::prepare_append;
    use super::super::batch::testing::*;
    use super::*;
    use std::io::Write;

    /// Writes `n` single-record batches of `value_len` bytes, with offsets
    /// from 0 and timestamps 1000 + offset, through the segment's bookkeeping.
    fn fill(segment: &mut Segment, n: i64, value_len: usize) {
        for i in 0..n {
            let mut p =
                prepare_append(&simple_batch(1, value_len, 1000 + i), 1 << 20, None).unwrap();
            let next = segment.next_offset();
            p.assign_offsets(next);
            segment.file.write_all_at(&p.buf, segment.size()).unwrap();
            segment.push_batch(
                p.buf.len() as u64,
                next,
                next + 1,
                p.batches[0].max_timestamp,
            );
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
        assert!(s.index.len() >= 10, "entries: {}", s.index.len());
        assert!(s.index.len() <= 14, "entries: {}", s.index.len());
        for e in &s.index {
            // An entry points at the start of the batch with that offset.
            let v = s.view(u64::from(e.position));
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
                .read_from_offset(offset, 1, true)
                .unwrap()
                .unwrap();
            assert_eq!(headers(&got)[0].base_offset, offset);
            let ts_start = s.position_for_timestamp(1000 + offset);
            assert!(ts_start <= batch_pos && batch_pos - ts_start < INDEX_INTERVAL_BYTES + 300);
            let found = s.view(ts_start).find_timestamp(1000 + offset).unwrap();
            assert_eq!(found, Some((offset, 1000 + offset)));
        }
        assert_eq!(s.view(0).find_timestamp(5000).unwrap(), None);
        assert_eq!(s.view(0).read_from_offset(200, 100, true).unwrap(), None);
    }

    #[test]
    fn recovery_rebuilds_the_same_index_and_cuts_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Segment::create(dir.path(), 0).unwrap();
        fill(&mut s, 100, 100);
        let (size, index_len, max) = (s.size(), s.index.len(), s.max_timestamp());
        let path = s.path.clone();
        drop(s);
        let (r, truncated) = Segment::recover(&path, 0).unwrap();
        assert_eq!(
            (truncated, r.size(), r.index.len(), r.next_offset()),
            (0, size, index_len, 100)
        );
        assert_eq!(r.max_timestamp(), max);
        drop(r);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[0xab; 100])
            .unwrap();
        let (r, truncated) = Segment::recover(&path, 0).unwrap();
        assert_eq!((truncated, r.size(), r.next_offset()), (100, size, 100));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    }
}
