//! Plain Kafka wire encoding (the classic, non-flexible types) for modules
//! that add an ApiKey of their own and so have no schema in
//! `kafka-protocol`: big-endian integers, INT16-length strings and
//! INT32-count arrays.

use crate::ApiInfo;

/// Describes a module for a brand-new ApiKey. Its versions use the classic
/// (non-flexible) headers.
pub fn custom_api_info(api_key: i16, name: &str, min: i16, max: i16) -> ApiInfo {
    ApiInfo {
        api_key,
        name: name.to_string(),
        min_version: min,
        max_version: max,
        first_flexible_version: None,
    }
}

/// Reads classic Kafka types; every read checks the remaining length.
pub struct Reader<'a> {
    buf: &'a [u8],
}

/// A body that ended early or held an impossible length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub fn i16(&mut self) -> Result<i16, Malformed> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    pub fn i32(&mut self) -> Result<i32, Malformed> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A STRING (INT16 length, UTF-8); NULLABLE_STRING's -1 is None.
    pub fn string(&mut self) -> Result<Option<String>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| Malformed)
    }

    /// An ARRAY count; -1 (null) is None. A count larger than the bytes
    /// left could hold is malformed, so no huge allocation follows.
    pub fn array_len(&mut self) -> Result<Option<usize>, Malformed> {
        let count = self.i32()?;
        if count < 0 {
            return Ok(None);
        }
        let count = count as usize;
        if count > self.buf.len() {
            return Err(Malformed);
        }
        Ok(Some(count))
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Writes classic Kafka types.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn i16(&mut self, value: i16) -> &mut Self {
        self.buf.extend_from_slice(&value.to_be_bytes());
        self
    }

    pub fn i32(&mut self, value: i32) -> &mut Self {
        self.buf.extend_from_slice(&value.to_be_bytes());
        self
    }

    pub fn i64(&mut self, value: i64) -> &mut Self {
        self.buf.extend_from_slice(&value.to_be_bytes());
        self
    }

    pub fn bytes(&mut self, value: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(value);
        self
    }

    /// A STRING; longer than i16::MAX bytes is cut at a char boundary.
    pub fn string(&mut self, value: &str) -> &mut Self {
        let mut end = value.len().min(i16::MAX as usize);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        self.i16(end as i16);
        self.buf.extend_from_slice(&value.as_bytes()[..end]);
        self
    }

    pub fn array_len(&mut self, count: usize) -> &mut Self {
        self.i32(i32::try_from(count).unwrap_or(i32::MAX))
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_malformed() {
        let mut writer = Writer::new();
        writer.array_len(2).string("a").string("bé").i16(-1);
        let bytes = writer.finish();
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.array_len(), Ok(Some(2)));
        assert_eq!(reader.string(), Ok(Some("a".to_string())));
        assert_eq!(reader.string(), Ok(Some("bé".to_string())));
        assert_eq!(reader.string(), Ok(None));
        assert!(reader.is_empty());
        assert_eq!(Reader::new(&[0, 0, 0, 200]).array_len(), Err(Malformed));
        assert_eq!(Reader::new(&[0, 5, b'a']).string(), Err(Malformed));
    }
}
