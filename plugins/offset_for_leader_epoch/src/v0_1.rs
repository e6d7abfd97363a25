//! OffsetForLeaderEpoch v0 and v1 (Kafka 4 removed them, KIP-896; brokers
//! of 2.0 and older sent them to their leader), rewritten to and from v2
//! by the SDK ([`gregor_sdk::legacy`]): without a current leader epoch (so
//! none is checked) nor a throttle time, and v0 answers no leader epoch.

use gregor_sdk::legacy::{Field, Legacy, Ty, LATEST};

const PARTITION: &[Field] = &[
    Field::new("partition", Ty::Int32, (0, LATEST)),
    Field::new("current_leader_epoch", Ty::Int32, (2, LATEST)).with_default(-1),
    Field::new("leader_epoch", Ty::Int32, (0, LATEST)),
];
const TOPIC: &[Field] = &[
    Field::new("topic", Ty::String, (0, LATEST)),
    Field::new("partitions", Ty::Structs(PARTITION), (0, LATEST)),
];
const REQUEST: &[Field] = &[Field::new("topics", Ty::Structs(TOPIC), (0, LATEST))];

const END_OFFSET: &[Field] = &[
    Field::new("error_code", Ty::Int16, (0, LATEST)),
    Field::new("partition", Ty::Int32, (0, LATEST)),
    Field::new("leader_epoch", Ty::Int32, (1, LATEST)).with_default(-1),
    Field::new("end_offset", Ty::Int64, (0, LATEST)),
];
const TOPIC_RESULT: &[Field] = &[
    Field::new("topic", Ty::String, (0, LATEST)),
    Field::new("partitions", Ty::Structs(END_OFFSET), (0, LATEST)),
];
const RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (2, LATEST)),
    Field::new("topics", Ty::Structs(TOPIC_RESULT), (0, LATEST)),
];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy {
    base: 2,
    request: Some(REQUEST),
    response: Some(RESPONSE),
};
