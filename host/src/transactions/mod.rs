//! The transaction coordinator: Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`.
//!
//! Each transactional id has one durable record: its producer id and epoch
//! (bumped by every InitProducerId, which fences older instances), its
//! timeout, and its transaction's state with the partitions and consumer
//! groups it has touched:
//!
//! ```text
//! Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//!                                        │                PrepareAbort  ──markers──▶ CompleteAbort
//!                                        └─ timeout or InitProducerId: epoch bump, then PrepareAbort
//! ```
//!
//! The records live in the compacted internal topic `__transaction_state`,
//! as Kafka's: the id's partition is `hash(id) % partitions`, and in a
//! cluster the leader of that partition coordinates the id (it loads the
//! partition when it becomes leader, answering COORDINATOR_LOAD_IN_PROGRESS
//! meanwhile, and drops it when it stops, answering NOT_COORDINATOR).
//! A Prepare state is in the log (on a cluster, on the in-sync replicas)
//! before the first marker is written, so a crash between markers is
//! finished by the next start, or the next leader, writing the same
//! markers again (a second marker for a decided transaction changes
//! nothing). Offsets sent with TxnOffsetCommit wait in the record and reach
//! the group only when the transaction commits.
//!
//! What the coordinator does to partitions and groups goes through
//! [`TxnEffects`], which the broker implements with its ReplicaManager and
//! GroupCoordinator.
//!
//! `coordinator` holds the state machine, `state_topic` Kafka's record
//! format, `state_log` the records on the topic, `journal` the store of
//! earlier releases that a first start migrates.

mod coordinator;
mod journal;
mod state_log;
pub mod state_topic;

pub use coordinator::*;
