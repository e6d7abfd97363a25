//! Keyed records the host writes and reads back itself: the coordinators'
//! state in their internal topics (`__consumer_offsets`), a batch of key /
//! value pairs per append and a scan of what a read returned.
//!
//! Written batches are plain v2 batches without a producer (like Kafka's
//! coordinator writes outside transactions), or transactional ones of a
//! producer (the group coordinator's TxnOffsetCommit, as Kafka writes it),
//! uncompressed, stamped with the broker's time; a `None` value is a
//! tombstone. Reading goes through the same header parsing and record
//! framing checks as the rest of the log, decompressing a batch that
//! arrives compressed (a cleaner or another writer may have produced one);
//! a record says which producer's transaction it is in, and a
//! transaction marker comes back as the end of that producer's
//! transaction ([`Entry::TxnEnd`]).

use super::batch::{record_section, BatchHeader, Records, TRANSACTIONAL_FLAG};
use super::batch_writer::{put_record, NewBatch};
use super::control::{self, ControlType};
use super::varint::{put_bytes, put_varint};

/// The largest decompressed batch accepted while reading.
const MAX_SECTION: usize = 64 << 20;

/// One record of a scanned batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedRecord {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    /// `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    /// The producer (id, epoch) whose transaction holds the record, if its
    /// batch is transactional: it counts only once that ends in a commit.
    pub transaction: Option<(i64, i16)>,
}

/// What a scan hands back, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Record(KeyedRecord),
    /// A transaction marker: producer `producer_id`'s transaction ended.
    TxnEnd {
        offset: i64,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
}

/// One batch holding `records` in order, timestamped `now_ms`.
pub fn encode(records: &[(Vec<u8>, Option<Vec<u8>>)], now_ms: i64) -> Vec<u8> {
    encode_batch(records, now_ms, None)
}

/// One transactional batch of producer `(id, epoch)` holding `records`
/// (no sequence, as Kafka's coordinator writes it: the coordinator, not
/// the producer, orders these appends).
pub fn encode_transactional(
    records: &[(Vec<u8>, Option<Vec<u8>>)],
    now_ms: i64,
    producer: (i64, i16),
) -> Vec<u8> {
    encode_batch(records, now_ms, Some(producer))
}

fn encode_batch(
    records: &[(Vec<u8>, Option<Vec<u8>>)],
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Vec<u8> {
    let mut section = Vec::new();
    let mut record = Vec::new();
    for (delta, (key, value)) in records.iter().enumerate() {
        record.clear();
        record.push(0); // attributes
        put_varint(&mut record, 0); // timestamp delta
        put_varint(&mut record, delta as i64);
        put_bytes(&mut record, Some(key));
        put_bytes(&mut record, value.as_deref());
        put_varint(&mut record, 0); // no headers
        put_record(&mut section, &record);
    }
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
    let (attributes, (producer_id, producer_epoch)) = match producer {
        Some(producer) => (TRANSACTIONAL_FLAG, producer),
        None => (0, (-1, -1)),
    };
    NewBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes,
        last_offset_delta: count.saturating_sub(1).max(0),
        base_timestamp: now_ms,
        max_timestamp: now_ms,
        producer_id,
        producer_epoch,
        base_sequence: -1,
        record_count: count,
    }
    .write(&section)
}

/// The records and transaction ends of the whole batches in `bytes` (as
/// a log read returns them), and the offset after the last batch (`None`
/// if there was none). A control batch other than a transaction marker
/// is skipped.
pub fn decode(bytes: &[u8]) -> Result<(Vec<Entry>, Option<i64>), String> {
    let mut out = Vec::new();
    let mut next = None;
    let mut pos = 0;
    while pos < bytes.len() {
        let header = BatchHeader::parse(&bytes[pos..])?;
        let Some(batch) = bytes.get(pos..pos + header.size()) else {
            break; // a partial batch at the end of a read
        };
        pos += header.size();
        next = Some(header.next_offset());
        if header.is_control() {
            let commit = match control::control_type(batch) {
                Some(ControlType::Commit) => true,
                Some(ControlType::Abort) => false,
                _ => continue,
            };
            out.push(Entry::TxnEnd {
                offset: header.base_offset,
                producer_id: header.producer_id,
                producer_epoch: header.producer_epoch,
                commit,
            });
            continue;
        }
        let transaction = header
            .is_transactional()
            .then_some((header.producer_id, header.producer_epoch));
        let section = record_section(batch, &header, MAX_SECTION)?;
        for record in Records::in_section(&section, &header) {
            let record = record?;
            let field = |range: Option<std::ops::Range<usize>>| {
                range.and_then(|r| section.get(r)).map(<[u8]>::to_vec)
            };
            out.push(Entry::Record(KeyedRecord {
                offset: header.base_offset + i64::from(record.offset_delta),
                key: field(record.key),
                value: field(record.value),
                transaction,
            }));
        }
    }
    Ok((out, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::crc_matches;

    #[test]
    fn written_records_read_back_with_tombstones() {
        let batch = encode(
            &[
                (b"k1".to_vec(), Some(b"v1".to_vec())),
                (b"k2".to_vec(), None),
            ],
            1_000,
        );
        let header = BatchHeader::parse(&batch).unwrap();
        assert!(crc_matches(&batch, &header));
        assert_eq!((header.record_count, header.last_offset_delta), (2, 1));
        let mut two = batch.clone();
        two.extend_from_slice(&batch);
        let (entries, next) = decode(&two).unwrap();
        assert_eq!(next, Some(2));
        let records = records_of(entries);
        assert_eq!(records.len(), 4);
        assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!((records[1].offset, records[1].value.clone()), (1, None));
        assert_eq!(records[0].transaction, None);
    }

    fn records_of(entries: Vec<Entry>) -> Vec<KeyedRecord> {
        entries
            .into_iter()
            .map(|entry| match entry {
                Entry::Record(record) => record,
                other => panic!("not a record: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_transactional_batch_names_its_producer_and_a_marker_ends_it() {
        let batch = encode_transactional(&[(b"k".to_vec(), Some(b"v".to_vec()))], 5, (7, 2));
        let header = BatchHeader::parse(&batch).unwrap();
        assert!(crc_matches(&batch, &header));
        assert!(header.is_transactional() && !header.is_control());
        let mut log = batch;
        let mut marker = control::end_transaction_marker(7, 2, false, 0, 6);
        // The log assigns offsets: the marker follows the record.
        marker[..8].copy_from_slice(&1i64.to_be_bytes());
        log.extend_from_slice(&marker);
        let (entries, next) = decode(&log).unwrap();
        assert_eq!(next, Some(2));
        assert_eq!(entries.len(), 2);
        let Entry::Record(record) = &entries[0] else {
            panic!("{entries:?}");
        };
        assert_eq!(record.transaction, Some((7, 2)));
        assert_eq!(
            entries[1],
            Entry::TxnEnd {
                offset: 1,
                producer_id: 7,
                producer_epoch: 2,
                commit: false
            }
        );
    }
}
