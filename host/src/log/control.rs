//! Transaction markers: the control batches that end a transaction in a
//! partition.
//!
//! When a transaction commits or aborts, the coordinator appends one control
//! batch to every partition the transaction wrote to (Kafka's
//! `EndTransactionMarker`). It is a v2 batch with the transactional and
//! control attributes set, the producer's id and epoch, and one record whose
//! key says what ended (version 0, type 0 abort / 1 commit) and whose value
//! carries the coordinator epoch. Consumers never see it as a record: it is
//! what lets a read_committed reader know where a transaction's data stops.
//!
//! Written here from the protocol spec, because the host is the only writer
//! of control batches: clients may not produce them.

use super::batch::{CONTROL_FLAG, HEADER_SIZE, TRANSACTIONAL_FLAG};
use super::batch_writer::{put_record, NewBatch};
use super::varint::{put_bytes, put_varint, read_varint, read_varlong};

/// What a control batch marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    Abort,
    Commit,
    /// Any other control record (Kafka has a few for KRaft); not a
    /// transaction end.
    Other,
}

/// A commit or abort marker for `producer_id` at `producer_epoch`, stamped
/// with `timestamp_ms`, base offset 0 (the log assigns the real one).
pub fn end_transaction_marker(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    // The one record: attributes, timestamp delta, offset delta, key,
    // value, no headers.
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut record = vec![0u8];
    put_varint(&mut record, 0);
    put_varint(&mut record, 0);
    put_bytes(&mut record, Some(&key));
    put_bytes(&mut record, Some(&value));
    put_varint(&mut record, 0);
    let mut records = Vec::with_capacity(record.len() + 1);
    put_record(&mut records, &record);
    NewBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: TRANSACTIONAL_FLAG | CONTROL_FLAG,
        last_offset_delta: 0,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence: -1,
        record_count: 1,
    }
    .write(&records)
}

/// The key and value of the first record of `batch` (one whole,
/// uncompressed batch, header included); `None` when it cannot be read.
fn first_record(batch: &[u8]) -> Option<(&[u8], &[u8])> {
    let records = batch.get(HEADER_SIZE..)?;
    let mut pos = 0;
    read_varint(records, &mut pos).ok()?; // record length
    pos += 1; // attributes
    read_varlong(records, &mut pos).ok()?; // timestamp delta
    read_varint(records, &mut pos).ok()?; // offset delta
    let key_length = usize::try_from(read_varint(records, &mut pos).ok()?).ok()?;
    let key = records.get(pos..pos.checked_add(key_length)?)?;
    pos = pos.checked_add(key_length)?;
    let value_length = usize::try_from(read_varint(records, &mut pos).ok()?).ok()?;
    let value = records.get(pos..pos.checked_add(value_length)?)?;
    Some((key, value))
}

/// The type of the control batch `batch`, from its first record's key.
/// `None` when the record cannot be read.
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let (key, _) = first_record(batch)?;
    let kind = i16::from_be_bytes(key.get(2..4)?.try_into().ok()?);
    Some(match kind {
        0 => ControlType::Abort,
        1 => ControlType::Commit,
        _ => ControlType::Other,
    })
}

/// The coordinator epoch an end-transaction marker carries (its record's
/// value: version, then the epoch). `None` when the record cannot be read.
pub fn coordinator_epoch(batch: &[u8]) -> Option<i32> {
    let (_, value) = first_record(batch)?;
    Some(i32::from_be_bytes(value.get(2..6)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{prepare_append, BatchHeader};

    #[test]
    fn markers_are_valid_batches_that_say_what_they_end() {
        for (commit, expected) in [(true, ControlType::Commit), (false, ControlType::Abort)] {
            let marker = end_transaction_marker(42, 3, commit, 0, 1_000);
            let header = BatchHeader::parse(&marker).unwrap();
            assert_eq!(header.size(), marker.len());
            assert_eq!(header.record_count, 1);
            assert!(header.is_transactional() && header.is_control());
            assert_eq!(control_type(&marker), Some(expected));
            assert_eq!(coordinator_epoch(&marker), Some(0));
            let fenced = end_transaction_marker(42, 3, commit, 7, 1_000);
            assert_eq!(coordinator_epoch(&fenced), Some(7));
            // The storage engine's validation accepts it (CRC, records).
            prepare_append(&marker, 1 << 20, None, false).unwrap();
        }
    }

    #[test]
    fn markers_are_byte_for_byte_kafkas() {
        let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
        assert_eq!(
            hex(&end_transaction_marker(42, 3, true, 0, 1_000)),
            "000000000000000000000042ffffffff02a1ae70e800300000000000000000000003e8\
             00000000000003e8000000000000002a0003ffffffff000000012000000008000000010c00000000000000"
        );
        assert_eq!(
            hex(&end_transaction_marker(1, 0, false, 7, 1_700_000_000_000)),
            "000000000000000000000042ffffffff02a1cc3d010030000000000000018bcfe568000000018bcfe568\
             0000000000000000010000ffffffff000000012000000008000000000c00000000000700"
        );
    }

    #[test]
    fn a_truncated_control_record_is_not_a_marker() {
        let marker = end_transaction_marker(1, 0, true, 0, 0);
        assert_eq!(control_type(&marker[..HEADER_SIZE + 3]), None);
    }
}
