//! openraft's type configuration for a replicated [`StateMachine`].
//!
//! openraft's `declare_raft_types!` makes one concrete type; ours is generic
//! over the state machine, so its marker type and the traits openraft
//! requires of it are written out (without bounds on `S`: the marker holds
//! no `S`).

use std::cmp::Ordering;
use std::fmt;
use std::io::{self, Cursor};
use std::marker::PhantomData;

use openraft::impls::OneshotResponder;
use openraft::{BasicNode, ErrorSubject, ErrorVerb, RaftTypeConfig, StorageIOError, TokioRuntime};

use crate::cluster::quorum::{NodeId, StateMachine};

/// The type configuration for state machine `S`.
pub struct TypeConfig<S>(PhantomData<fn() -> S>);

impl<S: StateMachine> RaftTypeConfig for TypeConfig<S> {
    type D = S::Command;
    /// `None` for the entries that carry no command (blank, membership).
    type R = Option<S::Response>;
    type NodeId = NodeId;
    /// `addr` is the peer's quorum RPC address (`host:port`).
    type Node = BasicNode;
    type Entry = openraft::Entry<Self>;
    /// The serialized state machine.
    type SnapshotData = Cursor<Vec<u8>>;
    type AsyncRuntime = TokioRuntime;
    type Responder = OneshotResponder<Self>;
}

impl<S> Clone for TypeConfig<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for TypeConfig<S> {}

impl<S> Default for TypeConfig<S> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<S> PartialEq for TypeConfig<S> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<S> Eq for TypeConfig<S> {}

impl<S> PartialOrd for TypeConfig<S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<S> Ord for TypeConfig<S> {
    fn cmp(&self, _: &Self) -> Ordering {
        Ordering::Equal
    }
}

impl<S> fmt::Debug for TypeConfig<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TypeConfig")
    }
}

pub type Raft<S> = openraft::Raft<TypeConfig<S>>;
pub type Entry<S> = openraft::Entry<TypeConfig<S>>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Membership = openraft::StoredMembership<NodeId, BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;

/// A storage error for openraft (which stops the node on one).
pub fn storage_error(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    error: impl fmt::Display,
) -> StorageError {
    StorageIOError::new(subject, verb, openraft::AnyError::error(error)).into()
}

/// Runs disk work on tokio's blocking pool, so an fsync does not stall the
/// broker's runtime threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| {
            Err(io::Error::other(format!(
                "metadata storage task failed: {error}"
            )))
        })
}
