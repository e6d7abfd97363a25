//! Transactional ids and their producer id and epoch: the part of Kafka's
//! `TransactionCoordinator.handleInitProducerId` that fences zombies.
//!
//! A transactional producer calls InitProducerId with its transactional id
//! on every start. The first call creates the id's record (a new producer
//! id, epoch 0); every later call bumps the epoch, so a zombie instance
//! still holding the old epoch is fenced: the partitions refuse its batches
//! (INVALID_PRODUCER_EPOCH, see `log::producer_state`) and a KIP-360 call
//! that names the old epoch gets PRODUCER_FENCED. When the epoch would
//! reach `i16::MAX` a new producer id starts again at epoch 0, as Kafka.
//!
//! Why a whole-file snapshot: there is one small record per transactional
//! id, changed only by InitProducerId, so the store is `transactions.json`
//! under the log dir replaced by write-temp, fsync, rename and directory
//! fsync. A crash leaves the old or the new file, never a torn one, and an
//! epoch handed out is durable before the answer leaves, so a restart can
//! never hand out an epoch twice.
//!
//! Not here yet: AddPartitionsToTxn, EndTxn, markers and timeouts; every
//! record stays in the Empty state.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::producer_ids::ProducerIdManager;

const FILE_NAME: &str = "transactions.json";

/// Kafka error codes of InitProducerId with a transactional id.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const PRODUCER_FENCED: i16 = 90;
}

/// `transaction.max.timeout.ms` default (15 minutes).
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// One transactional id's durable record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionalProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The producer id and epoch before the last InitProducerId, which a
    /// retried call may still name (KIP-360).
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
}

/// The answer to InitProducerId.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAnswer {
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitAnswer {
    fn failed(error_code: i16) -> Self {
        InitAnswer {
            error_code,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

pub struct TransactionStore {
    path: PathBuf,
    max_timeout_ms: i32,
    producers: Mutex<BTreeMap<String, TransactionalProducer>>,
}

impl TransactionStore {
    /// Loads `transactions.json` under `dir` (none yet: empty).
    pub fn open(dir: &Path, max_timeout_ms: i32) -> Result<Self> {
        let path = dir.join(FILE_NAME);
        let producers = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Self {
            path,
            max_timeout_ms,
            producers: Mutex::new(producers),
        })
    }

    /// InitProducerId for `transactional_id`. `expected` is the producer id
    /// and epoch a v3+ client names (-1: none).
    pub fn init_producer_id(
        &self,
        ids: &ProducerIdManager,
        transactional_id: &str,
        timeout_ms: i32,
        expected: (i64, i16),
    ) -> InitAnswer {
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return InitAnswer::failed(codes::INVALID_TRANSACTION_TIMEOUT);
        }
        let mut producers = self
            .producers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = producers.get(transactional_id).cloned();
        let next = match &current {
            None => match ids.allocate() {
                Ok(producer_id) => TransactionalProducer {
                    producer_id,
                    producer_epoch: 0,
                    last_producer_id: -1,
                    last_producer_epoch: -1,
                    timeout_ms,
                },
                Err(error) => {
                    tracing::error!("allocating a producer id failed: {error:#}");
                    return InitAnswer::failed(codes::KAFKA_STORAGE_ERROR);
                }
            },
            Some(record) => {
                let (expected_id, expected_epoch) = expected;
                if expected_id >= 0 {
                    let is_current = (expected_id, expected_epoch)
                        == (record.producer_id, record.producer_epoch);
                    let is_retry = (expected_id, expected_epoch)
                        == (record.last_producer_id, record.last_producer_epoch);
                    if is_retry {
                        // The answer to this call was lost: give it again.
                        return InitAnswer {
                            error_code: codes::NONE,
                            producer_id: record.producer_id,
                            producer_epoch: record.producer_epoch,
                        };
                    }
                    if !is_current {
                        return InitAnswer::failed(codes::PRODUCER_FENCED);
                    }
                }
                match bumped(record, ids) {
                    Ok(mut next) => {
                        next.timeout_ms = timeout_ms;
                        next
                    }
                    Err(error) => {
                        tracing::error!("allocating a producer id failed: {error:#}");
                        return InitAnswer::failed(codes::KAFKA_STORAGE_ERROR);
                    }
                }
            }
        };
        producers.insert(transactional_id.to_string(), next.clone());
        if let Err(error) = self.persist(&producers) {
            tracing::error!("persisting transactional ids failed: {error:#}");
            match current {
                Some(record) => producers.insert(transactional_id.to_string(), record),
                None => producers.remove(transactional_id),
            };
            return InitAnswer::failed(codes::KAFKA_STORAGE_ERROR);
        }
        InitAnswer {
            error_code: codes::NONE,
            producer_id: next.producer_id,
            producer_epoch: next.producer_epoch,
        }
    }

    fn persist(&self, producers: &BTreeMap<String, TransactionalProducer>) -> Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(producers)?;
        let mut file =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, &self.path)
            .with_context(|| format!("replacing {}", self.path.display()))?;
        if let Some(dir) = self.path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// The next epoch of a record, or a new producer id at epoch 0 when the
/// epoch is exhausted.
fn bumped(
    record: &TransactionalProducer,
    ids: &ProducerIdManager,
) -> Result<TransactionalProducer> {
    let (producer_id, producer_epoch) = if record.producer_epoch >= i16::MAX - 1 {
        (ids.allocate()?, 0)
    } else {
        (record.producer_id, record.producer_epoch + 1)
    };
    Ok(TransactionalProducer {
        producer_id,
        producer_epoch,
        last_producer_id: record.producer_id,
        last_producer_epoch: record.producer_epoch,
        timeout_ms: record.timeout_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: i16, id: i64, epoch: i16) -> InitAnswer {
        InitAnswer {
            error_code: code,
            producer_id: id,
            producer_epoch: epoch,
        }
    }

    #[test]
    fn epochs_bump_fence_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIdManager::open(dir.path()).unwrap();
        let store = TransactionStore::open(dir.path(), DEFAULT_MAX_TIMEOUT_MS).unwrap();
        let first = store.init_producer_id(&ids, "t", 60_000, (-1, -1));
        assert_eq!(first, answer(0, first.producer_id, 0));
        let pid = first.producer_id;
        assert_eq!(
            store.init_producer_id(&ids, "t", 60_000, (-1, -1)),
            answer(0, pid, 1)
        );
        // A zombie naming epoch 0 is fenced; a retry naming the previous
        // epoch gets the current one again; the current epoch bumps.
        assert_eq!(
            store.init_producer_id(&ids, "t", 60_000, (pid, 5)),
            InitAnswer::failed(codes::PRODUCER_FENCED)
        );
        assert_eq!(
            store.init_producer_id(&ids, "t", 60_000, (pid, 0)),
            answer(0, pid, 1)
        );
        assert_eq!(
            store.init_producer_id(&ids, "t", 60_000, (pid, 1)),
            answer(0, pid, 2)
        );
        assert_eq!(
            store.init_producer_id(&ids, "t", 0, (-1, -1)),
            InitAnswer::failed(codes::INVALID_TRANSACTION_TIMEOUT)
        );
        let reopened = TransactionStore::open(dir.path(), DEFAULT_MAX_TIMEOUT_MS).unwrap();
        let ids = ProducerIdManager::open(dir.path()).unwrap();
        assert_eq!(
            reopened.init_producer_id(&ids, "t", 60_000, (-1, -1)),
            answer(0, pid, 3)
        );
        let other = reopened.init_producer_id(&ids, "u", 60_000, (-1, -1));
        assert!(other.producer_id > pid);
    }

    #[test]
    fn an_exhausted_epoch_moves_to_a_new_producer_id() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIdManager::open(dir.path()).unwrap();
        let record = TransactionalProducer {
            producer_id: 7,
            producer_epoch: i16::MAX - 1,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms: 1,
        };
        let next = bumped(&record, &ids).unwrap();
        assert_eq!((next.producer_epoch, next.last_producer_id), (0, 7));
        assert_ne!(next.producer_id, 7);
    }
}
