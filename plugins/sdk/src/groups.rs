//! What the consumer-group handlers share: the host's `groups` interface
//! (the group coordinator), the checks KafkaApis makes before handing a
//! request to the coordinator, and conversions between Kafka's strings and
//! the contract's.

use std::collections::HashMap;

use kafka_protocol::protocol::StrBytes;

use crate::authorize::{is_allowed, Allowed};
use crate::authz::{Operation, ResourceType};
pub use crate::bindings::gregor::broker::groups::*;
#[cfg(not(target_arch = "wasm32"))]
pub use crate::fake::imports::{delete_groups, heartbeat, list_groups};
// Batch A (groups, offsets, transactions).
#[cfg(not(target_arch = "wasm32"))]
pub use crate::fake::imports::commit_offsets;
use crate::ResponseError;

/// Is `operation` on the group allowed for this request's principal?
pub fn group_allowed(operation: Operation, group_id: &str) -> bool {
    is_allowed(operation, ResourceType::Group, group_id)
}

/// The partition counts of the named topics that exist (asked once per
/// topic), for the UNKNOWN_TOPIC_OR_PARTITION checks of OffsetCommit,
/// OffsetDelete and the transaction APIs.
pub fn partition_counts<'a>(topics: impl IntoIterator<Item = &'a str>) -> HashMap<String, i32> {
    let mut counts = HashMap::new();
    for topic in topics {
        if counts.contains_key(topic) {
            continue;
        }
        if let Some(info) = crate::metadata::topic_by_name(topic) {
            counts.insert(topic.to_string(), info.partitions.len() as i32);
        }
    }
    counts
}

/// Kafka's per-partition check before a group or transaction operation on
/// a topic: the operation `authorized` answers (READ for offsets, WRITE for
/// AddPartitionsToTxn) must be allowed (TOPIC_AUTHORIZATION_FAILED), then
/// the topic and partition must exist (UNKNOWN_TOPIC_OR_PARTITION). None
/// when the partition may go to the coordinator.
pub fn partition_error(
    authorized: &Allowed,
    counts: &HashMap<String, i32>,
    topic: &str,
    partition: i32,
) -> Option<i16> {
    if !authorized.contains(topic) {
        return Some(ResponseError::TopicAuthorizationFailed.code());
    }
    match counts.get(topic) {
        Some(count) if (0..*count).contains(&partition) => None,
        _ => Some(ResponseError::UnknownTopicOrPartition.code()),
    }
}

/// An optional Kafka string as an optional Rust string.
pub fn opt_string(value: &Option<StrBytes>) -> Option<String> {
    value.as_ref().map(|s| s.to_string())
}

/// An optional Rust string as an optional Kafka string.
pub fn opt_str_bytes(value: Option<String>) -> Option<StrBytes> {
    value.map(StrBytes::from_string)
}
