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
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct DeleteGroups;

impl Handler for DeleteGroups {
    gregor_sdk::api!(DeleteGroupsRequest, 0..=2);

    fn handle(_ctx: &RequestContext, request: &DeleteGroupsRequest) -> Reply<DeleteGroupsResponse> {
        let names = distinct_groups(request);
        let allowed = allowed_names(
            Operation::Delete,
            ResourceType::Group,
            names.iter().map(String::as_str),
        );
        let (authorized, denied): (Vec<String>, Vec<String>) =
            names.into_iter().partition(|name| allowed.contains(name));
        let errors = gregor_sdk::codes(groups::delete_groups(&authorized));
        let denied_code = ResponseError::GroupAuthorizationFailed.code();
        let denied = denied.into_iter().map(|name| (name, denied_code));
        response(authorized.into_iter().zip(errors).chain(denied)).into()
    }

    /// Kafka's `getErrorResponse`: every group named with the error.
    fn failed(
        _: &RequestContext,
        request: &DeleteGroupsRequest,
        error_code: i16,
    ) -> DeleteGroupsResponse {
        let names = distinct_groups(request).into_iter();
        response(names.map(|name| (name, error_code)))
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

gregor_sdk::export_handler!(DeleteGroups);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::{error_of, KafkaError};

    fn request(names: &[&'static str]) -> DeleteGroupsRequest {
        let names = names
            .iter()
            .map(|name| GroupId(StrBytes::from_static_str(name)));
        DeleteGroupsRequest::default().with_groups_names(names.collect())
    }

    fn answered(response: &DeleteGroupsResponse) -> Vec<(&str, i16)> {
        response
            .results
            .iter()
            .map(|r| (r.group_id.as_str(), r.error_code))
            .collect()
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let ctx = fake::context::<DeleteGroups>(0);
        let failed = DeleteGroups::failed(&ctx, &request(&["a", "b", "a"]), code);
        assert_eq!(answered(&failed), vec![("a", code), ("b", code)]);
        let result = DeletableGroupResult::default().with_error_code(69);
        assert_encodes_for_served_versions::<DeleteGroups>(
            &[request(&["a", "b", "a"])],
            &[DeleteGroupsResponse::default().with_results(vec![result])],
        );
    }

    /// The principal may not DELETE "kept"; "busy" still has members.
    struct Coordinator;

    impl FakeHost for Coordinator {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name != "kept"
        }
        fn delete_groups(&self, group_ids: &[String]) -> Vec<Option<KafkaError>> {
            let code = |id: &String| match id.as_str() {
                "kept" => panic!("an unauthorized group reached the coordinator"),
                "busy" => ResponseError::NonEmptyGroup.code(),
                _ => 0,
            };
            group_ids.iter().map(|id| error_of(code(id))).collect()
        }
    }

    #[test]
    fn authorized_groups_are_deleted_once_and_the_others_refused() {
        let request = request(&["kept", "gone", "busy", "gone"]);
        let handled = fake::handle::<DeleteGroups>(Coordinator, 2, &request);
        let (denied, busy) = (30, ResponseError::NonEmptyGroup.code());
        let response = handled.response.expect("an answer");
        assert_eq!(
            answered(&response),
            vec![("gone", 0), ("busy", busy), ("kept", denied)]
        );
        assert_eq!(handled.counted_errors, vec![busy, denied]);
    }
}
