//! OffsetForLeaderEpoch (ApiKey 23): where a leader epoch ends in each
//! partition's log, as Kafka's `KafkaApis.handleOffsetForLeaderEpochRequest`
//! and `LeaderEpochFileCache.endOffsetFor`. Consumers use it after a leader
//! change to detect log truncation (KIP-320).
//!
//! - Versions 0-4. Kafka 4 no longer serves v0-1 (KIP-896); Gregor serves
//!   them through v2 (see [`v0_1`]).
//! - CLUSTER_ACTION on the Cluster allows every topic; otherwise DESCRIBE on
//!   each Topic, and unauthorized partitions get TOPIC_AUTHORIZATION_FAILED.
//! - Leader epochs on a single node: every partition has had one leader
//!   since it was created, in epoch 0 (the epoch every stored batch
//!   carries, and what Metadata reports), starting at the log start offset.
//!   So, as Kafka's epoch cache answers with one entry `(0, log start)`:
//!   epoch 0 ends at the log end offset; a later epoch is unknown (-1, -1);
//!   -1 is undefined (-1, -1); an earlier epoch ends where epoch 0 starts.
//! - A `current_leader_epoch` other than -1 is checked against epoch 0:
//!   newer is UNKNOWN_LEADER_EPOCH, older is FENCED_LEADER_EPOCH.
//! - Error response (a trap or timeout): every partition with the error and
//!   an undefined epoch and offset, as Kafka's
//!   `OffsetsForLeaderEpochRequest.getErrorResponse`.

mod v0_1;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult as TopicResult,
};
use gregor_sdk::kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};
use gregor_sdk::partitions::{self, allowed_topics, TopicAnswer};
use gregor_sdk::AnswerError;
use gregor_sdk::{log, Handler, Reply, RequestContext, ResponseError, NONE};

/// The only leader epoch a single node's partitions have.
const LEADER_EPOCH: i32 = 0;
/// Kafka's NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH.
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_OFFSET: i64 = -1;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const READ_UNCOMMITTED: i8 = 0;

struct OffsetForLeaderEpoch;

impl Handler for OffsetForLeaderEpoch {
    gregor_sdk::api!(OffsetForLeaderEpochRequest, 0..=4);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0_1::LEGACY);

    fn handle(
        _ctx: &RequestContext,
        request: &OffsetForLeaderEpochRequest,
    ) -> Reply<OffsetForLeaderEpochResponse> {
        let all_allowed = cluster_allowed(Operation::ClusterAction);
        let allowed = (!all_allowed)
            .then(|| allowed_topics::<TopicResult>(Operation::Describe, &request.topics));
        let topics = partitions::answer_allowed::<TopicResult>(
            &request.topics,
            |name| {
                allowed
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(name))
            },
            ResponseError::TopicAuthorizationFailed.code(),
            |topic, partition| end_offset(topic.topic.as_str(), partition),
        );
        OffsetForLeaderEpochResponse::default()
            .with_topics(topics)
            .into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error and an
    /// undefined epoch and offset.
    fn failed(
        _: &RequestContext,
        request: &OffsetForLeaderEpochRequest,
        error_code: i16,
    ) -> OffsetForLeaderEpochResponse {
        OffsetForLeaderEpochResponse::default()
            .with_topics(partitions::failed(&request.topics, error_code))
    }
}

fn end_offset(topic: &str, partition: &OffsetForLeaderPartition) -> EpochEndOffset {
    let index = partition.partition;
    let error = |error_code| TopicResult::error(partition, error_code);
    let current = partition.current_leader_epoch;
    if current != UNDEFINED_EPOCH {
        if current > LEADER_EPOCH {
            return error(ResponseError::UnknownLeaderEpoch.code());
        }
        if current < LEADER_EPOCH {
            return error(ResponseError::FencedLeaderEpoch.code());
        }
    }
    let end = log::list_offset(topic, index, LATEST, READ_UNCOMMITTED);
    if end.error.error_code() != NONE {
        return error(end.error.error_code());
    }
    let (epoch, offset) = match epoch_end(partition.leader_epoch, end.offset) {
        EpochEnd::Known(epoch, offset) => (epoch, offset),
        EpochEnd::StartOfFirstEpoch(epoch) => {
            let start = log::list_offset(topic, index, EARLIEST, READ_UNCOMMITTED);
            (
                epoch,
                if start.error.error_code() == NONE {
                    start.offset
                } else {
                    0
                },
            )
        }
    };
    EpochEndOffset::default()
        .with_partition(index)
        .with_error_code(NONE)
        .with_leader_epoch(epoch)
        .with_end_offset(offset)
}

#[derive(Debug, PartialEq, Eq)]
enum EpochEnd {
    Known(i32, i64),
    /// An epoch before the first one: it ends where the first one starts.
    StartOfFirstEpoch(i32),
}

/// Kafka's `LeaderEpochFileCache.endOffsetFor` over the single entry
/// (epoch 0, log start offset).
fn epoch_end(requested: i32, log_end_offset: i64) -> EpochEnd {
    if requested == UNDEFINED_EPOCH || requested > LEADER_EPOCH {
        EpochEnd::Known(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    } else if requested == LEADER_EPOCH {
        EpochEnd::Known(LEADER_EPOCH, log_end_offset)
    } else {
        EpochEnd::StartOfFirstEpoch(requested)
    }
}

gregor_sdk::export_handler!(OffsetForLeaderEpoch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_end_as_kafkas_cache_says() {
        assert_eq!(epoch_end(0, 42), EpochEnd::Known(0, 42));
        assert_eq!(epoch_end(1, 42), EpochEnd::Known(-1, -1));
        assert_eq!(epoch_end(-1, 42), EpochEnd::Known(-1, -1));
        assert_eq!(epoch_end(-3, 42), EpochEnd::StartOfFirstEpoch(-3));
    }

    #[test]
    fn encodes_for_every_served_version() {
        use gregor_sdk::ids::str_bytes;
        use gregor_sdk::kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic;
        use gregor_sdk::testing::assert_encodes_for_served_versions;
        let topic = OffsetForLeaderTopic::default()
            .with_topic(str_bytes("a").into())
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(1)
                .with_leader_epoch(0)]);
        let fenced = partitions::failed(&[topic.clone()], ResponseError::FencedLeaderEpoch.code());
        assert_encodes_for_served_versions::<OffsetForLeaderEpoch>(
            &[OffsetForLeaderEpochRequest::default().with_topics(vec![topic])],
            &[OffsetForLeaderEpochResponse::default().with_topics(fenced)],
        );
    }
}
