//! Kafka's zigzag varints, the one copy the log reads and writes them with.
//!
//! Records inside a v2 batch frame their fields with zigzag LEB128
//! integers: `varint` (32-bit) for lengths, offset deltas and counts,
//! `varlong` (64-bit) for timestamp deltas. The two encodings agree on
//! the 32-bit range, so one writer serves both.

/// Reads an unsigned LEB128 value of at most `max_bytes` bytes.
fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, String> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let byte = *buf
            .get(*pos)
            .ok_or("varint runs past the end of the record")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(format!("varint longer than {max_bytes} bytes"))
}

/// Reads a zigzag varint (Kafka's `varint`, 32-bit).
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, String> {
    let raw = read_unsigned(buf, pos, 5)?;
    let raw = u32::try_from(raw).map_err(|_| "varint overflows 32 bits".to_string())?;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zigzag varlong (Kafka's `varlong`, 64-bit).
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, String> {
    let raw = read_unsigned(buf, pos, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
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
    fn fields_are_length_prefixed_and_null_is_minus_one() {
        let mut out = Vec::new();
        put_bytes(&mut out, None);
        put_bytes(&mut out, Some(b"ab"));
        assert_eq!(out, [0x01, 0x04, b'a', b'b']);
    }
}
