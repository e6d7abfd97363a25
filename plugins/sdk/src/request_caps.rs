//! Kafka's caps on what one request may create, for handlers that apply
//! them to a request as a whole (the host checks them per call too, so a
//! handler that forgets cannot make the broker allocate without bound).
//!
//! Kafka's controller writes at most `MAX_RECORDS_PER_USER_OP` metadata
//! records for one user operation (a topic, each partition, each config,
//! ACL or quota entry is one) and CreateTopics may ask for at most
//! `MAX_PARTITIONS_PER_BATCH` partitions; over either the request is
//! refused with POLICY_VIOLATION.

use crate::KafkaError;

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`.
pub const MAX_PARTITIONS_PER_BATCH: usize = 10_000;

/// Kafka's POLICY_VIOLATION error code.
pub const POLICY_VIOLATION: i16 = 44;

/// Kafka's message when CreateTopics asks for too many partitions.
pub const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";

/// Kafka's message when an operation would write too many records.
pub const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";

/// Kafka's `Errors.POLICY_VIOLATION.message()` (what AlterClientQuotas
/// answers every entry with).
pub const POLICY_VIOLATION_MESSAGE: &str =
    "Request parameters do not satisfy the configured policy.";

/// POLICY_VIOLATION with `message`.
pub fn policy_violation(message: &str) -> KafkaError {
    KafkaError {
        code: POLICY_VIOLATION,
        message: Some(message.to_string()),
    }
}

/// The partitions a CreateTopics entry asks for, as Kafka's
/// `validateTotalNumberOfPartitions` counts them: manual assignments by
/// their number, `-1` as the broker's default, other non-positive counts
/// as none.
pub fn requested_partitions(num_partitions: i32, assignments: usize, default: i32) -> usize {
    if assignments > 0 {
        return assignments;
    }
    let count = if num_partitions == -1 {
        default
    } else {
        num_partitions
    };
    usize::try_from(count).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_counted_as_kafka_counts_them() {
        assert_eq!(requested_partitions(-1, 0, 4), 4);
        assert_eq!(requested_partitions(7, 0, 4), 7);
        assert_eq!(requested_partitions(0, 0, 4), 0);
        assert_eq!(requested_partitions(-5, 0, 4), 0);
        assert_eq!(requested_partitions(-1, 3, 4), 3);
        assert_eq!(requested_partitions(i32::MAX, 0, 4), i32::MAX as usize);
    }
}
