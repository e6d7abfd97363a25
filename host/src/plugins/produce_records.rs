//! Produce records by reference (issue 17): a walk of a Produce v3-13
//! request body that finds each partition's `records` field, so the host
//! keeps the record bytes and hands the handler a body without them.
//!
//! Copying a produce request into the guest, and its records back out to
//! `log.append`, was most of what a Wasm Produce handler cost per byte.
//! A handler that imports `log.request-records` instead gets the body with
//! every `records` field written as null (the rest byte for byte as the
//! client sent it) and asks for each partition's records as a
//! `log.record-set` handle by its topic and partition index; it appends
//! them with `log.append-records-within`, which reads the host's buffer.
//!
//! The walk is bounded by the body: every length and count is checked
//! against the bytes that are left before anything is sliced or reserved,
//! so bad input is an error, never a panic or a huge allocation. A body
//! the walk refuses (malformed, or bytes after its end) is handed to the
//! handler whole, as before, and the handler's own decoding answers it
//! (INVALID_REQUEST or CORRUPT_MESSAGE, as for any handler): the walk
//! never decides a request's fate itself.

use bytes::Bytes;

/// The first Produce version whose records are one magic-v2 batch (v0-2
/// carry legacy message sets that the handler rewrites itself).
pub const FIRST_VERSION: i16 = 3;
/// The last Produce version this walk knows.
pub const LAST_VERSION: i16 = 13;
/// Produce's ApiKey.
pub const API_KEY: i16 = 0;
/// The first flexible version (compact lengths, tagged fields).
const FIRST_FLEXIBLE: i16 = 9;
/// The first version that names topics by id instead of by name.
const FIRST_TOPIC_ID: i16 = 13;

/// Each partition's records of one request, by topic then partition
/// index, as the client sent them (None: null records).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldRecords {
    topics: Vec<Vec<Option<Bytes>>>,
}

impl HeldRecords {
    /// The records of partition `partition` of topic `topic` (indices in
    /// the request's arrays); None when the request has no such partition
    /// or its records are null.
    pub fn get(&self, topic: u32, partition: u32) -> Option<&Bytes> {
        self.topics
            .get(usize::try_from(topic).ok()?)?
            .get(usize::try_from(partition).ok()?)?
            .as_ref()
    }

    /// Bytes of records held, over every partition.
    pub fn size(&self) -> usize {
        self.topics.iter().flatten().flatten().map(Bytes::len).sum()
    }
}

/// A request body split: what the guest gets, and the records kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The body with every `records` field null.
    pub body: Vec<u8>,
    pub records: HeldRecords,
}

/// Why a body could not be walked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    /// A version the walk does not know.
    Version(i16),
    /// The body ends inside a field.
    Truncated(&'static str),
    /// A length or count that cannot be (negative, or beyond the body).
    Invalid(&'static str),
    /// Bytes after the end of the request.
    Trailing(usize),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Version(version) => write!(f, "no walk of Produce v{version}"),
            WalkError::Truncated(field) => write!(f, "the body ends inside {field}"),
            WalkError::Invalid(field) => write!(f, "invalid length or count of {field}"),
            WalkError::Trailing(left) => write!(f, "{left} bytes after the request"),
        }
    }
}

/// Splits a Produce body of `version` (3-13) into the guest's body and the
/// records, sharing `body`'s buffer for the records (no copy of them).
pub fn split(version: i16, body: &Bytes) -> Result<Split, WalkError> {
    if !(FIRST_VERSION..=LAST_VERSION).contains(&version) {
        return Err(WalkError::Version(version));
    }
    let flexible = version >= FIRST_FLEXIBLE;
    let mut walk = Walk {
        body,
        at: 0,
        copied_to: 0,
        out: Vec::with_capacity(body.len().min(4096)),
        flexible,
    };
    walk.nullable_string("transactional_id")?;
    walk.skip(2, "acks")?;
    walk.skip(4, "timeout_ms")?;
    let topic_count = walk.count("topic_data")?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        if version >= FIRST_TOPIC_ID {
            walk.skip(16, "topic_id")?;
        } else {
            walk.string("name")?;
        }
        let partition_count = walk.count("partition_data")?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            walk.skip(4, "index")?;
            partitions.push(walk.records()?);
            walk.tagged_fields()?;
        }
        topics.push(partitions);
        walk.tagged_fields()?;
    }
    walk.tagged_fields()?;
    let left = body.len() - walk.at;
    if left > 0 {
        return Err(WalkError::Trailing(left));
    }
    Ok(Split {
        body: walk.finish(),
        records: HeldRecords { topics },
    })
}

/// A cursor over the body that copies everything but the records to `out`.
struct Walk<'a> {
    body: &'a Bytes,
    at: usize,
    /// `body[..copied_to]` is in `out` already (records replaced).
    copied_to: usize,
    out: Vec<u8>,
    flexible: bool,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.body.len() - self.at
    }

    fn skip(&mut self, n: usize, field: &'static str) -> Result<(), WalkError> {
        if n > self.left() {
            return Err(WalkError::Truncated(field));
        }
        self.at += n;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WalkError> {
        let end = self.at.checked_add(N).ok_or(WalkError::Truncated(field))?;
        let bytes = self
            .body
            .get(self.at..end)
            .and_then(|slice| <[u8; N]>::try_from(slice).ok())
            .ok_or(WalkError::Truncated(field))?;
        self.at = end;
        Ok(bytes)
    }

    fn int16(&mut self, field: &'static str) -> Result<i16, WalkError> {
        Ok(i16::from_be_bytes(self.bytes(field)?))
    }

    fn int32(&mut self, field: &'static str) -> Result<i32, WalkError> {
        Ok(i32::from_be_bytes(self.bytes(field)?))
    }

    /// An unsigned varint of at most 5 bytes (a u32).
    fn uvarint(&mut self, field: &'static str) -> Result<u32, WalkError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.bytes::<1>(field)?;
            let bits = u32::from(byte & 0x7f);
            if shift == 28 && bits > 0x0f {
                return Err(WalkError::Invalid(field));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WalkError::Invalid(field))
    }

    /// The length of a nullable field: None for null.
    /// `wide`: a BYTES field (INT32 length); else a STRING (INT16).
    fn nullable_length(
        &mut self,
        field: &'static str,
        wide: bool,
    ) -> Result<Option<usize>, WalkError> {
        let length = if self.flexible {
            match self.uvarint(field)? {
                0 => return Ok(None),
                n => (n - 1) as usize,
            }
        } else {
            let n = if wide {
                self.int32(field)?
            } else {
                i32::from(self.int16(field)?)
            };
            match n {
                -1 => return Ok(None),
                n => usize::try_from(n).map_err(|_| WalkError::Invalid(field))?,
            }
        };
        if length > self.left() {
            return Err(WalkError::Invalid(field));
        }
        Ok(Some(length))
    }

    fn nullable_string(&mut self, field: &'static str) -> Result<(), WalkError> {
        if let Some(length) = self.nullable_length(field, false)? {
            self.skip(length, field)?;
        }
        Ok(())
    }

    fn string(&mut self, field: &'static str) -> Result<(), WalkError> {
        match self.nullable_length(field, false)? {
            Some(length) => self.skip(length, field),
            None => Err(WalkError::Invalid(field)),
        }
    }

    /// An array's element count; each element takes at least one byte,
    /// so a count beyond the bytes left is refused before anything is
    /// reserved for it.
    fn count(&mut self, field: &'static str) -> Result<usize, WalkError> {
        let count = if self.flexible {
            match self.uvarint(field)? {
                0 => return Err(WalkError::Invalid(field)),
                n => (n - 1) as usize,
            }
        } else {
            usize::try_from(self.int32(field)?).map_err(|_| WalkError::Invalid(field))?
        };
        if count > self.left() {
            return Err(WalkError::Invalid(field));
        }
        Ok(count)
    }

    fn tagged_fields(&mut self) -> Result<(), WalkError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint("tagged fields")?;
        for _ in 0..count {
            self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")? as usize;
            if size > self.left() {
                return Err(WalkError::Invalid("tagged field size"));
            }
            self.skip(size, "tagged field")?;
        }
        Ok(())
    }

    /// A partition's records: taken out of the body (a null written in
    /// their place) and returned as a slice of the body's buffer.
    fn records(&mut self) -> Result<Option<Bytes>, WalkError> {
        let field_start = self.at;
        let Some(length) = self.nullable_length("records", true)? else {
            return Ok(None);
        };
        let start = self.at;
        self.skip(length, "records")?;
        self.out
            .extend_from_slice(&self.body[self.copied_to..field_start]);
        if self.flexible {
            self.out.push(0);
        } else {
            self.out.extend_from_slice(&(-1i32).to_be_bytes());
        }
        self.copied_to = self.at;
        Ok(Some(self.body.slice(start..self.at)))
    }

    fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(&self.body[self.copied_to..]);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    fn request(transactional_id: Option<&str>) -> ProduceRequest {
        let partition = |index: i32, records: Option<&'static [u8]>| {
            PartitionProduceData::default()
                .with_index(index)
                .with_records(records.map(Bytes::from_static))
        };
        let topic = |name: &'static str, partitions| {
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_topic_id(uuid::Uuid::from_u128(7))
                .with_partition_data(partitions)
        };
        ProduceRequest::default()
            .with_transactional_id(
                transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.into()))),
            )
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                topic(
                    "orders",
                    vec![
                        partition(0, Some(b"first records")),
                        partition(3, None),
                        partition(1, Some(b"")),
                    ],
                ),
                topic("empty", vec![]),
                topic("t", vec![partition(9, Some(&[0xff; 300]))]),
            ])
    }

    fn encoded(request: &ProduceRequest, version: i16) -> Bytes {
        let mut out = bytes::BytesMut::new();
        request.encode(&mut out, version).expect("encodes");
        out.freeze()
    }

    fn decoded(body: &[u8], version: i16) -> ProduceRequest {
        ProduceRequest::decode(&mut Bytes::copy_from_slice(body), version).expect("decodes")
    }

    #[test]
    fn every_version_keeps_the_body_and_holds_the_records() {
        for version in FIRST_VERSION..=LAST_VERSION {
            for id in [None, Some("txn-1")] {
                let original = request(id);
                let body = encoded(&original, version);
                let split = split(version, &body).expect("walks");
                let stripped = decoded(&split.body, version);
                let mut expected = decoded(&body, version);
                for (t, topic) in expected.topic_data.iter_mut().enumerate() {
                    for (p, partition) in topic.partition_data.iter_mut().enumerate() {
                        let held = split.records.get(t as u32, p as u32).cloned();
                        assert_eq!(held, partition.records.take(), "v{version} {t}/{p}");
                    }
                }
                assert_eq!(stripped, expected, "v{version}");
                assert_eq!(split.records.size(), 13 + 300, "v{version}");
                assert!(split.body.len() < body.len() - 300, "v{version}");
            }
        }
    }

    #[test]
    fn records_share_the_request_buffer() {
        let body = encoded(&request(None), 9);
        let split = split(9, &body).expect("walks");
        let held = split.records.get(2, 0).expect("held");
        let inside = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        assert!(inside.contains(&(held.as_ptr() as usize)));
        assert_eq!(split.records.get(0, 1), None, "null records");
        assert_eq!(split.records.get(0, 7), None, "no such partition");
        assert_eq!(split.records.get(u32::MAX, 0), None);
    }

    #[test]
    fn bad_bodies_are_errors() {
        assert_eq!(split(2, &Bytes::new()), Err(WalkError::Version(2)));
        assert_eq!(split(14, &Bytes::new()), Err(WalkError::Version(14)));
        for version in [3, 9, 13] {
            let body = encoded(&request(None), version);
            for cut in 0..body.len() {
                assert!(
                    split(version, &body.slice(..cut)).is_err(),
                    "v{version} cut {cut}"
                );
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert_eq!(
                split(version, &Bytes::from(longer)),
                Err(WalkError::Trailing(1))
            );
        }
        // v3: no transactional id, acks, timeout, then a huge topic count.
        let huge_count =
            Bytes::from_static(&[0xff, 0xff, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(split(3, &huge_count), Err(WalkError::Invalid("topic_data")));
        // v9: an over-long varint.
        let long_varint = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(
            split(9, &long_varint),
            Err(WalkError::Invalid("transactional_id"))
        );
    }

    /// Seeded mutations of every version's body (`fuzz_input`): the walk
    /// never panics, and whatever it accepts, kafka-protocol reads the
    /// same way: the stripped body decodes to the original without its
    /// records, and the records held are the original's.
    #[test]
    fn fuzzed_bodies_walk_or_fail_cleanly() {
        for version in [FIRST_VERSION, 8, FIRST_FLEXIBLE, 12, LAST_VERSION] {
            let seeds = vec![
                encoded(&request(None), version).to_vec(),
                encoded(&request(Some("t")), version).to_vec(),
                encoded(&ProduceRequest::default(), version).to_vec(),
            ];
            crate::fuzz_input::run(&format!("produce walk v{version}"), seeds, 3_000, |input| {
                let body = Bytes::copy_from_slice(input);
                let Ok(split) = split(version, &body) else {
                    return false;
                };
                let Ok(mut original) =
                    ProduceRequest::decode(&mut Bytes::copy_from_slice(input), version)
                else {
                    // kafka-protocol is stricter on some fields (UTF-8
                    // names); the handler then answers the whole body.
                    return false;
                };
                let stripped = decoded(&split.body, version);
                for (t, topic) in original.topic_data.iter_mut().enumerate() {
                    for (p, partition) in topic.partition_data.iter_mut().enumerate() {
                        assert_eq!(
                            split.records.get(t as u32, p as u32),
                            partition.records.take().as_ref()
                        );
                    }
                }
                assert_eq!(stripped, original);
                true
            });
        }
    }
}
