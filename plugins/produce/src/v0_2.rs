//! Produce v0-2 (Kafka 4 removed them, KIP-896), rewritten to and from v3
//! by the SDK ([`gregor_sdk::legacy`]). They carry message sets of the old
//! formats (magic v0/v1), which the host up-converts to a v2 batch when it
//! appends them, as Kafka 3.9 did. v0-2 have no transactional id (null in
//! v3); v0 answers no throttle time, v0-1 no log append time.

use gregor_sdk::legacy::Ty::{Bytes, Int16, Int32, Int64, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[
    since(3, "transactional_id", String).with_default(-1),
    all("acks", Int16), all("timeout_ms", Int32),
    all("topic_data", Structs(&[
        all("name", String),
        all("partition_data", Structs(&[all("index", Int32), all("records", Bytes)])),
    ])),
];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[
    all("responses", Structs(&[
        all("name", String),
        all("partition_responses", Structs(&[
            all("index", Int32), all("error_code", Int16), all("base_offset", Int64),
            since(2, "log_append_time_ms", Int64).with_default(-1),
        ])),
    ])),
    since(1, "throttle_time_ms", Int32),
];

/// v0-2 through v3.
pub const LEGACY: Legacy = Legacy::new(3, Some(REQUEST), Some(RESPONSE));
