//! Data replication between brokers (DESIGN §11, Kafka's ISR protocol).
//!
//! The leader's side: it tracks its followers, computes the high
//! watermark, answers acks=all once the ISR has a write, and asks the
//! controller to change the ISR.
//! - [`isr`]: the rules, as pure functions.
//! - [`leader`]: the leader's per-partition state on the metadata image.
//! - [`alter`]: the AlterPartition requests the leader sends.
//! - [`image_source`]: the metadata image as the leader's partition source.
//!
//! The follower's side: [`follower`] follows the metadata image and turns
//! this broker into the leader or a follower of each of its partitions
//! (Kafka's `ReplicaManager.applyDelta` with its ReplicaFetcherManager),
//! and [`fetcher`] is the replica fetcher of one leader broker (Kafka's
//! ReplicaFetcherThread over AbstractFetcherThread): real Fetch requests
//! to the leader's inter-broker listener, the leader's batches appended
//! verbatim, truncation of a diverging log by leader epochs (KIP-101,
//! KIP-279, KIP-320, see [`truncation`]), and the leader's high watermark
//! recorded as this follower's.
//!
//! The storage side is in the log: `LogStore::append_replicated`,
//! `truncate_to` and the per-partition leader-epoch cache
//! (`log::epoch_cache`).

pub mod alter;
pub mod fetcher;
pub mod follower;
pub mod image_source;
pub mod isr;
pub mod leader;
pub(crate) mod leader_channel;
pub mod truncation;
