//! LeaveGroup (ApiKey 13): members leave a group at once instead of
//! waiting for their sessions to expire, as Kafka's
//! `KafkaApis.handleLeaveGroupRequest`.
//!
//! - Versions 0-5. Before v3 the request names one member and the answer
//!   is one error; from v3 it names a batch of members (by member id, or a
//!   static member by its group_instance_id alone, as admin tools do) and
//!   the answer has an error per member; v5 adds a reason per member.
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error at the top level, no members.

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_string, LeavingMember};
use gregor_sdk::kafka_protocol::messages::leave_group_response::MemberResponse;
use gregor_sdk::kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

struct LeaveGroup;

impl Handler for LeaveGroup {
    gregor_sdk::api!(LeaveGroupRequest, 0..=5);

    fn handle(ctx: &RequestContext, request: &LeaveGroupRequest) -> Reply<LeaveGroupResponse> {
        let version = ctx.api_version;
        // Kafka's `normalizedData`: one member before v3.
        let leaving: Vec<LeavingMember> = if version < 3 {
            vec![LeavingMember {
                member_id: request.member_id.to_string(),
                group_instance_id: None,
                reason: None,
            }]
        } else {
            request
                .members
                .iter()
                .map(|m| LeavingMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: opt_string(&m.group_instance_id),
                    reason: opt_string(&m.reason),
                })
                .collect()
        };
        let outcome = if group_allowed(Operation::Read, &request.group_id) {
            groups::leave(&request.group_id, &leaving)
                .map(gregor_sdk::codes)
                .map_err(|error| error.code)
        } else {
            Err(ResponseError::GroupAuthorizationFailed.code())
        };
        response(request, &leaving, outcome, version).into()
    }
}

fn response(
    request: &LeaveGroupRequest,
    leaving: &[LeavingMember],
    outcome: Result<Vec<i16>, i16>,
    version: i16,
) -> LeaveGroupResponse {
    let (top, errors) = match outcome {
        Ok(errors) => (NONE, errors),
        Err(error) => (error, Vec::new()),
    };
    if version < 3 {
        // One member: its error is the answer.
        let error = if top != NONE {
            top
        } else {
            errors.first().copied().unwrap_or(NONE)
        };
        return LeaveGroupResponse::default().with_error_code(error);
    }
    let members = if top != NONE {
        Vec::new()
    } else {
        request
            .members
            .iter()
            .zip(leaving)
            .zip(errors)
            .map(|((m, _), error)| {
                MemberResponse::default()
                    .with_member_id(m.member_id.clone())
                    .with_group_instance_id(m.group_instance_id.clone())
                    .with_error_code(error)
            })
            .collect()
    };
    LeaveGroupResponse::default()
        .with_error_code(top)
        .with_members(members)
}

gregor_sdk::export_handler!(LeaveGroup);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::leave_group_request::MemberIdentity;
    use gregor_sdk::kafka_protocol::protocol::{Encodable, StrBytes};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn old_versions_answer_with_the_member_error() {
        let request = LeaveGroupRequest::default();
        let leaving = [LeavingMember {
            member_id: "m".into(),
            group_instance_id: None,
            reason: None,
        }];
        let response = response(&request, &leaving, Ok(vec![25]), 2);
        assert_eq!(response.error_code, 25);
        assert!(response.encode(&mut Vec::new(), 2).is_ok());
    }

    #[test]
    fn batches_answer_per_member() {
        let request = LeaveGroupRequest::default().with_members(vec![
            MemberIdentity::default().with_member_id(StrBytes::from_static_str("a")),
            MemberIdentity::default()
                .with_member_id(StrBytes::from_static_str(""))
                .with_group_instance_id(Some(StrBytes::from_static_str("i"))),
        ]);
        let leaving: Vec<LeavingMember> = request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: opt_string(&m.group_instance_id),
                reason: None,
            })
            .collect();
        for version in 3..=5 {
            let answer = response(&request, &leaving, Ok(vec![0, 25]), version);
            assert_eq!(answer.members.len(), 2);
            assert_eq!(answer.members[1].error_code, 25);
            assert!(
                answer.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
            let denied = response(&request, &leaving, Err(30), version);
            assert_eq!((denied.error_code, denied.members.len()), (30, 0));
        }
    }

    #[test]
    fn encodes_for_every_served_version() {
        // Batches (v3+) are checked above.
        assert_encodes_for_served_versions::<LeaveGroup>(
            &[LeaveGroupRequest::default()],
            &[LeaveGroupResponse::default().with_error_code(25)],
        );
    }
}
