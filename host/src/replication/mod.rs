//! Data replication (DESIGN §11, Kafka's ISR protocol): followers fetch
//! from the leader; the leader tracks them, computes the high watermark,
//! answers acks=all once the ISR has a write, and asks the controller to
//! change the ISR.
//!
//! - [`isr`]: the rules, as pure functions.
//! - [`leader`]: the leader's per-partition state on the metadata image.
//! - [`alter`]: the AlterPartition requests the leader sends.
//! - [`image_source`]: the metadata image as the leader's partition source.

pub mod alter;
pub mod image_source;
pub mod isr;
pub mod leader;
