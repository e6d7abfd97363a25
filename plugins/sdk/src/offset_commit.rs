//! What OffsetCommit and TxnOffsetCommit share: Kafka checks both the same
//! way before storing a group's offsets (READ on each topic, asked once,
//! then the partition must exist) and answers every partition of the
//! request in its order, whether it failed a check or went to the store.
//! Only who stores the offsets (the group coordinator, or the transaction
//! holding them pending) and the group-level checks before differ, and
//! those stay in the handlers.

use crate::authorize::allowed_names;
use crate::authz::{Operation, ResourceType};
use crate::groups::{partition_counts, partition_error, OffsetCommit};

/// One code per partition, per topic, in request order.
pub type Codes = Vec<Vec<i16>>;

/// One topic of a commit request: its name and the offsets to store, in
/// request order.
pub struct TopicOffsets {
    pub name: String,
    pub offsets: Vec<OffsetCommit>,
}

/// `code` for every partition of topics of these sizes.
pub fn same_code(sizes: impl IntoIterator<Item = usize>, code: i16) -> Codes {
    sizes.into_iter().map(|size| vec![code; size]).collect()
}

/// Checks every partition, hands the ones that pass to `store` (not
/// called when none does), which answers one code each in the order given,
/// and merges its codes back into request order. A code `store` leaves out
/// is UNKNOWN_SERVER_ERROR: the client must not read it as success.
pub fn commit(topics: Vec<TopicOffsets>, store: impl FnOnce(&[OffsetCommit]) -> Vec<i16>) -> Codes {
    let names = || topics.iter().map(|topic| topic.name.as_str());
    let authorized = allowed_names(Operation::Read, ResourceType::Topic, names());
    let counts = partition_counts(names());
    let checks: Vec<Vec<Option<i16>>> = topics
        .iter()
        .map(|topic| {
            let check =
                |o: &OffsetCommit| partition_error(&authorized, &counts, &o.topic, o.partition);
            topic.offsets.iter().map(check).collect()
        })
        .collect();
    let passed: Vec<OffsetCommit> = topics
        .into_iter()
        .zip(&checks)
        .flat_map(|(topic, checks)| topic.offsets.into_iter().zip(checks))
        .filter(|(_, check)| check.is_none())
        .map(|(offset, _)| offset)
        .collect();
    let stored = if passed.is_empty() {
        Vec::new()
    } else {
        store(&passed)
    };
    let mut stored = stored.into_iter();
    let unknown = crate::ResponseError::UnknownServerError.code();
    checks
        .into_iter()
        .map(|topic| {
            let code =
                |check: Option<i16>| check.unwrap_or_else(|| stored.next().unwrap_or(unknown));
            topic.into_iter().map(code).collect()
        })
        .collect()
}
