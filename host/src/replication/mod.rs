//! Data replication between brokers (DESIGN §11, Kafka's ISR protocol).
//!
//! The follower's side lives here: [`follower`] follows the metadata
//! image and turns this broker into the leader or a follower of each of
//! its partitions (Kafka's `ReplicaManager.applyDelta` with its
//! ReplicaFetcherManager), and [`fetcher`] is the replica fetcher of one
//! leader broker (Kafka's ReplicaFetcherThread over AbstractFetcherThread):
//! real Fetch requests to the leader's inter-broker listener, the
//! leader's batches appended verbatim, truncation of a diverging log by
//! leader epochs (KIP-101, KIP-279, KIP-320), and the leader's high
//! watermark recorded as this follower's.
//!
//! The storage side is in the log: `LogStore::append_replicated`,
//! `truncate_to` and the per-partition leader-epoch cache
//! (`log::epoch_cache`).

pub mod fetcher;
pub mod follower;
mod leader_channel;
pub mod truncation;
