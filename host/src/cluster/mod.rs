//! The cluster: several brokers that agree on one metadata log (DESIGN §11,
//! Kafka's KRaft).
//!
//! Consensus is not written here: it comes from an existing, tested Raft
//! engine (`openraft`, in [`raft`]) behind our own small [`quorum::Quorum`]
//! trait, so the engine can be replaced without touching what sits on it.
//! The trait is generic over the replicated [`quorum::StateMachine`],
//! so the engine knows nothing of topics or brokers: the metadata image
//! ([`image`]) and its commands ([`command`]) implement it.

// The consensus engine.
pub mod quorum;
pub mod raft;

// What the quorum replicates: the metadata image, its commands, and the
// controller's decisions and placement that produce them; and how a
// broker runs on it, data replication between brokers included (it
// follows the image, so it sits here, above the ReplicaManager, which
// sees it only through its own `replica::PartitionReplication` trait).
pub mod broker_metadata;
pub mod command;
pub mod config;
pub mod controller;
pub mod coordinators;
pub mod image;
pub mod membership;
#[cfg(test)]
pub(crate) mod memory_quorum;
pub mod node;
pub mod peer;
pub mod placement;
pub mod reconciler;
pub mod replication;
#[cfg(test)]
pub(crate) mod testing;
pub mod txn_markers;
