//! Positional reads of log files without a lock: a window that buffers
//! the reads of a header scan, and reads into buffers that are never
//! zeroed first. Shared by segments (`segment`) and the file ranges a
//! fetch sends (`file_records`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Read-ahead when scanning batch headers (fetch, timestamp lookups).
pub(super) const SCAN_CHUNK: usize = 16 * 1024;

/// Buffered positional reads over `[0, limit)` of a file: scans of many small
/// headers cost one `read_at` per chunk rather than one per header.
pub(super) struct FileWindow<'a> {
    file: &'a File,
    limit: u64,
    chunk: usize,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> FileWindow<'a> {
    pub(super) fn new(file: &'a File, limit: u64, chunk: usize) -> FileWindow<'a> {
        FileWindow {
            file,
            limit,
            chunk,
            start: 0,
            buf: Vec::new(),
        }
    }

    fn covers(&self, pos: u64, end: u64) -> bool {
        pos >= self.start && end <= self.start + self.buf.len() as u64
    }

    /// `len` bytes at `pos`, or `None` if they extend past the limit.
    /// Reads a chunk at a time, except after skipping more than a chunk
    /// (a walk of the headers of large batches): then only `len`.
    pub(super) fn get(&mut self, pos: u64, len: usize) -> io::Result<Option<&[u8]>> {
        let end = match pos.checked_add(len as u64) {
            Some(end) if end <= self.limit => end,
            _ => return Ok(None),
        };
        if !self.covers(pos, end) {
            let skipped_a_chunk = !self.buf.is_empty()
                && pos >= self.start + self.buf.len() as u64 + self.chunk as u64;
            let read = if skipped_a_chunk {
                len
            } else {
                len.max(self.chunk)
            };
            let want = (read as u64).min(self.limit - pos) as usize;
            self.buf.clear();
            self.buf.resize(want, 0);
            if let Err(e) = self.file.read_exact_at(&mut self.buf, pos) {
                self.buf.clear();
                return Err(e);
            }
            self.start = pos;
        }
        let off = (pos - self.start) as usize;
        Ok(Some(&self.buf[off..off + len]))
    }

    /// A copy of `len` bytes at `pos`, from the buffer when it has them.
    pub(super) fn take(&mut self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        if self.covers(pos, pos + len as u64) {
            let off = (pos - self.start) as usize;
            return Ok(self.buf[off..off + len].to_vec());
        }
        read_exact_at_unzeroed(self.file, len, pos)
    }
}

/// `len` bytes of `file` at `pos` in a new buffer that is never zeroed
/// first: a fetch reads up to `max.partition.fetch.bytes` per partition,
/// and the memset before `read_exact_at` was 5% of the broker's CPU for a
/// consumer of 8 partitions (`perf`, 1 KiB records). `UnexpectedEof` if
/// the file ends first, as `read_exact_at`.
pub(super) fn read_exact_at_unzeroed(file: &File, len: usize, pos: u64) -> io::Result<Vec<u8>> {
    use std::os::fd::AsRawFd;
    let mut out = Vec::<u8>::with_capacity(len);
    while out.len() < len {
        let filled = out.len();
        let spare = &mut out.spare_capacity_mut()[..len - filled];
        let offset = pos
            .checked_add(filled as u64)
            .and_then(|at| libc::off_t::try_from(at).ok())
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "read past the largest offset")
            })?;
        // SAFETY: pread writes at most `spare.len()` bytes to the start of
        // `spare`, memory the vector owns beyond its length.
        let read = unsafe {
            libc::pread(
                file.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                spare.len(),
                offset,
            )
        };
        match read {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            n if n > 0 => {
                // SAFETY: pread initialised the `n` bytes after `filled`,
                // and `n <= spare.len()` keeps the length within capacity.
                unsafe { out.set_len(filled + n as usize) };
            }
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(out)
}

/// Writes `slices` in order at `pos` of `file` (`pwritev`): a produced
/// batch goes to its segment as its rewritten head and the request's own
/// bytes, with no copy into one buffer first. Retries short writes and
/// interrupts; `slices` is consumed.
pub(super) fn write_all_vectored_at(
    file: &File,
    mut slices: &mut [io::IoSlice<'_>],
    mut pos: u64,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    /// Linux's `UIO_MAXIOV`: more slices go in the next call.
    const MAX_SLICES: usize = 1024;
    // Drops leading empty slices: nothing but empty ones left ends the
    // loop rather than a zero-byte pwritev reading as WriteZero.
    io::IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        let count = slices.len().min(MAX_SLICES);
        let offset = libc::off_t::try_from(pos).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "write past the largest offset")
        })?;
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix, and the
        // first `count` slices are valid for reads for the whole call.
        let written = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                slices.as_ptr().cast::<libc::iovec>(),
                count as libc::c_int,
                offset,
            )
        };
        match written {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ))
            }
            n if n > 0 => {
                pos += n as u64;
                io::IoSlice::advance_slices(&mut slices, n as usize);
            }
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(())
}
