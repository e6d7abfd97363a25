//! The cluster: several brokers that agree on one metadata log (DESIGN §11,
//! Kafka's KRaft).
//!
//! Consensus is not written here: it comes from an existing, tested Raft
//! engine (`openraft`, in [`raft`]) behind our own small [`quorum::Quorum`]
//! trait, so the engine can be replaced without touching what sits on it.
//! The trait is generic over the replicated [`state_machine::StateMachine`],
//! so the engine knows nothing of topics or brokers: the metadata image
//! ([`image`]) and its commands ([`command`]) implement it.

// The consensus engine.
pub mod quorum;
pub mod raft;

// The metadata image, its commands, placement and the controller's
// decisions.
pub mod broker_metadata;
pub mod command;
pub mod config;
pub mod controller;
pub mod image;
pub mod membership;
#[cfg(test)]
pub(crate) mod memory_quorum;
pub mod node;
pub mod placement;
pub mod reconciler;
pub mod state_machine;
#[cfg(test)]
pub(crate) mod testing;
