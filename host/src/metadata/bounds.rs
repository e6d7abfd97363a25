//! How much one request may create, checked before anything is created or
//! allocated in proportion to a number the request carries.
//!
//! Kafka's controller caps every user operation at
//! `QuorumController.MAX_RECORDS_PER_USER_OP` metadata records (a topic,
//! each partition, each config, ACL or quota entry is one record) and
//! CreateTopics at `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`
//! partitions; a request over either is refused with POLICY_VIOLATION.
//! Without these caps one CreateTopics with `num_partitions` = 2^31-1
//! (even `validate_only`) made the host describe two billion partitions
//! and abort. The host services check the caps per call, so every plugin
//! is protected; the handler plugins also apply them to the request as a
//! whole and report them per topic or element as Kafka does.

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`: the most
/// partitions one CreateTopics request may ask for.
pub const MAX_PARTITIONS_PER_BATCH: usize = 10_000;

/// Kafka's message when CreateTopics asks for more than
/// [`MAX_PARTITIONS_PER_BATCH`] partitions.
pub const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";

/// Kafka's message when an operation would write more than
/// [`MAX_RECORDS_PER_USER_OP`] records (`EventHandlerExceptionInfo` for a
/// `BoundedListTooLongException`).
pub const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";

/// Kafka's message when DeleteAcls would remove more than
/// [`MAX_RECORDS_PER_USER_OP`] bindings (`AclControlManager`).
pub fn too_many_acl_deletions() -> String {
    format!("Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.")
}

/// Whether `records` more records fit in one operation.
pub fn records_fit(records: usize) -> bool {
    records <= MAX_RECORDS_PER_USER_OP
}

/// The partitions a CreateTopics entry asks for as Kafka's
/// `validateTotalNumberOfPartitions` counts them: `-1` is the broker's
/// default, other non-positive counts ask for none.
pub fn requested_partitions(num_partitions: i32, default_partitions: i32) -> usize {
    let count = if num_partitions == -1 {
        default_partitions
    } else {
        num_partitions
    };
    usize::try_from(count).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_partitions_count_as_kafka_does() {
        assert_eq!(requested_partitions(-1, 3), 3);
        assert_eq!(requested_partitions(0, 3), 0);
        assert_eq!(requested_partitions(-7, 3), 0);
        assert_eq!(requested_partitions(i32::MAX, 3), i32::MAX as usize);
        assert!(records_fit(MAX_RECORDS_PER_USER_OP));
        assert!(!records_fit(MAX_RECORDS_PER_USER_OP + 1));
    }
}
