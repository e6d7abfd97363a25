//! Writing a response frame made of parts (the host's header and the
//! guest's bytes, with record sets between them): parts in memory with
//! vectored writes, parts in a segment file by the transport (`sendfile`
//! on plain TCP), so the records go out from where they are instead of
//! being copied into one frame first (DESIGN §12).

use std::io::{self, IoSlice};

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::log::file_records::Records;
use crate::network::transport::RecordsWriter;

/// At most this many slices per write (Linux's IOV_MAX is 1024).
const SLICES_PER_WRITE: usize = 64;

/// Writes every byte of `parts`, in order.
pub async fn write_parts<W: RecordsWriter>(writer: &mut W, parts: &[Records]) -> io::Result<()> {
    let mut in_memory = Vec::new();
    for part in parts {
        match part {
            Records::Memory(bytes) => in_memory.push(bytes.clone()),
            Records::File(records) => {
                write_buffers(writer, &in_memory).await?;
                in_memory.clear();
                writer.write_file_records(records).await?;
            }
        }
    }
    write_buffers(writer, &in_memory).await
}

/// Writes every byte of `parts`, in order, with vectored writes.
async fn write_buffers<W: AsyncWrite + Unpin>(writer: &mut W, parts: &[Bytes]) -> io::Result<()> {
    // The first byte not yet written: part `index`, at `offset`.
    let (mut index, mut offset) = (0, 0);
    loop {
        while parts.get(index).is_some_and(|part| offset >= part.len()) {
            index += 1;
            offset = 0;
        }
        let Some(first) = parts.get(index) else {
            return Ok(());
        };
        let rest = parts.get(index + 1..).unwrap_or_default();
        let slices: Vec<IoSlice<'_>> = std::iter::once(&first[offset..])
            .chain(rest.iter().map(|part| &part[..]))
            .take(SLICES_PER_WRITE)
            .map(IoSlice::new)
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let Some(part) = parts.get(index) else {
                break;
            };
            let left = part.len() - offset;
            if written < left {
                offset += written;
                written = 0;
            } else {
                written -= left;
                index += 1;
                offset = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::file_records::FileRecords;
    use crate::network::transport::write_through_buffer;
    use std::io::Write;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    /// Takes at most `step` bytes per write, vectored or not.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(self.step - n);
                self.out.extend_from_slice(&buf[..take]);
                n += take;
                if n == self.step {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl RecordsWriter for Trickle {
        async fn write_file_records(&mut self, records: &FileRecords) -> io::Result<()> {
            write_through_buffer(self, records).await
        }
    }

    #[tokio::test]
    async fn every_part_is_written_in_order_however_the_writes_split() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&(0..=255u8).cycle().take(300_000).collect::<Vec<_>>())
            .unwrap();
        let file = Arc::new(file);
        let parts: Vec<Records> = (0u8..200)
            .map(|i| match i % 10 {
                // Every tenth part is a range of the file.
                9 => Records::File(FileRecords::new(
                    Arc::clone(&file),
                    u64::from(i) * 1000,
                    usize::from(i) * 300,
                )),
                _ => Records::from(Bytes::from(vec![i; usize::from(i % 7)])),
            })
            .collect();
        let expected: Vec<u8> = parts.iter().flat_map(|p| p.load().unwrap()).collect();
        for step in [1, 3, 5, 64, 100_000] {
            let mut writer = Trickle {
                out: Vec::new(),
                step,
            };
            write_parts(&mut writer, &parts).await.unwrap();
            assert_eq!(writer.out, expected, "{step} bytes per write");
        }
    }
}
