//! openraft's state machine storage: the applied [`StateMachine`] in memory
//! and its snapshots on disk.
//!
//! The state is not written per apply: a snapshot (the state serialized
//! whole, with the log position and membership it covers) is written
//! atomically every `snapshot_interval_entries` commits, and on restart
//! the state is that snapshot plus the log entries after it, re-applied by
//! openraft. The same bytes are what a far-behind peer is sent.
//!
//! The image is held as `Arc<S>` and changed copy-on-write, so a reader's
//! view never changes under it and a snapshot is built from a consistent
//! state without stopping applies.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, RaftSnapshotBuilder, Snapshot};
use tokio::sync::watch;

use super::types::{
    blocking, storage_error, Entry, LogId, Membership, SnapshotMeta, StorageError, TypeConfig,
};
use crate::cluster::quorum::{Applied, StateMachine};
use crate::sync::{read, write};

const SNAPSHOT_FILE: &str = "snapshot.bin";
const MAGIC: &[u8; 8] = b"GRGSNAP1";

/// What has been applied.
struct Current<S> {
    image: Arc<S>,
    last_applied: Option<LogId>,
    membership: Membership,
}

/// The applied state, shared by the store, its snapshot builder and the
/// [`super::RaftQuorum`] that reads it.
pub struct Shared<S> {
    current: RwLock<Current<S>>,
    applied: watch::Sender<Applied>,
}

impl<S> Shared<S> {
    pub fn image(&self) -> Arc<S> {
        read(&self.current).image.clone()
    }

    pub fn watch(&self) -> watch::Receiver<Applied> {
        self.applied.subscribe()
    }

    fn publish(&self, last: Option<LogId>) {
        let applied = last.map_or_else(Applied::default, |log_id| Applied {
            index: log_id.index,
            term: log_id.leader_id.term,
        });
        self.applied.send_replace(applied);
    }
}

/// The snapshot file: `MAGIC`, a crc32c of the rest, the metadata's length,
/// the metadata (JSON), the serialized state. Replaced atomically.
#[derive(Clone)]
struct SnapshotFile {
    dir: PathBuf,
}

impl SnapshotFile {
    fn path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }

    fn store(&self, meta: &SnapshotMeta, data: &[u8]) -> io::Result<()> {
        let meta = serde_json::to_vec(meta).map_err(io::Error::other)?;
        let meta_len = u32::try_from(meta.len()).map_err(io::Error::other)?;
        let mut body = Vec::with_capacity(4 + meta.len() + data.len());
        body.extend_from_slice(&meta_len.to_le_bytes());
        body.extend_from_slice(&meta);
        body.extend_from_slice(data);
        let mut bytes = Vec::with_capacity(12 + body.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        crate::durable::replace(&self.dir, SNAPSHOT_FILE, &bytes)
    }

    /// The snapshot, or None if none was taken; a file that does not check
    /// is an error naming it.
    fn load(&self) -> io::Result<Option<(SnapshotMeta, Vec<u8>)>> {
        let bytes = match std::fs::read(self.path()) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let corrupt = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: corrupt metadata snapshot: {why}",
                    self.path().display()
                ),
            )
        };
        let (magic, rest) = bytes
            .split_at_checked(8)
            .ok_or_else(|| corrupt("truncated"))?;
        let (crc, body) = rest
            .split_at_checked(4)
            .ok_or_else(|| corrupt("truncated"))?;
        if magic != MAGIC {
            return Err(corrupt("unknown format"));
        }
        if crc32c::crc32c(body).to_le_bytes() != crc {
            return Err(corrupt("CRC mismatch"));
        }
        let (len, rest) = body
            .split_at_checked(4)
            .ok_or_else(|| corrupt("truncated"))?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (meta, data) = rest
            .split_at_checked(len)
            .ok_or_else(|| corrupt("truncated"))?;
        let meta = serde_json::from_slice(meta).map_err(|error| corrupt(&error.to_string()))?;
        Ok(Some((meta, data.to_vec())))
    }
}

fn decode<S: StateMachine>(data: &[u8]) -> Result<S, serde_json::Error> {
    serde_json::from_slice(data)
}

/// The state machine of one node.
pub struct StateMachineStore<S> {
    shared: Arc<Shared<S>>,
    file: SnapshotFile,
}

impl<S: StateMachine> StateMachineStore<S> {
    /// Opens the state in `dir`: its last snapshot, if any (one that does
    /// not check or decode is an error).
    pub fn open(dir: &Path) -> io::Result<Self> {
        crate::durable::create_dir(dir)?;
        crate::durable::discard_unfinished(dir, SNAPSHOT_FILE)?;
        let file = SnapshotFile {
            dir: dir.to_path_buf(),
        };
        let current = match file.load()? {
            Some((meta, data)) => Current {
                image: Arc::new(decode(&data).map_err(|error| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: metadata snapshot does not decode: {error}",
                            file.path().display()
                        ),
                    )
                })?),
                last_applied: meta.last_log_id,
                membership: meta.last_membership,
            },
            None => Current {
                image: Arc::new(S::default()),
                last_applied: None,
                membership: Membership::default(),
            },
        };
        let last = current.last_applied;
        let (applied, _) = watch::channel(Applied::default());
        let shared = Arc::new(Shared {
            current: RwLock::new(current),
            applied,
        });
        shared.publish(last);
        Ok(Self { shared, file })
    }

    pub fn shared(&self) -> Arc<Shared<S>> {
        self.shared.clone()
    }
}

/// Builds a snapshot of the state as it is when asked.
pub struct SnapshotBuilder<S> {
    shared: Arc<Shared<S>>,
    file: SnapshotFile,
}

impl<S: StateMachine> RaftSnapshotBuilder<TypeConfig<S>> for SnapshotBuilder<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig<S>>, StorageError> {
        let (image, last_applied, membership) = {
            let current = read(&self.shared.current);
            (
                current.image.clone(),
                current.last_applied,
                current.membership.clone(),
            )
        };
        let snapshot_id = match &last_applied {
            Some(log_id) => format!("{}-{}", log_id.leader_id.term, log_id.index),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        let file = self.file.clone();
        let stored = meta.clone();
        let data = blocking(move || {
            let data = serde_json::to_vec(&*image).map_err(io::Error::other)?;
            file.store(&stored, &data)?;
            Ok(data)
        })
        .await
        .map_err(|error| {
            storage_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
                error,
            )
        })?;
        tracing::info!(snapshot = %meta.snapshot_id, bytes = data.len(), "metadata snapshot written");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig<S>> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder<S>;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        let current = read(&self.shared.current);
        Ok((current.last_applied, current.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Option<S::Response>>, StorageError>
    where
        I: IntoIterator<Item = Entry<S>> + Send,
        I::IntoIter: Send,
    {
        let mut responses = Vec::new();
        let last = {
            let mut current = write(&self.shared.current);
            let current = &mut *current;
            for entry in entries {
                current.last_applied = Some(entry.log_id);
                responses.push(match entry.payload {
                    EntryPayload::Blank => None,
                    EntryPayload::Normal(command) => {
                        Some(Arc::make_mut(&mut current.image).apply(entry.log_id.index, &command))
                    }
                    EntryPayload::Membership(membership) => {
                        current.membership = Membership::new(Some(entry.log_id), membership);
                        None
                    }
                });
            }
            current.last_applied
        };
        self.shared.publish(last);
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
            file: self.file.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let image: S =
            decode(&data).map_err(|error| storage_error(subject(), ErrorVerb::Read, error))?;
        let file = self.file.clone();
        let stored = meta.clone();
        blocking(move || file.store(&stored, &data))
            .await
            .map_err(|error| storage_error(subject(), ErrorVerb::Write, error))?;
        {
            let mut current = write(&self.shared.current);
            current.image = Arc::new(image);
            current.last_applied = meta.last_log_id;
            current.membership = meta.last_membership.clone();
        }
        tracing::info!(snapshot = %meta.snapshot_id, "metadata snapshot installed");
        self.shared.publish(meta.last_log_id);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig<S>>>, StorageError> {
        let file = self.file.clone();
        let loaded = blocking(move || file.load())
            .await
            .map_err(|error| storage_error(ErrorSubject::Snapshot(None), ErrorVerb::Read, error))?;
        Ok(loaded.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
