//! An append-only journal of JSON lines, beside a document it amends.
//!
//! A document replaced whole per change ([`super::JsonFile`]) costs its
//! whole size per change: creating 10,000 topics one at a time rewrote
//! and fsynced a topics document of up to 10,000 entries each time
//! (207 s in all). A journal line costs the change alone. The owner
//! replays the lines over its document on open and, once the journal
//! outgrows the document, stores the document and clears the journal, so
//! a change costs amortized O(1) and opening stays bounded.
//!
//! Each line is one write followed by `fdatasync`: a change is durable on
//! return. A crash mid-append can leave only the last line incomplete (no
//! newline); it was never acknowledged and is cut off on open. A complete
//! line that does not parse is damage and an error, never skipped. A
//! failed append is cut back too, so the next one starts on a clean line.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The journal file; its entries are the owner's (any serde type).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    /// Bytes of complete lines: where the next append starts.
    len: u64,
    lines: usize,
}

impl Journal {
    /// Opens (or creates) `<dir>/<name>` and returns it with its entries,
    /// oldest first. An incomplete last line is removed.
    pub fn open<T: DeserializeOwned>(dir: &Path, name: &str) -> io::Result<(Self, Vec<T>)> {
        let path = dir.join(name);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        if !existed {
            File::open(dir)?.sync_all()?;
        }
        let bytes = fs::read(&path)?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut entries = Vec::new();
        for (number, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let entry = serde_json::from_slice(line).map_err(|error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} line {}: {error}", path.display(), number + 1),
                )
            })?;
            entries.push(entry);
        }
        if complete < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                bytes = bytes.len() - complete,
                "cutting off an incomplete last journal line (a crash mid-append)"
            );
            file.set_len(complete as u64)?;
            file.sync_all()?;
        }
        let lines = entries.len();
        let journal = Self {
            path,
            file,
            len: complete as u64,
            lines,
        };
        Ok((journal, entries))
    }

    /// Appends one entry; durable on return. On failure nothing of it stays.
    pub fn append<T: Serialize>(&mut self, entry: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let written = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data());
        if let Err(error) = written {
            if let Err(cut) = self.file.set_len(self.len) {
                tracing::error!(path = %self.path.display(), "cannot cut back a failed journal append: {cut}");
            }
            return Err(error);
        }
        self.len += line.len() as u64;
        self.lines += 1;
        Ok(())
    }

    /// Entries appended since the journal was last cleared.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Empties the journal, once its entries are in the document.
    pub fn clear(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_all()?;
        self.len = 0;
        self.lines = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, entries) = Journal::open::<u32>(dir.path(), "j").unwrap();
        assert!(entries.is_empty());
        journal.append(&1u32).unwrap();
        journal.append(&22u32).unwrap();
        assert_eq!(journal.lines(), 2);
        drop(journal);
        // A crash in the middle of the third append.
        let path = dir.path().join("j");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"33").unwrap();
        drop(file);
        let (mut journal, entries) = Journal::open::<u32>(dir.path(), "j").unwrap();
        assert_eq!(entries, [1, 22]);
        assert_eq!(fs::read(&path).unwrap(), b"1\n22\n");
        journal.append(&4u32).unwrap();
        drop(journal);
        let (mut journal, entries) = Journal::open::<u32>(dir.path(), "j").unwrap();
        assert_eq!(entries, [1, 22, 4]);
        journal.clear().unwrap();
        assert_eq!(journal.lines(), 0);
        drop(journal);
        assert!(Journal::open::<u32>(dir.path(), "j").unwrap().1.is_empty());
    }

    #[test]
    fn a_damaged_complete_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("j"), b"1\nnot json\n3\n").unwrap();
        let error = Journal::open::<u32>(dir.path(), "j").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("line 2"), "{error}");
    }
}
