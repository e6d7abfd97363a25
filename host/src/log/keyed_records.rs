//! Keyed records the host writes and reads back itself: the coordinators'
//! state in their internal topics (`__consumer_offsets`), a batch of key /
//! value pairs per append and a scan of what a read returned.
//!
//! Written batches are plain v2 batches without a producer (like Kafka's
//! coordinator writes outside transactions), uncompressed, stamped with
//! the broker's time; a `None` value is a tombstone. Reading goes through
//! the same header parsing and record framing checks as the rest of the
//! log, decompressing a batch that arrives compressed (a cleaner or
//! another writer may have produced one) and skipping control batches.

use super::batch::{record_section, BatchHeader, Records};
use super::batch_writer::{put_record, NewBatch};
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
}

/// One batch holding `records` in order, timestamped `now_ms`.
pub fn encode(records: &[(Vec<u8>, Option<Vec<u8>>)], now_ms: i64) -> Vec<u8> {
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
    NewBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: 0,
        last_offset_delta: count.saturating_sub(1).max(0),
        base_timestamp: now_ms,
        max_timestamp: now_ms,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: count,
    }
    .write(&section)
}

/// The records of the whole batches in `bytes` (as a log read returns
/// them), and the offset after the last batch (`None` if there was none).
pub fn decode(bytes: &[u8]) -> Result<(Vec<KeyedRecord>, Option<i64>), String> {
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
            continue;
        }
        let section = record_section(batch, &header, MAX_SECTION)?;
        for record in Records::in_section(&section, &header) {
            let record = record?;
            let field = |range: Option<std::ops::Range<usize>>| {
                range.and_then(|r| section.get(r)).map(<[u8]>::to_vec)
            };
            out.push(KeyedRecord {
                offset: header.base_offset + i64::from(record.offset_delta),
                key: field(record.key),
                value: field(record.value),
            });
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
        let (records, next) = decode(&two).unwrap();
        assert_eq!(next, Some(2));
        assert_eq!(records.len(), 4);
        assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(records[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!((records[1].offset, records[1].value.clone()), (1, None));
    }
}
