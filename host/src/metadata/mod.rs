//! Cluster metadata owned by the host: topics, their partitions and configs
//! (and later ACLs, credentials, group offsets, producer and transaction
//! state), persisted crash-safely apart from the partition logs
//! (DESIGN.md §6).

pub mod assignment;
pub mod bounds;
pub mod broker_config;
pub mod dynamic;
pub mod store;
pub mod topic_config;
pub mod topics;
pub mod view;
