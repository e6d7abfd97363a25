//! The records of a compressed batch walked as they decompress, for the
//! host's readers that need only each record's offset delta, timestamp and
//! whether it has a key: append validation and ListOffsets by timestamp.
//! Nothing of a record is kept: keys, values and headers are skipped as
//! they stream past, so memory stays at the decoder's buffers however large
//! the records (Kafka's `skipKeyValueIterator`). The framing checks are the
//! uncompressed walker's (`batch::Records`): exact record lengths, `-1` as
//! the only null, non-negative header counts, no bytes after the last
//! record, and the stream read to its end so a decoder checks its trailer.

use std::io::BufRead;

use super::batch::BatchHeader;
use super::codec::CodecError;

/// What a walk reads of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    pub offset_delta: i32,
    pub timestamp: i64,
    pub has_key: bool,
}

/// Why a walk stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The decompressor failed or passed its limit.
    Codec(CodecError),
    /// The decompressed bytes are not `recordCount` well-framed records.
    Invalid(String),
}

/// Iterates at most `recordCount` records from a decompressed stream, then
/// an error if the stream holds more bytes.
pub struct RecordStream<R> {
    input: R,
    base_timestamp: i64,
    remaining: i64,
    index: i64,
    /// Bytes of the current record's body not yet read.
    left: usize,
    done: bool,
}

impl<R: BufRead> RecordStream<R> {
    pub fn new(input: R, header: &BatchHeader) -> RecordStream<R> {
        RecordStream {
            input,
            base_timestamp: header.base_timestamp,
            remaining: i64::from(header.record_count.max(0)),
            index: 0,
            left: usize::MAX,
            done: false,
        }
    }

    fn invalid(&self, what: &str) -> StreamError {
        StreamError::Invalid(format!("record {}: {what}", self.index))
    }

    /// The next byte, `None` at the end of the stream.
    fn peek(&mut self) -> Result<Option<u8>, StreamError> {
        let buf = self
            .input
            .fill_buf()
            .map_err(|e| StreamError::Codec(CodecError::from_io(e)))?;
        Ok(buf.first().copied())
    }

    fn byte(&mut self) -> Result<u8, StreamError> {
        if self.left == 0 {
            return Err(self.invalid("its fields run past its length"));
        }
        let byte = self
            .peek()?
            .ok_or_else(|| self.invalid("the records end before it does"))?;
        self.input.consume(1);
        self.left -= 1;
        Ok(byte)
    }

    fn unsigned(&mut self, max_bytes: usize) -> Result<u64, StreamError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.invalid(&format!("a varint longer than {max_bytes} bytes")))
    }

    fn varint(&mut self) -> Result<i32, StreamError> {
        let raw = self.unsigned(5)?;
        let raw = u32::try_from(raw).map_err(|_| self.invalid("a varint overflows 32 bits"))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, StreamError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Skips a length-prefixed field; false for a null one.
    fn skip_field(&mut self, what: &str, nullable: bool) -> Result<bool, StreamError> {
        let len = self.varint()?;
        if len == -1 && nullable {
            return Ok(false);
        }
        let mut len = usize::try_from(len)
            .map_err(|_| self.invalid(&format!("invalid {what} length {len}")))?;
        if len > self.left {
            return Err(self.invalid(&format!("its {what} of {len} bytes overruns it")));
        }
        self.left -= len;
        while len > 0 {
            let available = self
                .input
                .fill_buf()
                .map_err(|e| StreamError::Codec(CodecError::from_io(e)))?
                .len();
            if available == 0 {
                return Err(self.invalid("the records end before it does"));
            }
            let n = available.min(len);
            self.input.consume(n);
            len -= n;
        }
        Ok(true)
    }

    fn next_record(&mut self) -> Result<RecordMeta, StreamError> {
        self.left = usize::MAX;
        let length = self.varint()?;
        self.left = usize::try_from(length)
            .map_err(|_| self.invalid(&format!("negative length {length}")))?;
        self.byte()?; // attributes
        let timestamp_delta = self.varlong()?;
        let offset_delta = self.varint()?;
        let has_key = self.skip_field("key", true)?;
        self.skip_field("value", true)?;
        let headers = self.varint()?;
        if headers < 0 {
            return Err(self.invalid(&format!("negative header count {headers}")));
        }
        for _ in 0..headers {
            self.skip_field("header key", false)?;
            self.skip_field("header value", true)?;
        }
        if self.left != 0 {
            return Err(self.invalid(&format!(
                "it declares {length} bytes but its fields take {}",
                length as usize - self.left
            )));
        }
        Ok(RecordMeta {
            offset_delta,
            timestamp: self.base_timestamp.wrapping_add(timestamp_delta),
            has_key,
        })
    }
}

impl<R: BufRead> Iterator for RecordStream<R> {
    type Item = Result<RecordMeta, StreamError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            // Read to the end: trailing bytes are an error, and the decoder
            // checks its trailer (gzip CRC, zstd checksum) only there.
            return match self.peek() {
                Ok(None) => None,
                Ok(Some(_)) => Some(Err(StreamError::Invalid(
                    "bytes remain after the last record".into(),
                ))),
                Err(e) => Some(Err(e)),
            };
        }
        self.remaining -= 1;
        let record = self.next_record();
        self.index += 1;
        self.done = record.is_err();
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::testing::{encode_batch, Rec};
    use crate::log::batch::{BatchHeader, HEADER_SIZE};

    fn walk(batch: &[u8]) -> Vec<Result<RecordMeta, StreamError>> {
        let header = BatchHeader::parse(batch).unwrap();
        RecordStream::new(&batch[HEADER_SIZE..], &header).collect()
    }

    #[test]
    fn reads_offsets_timestamps_and_keys() {
        let mut keyed = Rec::new(1005, b"value");
        keyed.key = Some(b"k".to_vec());
        keyed.headers.push((b"h".to_vec(), Some(b"v".to_vec())));
        let batch = encode_batch(&[Rec::new(1000, b"a"), keyed]);
        let records: Vec<RecordMeta> = walk(&batch).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            records,
            vec![
                RecordMeta {
                    offset_delta: 0,
                    timestamp: 1000,
                    has_key: false
                },
                RecordMeta {
                    offset_delta: 1,
                    timestamp: 1005,
                    has_key: true
                },
            ]
        );
    }

    #[test]
    fn framing_errors_are_invalid() {
        let batch = encode_batch(&[Rec::new(1, b"abc"), Rec::new(2, b"def")]);
        // Truncated in the second record, and one byte too many.
        let cut = &batch[..batch.len() - 2];
        assert!(matches!(
            walk(cut).last(),
            Some(Err(StreamError::Invalid(_)))
        ));
        let mut long = batch.clone();
        long.push(0);
        assert!(matches!(
            walk(&long).last(),
            Some(Err(StreamError::Invalid(_)))
        ));
        // A value length running past the record's length.
        let mut overrun = batch.clone();
        overrun[HEADER_SIZE + 5] = 0x7e; // value length 63
        assert!(matches!(walk(&overrun)[0], Err(StreamError::Invalid(_))));
    }
}
