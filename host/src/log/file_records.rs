//! Record batches a fetch answers with, held where they are: a range of a
//! segment file, or bytes in memory (a produce request's records, a
//! down-converted set, none). A consumer's fetch leaves the broker from
//! the file (`sendfile` on a plain listener, see `network::transport`),
//! as Kafka's `FileRecords.writeTo` does, instead of being read into a
//! fresh buffer first: the copy, the page faults and the kernel's zeroing
//! of that buffer were a third of the broker's CPU for a large consumer.
//!
//! A range is whole batches below the segment's committed end when it is
//! taken, and those bytes do not change afterwards: appends go after
//! them, retention and compaction unlink the file (the open handle keeps
//! the bytes). Only a follower's truncation shrinks a file under a reader;
//! the write then finds the file short and the connection is closed, as
//! Kafka closes it when `FileRecords` was truncated during a write.

use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::batch::{BatchHeader, HEADER_SIZE};
use super::positional::{read_exact_at_unzeroed, FileWindow, SCAN_CHUNK};
use super::producer_state::{self, ProducerBatch};

/// `len` bytes of a segment file at `position`: whole record batches.
#[derive(Debug, Clone)]
pub struct FileRecords {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl FileRecords {
    pub(crate) fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        Self {
            file,
            position,
            len,
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where the range starts in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Up to `len` bytes from `offset` within the range.
    pub fn read(&self, offset: usize, len: usize) -> io::Result<Vec<u8>> {
        let start = offset.min(self.len);
        let len = len.min(self.len - start);
        read_exact_at_unzeroed(&self.file, len, self.position + start as u64)
    }

    /// Calls `f` with each batch's position in the range and its header,
    /// reading only the headers, until `f` says stop.
    fn walk_headers(&self, mut f: impl FnMut(usize, &BatchHeader) -> Walk) -> io::Result<()> {
        let limit = self.position + self.len as u64;
        let mut window = FileWindow::new(&self.file, limit, SCAN_CHUNK);
        let mut at = self.position;
        while let Some(bytes) = window.get(at, HEADER_SIZE)? {
            let header = BatchHeader::parse(bytes)
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
            if f((at - self.position) as usize, &header) == Walk::Stop {
                break;
            }
            at += header.size() as u64;
        }
        Ok(())
    }

    /// The first `keep` bytes of the batches whose base offset is below
    /// `end`, and the offset after the last of them (-1 if none).
    fn batches_before(&self, end: i64) -> io::Result<(usize, i64)> {
        let (mut keep, mut next_offset) = (0, -1);
        self.walk_headers(|at, header| {
            if header.base_offset >= end {
                return Walk::Stop;
            }
            keep = (at + header.size()).min(self.len);
            next_offset = header.next_offset();
            Walk::On
        })?;
        Ok((keep, next_offset))
    }
}

#[derive(PartialEq, Eq)]
enum Walk {
    On,
    Stop,
}

/// Record batches as a fetch holds them until they are written.
#[derive(Debug, Clone)]
pub enum Records {
    /// In memory.
    Memory(Bytes),
    /// A range of a segment file.
    File(FileRecords),
}

impl Default for Records {
    fn default() -> Self {
        Records::Memory(Bytes::new())
    }
}

impl From<Vec<u8>> for Records {
    fn from(bytes: Vec<u8>) -> Self {
        Records::Memory(Bytes::from(bytes))
    }
}

impl From<Bytes> for Records {
    fn from(bytes: Bytes) -> Self {
        Records::Memory(bytes)
    }
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Memory(bytes) => bytes.len(),
            Records::File(file) => file.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Up to `len` bytes from `offset` (fewer at the end).
    pub fn read(&self, offset: usize, len: usize) -> io::Result<Vec<u8>> {
        match self {
            Records::Memory(bytes) => {
                let start = offset.min(bytes.len());
                let end = start.saturating_add(len).min(bytes.len());
                Ok(bytes[start..end].to_vec())
            }
            Records::File(file) => file.read(offset, len),
        }
    }

    /// Every byte, in memory: shared when it already is, read from the
    /// file otherwise.
    pub fn load(&self) -> io::Result<Bytes> {
        match self {
            Records::Memory(bytes) => Ok(bytes.clone()),
            Records::File(file) => file.read(0, file.len).map(Bytes::from),
        }
    }

    /// The producer headers of the batches, reading from a segment file
    /// only the headers and the (small) control batches: a partition's
    /// producer state is rebuilt from its whole log.
    pub fn producer_batches(&self) -> io::Result<Vec<ProducerBatch>> {
        let file = match self {
            Records::Memory(bytes) => {
                return producer_state::producer_batches(bytes).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "not whole record batches")
                })
            }
            Records::File(file) => file,
        };
        let mut headers = Vec::new();
        file.walk_headers(|at, header| {
            headers.push((at, *header));
            Walk::On
        })?;
        let mut out = Vec::with_capacity(headers.len());
        for (at, header) in headers {
            let batch = if header.is_control() {
                file.read(at, header.size())?
            } else {
                Vec::new()
            };
            out.push(ProducerBatch::of(&header, &batch));
        }
        Ok(out)
    }

    /// Keeps only the batches whose base offset is below `end` (a fetch
    /// stops at the high watermark, read_committed at the last stable
    /// offset). Returns the offset after the last batch kept, -1 if none.
    pub fn keep_batches_before(&mut self, end: i64) -> io::Result<i64> {
        let (keep, next_offset) = match self {
            Records::Memory(bytes) => producer_state::batches_before(bytes, end),
            Records::File(file) => file.batches_before(end)?,
        };
        match self {
            Records::Memory(bytes) => bytes.truncate(keep),
            Records::File(file) => file.len = keep,
        }
        Ok(next_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::simple_batch;
    use std::io::Write;

    /// A batch of `count` records whose first offset is `base`.
    fn batch_with_offsets(base: i64, count: usize) -> Vec<u8> {
        let mut batch = simple_batch(count, 10, 1_000);
        batch[..8].copy_from_slice(&base.to_be_bytes());
        batch
    }

    /// Three batches at offsets 0-1, 2-4 and 5 in a file after `gap`
    /// bytes of something else, and the bytes of the batches.
    fn three_batches(gap: usize) -> (Arc<File>, Vec<u8>) {
        let mut bytes = Vec::new();
        for (base, count) in [(0, 2), (2, 3), (5, 1)] {
            bytes.extend(batch_with_offsets(base, count));
        }
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![7u8; gap]).unwrap();
        file.write_all(&bytes).unwrap();
        (Arc::new(file), bytes)
    }

    #[test]
    fn a_file_range_and_its_bytes_in_memory_cut_and_read_alike() {
        for gap in [0, 10, 70_000] {
            let (file, bytes) = three_batches(gap);
            for end in [-1, 0, 1, 2, 3, 5, 6, 100] {
                let mut in_file =
                    Records::File(FileRecords::new(Arc::clone(&file), gap as u64, bytes.len()));
                let mut in_memory = Records::from(bytes.clone());
                let next_file = in_file.keep_batches_before(end).unwrap();
                let next_memory = in_memory.keep_batches_before(end).unwrap();
                assert_eq!(next_file, next_memory, "end {end}");
                assert_eq!(in_file.len(), in_memory.len(), "end {end}");
                assert_eq!(in_file.load().unwrap(), in_memory.load().unwrap());
                assert_eq!(in_file.read(3, 50).unwrap(), in_memory.read(3, 50).unwrap());
            }
        }
    }

    #[test]
    fn reads_past_the_end_are_short_and_a_shrunk_file_fails() {
        let (file, bytes) = three_batches(5);
        let records = Records::File(FileRecords::new(Arc::clone(&file), 5, bytes.len()));
        assert_eq!(records.read(bytes.len() - 2, 10).unwrap().len(), 2);
        assert!(records.read(bytes.len() + 1, 10).unwrap().is_empty());
        file.set_len(20).unwrap();
        assert_eq!(
            records.load().unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn headers_read_from_a_file_are_those_parsed_from_its_bytes() {
        use crate::log::batch::testing::simple_batch;
        use crate::log::control::end_transaction_marker;
        use std::io::Write;
        let mut bytes = simple_batch(3, 20_000, 1_000);
        bytes.extend(end_transaction_marker(7, 1, false, 4, 2_000));
        bytes.extend(simple_batch(2, 10, 3_000));
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"before").unwrap();
        file.write_all(&bytes).unwrap();
        let in_file = Records::File(FileRecords::new(Arc::new(file), 6, bytes.len()));
        let from_file = in_file.producer_batches().unwrap();
        assert_eq!(
            Some(from_file.clone()),
            producer_state::producer_batches(&bytes)
        );
        assert_eq!(
            from_file[1].marker,
            Some(crate::log::control::ControlType::Abort)
        );
        assert_eq!(from_file[1].coordinator_epoch, 4);
    }
}
