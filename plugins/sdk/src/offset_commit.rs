//! What OffsetCommit and TxnOffsetCommit share: Kafka checks both the same
//! way before storing a group's offsets (READ on each topic, asked once,
//! then the partition must exist) and answers every partition of the
//! request in its order, whether it failed a check or went to the store.
//! Only who stores the offsets (the group coordinator, or the transaction
//! holding them pending) and the group-level checks before differ, and
//! those stay in the handlers. The two messages' shapes (topics of
//! partitions with an offset, answered with a code each) are alike too:
//! [`CommitRequest`] reads and answers both, [`CommitResponse`] reads the
//! answers back (for the handlers' tests).

use kafka_protocol::messages::{offset_commit_response, txn_offset_commit_response};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use crate::authorize::allowed_names;
use crate::authz::{Operation, ResourceType};
use crate::groups::{opt_string, partition_counts, partition_error, OffsetCommit};

/// One code per partition, per topic, in request order.
pub type Codes = Vec<Vec<i16>>;

/// One topic of a commit request: its name and the offsets to store, in
/// request order.
pub struct TopicOffsets {
    pub name: String,
    pub offsets: Vec<OffsetCommit>,
}

/// An OffsetCommit or TxnOffsetCommit request.
pub trait CommitRequest {
    /// The response message.
    type Response;

    /// The request's topics and offsets, in request order.
    fn topics(&self) -> Vec<TopicOffsets>;

    /// The answer: each partition of the request with its code.
    fn answer(&self, codes: Codes) -> Self::Response;

    /// `code` for every partition of the request.
    fn same_code(&self, code: i16) -> Codes {
        let sizes = self.topics().into_iter().map(|topic| topic.offsets.len());
        sizes.map(|size| vec![code; size]).collect()
    }
}

/// An OffsetCommit or TxnOffsetCommit response, read back.
pub trait CommitResponse {
    /// Per topic, its name and each partition's (index, error code).
    fn codes_by_topic(&self) -> Vec<(String, Vec<(i32, i16)>)>;
}

/// Implements [`CommitRequest`] for a request and its response types, and
/// [`CommitResponse`] for the response.
macro_rules! commit_request {
    ($request:ty => $response:ty, $topic:ty, $partition:ty) => {
        impl CommitRequest for $request {
            type Response = $response;

            fn topics(&self) -> Vec<TopicOffsets> {
                let topics = self.topics.iter().map(|topic| TopicOffsets {
                    name: topic.name.to_string(),
                    offsets: topic
                        .partitions
                        .iter()
                        .map(|p| OffsetCommit {
                            topic: topic.name.to_string(),
                            partition: p.partition_index,
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata: opt_string(&p.committed_metadata),
                        })
                        .collect(),
                });
                topics.collect()
            }

            fn answer(&self, codes: Codes) -> $response {
                let topics = self.topics.iter().zip(codes).map(|(topic, codes)| {
                    let partitions = topic.partitions.iter().zip(codes).map(|(p, code)| {
                        <$partition>::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code)
                    });
                    <$topic>::default()
                        .with_name(topic.name.clone())
                        .with_partitions(partitions.collect())
                });
                <$response>::default().with_topics(topics.collect())
            }
        }

        impl CommitResponse for $response {
            fn codes_by_topic(&self) -> Vec<(String, Vec<(i32, i16)>)> {
                let partitions = |t: &$topic| {
                    let codes = t
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.error_code));
                    (t.name.to_string(), codes.collect())
                };
                self.topics.iter().map(partitions).collect()
            }
        }
    };
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

commit_request!(OffsetCommitRequest => OffsetCommitResponse,
    offset_commit_response::OffsetCommitResponseTopic,
    offset_commit_response::OffsetCommitResponsePartition);
commit_request!(TxnOffsetCommitRequest => TxnOffsetCommitResponse,
    txn_offset_commit_response::TxnOffsetCommitResponseTopic,
    txn_offset_commit_response::TxnOffsetCommitResponsePartition);
