//! Crash-safe files for the host's own state: whole documents replaced
//! atomically, and the snapshots that journals are rewritten as.
//!
//! One way to replace a file: write `<name>.tmp`, fsync it, rename it over
//! `<name>`, fsync the directory. A rename within a directory is atomic,
//! so after a crash the file holds the old or the new bytes, never a mix;
//! a leftover `.tmp` is an unfinished write, removed on open. Callers
//! update their in-memory copy only after a write returned, so nobody sees
//! a state that a crash could take back.
//!
//! Users: the JSON documents ([`JsonFile`]: topics, dynamic configs,
//! quotas, ACLs, SCRAM credentials, delegation tokens, the active
//! authorizer), the log's checkpoints, the producer-id block, and the
//! journals of the transaction and group coordinators when they compact.

mod journal;
mod json_file;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use journal::Journal;
pub use json_file::JsonFile;

/// The temporary file a replacement of `name` is written to.
pub fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.tmp"))
}

/// Replaces `<dir>/<name>` with `bytes`; durable on return.
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(dir, name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// Removes the `.tmp` of an unfinished replacement of `name`, if any.
pub fn discard_unfinished(dir: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(tmp_path(dir, name)) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Creates `dir` (and missing parents) if needed, fsyncing the parent so
/// the new directory survives a crash.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => File::open(parent)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_writes_whole_files_and_leftovers_are_discarded() {
        let dir = tempfile::tempdir().unwrap();
        replace(dir.path(), "f", b"one").unwrap();
        replace(dir.path(), "f", b"two").unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"two");
        assert!(!tmp_path(dir.path(), "f").exists());
        fs::write(tmp_path(dir.path(), "f"), b"torn").unwrap();
        discard_unfinished(dir.path(), "f").unwrap();
        discard_unfinished(dir.path(), "f").unwrap();
        assert!(!tmp_path(dir.path(), "f").exists());
        let nested = dir.path().join("a/b");
        create_dir(&nested).unwrap();
        assert!(nested.is_dir());
    }
}
