//! Versions Kafka 4 removed (KIP-896) that Gregor still serves, so that
//! Kafka 3.x-era clients (Burrow, older sarama and kafka-go, kafka-python
//! pinned to an old `api_version`) can commit offsets, list offsets and
//! create topics.
//!
//! `kafka-protocol` 0.18 is generated from Kafka 4's message schemas, so it
//! neither decodes nor encodes those versions. None of them is flexible, and
//! each differs from the oldest version the crate knows (the *base*) by
//! fields added or removed. So a handler describes its message once, as
//! Kafka's JSON schemas do: every field with the versions it is present in
//! ([`Field`]). A request of an old version is rewritten, byte by byte, into
//! the base version (fields it lacks get their default, fields the base
//! lacks are dropped) and decoded by the crate as usual; the response is
//! encoded for the base version and rewritten back. A field of an old
//! version whose value the base carries in another form (ListOffsets v0's
//! `old_style_offsets`, DescribeConfigs v0's `is_default`) is [derived]
//! from the fields read before it.
//!
//! A request body is untrusted: every read is checked against the bytes
//! left, a count larger than them is malformed (as Kafka's generated readers
//! have it), and the rewritten body may not exceed [`DECODE_BUDGET`].
//!
//! [derived]: Field::derived

use crate::bounded::{DecodeError, DECODE_BUDGET};

pub mod acl;

/// The versions a field is present in, both ends included.
pub type Versions = (i16, i16);

/// The type of a field, as Kafka's schemas name them (non-flexible forms).
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    Int8,
    Int16,
    Int32,
    Int64,
    Bool,
    /// STRING or NULLABLE_STRING: an INT16 length (-1 for null) and bytes.
    String,
    /// BYTES, NULLABLE_BYTES or RECORDS: an INT32 length (-1 for null)
    /// and bytes.
    Bytes,
    /// An INT32 count (-1 for a null array) and the elements.
    Array(&'static Ty),
    /// An array of structs with these fields.
    Structs(&'static [Field]),
}

/// Scalars (integers and booleans) of the struct being rewritten, by name,
/// in the order read.
pub type Scalars = [(&'static str, i64)];

/// Writes a field of the target version from the struct's scalars read so far.
pub type Derive = fn(&Scalars, &mut Vec<u8>);

/// One field of a message, in schema order.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    name: &'static str,
    ty: Ty,
    versions: Versions,
    /// The value of an integer or boolean field absent from the source
    /// version (strings are empty, arrays empty).
    default: i64,
    derive: Option<Derive>,
}

impl Field {
    /// A field present in `versions`, whose default is zero (false, an
    /// empty string or array).
    pub const fn new(name: &'static str, ty: Ty, versions: Versions) -> Self {
        Field {
            name,
            ty,
            versions,
            default: 0,
            derive: None,
        }
    }

    /// The same field with another default for an integer or boolean.
    pub const fn with_default(mut self, default: i64) -> Self {
        self.default = default;
        self
    }

    /// The same field, written from the struct's other fields when the
    /// source version lacks it.
    pub const fn derived(mut self, derive: Derive) -> Self {
        self.derive = Some(derive);
        self
    }

    fn present(&self, version: i16) -> bool {
        (self.versions.0..=self.versions.1).contains(&version)
    }
}

/// "N+" in Kafka's schemas.
pub const LATEST: i16 = i16::MAX;

/// A field present in every version ("0+").
pub const fn all(name: &'static str, ty: Ty) -> Field {
    Field::new(name, ty, (0, LATEST))
}

/// A field present from version `first` on ("N+").
pub const fn since(first: i16, name: &'static str, ty: Ty) -> Field {
    Field::new(name, ty, (first, LATEST))
}

/// How a handler serves versions older than its message schema in
/// `kafka-protocol`: the request and response described field by field,
/// and the base version they are rewritten to and from.
#[derive(Debug, Clone, Copy)]
pub struct Legacy {
    /// The oldest version the crate decodes; older ones are rewritten.
    pub base: i16,
    /// The request's fields, or None when the old versions' request is
    /// the base version's, byte for byte.
    request: Option<&'static [Field]>,
    /// The response's fields, or None as for `request`.
    response: Option<&'static [Field]>,
    /// Whether the base version is flexible (compact strings and arrays,
    /// tagged fields); old versions never are.
    flexible_base: bool,
}

impl Legacy {
    /// Old versions rewritten to and from the non-flexible `base`.
    pub const fn new(
        base: i16,
        request: Option<&'static [Field]>,
        response: Option<&'static [Field]>,
    ) -> Self {
        Legacy {
            base,
            request,
            response,
            flexible_base: false,
        }
    }

    /// Old versions whose messages are the base version's, byte for byte
    /// (the base changed a behaviour only, such as throttling).
    pub const fn same_as(base: i16) -> Self {
        Legacy::new(base, None, None)
    }

    /// The same, with a flexible base version.
    pub const fn flexible(mut self) -> Self {
        self.flexible_base = true;
        self
    }

    /// A request body of `version` rewritten as one of the base version.
    pub fn request_to_base(&self, body: &[u8], version: i16) -> Result<Vec<u8>, DecodeError> {
        self.rewrite(self.request, body, (version, false), self.base_side())
    }

    /// A response body of the base version rewritten for `version`.
    pub fn response_from_base(&self, body: &[u8], version: i16) -> Result<Vec<u8>, DecodeError> {
        self.rewrite(self.response, body, self.base_side(), (version, false))
    }

    /// The other two directions, for tests that play the client.
    pub fn request_from_base(&self, body: &[u8], version: i16) -> Result<Vec<u8>, DecodeError> {
        self.rewrite(self.request, body, self.base_side(), (version, false))
    }

    /// See [`Legacy::request_from_base`].
    pub fn response_to_base(&self, body: &[u8], version: i16) -> Result<Vec<u8>, DecodeError> {
        self.rewrite(self.response, body, (version, false), self.base_side())
    }

    fn base_side(&self) -> Side {
        (self.base, self.flexible_base)
    }

    fn rewrite(
        &self,
        fields: Option<&[Field]>,
        body: &[u8],
        from: Side,
        to: Side,
    ) -> Result<Vec<u8>, DecodeError> {
        match fields {
            Some(fields) => rewrite_sides(fields, body, from, to),
            None => Ok(body.to_vec()),
        }
    }
}

/// A version and whether it is flexible.
type Side = (i16, bool);

/// `body`, a message of (non-flexible) version `from` described by
/// `fields`, as one of (non-flexible) version `to`.
pub fn rewrite(fields: &[Field], body: &[u8], from: i16, to: i16) -> Result<Vec<u8>, DecodeError> {
    rewrite_sides(fields, body, (from, false), (to, false))
}

fn rewrite_sides(
    fields: &[Field],
    body: &[u8],
    from: Side,
    to: Side,
) -> Result<Vec<u8>, DecodeError> {
    let mut rewriter = Rewriter {
        body,
        at: 0,
        out: Vec::with_capacity(body.len() + 16),
        from,
        to,
    };
    rewriter.fields(fields)?;
    if rewriter.at != body.len() {
        return Err(malformed("trailing bytes"));
    }
    Ok(rewriter.out)
}

fn malformed(why: &str) -> DecodeError {
    DecodeError::Malformed(format!("old version: {why}"))
}

struct Rewriter<'a> {
    body: &'a [u8],
    at: usize,
    out: Vec<u8>,
    from: Side,
    to: Side,
}

impl Rewriter<'_> {
    /// A struct's fields, then (in flexible versions) its tagged fields:
    /// read past, none written.
    fn fields(&mut self, fields: &[Field]) -> Result<(), DecodeError> {
        let mut scalars: Vec<(&'static str, i64)> = Vec::new();
        for field in fields {
            match (field.present(self.from.0), field.present(self.to.0)) {
                (true, keep) => {
                    if let Some(value) = self.value(field.ty, keep)? {
                        scalars.push((field.name, value));
                    }
                }
                (false, true) => match field.derive {
                    Some(derive) => derive(&scalars, &mut self.out),
                    None => self.put_default(field),
                },
                (false, false) => {}
            }
        }
        if self.from.1 {
            for _ in 0..self.uvarint()? {
                self.uvarint()?; // tag
                let size = self.uvarint()?;
                self.copy(size as usize, false)?;
            }
        }
        if self.to.1 {
            self.out.push(0);
        }
        if self.out.len() > DECODE_BUDGET {
            return Err(DecodeError::TooLarge);
        }
        Ok(())
    }

    /// Reads one value, copying it when `keep`; returns it if a scalar.
    fn value(&mut self, ty: Ty, keep: bool) -> Result<Option<i64>, DecodeError> {
        let width = match ty {
            Ty::Int8 | Ty::Bool => 1,
            Ty::Int16 => 2,
            Ty::Int32 => 4,
            Ty::Int64 => 8,
            Ty::String | Ty::Bytes => {
                let width = if matches!(ty, Ty::String) { 2 } else { 4 };
                let len = self.length(width, keep)?;
                if len > 0 {
                    self.copy(len as usize, keep)?;
                }
                return Ok(None);
            }
            Ty::Array(element) => return self.array(keep, |r| r.value(*element, keep).map(drop)),
            Ty::Structs(fields) => return self.array(keep, |r| r.nested(fields, keep)),
        };
        self.int(width, keep).map(Some)
    }

    /// An array's count and its elements, each read by `element`.
    fn array(
        &mut self,
        keep: bool,
        mut element: impl FnMut(&mut Self) -> Result<(), DecodeError>,
    ) -> Result<Option<i64>, DecodeError> {
        let count = self.length(4, keep)?;
        if count > (self.body.len() - self.at) as i64 {
            return Err(malformed("array count larger than the bytes left"));
        }
        for _ in 0..count.max(0) {
            element(self)?;
        }
        Ok(None)
    }

    /// A struct: rewritten when kept, else read past.
    fn nested(&mut self, fields: &[Field], keep: bool) -> Result<(), DecodeError> {
        if keep {
            return self.fields(fields);
        }
        let to = std::mem::replace(&mut self.to, self.from);
        let mark = self.out.len();
        let result = self.fields(fields);
        self.out.truncate(mark);
        self.to = to;
        result
    }

    /// A string length or array count (-1: null), `width` bytes wide in a
    /// non-flexible version, a varint of itself plus one in a flexible
    /// one; written in the target's form when `keep`.
    fn length(&mut self, width: usize, keep: bool) -> Result<i64, DecodeError> {
        let length = if self.from.1 {
            i64::from(self.uvarint()?) - 1
        } else {
            self.int(width, false)?
        };
        if keep {
            self.put_length(length, width);
        }
        Ok(length)
    }

    fn put_length(&mut self, length: i64, width: usize) {
        if self.to.1 {
            let mut v = (length + 1).max(0) as u32;
            while v >= 0x80 {
                self.out.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.out.push(v as u8);
        } else {
            self.out
                .extend_from_slice(&length.to_be_bytes()[8 - width..]);
        }
    }

    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.copy(1, false)?[0];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed("varint longer than five bytes"))
    }

    /// A big-endian signed integer of `width` bytes.
    fn int(&mut self, width: usize, keep: bool) -> Result<i64, DecodeError> {
        let bytes = self.copy(width, keep)?;
        let mut value = if bytes[0] & 0x80 != 0 { -1i64 } else { 0 };
        for &byte in bytes {
            value = (value << 8) | i64::from(byte);
        }
        Ok(value)
    }

    fn copy(&mut self, len: usize, keep: bool) -> Result<&[u8], DecodeError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.body.len())
            .ok_or_else(|| malformed("body ends inside a field"))?;
        let bytes = &self.body[self.at..end];
        self.at = end;
        if keep {
            self.out.extend_from_slice(bytes);
        }
        Ok(bytes)
    }

    fn put_default(&mut self, field: &Field) {
        let value = field.default;
        match field.ty {
            Ty::Int8 | Ty::Bool => self.out.push(value as u8),
            Ty::Int16 => self.out.extend_from_slice(&(value as i16).to_be_bytes()),
            Ty::Int32 => self.out.extend_from_slice(&(value as i32).to_be_bytes()),
            Ty::Int64 => self.out.extend_from_slice(&value.to_be_bytes()),
            Ty::String => self.put_length(value, 2),
            Ty::Bytes => self.put_length(value, 4),
            Ty::Array(_) | Ty::Structs(_) => self.put_length(value, 4),
        }
    }
}

/// The scalar `name` read before in this struct, if any.
pub fn scalar(scalars: &Scalars, name: &str) -> Option<i64> {
    scalars
        .iter()
        .find(|(field, _)| *field == name)
        .map(|&(_, value)| value)
}

#[cfg(test)]
mod tests;
