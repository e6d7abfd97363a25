//! DeleteTopics v0 (Kafka 4 removed it, KIP-896): v1's request, answered
//! without v1's throttle time (the SDK rewrites v1's answer,
//! [`gregor_sdk::legacy`]).

use gregor_sdk::legacy::{Field, Legacy, Ty, LATEST};

const RESULT: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("error_code", Ty::Int16, (0, LATEST)),
];
const RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (1, LATEST)),
    Field::new("responses", Ty::Structs(RESULT), (0, LATEST)),
];

/// v0 through v1.
pub const LEGACY: Legacy = Legacy {
    base: 1,
    request: None,
    response: Some(RESPONSE),
};
