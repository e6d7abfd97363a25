//! Writing v2 record batches: the one place the host lays out a batch
//! header.
//!
//! The host writes few batches of its own (transaction markers, and the
//! cleaner's rewritten batches), but each must be byte-exact Kafka: the
//! header in `batch`'s layout, `batchLength` counting everything after
//! itself, the CRC-32C over `attributes` to the end. Writing the header in
//! one place keeps the offsets and the CRC step from drifting apart.

use super::batch::{set_crc, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2};
use super::varint::put_varint;

/// The header fields of a batch the host writes; the length, magic and
/// CRC follow from them and the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl NewBatch {
    /// The whole batch: this header, then `records` (encoded with
    /// [`put_record`]), with its length and CRC set.
    pub fn write(&self, records: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_SIZE + records.len());
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        let length = (HEADER_SIZE - LOG_OVERHEAD + records.len()) as i32;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // CRC, below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.record_count.to_be_bytes());
        out.extend_from_slice(records);
        set_crc(&mut out);
        out
    }
}

/// Appends one record to a batch's records: its varint length, then
/// `record` (attributes, deltas, key, value, headers).
pub fn put_record(records: &mut Vec<u8>, record: &[u8]) {
    put_varint(records, record.len() as i64);
    records.extend_from_slice(record);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{crc_matches, BatchHeader};

    #[test]
    fn written_batches_parse_back_with_a_valid_crc() {
        let fields = NewBatch {
            base_offset: 7,
            partition_leader_epoch: 3,
            attributes: 0x10,
            last_offset_delta: 0,
            base_timestamp: 1_000,
            max_timestamp: 1_005,
            producer_id: 42,
            producer_epoch: 2,
            base_sequence: 9,
            record_count: 1,
        };
        let mut records = Vec::new();
        put_record(&mut records, &[0, 0, 0, 1, 0]);
        let batch = fields.write(&records);
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(header.size(), batch.len());
        assert!(crc_matches(&batch, &header));
        let parsed = NewBatch {
            base_offset: header.base_offset,
            partition_leader_epoch: header.partition_leader_epoch,
            attributes: header.attributes,
            last_offset_delta: header.last_offset_delta,
            base_timestamp: header.base_timestamp,
            max_timestamp: header.max_timestamp,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            record_count: header.record_count,
        };
        assert_eq!(parsed, fields);
    }
}
