//! Record batch (magic v2) header parsing and append validation.
//!
//! The host stores batches verbatim, so it only needs the fixed 61-byte
//! header (Kafka's `DefaultRecordBatch` layout):
//!
//! ```text
//! baseOffset: i64 | batchLength: i32 | partitionLeaderEpoch: i32 | magic: i8
//! crc: u32 | attributes: i16 | lastOffsetDelta: i32 | baseTimestamp: i64
//! maxTimestamp: i64 | producerId: i64 | producerEpoch: i16 | baseSequence: i32
//! recordCount: i32 | records...
//! ```
//!
//! `batchLength` counts the bytes after itself, and the CRC-32C covers
//! `attributes` to the end, so the broker can rewrite `baseOffset` and
//! `partitionLeaderEpoch` without touching the CRC; stamping LogAppendTime
//! changes `attributes` and `maxTimestamp` and therefore recomputes it.
//!
//! Validation follows Kafka's `analyzeAndValidateRecords` and LogValidator:
//! framing, magic, CRC, size limits, `recordCount == lastOffsetDelta + 1`
//! here, then every record of every batch, compressed ones decompressed as
//! a bounded stream, in `validate` (varint framing, consecutive offset
//! deltas, the real count and largest timestamp, keys on compacted topics).
//! Fetches move compressed batches opaquely; `codec` opens stored ones only
//! where the records themselves matter (the cleaner, exact timestamp
//! lookups).

use std::borrow::Cow;

use super::codec;
use super::legacy_format;
use super::record_stream::RecordStream;
use super::validate;
use super::varint::{read_varint, read_varlong, varint, varlong};
use super::StorageError;

/// `baseOffset` + `batchLength`: the bytes before the part `batchLength`
/// counts.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the fixed v2 batch header.
pub const HEADER_SIZE: usize = 61;
/// The only batch format stored.
pub const MAGIC_V2: i8 = 2;

const BASE_OFFSET: usize = 0;
const LENGTH: usize = 8;
const PARTITION_LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORDS_COUNT: usize = 57;

/// Attribute bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
/// Attribute bit 5: a control batch (a transaction marker).
pub const CONTROL_FLAG: i16 = 0x20;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
/// Highest known compression codec id (zstd).
const MAX_COMPRESSION_CODEC: i16 = 4;

fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

/// The fixed header of a v2 record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the length field.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// -1 for a batch without a producer (not idempotent).
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses and sanity-checks a v2 header from the first [`HEADER_SIZE`]
    /// bytes of `buf` (which may hold more). Used on data already in the log,
    /// so it checks only what keeps a scan safe: the magic, a length that
    /// covers the header, and a non-negative offset range.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, String> {
        if buf.len() < HEADER_SIZE {
            return Err(format!(
                "{} bytes is shorter than a batch header",
                buf.len()
            ));
        }
        let header = BatchHeader {
            base_offset: i64_at(buf, BASE_OFFSET),
            batch_length: i32_at(buf, LENGTH),
            partition_leader_epoch: i32_at(buf, PARTITION_LEADER_EPOCH),
            magic: buf[MAGIC] as i8,
            crc: u32_at(buf, CRC),
            attributes: i16_at(buf, ATTRIBUTES),
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA),
            base_timestamp: i64_at(buf, BASE_TIMESTAMP),
            max_timestamp: i64_at(buf, MAX_TIMESTAMP),
            producer_id: i64_at(buf, PRODUCER_ID),
            producer_epoch: i16_at(buf, PRODUCER_EPOCH),
            base_sequence: i32_at(buf, BASE_SEQUENCE),
            record_count: i32_at(buf, RECORDS_COUNT),
        };
        if header.magic != MAGIC_V2 {
            return Err(format!("magic {} where 2 was expected", header.magic));
        }
        if (header.batch_length as i64) < (HEADER_SIZE - LOG_OVERHEAD) as i64 {
            return Err(format!(
                "batch length {} is shorter than the header",
                header.batch_length
            ));
        }
        if header.base_offset < 0 || header.last_offset_delta < 0 {
            return Err(format!(
                "invalid offset range: base {} last delta {}",
                header.base_offset, header.last_offset_delta
            ));
        }
        Ok(header)
    }

    /// Total size of the batch in bytes, including offset and length fields.
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_LOG_APPEND != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
}

/// Writes the CRC-32C of a whole batch (`batch` is exactly one batch) into
/// its header, after the host built or edited it.
pub fn set_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Checks the CRC-32C of a whole batch (`batch` is exactly one batch).
pub fn crc_matches(batch: &[u8], header: &BatchHeader) -> bool {
    batch.len() > ATTRIBUTES && crc32c::crc32c(&batch[ATTRIBUTES..]) == header.crc
}

/// The front of a batch the broker rewrites on append, base offset
/// through max timestamp: each prepared batch holds its own copy of it,
/// and the rest of the batch is written from the bytes received.
const REWRITTEN_HEAD: usize = PRODUCER_ID;

/// One batch of a validated append, positioned in
/// [`PreparedAppend::input`], with its head as it will be stored.
#[derive(Clone, Copy, Debug)]
pub struct PreparedBatch {
    pub position: usize,
    pub size: usize,
    pub last_offset_delta: i32,
    /// The batch's max timestamp as it will be stored.
    pub max_timestamp: i64,
    head: [u8; REWRITTEN_HEAD],
}

impl PreparedBatch {
    /// The batch at `position` of `input`, `size` bytes (at least a
    /// header: the callers checked).
    fn at(
        input: &[u8],
        position: usize,
        size: usize,
        last_offset_delta: i32,
        max_timestamp: i64,
    ) -> Result<Self, StorageError> {
        let head = input
            .get(position..)
            .and_then(|batch| batch.first_chunk::<REWRITTEN_HEAD>())
            .ok_or_else(|| {
                StorageError::CorruptMessage(format!(
                    "batch at position {position} is shorter than its header"
                ))
            })?;
        Ok(PreparedBatch {
            position,
            size,
            last_offset_delta,
            max_timestamp,
            head: *head,
        })
    }

    /// The base offset written in the batch (assigned, or kept from the
    /// leader by a follower).
    pub fn base_offset(&self) -> i64 {
        i64_at(&self.head, BASE_OFFSET)
    }

    pub fn leader_epoch(&self) -> i32 {
        i32_at(&self.head, PARTITION_LEADER_EPOCH)
    }
}

/// Batches that passed validation, to be stored as received except for
/// their heads (base offset, leader epoch, timestamp type, max timestamp
/// and CRC), which each [`PreparedBatch`] holds rewritten; the base
/// offsets are set by [`PreparedAppend::assign_offsets`] under the
/// partition's append lock. The records are not copied: a produced
/// megabyte is written to the segment from the request's own buffer.
#[derive(Debug)]
pub struct PreparedAppend<'a> {
    /// The batches as received (or as up-converted from v0/v1 messages).
    input: Cow<'a, [u8]>,
    pub batches: Vec<PreparedBatch>,
    pub record_count: u64,
    /// Records the offsets consume: the sum of `lastOffsetDelta + 1`.
    pub offset_count: i64,
}

impl PreparedAppend<'_> {
    /// Writes consecutive base offsets starting at `first_offset` and returns
    /// the last offset assigned.
    pub fn assign_offsets(&mut self, first_offset: i64) -> i64 {
        let mut next = first_offset;
        for b in &mut self.batches {
            b.head[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&next.to_be_bytes());
            next = next.saturating_add(i64::from(b.last_offset_delta) + 1);
        }
        next - 1
    }

    /// Writes `epoch` as every batch's partition leader epoch (outside the
    /// CRC, which is unchanged): the leader stamps its epoch under the
    /// partition's append lock, like the offsets.
    pub fn stamp_leader_epoch(&mut self, epoch: i32) {
        for b in &mut self.batches {
            b.head[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
                .copy_from_slice(&epoch.to_be_bytes());
        }
    }

    /// The bytes the batches take in the log.
    pub fn stored_len(&self) -> usize {
        self.batches.last().map_or(0, |b| b.position + b.size)
    }

    /// The stored bytes, in order, for one vectored write: each batch's
    /// head, then the rest of it as received.
    pub fn io_slices(&self) -> Vec<std::io::IoSlice<'_>> {
        let mut slices = Vec::with_capacity(self.batches.len() * 2);
        for b in &self.batches {
            slices.push(std::io::IoSlice::new(&b.head));
            slices.push(std::io::IoSlice::new(
                &self.input[b.position + REWRITTEN_HEAD..b.position + b.size],
            ));
        }
        slices
    }

    /// The stored bytes in one buffer (a copy).
    #[cfg(test)]
    pub fn to_bytes(&self) -> Vec<u8> {
        self.io_slices()
            .iter()
            .flat_map(|slice| slice.iter().copied())
            .collect()
    }
}

/// Prepares batches a follower fetched from its leader, to be stored with
/// the leader's offsets and epochs (Kafka's `appendAsFollower`): the leader
/// validated their content, so only what keeps the log readable is checked
/// (v2 framing, CRC-32C, offsets that grow). Compaction may have left
/// fewer records than offsets, so counts are not checked. A partial batch
/// at the end (a leader may cut a response mid-batch) is left out.
pub fn prepare_replicated(input: &[u8]) -> Result<PreparedAppend<'_>, StorageError> {
    let mut batches = Vec::new();
    let mut record_count = 0u64;
    let mut next_offset: Option<i64> = None;
    let mut pos = 0usize;
    while input.len() - pos >= HEADER_SIZE {
        let rest = &input[pos..];
        let header = BatchHeader::parse(rest).map_err(StorageError::CorruptMessage)?;
        let size = header.size();
        if size > rest.len() {
            break;
        }
        if !crc_matches(&rest[..size], &header) {
            return Err(StorageError::CorruptMessage(format!(
                "CRC-32C mismatch in the replicated batch at offset {}",
                header.base_offset
            )));
        }
        if next_offset.is_some_and(|next| header.base_offset < next) {
            return Err(StorageError::CorruptMessage(format!(
                "replicated batch offset {} is below the previous batch's end",
                header.base_offset
            )));
        }
        next_offset = Some(header.next_offset());
        record_count += u64::try_from(header.record_count).unwrap_or(0);
        batches.push(PreparedBatch::at(
            input,
            pos,
            size,
            header.last_offset_delta,
            header.max_timestamp,
        )?);
        pos += size;
    }
    let offset_count = match (batches.first(), next_offset) {
        (Some(first), Some(next)) => next - i64_at(input, first.position + BASE_OFFSET),
        _ => 0,
    };
    Ok(PreparedAppend {
        input: Cow::Borrowed(&input[..pos]),
        batches,
        record_count,
        offset_count,
    })
}

/// Validates every batch in `input` and prepares the bytes to store; nothing
/// is written by this function, so an error here means nothing is appended.
///
/// `log_append_time` is `Some(now_ms)` when the topic uses LogAppendTime;
/// `compact` when it is compacted (every record needs a key).
pub fn prepare_append(
    input: &[u8],
    max_message_bytes: usize,
    log_append_time: Option<i64>,
    compact: bool,
) -> Result<PreparedAppend<'_>, StorageError> {
    let rules = validate::Rules {
        compact,
        decompressed_limit: codec::limit_for(max_message_bytes),
    };
    if input.is_empty() {
        return Err(StorageError::InvalidRecord(
            "the append holds no record batches".into(),
        ));
    }
    // Produce v0-2's message sets become one v2 batch, validated below
    // like any other (Kafka 3.9's LogValidator converts on append).
    let input = if legacy_format::is_legacy(input) {
        let converted =
            legacy_format::up_convert(input, max_message_bytes, rules.decompressed_limit)?;
        Cow::Owned(converted)
    } else {
        Cow::Borrowed(input)
    };

    // Pass 1: framing and size limits (cheap, before any CRC work).
    let mut frames = Vec::new();
    let mut pos = 0usize;
    while pos < input.len() {
        let rest = &input[pos..];
        if rest.len() <= MAGIC {
            return Err(StorageError::CorruptMessage(format!(
                "{} trailing bytes at position {pos} are not a record batch",
                rest.len()
            )));
        }
        let length = i32_at(rest, LENGTH);
        let size = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            .ok_or_else(|| {
                StorageError::CorruptMessage(format!(
                    "negative batch length {length} at position {pos}"
                ))
            })?;
        if size > rest.len() {
            return Err(StorageError::CorruptMessage(format!(
                "batch at position {pos} claims {size} bytes but only {} remain",
                rest.len()
            )));
        }
        match rest[MAGIC] as i8 {
            MAGIC_V2 => {}
            m @ (0 | 1) => {
                return Err(StorageError::InvalidRecord(format!(
                    "a magic v{m} message after a magic v2 batch (every batch of an append has the first one's magic)"
                )))
            }
            m => {
                return Err(StorageError::CorruptMessage(format!(
                    "unknown magic {m} at position {pos}"
                )))
            }
        }
        if size < HEADER_SIZE {
            return Err(StorageError::CorruptMessage(format!(
                "batch at position {pos} is {size} bytes, shorter than its header"
            )));
        }
        if size > max_message_bytes {
            return Err(StorageError::MessageTooLarge(format!(
                "a record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )));
        }
        frames.push((pos, size));
        pos += size;
    }
    if input.len() > max_message_bytes {
        return Err(StorageError::MessageTooLarge(format!(
            "the append of {} bytes exceeds max.message.bytes {max_message_bytes}",
            input.len()
        )));
    }

    // Pass 2: content of each batch.
    let mut batches = Vec::with_capacity(frames.len());
    let mut record_count = 0u64;
    let mut offset_count = 0i64;
    for &(position, size) in &frames {
        let bytes = &input[position..position + size];
        let header = BatchHeader::parse(bytes).map_err(StorageError::CorruptMessage)?;
        if !crc_matches(bytes, &header) {
            return Err(StorageError::CorruptMessage(format!(
                "CRC-32C mismatch in the batch at position {position}: stored {:#010x}, computed {:#010x}",
                header.crc,
                crc32c::crc32c(&bytes[ATTRIBUTES..])
            )));
        }
        if header.record_count <= 0 {
            return Err(StorageError::InvalidRecord(format!(
                "invalid record count {} in the batch at position {position}",
                header.record_count
            )));
        }
        if i64::from(header.last_offset_delta) + 1 != i64::from(header.record_count) {
            return Err(StorageError::InvalidRecord(format!(
                "inconsistent batch: last offset delta {} but {} records",
                header.last_offset_delta, header.record_count
            )));
        }
        let codec = header.compression();
        if codec > MAX_COMPRESSION_CODEC {
            return Err(StorageError::InvalidRecord(format!(
                "unknown compression codec {codec}"
            )));
        }
        let max_timestamp = validate::records(bytes, &header, rules)?;
        record_count += header.record_count as u64;
        offset_count += i64::from(header.last_offset_delta) + 1;
        batches.push(PreparedBatch::at(
            &input,
            position,
            size,
            header.last_offset_delta,
            max_timestamp,
        )?);
    }

    // Pass 3: rewrite the broker-owned fields of each head (the records
    // are written as received).
    for b in &mut batches {
        let head = &mut b.head;
        head[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4]
            .copy_from_slice(&0i32.to_be_bytes());
        let attributes = i16_at(head, ATTRIBUTES);
        let (new_attributes, new_max) = match log_append_time {
            Some(now) => (attributes | TIMESTAMP_TYPE_LOG_APPEND, now),
            None => (attributes & !TIMESTAMP_TYPE_LOG_APPEND, b.max_timestamp),
        };
        if new_attributes != attributes || new_max != i64_at(head, MAX_TIMESTAMP) {
            head[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&new_attributes.to_be_bytes());
            head[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&new_max.to_be_bytes());
            let rest = &input[b.position + REWRITTEN_HEAD..b.position + b.size];
            let crc = crc32c::crc32c_append(crc32c::crc32c(&head[ATTRIBUTES..]), rest);
            head[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        }
        b.max_timestamp = new_max;
    }

    Ok(PreparedAppend {
        input,
        batches,
        record_count,
        offset_count,
    })
}

/// What the host reads of a record: where it sits in the batch's offsets,
/// its timestamp, and where its key, value and headers are in the batch
/// (the cleaner needs keys; everything else only offsets and timestamps).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    pub offset_delta: i32,
    pub timestamp: i64,
    pub attributes: u8,
    /// `None` for a null key.
    pub key: Option<std::ops::Range<usize>>,
    /// `None` for a null value (a tombstone).
    pub value: Option<std::ops::Range<usize>>,
    /// The header count and headers, as encoded.
    pub headers: std::ops::Range<usize>,
}

/// Iterates the records of an *uncompressed* batch, checking each record's
/// framing. Yields at most `recordCount` records, then an error if bytes
/// remain.
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    base_timestamp: i64,
    remaining: i64,
    failed: bool,
}

impl<'a> Records<'a> {
    /// `batch` is one whole uncompressed batch (header included); ranges in
    /// the records are positions in `batch`.
    pub fn new(batch: &'a [u8], header: &BatchHeader) -> Records<'a> {
        Records {
            buf: batch,
            pos: HEADER_SIZE.min(batch.len()),
            base_timestamp: header.base_timestamp,
            remaining: i64::from(header.record_count.max(0)),
            failed: false,
        }
    }

    /// The records of a batch's records section (see [`record_section`]);
    /// ranges in the records are positions in `section`.
    pub fn in_section(section: &'a [u8], header: &BatchHeader) -> Records<'a> {
        Records {
            buf: section,
            pos: 0,
            base_timestamp: header.base_timestamp,
            remaining: i64::from(header.record_count.max(0)),
            failed: false,
        }
    }

    #[inline]
    fn next_record(&mut self) -> Result<RecordInfo, String> {
        match scan_record(self.buf, self.pos, self.base_timestamp) {
            Some((record, end)) => {
                self.pos = end;
                Ok(record)
            }
            None => self.malformed_record(),
        }
    }

    /// [`Records::next_record`] for a record [`scan_record`] refused: the
    /// same walk, saying what is wrong.
    #[cold]
    fn malformed_record(&mut self) -> Result<RecordInfo, String> {
        let length = read_varint(self.buf, &mut self.pos)?;
        let length =
            usize::try_from(length).map_err(|_| format!("negative record length {length}"))?;
        let end = self
            .pos
            .checked_add(length)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("record of {length} bytes overruns the batch"))?;
        let body = &self.buf[..end];
        let mut p = self.pos;
        if p >= end {
            return Err("empty record".into());
        }
        let attributes = body[p];
        p += 1;
        let timestamp_delta = read_varlong(body, &mut p)?;
        let offset_delta = read_varint(body, &mut p)?;
        let key = skip_bytes(body, &mut p, "key", true)?;
        let value = skip_bytes(body, &mut p, "value", true)?;
        let headers_start = p;
        let headers = read_varint(body, &mut p)?;
        if headers < 0 {
            return Err(format!("negative header count {headers}"));
        }
        for _ in 0..headers {
            skip_bytes(body, &mut p, "header key", false)?;
            skip_bytes(body, &mut p, "header value", true)?;
        }
        if p != end {
            return Err(format!(
                "record declares {length} bytes but its fields take {}",
                p - self.pos
            ));
        }
        self.pos = end;
        Ok(RecordInfo {
            offset_delta,
            timestamp: self.base_timestamp.wrapping_add(timestamp_delta),
            attributes,
            key,
            value,
            headers: headers_start..end,
        })
    }
}

/// The record at `start` of `buf` and where it ends, or `None` if it is
/// malformed in any way: the fast path of validation, which reads every
/// record of every produced batch. Nothing but positions and `Option`s,
/// so the compiler keeps it in registers (an error `String` in every
/// field's result made it spill each one); the refused record is walked
/// again by [`Records::malformed_record`] for the message.
#[inline]
fn scan_record(buf: &[u8], start: usize, base_timestamp: i64) -> Option<(RecordInfo, usize)> {
    let mut p = start;
    let length = usize::try_from(varint(buf, &mut p)?).ok()?;
    let end = p.checked_add(length).filter(|&end| end <= buf.len())?;
    let body = buf.get(..end)?;
    let attributes = *body.get(p)?;
    p += 1;
    let timestamp_delta = varlong(body, &mut p)?;
    let offset_delta = varint(body, &mut p)?;
    let key = field(body, &mut p)?;
    let value = field(body, &mut p)?;
    let headers_start = p;
    let headers = varint(body, &mut p)?;
    for _ in 0..headers {
        field(body, &mut p)??;
        field(body, &mut p)?;
    }
    (p == end && headers >= 0).then_some((
        RecordInfo {
            offset_delta,
            timestamp: base_timestamp.wrapping_add(timestamp_delta),
            attributes,
            key,
            value,
            headers: headers_start..end,
        },
        end,
    ))
}

/// A length-prefixed field of a record for [`scan_record`]: `Some(None)`
/// for a null one (length -1), `None` if it is malformed.
#[inline]
fn field(body: &[u8], p: &mut usize) -> Option<Option<std::ops::Range<usize>>> {
    let len = varint(body, p)?;
    if len == -1 {
        return Some(None);
    }
    let start = *p;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    if end > body.len() {
        return None;
    }
    *p = end;
    Some(Some(start..end))
}

impl Iterator for Records<'_> {
    type Item = Result<RecordInfo, String>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining == 0 {
            if self.pos < self.buf.len() {
                self.failed = true;
                return Some(Err(format!(
                    "{} bytes after the last record",
                    self.buf.len() - self.pos
                )));
            }
            return None;
        }
        if self.pos >= self.buf.len() {
            self.failed = true;
            return Some(Err(format!("{} records missing", self.remaining)));
        }
        self.remaining -= 1;
        let r = self.next_record();
        self.failed = r.is_err();
        Some(r)
    }
}

/// Calls `visit` with the offset and timestamp of each record of a stored
/// batch, in order, until it returns true. A compressed batch is walked as
/// a stream (bounded by [`codec::MAX_DECOMPRESSED`]); `Err` if the records
/// cannot be read.
fn scan_records(
    batch: &[u8],
    header: &BatchHeader,
    mut visit: impl FnMut(i64, i64) -> bool,
) -> Result<(), ()> {
    let offset = |delta: i32| header.base_offset.saturating_add(i64::from(delta));
    match header.compression() {
        0 => {
            for record in Records::new(batch, header) {
                let record = record.map_err(drop)?;
                if visit(offset(record.offset_delta), record.timestamp) {
                    break;
                }
            }
        }
        codec => {
            let body = batch.get(HEADER_SIZE..).unwrap_or_default();
            let stream = codec::reader(codec, body, codec::MAX_DECOMPRESSED).map_err(drop)?;
            for record in RecordStream::new(stream, header) {
                let record = record.map_err(drop)?;
                if visit(offset(record.offset_delta), record.timestamp) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// The `(offset, timestamp)` of the first record of a stored batch whose
/// timestamp is at or after `target` and whose offset is at least
/// `min_offset` (the log start offset); the caller picked the batch because
/// its max timestamp qualifies. `None` if no record of the batch does.
///
/// With LogAppendTime every record carries the batch's max timestamp, so the
/// first record (at or after `min_offset`) answers. A compressed batch is
/// walked as it decompresses; one that cannot be answers with its first
/// offset, with its first timestamp if that qualifies, else its max.
pub fn first_record_at_or_after(
    batch: &[u8],
    header: &BatchHeader,
    target: i64,
    min_offset: i64,
) -> Option<(i64, i64)> {
    let base = header.base_offset;
    if header.last_offset() < min_offset {
        return None;
    }
    let first = base.max(min_offset);
    if header.is_log_append_time() {
        return Some((first, header.max_timestamp));
    }
    let mut found = None;
    let scanned = scan_records(batch, header, |offset, timestamp| {
        if timestamp >= target && offset >= min_offset {
            found = Some((offset, timestamp));
        }
        found.is_some()
    });
    if scanned.is_ok() || found.is_some() {
        return found;
    }
    if header.base_timestamp >= target {
        Some((first, header.base_timestamp))
    } else {
        Some((first, header.max_timestamp))
    }
}

/// The records section of a whole batch: the bytes after the header, or
/// what they decompress to, at most `limit` bytes (the cleaner, which
/// rewrites records, holds them in memory).
pub fn record_section<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
    limit: usize,
) -> Result<std::borrow::Cow<'a, [u8]>, String> {
    let body = batch.get(HEADER_SIZE..).unwrap_or_default();
    match header.compression() {
        0 => Ok(std::borrow::Cow::Borrowed(body)),
        codec => codec::decompress(codec, body, limit)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| e.to_string()),
    }
}

/// The `(offset, timestamp)` of the first record carrying a stored batch's
/// max timestamp. With LogAppendTime that is the first record; a compressed
/// batch is walked as it decompresses (one that cannot be answers with its
/// last offset).
pub fn record_with_max_timestamp(batch: &[u8], header: &BatchHeader) -> (i64, i64) {
    let max = header.max_timestamp;
    if header.is_log_append_time() {
        return (header.base_offset, max);
    }
    let mut found = None;
    let scanned = scan_records(batch, header, |offset, timestamp| {
        if timestamp == max {
            found = Some(offset);
        }
        found.is_some()
    });
    match (scanned, found) {
        (_, Some(offset)) => (offset, max),
        // Not there, or unreadable records: the batch's last offset.
        (Ok(()) | Err(()), None) => (header.last_offset(), max),
    }
}

/// Skips a varint-length-prefixed byte field; -1 means null where allowed.
/// Returns where the bytes are (`None` for null).
#[inline]
fn skip_bytes(
    buf: &[u8],
    pos: &mut usize,
    what: &str,
    nullable: bool,
) -> Result<Option<std::ops::Range<usize>>, String> {
    let len = read_varint(buf, pos)?;
    if len == -1 && nullable {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| format!("invalid {what} length {len}"))?;
    match pos.checked_add(len) {
        Some(end) if end <= buf.len() => {
            let start = *pos;
            *pos = end;
            Ok(Some(start..end))
        }
        _ => Err(format!("{what} of {len} bytes overruns the record")),
    }
}

/// Test support: a small encoder of v2 record batches, written from the
/// Kafka protocol spec, so tests feed the log real bytes.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::log::batch_writer::{put_record, NewBatch};
    use crate::log::varint::{put_bytes, put_varint};

    /// A record to encode.
    #[derive(Clone, Debug)]
    pub struct Rec {
        pub timestamp: i64,
        pub key: Option<Vec<u8>>,
        pub value: Option<Vec<u8>>,
        pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    }

    impl Rec {
        pub fn new(timestamp: i64, value: &[u8]) -> Rec {
            Rec {
                timestamp,
                key: None,
                value: Some(value.to_vec()),
                headers: Vec::new(),
            }
        }
    }

    /// Encodes an uncompressed batch with base offset 0.
    pub fn encode_batch(records: &[Rec]) -> Vec<u8> {
        encode_batch_with(0, records)
    }

    /// Encodes a batch with the given attributes, records written plainly
    /// (see [`compressed_batch`] for a real compressed one).
    pub fn encode_batch_with(attributes: i16, records: &[Rec]) -> Vec<u8> {
        let base_ts = records.first().map_or(0, |r| r.timestamp);
        let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
        let mut body = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let mut rec = vec![0u8]; // attributes
            put_varint(&mut rec, r.timestamp - base_ts);
            put_varint(&mut rec, i as i64);
            put_bytes(&mut rec, r.key.as_deref());
            put_bytes(&mut rec, r.value.as_deref());
            put_varint(&mut rec, r.headers.len() as i64);
            for (k, v) in &r.headers {
                put_bytes(&mut rec, Some(k));
                put_bytes(&mut rec, v.as_deref());
            }
            put_record(&mut body, &rec);
        }
        NewBatch {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes,
            last_offset_delta: records.len() as i32 - 1,
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            record_count: records.len() as i32,
        }
        .write(&body)
    }

    /// The same batch with its records section gzip-compressed (codec 1).
    pub fn gzip_batch(plain: &[u8]) -> Vec<u8> {
        compressed_batch(plain, 1)
    }

    /// The same batch with its records section compressed with `codec`.
    pub fn compressed_batch(plain: &[u8], codec: i16) -> Vec<u8> {
        let body = crate::log::codec::testing::compress(codec, &plain[HEADER_SIZE..]);
        let mut b = plain[..HEADER_SIZE].to_vec();
        b.extend_from_slice(&body);
        let length = (b.len() - LOG_OVERHEAD) as i32;
        b[LENGTH..LENGTH + 4].copy_from_slice(&length.to_be_bytes());
        let attributes = i16_at(&b, ATTRIBUTES) & !COMPRESSION_MASK | codec;
        b[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        fix_crc(&mut b);
        b
    }

    /// Recomputes the CRC of one batch after a test edits it.
    pub fn fix_crc(batch: &mut [u8]) {
        set_crc(batch);
    }

    /// `n` records of `value_len` bytes with timestamps `ts, ts+1, ...`.
    pub fn simple_batch(n: usize, value_len: usize, ts: i64) -> Vec<u8> {
        let recs: Vec<Rec> = (0..n)
            .map(|i| Rec::new(ts + i as i64, &vec![b'a' + (i % 26) as u8; value_len]))
            .collect();
        encode_batch(&recs)
    }

    /// Splits stored bytes into batch headers (panics on bad data: tests only).
    pub fn headers(mut bytes: &[u8]) -> Vec<BatchHeader> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let h = BatchHeader::parse(bytes).unwrap();
            assert!(crc_matches(&bytes[..h.size()], &h), "stored batch CRC");
            bytes = &bytes[h.size()..];
            out.push(h);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    const MAX: usize = 1 << 20;

    /// The fast record walk and the checked one agree on every record of
    /// batches damaged at every byte: the same record where the fast one
    /// reads one, an error from the checked one where it does not.
    #[test]
    fn the_fast_record_walk_agrees_with_the_checked_one() {
        let mut recs = vec![
            Rec::new(1_700_000_000_000, b"value"),
            Rec::new(1_700_000_000_500, &[7u8; 300]),
        ];
        recs[0].key = Some(b"key".to_vec());
        recs[1].headers = vec![(b"h".to_vec(), Some(b"v".to_vec())), (b"n".to_vec(), None)];
        let batch = encode_batch(&recs);
        let header = BatchHeader::parse(&batch).unwrap();
        let mut fast_reads = 0;
        for at in HEADER_SIZE..batch.len() {
            for byte in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut damaged = batch.clone();
                damaged[at] = byte;
                let mut pos = HEADER_SIZE;
                while pos < damaged.len() {
                    let mut checked = Records::new(&damaged, &header);
                    checked.pos = pos;
                    let slow = checked.malformed_record();
                    match scan_record(&damaged, pos, header.base_timestamp) {
                        Some((record, end)) => {
                            fast_reads += 1;
                            assert_eq!(slow, Ok(record), "at {at} = {byte:#x}");
                            assert_eq!(checked.pos, end);
                            pos = end;
                        }
                        None => {
                            assert!(slow.is_err(), "at {at} = {byte:#x}: {slow:?}");
                            break;
                        }
                    }
                }
            }
        }
        assert!(fast_reads > batch.len(), "{fast_reads} records read");
    }

    #[test]
    fn valid_batch_is_prepared() {
        let mut rec = Rec::new(1000, b"v");
        rec.key = Some(b"k".to_vec());
        rec.headers.push((b"h".to_vec(), None));
        let batch = encode_batch(&[rec, Rec::new(1005, b"w"), Rec::new(1002, b"x")]);
        let mut p = prepare_append(&batch, MAX, None, false).unwrap();
        assert_eq!(p.record_count, 3);
        assert_eq!(p.offset_count, 3);
        assert_eq!(p.batches[0].max_timestamp, 1005);
        assert_eq!(p.assign_offsets(42), 44);
        let bytes = p.to_bytes();
        let h = headers(&bytes);
        assert_eq!(h[0].base_offset, 42);
        assert_eq!(h[0].partition_leader_epoch, 0);
        let recs: Vec<_> = Records::new(&bytes, &h[0]).map(|r| r.unwrap()).collect();
        assert_eq!(
            recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
            vec![1000, 1005, 1002]
        );
    }

    #[test]
    fn log_append_time_rewrites_timestamp_and_crc() {
        let batch = simple_batch(2, 10, 5);
        let p = prepare_append(&batch, MAX, Some(99_999), false).unwrap();
        let h = headers(&p.to_bytes());
        assert!(h[0].is_log_append_time());
        assert_eq!(h[0].max_timestamp, 99_999);
        assert_eq!(p.batches[0].max_timestamp, 99_999);
    }

    #[test]
    fn wrong_max_timestamp_is_corrected_for_uncompressed() {
        let mut batch = simple_batch(3, 1, 100);
        batch[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&7i64.to_be_bytes());
        fix_crc(&mut batch);
        let p = prepare_append(&batch, MAX, None, false).unwrap();
        assert_eq!(headers(&p.to_bytes())[0].max_timestamp, 102);
    }

    #[test]
    fn rejections() {
        let good = simple_batch(2, 10, 0);
        let err = |input: &[u8]| prepare_append(input, MAX, None, false).unwrap_err();

        assert!(matches!(err(&[]), StorageError::InvalidRecord(_)));
        assert!(matches!(
            err(&good[..good.len() - 1]),
            StorageError::CorruptMessage(_)
        ));
        let mut two = good.clone();
        two.extend_from_slice(&good[..20]);
        assert!(matches!(err(&two), StorageError::CorruptMessage(_)));

        let mut bad_crc = good.clone();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0xff;
        assert!(matches!(err(&bad_crc), StorageError::CorruptMessage(_)));

        // A v2 batch with magic 1 is read as a legacy message whose CRC
        // does not match.
        let mut v1 = good.clone();
        v1[MAGIC] = 1;
        assert!(matches!(err(&v1), StorageError::CorruptMessage(_)));
        let mut then_v1 = good.clone();
        then_v1.extend_from_slice(&v1);
        assert!(matches!(err(&then_v1), StorageError::InvalidRecord(_)));
        let mut v9 = good.clone();
        v9[MAGIC] = 9;
        assert!(matches!(err(&v9), StorageError::CorruptMessage(_)));

        let mut neg = good.clone();
        neg[LENGTH..LENGTH + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(err(&neg), StorageError::CorruptMessage(_)));

        let mut count = good.clone();
        count[RECORDS_COUNT..RECORDS_COUNT + 4].copy_from_slice(&3i32.to_be_bytes());
        fix_crc(&mut count);
        assert!(matches!(err(&count), StorageError::InvalidRecord(_)));

        let mut zero = good.clone();
        zero[RECORDS_COUNT..RECORDS_COUNT + 4].copy_from_slice(&0i32.to_be_bytes());
        fix_crc(&mut zero);
        assert!(matches!(err(&zero), StorageError::InvalidRecord(_)));

        // Count and delta agree, but the records section holds fewer records.
        let mut short = good.clone();
        short[RECORDS_COUNT..RECORDS_COUNT + 4].copy_from_slice(&3i32.to_be_bytes());
        short[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4].copy_from_slice(&2i32.to_be_bytes());
        fix_crc(&mut short);
        assert!(matches!(err(&short), StorageError::InvalidRecord(_)));

        let mut codec = good.clone();
        codec[ATTRIBUTES + 1] |= 7;
        fix_crc(&mut codec);
        assert!(matches!(err(&codec), StorageError::InvalidRecord(_)));

        assert!(matches!(
            prepare_append(&good, good.len() - 1, None, false).unwrap_err(),
            StorageError::MessageTooLarge(_)
        ));
        let mut pair = good.clone();
        pair.extend_from_slice(&good);
        assert!(matches!(
            prepare_append(&pair, good.len() + 1, None, false).unwrap_err(),
            StorageError::MessageTooLarge(_)
        ));
    }

    #[test]
    fn compressed_batches_are_validated_and_stored_as_sent() {
        let plain = encode_batch(&[Rec::new(10, b"x"), Rec::new(20, b"y")]);
        for codec in 1..=4 {
            let batch = compressed_batch(&plain, codec);
            let p = prepare_append(&batch, MAX, None, false).unwrap();
            assert_eq!(p.to_bytes(), batch_with_epoch0(&batch), "{codec}");
            assert_eq!(p.batches[0].max_timestamp, 20);
        }
        // The max timestamp comes from the records, as for plain batches.
        let mut wrong = compressed_batch(&plain, 3);
        wrong[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&99i64.to_be_bytes());
        fix_crc(&mut wrong);
        let p = prepare_append(&wrong, MAX, None, false).unwrap();
        assert_eq!(headers(&p.to_bytes())[0].max_timestamp, 20);
        // The compression bit on plain records is refused.
        let fake = encode_batch_with(1, &[Rec::new(10, b"x"), Rec::new(20, b"y")]);
        assert!(matches!(
            prepare_append(&fake, MAX, None, false).unwrap_err(),
            StorageError::Decompression(_)
        ));
        // Keys inside a compressed batch on a compacted topic.
        assert!(matches!(
            prepare_append(&compressed_batch(&plain, 2), MAX, None, true).unwrap_err(),
            StorageError::RecordErrors(_)
        ));
    }

    fn batch_with_epoch0(batch: &[u8]) -> Vec<u8> {
        let mut b = batch.to_vec();
        b[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4].copy_from_slice(&0i32.to_be_bytes());
        b
    }
}
