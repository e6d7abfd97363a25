//! A Produce request's records by reference (issue 17): a handler that
//! uses [`ProduceRecords::of`] imports `log.request-records`, and the host
//! then hands it v3+ Produce bodies with every `records` field null and
//! keeps the record bytes itself. The handler asks for each partition's
//! records as a `log.record-set` handle, reads what it looks at (batch
//! headers) through the handle, and appends by handle
//! (`log.append-records-within`): the records are never copied into the
//! guest or back out of it.
//!
//! Records the body does carry (v0-2, rewritten to v3 in the guest; a
//! body the host's walk refused; an older host) are used as they are, so
//! the same handler works either way.

use std::borrow::Cow;

use bytes::Bytes;

use crate::log::{self, AppendResult, RecordSet};

/// Bytes a handler can look into, wherever they are.
pub trait RecordBytes {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// Up to `len` bytes from `offset` (fewer at the end, none past it).
    fn read(&self, offset: usize, len: usize) -> Cow<'_, [u8]>;
}

impl RecordBytes for [u8] {
    fn size(&self) -> usize {
        self.len()
    }

    fn read(&self, offset: usize, len: usize) -> Cow<'_, [u8]> {
        let start = offset.min(self.len());
        let end = start.saturating_add(len).min(self.len());
        Cow::Borrowed(&self[start..end])
    }
}

/// One partition's records: in the request body, or held by the host.
pub enum ProduceRecords<'a> {
    Inline(&'a [u8]),
    Held { set: RecordSet, size: usize },
}

impl<'a> ProduceRecords<'a> {
    /// The records of partition `partition_index` of topic `topic_index`
    /// (positions in the request's arrays): the bytes the body carries,
    /// else the host's. None: null records.
    pub fn of(
        topic_index: usize,
        partition_index: usize,
        inline: Option<&'a Bytes>,
    ) -> Option<Self> {
        if let Some(bytes) = inline {
            return Some(Self::Inline(bytes.as_ref()));
        }
        let topic = u32::try_from(topic_index).ok()?;
        let partition = u32::try_from(partition_index).ok()?;
        let set = held(topic, partition)?;
        let size = set.size() as usize;
        Some(Self::Held { set, size })
    }

    /// Appends them (`log.append-within`), by handle when the host holds
    /// them.
    pub fn append_within(
        &self,
        topic: &str,
        partition: i32,
        required_acks: i16,
        timeout_ms: i32,
    ) -> AppendResult {
        match self {
            Self::Inline(bytes) => {
                log::append_within(topic, partition, bytes, required_acks, timeout_ms)
            }
            Self::Held { set, .. } => {
                log::append_records_within(topic, partition, set, required_acks, timeout_ms)
            }
        }
    }
}

impl RecordBytes for ProduceRecords<'_> {
    fn size(&self) -> usize {
        match self {
            Self::Inline(bytes) => bytes.len(),
            Self::Held { size, .. } => *size,
        }
    }

    fn read(&self, offset: usize, len: usize) -> Cow<'_, [u8]> {
        match self {
            Self::Inline(bytes) => bytes.read(offset, len),
            Self::Held { set, size } => {
                if offset >= *size || len == 0 {
                    return Cow::Borrowed(&[]);
                }
                let offset = u32::try_from(offset).unwrap_or(u32::MAX);
                let len = u32::try_from(len).unwrap_or(u32::MAX);
                Cow::Owned(set.read(offset, len))
            }
        }
    }
}

/// The host's records of a partition of the request being handled.
#[cfg(target_arch = "wasm32")]
fn held(topic: u32, partition: u32) -> Option<RecordSet> {
    log::request_records(topic, partition)
}

/// Natively (unit tests) there is no host: records are only inline.
#[cfg(not(target_arch = "wasm32"))]
fn held(_topic: u32, _partition: u32) -> Option<RecordSet> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_records_read_within_bounds() {
        let bytes = Bytes::from_static(b"abcdef");
        let records = ProduceRecords::of(0, 0, Some(&bytes)).expect("inline");
        assert_eq!(records.size(), 6);
        assert_eq!(&*records.read(2, 3), b"cde");
        assert_eq!(&*records.read(4, 100), b"ef");
        assert!(records.read(7, 1).is_empty());
        assert!(records.read(usize::MAX, usize::MAX).is_empty());
        assert!(ProduceRecords::of(0, 0, None).is_none(), "no host natively");
    }
}
