//! Per-partition responses built from a request's topics.
//!
//! Many APIs answer "for each topic of the request, for each of its
//! partitions, one result" (ListOffsets, DeleteRecords, OffsetForLeaderEpoch,
//! DescribeProducers, AlterPartitionReassignments, Fetch, Produce, ...), and
//! their `getErrorResponse` is that walk with one error everywhere. What
//! differs between them is protocol knowledge (field names, what a partition
//! carries when it failed), kept here once in [`TopicAnswer`] so that a
//! handler writes only how it answers one partition.

use kafka_protocol::messages::*;

use crate::authorize::{allowed_names, Allowed};
use crate::authz::{Operation, ResourceType};

/// A response topic that answers one request topic partition by partition.
pub trait TopicAnswer: Sized {
    /// The request's topic.
    type Topic: 'static;
    /// One partition the request topic names.
    type Asked: 'static;
    /// One partition of the answer.
    type Answer;

    /// The topic's name as the request gives it ("" when named by id).
    fn name(topic: &Self::Topic) -> &str;
    /// The partitions the topic names.
    fn asked(topic: &Self::Topic) -> &[Self::Asked];
    /// The answer to `topic` (echoing its name, and id where it has one).
    fn new(topic: &Self::Topic, partitions: Vec<Self::Answer>) -> Self;
    /// A partition answered with `error_code` only, as Kafka's error
    /// response for the API builds it (offsets and epochs undefined).
    fn error(asked: &Self::Asked, error_code: i16) -> Self::Answer;
}

/// One answer topic per request topic, each partition answered by `answer`.
pub fn answer<'a, R: TopicAnswer>(
    topics: impl IntoIterator<Item = &'a R::Topic>,
    mut answer: impl FnMut(&'a R::Topic, &'a R::Asked) -> R::Answer,
) -> Vec<R> {
    topics
        .into_iter()
        .map(|topic| {
            let partitions = R::asked(topic).iter().map(|p| answer(topic, p)).collect();
            R::new(topic, partitions)
        })
        .collect()
}

/// As [`answer`], but every partition of a topic `allowed` refuses gets
/// `denied` without `answer` being asked (Kafka's per-topic authorization).
pub fn answer_allowed<'a, R: TopicAnswer>(
    topics: impl IntoIterator<Item = &'a R::Topic>,
    allowed: impl Fn(&str) -> bool,
    denied: i16,
    mut answer: impl FnMut(&'a R::Topic, &'a R::Asked) -> R::Answer,
) -> Vec<R> {
    self::answer(topics, |topic, partition| {
        if allowed(R::name(topic)) {
            answer(topic, partition)
        } else {
            R::error(partition, denied)
        }
    })
}

/// Kafka's `getErrorResponse` for a per-partition API: every partition of
/// every topic with `error_code`.
pub fn failed<'a, R: TopicAnswer>(
    topics: impl IntoIterator<Item = &'a R::Topic>,
    error_code: i16,
) -> Vec<R> {
    answer(topics, |_, partition| R::error(partition, error_code))
}

/// The topics of the request that allow `operation`, asked in one batch.
pub fn allowed_topics<'a, R: TopicAnswer>(
    operation: Operation,
    topics: impl IntoIterator<Item = &'a R::Topic>,
) -> Allowed {
    allowed_names(
        operation,
        ResourceType::Topic,
        topics.into_iter().map(R::name),
    )
}

/// Implements [`TopicAnswer`]: `Answer: Topic [Asked => AnswerPartition]`,
/// how to read the request topic, build the answer and an error partition.
macro_rules! topic_answers {
    ($(
        $answer:ty: $topic:ty [$asked:ty => $part:ty] {
            name: |$tn:ident| $name:expr,
            asked: |$ta:ident| $asked_of:expr,
            new: |$tt:ident, $ps:ident| $new:expr,
            error: |$p:ident, $code:ident| $error:expr $(,)?
        }
    )*) => {$(
        impl TopicAnswer for $answer {
            type Topic = $topic;
            type Asked = $asked;
            type Answer = $part;
            fn name($tn: &$topic) -> &str {
                $name
            }
            fn asked($ta: &$topic) -> &[$asked] {
                $asked_of
            }
            fn new($tt: &$topic, $ps: Vec<$part>) -> Self {
                $new
            }
            fn error($p: &$asked, $code: i16) -> $part {
                $error
            }
        }
    )*};
}

/// Kafka's undefined offset, timestamp and leader epoch (-1).
const UNDEFINED: i64 = -1;

topic_answers! {
    alter_partition_reassignments_response::ReassignableTopicResponse:
        alter_partition_reassignments_request::ReassignableTopic
        [alter_partition_reassignments_request::ReassignablePartition
            => alter_partition_reassignments_response::ReassignablePartitionResponse]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default().with_name(t.name.clone()).with_partitions(partitions),
        error: |p, code| alter_partition_reassignments_response::ReassignablePartitionResponse
            ::default()
            .with_partition_index(p.partition_index)
            .with_error_code(code)
            .with_error_message(None),
    }

    alter_replica_log_dirs_response::AlterReplicaLogDirTopicResult:
        alter_replica_log_dirs_request::AlterReplicaLogDirTopic
        [i32 => alter_replica_log_dirs_response::AlterReplicaLogDirPartitionResult]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default()
            .with_topic_name(t.name.clone())
            .with_partitions(partitions),
        error: |p, code| alter_replica_log_dirs_response::AlterReplicaLogDirPartitionResult
            ::default()
            .with_partition_index(*p)
            .with_error_code(code),
    }

    delete_records_response::DeleteRecordsTopicResult:
        delete_records_request::DeleteRecordsTopic
        [delete_records_request::DeleteRecordsPartition
            => delete_records_response::DeleteRecordsPartitionResult]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default().with_name(t.name.clone()).with_partitions(partitions),
        error: |p, code| delete_records_response::DeleteRecordsPartitionResult::default()
            .with_partition_index(p.partition_index)
            .with_error_code(code)
            .with_low_watermark(UNDEFINED),
    }

    describe_producers_response::TopicResponse:
        describe_producers_request::TopicRequest
        [i32 => describe_producers_response::PartitionResponse]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partition_indexes,
        new: |t, partitions| Self::default().with_name(t.name.clone()).with_partitions(partitions),
        error: |p, code| describe_producers_response::PartitionResponse::default()
            .with_partition_index(*p)
            .with_error_code(code),
    }

    elect_leaders_response::ReplicaElectionResult:
        elect_leaders_request::TopicPartitions
        [i32 => elect_leaders_response::PartitionResult]
    {
        name: |t| t.topic.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default()
            .with_topic(t.topic.clone())
            .with_partition_result(partitions),
        error: |p, code| elect_leaders_response::PartitionResult::default()
            .with_partition_id(*p)
            .with_error_code(code)
            .with_error_message(None),
    }

    fetch_response::FetchableTopicResponse:
        fetch_request::FetchTopic
        [fetch_request::FetchPartition => fetch_response::PartitionData]
    {
        name: |t| t.topic.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default()
            .with_topic(t.topic.clone())
            .with_topic_id(t.topic_id)
            .with_partitions(partitions),
        // Kafka's `FetchResponse.partitionResponse`: no records.
        error: |p, code| fetch_response::PartitionData::default()
            .with_partition_index(p.partition)
            .with_error_code(code)
            .with_high_watermark(UNDEFINED)
            .with_last_stable_offset(UNDEFINED)
            .with_log_start_offset(UNDEFINED)
            .with_aborted_transactions(None)
            .with_records(Some(bytes::Bytes::new())),
    }

    // Kafka's error response lists the requested partitions, with no
    // replicas; the error is at the top level only.
    list_partition_reassignments_response::OngoingTopicReassignment:
        list_partition_reassignments_request::ListPartitionReassignmentsTopics
        [i32 => list_partition_reassignments_response::OngoingPartitionReassignment]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partition_indexes,
        new: |t, partitions| Self::default().with_name(t.name.clone()).with_partitions(partitions),
        error: |p, _code| list_partition_reassignments_response::OngoingPartitionReassignment
            ::default()
            .with_partition_index(*p),
    }

    list_offsets_response::ListOffsetsTopicResponse:
        list_offsets_request::ListOffsetsTopic
        [list_offsets_request::ListOffsetsPartition
            => list_offsets_response::ListOffsetsPartitionResponse]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default().with_name(t.name.clone()).with_partitions(partitions),
        // Kafka's `ListOffsetsRequest.buildErrorResponse`.
        error: |p, code| list_offsets_response::ListOffsetsPartitionResponse::default()
            .with_partition_index(p.partition_index)
            .with_error_code(code)
            .with_timestamp(UNDEFINED)
            .with_offset(UNDEFINED),
    }

    offset_for_leader_epoch_response::OffsetForLeaderTopicResult:
        offset_for_leader_epoch_request::OffsetForLeaderTopic
        [offset_for_leader_epoch_request::OffsetForLeaderPartition
            => offset_for_leader_epoch_response::EpochEndOffset]
    {
        name: |t| t.topic.as_str(),
        asked: |t| &t.partitions,
        new: |t, partitions| Self::default()
            .with_topic(t.topic.clone())
            .with_partitions(partitions),
        error: |p, code| offset_for_leader_epoch_response::EpochEndOffset::default()
            .with_partition(p.partition)
            .with_error_code(code)
            .with_leader_epoch(UNDEFINED as i32)
            .with_end_offset(UNDEFINED),
    }

    produce_response::TopicProduceResponse:
        produce_request::TopicProduceData
        [produce_request::PartitionProduceData => produce_response::PartitionProduceResponse]
    {
        name: |t| t.name.as_str(),
        asked: |t| &t.partition_data,
        new: |t, partitions| Self::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_partition_responses(partitions),
        // Kafka's `PartitionResponse(error)`: nothing appended.
        error: |p, code| produce_response::PartitionProduceResponse::default()
            .with_index(p.index)
            .with_error_code(code)
            .with_error_message(None)
            .with_base_offset(UNDEFINED)
            .with_log_append_time_ms(UNDEFINED)
            .with_log_start_offset(UNDEFINED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use delete_records_response::DeleteRecordsTopicResult;

    fn topic(name: &str, partitions: &[i32]) -> DeleteRecordsTopic {
        DeleteRecordsTopic::default()
            .with_name(crate::ids::str_bytes(name).into())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| DeleteRecordsPartition::default().with_partition_index(p))
                    .collect(),
            )
    }

    /// (topic, [(partition, error, low watermark)]) of an answer.
    fn shape(topics: &[DeleteRecordsTopicResult]) -> Vec<(String, Vec<(i32, i16, i64)>)> {
        topics
            .iter()
            .map(|t| {
                let partitions = t.partitions.iter();
                let partitions =
                    partitions.map(|p| (p.partition_index, p.error_code, p.low_watermark));
                (t.name.to_string(), partitions.collect())
            })
            .collect()
    }

    #[test]
    fn failed_answers_every_partition_in_request_order() {
        let request = [topic("a", &[0, 1]), topic("b", &[2])];
        let answered: Vec<DeleteRecordsTopicResult> = failed(&request, -1);
        assert_eq!(
            shape(&answered),
            vec![
                ("a".to_string(), vec![(0, -1, -1), (1, -1, -1)]),
                ("b".to_string(), vec![(2, -1, -1)]),
            ]
        );
    }

    #[test]
    fn refused_topics_are_not_asked() {
        let request = [topic("a", &[0]), topic("secret", &[1])];
        let answered = answer_allowed::<DeleteRecordsTopicResult>(
            &request,
            |name| name != "secret",
            29,
            |topic, p| {
                assert_eq!(topic.name.as_str(), "a", "a refused topic was answered");
                DeleteRecordsTopicResult::error(p, 0).with_low_watermark(7)
            },
        );
        assert_eq!(
            shape(&answered),
            vec![
                ("a".to_string(), vec![(0, 0, 7)]),
                ("secret".to_string(), vec![(1, 29, -1)]),
            ]
        );
    }
}
