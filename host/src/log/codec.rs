//! Decompression of record batches, for the places the host must see inside
//! a compressed batch: append validation (Kafka's LogValidator walks every
//! record of a client batch, see `validate`), the cleaner's key map and
//! filtering, and the exact record answering a ListOffsets by timestamp.
//! Fetches move compressed batches opaquely.
//!
//! The codecs are Kafka's: gzip (1), snappy (2, raw or in the xerial
//! framing the Java client writes), lz4 (3, the LZ4 frame format) and zstd
//! (4), all in pure Rust.
//!
//! Memory is bounded whatever a batch claims. [`reader`] streams: callers
//! that only walk records (validation, timestamp lookups) hold a 64 KiB
//! buffer plus the decoder's own window, not the decompressed section
//! (except snappy, which decodes whole blocks: raw snappy is one block).
//! Every reader stops with [`CodecError::TooLarge`] once more than its limit
//! has come out, so a small batch cannot cost unbounded CPU either. Sizes
//! declared in headers are checked before anything is allocated for them:
//! a raw snappy block may not declare more than snappy can expand its bytes
//! to (or than the limit), a zstd frame may not declare a window or content
//! size above the limit; gzip and lz4 decoders allocate fixed-size buffers
//! (lz4 blocks are at most 4 MiB).
//!
//! Empty input is corrupt for every codec, and an lz4 stream must end with
//! its end mark (the decoder would take a stream cut at a block boundary
//! for a finished one).

use std::fmt;
use std::io::{self, BufRead, BufReader, Cursor, Read};

/// The most a batch may decompress to anywhere in the host, whatever the
/// topic's `max.message.bytes`: the bound for stored batches read back
/// (ListOffsets), which were checked against their topic's tighter limit
/// when appended.
pub const MAX_DECOMPRESSED: usize = 256 << 20;

/// How many times `max.message.bytes` a batch may decompress to.
/// `max.message.bytes` bounds the batch as sent (compressed); producers
/// bound the uncompressed batch by their own settings (librdkafka's
/// `message.max.bytes`, 1 MB; the Java client's `batch.size`, 16 KiB, grown
/// by its compression-ratio estimate), and real payloads (JSON, logs, Avro)
/// compress 3-20 times, so 64 times leaves a wide margin while a 1 MiB
/// batch of zeros that would expand to gigabytes is refused.
pub const EXPANSION_FACTOR: usize = 64;

/// The least any batch may decompress to, so topics with a tiny
/// `max.message.bytes` still accept ordinary compressed batches.
const MIN_LIMIT: usize = 1 << 20;

/// What a batch of a topic with this `max.message.bytes` may decompress
/// to: [`EXPANSION_FACTOR`] times it, between 1 MiB and
/// [`MAX_DECOMPRESSED`] (64 MiB at Kafka's default of 1 MiB + 12).
pub fn limit_for(max_message_bytes: usize) -> usize {
    max_message_bytes
        .saturating_mul(EXPANSION_FACTOR)
        .clamp(MIN_LIMIT, MAX_DECOMPRESSED)
}

/// The xerial snappy stream header the Java client writes.
const XERIAL_MAGIC: &[u8] = &[0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// Raw snappy expands at most this many times: its densest element, a
/// 3-byte copy, writes 64 bytes (21.3 times).
const SNAPPY_MAX_EXPANSION: usize = 22;

/// Buffer between a decoder and the record walker.
const STREAM_BUFFER: usize = 64 << 10;

const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Skippable zstd frames carry 0x184D2A50 to 0x184D2A5F.
const ZSTD_SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const ZSTD_SKIPPABLE: u32 = 0x184D_2A50;

/// Why a records section cannot be decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodecError {
    /// Not a valid stream of its codec (garbage, truncated, empty, an
    /// impossible declared size, an unknown codec id).
    Corrupt(String),
    /// It decompresses, or declares it would, to more than the limit.
    TooLarge { limit: usize },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Corrupt(m) => f.write_str(m),
            CodecError::TooLarge { limit } => {
                write!(f, "the records decompress to more than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for CodecError {}

impl CodecError {
    /// The codec error carried by an I/O error from a [`reader`]; any other
    /// I/O error of a decoder (they read from memory) means a bad stream.
    pub fn from_io(e: io::Error) -> CodecError {
        if e.get_ref().is_some_and(|inner| inner.is::<CodecError>()) {
            if let Some(inner) = e.into_inner() {
                if let Ok(codec) = inner.downcast::<CodecError>() {
                    return *codec;
                }
            }
            return CodecError::Corrupt("decoder failed".into());
        }
        CodecError::Corrupt(e.to_string())
    }

    fn into_io(self) -> io::Error {
        io::Error::other(self)
    }
}

fn codec_name(codec: i16) -> &'static str {
    match codec {
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// A buffered stream of what the records section `data` of a batch
/// compressed with `codec` decompresses to, failing (with a [`CodecError`]
/// inside the `io::Error`, see [`CodecError::from_io`]) past `limit` bytes.
pub fn reader<'a>(
    codec: i16,
    data: &'a [u8],
    limit: usize,
) -> Result<Box<dyn BufRead + 'a>, CodecError> {
    let name = codec_name(codec);
    if !(1..=4).contains(&codec) {
        return Err(CodecError::Corrupt(format!(
            "unknown compression codec {codec}"
        )));
    }
    if data.is_empty() {
        return Err(CodecError::Corrupt(format!("{name}: no compressed data")));
    }
    let corrupt = |e: &dyn fmt::Display| CodecError::Corrupt(format!("{name}: {e}"));
    let decoder: Box<dyn Read + 'a> = match codec {
        1 => Box::new(flate2::read::MultiGzDecoder::new(data)),
        2 => Box::new(Snappy::new(data, limit).map_err(|e| corrupt(&e))?),
        3 => {
            lz4_frames_complete(data).map_err(|e| corrupt(&e))?;
            Box::new(lz4_flex::frame::FrameDecoder::new(data))
        }
        _ => Box::new(Zstd::new(data, limit)?),
    };
    Ok(Box::new(BufReader::with_capacity(
        STREAM_BUFFER,
        Limited {
            inner: decoder,
            name,
            produced: 0,
            limit,
        },
    )))
}

/// Decompresses a whole records section, for the cleaner, which rewrites
/// records and so needs them in memory: at most `limit` bytes.
pub fn decompress(codec: i16, data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    reader(codec, data, limit)?
        .read_to_end(&mut out)
        .map_err(CodecError::from_io)?;
    Ok(out)
}

/// Compresses a records section as Kafka's Java client writes it: gzip,
/// snappy in the xerial framing (32 KiB blocks), lz4 in the LZ4 frame
/// format. For the batches the host builds itself (message-format
/// conversion, `legacy_format`); zstd and unknown codecs are not written.
pub fn compress_section(codec: i16, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    use std::io::Write;
    let failed = |e: io::Error| CodecError::Corrupt(format!("{}: {e}", codec_name(codec)));
    match codec {
        1 => {
            let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gzip.write_all(data).map_err(failed)?;
            gzip.finish().map_err(failed)
        }
        2 => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]); // version, compatible version
            let mut encoder = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| CodecError::Corrupt(format!("snappy: {e}")))?;
                let length = i32::try_from(block.len())
                    .map_err(|_| CodecError::Corrupt("snappy: block too large".into()))?;
                out.extend_from_slice(&length.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        3 => {
            let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz4.write_all(data).map_err(failed)?;
            lz4.finish()
                .map_err(|e| CodecError::Corrupt(format!("lz4: {e}")))
        }
        other => Err(CodecError::Corrupt(format!(
            "the host does not write codec {other} ({})",
            codec_name(other)
        ))),
    }
}

/// The uncompressed size of each xerial block the host writes (snappy-java's
/// default).
const XERIAL_BLOCK: usize = 32 << 10;

/// Counts what a decoder produces and fails past the limit; labels the
/// decoder's own errors with the codec.
struct Limited<R> {
    inner: R,
    name: &'static str,
    produced: usize,
    limit: usize,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<CodecError>()) => return Err(e),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(e) => {
                return Err(CodecError::Corrupt(format!("{}: {e}", self.name)).into_io());
            }
        };
        self.produced += n;
        if self.produced > self.limit {
            return Err(CodecError::TooLarge { limit: self.limit }.into_io());
        }
        Ok(n)
    }
}

/// Snappy, raw or xerial-framed (the magic, two 4-byte versions, then
/// blocks of `length: i32` and raw snappy), one block in memory at a time.
struct Snappy<'a> {
    /// Input not yet decoded.
    rest: &'a [u8],
    /// Raw snappy is one block: the whole input.
    xerial: bool,
    block: Vec<u8>,
    pos: usize,
    /// What may still be decoded, of `limit`.
    budget: usize,
    limit: usize,
}

impl<'a> Snappy<'a> {
    fn new(data: &'a [u8], limit: usize) -> Result<Snappy<'a>, String> {
        let (rest, xerial) = match data.strip_prefix(XERIAL_MAGIC) {
            Some(rest) => (rest.get(8..).ok_or("truncated xerial snappy header")?, true),
            None => (data, false),
        };
        Ok(Snappy {
            rest,
            xerial,
            block: Vec::new(),
            pos: 0,
            budget: limit,
            limit,
        })
    }

    /// Decodes the next block into `self.block`; false at the end.
    fn next_block(&mut self) -> Result<bool, CodecError> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let corrupt = |m: String| CodecError::Corrupt(format!("snappy: {m}"));
        let block = if self.xerial {
            let (len, tail) = self
                .rest
                .split_at_checked(4)
                .ok_or_else(|| corrupt("truncated block length".into()))?;
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            let len = usize::try_from(len)
                .map_err(|_| corrupt(format!("negative block length {len}")))?;
            let (block, tail) = tail
                .split_at_checked(len)
                .ok_or_else(|| corrupt("truncated block".into()))?;
            self.rest = tail;
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(block).map_err(|e| corrupt(e.to_string()))?;
        if len > block.len().saturating_mul(SNAPPY_MAX_EXPANSION) {
            return Err(corrupt(format!(
                "a block of {} bytes declares {len} bytes, more than snappy can expand it to",
                block.len()
            )));
        }
        if len > self.budget {
            return Err(CodecError::TooLarge { limit: self.limit });
        }
        self.budget -= len;
        self.block.clear();
        self.block.resize(len, 0);
        self.pos = 0;
        snap::raw::Decoder::new()
            .decompress(block, &mut self.block)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(true)
    }
}

impl Read for Snappy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.block.len() {
            if !self.next_block().map_err(CodecError::into_io)? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// zstd frames one after the other (skippable ones skipped), each header
/// checked against the limit before the decoder sizes its window from it.
struct Zstd<'a> {
    data: &'a [u8],
    /// Where the next frame starts once `frame` is done.
    pos: usize,
    frame: Option<
        ruzstd::decoding::StreamingDecoder<Cursor<&'a [u8]>, ruzstd::decoding::FrameDecoder>,
    >,
    limit: usize,
}

impl<'a> Zstd<'a> {
    fn new(data: &'a [u8], limit: usize) -> Result<Zstd<'a>, CodecError> {
        let mut zstd = Zstd {
            data,
            pos: 0,
            frame: None,
            limit,
        };
        zstd.open_frame()?;
        Ok(zstd)
    }

    /// Starts the frame at `pos`, skipping skippable frames; false at the
    /// end of the input.
    fn open_frame(&mut self) -> Result<bool, CodecError> {
        let corrupt = |m: String| CodecError::Corrupt(format!("zstd: {m}"));
        loop {
            let rest = &self.data[self.pos..];
            if rest.is_empty() {
                return Ok(false);
            }
            let magic = rest
                .get(..4)
                .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
                .ok_or_else(|| corrupt("truncated frame magic".into()))?;
            if magic & ZSTD_SKIPPABLE_MASK == ZSTD_SKIPPABLE {
                let size = rest
                    .get(4..8)
                    .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
                    .ok_or_else(|| corrupt("truncated skippable frame".into()))?;
                let end = 8usize
                    .checked_add(size)
                    .filter(|&end| end <= rest.len())
                    .ok_or_else(|| corrupt("truncated skippable frame".into()))?;
                self.pos += end;
                continue;
            }
            if magic != ZSTD_MAGIC {
                return Err(corrupt(format!("bad frame magic {magic:#010x}")));
            }
            let declared = zstd_declared_size(&rest[4..]).map_err(corrupt)?;
            if declared > self.limit as u64 {
                return Err(CodecError::TooLarge { limit: self.limit });
            }
            let frame = ruzstd::decoding::StreamingDecoder::new(Cursor::new(rest))
                .map_err(|e| corrupt(e.to_string()))?;
            self.frame = Some(frame);
            return Ok(true);
        }
    }
}

impl Read for Zstd<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let Some(frame) = self.frame.as_mut() else {
                return Ok(0);
            };
            let n = frame.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // The frame is done: the next one starts where it stopped reading.
            let used = frame.get_ref().position() as usize;
            self.frame = None;
            self.pos += used;
            if !self.open_frame().map_err(CodecError::into_io)? {
                return Ok(0);
            }
        }
    }
}

const LZ4_MAGIC: u32 = 0x184D_2204;

/// Walks the LZ4 frames of `data` (block sizes only, no decoding) and
/// checks that each ends with its end mark and nothing follows the last:
/// the decoder takes input that stops at a block boundary for a finished
/// stream, and a truncated batch must not pass for a shorter one.
fn lz4_frames_complete(data: &[u8]) -> Result<(), String> {
    let u32_at = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "truncated frame".to_string())
    };
    let mut pos = 0;
    while pos < data.len() {
        let magic = u32_at(pos)?;
        if magic & ZSTD_SKIPPABLE_MASK == ZSTD_SKIPPABLE {
            // Skippable frames share the range (0x184D2A50..5F).
            pos = (pos + 8)
                .checked_add(u32_at(pos + 4)? as usize)
                .ok_or("truncated skippable frame")?;
            continue;
        }
        if magic != LZ4_MAGIC {
            return Err(format!("bad frame magic {magic:#010x}"));
        }
        let flags = *data.get(pos + 4).ok_or("truncated frame header")?;
        let block_checksums = flags & 0x10 != 0;
        let content_checksum = flags & 0x04 != 0;
        // FLG, BD, optional content size and dictionary id, header checksum.
        pos += 4
            + 2
            + if flags & 0x08 != 0 { 8 } else { 0 }
            + if flags & 0x01 != 0 { 4 } else { 0 }
            + 1;
        loop {
            let block = u32_at(pos)?;
            pos += 4;
            if block == 0 {
                break; // the end mark
            }
            let size = (block & 0x7fff_ffff) as usize;
            pos = pos
                .checked_add(size + if block_checksums { 4 } else { 0 })
                .ok_or("truncated block")?;
        }
        if content_checksum {
            pos += 4;
        }
    }
    if pos > data.len() {
        return Err("truncated frame".into());
    }
    Ok(())
}

/// The buffer a zstd frame header (after the magic) asks its decoder for:
/// its window size, or for a single-segment frame its content size.
fn zstd_declared_size(header: &[u8]) -> Result<u64, String> {
    let descriptor = *header.first().ok_or("truncated frame header")?;
    let content_size_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    let dictionary_bytes = [0usize, 1, 2, 4][usize::from(descriptor & 0x03)];
    let mut pos = 1;
    if !single_segment {
        let window = *header.get(pos).ok_or("truncated frame header")?;
        let exponent = u32::from(window >> 3);
        let base = 1u64 << (10 + exponent);
        return Ok(base + base / 8 * u64::from(window & 0x07));
    }
    pos += dictionary_bytes;
    let size_bytes = match content_size_flag {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let field = header
        .get(pos..pos + size_bytes)
        .ok_or("truncated frame header")?;
    let mut le = [0u8; 8];
    le[..size_bytes].copy_from_slice(field);
    let size = u64::from_le_bytes(le);
    Ok(if size_bytes == 2 { size + 256 } else { size })
}

#[cfg(test)]
pub(crate) mod testing {
    use std::io::Write;

    /// `data` compressed with `codec` as a producer would (snappy raw, as
    /// librdkafka writes it).
    pub fn compress(codec: i16, data: &[u8]) -> Vec<u8> {
        match codec {
            1 => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(data).unwrap();
                gz.finish().unwrap()
            }
            2 => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            3 => {
                let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
                lz4.write_all(data).unwrap();
                lz4.finish().unwrap()
            }
            4 => {
                ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
            }
            other => panic!("codec {other}"),
        }
    }

    /// The xerial framing of `data` in blocks of `block` bytes.
    pub fn xerial(data: &[u8], block: usize) -> Vec<u8> {
        let mut out = super::XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for chunk in data.chunks(block) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(block.len() as i32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    const LIMIT: usize = 1 << 20;

    fn sample() -> Vec<u8> {
        (0..10_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for codec in 1..=4 {
            assert_eq!(
                decompress(codec, &compress(codec, &data), LIMIT).unwrap(),
                data,
                "{codec}"
            );
        }
        assert_eq!(decompress(2, &xerial(&data, 7000), LIMIT).unwrap(), data);
        // Concatenated zstd frames with a skippable frame between them.
        let mut frames = compress(4, &data[..1000]);
        frames.extend_from_slice(&0x184D_2A53u32.to_le_bytes());
        frames.extend_from_slice(&3u32.to_le_bytes());
        frames.extend_from_slice(b"abc");
        frames.extend_from_slice(&compress(4, &data[1000..]));
        assert_eq!(decompress(4, &frames, LIMIT).unwrap(), data);
    }

    #[test]
    fn bad_streams_are_corrupt_not_a_panic() {
        let data = sample();
        for codec in 1..=4 {
            let good = compress(codec, &data);
            for bad in [
                &[][..],
                &[7][..],
                &[1, 2, 3, 4, 5, 6, 7, 8, 9][..],
                &good[..good.len() / 2],
                &good[..good.len() - 1],
            ] {
                let result = decompress(codec, bad, LIMIT);
                assert!(
                    matches!(result, Err(CodecError::Corrupt(_))),
                    "codec {codec}, {} bytes: {result:?}",
                    bad.len()
                );
            }
        }
        assert!(matches!(
            decompress(5, &[1, 2, 3], LIMIT),
            Err(CodecError::Corrupt(_))
        ));
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 9, 9]);
        assert!(matches!(
            decompress(2, &xerial, LIMIT),
            Err(CodecError::Corrupt(_))
        ));
    }

    #[test]
    fn output_past_the_limit_is_too_large() {
        let zeros = vec![0u8; 4 * LIMIT];
        for codec in 1..=4 {
            let small = compress(codec, &zeros);
            assert!(small.len() < LIMIT / 4, "{codec}: {}", small.len());
            assert_eq!(
                decompress(codec, &small, LIMIT),
                Err(CodecError::TooLarge { limit: LIMIT }),
                "{codec}"
            );
            // Exactly at the limit is fine.
            let at = compress(codec, &zeros[..LIMIT]);
            assert_eq!(decompress(codec, &at, LIMIT).unwrap().len(), LIMIT);
        }
        assert_eq!(
            decompress(2, &xerial(&zeros, 32 << 10), LIMIT),
            Err(CodecError::TooLarge { limit: LIMIT })
        );
    }

    #[test]
    fn declared_sizes_are_checked_before_allocating() {
        // A raw snappy block declaring 4 GiB in 6 bytes.
        let huge = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        assert!(matches!(
            decompress(2, &huge, MAX_DECOMPRESSED),
            Err(CodecError::Corrupt(m)) if m.contains("declares")
        ));
        // Plausible for its length but over the limit.
        let mut block = Vec::new();
        let declared = 2 * LIMIT as u32;
        let mut v = declared;
        while v >= 0x80 {
            block.push(v as u8 | 0x80);
            v >>= 7;
        }
        block.push(v as u8);
        block.resize(declared as usize / 20, 0);
        assert_eq!(
            decompress(2, &block, LIMIT),
            Err(CodecError::TooLarge { limit: LIMIT })
        );
        // A single-segment zstd frame declaring 1 TiB of content, and one
        // asking for a 2 GiB window.
        let mut fcs = ZSTD_MAGIC.to_le_bytes().to_vec();
        fcs.push(0xe0); // 8-byte content size, single segment
        fcs.extend_from_slice(&(1u64 << 40).to_le_bytes());
        fcs.extend_from_slice(&[1, 0, 0]); // a last raw block of 0 bytes
        assert_eq!(
            decompress(4, &fcs, MAX_DECOMPRESSED),
            Err(CodecError::TooLarge {
                limit: MAX_DECOMPRESSED
            })
        );
        let mut window = ZSTD_MAGIC.to_le_bytes().to_vec();
        window.push(0x00);
        window.push(21 << 3); // window 2^31
        window.extend_from_slice(&[1, 0, 0]);
        assert_eq!(
            decompress(4, &window, MAX_DECOMPRESSED),
            Err(CodecError::TooLarge {
                limit: MAX_DECOMPRESSED
            })
        );
    }

    #[test]
    fn limits_follow_max_message_bytes() {
        assert_eq!(limit_for(1024 * 1024 + 12), 64 * (1024 * 1024 + 12));
        assert_eq!(limit_for(100), 1 << 20);
        assert_eq!(limit_for(usize::MAX), MAX_DECOMPRESSED);
    }
}
