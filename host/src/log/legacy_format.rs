//! The message formats before record batches (magic v0 and v1, Kafka
//! 0.8-0.10), which Produce v0-2 and Fetch v0-3 carry. The log stores only
//! v2 batches (module docs of `log`), so as Kafka 3.9 did:
//! - [`up_convert`]: a legacy message set appended becomes one v2 batch
//!   (`LogValidator`'s `convertAndAssignOffsetsNonCompressed` and, for a
//!   compressed wrapper, `validateMessagesAndAssignOffsetsCompressed`);
//! - [`down_convert`]: batches read for an old fetch become legacy messages
//!   (`RecordsUtil.downConvert`, which `LazyDownConversionRecords` drives).
//!
//! It lives in the host, not in the SDK, because it is the log's work:
//! checking CRCs, opening and writing compressed data (the codecs are the
//! host's, `codec`), and framing the batches the log assigns offsets to
//! (DESIGN.md §2.6); a handler only says which format its version speaks.
//!
//! A legacy entry is `offset: i64 | size: i32 | crc: u32 | magic: i8 |
//! attributes: i8 | timestamp: i64 (v1 only) | key | value`, key and value
//! an i32 length (-1: null) and the bytes; the CRC-32 (IEEE) covers magic to
//! the end. Attribute bits 0-2 are the codec (1 gzip, 2 snappy, 3 lz4), bit
//! 3 (v1) LogAppendTime. A compressed entry (a *wrapper*) has a null key and
//! the compressed entries of its inner messages as value; v1 inner offsets
//! are relative (0..n-1) with the wrapper at the absolute offset of the
//! last, v0 inner offsets are absolute. Magic v0 lz4 frames carry a header
//! checksum computed over the frame magic too (Kafka's old bug, which its
//! reader ignores for v0 and its writer reproduces): fixed up when read,
//! reproduced when written.
//!
//! Deviations, each noted where it happens: the up-converted batch keeps the
//! producer's codec (Kafka applies the topic's `compression.type`, which
//! Gregor does not act on for any format), and a down-converted response
//! holds whole messages only (Kafka cuts the last one to the size it
//! computed in advance, which old clients skip as partial).

use super::batch::{record_section, BatchHeader, Records, LOG_OVERHEAD};
use super::batch_writer::{put_record, NewBatch};
use super::codec::{self, MAX_DECOMPRESSED};
use super::validate::codec_error;
use super::varint::{put_bytes, put_varint};
use super::StorageError;

pub const MAGIC_V0: i8 = 0;
pub const MAGIC_V1: i8 = 1;

/// Where the magic byte sits in every format.
const MAGIC_AT: usize = 16;
/// crc, magic, attributes, key and value lengths.
const OVERHEAD_V0: usize = 14;
/// v0's, plus the timestamp.
const OVERHEAD_V1: usize = 22;
const CODEC_MASK: i8 = 0x07;
const LOG_APPEND_TIME: i8 = 0x08;
/// The highest codec the legacy formats know (lz4).
const MAX_LEGACY_CODEC: i8 = 3;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;
const NO_TIMESTAMP: i64 = -1;

/// Whether `input` starts with a legacy (magic v0 or v1) entry.
pub fn is_legacy(input: &[u8]) -> bool {
    matches!(
        input.get(MAGIC_AT).map(|&m| m as i8),
        Some(MAGIC_V0 | MAGIC_V1)
    )
}

/// One legacy message, borrowed from its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Message<'a> {
    offset: i64,
    magic: i8,
    attributes: i8,
    /// -1 in v0.
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl Message<'_> {
    fn codec(&self) -> i16 {
        i16::from(self.attributes & CODEC_MASK)
    }
}

/// Reads the entries of a message set, checking each one's framing and CRC
/// (Kafka's `LegacyRecord.ensureValid`: CORRUPT_MESSAGE) and, when
/// `max_size` is given, its size (`max.message.bytes`).
fn messages(
    mut input: &[u8],
    max_size: Option<usize>,
) -> impl Iterator<Item = Result<Message<'_>, StorageError>> {
    std::iter::from_fn(move || {
        if input.is_empty() {
            return None;
        }
        let entry = split_entry(&mut input, max_size);
        if entry.is_err() {
            input = &[];
        }
        Some(entry)
    })
}

fn split_entry<'a>(
    input: &mut &'a [u8],
    max_size: Option<usize>,
) -> Result<Message<'a>, StorageError> {
    let corrupt = |m: String| StorageError::CorruptMessage(m);
    let head = input
        .get(..LOG_OVERHEAD)
        .ok_or_else(|| corrupt(format!("{} trailing bytes are not a message", input.len())))?;
    let offset = i64::from_be_bytes(head[..8].try_into().unwrap_or_default());
    let size = i32::from_be_bytes(head[8..12].try_into().unwrap_or_default());
    let size = usize::try_from(size).map_err(|_| corrupt(format!("message size {size}")))?;
    let entry = input
        .get(..LOG_OVERHEAD.saturating_add(size))
        .ok_or_else(|| corrupt(format!("a message of {size} bytes overruns the set")))?;
    if let Some(max) = max_size.filter(|&max| entry.len() > max) {
        return Err(StorageError::MessageTooLarge(format!(
            "a message of {} bytes exceeds max.message.bytes {max}",
            entry.len()
        )));
    }
    *input = &input[entry.len()..];
    let body = &entry[LOG_OVERHEAD..];
    let magic = body.get(4).map(|&m| m as i8);
    let overhead = match magic {
        Some(MAGIC_V0) => OVERHEAD_V0,
        Some(MAGIC_V1) => OVERHEAD_V1,
        Some(m) => return Err(corrupt(format!("magic {m} in a legacy message set"))),
        None => return Err(corrupt(format!("a message of {size} bytes"))),
    };
    if body.len() < overhead {
        return Err(corrupt(format!(
            "a message of {size} bytes is shorter than its header"
        )));
    }
    let stored = u32::from_be_bytes(body[..4].try_into().unwrap_or_default());
    let computed = crc32fast::hash(&body[4..]);
    if stored != computed {
        return Err(corrupt(format!(
            "message CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let magic = magic.unwrap_or_default();
    let mut at = 6;
    let timestamp = if magic == MAGIC_V1 {
        at += 8;
        i64::from_be_bytes(body[6..14].try_into().unwrap_or_default())
    } else {
        NO_TIMESTAMP
    };
    let key = bytes_field(body, &mut at)?;
    let value = bytes_field(body, &mut at)?;
    if at != body.len() {
        return Err(corrupt(format!(
            "{} bytes after the value of a message",
            body.len() - at
        )));
    }
    Ok(Message {
        offset,
        magic,
        attributes: body[5] as i8,
        timestamp,
        key,
        value,
    })
}

/// An i32-length field (-1: null) at `at`.
fn bytes_field<'a>(body: &'a [u8], at: &mut usize) -> Result<Option<&'a [u8]>, StorageError> {
    let length = body
        .get(*at..*at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| StorageError::CorruptMessage("a message ends inside a length".into()))?;
    *at += 4;
    if length == -1 {
        return Ok(None);
    }
    let field = usize::try_from(length)
        .ok()
        .and_then(|len| body.get(*at..at.checked_add(len)?))
        .ok_or_else(|| {
            StorageError::CorruptMessage(format!("a field of {length} bytes overruns its message"))
        })?;
    *at += field.len();
    Ok(Some(field))
}

/// A record of the v2 batch being built.
struct Converted<'a> {
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

/// Up-converts a legacy message set (Produce v0-2) to one v2 batch with
/// base offset 0, no producer, CreateTime timestamps (v0: none, -1) and the
/// wrapper's codec; the caller validates and stamps it like any batch.
/// Kafka's rules: every entry of the first's magic, a compressed wrapper
/// alone in its set, inner messages of the wrapper's magic and not
/// compressed themselves (INVALID_RECORD), every CRC right
/// (CORRUPT_MESSAGE). Inner offsets are not checked: Kafka rewrites sets
/// whose v1 inner offsets are wrong rather than refuse them.
pub fn up_convert(
    input: &[u8],
    max_message_bytes: usize,
    decompressed_limit: usize,
) -> Result<Vec<u8>, StorageError> {
    let outer: Vec<Message<'_>> =
        messages(input, Some(max_message_bytes)).collect::<Result<_, _>>()?;
    let Some(first) = outer.first() else {
        return Err(StorageError::InvalidRecord(
            "the append holds no messages".into(),
        ));
    };
    let invalid = |m: &str| StorageError::InvalidRecord(m.to_string());
    if outer.iter().any(|m| m.magic != first.magic) {
        return Err(invalid(
            "a message's magic differs from the first message's",
        ));
    }
    if outer
        .iter()
        .any(|m| m.attributes & CODEC_MASK > MAX_LEGACY_CODEC)
    {
        return Err(invalid("unknown compression codec in a legacy message"));
    }
    let codec = outer.iter().map(Message::codec).rfind(|&c| c != 0);
    let inner_bytes;
    let records: Vec<Converted<'_>> = match codec {
        None => outer
            .iter()
            .map(|m| Converted {
                timestamp: m.timestamp,
                key: m.key,
                value: m.value,
            })
            .collect(),
        Some(_) if outer.len() > 1 => {
            return Err(invalid(
                "a compressed message set holds more than one message",
            ))
        }
        Some(codec) => {
            let wrapper = first;
            inner_bytes = decompress(codec, wrapper.magic, wrapper.value, decompressed_limit)?;
            let mut records = Vec::new();
            for inner in messages(&inner_bytes, None) {
                let inner = inner?;
                if inner.magic != wrapper.magic {
                    return Err(invalid(
                        "an inner message's magic differs from its wrapper's",
                    ));
                }
                if inner.codec() != 0 {
                    return Err(invalid(
                        "Compressed outer record should not have an inner record with a compression attribute set",
                    ));
                }
                // A LogAppendTime wrapper gives its inner messages its time,
                // as Kafka's deep iterator reads them.
                let timestamp = if wrapper.attributes & LOG_APPEND_TIME != 0 {
                    wrapper.timestamp
                } else {
                    inner.timestamp
                };
                records.push(Converted {
                    timestamp,
                    key: inner.key,
                    value: inner.value,
                });
            }
            if records.is_empty() {
                return Err(invalid("a compressed message holds no messages"));
            }
            records
        }
    };
    v2_batch(&records, codec.unwrap_or(0))
}

/// The records as one v2 batch compressed with `codec`.
fn v2_batch(records: &[Converted<'_>], codec: i16) -> Result<Vec<u8>, StorageError> {
    let base_timestamp = records.first().map_or(NO_TIMESTAMP, |r| r.timestamp);
    let max_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .unwrap_or(NO_TIMESTAMP);
    let mut section = Vec::new();
    let mut record = Vec::new();
    for (delta, r) in records.iter().enumerate() {
        record.clear();
        record.push(0); // attributes
        put_varint(&mut record, r.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut record, delta as i64);
        put_bytes(&mut record, r.key);
        put_bytes(&mut record, r.value);
        put_varint(&mut record, 0); // headers
        put_record(&mut section, &record);
    }
    if codec != 0 {
        section = codec::compress_section(codec, &section).map_err(codec_error)?;
    }
    let count = i32::try_from(records.len())
        .map_err(|_| StorageError::InvalidRecord("too many messages".into()))?;
    Ok(NewBatch {
        base_offset: 0,
        partition_leader_epoch: 0,
        attributes: codec,
        last_offset_delta: count - 1,
        base_timestamp,
        max_timestamp,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        record_count: count,
    }
    .write(&section))
}

/// A wrapper's value decompressed (a v0 lz4 frame's header checksum fixed
/// up first).
fn decompress(
    codec: i16,
    magic: i8,
    value: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<u8>, StorageError> {
    let value = value.unwrap_or_default();
    let result = if codec == LZ4 && magic == MAGIC_V0 {
        let mut frame = value.to_vec();
        set_lz4_header_checksum(&mut frame, false);
        codec::decompress(codec, &frame, limit)
    } else {
        codec::decompress(codec, value, limit)
    };
    result.map_err(codec_error)
}

/// Writes an lz4 frame's header checksum: the correct one (over the frame
/// descriptor), or with `broken` Kafka's v0 one (over the magic too). A
/// frame too short to hold a header is left as is (it fails to decode).
fn set_lz4_header_checksum(frame: &mut [u8], broken: bool) {
    let Some(&flags) = frame.get(4) else { return };
    let end = 6 + if flags & 0x08 != 0 { 8 } else { 0 } + if flags & 0x01 != 0 { 4 } else { 0 };
    if frame.len() <= end {
        return;
    }
    let from = if broken { 0 } else { 4 };
    let hash = twox_hash::XxHash32::oneshot(0, &frame[from..end]);
    frame[end] = (hash >> 8) as u8;
}

/// Appends one legacy entry.
fn put_message(out: &mut Vec<u8>, magic: i8, message: &Message<'_>) {
    out.extend_from_slice(&message.offset.to_be_bytes());
    let size_at = out.len();
    out.extend_from_slice(&[0; 8]); // size and CRC, below
    let crc_from = out.len();
    out.push(magic as u8);
    out.push(message.attributes as u8);
    if magic == MAGIC_V1 {
        out.extend_from_slice(&message.timestamp.to_be_bytes());
    }
    for field in [message.key, message.value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(bytes) => {
                out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    let size = (out.len() - size_at - 4) as i32;
    out[size_at..size_at + 4].copy_from_slice(&size.to_be_bytes());
    let crc = crc32fast::hash(&out[crc_from..]);
    out[size_at + 4..size_at + 8].copy_from_slice(&crc.to_be_bytes());
}

/// Down-converts stored v2 batches (a fetch's records) to legacy messages
/// of `magic`, as Kafka 3.9's `RecordsUtil.downConvert`: control batches
/// are dropped (the old formats have no markers), headers are lost, an
/// uncompressed batch loses its records before `fetch_offset` (v0/v1 have
/// one message per uncompressed entry; librdkafka relies on this), a
/// compressed batch becomes one wrapper of the same codec holding all its
/// records. A zstd batch cannot be down-converted:
/// UNSUPPORTED_COMPRESSION_TYPE.
///
/// The answer holds whole converted batches while it stays within the size
/// read (at least the first, so the consumer progresses), as Kafka's
/// `LazyDownConversionRecords` bounds its size; the consumer fetches the
/// rest from where it stopped.
pub fn down_convert(batches: &[u8], magic: i8, fetch_offset: i64) -> Result<Vec<u8>, StorageError> {
    let mut out = Vec::new();
    let mut converted = Vec::new();
    let mut rest = batches;
    while !rest.is_empty() {
        let header = BatchHeader::parse(rest).map_err(StorageError::CorruptMessage)?;
        let batch = rest
            .get(..header.size())
            .ok_or_else(|| StorageError::CorruptMessage("a stored batch is cut short".into()))?;
        rest = &rest[batch.len()..];
        if header.is_control() {
            continue;
        }
        converted.clear();
        convert_batch(batch, &header, magic, fetch_offset, &mut converted)?;
        if !out.is_empty() && out.len() + converted.len() > batches.len() {
            break;
        }
        out.extend_from_slice(&converted);
    }
    Ok(out)
}

/// One stored batch as legacy entries, appended to `out`.
fn convert_batch(
    batch: &[u8],
    header: &BatchHeader,
    magic: i8,
    fetch_offset: i64,
    out: &mut Vec<u8>,
) -> Result<(), StorageError> {
    let codec = header.compression();
    if codec == ZSTD {
        return Err(StorageError::UnsupportedCompressionType(
            "Down-conversion of zstandard-compressed batches is not supported".into(),
        ));
    }
    let section =
        record_section(batch, header, MAX_DECOMPRESSED).map_err(StorageError::Decompression)?;
    let log_append_time = header.is_log_append_time();
    let timestamp_bit = if magic == MAGIC_V1 && log_append_time {
        LOG_APPEND_TIME
    } else {
        0
    };
    let field = |range: Option<std::ops::Range<usize>>| range.and_then(|r| section.get(r));
    let mut messages = Vec::new();
    for record in Records::in_section(&section, header) {
        let record = record.map_err(StorageError::CorruptMessage)?;
        let offset = header
            .base_offset
            .saturating_add(i64::from(record.offset_delta));
        if codec == 0 && offset < fetch_offset {
            continue;
        }
        let timestamp = match magic {
            MAGIC_V0 => NO_TIMESTAMP,
            _ if log_append_time => header.max_timestamp,
            _ => record.timestamp,
        };
        messages.push(Message {
            offset,
            magic,
            attributes: timestamp_bit,
            timestamp,
            key: field(record.key.clone()),
            value: field(record.value.clone()),
        });
    }
    let (Some(first), Some(last)) = (messages.first().copied(), messages.last().copied()) else {
        return Ok(());
    };
    if codec == 0 {
        for message in &messages {
            put_message(out, magic, message);
        }
        return Ok(());
    }
    let mut inner = Vec::new();
    for message in &messages {
        let offset = match magic {
            MAGIC_V1 => message.offset - first.offset,
            _ => message.offset,
        };
        put_message(&mut inner, magic, &Message { offset, ..*message });
    }
    // Writing into memory does not fail for the codecs a stored batch has.
    let mut value = codec::compress_section(codec, &inner).map_err(codec_error)?;
    if codec == LZ4 && magic == MAGIC_V0 {
        set_lz4_header_checksum(&mut value, true);
    }
    let timestamp = match magic {
        MAGIC_V0 => NO_TIMESTAMP,
        _ if log_append_time => header.max_timestamp,
        _ => messages
            .iter()
            .map(|m| m.timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP),
    };
    let wrapper = Message {
        offset: last.offset,
        magic,
        attributes: codec as i8 | timestamp_bit,
        timestamp,
        key: None,
        value: Some(&value),
    };
    put_message(out, magic, &wrapper);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::{compressed_batch, encode_batch, encode_batch_with, Rec};
    use crate::log::batch::CONTROL_FLAG;

    const LIMIT: usize = 1 << 20;

    /// A legacy message with the given fields, as a client writes it.
    fn message(
        magic: i8,
        offset: i64,
        attributes: i8,
        ts: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        put_message(
            &mut out,
            magic,
            &Message {
                offset,
                magic,
                attributes,
                timestamp: ts,
                key,
                value,
            },
        );
        out
    }

    /// A compressed wrapper of `inner` (entries), as a client writes it.
    fn wrapper(magic: i8, codec: i16, offset: i64, ts: i64, inner: &[u8]) -> Vec<u8> {
        let mut value = codec::compress_section(codec, inner).unwrap();
        if codec == LZ4 && magic == MAGIC_V0 {
            set_lz4_header_checksum(&mut value, true);
        }
        message(magic, offset, codec as i8, ts, None, Some(&value))
    }

    /// (offset, timestamp, key, value) of each legacy message of a fetch
    /// answer, inner messages of wrappers included (v1 ones made absolute).
    /// (offset, timestamp, key, value).
    type Read = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);
    /// (timestamp, key, value).
    type Rec2 = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn read_back(bytes: &[u8]) -> Vec<Read> {
        let mut out = Vec::new();
        for m in messages(bytes, None) {
            let m = m.unwrap();
            if m.codec() == 0 {
                out.push((
                    m.offset,
                    m.timestamp,
                    m.key.map(<[u8]>::to_vec),
                    m.value.map(<[u8]>::to_vec),
                ));
                continue;
            }
            let inner = decompress(m.codec(), m.magic, m.value, LIMIT).unwrap();
            let inner: Vec<Message<'_>> = messages(&inner, None).map(Result::unwrap).collect();
            let last = inner.last().unwrap().offset;
            for i in &inner {
                assert_eq!(i.magic, m.magic);
                let offset = if m.magic == MAGIC_V1 {
                    m.offset - last + i.offset
                } else {
                    i.offset
                };
                out.push((
                    offset,
                    i.timestamp,
                    i.key.map(<[u8]>::to_vec),
                    i.value.map(<[u8]>::to_vec),
                ));
            }
        }
        out
    }

    /// (timestamp, key, value) of each record of a v2 batch.
    fn records_of(batch: &[u8]) -> Vec<Rec2> {
        let header = BatchHeader::parse(batch).unwrap();
        let section = record_section(batch, &header, LIMIT).unwrap();
        Records::in_section(&section, &header)
            .map(|r| {
                let r = r.unwrap();
                let field =
                    |range: Option<std::ops::Range<usize>>| range.map(|r| section[r].to_vec());
                (r.timestamp, field(r.key), field(r.value))
            })
            .collect()
    }

    fn keyed(ts: i64, key: &str, value: &str) -> Rec {
        Rec {
            key: Some(key.as_bytes().to_vec()),
            ..Rec::new(ts, value.as_bytes())
        }
    }

    #[test]
    fn uncompressed_sets_become_one_batch() {
        let mut set = message(MAGIC_V1, 0, 0, 1_000, Some(b"k"), Some(b"one"));
        set.extend(message(MAGIC_V1, 0, 0, 1_005, None, Some(b"two")));
        let batch = up_convert(&set, LIMIT, LIMIT).unwrap();
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(
            (
                header.record_count,
                header.compression(),
                header.producer_id
            ),
            (2, 0, -1)
        );
        assert_eq!(
            (header.base_timestamp, header.max_timestamp),
            (1_000, 1_005)
        );
        assert_eq!(
            records_of(&batch),
            vec![
                (1_000, Some(b"k".to_vec()), Some(b"one".to_vec())),
                (1_005, None, Some(b"two".to_vec()))
            ]
        );
        // v0 has no timestamps: NO_TIMESTAMP.
        let v0 = message(MAGIC_V0, 0, 0, 0, None, None);
        let batch = up_convert(&v0, LIMIT, LIMIT).unwrap();
        assert_eq!(records_of(&batch), vec![(-1, None, None)]);
    }

    #[test]
    fn compressed_wrappers_keep_their_codec() {
        for (magic, codec) in [
            (MAGIC_V1, 1),
            (MAGIC_V1, 2),
            (MAGIC_V1, 3),
            (MAGIC_V0, 1),
            (MAGIC_V0, 3),
        ] {
            let mut inner = message(magic, 0, 0, 7, Some(b"a"), Some(b"x"));
            inner.extend(message(magic, 1, 0, 9, Some(b"b"), Some(b"y")));
            let set = wrapper(magic, codec, 1, 9, &inner);
            let batch = up_convert(&set, LIMIT, LIMIT).unwrap();
            let header = BatchHeader::parse(&batch).unwrap();
            assert_eq!((header.record_count, header.compression()), (2, codec));
            let ts = |t| if magic == MAGIC_V0 { -1 } else { t };
            assert_eq!(
                records_of(&batch),
                vec![
                    (ts(7), Some(b"a".to_vec()), Some(b"x".to_vec())),
                    (ts(9), Some(b"b".to_vec()), Some(b"y".to_vec()))
                ],
                "magic {magic} codec {codec}"
            );
        }
    }

    #[test]
    fn kafka_refuses_what_it_refused() {
        let one = message(MAGIC_V1, 0, 0, 1, None, Some(b"v"));
        let mut bad_crc = one.clone();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert!(matches!(
            up_convert(&bad_crc, LIMIT, LIMIT),
            Err(StorageError::CorruptMessage(_))
        ));
        assert!(matches!(
            up_convert(&one[..one.len() - 1], LIMIT, LIMIT),
            Err(StorageError::CorruptMessage(_))
        ));
        let mixed = [one.clone(), message(MAGIC_V0, 0, 0, 0, None, Some(b"v"))].concat();
        assert!(matches!(
            up_convert(&mixed, LIMIT, LIMIT),
            Err(StorageError::InvalidRecord(_))
        ));
        let gz = wrapper(MAGIC_V1, 1, 0, 1, &one);
        let two = [gz.clone(), one.clone()].concat();
        assert!(matches!(
            up_convert(&two, LIMIT, LIMIT),
            Err(StorageError::InvalidRecord(_))
        ));
        let nested = wrapper(MAGIC_V1, 1, 0, 1, &gz);
        assert!(matches!(
            up_convert(&nested, LIMIT, LIMIT),
            Err(StorageError::InvalidRecord(_))
        ));
        let inner_v0 = wrapper(MAGIC_V1, 1, 0, 1, &message(MAGIC_V0, 0, 0, 0, None, None));
        assert!(matches!(
            up_convert(&inner_v0, LIMIT, LIMIT),
            Err(StorageError::InvalidRecord(_))
        ));
        let mut inner_bad = one.clone();
        *inner_bad.last_mut().unwrap() ^= 1;
        let hidden = wrapper(MAGIC_V1, 1, 0, 1, &inner_bad);
        assert!(matches!(
            up_convert(&hidden, LIMIT, LIMIT),
            Err(StorageError::CorruptMessage(_))
        ));
        assert!(matches!(
            up_convert(&one, one.len() - 1, LIMIT),
            Err(StorageError::MessageTooLarge(_))
        ));
        let garbage = message(MAGIC_V1, 0, 1, 1, None, Some(b"not gzip"));
        assert!(matches!(
            up_convert(&garbage, LIMIT, LIMIT),
            Err(StorageError::Decompression(_))
        ));
    }

    /// A stored batch at `base` (offsets assigned as the log does).
    fn stored(mut batch: Vec<u8>, base: i64) -> Vec<u8> {
        batch[..8].copy_from_slice(&base.to_be_bytes());
        batch
    }

    #[test]
    fn down_conversion_gives_each_record_its_offset() {
        let recs = [
            keyed(100, "a", "x"),
            keyed(101, "b", "y"),
            keyed(105, "c", "z"),
        ];
        let plain = stored(encode_batch(&recs), 10);
        for magic in [MAGIC_V0, MAGIC_V1] {
            let ts = |t| if magic == MAGIC_V0 { -1 } else { t };
            let want = |from: usize| -> Vec<_> {
                recs[from..]
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        (
                            (10 + from + i) as i64,
                            ts(r.timestamp),
                            r.key.clone(),
                            r.value.clone(),
                        )
                    })
                    .collect()
            };
            // Uncompressed: one message each, those before the fetch offset dropped.
            assert_eq!(
                read_back(&down_convert(&plain, magic, 10).unwrap()),
                want(0)
            );
            assert_eq!(
                read_back(&down_convert(&plain, magic, 11).unwrap()),
                want(1)
            );
            // Compressed: one wrapper with every record.
            for codec in [1, 2, 3] {
                let zipped = stored(compressed_batch(&encode_batch(&recs), codec), 10);
                let out = down_convert(&zipped, magic, 11).unwrap();
                assert_eq!(read_back(&out), want(0), "magic {magic} codec {codec}");
                // What an old producer would send comes back up the same.
                let again = up_convert(&out, LIMIT, LIMIT).unwrap();
                let got: Vec<_> = records_of(&again);
                let expected: Vec<_> = recs
                    .iter()
                    .map(|r| (ts(r.timestamp), r.key.clone(), r.value.clone()))
                    .collect();
                assert_eq!(got, expected);
            }
        }
    }

    #[test]
    fn log_append_time_is_the_batch_time() {
        let mut batch = stored(encode_batch_with(0x08, &[Rec::new(5, b"v")]), 0);
        batch[35..43].copy_from_slice(&77i64.to_be_bytes()); // max timestamp
        crate::log::batch::set_crc(&mut batch);
        let out = down_convert(&batch, MAGIC_V1, 0).unwrap();
        let m = messages(&out, None).next().unwrap().unwrap();
        assert_eq!(
            (m.timestamp, m.attributes & LOG_APPEND_TIME),
            (77, LOG_APPEND_TIME)
        );
    }

    #[test]
    fn markers_are_dropped_and_zstd_refused() {
        let marker = stored(
            encode_batch_with(CONTROL_FLAG | 0x10, &[Rec::new(1, b"")]),
            0,
        );
        let data = stored(encode_batch(&[Rec::new(2, b"v")]), 1);
        let both = [marker.clone(), data].concat();
        assert_eq!(
            read_back(&down_convert(&both, MAGIC_V1, 0).unwrap()).len(),
            1
        );
        assert!(down_convert(&marker, MAGIC_V1, 0).unwrap().is_empty());
        let zstd = stored(compressed_batch(&encode_batch(&[Rec::new(2, b"v")]), 4), 0);
        assert!(matches!(
            down_convert(&zstd, MAGIC_V0, 0),
            Err(StorageError::UnsupportedCompressionType(_))
        ));
    }

    #[test]
    fn the_answer_stays_within_the_size_read() {
        // Small records grow when each becomes a message of its own.
        let recs: Vec<Rec> = (0..50).map(|i| Rec::new(i, b"v")).collect();
        let first = stored(encode_batch(&recs), 0);
        let second = stored(encode_batch(&recs), 50);
        let both = [first.clone(), second].concat();
        let out = down_convert(&both, MAGIC_V1, 0).unwrap();
        assert!(
            out.len() > first.len(),
            "the first batch is always converted"
        );
        assert_eq!(
            read_back(&out).len(),
            50,
            "the second would pass the size read"
        );
    }
}
