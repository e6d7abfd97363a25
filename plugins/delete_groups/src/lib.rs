//! DeleteGroups (ApiKey 42): delete empty groups and their offsets, as
//! Kafka's `KafkaApis.handleDeleteGroupsRequest`.
//!
//! - Versions 0-2. A group named twice is answered once.
//! - DELETE on each Group (asked in one batch), else
//!   GROUP_AUTHORIZATION_FAILED for it.
//! - The coordinator answers per group: NONE, GROUP_ID_NOT_FOUND, or
//!   NON_EMPTY_GROUP while it has members.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups;
use gregor_sdk::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use gregor_sdk::kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{
    api_info, decode, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

struct DeleteGroups;

impl Handler for DeleteGroups {
    fn describe() -> ApiInfo {
        api_info::<DeleteGroupsRequest>("DeleteGroups", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DeleteGroupsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut names: Vec<String> = Vec::new();
        for name in &request.groups_names {
            if !names.iter().any(|n| n == name.as_str()) {
                names.push(name.to_string());
            }
        }
        let allowed = allowed_names(
            Operation::Delete,
            ResourceType::Group,
            names.iter().map(String::as_str),
        );
        let (authorized, denied): (Vec<String>, Vec<String>) = names
            .into_iter()
            .partition(|name| allowed.get(name) == Some(&true));
        let errors = groups::delete_groups(&authorized);
        let denied_code = ResponseError::GroupAuthorizationFailed.code();
        let results = authorized
            .into_iter()
            .zip(errors)
            .chain(denied.into_iter().map(|name| (name, denied_code)))
            .map(|(name, error)| {
                DeletableGroupResult::default()
                    .with_group_id(GroupId(StrBytes::from_string(name)))
                    .with_error_code(error)
            })
            .collect();
        respond(&ctx, &DeleteGroupsResponse::default().with_results(results))
    }
}

gregor_sdk::export_handler!(DeleteGroups);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=2 {
            let result = DeletableGroupResult::default().with_error_code(69);
            let response = DeleteGroupsResponse::default().with_results(vec![result]);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
