//! The cluster: several brokers that agree on one metadata log (DESIGN §11,
//! Kafka's KRaft).
//!
//! Consensus is not written here: it comes from an existing, tested Raft
//! engine (`openraft`, in [`raft`]) behind our own small [`quorum::Quorum`]
//! trait, so the engine can be replaced without touching what sits on it.
//! The trait is generic over the replicated [`quorum::StateMachine`], so the
//! engine knows nothing of topics or brokers: the metadata image and its
//! commands implement that trait in their own modules.

// The consensus engine.
pub mod quorum;
pub mod raft;

// The metadata image, its commands and placement live beside the engine
// (declared here by their own modules).
