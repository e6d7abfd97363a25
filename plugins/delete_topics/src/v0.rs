//! DeleteTopics v0 (Kafka 4 removed it, KIP-896): v1's request, answered
//! without v1's throttle time (the SDK rewrites v1's answer,
//! [`gregor_sdk::legacy`]).

use gregor_sdk::legacy::Ty::{Int16, Int32, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

#[rustfmt::skip]
const RESPONSE: &[Field] = &[
    since(1, "throttle_time_ms", Int32),
    all("responses", Structs(&[all("name", String), all("error_code", Int16)])),
];

/// v0 through v1.
pub const LEGACY: Legacy = Legacy::new(1, None, Some(RESPONSE));
