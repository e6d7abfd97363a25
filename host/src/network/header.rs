//! Request and response headers.
//!
//! The host parses the request header itself and needs no schema for the
//! body: whether an ApiKey/version uses the flexible header (v2, with
//! tagged fields) is known from what its module declared. Response header
//! v1 adds an empty tagged-field section; ApiVersions always answers with
//! header v0 so that a client can read it before it knows our versions.

use std::fmt;

use bytes::{Buf, Bytes};

/// The ApiVersions key, whose response header is always v0.
pub const API_VERSIONS_KEY: i16 = 18;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    Truncated,
    InvalidClientId,
    InvalidTaggedFields,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Truncated => write!(f, "request header is truncated"),
            HeaderError::InvalidClientId => write!(f, "client id is not valid UTF-8"),
            HeaderError::InvalidTaggedFields => {
                write!(f, "request header tagged fields are malformed")
            }
        }
    }
}

/// The api key and version at the start of a frame, before anything else
/// is known about it.
pub fn peek_key_and_version(frame: &[u8]) -> Option<(i16, i16)> {
    let key = i16::from_be_bytes([*frame.first()?, *frame.get(1)?]);
    let version = i16::from_be_bytes([*frame.get(2)?, *frame.get(3)?]);
    Some((key, version))
}

/// Parses the header (v1, or v2 when `flexible`) and returns it with the body.
pub fn parse_request(
    mut frame: Bytes,
    flexible: bool,
) -> Result<(RequestHeader, Bytes), HeaderError> {
    if frame.remaining() < 10 {
        return Err(HeaderError::Truncated);
    }
    let api_key = frame.get_i16();
    let api_version = frame.get_i16();
    let correlation_id = frame.get_i32();
    let client_id_len = frame.get_i16();
    let client_id = if client_id_len < 0 {
        None
    } else {
        let len = client_id_len as usize;
        if frame.remaining() < len {
            return Err(HeaderError::Truncated);
        }
        let raw = frame.split_to(len);
        Some(String::from_utf8(raw.to_vec()).map_err(|_| HeaderError::InvalidClientId)?)
    };
    if flexible {
        skip_tagged_fields(&mut frame)?;
    }
    let header = RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id,
    };
    Ok((header, frame))
}

fn read_unsigned_varint(buf: &mut Bytes) -> Result<u32, HeaderError> {
    let mut value: u32 = 0;
    for shift in (0..35).step_by(7) {
        if !buf.has_remaining() {
            return Err(HeaderError::InvalidTaggedFields);
        }
        let byte = buf.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HeaderError::InvalidTaggedFields)
}

fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), HeaderError> {
    let count = read_unsigned_varint(buf)?;
    for _ in 0..count {
        let _tag = read_unsigned_varint(buf)?;
        let size = read_unsigned_varint(buf)? as usize;
        if buf.remaining() < size {
            return Err(HeaderError::InvalidTaggedFields);
        }
        buf.advance(size);
    }
    Ok(())
}

/// Whether the response to this request uses header v1.
pub fn flexible_response_header(api_key: i16, request_flexible: bool) -> bool {
    request_flexible && api_key != API_VERSIONS_KEY
}

/// A whole response frame: size, correlation id, optional empty tagged
/// fields, body.
pub fn encode_response(correlation_id: i32, flexible_header: bool, body: &[u8]) -> Vec<u8> {
    let mut frame = response_head(correlation_id, flexible_header, body.len(), body.len());
    frame.extend_from_slice(body);
    frame
}

/// The size prefix and response header of a frame whose body is
/// `body_len` bytes, with room for `capacity` more.
pub fn response_head(
    correlation_id: i32,
    flexible_header: bool,
    body_len: usize,
    capacity: usize,
) -> Vec<u8> {
    let header_len = if flexible_header { 5 } else { 4 };
    let size = header_len + body_len;
    let mut frame = Vec::with_capacity(4 + header_len + capacity);
    frame.extend_from_slice(&(size as u32).to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible_header {
        frame.push(0);
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(client: Option<&str>, tagged: Option<&[u8]>) -> Vec<u8> {
        let mut out = vec![0, 3, 0, 12, 0, 0, 0, 42];
        match client {
            Some(id) => {
                out.extend_from_slice(&(id.len() as i16).to_be_bytes());
                out.extend_from_slice(id.as_bytes());
            }
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        if let Some(tagged) = tagged {
            out.extend_from_slice(tagged);
        }
        out.extend_from_slice(b"body");
        out
    }

    #[test]
    fn parses_v1_and_v2_headers() {
        let (header, body) =
            parse_request(Bytes::from(header_bytes(Some("app"), None)), false).unwrap();
        assert_eq!(header.api_key, 3);
        assert_eq!(header.api_version, 12);
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.client_id.as_deref(), Some("app"));
        assert_eq!(&body[..], b"body");

        let tagged = [1u8, 5, 2, 0xaa, 0xbb];
        let (header, body) =
            parse_request(Bytes::from(header_bytes(None, Some(&tagged))), true).unwrap();
        assert_eq!(header.client_id, None);
        assert_eq!(&body[..], b"body");
    }

    #[test]
    fn rejects_malformed_headers() {
        let mut bytes = header_bytes(Some("app"), None);
        bytes.truncate(11);
        assert_eq!(
            parse_request(Bytes::from(bytes), false),
            Err(HeaderError::Truncated)
        );
        let bad_tags = [3u8, 1, 100];
        assert_eq!(
            parse_request(Bytes::from(header_bytes(None, Some(&bad_tags))), true),
            Err(HeaderError::InvalidTaggedFields)
        );
    }

    #[test]
    fn response_headers() {
        assert_eq!(
            encode_response(7, false, b"x"),
            vec![0, 0, 0, 5, 0, 0, 0, 7, b'x']
        );
        assert_eq!(
            encode_response(7, true, b""),
            vec![0, 0, 0, 5, 0, 0, 0, 7, 0]
        );
        assert!(!flexible_response_header(API_VERSIONS_KEY, true));
        assert!(flexible_response_header(3, true));
    }
}
