//! ConsumerGroupDescribe (ApiKey 69): groups of the consumer protocol
//! (KIP-848) with their epochs, assignor and members' current and target
//! assignments, as Kafka's `KafkaApis.handleConsumerGroupDescribe`.
//!
//! - Versions 0-1 (v1 adds the member type: 1, consumer protocol).
//! - UNSUPPORTED_VERSION when the consumer protocol is off
//!   (`group.coordinator.rebalance.protocols`).
//! - DESCRIBE on each Group, else GROUP_AUTHORIZATION_FAILED for it;
//!   authorized operations when asked for. A group that does not exist or
//!   is a classic group is GROUP_ID_NOT_FOUND (clients then fall back to
//!   DescribeGroups).
//! - A group whose members are subscribed or assigned (currently or as
//!   target) to a topic the caller may not DESCRIBE is answered
//!   TOPIC_AUTHORIZATION_FAILED with no members (KAFKA-18813, Kafka 4.0).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every group named with the error.

use gregor_sdk::authorize::{allowed_names, authorized_operations};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, group_allowed, opt_str_bytes, ConsumerGroup, TopicIdPartitions};
use gregor_sdk::ids::{to_kafka_uuid, topic_name_by_id};
use gregor_sdk::kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use gregor_sdk::kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::AnswerError;
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

struct ConsumerGroupDescribe;

impl Handler for ConsumerGroupDescribe {
    gregor_sdk::api!(ConsumerGroupDescribeRequest, 0..=1);

    fn handle(
        ctx: &RequestContext,
        request: &ConsumerGroupDescribeRequest,
    ) -> Reply<ConsumerGroupDescribeResponse> {
        let mut response = ConsumerGroupDescribeResponse::default();
        let enabled = metadata::broker_config("group.coordinator.rebalance.protocols")
            .unwrap_or_else(|| "classic,consumer".to_string())
            .split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("consumer"));
        let mut authorized = Vec::new();
        for group_id in &request.group_ids {
            let error = if !enabled {
                ResponseError::UnsupportedVersion.code()
            } else if !group_allowed(Operation::Describe, group_id) {
                ResponseError::GroupAuthorizationFailed.code()
            } else {
                authorized.push(group_id.to_string());
                continue;
            };
            response.groups.push(group_error(group_id, error));
        }
        let described = groups::consumer_group_describe(&authorized);
        let found: Vec<&str> = described
            .iter()
            .filter(|g| g.error.error_code() == 0)
            .map(|g| g.group_id.as_str())
            .collect();
        let mut operations = if request.include_authorized_operations {
            authorized_operations(ResourceType::Group, &found)
        } else {
            Vec::new()
        }
        .into_iter();
        let first = response.groups.len();
        for group in described {
            let ops = (request.include_authorized_operations && group.error.error_code() == 0)
                .then(|| operations.next())
                .flatten();
            let described = described_group(group, ctx.api_version, ops);
            response.groups.push(described);
        }
        hide_groups_with_unauthorized_topics(&mut response.groups[first..]);
        response.into()
    }

    /// Kafka's `getErrorResponse`: every group named with the error.
    fn failed(
        _: &RequestContext,
        request: &ConsumerGroupDescribeRequest,
        error_code: i16,
    ) -> ConsumerGroupDescribeResponse {
        let groups = request
            .group_ids
            .iter()
            .map(|id| group_error(id, error_code));
        ConsumerGroupDescribeResponse::default().with_groups(groups.collect())
    }
}

/// The topics a described member is subscribed or assigned to, now or as
/// its target.
fn member_topics(member: &Member) -> impl Iterator<Item = &str> {
    let assigned = [&member.assignment, &member.target_assignment]
        .into_iter()
        .flat_map(|a| a.topic_partitions.iter().map(|t| t.topic_name.as_str()));
    member
        .subscribed_topic_names
        .iter()
        .map(|name| name.as_str())
        .chain(assigned)
}

/// KAFKA-18813: a group that involves a topic the caller may not DESCRIBE
/// is answered TOPIC_AUTHORIZATION_FAILED with no members (nor anything
/// else about it), all topics asked in one batch.
fn hide_groups_with_unauthorized_topics(groups: &mut [DescribedGroup]) {
    let names = groups
        .iter()
        .flat_map(|g| g.members.iter().flat_map(member_topics));
    let allowed = allowed_names(Operation::Describe, ResourceType::Topic, names);
    for group in groups {
        let hidden = group
            .members
            .iter()
            .flat_map(member_topics)
            .any(|name| !allowed.contains(name));
        if hidden {
            *group = group_error(
                &group.group_id,
                ResponseError::TopicAuthorizationFailed.code(),
            )
            .with_error_message(Some(StrBytes::from_static_str(
                "The group has described topic(s) that the client is not authorized to describe.",
            )));
        }
    }
}

fn group_error(group_id: &GroupId, error_code: i16) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(group_id.clone())
        .with_error_code(error_code)
}

fn assignment(topics: Vec<TopicIdPartitions>) -> Assignment {
    Assignment::default().with_topic_partitions(
        topics
            .into_iter()
            .map(|t| {
                let id = to_kafka_uuid(t.topic_id);
                let name = topic_name_by_id(id).unwrap_or_default();
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(t.partitions)
            })
            .collect(),
    )
}

fn described_group(group: ConsumerGroup, version: i16, operations: Option<i32>) -> DescribedGroup {
    let mut described = DescribedGroup::default()
        .with_error_code(group.error.error_code())
        .with_error_message(opt_str_bytes(group.error.error_message()))
        .with_group_id(GroupId(StrBytes::from_string(group.group_id)))
        .with_group_state(StrBytes::from_string(group.state))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(StrBytes::from_string(group.assignor_name));
    if let Some(operations) = operations {
        described.authorized_operations = operations;
    }
    described.members = group
        .members
        .into_iter()
        .map(|m| {
            let mut member = Member::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_instance_id(opt_str_bytes(m.instance_id))
                .with_rack_id(opt_str_bytes(m.rack_id))
                .with_member_epoch(m.member_epoch)
                .with_client_id(StrBytes::from_string(m.client_id))
                .with_client_host(StrBytes::from_string(m.client_host))
                .with_subscribed_topic_names(
                    m.subscribed_topic_names
                        .into_iter()
                        .map(|n| TopicName(StrBytes::from_string(n)))
                        .collect(),
                )
                .with_assignment(assignment(m.assignment))
                .with_target_assignment(assignment(m.target_assignment));
            if version >= 1 {
                member.member_type = 1;
            }
            member
        })
        .collect();
    described
}

gregor_sdk::export_handler!(ConsumerGroupDescribe);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![
            GroupId(StrBytes::from_static_str("a")),
            GroupId(StrBytes::from_static_str("b")),
        ]);
        let ctx = gregor_sdk::fake::context::<ConsumerGroupDescribe>(0);
        let failed = ConsumerGroupDescribe::failed(&ctx, &request, code);
        let answered: Vec<(&str, i16)> = failed
            .groups
            .iter()
            .map(|g| (g.group_id.as_str(), g.error_code))
            .collect();
        assert_eq!(answered, vec![("a", code), ("b", code)]);
        let group = ConsumerGroup {
            error: None,
            group_id: "g".into(),
            state: "Stable".into(),
            group_epoch: 3,
            assignment_epoch: 3,
            assignor_name: "uniform".into(),
            members: Vec::new(),
        };
        let described = ConsumerGroupDescribeResponse::default()
            .with_groups(vec![described_group(group, 0, Some(8))]);
        assert_encodes_for_served_versions::<ConsumerGroupDescribe>(&[request], &[described]);
    }
}
