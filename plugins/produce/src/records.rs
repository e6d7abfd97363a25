//! The record-batch headers Produce looks at before appending, as Kafka's
//! `ProduceRequest.validateRecords` and `RequestUtils.hasTransactionalRecords`
//! do: one batch of magic v2 per partition, ZStandard only from v7 on, and
//! whether the batch is transactional. The host validates the rest (sizes,
//! CRC-32C, offsets) when it appends. Only the headers are read: the
//! records themselves stay in the host (`gregor_sdk::produce_records`).

use gregor_sdk::produce_records::RecordBytes;
use gregor_sdk::ResponseError;

/// Bytes in front of every batch body: base offset (8) and length (4).
const LOG_OVERHEAD: usize = 12;
/// Where the magic byte sits, in every message format.
const MAGIC_OFFSET: usize = 16;
/// Where the attributes of a v2 batch sit.
const ATTRIBUTES_OFFSET: usize = 21;
const COMPRESSION_MASK: i16 = 0x07;
const ZSTD: i16 = 4;
const TRANSACTIONAL_FLAG: i16 = 0x10;

/// A record batch header, as far as Produce looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub magic: i8,
    /// Attributes of a v2 batch (codec, transactional and control flags);
    /// 0 for the legacy message formats.
    pub attributes: i16,
}

impl BatchHeader {
    pub fn is_transactional(&self) -> bool {
        self.magic >= 2 && self.attributes & TRANSACTIONAL_FLAG != 0
    }

    fn is_zstd(&self) -> bool {
        self.magic >= 2 && self.attributes & COMPRESSION_MASK == ZSTD
    }
}

/// The bytes of a batch header Produce reads: up to the v2 attributes.
const HEADER_READ: usize = ATTRIBUTES_OFFSET + 2;

/// The headers of the whole batches in `records`, in order, read through
/// [`RecordBytes`] (the host's record set, or the body's bytes) a header
/// at a time. As with Kafka's batch iterator, a truncated batch at the end
/// is not a batch.
pub fn batch_headers<R: RecordBytes + ?Sized>(
    records: &R,
) -> impl Iterator<Item = BatchHeader> + '_ {
    let size = records.size();
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let header = records.read(at, HEADER_READ);
        let length = usize::try_from(i32::from_be_bytes(array(&header, 8)?)).ok()?;
        let batch_len = LOG_OVERHEAD.checked_add(length)?;
        if at.checked_add(batch_len)? > size {
            return None;
        }
        let within = header.get(..batch_len.min(header.len()))?;
        let magic = i8::from_be_bytes(array(within, MAGIC_OFFSET)?);
        let attributes = if magic >= 2 {
            i16::from_be_bytes(array(within, ATTRIBUTES_OFFSET)?)
        } else {
            0
        };
        at += batch_len;
        Some(BatchHeader { magic, attributes })
    })
}

/// Kafka's check on the records of one partition of a v3+ request: the
/// error (with its message) for records it must not append.
pub fn validate<R: RecordBytes + ?Sized>(
    version: i16,
    records: Option<&R>,
) -> Result<(), (ResponseError, String)> {
    let prefix = format!("Produce requests with version {version}");
    let first_two: Vec<BatchHeader> = match records {
        Some(records) => batch_headers(records).take(2).collect(),
        None => Vec::new(),
    };
    let mut batches = first_two.into_iter();
    let Some(first) = batches.next() else {
        return Err((
            ResponseError::InvalidRecord,
            format!("{prefix} must have at least one record batch per partition"),
        ));
    };
    if first.magic != 2 {
        return Err((
            ResponseError::InvalidRecord,
            format!("{prefix} are only allowed to contain record batches with magic version 2"),
        ));
    }
    if version < 7 && first.is_zstd() {
        return Err((
            ResponseError::UnsupportedCompressionType,
            format!("{prefix} are not allowed to use ZStandard compression"),
        ));
    }
    if batches.next().is_some() {
        return Err((
            ResponseError::InvalidRecord,
            format!("{prefix} are only allowed to contain exactly one record batch per partition"),
        ));
    }
    Ok(())
}

/// `N` bytes of `bytes` from `at`, if there are that many.
fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2-shaped batch of `size` bytes in all with the given attributes.
    fn batch(magic: i8, attributes: i16, size: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; size];
        let length = i32::try_from(size - LOG_OVERHEAD).unwrap_or(i32::MAX);
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes[MAGIC_OFFSET] = magic as u8;
        bytes[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
        bytes
    }

    fn code(result: Result<(), (ResponseError, String)>) -> i16 {
        result.map_or_else(|(error, _)| error.code(), |()| 0)
    }

    #[test]
    fn reads_each_whole_batch() {
        let mut records = batch(2, 0, 70);
        records.extend(batch(2, TRANSACTIONAL_FLAG | ZSTD, 80));
        let headers: Vec<_> = batch_headers(&records[..]).collect();
        assert_eq!(headers.len(), 2);
        assert!(!headers[0].is_transactional());
        assert!(headers[1].is_transactional() && headers[1].is_zstd());
    }

    #[test]
    fn truncated_or_garbage_input_ends_the_batches() {
        let records = batch(2, 0, 70);
        assert_eq!(batch_headers(&records[..69]).count(), 0);
        assert_eq!(batch_headers(&[0xff; 16][..]).count(), 0);
        assert_eq!(batch_headers(&[0xff; 40][..]).count(), 0);
        assert_eq!(batch_headers(&[][..]).count(), 0);
    }

    #[test]
    fn validates_like_kafka() {
        let one = batch(2, 0, 70);
        assert_eq!(code(validate(9, Some(&one[..]))), 0);
        assert_eq!(
            code(validate(9, None::<&[u8]>)),
            ResponseError::InvalidRecord.code()
        );
        assert_eq!(
            code(validate(9, Some(&[][..]))),
            ResponseError::InvalidRecord.code()
        );
        let legacy = batch(1, 0, 70);
        assert_eq!(
            code(validate(3, Some(&legacy[..]))),
            ResponseError::InvalidRecord.code()
        );
        let zstd = batch(2, ZSTD, 70);
        assert_eq!(
            code(validate(6, Some(&zstd[..]))),
            ResponseError::UnsupportedCompressionType.code()
        );
        assert_eq!(code(validate(7, Some(&zstd[..]))), 0);
        let two = [one.clone(), one].concat();
        assert_eq!(
            code(validate(9, Some(&two[..]))),
            ResponseError::InvalidRecord.code()
        );
    }
}
