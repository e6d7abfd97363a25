//! The transaction coordinator's records on `__transaction_state`: one
//! record per change, appended to the transactional id's partition
//! ([`state_topic::partition_for`]) in the order of the changes, replayed
//! from the log (the latest record per id wins, a tombstone forgets it).
//!
//! - The topic is created on the first write on a single node, as Kafka
//!   creates it on first use; on a cluster node the controller creates it
//!   (FindCoordinator asks it), never this store.
//! - A single node replays every partition at start; a cluster node loads
//!   a partition when it becomes its leader ([`StateLog::load_partition`]).
//! - An earlier release's `transactions.journal` (or `transactions.json`)
//!   is migrated at the first start of a single node: its records are
//!   appended to the topic, then the files are renamed `*.migrated`. A
//!   crash before the rename migrates the same records again, which
//!   changes nothing (they were the latest state, and nothing has been
//!   served since).
//! - Appends have the log's durability, as every internal topic's: the
//!   page cache at once, the log's flush policy after; on a cluster, the
//!   in-sync replicas before the coordinator answers (the caller waits).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use crate::coordinator::offsets_log::{read_records, OffsetsLog};
use crate::log::keyed_records::{self, Entry};

use super::journal;
use super::state_topic::{self, TOPIC};
use super::TransactionalProducer;

/// Every record, by transactional id.
pub(super) type Records = BTreeMap<String, TransactionalProducer>;

pub(super) struct StateLog {
    log: Arc<dyn OffsetsLog>,
    /// The topic's partition count, once it exists.
    partitions: Mutex<Option<i32>>,
}

impl StateLog {
    pub(super) fn new(log: Arc<dyn OffsetsLog>) -> io::Result<Self> {
        let partitions = log.partitions(false)?;
        Ok(Self {
            log,
            partitions: Mutex::new(partitions),
        })
    }

    /// The topic's partition count, the topic created first if `create`
    /// (a single node) and it does not exist; `None` if it does not.
    pub(super) fn partition_count(&self, create: bool) -> io::Result<Option<i32>> {
        let mut known = crate::sync::lock(&self.partitions);
        if known.is_none() {
            *known = self.log.partitions(create)?;
        }
        Ok(*known)
    }

    /// The partition `transactional_id` lives in, if the topic exists.
    pub(super) fn partition_of(&self, transactional_id: &str) -> Option<i32> {
        let count = (*crate::sync::lock(&self.partitions))?;
        Some(state_topic::partition_for(transactional_id, count))
    }

    /// Appends `id`'s record (`None`: a tombstone) to its partition: the
    /// partition and its log end offset after the record.
    pub(super) fn append(
        &self,
        id: &str,
        record: Option<&TransactionalProducer>,
    ) -> io::Result<(i32, i64)> {
        let count = self
            .partition_count(true)?
            .ok_or_else(|| io::Error::other(format!("{TOPIC} does not exist")))?;
        let partition = state_topic::partition_for(id, count);
        let pair = (
            state_topic::encode_key(id),
            record.map(state_topic::encode_value),
        );
        let batch = keyed_records::encode(&[pair], crate::clock::now_ms());
        let end = self.log.append(partition, &batch)?;
        Ok((partition, end))
    }

    /// Every partition's records (a single node, at start).
    pub(super) fn replay(&self) -> io::Result<Records> {
        let mut records = Records::new();
        let Some(count) = self.partition_count(false)? else {
            return Ok(records);
        };
        let mut read = 0;
        for partition in 0..count {
            read += self.read_into(partition, &mut records)?;
        }
        tracing::info!(
            records = read,
            ids = records.len(),
            partitions = count,
            "replayed {TOPIC}"
        );
        Ok(records)
    }

    /// One partition's records (its leader, when elected).
    pub(super) fn load_partition(&self, partition: i32) -> io::Result<Records> {
        let mut records = Records::new();
        let read = self.read_into(partition, &mut records)?;
        tracing::info!(
            records = read,
            ids = records.len(),
            "replayed {TOPIC}-{partition}"
        );
        Ok(records)
    }

    fn read_into(&self, partition: i32, records: &mut Records) -> io::Result<usize> {
        read_records(self.log.as_ref(), TOPIC, partition, &mut |entry| {
            // The coordinator's own records are never transactional.
            let Entry::Record(record) = entry else {
                return;
            };
            let id = match state_topic::decode_key(record.key.as_deref().unwrap_or_default()) {
                Ok(id) => id,
                Err(why) => {
                    tracing::warn!(
                        offset = record.offset,
                        "{TOPIC}-{partition}: a key that does not decode: {why}"
                    );
                    return;
                }
            };
            match record.value.as_deref().map(state_topic::decode_value) {
                None => {
                    records.remove(&id);
                }
                Some(Ok(value)) => {
                    records.insert(id, value);
                }
                Some(Err(why)) => tracing::warn!(
                    offset = record.offset,
                    "{TOPIC}-{partition}: a value that does not decode: {why}"
                ),
            }
        })
    }

    /// Appends the records of an earlier release's store in `dir` to the
    /// topic (they win over `records`, the topic's, being newer: the topic
    /// had no writer before) and retires the files. Nothing to migrate:
    /// `records` unchanged.
    pub(super) fn migrate(&self, dir: &Path, records: &mut Records) -> Result<()> {
        if !journal::exists(dir) {
            return Ok(());
        }
        let legacy = journal::read(dir)?;
        for (id, record) in &legacy {
            self.append(id, Some(record))
                .with_context(|| format!("migrating {id} into {TOPIC}"))?;
        }
        journal::retire(dir)?;
        tracing::info!(
            ids = legacy.len(),
            "migrated {} into {TOPIC}",
            journal::JOURNAL
        );
        records.extend(legacy);
        Ok(())
    }
}
