//! OffsetForLeaderEpoch (ApiKey 23): where a leader epoch ends in each
//! partition's log, as Kafka's `KafkaApis.handleOffsetForLeaderEpochRequest`
//! and `LeaderEpochFileCache.endOffsetFor`. Consumers use it after a leader
//! change to detect log truncation (KIP-320).
//!
//! - Versions 0-4. Kafka 4 no longer serves v0-1 (KIP-896); Gregor serves
//!   them through v2 (see [`v0_1`]).
//! - CLUSTER_ACTION on the Cluster allows every topic; otherwise DESCRIBE on
//!   each Topic, and unauthorized partitions get TOPIC_AUTHORIZATION_FAILED.
//! - Each partition's leader answers from its leader-epoch cache through
//!   `log.offset-for-leader-epoch` (the host's `LeaderEpochFileCache`):
//!   the latest epoch ends at the log end offset, an earlier one where the
//!   next one starts, an epoch between known ones is answered with the one
//!   below it, an epoch below every known one ends where the first starts,
//!   and -1 or a later epoch is unknown (-1, -1). On a single node every
//!   partition is in epoch 0 from its start (what Metadata reports).
//! - A `current_leader_epoch` other than -1 is checked against the
//!   leader's epoch: newer is UNKNOWN_LEADER_EPOCH, older is
//!   FENCED_LEADER_EPOCH; a broker that does not lead the partition
//!   answers NOT_LEADER_OR_FOLLOWER.
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
    let answer = log::offset_for_leader_epoch(
        topic,
        index,
        partition.current_leader_epoch,
        partition.leader_epoch,
    );
    let error_code = answer.error.error_code();
    if error_code != NONE {
        return TopicResult::error(partition, error_code);
    }
    EpochEndOffset::default()
        .with_partition(index)
        .with_error_code(NONE)
        .with_leader_epoch(answer.leader_epoch)
        .with_end_offset(answer.end_offset)
}

gregor_sdk::export_handler!(OffsetForLeaderEpoch);

#[cfg(test)]
mod tests {
    use super::*;

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
