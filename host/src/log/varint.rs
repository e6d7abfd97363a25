//! Kafka's zigzag varints, the one copy the log reads and writes them with.
//!
//! Records inside a v2 batch frame their fields with zigzag LEB128
//! integers: `varint` (32-bit) for lengths, offset deltas and counts,
//! `varlong` (64-bit) for timestamp deltas. The two encodings agree on
//! the 32-bit range, so one writer serves both.

/// Reads an unsigned LEB128 value of at most `max_bytes` bytes; `None`
/// if it runs past `buf` or is longer. Inline with a one-byte fast path:
/// most fields of small records (lengths, small deltas, counts) fit in one
/// byte, and validating a batch reads several per record. `None` rather
/// than an error message keeps the result in registers on that path; the
/// `read_*` functions say what was wrong.
#[inline]
fn unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    if first & 0x80 == 0 {
        *pos += 1;
        return Some(u64::from(first));
    }
    unsigned_long(buf, pos, max_bytes)
}

/// [`unsigned`] for values of more than one byte.
#[inline(never)]
fn unsigned_long(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let byte = *buf.get(*pos + i)?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *pos += i + 1;
            return Some(value);
        }
    }
    None
}

/// A zigzag varint (Kafka's `varint`, 32-bit) at `pos`, or `None` if
/// there is none; `pos` moves past it only when there is.
#[inline]
pub fn varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    let mut at = *pos;
    let raw = u32::try_from(unsigned(buf, &mut at, 5)?).ok()?;
    *pos = at;
    Some(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// A zigzag varlong (Kafka's `varlong`, 64-bit) at `pos`, or `None`.
#[inline]
pub fn varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let raw = unsigned(buf, pos, 10)?;
    Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Reads a zigzag varint (Kafka's `varint`, 32-bit).
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, String> {
    varint(buf, pos).ok_or_else(|| malformed(buf, *pos, 5, true))
}

/// Reads a zigzag varlong (Kafka's `varlong`, 64-bit).
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, String> {
    varlong(buf, pos).ok_or_else(|| malformed(buf, *pos, 10, false))
}

/// What is wrong with the varint at `pos` that did not read.
#[cold]
fn malformed(buf: &[u8], pos: usize, max_bytes: usize, is_32_bit: bool) -> String {
    let rest = buf.get(pos..).unwrap_or_default();
    match rest.iter().take(max_bytes).position(|b| b & 0x80 == 0) {
        Some(_) if is_32_bit => "varint overflows 32 bits".into(),
        Some(_) => "varint is malformed".into(),
        None if rest.len() < max_bytes => "varint runs past the end of the record".into(),
        None => format!("varint longer than {max_bytes} bytes"),
    }
}

/// Appends `value` zigzag-encoded (a `varlong`; a `varint` for values in
/// the 32-bit range).
pub fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// Appends a record field: its varint length, then its bytes; a missing
/// one (a null key or a tombstone's value) is length -1.
pub fn put_bytes(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i32::MIN as i64,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut p = 0;
            assert_eq!(read_varint(&out, &mut p).unwrap() as i64, v);
            assert_eq!(p, out.len());
        }
        for v in [i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut p = 0;
            assert_eq!(read_varlong(&out, &mut p).unwrap(), v);
        }
        let mut p = 0;
        assert!(read_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], &mut p).is_err());
        let mut p = 0;
        assert!(read_varint(&[0x80], &mut p).is_err());
    }

    #[test]
    fn a_varint_that_does_not_read_says_why_and_stays_put() {
        let cases: [(&[u8], bool, &str); 4] = [
            (&[0x80], true, "varint runs past the end of the record"),
            (&[0xff; 5], true, "varint longer than 5 bytes"),
            (
                &[0xff, 0xff, 0xff, 0xff, 0x7f],
                true,
                "varint overflows 32 bits",
            ),
            (&[0xff; 10], false, "varint longer than 10 bytes"),
        ];
        for (bytes, is_32_bit, message) in cases {
            let mut p = 0;
            let read = if is_32_bit {
                read_varint(bytes, &mut p).map(i64::from)
            } else {
                read_varlong(bytes, &mut p)
            };
            assert_eq!(read, Err(message.to_string()), "{bytes:?}");
            assert_eq!(p, 0, "{bytes:?}");
        }
        // Multi-byte values read through the long path.
        let mut p = 1;
        assert_eq!(varint(&[0, 0xac, 0x02], &mut p), Some(150));
        assert_eq!(p, 3);
    }

    #[test]
    fn fields_are_length_prefixed_and_null_is_minus_one() {
        let mut out = Vec::new();
        put_bytes(&mut out, None);
        put_bytes(&mut out, Some(b"ab"));
        assert_eq!(out, [0x01, 0x04, b'a', b'b']);
    }
}
