//! The replicated state machine the metadata quorum drives.
//!
//! The consensus engine (openraft, behind our `Quorum` trait) only orders
//! commands; what they mean is this trait's business. Every node applies
//! the same committed commands in the same order, so `apply` must be a pure
//! function of the state, the log index and the command: no clocks, no
//! randomness, no node-local configuration. Whatever a decision needs from
//! the outside world (a timestamp, a fresh id, a random start index) the
//! proposer puts into the command.

use serde::de::DeserializeOwned;
use serde::Serialize;

pub trait StateMachine:
    Default + Clone + Serialize + DeserializeOwned + Send + Sync + 'static
{
    type Command: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static;
    type Response: Serialize + DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static;
    /// Deterministic: the same commands in the same order give the same state on every node.
    fn apply(&mut self, index: u64, command: &Self::Command) -> Self::Response;
}
