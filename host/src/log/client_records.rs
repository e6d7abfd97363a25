//! Records as a Kafka client sees them, for the command line's produce and
//! consume (`gregor produce`, `gregor consume`): one v2 batch written from
//! keys, values and headers, and the records of fetched batches read back
//! (compressed ones too). The byte layout is the log's own (`batch`,
//! `batch_writer`, `varint`), so the tool and the broker cannot disagree.

use super::batch::{record_section, BatchHeader, Records, HEADER_SIZE, LOG_OVERHEAD};
use super::batch_writer::{put_record, NewBatch};
use super::varint::{put_bytes, put_varint, read_varint};

/// The most a fetched batch may decompress to.
const MAX_SECTION: usize = 64 << 20;

/// A record's headers: each name and value (None: a null value).
pub type RecordHeaders = Vec<(String, Option<Vec<u8>>)>;

/// A record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: RecordHeaders,
}

/// A record read from a fetched batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: RecordHeaders,
}

/// One uncompressed v2 batch of `records`, all stamped `timestamp` (ms),
/// with no producer id (a plain, non-idempotent producer's batch).
pub fn encode_batch(records: &[NewRecord], timestamp: i64) -> Vec<u8> {
    let mut section = Vec::new();
    for (delta, record) in records.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, delta as i64);
        put_bytes(&mut body, record.key.as_deref());
        put_bytes(&mut body, record.value.as_deref());
        put_varint(&mut body, record.headers.len() as i64);
        for (name, value) in &record.headers {
            put_bytes(&mut body, Some(name.as_bytes()));
            put_bytes(&mut body, value.as_deref());
        }
        put_record(&mut section, &body);
    }
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
    NewBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: 0,
        last_offset_delta: count.saturating_sub(1),
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: count,
    }
    .write(&section)
}

/// The data records at or after `from` in a fetch answer's record bytes:
/// control batches (transaction markers) are skipped and a partial batch
/// at the end (the broker cuts at the size asked) is ignored.
pub fn decode_batches(mut bytes: &[u8], from: i64) -> Result<Vec<FetchedRecord>, String> {
    let mut out = Vec::new();
    while bytes.len() >= LOG_OVERHEAD {
        let length = i32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let size = usize::try_from(length)
            .map_err(|_| format!("a batch with length {length}"))?
            .saturating_add(LOG_OVERHEAD);
        if bytes.len() < size || size < HEADER_SIZE {
            break;
        }
        let (batch, rest) = bytes.split_at(size);
        bytes = rest;
        let header = BatchHeader::parse(batch)?;
        if header.is_control() {
            continue;
        }
        let section = record_section(batch, &header, MAX_SECTION)?;
        for record in Records::in_section(&section, &header) {
            let record = record?;
            let offset = header.base_offset + i64::from(record.offset_delta);
            if offset < from {
                continue;
            }
            let bytes_of = |range: Option<std::ops::Range<usize>>| {
                range.and_then(|r| section.get(r)).map(<[u8]>::to_vec)
            };
            let timestamp = if header.is_log_append_time() {
                header.max_timestamp
            } else {
                record.timestamp
            };
            out.push(FetchedRecord {
                offset,
                timestamp,
                key: bytes_of(record.key.clone()),
                value: bytes_of(record.value.clone()),
                headers: headers(section.get(record.headers.clone()).unwrap_or_default())?,
            });
        }
    }
    Ok(out)
}

/// A record's encoded headers: the count, then each name and value.
fn headers(encoded: &[u8]) -> Result<RecordHeaders, String> {
    let mut at = 0;
    let count = read_varint(encoded, &mut at)?;
    let mut out = Vec::new();
    for _ in 0..count.max(0) {
        let name = field(encoded, &mut at)?.ok_or("a header with a null name")?;
        let value = field(encoded, &mut at)?;
        out.push((String::from_utf8_lossy(&name).into_owned(), value));
    }
    Ok(out)
}

/// A varint-length field; `None` for length -1.
fn field(encoded: &[u8], at: &mut usize) -> Result<Option<Vec<u8>>, String> {
    let length = read_varint(encoded, at)?;
    if length < 0 {
        return Ok(None);
    }
    let end = at.saturating_add(length as usize);
    let bytes = encoded
        .get(*at..end)
        .ok_or("a header field past the record's end")?;
    *at = end;
    Ok(Some(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::crc_matches;

    #[test]
    fn written_records_read_back() {
        let records = vec![
            NewRecord {
                key: Some(b"k".to_vec()),
                value: Some(b"v1".to_vec()),
                headers: vec![("h".into(), Some(b"x".to_vec())), ("n".into(), None)],
            },
            NewRecord {
                key: None,
                value: None,
                headers: vec![],
            },
        ];
        let mut batch = encode_batch(&records, 1_700_000_000_000);
        let header = BatchHeader::parse(&batch).unwrap();
        assert!(crc_matches(&batch, &header));
        assert_eq!(header.record_count, 2);
        // As the broker stores it: base offset 40.
        batch[..8].copy_from_slice(&40i64.to_be_bytes());
        let mut fetched = batch.clone();
        fetched.extend_from_slice(&batch[..30]); // a cut batch after it
        let read = decode_batches(&fetched, 41).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].offset, read[0].key.as_deref()), (41, None));
        let read = decode_batches(&fetched, 0).unwrap();
        assert_eq!(read[0].offset, 40);
        assert_eq!(read[0].timestamp, 1_700_000_000_000);
        assert_eq!(read[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(read[0].headers, records[0].headers);
    }
}
