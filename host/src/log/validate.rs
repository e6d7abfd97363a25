//! Record-level validation of a batch before it is appended, after Kafka's
//! `LogValidator`: a stored batch is served verbatim to every consumer, so
//! one that a client cannot decode (a librdkafka consumer stops for good at
//! it with `_BAD_COMPRESSION`) must never be acknowledged.
//!
//! `batch::prepare_append` has checked the framing, magic, CRC, sizes and
//! `recordCount == lastOffsetDelta + 1` (Kafka's `analyzeAndValidateRecords`
//! and `validateBatch`); [`records`] then walks the records, decompressing
//! a compressed batch as a stream bounded by `codec::limit_for`:
//! the records must frame exactly, be `recordCount` many with offset deltas
//! 0, 1, ..., n-1, and on a compacted topic carry keys. It returns the
//! largest record timestamp, which becomes the stored max timestamp (Kafka
//! sets it from the records for compressed batches too).
//!
//! [`client_batches`] holds the rules for batches from clients only (Kafka's
//! `AppendOrigin.CLIENT`): no control batches, and a producer id needs a
//! base sequence. Markers the coordinator writes skip them.
//!
//! Errors are Kafka's: framing inside the records, counts, offsets and
//! the client rules are INVALID_RECORD (`InvalidRecordException`); records
//! refused for their own content (a keyless record on a compacted topic)
//! are collected over the whole batch and refused together as
//! [`RecordErrors`] (Kafka's `RecordValidationException`: INVALID_RECORD
//! with each record's batch index and message, KIP-467), so the producer
//! fails exactly those records and the others as "a different record"; a
//! stream that does not decompress is CORRUPT_MESSAGE (Kafka's record
//! iterator wraps the codec's `IOException` in a plain `KafkaException`,
//! which its clients see as UNKNOWN_SERVER_ERROR, a broker fault; here the
//! batch is said to be corrupt, as for a bad CRC); a batch expanding past
//! the limit is MESSAGE_TOO_LARGE (Kafka has no such limit; this is the
//! error it gives a batch too large).
//!
//! One deviation: Kafka rewrites a compressed batch whose inner offsets are
//! not 0..n-1 (old clients) and ignores them in an uncompressed one; the
//! host stores batches verbatim, so it refuses them instead. Every v2
//! producer writes consecutive deltas.

use super::batch::{BatchHeader, Records, HEADER_SIZE};
use super::codec::{self, CodecError};
use super::record_stream::{RecordStream, StreamError};
use super::StorageError;

/// One record refused for its own content, as Kafka's
/// `ProduceResponse.RecordError`: its index in the batch and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// The records of a batch refused for their own content, in batch order:
/// the first [`MAX_RECORD_ERRORS`] of `total`. (Kafka lists them all; a
/// batch may hold millions of tiny records, so the host and the module
/// keep a bounded list, and the producer fails the records past it as "a
/// different record", which fails them all the same.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordErrors {
    pub errors: Vec<RecordError>,
    pub total: usize,
}

/// How many record errors a refused batch names.
pub const MAX_RECORD_ERRORS: usize = 1000;

impl RecordErrors {
    /// Kafka's message for the whole batch (`LogValidator.processRecordErrors`).
    pub fn summary(&self) -> String {
        let shown: Vec<String> = self
            .errors
            .iter()
            .take(3)
            .map(|e| {
                format!(
                    "RecordError(batchIndex={}, message='{}')",
                    e.batch_index, e.message
                )
            })
            .collect();
        format!(
            "One or more records have been rejected due to {} record errors in total, and only \
             showing the first three errors at most: [{}]",
            self.total,
            shown.join(", ")
        )
    }
}

/// What the records of a batch must satisfy beyond their framing.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// The topic is compacted: every record needs a key.
    pub compact: bool,
    /// The most the records section may decompress to.
    pub decompressed_limit: usize,
}

/// Walks the records of one whole batch (`batch`, with `header` parsed from
/// it) and returns their largest timestamp.
pub fn records(batch: &[u8], header: &BatchHeader, rules: Rules) -> Result<i64, StorageError> {
    let mut check = Check::new(header, rules.compact);
    match header.compression() {
        0 => {
            for record in Records::new(batch, header) {
                let record = record.map_err(StorageError::InvalidRecord)?;
                check.record(record.offset_delta, record.timestamp, record.key.is_some())?;
            }
        }
        codec => {
            let body = batch.get(HEADER_SIZE..).unwrap_or_default();
            let stream =
                codec::reader(codec, body, rules.decompressed_limit).map_err(codec_error)?;
            for record in RecordStream::new(stream, header) {
                let record = record.map_err(|e| match e {
                    StreamError::Codec(e) => codec_error(e),
                    StreamError::Invalid(m) => StorageError::InvalidRecord(m),
                })?;
                check.record(record.offset_delta, record.timestamp, record.has_key)?;
            }
        }
    }
    check.finish()
}

/// The Kafka error for a records section that cannot be decompressed.
pub fn codec_error(e: CodecError) -> StorageError {
    match e {
        CodecError::Corrupt(m) => StorageError::Decompression(m),
        e @ CodecError::TooLarge { .. } => StorageError::MessageTooLarge(e.to_string()),
    }
}

/// The per-record rules, the same for both walkers.
struct Check {
    count: i64,
    compact: bool,
    seen: i64,
    max_timestamp: i64,
    record_errors: Vec<RecordError>,
    record_error_count: usize,
}

impl Check {
    fn new(header: &BatchHeader, compact: bool) -> Check {
        Check {
            count: i64::from(header.record_count),
            compact,
            seen: 0,
            max_timestamp: i64::MIN,
            record_errors: Vec::new(),
            record_error_count: 0,
        }
    }

    fn record(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        has_key: bool,
    ) -> Result<(), StorageError> {
        if i64::from(offset_delta) != self.seen {
            return Err(StorageError::InvalidRecord(format!(
                "record {} has offset delta {offset_delta}",
                self.seen
            )));
        }
        if self.compact && !has_key {
            self.record_error_count += 1;
            if self.record_errors.len() < MAX_RECORD_ERRORS {
                self.record_errors.push(RecordError {
                    batch_index: offset_delta,
                    message: "Compacted topic cannot accept message without key".into(),
                });
            }
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.seen += 1;
        Ok(())
    }

    fn finish(self) -> Result<i64, StorageError> {
        if self.seen != self.count {
            return Err(StorageError::InvalidRecord(format!(
                "the batch declares {} records but holds {}",
                self.count, self.seen
            )));
        }
        if self.record_error_count > 0 {
            return Err(StorageError::RecordErrors(RecordErrors {
                errors: self.record_errors,
                total: self.record_error_count,
            }));
        }
        Ok(self.max_timestamp)
    }
}

/// The rules Kafka applies only to batches from clients: a client may not
/// write control batches (transaction markers are the coordinator's), and
/// a batch with a producer id must carry a base sequence. `input` is
/// already framed into whole batches by the caller or is refused later.
pub fn client_batches(input: &[u8]) -> Result<(), StorageError> {
    let mut rest = input;
    while let Ok(header) = BatchHeader::parse(rest) {
        if header.is_control() {
            return Err(StorageError::InvalidRecord(
                "Clients are not allowed to write control records".into(),
            ));
        }
        if header.producer_id >= 0 && header.base_sequence < 0 {
            return Err(StorageError::InvalidRecord(format!(
                "Invalid sequence number {} in record batch with producerId {}",
                header.base_sequence, header.producer_id
            )));
        }
        match rest.get(header.size()..) {
            Some(next) => rest = next,
            None => break,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::{compressed_batch, encode_batch, fix_crc, simple_batch, Rec};
    use crate::log::batch::{CONTROL_FLAG, LOG_OVERHEAD};
    use crate::log::codec::testing::compress;

    const RULES: Rules = Rules {
        compact: false,
        decompressed_limit: 1 << 20,
    };

    fn check(batch: &[u8], rules: Rules) -> Result<i64, StorageError> {
        records(batch, &BatchHeader::parse(batch).unwrap(), rules)
    }

    /// `plain`'s header with `body` as its records section and `codec` set.
    fn with_body(plain: &[u8], codec: i16, body: &[u8]) -> Vec<u8> {
        let mut b = plain[..HEADER_SIZE].to_vec();
        b.extend_from_slice(body);
        let length = (b.len() - LOG_OVERHEAD) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        let attributes = i16::from_be_bytes([b[21], b[22]]) & !7 | codec;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        fix_crc(&mut b);
        b
    }

    #[test]
    fn every_codec_is_walked_and_timestamps_read() {
        let plain = encode_batch(&[Rec::new(10, b"a"), Rec::new(30, b"b"), Rec::new(20, b"c")]);
        assert_eq!(check(&plain, RULES).unwrap(), 30);
        for codec in 1..=4 {
            assert_eq!(
                check(&compressed_batch(&plain, codec), RULES).unwrap(),
                30,
                "{codec}"
            );
        }
    }

    #[test]
    fn undecompressable_payloads_are_decompression_errors() {
        let plain = simple_batch(3, 10, 0);
        for codec in 1..=4 {
            let good = compress(codec, &plain[HEADER_SIZE..]);
            for body in [
                &[][..],
                &[0x42][..],
                &good[..good.len() / 2],
                &good[..good.len() - 1],
            ] {
                let result = check(&with_body(&plain, codec, body), RULES);
                assert!(
                    matches!(result, Err(StorageError::Decompression(_))),
                    "codec {codec}, {} bytes: {result:?}",
                    body.len()
                );
            }
        }
        // Plain records under a compression attribute.
        for codec in [1, 3, 4] {
            let result = check(&with_body(&plain, codec, &plain[HEADER_SIZE..]), RULES);
            assert!(
                matches!(result, Err(StorageError::Decompression(_))),
                "{codec}"
            );
        }
    }

    #[test]
    fn records_must_match_the_header() {
        let plain = simple_batch(3, 10, 0);
        for codec in 0..=4 {
            // Two records' worth under a header that says three (count and
            // last offset delta agree, so only the walk can tell); four
            // records' worth: bytes after the last.
            for (records, name) in [(2, "short"), (4, "long")] {
                let other = simple_batch(records, 10, 0);
                let body = if codec == 0 {
                    other[HEADER_SIZE..].to_vec()
                } else {
                    compress(codec, &other[HEADER_SIZE..])
                };
                let batch = with_body(&plain, codec, &body);
                assert!(
                    matches!(check(&batch, RULES), Err(StorageError::InvalidRecord(_))),
                    "{name} {codec}"
                );
            }
        }
    }

    #[test]
    fn offset_deltas_must_count_from_zero() {
        // Re-encode record 1 with offset delta 5 (same length varints).
        let plain = simple_batch(3, 10, 0);
        let mut bad = plain.clone();
        let second = HEADER_SIZE + 1 + usize::from(plain[HEADER_SIZE] >> 1);
        assert_eq!(bad[second + 3], 2, "offset delta 1, zigzag");
        bad[second + 3] = 10;
        fix_crc(&mut bad);
        assert!(
            matches!(check(&bad, RULES), Err(StorageError::InvalidRecord(m)) if m.contains("offset delta"))
        );
        let compressed = with_body(&plain, 4, &compress(4, &bad[HEADER_SIZE..]));
        assert!(matches!(
            check(&compressed, RULES),
            Err(StorageError::InvalidRecord(_))
        ));
    }

    #[test]
    fn compacted_topics_need_keys_inside_compressed_batches() {
        let mut keyed = Rec::new(1, b"v");
        keyed.key = Some(b"k".to_vec());
        let compact = Rules {
            compact: true,
            ..RULES
        };
        let ok = compressed_batch(&encode_batch(&[keyed.clone(), keyed.clone()]), 1);
        assert!(check(&ok, compact).is_ok());
        let keyless = compressed_batch(&encode_batch(&[keyed, Rec::new(2, b"w")]), 1);
        assert!(matches!(
            check(&keyless, compact),
            Err(StorageError::RecordErrors(_))
        ));
        assert!(check(&keyless, RULES).is_ok());
    }

    #[test]
    fn keyless_records_are_each_named_after_the_whole_batch_is_walked() {
        let mut keyed = Rec::new(1, b"v");
        keyed.key = Some(b"k".to_vec());
        let compact = Rules {
            compact: true,
            ..RULES
        };
        let recs = [
            keyed.clone(),
            Rec::new(2, b"w"),
            keyed,
            Rec::new(3, b"x"),
            Rec::new(4, b"y"),
            Rec::new(5, b"z"),
        ];
        for codec in 0..=4 {
            let plain = encode_batch(&recs);
            let batch = if codec == 0 {
                plain
            } else {
                compressed_batch(&plain, codec)
            };
            let Err(StorageError::RecordErrors(errors)) = check(&batch, compact) else {
                panic!("codec {codec}: expected record errors");
            };
            let indices: Vec<i32> = errors.errors.iter().map(|e| e.batch_index).collect();
            assert_eq!(indices, [1, 3, 4, 5], "codec {codec}");
            let summary = errors.summary();
            assert!(
                summary
                    .starts_with("One or more records have been rejected due to 4 record errors"),
                "{summary}"
            );
            assert_eq!(summary.matches("RecordError(batchIndex=").count(), 3);
            assert_eq!(
                errors.errors[0].message,
                "Compacted topic cannot accept message without key"
            );
        }
        // The list is bounded; the count is not.
        let many = simple_batch(MAX_RECORD_ERRORS + 5, 1, 0);
        let Err(StorageError::RecordErrors(errors)) = check(&many, compact) else {
            panic!("expected record errors");
        };
        assert_eq!(errors.errors.len(), MAX_RECORD_ERRORS);
        assert_eq!(errors.total, MAX_RECORD_ERRORS + 5);
        assert!(errors.summary().contains("due to 1005 record errors"));
        // A framing error still refuses the batch as a whole.
        let mut bad = simple_batch(3, 10, 0);
        let second = HEADER_SIZE + 1 + usize::from(bad[HEADER_SIZE] >> 1);
        bad[second + 3] = 10;
        fix_crc(&mut bad);
        assert!(matches!(
            check(&bad, compact),
            Err(StorageError::InvalidRecord(_))
        ));
    }

    #[test]
    fn expansion_past_the_limit_is_too_large() {
        let plain = simple_batch(64, 32 << 10, 0); // 2 MiB of values
        for codec in 1..=4 {
            let batch = compressed_batch(&plain, codec);
            assert!(batch.len() < 256 << 10, "{codec}");
            assert!(
                matches!(check(&batch, RULES), Err(StorageError::MessageTooLarge(_))),
                "{codec}"
            );
            let roomy = Rules {
                decompressed_limit: 4 << 20,
                ..RULES
            };
            assert!(check(&batch, roomy).is_ok(), "{codec}");
        }
    }

    #[test]
    fn clients_may_not_write_control_batches_or_sequenceless_producer_batches() {
        let good = simple_batch(1, 1, 0);
        assert!(client_batches(&good).is_ok());
        let mut control = good.clone();
        control[22] |= CONTROL_FLAG as u8;
        fix_crc(&mut control);
        let mut two = good.clone();
        two.extend_from_slice(&control);
        assert!(matches!(
            client_batches(&two),
            Err(StorageError::InvalidRecord(_))
        ));
        let mut producer = good.clone();
        producer[43..51].copy_from_slice(&7i64.to_be_bytes());
        fix_crc(&mut producer);
        assert!(matches!(
            client_batches(&producer),
            Err(StorageError::InvalidRecord(_))
        ));
        producer[53..57].copy_from_slice(&0i32.to_be_bytes());
        fix_crc(&mut producer);
        assert!(client_batches(&producer).is_ok());
    }
}
