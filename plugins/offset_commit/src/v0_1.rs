//! OffsetCommit v0 and v1 (Kafka 4 removed them, KIP-896), rewritten to v2
//! by the SDK ([`gregor_sdk::legacy`]); the answer is v2's, byte for byte.
//!
//! - v0 carries no generation or member: Kafka 3.9 stored its offsets in
//!   ZooKeeper (a KRaft broker refused it). Gregor commits them to the
//!   group coordinator as v1-9 do with generation -1, the commit of a
//!   consumer without group management (refused while the group has
//!   members, as for any such commit).
//! - v1's per-partition commit timestamp is read and not used: Kafka 3.9
//!   counted the offset's expiry from it; Gregor's offsets expire from the
//!   time the broker stored them, as from v2.

use gregor_sdk::legacy::Ty::{Int32, Int64, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[
    all("group_id", String),
    since(1, "generation_id_or_member_epoch", Int32).with_default(-1), since(1, "member_id", String),
    Field::new("retention_time_ms", Int64, (2, 4)).with_default(-1),
    all("topics", Structs(&[all("name", String), all("partitions", Structs(&[
        all("partition_index", Int32), all("committed_offset", Int64),
        Field::new("commit_timestamp", Int64, (1, 1)).with_default(-1), all("committed_metadata", String),
    ]))])),
];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy::new(2, Some(REQUEST), None);
