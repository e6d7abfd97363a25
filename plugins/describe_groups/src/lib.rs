//! DescribeGroups (ApiKey 15): state, protocol and members of groups, as
//! Kafka's `KafkaApis.handleDescribeGroupsRequest`.
//!
//! - Versions 0-6. v3 adds authorized operations (when asked for), v4 the
//!   members' group_instance_id; from v6 a group that does not exist is
//!   GROUP_ID_NOT_FOUND with a message, before v6 it is described as Dead
//!   without an error (KIP-1043).
//! - DESCRIBE on each Group, else GROUP_AUTHORIZATION_FAILED for it.
//! - Members carry their metadata and assignment once the group is Stable.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every group named with the error, an empty state,
//!   protocol and member list.

use gregor_sdk::authorize::authorized_operations;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, group_allowed, opt_str_bytes, GroupDescription};
use gregor_sdk::kafka_protocol::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct DescribeGroups;

impl Handler for DescribeGroups {
    gregor_sdk::api!(DescribeGroupsRequest, 0..=6);

    fn handle(
        ctx: &RequestContext,
        request: &DescribeGroupsRequest,
    ) -> Reply<DescribeGroupsResponse> {
        let version = ctx.api_version;
        let mut response = DescribeGroupsResponse::default();
        let mut authorized = Vec::new();
        for group_id in &request.groups {
            if group_allowed(Operation::Describe, group_id) {
                authorized.push(group_id.to_string());
            } else {
                let denied = ResponseError::GroupAuthorizationFailed.code();
                response.groups.push(group_error(group_id, denied));
            }
        }
        let described = groups::describe_groups(&authorized);
        let with_operations = version >= 3 && request.include_authorized_operations;
        let found: Vec<&str> = described
            .iter()
            .filter(|g| g.error.error_code() == 0)
            .map(|g| g.group_id.as_str())
            .collect();
        let mut operations = if with_operations {
            authorized_operations(ResourceType::Group, &found)
        } else {
            Vec::new()
        }
        .into_iter();
        for group in described {
            let operations = if with_operations && group.error.error_code() == 0 {
                operations.next()
            } else {
                None
            };
            response
                .groups
                .push(described_group(group, version, operations));
        }
        response.into()
    }

    /// Kafka's `getErrorResponse` (`DescribeGroupsResponse.groupError`):
    /// every group with the error, no state, protocol or members,
    /// authorized operations omitted.
    fn failed(
        _: &RequestContext,
        request: &DescribeGroupsRequest,
        error_code: i16,
    ) -> DescribeGroupsResponse {
        let groups = request.groups.iter().map(|id| group_error(id, error_code));
        DescribeGroupsResponse::default().with_groups(groups.collect())
    }
}

fn group_error(group_id: &GroupId, error_code: i16) -> DescribedGroup {
    DescribedGroup::default()
        .with_group_id(group_id.clone())
        .with_error_code(error_code)
}

fn described_group(
    group: GroupDescription,
    version: i16,
    operations: Option<i32>,
) -> DescribedGroup {
    let not_found = group.error.error_code() == ResponseError::GroupIdNotFound.code();
    let mut described = DescribedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.group_id.clone())))
        .with_group_state(StrBytes::from_string(group.state))
        .with_protocol_type(StrBytes::from_string(group.protocol_type))
        .with_protocol_data(StrBytes::from_string(group.protocol));
    if not_found && version >= 6 {
        described.error_code = group.error.error_code();
        described.error_message = Some(StrBytes::from_string(format!(
            "Group {} not found.",
            group.group_id
        )));
    } else if !not_found {
        described.error_code = group.error.error_code();
    }
    if let Some(operations) = operations {
        described.authorized_operations = operations;
    }
    described.members = group
        .members
        .into_iter()
        .map(|m| {
            DescribedGroupMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_group_instance_id(if version >= 4 {
                    opt_str_bytes(m.group_instance_id)
                } else {
                    None
                })
                .with_client_id(StrBytes::from_string(m.client_id))
                .with_client_host(StrBytes::from_string(m.client_host))
                .with_member_metadata(m.metadata.into())
                .with_member_assignment(m.assignment.into())
        })
        .collect();
    described
}

gregor_sdk::export_handler!(DescribeGroups);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::groups::MemberDescription;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn stable() -> GroupDescription {
        GroupDescription {
            error: None,
            group_id: "g".into(),
            state: "Stable".into(),
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            members: vec![MemberDescription {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                metadata: vec![1],
                assignment: vec![2],
            }],
        }
    }

    #[test]
    fn missing_groups_by_version() {
        let missing = GroupDescription {
            error: gregor_sdk::error_of(ResponseError::GroupIdNotFound.code()),
            group_id: "x".into(),
            state: "Dead".into(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        };
        let old = described_group(missing.clone(), 5, None);
        assert_eq!((old.error_code, old.group_state.as_str()), (0, "Dead"));
        let new = described_group(missing, 6, None);
        assert_eq!(new.error_code, ResponseError::GroupIdNotFound.code());
        assert!(new.error_message.is_some());
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request = DescribeGroupsRequest::default().with_groups(vec![
            GroupId(StrBytes::from_static_str("a")),
            GroupId(StrBytes::from_static_str("b")),
        ]);
        let ctx = gregor_sdk::fake::context::<DescribeGroups>(0);
        let failed = DescribeGroups::failed(&ctx, &request, code);
        let answered: Vec<(&str, i16, &str, usize)> = failed
            .groups
            .iter()
            .map(|g| {
                let state = g.group_state.as_str();
                (g.group_id.as_str(), g.error_code, state, g.members.len())
            })
            .collect();
        assert_eq!(answered, vec![("a", code, "", 0), ("b", code, "", 0)]);
        let stable_group =
            DescribeGroupsResponse::default().with_groups(vec![described_group(stable(), 0, None)]);
        assert_encodes_for_served_versions::<DescribeGroups>(&[request], &[stable_group]);
        // From v3 with authorized operations, from v4 with instance ids.
        for version in 3..=6 {
            let group = described_group(stable(), version, Some(0b1000));
            let response = DescribeGroupsResponse::default().with_groups(vec![group]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
