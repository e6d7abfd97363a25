//! Decompression of record batches, for the few places the host must see
//! inside a compressed batch: the keys of an append to a compacted topic
//! (Kafka refuses keyless records there), the cleaner's key map and
//! filtering, and the exact record answering a ListOffsets by timestamp.
//! Everything else (appends, fetches) moves compressed batches opaquely.
//!
//! The codecs are Kafka's: gzip (1), snappy (2, raw or in the xerial
//! framing the Java client writes), lz4 (3, the LZ4 frame format) and zstd
//! (4), all in pure Rust. Output is capped at [`MAX_DECOMPRESSED`] so a
//! hostile batch cannot exhaust memory.

use std::io::Read;

/// The most a batch may decompress to.
pub const MAX_DECOMPRESSED: usize = 256 << 20;

/// The xerial snappy stream header the Java client writes.
const XERIAL_MAGIC: &[u8] = &[0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// Decompresses the records section of a batch compressed with `codec`.
pub fn decompress(codec: i16, data: &[u8]) -> Result<Vec<u8>, String> {
    let limit = MAX_DECOMPRESSED as u64 + 1;
    let mut out = Vec::new();
    let read = match codec {
        1 => flate2::read::MultiGzDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        2 => return snappy(data),
        3 => lz4_flex::frame::FrameDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        4 => {
            let decoder =
                ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| format!("zstd: {e}"))?;
            decoder.take(limit).read_to_end(&mut out)
        }
        other => return Err(format!("unknown compression codec {other}")),
    };
    read.map_err(|e| format!("cannot decompress (codec {codec}): {e}"))?;
    if out.len() > MAX_DECOMPRESSED {
        return Err(format!(
            "the batch decompresses to more than {MAX_DECOMPRESSED} bytes"
        ));
    }
    Ok(out)
}

fn snappy_block(block: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let len = snap::raw::decompress_len(block).map_err(|e| format!("snappy: {e}"))?;
    if out.len() + len > MAX_DECOMPRESSED {
        return Err(format!(
            "the batch decompresses to more than {MAX_DECOMPRESSED} bytes"
        ));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| format!("snappy: {e}"))?;
    Ok(())
}

/// Raw snappy, or the xerial framing: the magic, two 4-byte versions, then
/// blocks of `length: i32` and raw snappy.
fn snappy(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let Some(rest) = data.strip_prefix(XERIAL_MAGIC) else {
        snappy_block(data, &mut out)?;
        return Ok(out);
    };
    let mut rest = rest.get(8..).ok_or("truncated xerial snappy header")?;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_at_checked(4)
            .ok_or("truncated snappy block length")?;
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        let len = usize::try_from(len).map_err(|_| "negative snappy block length")?;
        let (block, tail) = tail.split_at_checked(len).ok_or("truncated snappy block")?;
        snappy_block(block, &mut out)?;
        rest = tail;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sample() -> Vec<u8> {
        (0..10_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        assert_eq!(decompress(1, &gz.finish().unwrap()).unwrap(), data);

        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(2, &raw).unwrap(), data);
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for chunk in data.chunks(7000) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(block.len() as i32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        assert_eq!(decompress(2, &xerial).unwrap(), data);

        let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz4.write_all(&data).unwrap();
        assert_eq!(decompress(3, &lz4.finish().unwrap()).unwrap(), data);

        let zstd = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        assert_eq!(decompress(4, &zstd).unwrap(), data);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in 1..=5 {
            assert!(
                decompress(codec, &[1, 2, 3, 4, 5, 6, 7, 8, 9]).is_err(),
                "{codec}"
            );
        }
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 9, 9]);
        assert!(decompress(2, &xerial).is_err());
    }
}
