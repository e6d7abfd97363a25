//! Fuzzing request framing and the request header (see `fuzz_input`).

use std::sync::Arc;

use bytes::Bytes;

use super::frame::FrameReader;
use super::header;
use super::memory_pool::MemoryPool;
use crate::fuzz_input::run;
use crate::metrics::Metrics;

/// A pool that never makes a frame wait (the fuzzed frames are small).
fn pool() -> Arc<MemoryPool> {
    MemoryPool::new(None, Arc::new(Metrics::default()))
}

fn frame_seed() -> Vec<u8> {
    let mut frame = 12i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0, 3, 0, 1, 0, 0, 0, 7, 0, 2, b'c', b'i']);
    frame
}

#[test]
fn fuzz_request_frames() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let pool = pool();
    run("frame", vec![frame_seed()], 5_000, |input| {
        let mut reader = FrameReader::new(input);
        runtime.block_on(async {
            let mut whole = true;
            loop {
                match reader.read_frame(1 << 20, &pool).await {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => {
                        whole = false;
                        break;
                    }
                }
            }
            whole
        })
    });
}

#[test]
fn fuzz_request_headers() {
    let v1 = frame_seed()[4..].to_vec();
    let mut v2 = v1.clone();
    v2.extend_from_slice(&[1, 0, 2, b'x', b'y']);
    run("header", vec![v1, v2], 20_000, |input| {
        let _ = header::peek_key_and_version(input);
        let flexible = input.first().is_some_and(|b| b & 1 == 1);
        header::parse_request(Bytes::copy_from_slice(input), flexible).is_ok()
    });
}

#[test]
fn frame_reader_keeps_partial_frames_apart() {
    // Two frames back to back, the second cut short: the first is read
    // whole, the second is an error, not a panic.
    let mut input = frame_seed();
    input.extend_from_slice(&frame_seed()[..9]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let pool = pool();
    let mut reader = FrameReader::new(&input[..]);
    let first = runtime.block_on(reader.read_frame(1 << 20, &pool));
    assert!(matches!(first, Ok(Some(ref f)) if f.bytes[..] == frame_seed()[4..]));
    let second = runtime.block_on(reader.read_frame(1 << 20, &pool));
    assert!(second.is_err());
}
