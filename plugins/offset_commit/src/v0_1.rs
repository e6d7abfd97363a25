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

use gregor_sdk::legacy::{Field, Legacy, Ty, LATEST};

const PARTITION: &[Field] = &[
    Field::new("partition_index", Ty::Int32, (0, LATEST)),
    Field::new("committed_offset", Ty::Int64, (0, LATEST)),
    Field::new("commit_timestamp", Ty::Int64, (1, 1)).with_default(-1),
    Field::new("committed_metadata", Ty::String, (0, LATEST)),
];
const TOPIC: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("partitions", Ty::Structs(PARTITION), (0, LATEST)),
];
const REQUEST: &[Field] = &[
    Field::new("group_id", Ty::String, (0, LATEST)),
    Field::new("generation_id_or_member_epoch", Ty::Int32, (1, LATEST)).with_default(-1),
    Field::new("member_id", Ty::String, (1, LATEST)),
    Field::new("retention_time_ms", Ty::Int64, (2, 4)).with_default(-1),
    Field::new("topics", Ty::Structs(TOPIC), (0, LATEST)),
];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy {
    base: 2,
    request: Some(REQUEST),
    response: None,
};
