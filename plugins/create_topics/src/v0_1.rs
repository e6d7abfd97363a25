//! CreateTopics v0 and v1 (Kafka 4 removed them, KIP-896), rewritten to
//! and from v2 by the SDK ([`gregor_sdk::legacy`]). v0 has no
//! `validate_only` (it creates) and answers no error message; neither
//! answers a throttle time (the one v2 would carry is not sent). v1's
//! request is v2's.

use gregor_sdk::legacy::Ty::{Array, Bool, Int16, Int32, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[
    all("topics", Structs(&[
        all("name", String), all("num_partitions", Int32), all("replication_factor", Int16),
        all("assignments", Structs(&[all("partition_index", Int32), all("broker_ids", Array(&Int32))])),
        all("configs", Structs(&[all("name", String), all("value", String)])),
    ])),
    all("timeout_ms", Int32), since(1, "validate_only", Bool),
];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[since(2, "throttle_time_ms", Int32), all("topics", Structs(&[
    all("name", String), all("error_code", Int16), since(1, "error_message", String).with_default(-1),
]))];

/// v0 and v1 through v2.
pub const LEGACY: Legacy = Legacy::new(2, Some(REQUEST), Some(RESPONSE));
