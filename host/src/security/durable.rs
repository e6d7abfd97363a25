//! Crash-safe JSON documents for the security state (ACLs, SCRAM
//! credentials, the active authorizer), written the way the metadata
//! store writes topics: write `<name>.tmp`, fsync it, rename it over
//! `<name>`, fsync the directory. After a crash the file holds the old or
//! the new state, never a mix; a leftover `.tmp` is an unfinished write
//! and is ignored. Callers update their in-memory copy only after a write
//! returned, so nobody sees a state that a crash could take back.
//!
//! These documents are small and change at admin rates (an ACL, a user),
//! so rewriting one whole per change is the simple, safe choice.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// One JSON document in a directory.
#[derive(Debug, Clone)]
pub struct JsonFile {
    dir: PathBuf,
    name: String,
}

impl JsonFile {
    /// The document `name` in `dir`; the directory is created if needed.
    pub fn open(dir: &Path, name: &str) -> io::Result<Self> {
        if !dir.is_dir() {
            fs::create_dir_all(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)?.sync_all()?;
            }
        }
        let file = Self {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        };
        match fs::remove_file(file.tmp_path()) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        Ok(file)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    fn tmp_path(&self) -> PathBuf {
        self.dir.join(format!("{}.tmp", self.name))
    }

    /// The document, or None if it was never written. A file that does not
    /// parse is an error, never an empty state.
    pub fn load<T: DeserializeOwned>(&self) -> io::Result<Option<T>> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {error}", path.display()),
                )
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Replaces the document; durable on return.
    pub fn store<T: Serialize>(&self, value: &T) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        let tmp = self.tmp_path();
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, self.path())?;
        File::open(&self.dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_torn_writes() {
        let dir = tempfile::tempdir().unwrap();
        let file = JsonFile::open(dir.path(), "doc.json").unwrap();
        assert_eq!(file.load::<Vec<u32>>().unwrap(), None);
        file.store(&vec![1u32, 2]).unwrap();
        assert_eq!(file.load::<Vec<u32>>().unwrap(), Some(vec![1, 2]));
        // A crash between writing the temp file and the rename.
        fs::write(dir.path().join("doc.json.tmp"), b"[1, 2, 3").unwrap();
        let file = JsonFile::open(dir.path(), "doc.json").unwrap();
        assert_eq!(file.load::<Vec<u32>>().unwrap(), Some(vec![1, 2]));
        assert!(!dir.path().join("doc.json.tmp").exists());
        fs::write(file.path(), b"not json").unwrap();
        assert!(file.load::<Vec<u32>>().is_err());
    }
}
