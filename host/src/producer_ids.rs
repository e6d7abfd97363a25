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
//!
//! On a cluster node the blocks come from the active controller instead
//! ([`BlockSource`], Kafka's RPCProducerIdManager: an AllocateProducerIds
//! request, `cluster::membership::producer_ids`): the controller's
//! ProducerIdsRecord hands each block out once across the cluster, so no
//! file is needed; a restarted broker simply asks for a new block. The
//! source is told when 90% of a block is used, to ask for the next one
//! ahead of need.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result};

/// Ids reserved per durable write.
const BLOCK_SIZE: i64 = 1000;
const FILE_NAME: &str = "producer-id-block";

/// Where a cluster node's blocks come from.
pub trait BlockSource: Send + Sync {
    /// A fresh block `first .. end`, never handed to anyone before.
    fn next_block(&self) -> Result<(i64, i64)>;

    /// The current block is nearly used up: a source that can ask for the
    /// next one ahead of need does so now.
    fn prefetch(&self) {}
}

/// The share of a block used before the next is asked for (Kafka's
/// RPCProducerIdManager: 90%).
const PREFETCH_PERCENT: i64 = 90;

/// The id past which the next block is prefetched, for `first .. end`.
fn prefetch_point(first: i64, end: i64) -> i64 {
    first.saturating_add((end.saturating_sub(first)).saturating_mul(PREFETCH_PERCENT) / 100)
}

pub struct ProducerIdManager {
    path: PathBuf,
    /// (next id to hand out, end of the durable reservation or block).
    state: Mutex<(i64, i64)>,
    /// On a cluster node, the id that starts the prefetch of the next
    /// block (once per block).
    prefetch_at: Mutex<Option<i64>>,
    /// Set on a cluster node: blocks from the controller, not the file.
    source: OnceLock<Arc<dyn BlockSource>>,
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
            prefetch_at: Mutex::new(None),
            source: OnceLock::new(),
        })
    }

    /// Takes the ids from `source`'s blocks from now on (a cluster node).
    pub fn use_blocks_from(&self, source: Arc<dyn BlockSource>) {
        if self.source.set(source).is_ok() {
            *crate::sync::lock(&self.state) = (0, 0);
        }
    }

    /// A producer id no one has had before.
    pub fn allocate(&self) -> Result<i64> {
        // Held while a cluster node waits for the controller's next block.
        let mut state = crate::sync::lock_held_across_io(&self.state);
        let (next, reserved) = *state;
        if let Some(source) = self.source.get() {
            let mut prefetch_at = crate::sync::lock(&self.prefetch_at);
            if next >= reserved {
                let (first, end) = source.next_block()?;
                *state = (first, end);
                *prefetch_at = Some(prefetch_point(first, end));
            }
            let next = state.0;
            state.0 = next + 1;
            if prefetch_at.is_some_and(|at| next >= at) {
                *prefetch_at = None;
                source.prefetch();
            }
            return Ok(next);
        }
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

    /// Blocks of 2 from 10, 20, ...; counts the prefetch calls.
    struct Blocks(Mutex<i64>, Mutex<u32>);

    impl BlockSource for Blocks {
        fn next_block(&self) -> Result<(i64, i64)> {
            let mut next = crate::sync::lock(&self.0);
            *next += 10;
            Ok((*next, *next + 2))
        }

        fn prefetch(&self) {
            *crate::sync::lock(&self.1) += 1;
        }
    }

    #[test]
    fn the_next_block_is_prefetched_once_90_percent_is_used() {
        assert_eq!(prefetch_point(1000, 2000), 1900);
        assert_eq!(prefetch_point(0, 2), 1);
    }

    #[test]
    fn a_cluster_node_takes_its_ids_from_the_controller_blocks() {
        let dir = std::env::temp_dir().join(format!("gregor-pid-blocks-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let ids = ProducerIdManager::open(&dir).unwrap();
        let blocks = Arc::new(Blocks(Mutex::new(0), Mutex::new(0)));
        ids.use_blocks_from(blocks.clone());
        let got: Vec<i64> = (0..5).map(|_| ids.allocate().unwrap()).collect();
        assert_eq!(got, vec![10, 11, 20, 21, 30]);
        // Each block's second id passes 90% of it: one prefetch per block.
        assert_eq!(*crate::sync::lock(&blocks.1), 2);
        assert!(!dir.join(FILE_NAME).exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
