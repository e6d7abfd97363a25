//! ListGroups (ApiKey 16): the groups of the cluster, as Kafka's
//! `KafkaApis.handleListGroupsRequest`.
//!
//! - Versions 0-5. v4 adds the states filter and each group's state, v5
//!   the types filter and each group's type (all groups here are
//!   "classic"). Filters compare case-insensitively; empty means all.
//! - DESCRIBE on the Cluster lists every group; without it, only the
//!   groups the principal may DESCRIBE are listed (asked in one batch).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error and no groups.

use gregor_sdk::authorize::{allowed_names, cluster_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{self, GroupOverview};
use gregor_sdk::kafka_protocol::messages::list_groups_response::ListedGroup;
use gregor_sdk::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext,
};

struct ListGroups;

impl RawHandler for ListGroups {
    fn describe() -> ApiInfo {
        api_info::<ListGroupsRequest>("ListGroups", 0, 5)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: ListGroupsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let version = ctx.api_version;
        let states: Vec<String> = request
            .states_filter
            .iter()
            .map(|s| s.to_string())
            .collect();
        let types: Vec<String> = request.types_filter.iter().map(|s| s.to_string()).collect();
        let mut listed = groups::list_groups(&states, &types);
        if !cluster_allowed(Operation::Describe) {
            let allowed = allowed_names(
                Operation::Describe,
                ResourceType::Group,
                listed.iter().map(|g| g.group_id.as_str()),
            );
            listed.retain(|g| allowed.contains(&g.group_id));
        }
        let mut response = ListGroupsResponse::default().with_groups(
            listed
                .into_iter()
                .map(|g| listed_group(g, version))
                .collect(),
        );
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error and no groups.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let _: ListGroupsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(error_code))
    }
}

fn failed(error_code: i16) -> ListGroupsResponse {
    ListGroupsResponse::default().with_error_code(error_code)
}

fn listed_group(group: GroupOverview, version: i16) -> ListedGroup {
    let mut listed = ListedGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.group_id)))
        .with_protocol_type(StrBytes::from_string(group.protocol_type));
    if version >= 4 {
        listed.group_state = StrBytes::from_string(group.state);
    }
    if version >= 5 {
        listed.group_type = StrBytes::from_string(group.group_type);
    }
    listed
}

gregor_sdk::export_raw_handler!(ListGroups);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=5 {
            let group = GroupOverview {
                group_id: "g".into(),
                protocol_type: "consumer".into(),
                state: "Stable".into(),
                group_type: "classic".into(),
            };
            let response =
                ListGroupsResponse::default().with_groups(vec![listed_group(group, version)]);
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = gregor_sdk::ResponseError::UnknownServerError.code();
        let response = failed(code);
        assert_eq!((response.error_code, response.groups.len()), (code, 0));
        for version in 0..=5 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
