//! JoinGroup (ApiKey 11): a member joins (or rejoins) a group and waits
//! for the rebalance, as Kafka's `KafkaApis.handleJoinGroupRequest`.
//!
//! - Versions 0-9. v0 has no rebalance timeout: the session timeout serves
//!   as one. From v4 a member without an id gets MEMBER_ID_REQUIRED and an
//!   id to rejoin with (KIP-394); v5 adds static membership
//!   (group_instance_id, KIP-345); v7 the protocol type in the answer; v8
//!   the reason; v9 lets a rejoining static leader skip the assignment.
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED.
//! - Until the join phase of the rebalance completes, `groups.join-or-park`
//!   parks this request (it holds no instance or worker meanwhile) and the
//!   host handles it again then. The leader's answer lists every member
//!   with its metadata for the selected protocol.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error, generation -1, no leader, member id or
//!   members.

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_str_bytes, opt_string, JoinResult, Protocol};
use gregor_sdk::kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use gregor_sdk::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use gregor_sdk::kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct JoinGroup;

impl Handler for JoinGroup {
    gregor_sdk::api!(JoinGroupRequest, 0..=9);

    fn handle(ctx: &RequestContext, request: &JoinGroupRequest) -> Reply<JoinGroupResponse> {
        let version = ctx.api_version;
        let result = if !group_allowed(Operation::Read, &request.group_id) {
            failed(ResponseError::GroupAuthorizationFailed.code())
        } else {
            // Parked until the rebalance completes; the host calls again.
            match groups::join_or_park(&join_request(request, version)) {
                Some(joined) => joined,
                None => return Reply::Parked,
            }
        };
        response(result, version).into()
    }

    /// Kafka's `getErrorResponse`: the error and nothing else.
    fn failed(ctx: &RequestContext, _: &JoinGroupRequest, error_code: i16) -> JoinGroupResponse {
        response(failed(error_code), ctx.api_version)
    }
}

/// The request as the coordinator takes it: v0 has no rebalance timeout
/// (the session timeout serves), v4 requires a known member id, v9 may skip
/// the assignment.
fn join_request(request: &JoinGroupRequest, version: i16) -> groups::JoinRequest {
    let rebalance_timeout_ms = if version == 0 {
        request.session_timeout_ms
    } else {
        request.rebalance_timeout_ms
    };
    let protocol = |p: &JoinGroupRequestProtocol| Protocol {
        name: p.name.to_string(),
        metadata: p.metadata.to_vec(),
    };
    groups::JoinRequest {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: opt_string(&request.group_instance_id),
        protocol_type: request.protocol_type.to_string(),
        protocols: request.protocols.iter().map(protocol).collect(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms,
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        reason: opt_string(&request.reason),
    }
}

/// A join that failed before reaching the group: generation -1, no
/// protocol, leader, member id or members (Kafka's `UNKNOWN_*` values).
fn failed(error_code: i16) -> JoinResult {
    JoinResult {
        error: gregor_sdk::error_of(error_code),
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        skip_assignment: false,
        member_id: String::new(),
        members: Vec::new(),
    }
}

/// The answer for the request's version: fields a version lacks stay at
/// their defaults, and before v7 the protocol name is never null.
fn response(result: JoinResult, version: i16) -> JoinGroupResponse {
    let protocol_name = match result.protocol_name {
        None if version < 7 => Some(String::new()),
        name => name,
    };
    JoinGroupResponse::default()
        .with_error_code(result.error.error_code())
        .with_generation_id(result.generation_id)
        .with_protocol_type(if version >= 7 {
            opt_str_bytes(result.protocol_type)
        } else {
            None
        })
        .with_protocol_name(opt_str_bytes(protocol_name))
        .with_leader(StrBytes::from_string(result.leader))
        .with_skip_assignment(version >= 9 && result.skip_assignment)
        .with_member_id(StrBytes::from_string(result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_group_instance_id(if version >= 5 {
                            opt_str_bytes(m.group_instance_id)
                        } else {
                            None
                        })
                        .with_metadata(m.metadata.into())
                })
                .collect(),
        )
}

gregor_sdk::export_handler!(JoinGroup);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::groups::JoinMember;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let joined = |version| {
            let result = JoinResult {
                error: None,
                generation_id: 3,
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                leader: "m-1".into(),
                skip_assignment: true,
                member_id: "m-1".into(),
                members: vec![JoinMember {
                    member_id: "m-1".into(),
                    group_instance_id: Some("i-1".into()),
                    metadata: vec![1, 2],
                }],
            };
            response(result, version)
        };
        let mut member_id_required = failed(79);
        member_id_required.member_id = "new".into();
        assert_encodes_for_served_versions::<JoinGroup>(
            &[JoinGroupRequest::default()],
            &[joined(0), response(member_id_required, 0)],
        );
        // Each version's answer leaves out the fields it cannot carry.
        for version in 0..=9 {
            let encoded = joined(version).encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }

    #[test]
    fn failures_have_no_generation_and_each_version_protocol_name() {
        let code = ResponseError::UnknownServerError.code();
        for version in 0..=9 {
            let ctx = gregor_sdk::fake::context::<JoinGroup>(version);
            let failed = JoinGroup::failed(&ctx, &JoinGroupRequest::default(), code);
            assert_eq!((failed.error_code, failed.generation_id), (code, -1));
            // Kafka: "" before v7, null from v7.
            let protocol_name = failed.protocol_name.as_ref().map(|n| n.as_str());
            assert_eq!(protocol_name, (version < 7).then_some(""), "v{version}");
        }
    }
}
