//! openraft's log storage: the segment log on disk, the entries in memory,
//! the vote and the purge point as atomic documents.
//!
//! The metadata log is bounded by snapshots, so every live entry is also
//! kept in memory: replication reads never touch the disk, and the disk is
//! written only by appends (fsynced before openraft is told they are
//! flushed), truncations and purges. Disk work runs on tokio's blocking
//! pool so an fsync does not stall the broker's runtime threads.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogState, RaftLogReader};

use super::segments::SegmentLog;
use super::types::{blocking, storage_error, Entry, LogId, StorageError, TypeConfig, Vote};
use crate::cluster::quorum::StateMachine;
use crate::durable::JsonFile;
use crate::sync::lock;

/// The entries in memory, shared with the replication readers.
type Entries<S> = Arc<Mutex<BTreeMap<u64, Entry<S>>>>;

/// Reads entries for replication (openraft's `LogReader`).
pub struct LogReader<S: StateMachine> {
    entries: Entries<S>,
}

impl<S: StateMachine> RaftLogReader<TypeConfig<S>> for LogReader<S> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<S>>, StorageError> {
        Ok(read_range(&self.entries, range))
    }
}

fn read_range<S: StateMachine>(
    entries: &Entries<S>,
    range: impl RangeBounds<u64>,
) -> Vec<Entry<S>> {
    lock(entries)
        .range(range)
        .map(|(_, entry)| entry.clone())
        .collect()
}

/// The raft log and vote of one node.
pub struct LogStore<S: StateMachine> {
    disk: Arc<Mutex<SegmentLog>>,
    entries: Entries<S>,
    purged: Option<LogId>,
    vote: Option<Vote>,
    vote_file: JsonFile,
    purged_file: JsonFile,
}

impl<S: StateMachine> LogStore<S> {
    /// Opens the log in `dir`: the vote, the purge point and the entries
    /// after it. A vote or purge document that does not parse, or a log
    /// record whose CRC checks but does not decode, is an error.
    pub fn open(dir: &Path, segment_bytes: u64) -> io::Result<Self> {
        let vote_file = JsonFile::open(dir, "vote.json")?;
        let purged_file = JsonFile::open(dir, "purged.json")?;
        let vote = vote_file.load::<Vote>()?;
        let purged = purged_file.load::<LogId>()?;
        let (mut disk, records) = SegmentLog::open(&dir.join("log"), segment_bytes)?;
        let mut entries = BTreeMap::new();
        for (index, bytes) in records {
            let entry: Entry<S> = serde_json::from_slice(&bytes).map_err(|error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: log entry {index} does not decode: {error}",
                        dir.display()
                    ),
                )
            })?;
            if entry.log_id.index != index {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: record {index} holds log entry {}",
                        dir.display(),
                        entry.log_id.index
                    ),
                ));
            }
            if purged.as_ref().is_none_or(|purged| index > purged.index) {
                entries.insert(index, entry);
            }
        }
        if let Some(purged) = &purged {
            // Finishes a purge that a crash interrupted.
            disk.purge(purged.index)?;
            if let Some(first) = entries.keys().next() {
                if *first != purged.index + 1 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: the log resumes at {first} after entries purged up to {}",
                            dir.display(),
                            purged.index
                        ),
                    ));
                }
            }
        }
        Ok(Self {
            disk: Arc::new(Mutex::new(disk)),
            entries: Arc::new(Mutex::new(entries)),
            purged,
            vote,
            vote_file,
            purged_file,
        })
    }

    fn last_log_id(&self) -> Option<LogId> {
        let entries = lock(&self.entries);
        match entries.last_key_value() {
            Some((_, entry)) => Some(entry.log_id),
            None => self.purged,
        }
    }

    /// Runs `work` on the segment log, off the runtime threads.
    async fn with_disk(
        &self,
        work: impl FnOnce(&mut SegmentLog) -> io::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        let disk = self.disk.clone();
        blocking(move || work(&mut lock(&disk))).await
    }
}

impl<S: StateMachine> RaftLogReader<TypeConfig<S>> for LogStore<S> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<S>>, StorageError> {
        Ok(read_range(&self.entries, range))
    }
}

impl<S: StateMachine> RaftLogStorage<TypeConfig<S>> for LogStore<S> {
    type LogReader = LogReader<S>;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig<S>>, StorageError> {
        Ok(LogState {
            last_purged_log_id: self.purged,
            last_log_id: self.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogReader {
            entries: self.entries.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let file = self.vote_file.clone();
        let saved = *vote;
        blocking(move || file.store(&saved))
            .await
            .map_err(|error| storage_error(ErrorSubject::Vote, ErrorVerb::Write, error))?;
        self.vote = Some(saved);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig<S>>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<S>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry<S>> = entries.into_iter().collect();
        let Some(first) = entries.first().map(|entry| entry.log_id.index) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let records = entries
            .iter()
            .map(serde_json::to_vec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| storage_error(ErrorSubject::Logs, ErrorVerb::Write, error))?;
        let written = self
            .with_disk(move |disk| disk.append(first, &records))
            .await;
        match written {
            Ok(()) => {
                lock(&self.entries)
                    .extend(entries.into_iter().map(|entry| (entry.log_id.index, entry)));
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(error) => {
                let failure = storage_error(ErrorSubject::Logs, ErrorVerb::Write, &error);
                callback.log_io_completed(Err(error));
                Err(failure)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let index = log_id.index;
        self.with_disk(move |disk| disk.truncate(index))
            .await
            .map_err(|error| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, error))?;
        lock(&self.entries).split_off(&index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let file = self.purged_file.clone();
        let disk = self.disk.clone();
        // The purge point first: after a crash, open() finishes the purge.
        blocking(move || {
            file.store(&log_id)?;
            lock(&disk).purge(log_id.index)
        })
        .await
        .map_err(|error| storage_error(ErrorSubject::Logs, ErrorVerb::Delete, error))?;
        let mut entries = lock(&self.entries);
        let kept = entries.split_off(&(log_id.index + 1));
        *entries = kept;
        self.purged = Some(log_id);
        Ok(())
    }
}
