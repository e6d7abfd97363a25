//! One JSON document in a directory, replaced whole per change.
//!
//! The documents are small and change at admin rates (a topic, an ACL, a
//! user), so rewriting one whole per change is the simple, safe choice.
//! Most carry a format `version` that a newer broker may raise; a document
//! of another version is refused, never read as empty.

use std::fmt::Display;
use std::fs;
use std::io;
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
    /// The document `name` in `dir`; the directory is created if needed
    /// and an unfinished write is discarded.
    pub fn open(dir: &Path, name: &str) -> io::Result<Self> {
        super::create_dir(dir)?;
        super::discard_unfinished(dir, name)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// An error about the document's content, naming the file.
    pub fn invalid(&self, message: impl Display) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {message}", self.path().display()),
        )
    }

    /// The document, or None if it was never written. A file that does not
    /// parse is an error, never an empty state.
    pub fn load<T: DeserializeOwned>(&self) -> io::Result<Option<T>> {
        match fs::read(self.path()) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|error| self.invalid(error)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// [`Self::load`] for a document whose format version (`version_of`)
    /// must be `expected`.
    pub fn load_versioned<T: DeserializeOwned>(
        &self,
        expected: u32,
        version_of: impl Fn(&T) -> u32,
    ) -> io::Result<Option<T>> {
        let document = self.load::<T>()?;
        match document.as_ref().map(&version_of) {
            Some(version) if version != expected => {
                Err(self.invalid(format_args!("unsupported format version {version}")))
            }
            _ => Ok(document),
        }
    }

    /// Replaces the document; durable on return.
    pub fn store<T: Serialize>(&self, value: &T) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        super::replace(&self.dir, &self.name, &bytes)
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

    #[test]
    fn another_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = JsonFile::open(dir.path(), "doc.json").unwrap();
        let version = |doc: &Vec<u32>| doc[0];
        assert_eq!(file.load_versioned(1, version).unwrap(), None);
        file.store(&vec![1u32, 5]).unwrap();
        assert_eq!(file.load_versioned(1, version).unwrap(), Some(vec![1, 5]));
        let error = file.load_versioned(2, version).unwrap_err();
        assert!(error
            .to_string()
            .ends_with("doc.json: unsupported format version 1"));
    }
}
