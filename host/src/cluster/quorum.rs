//! The boundary between the cluster and its consensus engine.
//!
//! What the rest of the broker needs from consensus is small: propose a
//! command and learn its result once it is committed and applied, read the
//! applied state, be told when it changes, and know who leads. Keeping it
//! to that (and to our own types) lets the engine under it ([`super::raft`]
//! today) be swapped, as DESIGN §11 asks.
//!
//! The replicated state is any [`StateMachine`]: a deterministic value that
//! every node rebuilds by applying the same commands in the same order. It
//! is also its own snapshot (serialized whole), which is fine for
//! metadata-sized state.

use std::fmt::{self, Debug};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;

/// A node's id in the quorum (Kafka's `node.id`).
pub type NodeId = u64;

/// State replicated by applying commands in log order (one trait for the
/// engine and the metadata image: `cluster::state_machine`).
pub use crate::cluster::state_machine::StateMachine;

/// The position of the last applied log entry: what [`Quorum::watch`]
/// carries. `(0, 0)` until something was applied (index 0 is the entry that
/// formed the cluster, which changes no state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Applied {
    pub index: u64,
    pub term: u64,
}

/// Why a proposal has no response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumError {
    /// No leader accepted the command before the deadline: it was not
    /// applied and may be retried.
    NoLeader,
    /// The command reached a leader but its outcome is unknown (the leader
    /// was lost, or the deadline passed while it was being committed): it
    /// may or may not be applied, so a retry must be idempotent.
    Indeterminate(String),
    /// This node is shut down or its engine stopped (e.g. on a storage
    /// error, which stops a Raft node to protect the log).
    Stopped(String),
}

impl fmt::Display for QuorumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuorumError::NoLeader => f.write_str("no quorum leader accepted the proposal"),
            QuorumError::Indeterminate(why) => write!(f, "proposal outcome unknown: {why}"),
            QuorumError::Stopped(why) => write!(f, "quorum node stopped: {why}"),
        }
    }
}

impl std::error::Error for QuorumError {}

/// The future of a proposal (boxed, so `Quorum` can be used as a trait
/// object).
pub type Proposal<'a, R> = Pin<Box<dyn Future<Output = Result<R, QuorumError>> + Send + 'a>>;

/// A node's view of the replicated state machine `S`.
pub trait Quorum<S: StateMachine>: Send + Sync {
    /// Proposes `command` from this node (a follower forwards it to the
    /// leader) and returns its response once it is committed and applied,
    /// both on the leader and on this node, so [`Quorum::image`] shows it.
    fn propose(&self, command: S::Command) -> Proposal<'_, S::Response>;

    /// The applied state: an immutable view, cheap to take (later applies
    /// do not change it).
    fn image(&self) -> Arc<S>;

    /// Changes after every apply; the image is updated before the value is
    /// sent.
    fn watch(&self) -> watch::Receiver<Applied>;

    /// The current leader as this node knows it, if any.
    fn leader(&self) -> Option<NodeId>;
}
