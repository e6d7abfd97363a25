//! The transaction coordinator: Kafka's `TransactionCoordinator` and
//! `TransactionStateManager` for a single node.
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
//! A Prepare state is durable before the first marker is written, so a
//! crash between markers is finished on the next start by writing the same
//! markers again (a second marker for a decided transaction changes
//! nothing). Offsets sent with TxnOffsetCommit wait in the record and reach
//! the group only when the transaction commits.
//!
//! What the coordinator does to partitions and groups goes through
//! [`TxnEffects`], which the broker implements with its ReplicaManager and
//! GroupCoordinator.
//!
//! `coordinator` holds the state machine, `journal` its durable records.

mod coordinator;
mod journal;

pub use coordinator::*;
