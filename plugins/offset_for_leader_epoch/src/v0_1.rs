//! OffsetForLeaderEpoch v0 and v1 (Kafka 4 removed them, KIP-896; brokers
//! of 2.0 and older sent them to their leader), rewritten to and from v2
//! by the SDK ([`gregor_sdk::legacy`]): without a current leader epoch (so
//! none is checked) nor a throttle time, and v0 answers no leader epoch.

use gregor_sdk::legacy::Ty::{Int16, Int32, Int64, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[all("topics", Structs(&[all("topic", String), all("partitions", Structs(&[
    all("partition", Int32), since(2, "current_leader_epoch", Int32).with_default(-1),
    all("leader_epoch", Int32),
]))]))];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[
    since(2, "throttle_time_ms", Int32),
    all("topics", Structs(&[all("topic", String), all("partitions", Structs(&[
        all("error_code", Int16), all("partition", Int32),
        since(1, "leader_epoch", Int32).with_default(-1), all("end_offset", Int64),
    ]))])),
];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy::new(2, Some(REQUEST), Some(RESPONSE));
