//! The active controller's decisions (Kafka's QuorumController and its
//! control managers): pure functions over the committed image that answer
//! with the [`Command`](crate::cluster::command::Command) to propose, or
//! Kafka's error.
//!
//! Why pure functions: the same decision code runs in the host on whichever
//! node is the active controller (never in a hot-swappable plugin, which
//! could differ between nodes), and it is testable without a quorum. The
//! decision is recorded in the command (the new leader, the replicas), so
//! replaying the log never re-decides; a command carries the epochs it was
//! decided on and the image refuses it if they moved (a decision made on a
//! stale image is simply made again).
//!
//! - [`brokers`]: registration, heartbeats, fencing, controlled shutdown;
//! - [`election`]: Kafka's PartitionChangeBuilder rules for leaders and
//!   ISRs when a broker leaves or comes back;
//! - [`topics`]: CreateTopics, CreatePartitions, DeleteTopics and
//!   AlterPartition;
//! - [`reassignment`]: AlterPartitionReassignments and
//!   ListPartitionReassignments (KIP-455), completed by AlterPartition;
//! - [`active`]: the active controller the controller's request APIs
//!   call: leadership check, decision, proposal, and the fencing clock;
//! - [`heartbeats`]: broker sessions, kept in the controller's memory only
//!   (as in Kafka: a new active controller gives every broker a fresh
//!   session).

pub mod active;
pub mod brokers;
pub mod election;
pub mod heartbeats;
pub mod reassignment;
pub mod topics;

pub use brokers::{HeartbeatDecision, HeartbeatRequest};
pub use heartbeats::Heartbeats;
pub use topics::{AlterPartitionRequest, TopicRequest};

#[cfg(test)]
mod tests;
