//! Record sets referenced, not copied (DESIGN §12): the bytes a Fetch
//! returns stay in the host, and the response the handler encodes carries
//! a reference to them that the host fills in as it writes the response.
//!
//! A handler puts [`reference`]'s `Bytes` where the records go (a
//! `PartitionData`'s `records`): a one-byte marker that stands for the
//! record set. The SDK then encodes the response as usual, but through a
//! buffer that recognises each marker by its address as `kafka-protocol`
//! writes it: it rewrites the length prefix just written for the record
//! set's real size and notes the place instead of writing the byte
//! ([`encode_referencing`]). The host gets the body without the records
//! and the places, and writes the records from its own buffers. Where the
//! bytes are needed inside the guest (an old version whose response is
//! rewritten from the encoded one) they are read from the host instead.
//!
//! The markers live for one request: [`take`] hands them over and empties
//! the list at the end of each request.

use std::cell::RefCell;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

pub use crate::bindings::exports::gregor::broker::handler::{RecordsSplice, ReferencingBody};
pub use crate::log::RecordSet;

/// Where a referenced record set's bytes are: the host's `record-set`
/// (a test's own bytes natively).
trait Source {
    fn read_all(&self, size: u32) -> Vec<u8>;
}

impl Source for RecordSet {
    fn read_all(&self, size: u32) -> Vec<u8> {
        self.read(0, size)
    }
}

/// A record set put into a response, with the marker standing for it.
struct Referenced<S = RecordSet> {
    marker: Bytes,
    size: u32,
    records: S,
}

/// A splice found while encoding: the record set and where it goes.
type Found<S> = (u32, S);

thread_local! {
    static REFERENCED: RefCell<Vec<Referenced>> = const { RefCell::new(Vec::new()) };
}

/// The `Bytes` to put in a response where `records` go: a marker the SDK
/// replaces by a reference to the host's bytes when it encodes the
/// response.
pub fn reference(records: RecordSet) -> Bytes {
    // Its own allocation, kept alive in the list: no two markers share an
    // address.
    let marker = Bytes::from(vec![0u8]);
    let size = records.size();
    REFERENCED.with(|list| {
        list.borrow_mut().push(Referenced {
            marker: marker.clone(),
            size,
            records,
        })
    });
    marker
}

/// How many bytes the referenced record sets add to a response beyond
/// their markers (a response's size as it will be sent, for quotas).
pub fn referenced_extra_bytes() -> usize {
    REFERENCED.with(|list| {
        list.borrow()
            .iter()
            .map(|r| (r.size as usize).saturating_sub(1))
            .sum()
    })
}

/// The record sets referenced during this request, in the order given;
/// the list is empty afterwards.
fn take() -> Vec<Referenced> {
    REFERENCED.with(|list| std::mem::take(&mut *list.borrow_mut()))
}

/// Whether this request referenced any record set.
pub fn any_referenced() -> bool {
    REFERENCED.with(|list| !list.borrow().is_empty())
}

/// Forgets this request's record sets (dropping them frees them in the
/// host): when its response is not sent.
pub fn release() {
    drop(take());
}

/// Encodes `response` for `version`: the body without the referenced
/// record sets, and where each goes. With `inline`, the record sets'
/// bytes are read from the host and written in place instead (no
/// splices). Record sets the response does not contain are released.
pub fn encode_referencing<R: Encodable>(
    response: &R,
    version: i16,
    inline: bool,
) -> Result<ReferencingBody, String> {
    let (body, found) = encode_with(response, version, inline, take())?;
    let splices = found
        .into_iter()
        .map(|(at, records)| RecordsSplice { at, records })
        .collect();
    Ok(ReferencingBody { body, splices })
}

fn encode_with<R: Encodable, S: Source>(
    response: &R,
    version: i16,
    inline: bool,
    referenced: Vec<Referenced<S>>,
) -> Result<(Vec<u8>, Vec<Found<S>>), String> {
    let mut buf = SplicingBuf {
        out: Vec::new(),
        referenced: referenced.into_iter().map(Some).collect(),
        splices: Vec::new(),
        inline,
        error: None,
    };
    response
        .encode(&mut buf, version)
        .map_err(|error| error.to_string())?;
    match buf.error {
        Some(error) => Err(error),
        None => Ok((buf.out, buf.splices)),
    }
}

/// A `Vec<u8>` that turns markers into splices as they are written.
struct SplicingBuf<S> {
    out: Vec<u8>,
    /// Taken (None) once its marker is written.
    referenced: Vec<Option<Referenced<S>>>,
    splices: Vec<Found<S>>,
    inline: bool,
    error: Option<String>,
}

impl<S: Source> SplicingBuf<S> {
    /// The referenced record set `src` is the marker of, if any.
    fn marker(&self, src: &[u8]) -> Option<usize> {
        if src.len() != 1 {
            return None;
        }
        self.referenced.iter().position(|r| {
            r.as_ref()
                .is_some_and(|r| r.marker.as_ptr() == src.as_ptr())
        })
    }

    /// Replaces the length prefix of a one-byte field just written by the
    /// record set's, then splices (or, inline, writes) its bytes.
    fn splice(&mut self, referenced: Referenced<S>) {
        let Ok(size) = i32::try_from(referenced.size) else {
            self.error = Some(format!("a record set of {} bytes", referenced.size));
            return;
        };
        // A one-byte field's prefix: INT32 1 (bytes) or varint 2 (compact bytes).
        match self.out.last() {
            Some(1) if self.out.ends_with(&[0, 0, 0, 1]) => {
                self.out.truncate(self.out.len() - 4);
                self.out.extend_from_slice(&size.to_be_bytes());
            }
            Some(2) => {
                self.out.truncate(self.out.len() - 1);
                put_unsigned_varint(&mut self.out, referenced.size.saturating_add(1));
            }
            _ => {
                self.error = Some("a record set written without a length prefix".to_string());
                return;
            }
        }
        if self.inline {
            let bytes = referenced.records.read_all(referenced.size);
            if bytes.len() != referenced.size as usize {
                self.error = Some("a record set read short".to_string());
            }
            self.out.extend_from_slice(&bytes);
            return;
        }
        match u32::try_from(self.out.len()) {
            Ok(at) => self.splices.push((at, referenced.records)),
            Err(_) => self.error = Some("a response body over 4 GiB".to_string()),
        }
    }
}

fn put_unsigned_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

// SAFETY: every method delegates to the `Vec<u8>`, whose implementation
// upholds the trait's contract; `put_slice` only appends through it.
unsafe impl<S: Source> BufMut for SplicingBuf<S> {
    fn remaining_mut(&self) -> usize {
        self.out.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's guarantee is passed on unchanged.
        unsafe { self.out.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.out.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.marker(src) {
            Some(index) => {
                if let Some(referenced) = self.referenced.get_mut(index).and_then(Option::take) {
                    self.splice(referenced);
                }
            }
            None => self.out.extend_from_slice(src),
        }
    }
}

impl<S: Source> ByteBufMut for SplicingBuf<S> {
    fn offset(&self) -> usize {
        self.out.len()
    }

    fn seek(&mut self, offset: usize) {
        self.out.resize(offset, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.out[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;

    impl Source for Vec<u8> {
        fn read_all(&self, _: u32) -> Vec<u8> {
            self.clone()
        }
    }

    /// A response with a partition per record set, each set's marker in it.
    fn response(sets: &[Vec<u8>]) -> (FetchResponse, Vec<Referenced<Vec<u8>>>) {
        let referenced: Vec<Referenced<Vec<u8>>> = sets
            .iter()
            .map(|set| Referenced {
                marker: Bytes::from(vec![0u8]),
                size: set.len() as u32,
                records: set.clone(),
            })
            .collect();
        let partitions = referenced
            .iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_records(Some(r.marker.clone()))
            })
            .collect();
        let topic = FetchableTopicResponse::default().with_partitions(partitions);
        (
            FetchResponse::default().with_responses(vec![topic]),
            referenced,
        )
    }

    fn records_of(body: Vec<u8>, version: i16) -> Vec<Vec<u8>> {
        let decoded = FetchResponse::decode(&mut Bytes::from(body), version).unwrap();
        decoded.responses[0]
            .partitions
            .iter()
            .map(|p| p.records.clone().unwrap_or_default().to_vec())
            .collect()
    }

    #[test]
    fn spliced_records_make_the_plain_encoding_for_every_version() {
        // Sizes around the one- and two-byte varint prefixes, and none.
        let sets: Vec<Vec<u8>> = [0usize, 5, 126, 127, 128, 300, 20_000]
            .iter()
            .map(|&n| (0..n).map(|i| i as u8).collect())
            .collect();
        for version in 4..=17 {
            let (response, referenced) = response(&sets);
            let (body, found) = encode_with(&response, version, false, referenced).unwrap();
            let mut whole = Vec::new();
            let mut from = 0;
            for (at, records) in &found {
                whole.extend_from_slice(&body[from..*at as usize]);
                whole.extend_from_slice(records);
                from = *at as usize;
            }
            whole.extend_from_slice(&body[from..]);
            assert_eq!(records_of(whole, version), sets, "v{version}");

            let (response, referenced) = self::response(&sets);
            let (inline, found) = encode_with(&response, version, true, referenced).unwrap();
            assert!(found.is_empty());
            assert_eq!(records_of(inline, version), sets, "v{version} inline");
        }
    }

    #[test]
    fn record_sets_not_in_the_response_are_not_spliced() {
        let (_, referenced) = response(&[vec![1, 2, 3]]);
        let empty = FetchResponse::default();
        let (body, found) = encode_with(&empty, 12, false, referenced).unwrap();
        assert!(found.is_empty());
        assert!(FetchResponse::decode(&mut Bytes::from(body), 12).is_ok());
    }

    #[test]
    fn varints_as_kafka_writes_them() {
        let varint = |value| {
            let mut out = Vec::new();
            put_unsigned_varint(&mut out, value);
            out
        };
        assert_eq!(varint(2), [2]);
        assert_eq!(varint(300), [0xac, 0x02]);
        assert_eq!(varint(u32::MAX), [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }
}
