//! Hand-encoded Kafka frames over a plain `TcpStream`, for the tests that
//! send what no well-behaved client would.
//!
//! A request frame is `size: i32` then the header (`api_key: i16`,
//! `api_version: i16`, `correlation_id: i32`, `client_id: nullable string`,
//! and for flexible versions (header v2) tagged fields) then the body. A
//! response frame is `size: i32`, `correlation_id: i32`, (tagged fields for
//! header v1), body. ApiVersions responses always use header v0.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const API_VERSIONS: i16 = 18;
pub const METADATA: i16 = 3;
pub const UNSUPPORTED_VERSION: i16 = 35;

/// How long to wait for a response, or for the broker to close.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// Largest response frame the tests accept (a sanity bound while parsing).
const MAX_RESPONSE: i32 = 64 << 20;

pub fn put_i16(buf: &mut Vec<u8>, v: i16) {
    buf.extend_from_slice(&v.to_be_bytes());
}

pub fn put_i32(buf: &mut Vec<u8>, v: i32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

pub fn put_uvarint(buf: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A compact (flexible-version) string: uvarint length + 1, bytes.
pub fn put_compact_string(buf: &mut Vec<u8>, s: &str) {
    put_uvarint(buf, s.len() as u32 + 1);
    buf.extend_from_slice(s.as_bytes());
}

/// A request frame with header v1 (`flexible == false`) or v2.
pub fn request_frame(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    flexible: bool,
    body: &[u8],
) -> Vec<u8> {
    let client_id = b"gregor-tests";
    let mut payload = Vec::with_capacity(64 + body.len());
    put_i16(&mut payload, api_key);
    put_i16(&mut payload, api_version);
    put_i32(&mut payload, correlation_id);
    put_i16(&mut payload, client_id.len() as i16);
    payload.extend_from_slice(client_id);
    if flexible {
        put_uvarint(&mut payload, 0); // no tagged fields
    }
    payload.extend_from_slice(body);
    let mut frame = Vec::with_capacity(4 + payload.len());
    put_i32(&mut frame, payload.len() as i32);
    frame.extend_from_slice(&payload);
    frame
}

/// An ApiVersions request frame. v3+ is flexible and names the client
/// software (KIP-511).
pub fn api_versions_request(version: i16, correlation_id: i32) -> Vec<u8> {
    let mut body = Vec::new();
    let flexible = version >= 3;
    if flexible {
        put_compact_string(&mut body, "gregor-tests");
        put_compact_string(&mut body, "0.1.0");
        put_uvarint(&mut body, 0);
    }
    request_frame(API_VERSIONS, version, correlation_id, flexible, &body)
}

/// A Metadata request frame for no topics (all topics for v0), valid for
/// versions 0 to 13.
pub fn metadata_request(version: i16, correlation_id: i32) -> Vec<u8> {
    assert!((0..=13).contains(&version), "metadata_request: v{version}");
    let flexible = version >= 9;
    let mut body = Vec::new();
    if flexible {
        put_uvarint(&mut body, 1); // empty compact array
    } else {
        put_i32(&mut body, 0); // empty array
    }
    if version >= 4 {
        body.push(0); // allow_auto_topic_creation
    }
    if (8..=10).contains(&version) {
        body.push(0); // include_cluster_authorized_operations
    }
    if version >= 8 {
        body.push(0); // include_topic_authorized_operations
    }
    if flexible {
        put_uvarint(&mut body, 0);
    }
    request_frame(METADATA, version, correlation_id, flexible, &body)
}

/// Sends a flexible request (header v2) on a new connection to `addr`; the
/// response after its header (v1) and throttle time, where the fields begin.
pub fn flexible_call(
    addr: SocketAddr,
    api_key: i16,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Vec<u8> {
    let frame = request_frame(api_key, version, correlation_id, true, body);
    let response = Conn::connect(addr).round_trip(&frame, correlation_id);
    let mut r = Reader::new(&response[4..]);
    r.skip_tags();
    r.i32(); // throttle
    let fields = response.len() - r.remaining();
    response[fields..].to_vec()
}

/// A cursor over a response body.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(
            self.remaining() >= n,
            "response truncated: need {n} bytes at {}, have {}",
            self.pos,
            self.remaining()
        );
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        bytes
    }

    pub fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap())
    }

    pub fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap())
    }

    pub fn uvarint(&mut self) -> u32 {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
        }
        panic!("uvarint longer than 5 bytes");
    }

    pub fn i8(&mut self) -> i8 {
        i8::from_be_bytes(self.take(1).try_into().unwrap())
    }

    /// A COMPACT_NULLABLE_STRING (uvarint length + 1, 0 for null).
    pub fn compact_nullable_string(&mut self) -> Option<String> {
        let len = self.uvarint();
        if len == 0 {
            return None;
        }
        Some(String::from_utf8_lossy(self.take(len as usize - 1)).into_owned())
    }

    /// A classic STRING (i16 length); panics on null.
    pub fn string(&mut self) -> String {
        self.nullable_string().expect("a non-null string")
    }

    /// A classic NULLABLE_STRING (i16 length, -1 for null).
    pub fn nullable_string(&mut self) -> Option<String> {
        let len = self.i16();
        if len < 0 {
            return None;
        }
        Some(String::from_utf8_lossy(self.take(len as usize)).into_owned())
    }

    /// Skips a tagged-fields section.
    pub fn skip_tags(&mut self) {
        let count = self.uvarint();
        for _ in 0..count {
            let _tag = self.uvarint();
            let size = self.uvarint() as usize;
            self.take(size);
        }
    }
}

/// One entry of an ApiVersions response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    pub api_key: i16,
    pub min_version: i16,
    pub max_version: i16,
}

#[derive(Debug)]
pub struct ApiVersionsResponse {
    pub correlation_id: i32,
    pub error_code: i16,
    pub apis: Vec<ApiRange>,
}

impl ApiVersionsResponse {
    pub fn range(&self, api_key: i16) -> Option<ApiRange> {
        self.apis.iter().copied().find(|a| a.api_key == api_key)
    }
}

/// Parses an ApiVersions response frame payload (without the size prefix)
/// of the given version. For v0 the whole payload must be consumed.
pub fn parse_api_versions(payload: &[u8], version: i16) -> ApiVersionsResponse {
    let mut r = Reader::new(payload);
    let correlation_id = r.i32(); // header v0, always, for ApiVersions
    let error_code = r.i16();
    let flexible = version >= 3;
    let count = if flexible {
        (r.uvarint() as usize).saturating_sub(1)
    } else {
        let n = r.i32();
        assert!(n >= 0, "ApiVersions api_keys array length {n}");
        n as usize
    };
    let mut apis = Vec::with_capacity(count);
    for _ in 0..count {
        apis.push(ApiRange {
            api_key: r.i16(),
            min_version: r.i16(),
            max_version: r.i16(),
        });
        if flexible {
            r.skip_tags();
        }
    }
    if version >= 1 {
        let _throttle_time_ms = r.i32();
    }
    if flexible {
        r.skip_tags();
    }
    if version == 0 {
        assert_eq!(
            r.remaining(),
            0,
            "trailing bytes after an ApiVersions v0 response body"
        );
    }
    ApiVersionsResponse {
        correlation_id,
        error_code,
        apis,
    }
}

/// A raw connection to the broker.
pub struct Conn {
    pub stream: TcpStream,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        stream.set_nodelay(true).expect("set TCP_NODELAY");
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set read timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("set write timeout");
        Conn { stream }
    }

    /// `local -> peer`, for messages.
    pub fn describe(&self) -> String {
        let local = self.stream.local_addr().map(|a| a.to_string());
        let peer = self.stream.peer_addr().map(|a| a.to_string());
        format!(
            "connection {} -> {}",
            local.unwrap_or_else(|e| e.to_string()),
            peer.unwrap_or_else(|e| e.to_string())
        )
    }

    /// Writes bytes; the broker may already have closed the connection.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads one response frame and returns its payload (after the size).
    pub fn read_frame(&mut self) -> io::Result<Vec<u8>> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        if !(4..=MAX_RESPONSE).contains(&size) {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!("response frame size {size}"),
            ));
        }
        let mut payload = vec![0u8; size as usize];
        self.stream.read_exact(&mut payload)?;
        Ok(payload)
    }

    /// Reads one size-prefixed token of SaslHandshake v0's unframed SASL
    /// exchange (no response header; may be empty).
    pub fn read_token(&mut self) -> io::Result<Vec<u8>> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        if !(0..=MAX_RESPONSE).contains(&size) {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!("token size {size}"),
            ));
        }
        let mut token = vec![0u8; size as usize];
        self.stream.read_exact(&mut token)?;
        Ok(token)
    }

    /// Sends a request frame and reads one response, checking that its
    /// correlation id matches.
    pub fn round_trip(&mut self, frame: &[u8], correlation_id: i32) -> Vec<u8> {
        let what = format!(
            "request with correlation id {correlation_id} on {}",
            self.describe()
        );
        self.send(frame)
            .unwrap_or_else(|e| panic!("send {what}: {e}"));
        self.read_response(correlation_id, &format!("response to {what}"))
    }

    /// Reads the next response, which must carry `correlation_id` (as
    /// responses come in request order); `what` names it in a failure.
    pub fn read_response(&mut self, correlation_id: i32, what: &str) -> Vec<u8> {
        let payload = self.read_frame().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            correlation_id_of(&payload),
            correlation_id,
            "{what}: correlation id out of order"
        );
        payload
    }

    /// ApiVersions v0 on this connection; asserts it succeeds.
    pub fn api_versions(&mut self, correlation_id: i32) -> ApiVersionsResponse {
        let payload = self.round_trip(&api_versions_request(0, correlation_id), correlation_id);
        let response = parse_api_versions(&payload, 0);
        assert_eq!(response.error_code, 0, "ApiVersions v0 error code");
        assert!(
            response.range(API_VERSIONS).is_some(),
            "ApiVersions does not list ApiVersions: {response:?}"
        );
        response
    }

    /// Waits until the broker closes the connection: EOF or a reset. Fails
    /// if it sends anything instead or keeps the connection open for
    /// [`IO_TIMEOUT`].
    pub fn expect_closed(&mut self, what: &str) {
        let deadline = Instant::now() + IO_TIMEOUT;
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => panic!(
                    "{what}: expected the broker to close the connection, got {n} bytes: {:?}",
                    &buf[..n.min(64)]
                ),
                Err(e) if is_closed_error(&e) => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("{what}: the broker kept the connection open for {IO_TIMEOUT:?}")
                }
                Err(e) => panic!("{what}: reading from the broker: {e}"),
            }
            assert!(Instant::now() < deadline, "{what}: connection not closed");
        }
    }
}

/// Whether a socket error means the peer closed or reset the connection.
pub fn is_closed_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof
    )
}

/// The correlation id at the start of a response payload.
pub fn correlation_id_of(payload: &[u8]) -> i32 {
    assert!(payload.len() >= 4, "response shorter than its header");
    i32::from_be_bytes(payload[..4].try_into().unwrap())
}

// Record batches and Produce, for tests that send batches no client would
// (`tests/tests/bad_batches.rs`).

pub const PRODUCE: i16 = 0;

impl Reader<'_> {
    pub fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take(8).try_into().unwrap())
    }
}

/// Bytes of a v2 batch header: base offset to record count.
pub const BATCH_HEADER_SIZE: usize = 61;

/// Kafka's zigzag varint (and varlong) encoding.
pub fn put_varint(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    buf.push(z as u8);
}

/// The records section of a v2 batch: one record per value, keyed by
/// `keys` when given, with offset deltas `0..n` and timestamp delta 0.
pub fn records_section(values: &[&[u8]], keys: Option<&[&[u8]]>) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let mut record = vec![0u8]; // attributes
        put_varint(&mut record, 0); // timestamp delta
        put_varint(&mut record, i as i64); // offset delta
        match keys.map(|k| k[i]) {
            Some(key) => {
                put_varint(&mut record, key.len() as i64);
                record.extend_from_slice(key);
            }
            None => put_varint(&mut record, -1),
        }
        put_varint(&mut record, value.len() as i64);
        record.extend_from_slice(value);
        put_varint(&mut record, 0); // headers
        put_varint(&mut out, record.len() as i64);
        out.extend_from_slice(&record);
    }
    out
}

/// A v2 record batch (no producer, CreateTime `timestamp_ms`) whose header
/// declares `record_count` records (last offset delta `record_count - 1`)
/// around the records section `section` as given (compressed or not, as
/// `attributes` say), with a correct CRC-32C.
pub fn record_batch(
    attributes: i16,
    record_count: i32,
    timestamp_ms: i64,
    section: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(BATCH_HEADER_SIZE + section.len());
    b.extend_from_slice(&0i64.to_be_bytes()); // base offset
    b.extend_from_slice(&((BATCH_HEADER_SIZE - 12 + section.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    b.push(2); // magic
    b.extend_from_slice(&[0; 4]); // crc, below
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(record_count - 1).to_be_bytes());
    b.extend_from_slice(&timestamp_ms.to_be_bytes());
    b.extend_from_slice(&timestamp_ms.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    b.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    b.extend_from_slice(&record_count.to_be_bytes());
    b.extend_from_slice(section);
    set_batch_crc(&mut b);
    b
}

/// Recomputes the CRC-32C of one whole batch after an edit.
pub fn set_batch_crc(batch: &mut [u8]) {
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// CRC-32C (Castagnoli), bitwise: test data is small.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A Produce request (acks=all) of `records` for one partition, versions 3
/// to 12 (v9+ flexible; v13 names topics by id).
pub fn produce_request(
    version: i16,
    correlation_id: i32,
    topic: &str,
    partition: i32,
    records: &[u8],
) -> Vec<u8> {
    transactional_produce_request(version, correlation_id, None, topic, partition, records)
}

/// [`produce_request`] with a transactional id (v3 to v8 only).
pub fn transactional_produce_request(
    version: i16,
    correlation_id: i32,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: &[u8],
) -> Vec<u8> {
    assert!((3..=12).contains(&version), "produce_request: v{version}");
    let flexible = version >= 9;
    assert!(!flexible || transactional_id.is_none());
    let mut body = Vec::new();
    if flexible {
        put_uvarint(&mut body, 0); // transactional id: null
    } else if let Some(id) = transactional_id {
        put_i16(&mut body, id.len() as i16);
        body.extend_from_slice(id.as_bytes());
    } else {
        put_i16(&mut body, -1);
    }
    put_i16(&mut body, -1); // acks
    put_i32(&mut body, 10_000); // timeout
    if flexible {
        put_uvarint(&mut body, 2); // one topic
        put_compact_string(&mut body, topic);
        put_uvarint(&mut body, 2); // one partition
        put_i32(&mut body, partition);
        put_uvarint(&mut body, records.len() as u32 + 1);
        body.extend_from_slice(records);
        put_uvarint(&mut body, 0); // partition tags
        put_uvarint(&mut body, 0); // topic tags
        put_uvarint(&mut body, 0); // request tags
    } else {
        put_i32(&mut body, 1);
        put_i16(&mut body, topic.len() as i16);
        body.extend_from_slice(topic.as_bytes());
        put_i32(&mut body, 1);
        put_i32(&mut body, partition);
        put_i32(&mut body, records.len() as i32);
        body.extend_from_slice(records);
    }
    request_frame(PRODUCE, version, correlation_id, flexible, &body)
}

/// Produce v3 (acks=all) of `records` to partition 0 of `topic` on a new
/// connection, asserting the answer names one topic and partition 0: the
/// partition's error code and base offset.
pub fn produce_v3(
    addr: SocketAddr,
    transactional_id: Option<&str>,
    topic: &str,
    records: &[u8],
    correlation_id: i32,
) -> (i16, i64) {
    let frame =
        transactional_produce_request(3, correlation_id, transactional_id, topic, 0, records);
    let response = Conn::connect(addr).round_trip(&frame, correlation_id);
    let mut r = Reader::new(&response[4..]);
    assert_eq!(r.i32(), 1, "one topic");
    r.string();
    assert_eq!(r.i32(), 1, "one partition");
    assert_eq!(r.i32(), 0, "partition 0");
    (r.i16(), r.i64())
}

/// The first partition of a Produce response (from [`produce_request`] of
/// `version`): error code, base offset, and from v8 the error message.
pub fn parse_produce_response(payload: &[u8], version: i16) -> (i16, i64, Option<String>) {
    let flexible = version >= 9;
    let mut r = Reader::new(&payload[4..]);
    if flexible {
        r.skip_tags();
        assert_eq!(r.uvarint(), 2, "one topic");
        r.compact_nullable_string();
        assert_eq!(r.uvarint(), 2, "one partition");
    } else {
        assert_eq!(r.i32(), 1, "one topic");
        r.string();
        assert_eq!(r.i32(), 1, "one partition");
    }
    r.i32(); // index
    let error = r.i16();
    let base_offset = r.i64();
    r.i64(); // log append time
    if version >= 5 {
        r.i64(); // log start offset
    }
    let mut message = None;
    if version >= 8 {
        if flexible {
            for _ in 0..r.uvarint().saturating_sub(1) {
                r.i32();
                r.compact_nullable_string();
                r.skip_tags();
            }
            message = r.compact_nullable_string();
        } else {
            for _ in 0..r.i32().max(0) {
                r.i32();
                r.nullable_string();
            }
            message = r.nullable_string();
        }
    }
    (error, base_offset, message)
}

/// A Fetch v4 request (header v1) for partition 0 of `topic` from
/// `offset`, waiting up to `max_wait_ms` for one byte (1 MiB limits,
/// read_uncommitted): a consumer's long poll.
pub fn fetch_request(topic: &str, offset: i64, max_wait_ms: i32, correlation_id: i32) -> Vec<u8> {
    let mut body = Vec::new();
    put_i32(&mut body, -1); // replica id
    put_i32(&mut body, max_wait_ms);
    put_i32(&mut body, 1); // min bytes
    put_i32(&mut body, 1 << 20); // max bytes
    body.push(0); // read_uncommitted
    put_i32(&mut body, 1);
    put_i16(&mut body, topic.len() as i16);
    body.extend_from_slice(topic.as_bytes());
    put_i32(&mut body, 1);
    put_i32(&mut body, 0); // partition
    body.extend_from_slice(&offset.to_be_bytes());
    put_i32(&mut body, 1 << 20); // partition max bytes
    request_frame(1, 4, correlation_id, false, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_round_trip() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut buf = Vec::new();
            put_uvarint(&mut buf, v);
            assert_eq!(Reader::new(&buf).uvarint(), v, "value {v}");
        }
    }

    #[test]
    fn api_versions_v0_frame_layout() {
        let frame = api_versions_request(0, 7);
        // size, key, version, correlation id, client id length, client id
        assert_eq!(&frame[..4], &(frame.len() as i32 - 4).to_be_bytes());
        assert_eq!(&frame[4..6], &18i16.to_be_bytes());
        assert_eq!(&frame[6..8], &0i16.to_be_bytes());
        assert_eq!(&frame[8..12], &7i32.to_be_bytes());
        assert_eq!(&frame[12..14], &12i16.to_be_bytes());
        assert_eq!(&frame[14..], b"gregor-tests");
    }

    #[test]
    fn parses_an_api_versions_v0_response() {
        let mut payload = Vec::new();
        put_i32(&mut payload, 42);
        put_i16(&mut payload, 35);
        put_i32(&mut payload, 1);
        for v in [18i16, 0, 4] {
            put_i16(&mut payload, v);
        }
        let response = parse_api_versions(&payload, 0);
        assert_eq!(response.correlation_id, 42);
        assert_eq!(response.error_code, 35);
        assert_eq!(
            response.apis,
            vec![ApiRange {
                api_key: 18,
                min_version: 0,
                max_version: 4
            }]
        );
    }
}
