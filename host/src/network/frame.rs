//! Kafka framing: a 4-byte big-endian size, then that many bytes.
//!
//! A frame larger than `socket.request.max.bytes`, a negative size or a
//! frame too short to hold a request header is a protocol violation: the
//! caller closes that connection and nothing else.

use std::fmt;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The smallest request: api key, version and correlation id.
const MIN_REQUEST_BYTES: usize = 8;

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

/// Reads one frame. `Ok(None)` is a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<BytesMut>, FrameError> {
    let mut size_prefix = [0u8; 4];
    match reader.read_exact(&mut size_prefix[..1]).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(FrameError::Io(error)),
    }
    read_exact(reader, &mut size_prefix[1..]).await?;
    let size = i32::from_be_bytes(size_prefix);
    let Ok(length) = usize::try_from(size) else {
        return Err(FrameError::InvalidSize(size));
    };
    if length < MIN_REQUEST_BYTES {
        return Err(FrameError::InvalidSize(size));
    }
    if length > max_bytes {
        return Err(FrameError::TooLarge {
            size: length,
            max: max_bytes,
        });
    }
    let mut frame = BytesMut::zeroed(length);
    read_exact(reader, &mut frame).await?;
    Ok(Some(frame))
}

async fn read_exact<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut [u8],
) -> Result<(), FrameError> {
    match reader.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(FrameError::Truncated)
        }
        Err(error) => Err(FrameError::Io(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max: usize) -> Result<Option<BytesMut>, FrameError> {
        let mut reader = bytes;
        read_frame(&mut reader, max).await
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
}
