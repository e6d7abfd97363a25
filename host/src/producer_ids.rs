//! Producer ids, as Kafka's `ProducerIdManager` hands them out to
//! InitProducerId.
//!
//! A producer id must never be handed out twice, not even across a crash:
//! two producers sharing one would have their sequences checked against each
//! other and one would be refused or, worse, deduplicated away. So ids are
//! reserved in blocks (1000, like Kafka's blocks from the controller) and
//! the end of the reserved block is made durable *before* any id in it is
//! returned: `<log dir>/producer-id-block` holds it, replaced by write to a
//! temporary file, fsync, rename and directory fsync. A crash loses at most
//! the unused rest of a block, never reuses an id.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};

/// Ids reserved per durable write.
const BLOCK_SIZE: i64 = 1000;
const FILE_NAME: &str = "producer-id-block";

pub struct ProducerIdManager {
    path: PathBuf,
    /// (next id to hand out, end of the durable reservation).
    state: Mutex<(i64, i64)>,
}

impl ProducerIdManager {
    /// Opens the reservation file under `dir` (creating nothing until the
    /// first id is asked for).
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE_NAME);
        let reserved = match fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|end| *end >= 0)
                .with_context(|| format!("{} does not hold a producer id", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Self {
            path,
            state: Mutex::new((reserved, reserved)),
        })
    }

    /// A producer id no one has had before.
    pub fn allocate(&self) -> Result<i64> {
        let mut state = crate::sync::lock(&self.state);
        let (next, reserved) = *state;
        if next >= reserved {
            let end = next
                .checked_add(BLOCK_SIZE)
                .context("producer ids are exhausted")?;
            self.persist(end)?;
            state.1 = end;
        }
        state.0 = next + 1;
        Ok(next)
    }

    fn persist(&self, end: i64) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        crate::durable::replace(dir, FILE_NAME, format!("{end}\n").as_bytes())
            .with_context(|| format!("replacing {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts() {
        let dir = std::env::temp_dir().join(format!("gregor-pids-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let first = ProducerIdManager::open(&dir).unwrap();
        assert_eq!(first.allocate().unwrap(), 0);
        assert_eq!(first.allocate().unwrap(), 1);
        // A restart (or crash) skips the rest of the reserved block.
        let second = ProducerIdManager::open(&dir).unwrap();
        assert_eq!(second.allocate().unwrap(), BLOCK_SIZE);
        fs::remove_dir_all(&dir).unwrap();
    }
}
