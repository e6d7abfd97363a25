//! ListOffsets (ApiKey 2): the offset for a timestamp, or the earliest /
//! latest / max-timestamp offset, of each partition, as Kafka's
//! `KafkaApis.handleListOffsetRequest` (v1 and above) and
//! `ReplicaManager.fetchOffset`.
//!
//! - Versions 0-10. Kafka 4 no longer serves v0 (KIP-896); Gregor does, for
//!   Kafka 3.x-era clients, through v1 (see [`v0`]).
//! - DESCRIBE on each Topic, asked once for the whole request; unauthorized
//!   partitions get TOPIC_AUTHORIZATION_FAILED.
//! - A partition named twice in a request is INVALID_REQUEST (each time), and
//!   a special timestamp newer than the request version is
//!   UNSUPPORTED_VERSION: -1 latest and -2 earliest from v0, -3 max timestamp
//!   from v7, -4 earliest local from v8, -5 latest tiered from v9.
//! - Everything else goes to the host's `log.list-offset` with the request's
//!   isolation level. A found offset carries the leader epoch (v4+): always 0
//!   on our single node, whose partitions never change leader.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error, offset and
//!   timestamp -1.

use gregor_sdk::AnswerError;
use std::collections::HashSet;

mod v0;

use gregor_sdk::authz::Operation;
use gregor_sdk::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use gregor_sdk::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse as PartitionResponse, ListOffsetsTopicResponse as TopicResponse,
};
use gregor_sdk::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use gregor_sdk::legacy::Legacy;
use gregor_sdk::log::{self, OffsetAnswer};
use gregor_sdk::partitions::{self, allowed_topics, TopicAnswer};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

/// The leader epoch of every partition on a single node.
const LEADER_EPOCH: i32 = 0;

struct ListOffsets;

impl Handler for ListOffsets {
    gregor_sdk::api!(ListOffsetsRequest, 0..=10);
    const LEGACY: Option<Legacy> = Some(v0::LEGACY);

    fn handle(ctx: &RequestContext, request: &ListOffsetsRequest) -> Reply<ListOffsetsResponse> {
        let version = ctx.api_version;
        let authorized = allowed_topics::<TopicResponse>(Operation::Describe, &request.topics);
        let duplicates = duplicate_partitions(&request.topics);
        let topics = partitions::answer_allowed::<TopicResponse>(
            &request.topics,
            |name| authorized.contains(name),
            ResponseError::TopicAuthorizationFailed.code(),
            |topic, partition| {
                let (name, timestamp) = (topic.name.as_str(), partition.timestamp);
                let index = partition.partition_index;
                if duplicates.contains(&(name, index)) {
                    TopicResponse::error(partition, ResponseError::InvalidRequest.code())
                } else if !timestamp_supported(timestamp, version) {
                    TopicResponse::error(partition, ResponseError::UnsupportedVersion.code())
                } else {
                    let answer = log::list_offset(name, index, timestamp, request.isolation_level);
                    partition_answer(index, version, answer)
                }
            },
        );
        ListOffsetsResponse::default().with_topics(topics).into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error, offset
    /// and timestamp -1.
    fn failed(
        _: &RequestContext,
        request: &ListOffsetsRequest,
        error_code: i16,
    ) -> ListOffsetsResponse {
        ListOffsetsResponse::default().with_topics(partitions::failed(&request.topics, error_code))
    }
}

/// The partitions a request names more than once, as Kafka's
/// `ListOffsetsRequest.duplicatePartitions`.
fn duplicate_partitions(topics: &[ListOffsetsTopic]) -> HashSet<(&str, i32)> {
    let mut seen = HashSet::new();
    topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.as_str();
            topic
                .partitions
                .iter()
                .map(move |p| (name, p.partition_index))
        })
        .filter(|partition| !seen.insert(*partition))
        .collect()
}

/// Whether the request version knows this timestamp: any time in ms, or a
/// special (negative) one from the version that introduced it.
fn timestamp_supported(timestamp: i64, version: i16) -> bool {
    let since = match timestamp {
        0.. => return true,
        -2..=-1 => 0,
        -3 => 7,
        -4 => 8,
        -5 => 9,
        _ => return false,
    };
    version >= since
}

fn partition_answer(index: i32, version: i16, answer: OffsetAnswer) -> PartitionResponse {
    let error_code = offset_error_for_version(version, answer.error.error_code());
    if error_code != NONE {
        return partition_error(index, error_code);
    }
    let found = answer.offset >= 0;
    let leader_epoch = if found && version >= 4 {
        LEADER_EPOCH
    } else {
        -1
    };
    PartitionResponse::default()
        .with_partition_index(index)
        .with_timestamp(answer.timestamp)
        .with_offset(answer.offset)
        .with_leader_epoch(leader_epoch)
}

/// OFFSET_NOT_AVAILABLE arrived in v5; older clients get the retriable
/// LEADER_NOT_AVAILABLE instead, as Kafka sends them.
fn offset_error_for_version(version: i16, error_code: i16) -> i16 {
    if version < 5 && error_code == ResponseError::OffsetNotAvailable.code() {
        ResponseError::LeaderNotAvailable.code()
    } else {
        error_code
    }
}

/// A partition without an offset, as Kafka's `buildErrorResponse`.
fn partition_error(index: i32, error_code: i16) -> PartitionResponse {
    let asked = ListOffsetsPartition::default().with_partition_index(index);
    TopicResponse::error(&asked, error_code)
}

gregor_sdk::export_handler!(ListOffsets);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::StrBytes;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn topic(name: &'static str, partitions: &[i32]) -> ListOffsetsTopic {
        ListOffsetsTopic::default()
            .with_name(StrBytes::from_static_str(name).into())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| ListOffsetsPartition::default().with_partition_index(p))
                    .collect(),
            )
    }

    #[test]
    fn finds_partitions_named_twice() {
        let topics = [
            topic("a", &[0, 1, 0]),
            topic("b", &[0]),
            topic("a", &[1, 2]),
        ];
        let duplicates = duplicate_partitions(&topics);
        assert_eq!(duplicates, HashSet::from([("a", 0), ("a", 1)]));
    }

    #[test]
    fn special_timestamps_need_their_version() {
        assert!(timestamp_supported(1_700_000_000_000, 1));
        assert!(timestamp_supported(-1, 0) && timestamp_supported(-2, 0));
        assert!(!timestamp_supported(-3, 6) && timestamp_supported(-3, 7));
        assert!(!timestamp_supported(-4, 7) && timestamp_supported(-4, 8));
        assert!(!timestamp_supported(-5, 8) && timestamp_supported(-5, 9));
        assert!(!timestamp_supported(-6, 10));
    }

    #[test]
    fn answers_map_like_kafka() {
        let answer = |error_code, offset| OffsetAnswer {
            error: gregor_sdk::error_of(error_code),
            offset,
            timestamp: 5,
        };
        let found = partition_answer(1, 4, answer(NONE, 42));
        assert_eq!(
            (found.offset, found.timestamp, found.leader_epoch),
            (42, 5, LEADER_EPOCH)
        );
        assert_eq!(partition_answer(1, 3, answer(NONE, 42)).leader_epoch, -1);
        assert_eq!(partition_answer(1, 4, answer(NONE, -1)).leader_epoch, -1);
        let unavailable = ResponseError::OffsetNotAvailable.code();
        let old = partition_answer(1, 4, answer(unavailable, 42));
        assert_eq!(old.error_code, ResponseError::LeaderNotAvailable.code());
        assert_eq!((old.offset, old.timestamp), (-1, -1));
        assert_eq!(
            partition_answer(1, 5, answer(unavailable, 42)).error_code,
            unavailable
        );
    }

    #[test]
    fn encodes_for_every_served_version() {
        let answer = OffsetAnswer {
            error: None,
            offset: 42,
            timestamp: 5,
        };
        let partitions = vec![
            partition_answer(0, 3, answer),
            partition_error(1, ResponseError::InvalidRequest.code()),
        ];
        let answered = TopicResponse::default().with_partitions(partitions);
        let request =
            ListOffsetsRequest::default().with_topics(vec![topic("a", &[0, 1]), topic("b", &[2])]);
        assert_encodes_for_served_versions::<ListOffsets>(
            &[request],
            &[ListOffsetsResponse::default().with_topics(vec![answered])],
        );
    }
}
