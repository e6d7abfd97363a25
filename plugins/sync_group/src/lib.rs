//! SyncGroup (ApiKey 14): the leader hands in the assignment and every
//! member gets its share, as Kafka's `KafkaApis.handleSyncGroupRequest`.
//!
//! - Versions 0-5 (group_instance_id from v3; from v5 the protocol type
//!   and name are mandatory, else INCONSISTENT_GROUP_PROTOCOL, and the
//!   answer carries them).
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED.
//! - A follower's request is parked by `groups.sync-or-park` until the
//!   leader's assignment arrives (holding no instance or worker), then
//!   handled again.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error and an empty assignment.

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_str_bytes, opt_string, SyncResult};
use gregor_sdk::kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct SyncGroup;

impl Handler for SyncGroup {
    gregor_sdk::api!(SyncGroupRequest, 0..=5);

    fn handle(ctx: &RequestContext, request: &SyncGroupRequest) -> Reply<SyncGroupResponse> {
        let version = ctx.api_version;
        let mandatory_missing =
            version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none());
        let result = if mandatory_missing {
            error(ResponseError::InconsistentGroupProtocol.code())
        } else if !group_allowed(Operation::Read, &request.group_id) {
            error(ResponseError::GroupAuthorizationFailed.code())
        } else {
            let synced = groups::sync_or_park(&groups::SyncRequest {
                group_id: request.group_id.to_string(),
                generation_id: request.generation_id,
                member_id: request.member_id.to_string(),
                group_instance_id: opt_string(&request.group_instance_id),
                protocol_type: opt_string(&request.protocol_type),
                protocol_name: opt_string(&request.protocol_name),
                assignments: request
                    .assignments
                    .iter()
                    .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
                    .collect(),
            });
            // Parked until the leader's assignment arrives; the host calls again.
            let Some(synced) = synced else {
                return Reply::Parked;
            };
            synced
        };
        response(result, version).into()
    }

    /// Kafka's `getErrorResponse`: the error and an empty assignment.
    fn failed(ctx: &RequestContext, _: &SyncGroupRequest, error_code: i16) -> SyncGroupResponse {
        response(error(error_code), ctx.api_version)
    }
}

fn error(error_code: i16) -> SyncResult {
    SyncResult {
        error: gregor_sdk::error_of(error_code),
        protocol_type: None,
        protocol_name: None,
        assignment: Vec::new(),
    }
}

fn response(result: SyncResult, version: i16) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default()
        .with_error_code(result.error.error_code())
        .with_assignment(result.assignment.into());
    if version >= 5 {
        response.protocol_type = opt_str_bytes(result.protocol_type);
        response.protocol_name = opt_str_bytes(result.protocol_name);
    }
    response
}

gregor_sdk::export_handler!(SyncGroup);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let synced = |version| {
            let result = SyncResult {
                error: None,
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                assignment: vec![0, 1],
            };
            response(result, version)
        };
        let failed = response(error(27), 5);
        assert!(failed.assignment.is_empty());
        assert_encodes_for_served_versions::<SyncGroup>(
            &[SyncGroupRequest::default()],
            &[synced(4), failed],
        );
        // v5 answers the protocol too.
        assert!(synced(5).encode(&mut Vec::new(), 5).is_ok());
    }
}
