//! Conversions between Kafka's topic ids and the contract's `uuid` record,
//! between Kafka's string type and Rust strings, a topic's name by id, and
//! which topic names are Kafka's own.

use kafka_protocol::protocol::StrBytes;

use crate::Uuid;

/// The contract's uuid as the `kafka-protocol` type.
pub fn to_kafka_uuid(id: Uuid) -> uuid::Uuid {
    uuid::Uuid::from_u64_pair(id.high, id.low)
}

/// A `kafka-protocol` uuid as the contract's record.
pub fn from_kafka_uuid(id: uuid::Uuid) -> Uuid {
    let (high, low) = id.as_u64_pair();
    Uuid { high, low }
}

/// A Kafka string from a Rust string.
pub fn str_bytes(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// The name of the topic with this id, for requests that name topics by id
/// (KIP-516: Fetch v13+, Produce v13+); none if no topic has the id, which
/// Kafka answers with UNKNOWN_TOPIC_ID.
pub fn topic_name_by_id(id: uuid::Uuid) -> Option<String> {
    crate::metadata::topic_by_id(from_kafka_uuid(id)).map(|topic| topic.name)
}

/// Topics Kafka itself manages (`Topic.isInternal`).
pub const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

/// Is this one of Kafka's internal topics?
pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}
