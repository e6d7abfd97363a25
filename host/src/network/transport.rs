//! A connection's stream split into its reading and writing halves, and
//! how the writing half sends records that are still in a segment file:
//! with `sendfile(2)` on plain TCP, so a fetch's bytes go from the page
//! cache to the socket without passing through the broker's memory (as
//! Kafka's `FileRecords.writeTo` uses `transferTo`); through a buffer on
//! TLS, which has to encrypt them.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::log::file_records::FileRecords;

/// How much of a file one buffered write reads at a time.
const BUFFERED_CHUNK: usize = 256 * 1024;
/// Linux moves at most this much per `sendfile` call.
const MAX_SENDFILE: u64 = 0x7fff_f000;

/// A stream a connection is served on.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Reader: AsyncRead + Unpin + Send;
    type Writer: RecordsWriter + Send;

    fn into_halves(self) -> (Self::Reader, Self::Writer);
}

/// The writing half of a connection.
pub trait RecordsWriter: AsyncWrite + Unpin {
    /// Writes every byte of `records`. Fails if the file is shorter than
    /// the range (truncated since the fetch read it).
    fn write_file_records(
        &mut self,
        records: &FileRecords,
    ) -> impl Future<Output = io::Result<()>> + Send;
}

impl Transport for TcpStream {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    fn into_halves(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split()
    }
}

impl RecordsWriter for OwnedWriteHalf {
    async fn write_file_records(&mut self, records: &FileRecords) -> io::Result<()> {
        let socket: &TcpStream = self.as_ref();
        let mut position = records.position();
        let end = position + records.len() as u64;
        while position < end {
            socket.writable().await?;
            let sent = socket.try_io(Interest::WRITABLE, || {
                send_file(socket.as_raw_fd(), records.file(), position, end - position)
            });
            match sent {
                Ok(0) => return Err(truncated()),
                Ok(sent) => position += sent as u64,
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

impl Transport for TlsStream<TcpStream> {
    type Reader = ReadHalf<Self>;
    type Writer = WriteHalf<Self>;

    fn into_halves(self) -> (ReadHalf<Self>, WriteHalf<Self>) {
        tokio::io::split(self)
    }
}

impl RecordsWriter for WriteHalf<TlsStream<TcpStream>> {
    async fn write_file_records(&mut self, records: &FileRecords) -> io::Result<()> {
        write_through_buffer(self, records).await
    }
}

/// Writes `records` by reading them a chunk at a time and writing the
/// chunk (a stream that cannot take the file's bytes directly).
pub async fn write_through_buffer<W: AsyncWrite + Unpin>(
    writer: &mut W,
    records: &FileRecords,
) -> io::Result<()> {
    let mut offset = 0;
    while offset < records.len() {
        let chunk = records.read(offset, BUFFERED_CHUNK)?;
        if chunk.is_empty() {
            return Err(truncated());
        }
        writer.write_all(&chunk).await?;
        offset += chunk.len();
    }
    Ok(())
}

/// `sendfile(2)` of up to `len` bytes of `file` at `position` to `socket`.
fn send_file(socket: RawFd, file: &File, position: u64, len: u64) -> io::Result<usize> {
    let mut offset = libc::off_t::try_from(position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "position past off_t"))?;
    let count = usize::try_from(len.min(MAX_SENDFILE)).unwrap_or(0);
    // SAFETY: both descriptors are open for the call (borrowed from live
    // owners); the kernel writes only `offset`, a local.
    let sent = unsafe { libc::sendfile(socket, file.as_raw_fd(), &mut offset, count) };
    usize::try_from(sent).map_err(|_| io::Error::last_os_error())
}

fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "a segment file was truncated while its records were being sent",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A connected pair of loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn a_file_range_is_sent_whole_and_a_shrunk_file_fails_the_write() {
        let content: Vec<u8> = (0..=255u8).cycle().take(3_000_000).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&content).unwrap();
        let file = Arc::new(file);
        let (client, server) = pair().await;
        let (_, mut writer) = server.into_halves();
        // Larger than the socket buffers: the sender waits for the reader.
        let range = FileRecords::new(Arc::clone(&file), 1234, 2_500_000);
        let reading = tokio::spawn(async move {
            let mut client = client;
            let mut received = vec![0; 2_500_000];
            client.read_exact(&mut received).await.unwrap();
            (received, client)
        });
        writer.write_file_records(&range).await.unwrap();
        // The client stays open: the next write fails on the file alone.
        let (received, _client) = reading.await.unwrap();
        assert_eq!(received, &content[1234..1234 + 2_500_000]);

        file.set_len(100_000).unwrap();
        let error = writer.write_file_records(&range).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// A peer that stops reading fills the socket: the write then waits
    /// for it without blocking the runtime's thread (a current-thread
    /// runtime still fires the timer).
    #[tokio::test(flavor = "current_thread")]
    async fn a_peer_that_stops_reading_blocks_the_write_not_the_thread() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![7u8; 64 << 20]).unwrap();
        let file = Arc::new(file);
        let (_client, server) = pair().await;
        let (_, mut writer) = server.into_halves();
        let range = FileRecords::new(file, 0, 64 << 20);
        let write = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            writer.write_file_records(&range),
        );
        assert!(write.await.is_err(), "64 MiB cannot fit the socket buffers");
    }
}
