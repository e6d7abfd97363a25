//! Fetch v0-3 (Kafka 4 removed them, KIP-896), rewritten to and from v4 by
//! the SDK ([`gregor_sdk::legacy`]). Their clients read the old message
//! formats: v0-1 magic v0, v2-3 magic v1 ([`magic_for`]), which the host
//! down-converts the stored batches to (`log.fetch-legacy-or-park`), as
//! Kafka 3.9 did. v0-2 have no `max_bytes` (Kafka's default, the largest
//! int32), none has an isolation level (read_uncommitted); v0 answers no
//! throttle time, and none the last stable offset or aborted transactions.

use gregor_sdk::legacy::Ty::{Bytes, Int16, Int32, Int64, Int8, String, Structs};
use gregor_sdk::legacy::{all, since, Field, Legacy};

/// The first version that reads record batches (magic v2).
pub const FIRST_V2_VERSION: i16 = 4;

#[rustfmt::skip]
const REQUEST: &[Field] = &[
    all("replica_id", Int32), all("max_wait_ms", Int32), all("min_bytes", Int32),
    since(3, "max_bytes", Int32).with_default(i32::MAX as i64),
    since(4, "isolation_level", Int8),
    all("topics", Structs(&[
        all("topic", String),
        all("partitions", Structs(&[
            all("partition", Int32), all("fetch_offset", Int64), all("partition_max_bytes", Int32),
        ])),
    ])),
];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[
    since(1, "throttle_time_ms", Int32),
    all("responses", Structs(&[
        all("topic", String),
        all("partitions", Structs(&[
            all("partition_index", Int32), all("error_code", Int16), all("high_watermark", Int64),
            since(4, "last_stable_offset", Int64).with_default(-1),
            since(4, "aborted_transactions", Structs(&[
                all("producer_id", Int64), all("first_offset", Int64),
            ])).with_default(-1),
            all("records", Bytes),
        ])),
    ])),
];

/// v0-3 through v4.
pub const LEGACY: Legacy = Legacy::new(4, Some(REQUEST), Some(RESPONSE));

/// The message format a fetch version reads, as Kafka's `maybeConvertFetchedData`
/// picks it: v0-1 magic v0, v2-3 magic v1; none (v2 batches as stored) from v4.
pub fn magic_for(version: i16) -> Option<i8> {
    match version {
        ..=1 => Some(0),
        2..=3 => Some(1),
        _ => None,
    }
}
