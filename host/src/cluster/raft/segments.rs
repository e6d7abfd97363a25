//! The raft log on disk: append-only segment files of CRC-framed records.
//!
//! Kafka keeps `__cluster_metadata` as log segments, and so do we, in a
//! simpler shape: a segment `<first index, 20 digits>.log` holds the records
//! of consecutive log entries, each `[length u32 LE][crc32c u32 LE][bytes]`.
//! An append is written and fsynced before it is acknowledged; a new
//! segment is started once the active one passed `segment_bytes`, so a
//! purge (after a snapshot) deletes whole files and the log stays bounded.
//!
//! A crash can leave a torn record at the tail (the write was never
//! acknowledged): on open the log is cut at the last record whose CRC
//! checks, with a warning, and whatever followed is dropped. Anything else
//! that does not add up (a gap between segments) is an error, never guessed
//! around. This layer only frames bytes; [`super::log_store`] decodes them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A record longer than this is garbage (a torn length), not an entry.
const MAX_RECORD: usize = 64 << 20;
const HEADER: usize = 8;

/// One segment file: where each of its records starts.
#[derive(Debug)]
struct Segment {
    base: u64,
    path: PathBuf,
    offsets: Vec<u64>,
    end: u64,
}

impl Segment {
    fn next_index(&self) -> u64 {
        self.base + self.offsets.len() as u64
    }
}

/// The segment files of one log directory, in index order.
#[derive(Debug)]
pub struct SegmentLog {
    dir: PathBuf,
    segment_bytes: u64,
    segments: Vec<Segment>,
    /// The last segment, open for appends (opened lazily).
    active: Option<File>,
}

fn segment_name(base: u64) -> String {
    format!("{base:020}.log")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The records of `bytes` that check, and the offset where they end.
fn scan(bytes: &[u8]) -> (Vec<(u64, &[u8])>, u64) {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = bytes.get(pos..pos + HEADER) {
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if len > MAX_RECORD {
            break;
        }
        let Some(body) = bytes.get(pos + HEADER..pos + HEADER + len) else {
            break;
        };
        if crc32c::crc32c(body) != crc {
            break;
        }
        records.push((pos as u64, body));
        pos += HEADER + len;
    }
    (records, pos as u64)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl SegmentLog {
    /// Opens (creating) the log in `dir`; returns it with every record as
    /// `(index, bytes)`, in order. A torn tail is cut off (with a warning).
    pub fn open(dir: &Path, segment_bytes: u64) -> io::Result<(Self, Vec<(u64, Vec<u8>)>)> {
        crate::durable::create_dir(dir)?;
        let mut found = Vec::new();
        for item in fs::read_dir(dir)? {
            let item = item?;
            if let Some(base) = item.file_name().to_str().and_then(parse_segment_name) {
                found.push((base, item.path()));
            }
        }
        found.sort();
        let mut log = Self {
            dir: dir.to_path_buf(),
            segment_bytes: segment_bytes.max(1),
            segments: Vec::new(),
            active: None,
        };
        let mut records = Vec::new();
        let mut torn = false;
        for (base, path) in found {
            if torn {
                tracing::warn!(path = %path.display(), "metadata log: dropping a segment after a torn record");
                fs::remove_file(&path)?;
                continue;
            }
            if let Some(previous) = log.segments.last() {
                if previous.next_index() != base {
                    return Err(invalid(format!(
                        "{}: segment starts at index {base}, the one before ends at {}",
                        path.display(),
                        previous.next_index()
                    )));
                }
            }
            let bytes = fs::read(&path)?;
            let (valid, end) = scan(&bytes);
            if end < bytes.len() as u64 {
                tracing::warn!(
                    path = %path.display(),
                    offset = end,
                    dropped = bytes.len() as u64 - end,
                    "metadata log: torn record at the tail, truncating to the last valid CRC"
                );
                let file = OpenOptions::new().write(true).open(&path)?;
                file.set_len(end)?;
                file.sync_all()?;
                torn = true;
            }
            if valid.is_empty() {
                fs::remove_file(&path)?;
                continue;
            }
            let mut offsets = Vec::with_capacity(valid.len());
            for (index, (offset, body)) in (base..).zip(valid) {
                offsets.push(offset);
                records.push((index, body.to_vec()));
            }
            log.segments.push(Segment {
                base,
                path,
                offsets,
                end,
            });
        }
        sync_dir(dir)?;
        Ok((log, records))
    }

    /// The index the next append must start at, if the log has records.
    pub fn next_index(&self) -> Option<u64> {
        self.segments.last().map(Segment::next_index)
    }

    /// Appends the records of entries `first..`; durable on return.
    pub fn append(&mut self, first: u64, records: &[Vec<u8>]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if let Some(next) = self.next_index() {
            if next != first {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("metadata log: append at index {first}, the log ends at {next}"),
                ));
            }
        }
        let roll = self
            .segments
            .last()
            .is_none_or(|last| last.end >= self.segment_bytes);
        if roll {
            let path = self.dir.join(segment_name(first));
            let file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&path)?;
            sync_dir(&self.dir)?;
            self.segments.push(Segment {
                base: first,
                path,
                offsets: Vec::new(),
                end: 0,
            });
            self.active = Some(file);
        }
        let Some(segment) = self.segments.last_mut() else {
            return Err(io::Error::other("metadata log: no active segment"));
        };
        let file = match self.active.take() {
            Some(file) => file,
            None => OpenOptions::new().append(true).open(&segment.path)?,
        };
        let mut buffer = Vec::new();
        let mut offsets = Vec::with_capacity(records.len());
        for record in records {
            let len = u32::try_from(record.len())
                .ok()
                .filter(|len| *len as usize <= MAX_RECORD)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "metadata log: record too large",
                    )
                })?;
            offsets.push(segment.end + buffer.len() as u64);
            buffer.extend_from_slice(&len.to_le_bytes());
            buffer.extend_from_slice(&crc32c::crc32c(record).to_le_bytes());
            buffer.extend_from_slice(record);
        }
        let written = (&file).write_all(&buffer).and_then(|()| file.sync_data());
        if let Err(error) = written {
            // Cut what may have been written, so the next append does not
            // land after garbage; the engine stops on the error anyway.
            let _ = file.set_len(segment.end);
            return Err(error);
        }
        segment.end += buffer.len() as u64;
        segment.offsets.extend(offsets);
        self.active = Some(file);
        Ok(())
    }

    /// Removes the entries from `index` on (a conflicting tail).
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        self.active = None;
        while let Some(last) = self.segments.last_mut() {
            if last.base >= index {
                fs::remove_file(&last.path)?;
                self.segments.pop();
                continue;
            }
            if let Some(&offset) = last.offsets.get((index - last.base) as usize) {
                let file = OpenOptions::new().write(true).open(&last.path)?;
                file.set_len(offset)?;
                file.sync_all()?;
                last.offsets.truncate((index - last.base) as usize);
                last.end = offset;
            }
            break;
        }
        sync_dir(&self.dir)
    }

    /// Deletes the segments whose entries are all at or below `upto`.
    pub fn purge(&mut self, upto: u64) -> io::Result<()> {
        let whole = self
            .segments
            .iter()
            .take_while(|segment| segment.next_index() <= upto + 1)
            .count();
        if whole == 0 {
            return Ok(());
        }
        if whole == self.segments.len() {
            self.active = None;
        }
        for segment in self.segments.drain(..whole) {
            fs::remove_file(&segment.path)?;
        }
        sync_dir(&self.dir)
    }

    /// The number of segment files.
    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(log: &Path) -> Vec<(u64, Vec<u8>)> {
        SegmentLog::open(log, 64).unwrap().1
    }

    #[test]
    fn appends_roll_truncate_and_purge() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, found) = SegmentLog::open(dir.path(), 64).unwrap();
        assert!(found.is_empty() && log.next_index().is_none());
        for index in 1..=10u64 {
            log.append(index, &[format!("entry {index:02} ......").into_bytes()])
                .unwrap();
        }
        assert!(log.segment_count() > 2);
        assert!(log.append(12, &[b"gap".to_vec()]).is_err());
        let found = records(dir.path());
        assert_eq!(found.len(), 10);
        assert_eq!(found[9], (10, b"entry 10 ......".to_vec()));

        log.truncate(7).unwrap();
        log.append(7, &[b"seven again".to_vec()]).unwrap();
        let found = records(dir.path());
        assert_eq!(found.last().unwrap(), &(7, b"seven again".to_vec()));

        let before = log.segment_count();
        log.purge(5).unwrap();
        assert!(log.segment_count() < before);
        let found = records(dir.path());
        assert!(found[0].0 > 1 && found[0].0 <= 6);
        // A purge beyond the end (a snapshot installed) empties the log.
        log.purge(20).unwrap();
        assert_eq!(log.segment_count(), 0);
        log.append(21, &[b"after snapshot".to_vec()]).unwrap();
        assert_eq!(records(dir.path()), vec![(21, b"after snapshot".to_vec())]);
    }

    #[test]
    fn a_torn_tail_is_cut_at_the_last_valid_record() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = SegmentLog::open(dir.path(), 1 << 20).unwrap();
        log.append(1, &[b"one".to_vec(), b"two".to_vec(), b"three".to_vec()])
            .unwrap();
        drop(log);
        let path = dir.path().join(segment_name(1));
        let len = fs::metadata(&path).unwrap().len();
        // A torn write: the last record lost its last byte.
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
        let (mut log, found) = SegmentLog::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(found, vec![(1, b"one".to_vec()), (2, b"two".to_vec())]);
        log.append(3, &[b"three again".to_vec()]).unwrap();
        // Garbage after the last record (a torn header) is cut too.
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[7, 0, 0])
            .unwrap();
        let found = records(dir.path());
        assert_eq!(found.len(), 3);
        assert_eq!(found[2], (3, b"three again".to_vec()));
        // A flipped bit fails the CRC: that record and what follows go.
        let mut bytes = fs::read(&path).unwrap();
        bytes[HEADER + 1] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(records(dir.path()).is_empty());
    }
}
