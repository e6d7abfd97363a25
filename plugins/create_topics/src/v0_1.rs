//! CreateTopics v0 and v1 (Kafka 4 removed them, KIP-896), rewritten to
//! and from v2 by the SDK ([`gregor_sdk::legacy`]). v0 has no
//! `validate_only` (it creates) and answers no error message; neither
//! answers a throttle time (the request quota's throttle still applies
//! through the host). v1's request is v2's.

use gregor_sdk::legacy::{Field, Legacy, Ty, LATEST};

const REQUEST: &[Field] = &[
    // The topics (name, partitions, replication factor, assignments,
    // configs) are the same in every version up to v4: copied as one.
    Field::new("topics", Ty::Structs(TOPIC), (0, LATEST)),
    Field::new("timeout_ms", Ty::Int32, (0, LATEST)),
    Field::new("validate_only", Ty::Bool, (1, LATEST)),
];
const TOPIC: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("num_partitions", Ty::Int32, (0, LATEST)),
    Field::new("replication_factor", Ty::Int16, (0, LATEST)),
    Field::new("assignments", Ty::Structs(ASSIGNMENT), (0, LATEST)),
    Field::new("configs", Ty::Structs(CONFIG), (0, LATEST)),
];
const ASSIGNMENT: &[Field] = &[
    Field::new("partition_index", Ty::Int32, (0, LATEST)),
    Field::new("broker_ids", Ty::Array(&Ty::Int32), (0, LATEST)),
];
const CONFIG: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("value", Ty::String, (0, LATEST)),
];

const RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (2, LATEST)),
    Field::new("topics", Ty::Structs(RESULT), (0, LATEST)),
];
const RESULT: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("error_code", Ty::Int16, (0, LATEST)),
    Field::new("error_message", Ty::String, (1, LATEST)).with_default(-1),
];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy {
    base: 2,
    request: Some(REQUEST),
    response: Some(RESPONSE),
};
