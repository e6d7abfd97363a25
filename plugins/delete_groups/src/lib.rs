//! DeleteGroups (ApiKey 42): delete empty groups and their offsets, as
//! Kafka's `KafkaApis.handleDeleteGroupsRequest`.
//!
//! - Versions 0-2. A group named twice is answered once.
//! - DELETE on each Group (asked in one batch), else
//!   GROUP_AUTHORIZATION_FAILED for it.
//! - The coordinator answers per group: NONE, GROUP_ID_NOT_FOUND, or
//!   NON_EMPTY_GROUP while it has members.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every group named with the error.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups;
use gregor_sdk::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use gregor_sdk::kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct DeleteGroups;

impl RawHandler for DeleteGroups {
    fn describe() -> ApiInfo {
        api_info::<DeleteGroupsRequest>("DeleteGroups", 0, 2)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DeleteGroupsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let names = distinct_groups(&request);
        let allowed = allowed_names(
            Operation::Delete,
            ResourceType::Group,
            names.iter().map(String::as_str),
        );
        let (authorized, denied): (Vec<String>, Vec<String>) =
            names.into_iter().partition(|name| allowed.contains(name));
        let errors = groups::delete_groups(&authorized);
        let denied_code = ResponseError::GroupAuthorizationFailed.code();
        let mut response = response(
            authorized
                .into_iter()
                .zip(errors)
                .chain(denied.into_iter().map(|name| (name, denied_code))),
        );
        gregor_sdk::count_errors(response.results.iter().map(|result| result.error_code));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every group with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: DeleteGroupsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(&request, error_code))
    }
}

/// The groups the request names, each once, in request order.
fn distinct_groups(request: &DeleteGroupsRequest) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in &request.groups_names {
        if !names.iter().any(|n| n == name.as_str()) {
            names.push(name.to_string());
        }
    }
    names
}

fn response(results: impl IntoIterator<Item = (String, i16)>) -> DeleteGroupsResponse {
    let results = results
        .into_iter()
        .map(|(name, error)| {
            DeletableGroupResult::default()
                .with_group_id(GroupId(StrBytes::from_string(name)))
                .with_error_code(error)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

/// The request answered with one error for every group it names.
fn failed(request: &DeleteGroupsRequest, error_code: i16) -> DeleteGroupsResponse {
    response(
        distinct_groups(request)
            .into_iter()
            .map(|name| (name, error_code)),
    )
}

gregor_sdk::export_raw_handler!(DeleteGroups);

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

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request = DeleteGroupsRequest::default().with_groups_names(
            ["a", "b", "a"]
                .map(|name| GroupId(StrBytes::from_static_str(name)))
                .to_vec(),
        );
        let response = failed(&request, code);
        let answered: Vec<(&str, i16)> = response
            .results
            .iter()
            .map(|r| (r.group_id.as_str(), r.error_code))
            .collect();
        assert_eq!(answered, vec![("a", code), ("b", code)]);
        for version in 0..=2 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
