//! OffsetFetch (ApiKey 9): a group's committed offsets, as Kafka's
//! `KafkaApis.handleOffsetFetchRequest`.
//!
//! - Versions 0-9. Kafka 4 dropped v0 (KIP-896), whose message is v1's;
//!   Kafka 3.9 read v0's offsets from ZooKeeper (a KRaft broker refused it),
//!   Gregor answers it from the group coordinator as v1. From v2 no topic list means every
//!   partition with a committed offset and a group error is answered at the
//!   top level (v1 repeats it on each partition); v5 adds the leader epoch,
//!   v7 require_stable, and from v8 one request asks for many groups.
//! - DESCRIBE on each Group, else GROUP_AUTHORIZATION_FAILED for it.
//!   Clients may not see offsets of topics they cannot DESCRIBE: named
//!   partitions of such topics get TOPIC_AUTHORIZATION_FAILED, and such
//!   topics are left out of an all-partitions answer.
//! - A partition without a committed offset answers offset -1, empty
//!   metadata, no error.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every named partition with the error (v1), the
//!   error at the top level (v2-7), or every group with it (v8+).

use gregor_sdk::AnswerError;
use std::collections::HashMap;

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, group_allowed, CommittedOffset, TopicPartition};
use gregor_sdk::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use gregor_sdk::kafka_protocol::messages::{
    GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

struct OffsetFetch;

/// One group's answer: a group error, or offsets by topic in order.
struct GroupAnswer {
    error: i16,
    topics: Vec<(String, Vec<CommittedOffset>)>,
}

impl Handler for OffsetFetch {
    gregor_sdk::api!(OffsetFetchRequest, 0..=9);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::Legacy::same_as(1));

    fn handle(ctx: &RequestContext, request: &OffsetFetchRequest) -> Reply<OffsetFetchResponse> {
        let version = ctx.api_version;
        if version >= 8 {
            fetch_groups(request)
        } else {
            fetch_single(request, version)
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: every named partition with the error
    /// (v1), the error alone (v2-7), every group with it (v8+).
    fn failed(
        ctx: &RequestContext,
        request: &OffsetFetchRequest,
        error_code: i16,
    ) -> OffsetFetchResponse {
        failed(request, ctx.api_version, error_code)
    }
}

/// v8+: one answer per group.
fn fetch_groups(request: &OffsetFetchRequest) -> OffsetFetchResponse {
    let stable = request.require_stable;
    let groups = request
        .groups
        .iter()
        .map(|group| {
            let topics = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let answer = fetch_group(&group.group_id, topics, stable);
            OffsetFetchResponseGroup::default()
                .with_group_id(group.group_id.clone())
                .with_error_code(answer.error)
                .with_topics(
                    answer
                        .topics
                        .into_iter()
                        .map(|(name, offsets)| {
                            OffsetFetchResponseTopics::default()
                                .with_name(TopicName(StrBytes::from_string(name)))
                                .with_partitions(offsets.into_iter().map(partitions).collect())
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// v1-7: the request's one group.
fn fetch_single(request: &OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let stable = request.require_stable;
    let topics = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect::<Vec<_>>()
    });
    let mut answer = fetch_group(&request.group_id, topics.clone(), stable);
    let mut response = OffsetFetchResponse::default();
    if version >= 2 {
        response.error_code = answer.error;
    } else if answer.error != NONE {
        // v1 has no top-level error: every named partition carries it.
        let error = answer.error;
        answer.topics = topics
            .unwrap_or_default()
            .into_iter()
            .map(|(name, indexes)| {
                let offsets = indexes.iter().map(|&p| unknown(&name, p, error)).collect();
                (name, offsets)
            })
            .collect();
    }
    response.topics = answer
        .topics
        .into_iter()
        .map(|(name, offsets)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(offsets.into_iter().map(|o| partition(o, version)).collect())
        })
        .collect();
    response
}

/// The request answered with one error, in each version's shape.
fn failed(request: &OffsetFetchRequest, version: i16, error_code: i16) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        response.groups = request
            .groups
            .iter()
            .map(|group| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id.clone())
                    .with_error_code(error_code)
            })
            .collect();
    } else if version >= 2 {
        response.error_code = error_code;
    } else {
        // v1 has no top-level error: every named partition carries it.
        response.topics = request
            .topics
            .iter()
            .flatten()
            .map(|topic| {
                let partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&p| partition(unknown(&topic.name, p, error_code), version))
                    .collect();
                OffsetFetchResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions)
            })
            .collect();
    }
    response
}

/// Kafka's per-group handling: authorize, ask the coordinator, hide
/// what the principal may not see.
fn fetch_group(
    group_id: &GroupId,
    topics: Option<Vec<(String, Vec<i32>)>>,
    stable: bool,
) -> GroupAnswer {
    if !group_allowed(Operation::Describe, group_id) {
        return GroupAnswer {
            error: ResponseError::GroupAuthorizationFailed.code(),
            topics: Vec::new(),
        };
    }
    match topics {
        None => match groups::fetch_offsets(group_id, None, stable) {
            Err(error) => GroupAnswer {
                error: error.code,
                topics: Vec::new(),
            },
            Ok(offsets) => {
                let allowed = allowed_names(
                    Operation::Describe,
                    ResourceType::Topic,
                    offsets.iter().map(|o| o.topic.as_str()),
                );
                let mut topics: Vec<(String, Vec<CommittedOffset>)> = Vec::new();
                for offset in offsets {
                    if !allowed.contains(&offset.topic) {
                        continue;
                    }
                    match topics.iter_mut().find(|(name, _)| *name == offset.topic) {
                        Some((_, list)) => list.push(offset),
                        None => topics.push((offset.topic.clone(), vec![offset])),
                    }
                }
                GroupAnswer {
                    error: NONE,
                    topics,
                }
            }
        },
        Some(topics) => {
            let allowed = allowed_names(
                Operation::Describe,
                ResourceType::Topic,
                topics.iter().map(|(name, _)| name.as_str()),
            );
            let wanted: Vec<TopicPartition> = topics
                .iter()
                .filter(|(name, _)| allowed.contains(name))
                .flat_map(|(name, indexes)| {
                    indexes.iter().map(|&partition| TopicPartition {
                        topic: name.clone(),
                        partition,
                    })
                })
                .collect();
            let fetched = if wanted.is_empty() {
                Ok(Vec::new())
            } else {
                groups::fetch_offsets(group_id, Some(&wanted), stable)
            };
            let fetched = match fetched {
                Ok(fetched) => fetched,
                Err(error) => {
                    return GroupAnswer {
                        error: error.code,
                        topics: Vec::new(),
                    }
                }
            };
            let mut found: HashMap<(String, i32), CommittedOffset> = fetched
                .into_iter()
                .map(|o| ((o.topic.clone(), o.partition), o))
                .collect();
            let denied = ResponseError::TopicAuthorizationFailed.code();
            let topics = topics
                .into_iter()
                .map(|(name, indexes)| {
                    let offsets = indexes
                        .iter()
                        .map(|&p| {
                            if !allowed.contains(&name) {
                                return unknown(&name, p, denied);
                            }
                            found
                                .remove(&(name.clone(), p))
                                .unwrap_or_else(|| unknown(&name, p, NONE))
                        })
                        .collect();
                    (name, offsets)
                })
                .collect();
            GroupAnswer {
                error: NONE,
                topics,
            }
        }
    }
}

fn unknown(topic: &str, partition: i32, error_code: i16) -> CommittedOffset {
    CommittedOffset {
        topic: topic.to_string(),
        partition,
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
        error: gregor_sdk::error_of(error_code),
    }
}

fn partition(offset: CommittedOffset, version: i16) -> OffsetFetchResponsePartition {
    OffsetFetchResponsePartition::default()
        .with_partition_index(offset.partition)
        .with_committed_offset(offset.offset)
        .with_committed_leader_epoch(if version >= 5 {
            offset.leader_epoch
        } else {
            -1
        })
        .with_metadata(Some(StrBytes::from_string(offset.metadata)))
        .with_error_code(offset.error.error_code())
}

fn partitions(offset: CommittedOffset) -> OffsetFetchResponsePartitions {
    OffsetFetchResponsePartitions::default()
        .with_partition_index(offset.partition)
        .with_committed_offset(offset.offset)
        .with_committed_leader_epoch(offset.leader_epoch)
        .with_metadata(Some(StrBytes::from_string(offset.metadata)))
        .with_error_code(offset.error.error_code())
}

gregor_sdk::export_handler!(OffsetFetch);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopic,
    };
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaResponse;

    fn offset() -> CommittedOffset {
        CommittedOffset {
            topic: "t".into(),
            partition: 0,
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
            error: None,
        }
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let topic = |name: &'static str, partitions: &[i32]| {
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_partition_indexes(partitions.to_vec())
        };
        let group = |id: &'static str| {
            OffsetFetchRequestGroup::default().with_group_id(GroupId(StrBytes::from_static_str(id)))
        };
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(Some(vec![topic("a", &[0, 1]), topic("b", &[2])]))
            .with_groups(vec![group("g"), group("h")]);
        for version in 1..=9 {
            let response = failed(&request, version, code);
            let expected = match version {
                1 => vec![NONE, code, code, code],
                2..=7 => vec![code],
                _ => vec![NONE, code, code],
            };
            assert_eq!(response.error_codes(), expected, "v{version}");
            if version == 1 {
                let offsets: Vec<i64> = response
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.committed_offset)
                    .collect();
                assert_eq!(offsets, vec![-1, -1, -1]);
            }
        }
        assert_encodes_for_served_versions::<OffsetFetch>(&[request], &[]);
        // Offsets answer per request topic before v8, per group from v8.
        for version in 1..=7 {
            let topic = OffsetFetchResponseTopic::default()
                .with_partitions(vec![partition(offset(), version)]);
            let response = OffsetFetchResponse::default().with_topics(vec![topic]);
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
        for version in 8..=9 {
            let topic =
                OffsetFetchResponseTopics::default().with_partitions(vec![partitions(offset())]);
            let group = OffsetFetchResponseGroup::default().with_topics(vec![topic]);
            let response = OffsetFetchResponse::default().with_groups(vec![group]);
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
