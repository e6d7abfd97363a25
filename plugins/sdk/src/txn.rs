//! What the transaction handlers share: the host's `txn` interface (the
//! transaction coordinator and producer state), the error translations
//! KafkaApis makes for older clients, and the per-topic shape Kafka's
//! transaction responses take from the host's flat partition lists.

use std::collections::HashMap;

pub use crate::bindings::gregor::broker::txn::*;
// Batch A (groups, offsets, transactions).
#[cfg(not(target_arch = "wasm32"))]
pub use crate::fake::imports::txn_offset_commit;
use crate::{AnswerError, ResponseError};

/// Kafka's transaction state names (`TransactionState.name`), the ones a
/// ListTransactions state filter may name.
pub const STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// KIP-588: clients older than `first_fenced_version` of an API do not know
/// PRODUCER_FENCED, so KafkaApis answers them INVALID_PRODUCER_EPOCH, which
/// they handle the same way. Other codes pass through.
pub fn fenced_for_version(error_code: i16, version: i16, first_fenced_version: i16) -> i16 {
    if version < first_fenced_version && error_code == ResponseError::ProducerFenced.code() {
        ResponseError::InvalidProducerEpoch.code()
    } else {
        error_code
    }
}

/// The host's per-partition answers, looked up by partition.
pub struct PartitionCodes(HashMap<String, HashMap<i32, i16>>);

impl PartitionCodes {
    pub fn new(results: impl IntoIterator<Item = TxnPartitionResult>) -> Self {
        let mut codes: HashMap<String, HashMap<i32, i16>> = HashMap::new();
        for result in results {
            codes
                .entry(result.topic)
                .or_default()
                .insert(result.partition, result.error.error_code());
        }
        Self(codes)
    }

    /// The partition's code; UNKNOWN_SERVER_ERROR if the host left it out
    /// (it answers every partition it is given, so that is a host bug, and
    /// the client must not read it as success).
    pub fn get(&self, topic: &str, partition: i32) -> i16 {
        self.0
            .get(topic)
            .and_then(|partitions| partitions.get(&partition))
            .copied()
            .unwrap_or(ResponseError::UnknownServerError.code())
    }
}

/// Groups `(topic, item)` pairs by topic, topics in order of first
/// appearance and items in order within each: the shape of Kafka's
/// per-topic response arrays.
pub fn by_topic<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut grouped: Vec<(String, Vec<T>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (topic, item) in items {
        match index.get(&topic) {
            Some(&i) => grouped[i].1.push(item),
            None => {
                index.insert(topic.clone(), grouped.len());
                grouped.push((topic, vec![item]));
            }
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_is_translated_only_for_older_versions() {
        let fenced = ResponseError::ProducerFenced.code();
        let old = ResponseError::InvalidProducerEpoch.code();
        assert_eq!(fenced_for_version(fenced, 1, 2), old);
        assert_eq!(fenced_for_version(fenced, 2, 2), fenced);
        assert_eq!(fenced_for_version(0, 0, 2), 0);
        let concurrent = ResponseError::ConcurrentTransactions.code();
        assert_eq!(fenced_for_version(concurrent, 0, 2), concurrent);
    }

    #[test]
    fn by_topic_keeps_first_appearance_order() {
        let grouped = by_topic([
            ("b".to_string(), 1),
            ("a".to_string(), 2),
            ("b".to_string(), 3),
        ]);
        assert_eq!(
            grouped,
            vec![("b".to_string(), vec![1, 3]), ("a".to_string(), vec![2])]
        );
    }

    #[test]
    fn missing_partitions_are_not_success() {
        let codes = PartitionCodes::new([TxnPartitionResult {
            topic: "t".into(),
            partition: 0,
            error: None,
        }]);
        assert_eq!(codes.get("t", 0), 0);
        let unknown = ResponseError::UnknownServerError.code();
        assert_eq!(codes.get("t", 1), unknown);
        assert_eq!(codes.get("u", 0), unknown);
    }
}
