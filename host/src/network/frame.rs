//! Kafka framing: a 4-byte big-endian size, then that many bytes.
//!
//! A frame larger than `socket.request.max.bytes`, a negative size or a
//! frame too short to hold a request header is a protocol violation: the
//! caller closes that connection and nothing else.
//!
//! Memory: before reading a body the reader reserves its declared size
//! from the broker's request memory pool (`queued.max.request.bytes`) and
//! reads nothing while the pool is short. A body past 1 MiB then grows as
//! bytes arrive, so a peer that declares 100 MiB and sends one byte costs
//! 1 MiB of address space, not 100 MiB.
//!
//! The reader keeps its own buffer (rather than a `BufReader`) so that a
//! connection waiting for a response can keep watching the socket:
//! [`FrameReader::peer_gone`] reads pipelined bytes into that buffer,
//! unparsed, and resolves when the peer closes.

use std::fmt;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::network::memory_pool::{MemoryPool, Reservation};

/// The smallest request: api key, version and correlation id.
const MIN_REQUEST_BYTES: usize = 8;

/// What one read from the socket asks for.
const CHUNK: usize = 64 * 1024;

/// The first allocation of a frame body: a frame up to this size (every
/// Produce a librdkafka producer sends with its default `batch.size` and
/// a few partitions) is read into one buffer, never grown and copied;
/// larger ones start here and double as their bytes arrive. The pool has
/// reserved the whole frame by then; this only bounds the address space a
/// frame that never arrives holds (untouched pages cost no memory).
const FIRST_ALLOCATION: usize = 1 << 20;

/// How many pipelined bytes a connection buffers while a request is in
/// flight. Beyond this it stops reading (the peer's further bytes wait in
/// the kernel's buffers) and so stops noticing a close until the response
/// is written.
const PIPELINE_LIMIT: usize = 64 * 1024;

#[derive(Debug)]
pub enum FrameError {
    /// The size prefix is negative or below the smallest request.
    InvalidSize(i32),
    /// The size prefix exceeds `socket.request.max.bytes`.
    TooLarge {
        size: usize,
        max: usize,
    },
    /// The peer closed the connection in the middle of a frame.
    Truncated,
    Io(std::io::Error),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::InvalidSize(size) => write!(f, "invalid frame size {size}"),
            FrameError::TooLarge { size, max } => write!(
                f,
                "frame of {size} bytes is larger than socket.request.max.bytes ({max})"
            ),
            FrameError::Truncated => write!(f, "connection closed in the middle of a frame"),
            FrameError::Io(error) => write!(f, "read failed: {error}"),
        }
    }
}

/// A request frame (without its size prefix) and the pool memory it holds
/// until the request is done.
pub struct Frame {
    pub bytes: Bytes,
    pub reservation: Reservation,
}

/// Reads frames from one connection.
pub struct FrameReader<R> {
    inner: R,
    /// Bytes read but not yet part of a frame: the start of the next ones.
    buffer: BytesMut,
    /// The peer has closed its side.
    eof: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buffer: BytesMut::new(),
            eof: false,
        }
    }

    /// Reads one frame. `Ok(None)` is a clean end of stream between frames.
    pub async fn read_frame(
        &mut self,
        max_bytes: usize,
        pool: &Arc<MemoryPool>,
    ) -> Result<Option<Frame>, FrameError> {
        self.read_sized(MIN_REQUEST_BYTES, max_bytes, pool).await
    }

    /// Reads one size-prefixed SASL token of SaslHandshake v0's unframed
    /// exchange: no request header, so any size from 0 up.
    pub async fn read_token(
        &mut self,
        max_bytes: usize,
        pool: &Arc<MemoryPool>,
    ) -> Result<Option<Frame>, FrameError> {
        self.read_sized(0, max_bytes, pool).await
    }

    async fn read_sized(
        &mut self,
        min_bytes: usize,
        max_bytes: usize,
        pool: &Arc<MemoryPool>,
    ) -> Result<Option<Frame>, FrameError> {
        while self.buffer.len() < 4 {
            if self.fill().await? == 0 {
                return if self.buffer.is_empty() {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
            }
        }
        let size = self.buffer.get_i32();
        let Ok(length) = usize::try_from(size) else {
            return Err(FrameError::InvalidSize(size));
        };
        if length < min_bytes {
            return Err(FrameError::InvalidSize(size));
        }
        if length > max_bytes {
            return Err(FrameError::TooLarge {
                size: length,
                max: max_bytes,
            });
        }
        let reservation = pool.reserve(length).await;
        let buffered = self.buffer.len().min(length);
        let mut body = Vec::with_capacity(length.min(FIRST_ALLOCATION.max(buffered)));
        body.extend_from_slice(&self.buffer[..buffered]);
        self.buffer.advance(buffered);
        while body.len() < length {
            if body.len() == body.capacity() {
                // Double, but never past the frame: the allocator then
                // grows a large block in place (mremap) rather than copying.
                let target = body.capacity().saturating_mul(2).min(length);
                body.reserve_exact(target - body.len());
            }
            let remaining = (length - body.len()) as u64;
            let read = (&mut self.inner)
                .take(remaining)
                .read_buf(&mut body)
                .await
                .map_err(FrameError::Io)?;
            if read == 0 {
                self.eof = true;
                return Err(FrameError::Truncated);
            }
        }
        Ok(Some(Frame {
            bytes: Bytes::from(body),
            reservation,
        }))
    }

    /// Resolves once the peer has closed the connection or it failed.
    /// Meanwhile it reads what the peer pipelines into the buffer, where
    /// the next [`FrameReader::read_frame`] finds it; once
    /// [`PIPELINE_LIMIT`] bytes wait there it stops reading and never
    /// resolves. Cancel-safe: no byte read is lost when dropped.
    pub async fn peer_gone(&mut self) {
        loop {
            if self.eof {
                return;
            }
            if self.buffer.len() >= PIPELINE_LIMIT {
                return std::future::pending().await;
            }
            if self.fill().await.is_err() {
                return;
            }
        }
    }

    /// One read from the socket into the buffer; 0 at end of stream.
    async fn fill(&mut self) -> Result<usize, FrameError> {
        if self.eof {
            return Ok(0);
        }
        self.buffer.reserve(CHUNK);
        let read = (&mut self.inner)
            .take(CHUNK as u64)
            .read_buf(&mut self.buffer)
            .await
            .map_err(FrameError::Io)?;
        if read == 0 {
            self.eof = true;
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn pool() -> Arc<MemoryPool> {
        MemoryPool::new(Some(1000), Arc::new(Metrics::default()))
    }

    async fn read(bytes: &[u8], max: usize) -> Result<Option<Bytes>, FrameError> {
        let mut reader = FrameReader::new(bytes);
        let frame = reader.read_frame(max, &pool()).await?;
        Ok(frame.map(|frame| frame.bytes))
    }

    #[tokio::test]
    async fn frames_and_violations() {
        let mut good = 8i32.to_be_bytes().to_vec();
        good.extend_from_slice(&[1; 8]);
        assert_eq!(read(&good, 100).await.unwrap().unwrap().len(), 8);
        assert!(read(&[], 100).await.unwrap().is_none());
        assert!(matches!(
            read(&(-1i32).to_be_bytes(), 100).await,
            Err(FrameError::InvalidSize(-1))
        ));
        assert!(matches!(
            read(&1000i32.to_be_bytes(), 100).await,
            Err(FrameError::TooLarge { .. })
        ));
        assert!(matches!(
            read(&good[..10], 100).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read(&[0, 0], 100).await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn unframed_sasl_tokens_may_be_small_or_empty() {
        let mut bytes = 0i32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&3i32.to_be_bytes());
        bytes.extend_from_slice(b"a\0b");
        let mut reader = FrameReader::new(&bytes[..]);
        let empty = reader.read_token(100, &pool()).await.unwrap().unwrap();
        assert!(empty.bytes.is_empty());
        let small = reader.read_token(100, &pool()).await.unwrap().unwrap();
        assert_eq!(&small.bytes[..], b"a\0b");
        assert!(reader.read_token(100, &pool()).await.unwrap().is_none());
        // The same bytes are no request frame.
        assert!(matches!(
            read(&bytes, 100).await,
            Err(FrameError::InvalidSize(0))
        ));
        let negative = (-1i32).to_be_bytes();
        let mut reader = FrameReader::new(&negative[..]);
        assert!(matches!(
            reader.read_token(100, &pool()).await,
            Err(FrameError::InvalidSize(-1))
        ));
    }

    #[tokio::test]
    async fn consecutive_frames_and_the_pool() {
        let pool = pool();
        let mut bytes = Vec::new();
        for (i, len) in [8usize, 300, 9].into_iter().enumerate() {
            bytes.extend_from_slice(&(len as i32).to_be_bytes());
            bytes.extend(std::iter::repeat_n(i as u8, len));
        }
        let mut reader = FrameReader::new(&bytes[..]);
        let first = reader.read_frame(1000, &pool).await.unwrap().unwrap();
        assert_eq!(&first.bytes[..], &[0; 8]);
        let second = reader.read_frame(1000, &pool).await.unwrap().unwrap();
        assert_eq!(second.bytes.len(), 300);
        assert!(second.bytes.iter().all(|b| *b == 1));
        assert_eq!(pool_used(&pool), 308, "both frames hold their reservations");
        drop((first, second));
        assert_eq!(pool_used(&pool), 0);
        let third = reader.read_frame(1000, &pool).await.unwrap().unwrap();
        assert_eq!(&third.bytes[..], &[2; 9]);
        drop(third);
        assert!(reader.read_frame(1000, &pool).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn peer_gone_keeps_pipelined_bytes() {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let mut reader = FrameReader::new(server);
        let mut frame = 8i32.to_be_bytes().to_vec();
        frame.extend_from_slice(&[7; 8]);
        tokio::io::AsyncWriteExt::write_all(&mut client, &frame)
            .await
            .unwrap();
        drop(client);
        reader.peer_gone().await;
        let pool = pool();
        let kept = reader.read_frame(100, &pool).await.unwrap().unwrap();
        assert_eq!(&kept.bytes[..], &[7; 8]);
        assert!(reader.read_frame(100, &pool).await.unwrap().is_none());
    }

    fn pool_used(pool: &MemoryPool) -> usize {
        pool.in_use()
    }
}
