//! Fuzzing record batches and decompression (see `fuzz_input`).

use std::io::Write;

use super::batch::testing::{encode_batch_with, fix_crc, gzip_batch, simple_batch, Rec};
use super::batch::{self, BatchHeader, Records};
use super::codec;
use crate::fuzz_input::run;

fn batch_seeds() -> Vec<Vec<u8>> {
    let records = [Rec::new(1_000, b"value-a"), Rec::new(2_000, b"value-b")];
    let plain = encode_batch_with(0, &records);
    let mut gzip = gzip_batch(&plain);
    fix_crc(&mut gzip);
    vec![simple_batch(3, 20, 5_000), plain, gzip]
}

/// Everything the host does with a batch a client sent; also with the CRC
/// made to match, so mutations reach the checks behind it.
fn check_batch(input: &[u8]) -> bool {
    let mut appended = batch::prepare_append(input, 1 << 20, None, false).is_ok();
    if input.len() >= batch::HEADER_SIZE {
        let mut fixed = input.to_vec();
        fix_crc(&mut fixed);
        appended |= batch::prepare_append(&fixed, 1 << 20, None, false).is_ok();
    }
    let _ = batch::prepare_append(input, 1 << 20, Some(7), true);
    if let Ok(header) = BatchHeader::parse(input) {
        let _ = batch::crc_matches(input, &header);
        if let Ok(section) = batch::record_section(input, &header, codec::limit_for(1 << 20)) {
            for record in Records::in_section(&section, &header).take(10_000) {
                if record.is_err() {
                    break;
                }
            }
        }
        for record in Records::new(input, &header).take(10_000) {
            if record.is_err() {
                break;
            }
        }
        let _ = batch::record_with_max_timestamp(input, &header);
        let _ = batch::first_record_at_or_after(input, &header, 1_500, 0);
    }
    appended
}

#[test]
fn fuzz_record_batches() {
    run("batch", batch_seeds(), 10_000, check_batch);
}

fn compressed_seeds() -> Vec<Vec<u8>> {
    let plain: Vec<u8> = (0..2_000u32)
        .flat_map(|i| (i % 251).to_be_bytes())
        .collect();
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(&plain).expect("gzip");
    let gzip = gzip.finish().expect("gzip");
    let snappy = snap::raw::Encoder::new()
        .compress_vec(&plain)
        .expect("snappy");
    let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
    lz4.write_all(&plain).expect("lz4");
    let lz4 = lz4.finish().expect("lz4");
    // Codec number first, then the compressed bytes.
    [(1u8, gzip), (2, snappy), (3, lz4), (4, Vec::new())]
        .into_iter()
        .map(|(codec, bytes)| std::iter::once(codec).chain(bytes).collect())
        .collect()
}

#[test]
fn fuzz_decompression() {
    run("codec", compressed_seeds(), 4_000, |input| {
        let Some((&codec, data)) = input.split_first() else {
            return false;
        };
        let limit = codec::limit_for(1 << 20);
        match codec::decompress(i16::from(codec % 5), data, limit) {
            Ok(out) => out.len() <= limit,
            Err(_) => false,
        }
    });
}
