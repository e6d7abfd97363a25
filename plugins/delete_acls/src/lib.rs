//! DeleteAcls (ApiKey 31): remove every ACL binding matching any of the
//! filters, as Kafka's AclApis and AclControlManager do, in one durable
//! step.
//!
//! - ALTER on the Cluster is required; without it every filter gets
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - Filters follow Kafka's AclBindingFilter (ANY, null, MATCH; see
//!   DescribeAcls); a filter with UNKNOWN elements is INVALID_REQUEST on
//!   its own. Each filter's result lists the bindings it matched, each
//!   with error code 0.
//! - Removing more than 10000 bindings at once is refused as Kafka's
//!   AclControlManager refuses it: every filter gets POLICY_VIOLATION
//!   ("Cannot remove more than 10000 acls in a single delete operation.")
//!   and nothing is removed. (Kafka answers the filters from the one that
//!   overflows on UNKNOWN_SERVER_ERROR; one answer for all is clearer.)
//! - Error response (a trap or timeout): every filter with the error, as
//!   Kafka's `DeleteAclsRequest.getErrorResponse`.

use gregor_sdk::acl::{self, binding_filter};
use gregor_sdk::acl_admin;
use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::bindings::gregor::broker::types::AclBinding;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use gregor_sdk::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct DeleteAcls;

fn matching(binding: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl::resource_type_code(binding.resource_type))
        .with_resource_name(str_bytes(&binding.resource_name))
        .with_pattern_type(acl::pattern_type_code(binding.pattern_type))
        .with_principal(str_bytes(&binding.principal))
        .with_host(str_bytes(&binding.host))
        .with_operation(acl::operation_wire_code(binding.operation))
        .with_permission_type(acl::permission_code(binding.permission))
}

fn failed(error_code: i16, message: Option<&str>) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

impl RawHandler for DeleteAcls {
    fn describe() -> ApiInfo {
        api_info::<DeleteAclsRequest>("DeleteAcls", 1, 3)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DeleteAclsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = if cluster_allowed(Operation::Alter) {
            delete(&request)
        } else {
            error_response_for(&request, ResponseError::ClusterAuthorizationFailed.code())
        };
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every filter with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: DeleteAclsRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(&request, error_code))
    }
}

/// Every filter answered with `error_code` and no bindings.
fn error_response_for(request: &DeleteAclsRequest, error_code: i16) -> DeleteAclsResponse {
    let results = request
        .filters
        .iter()
        .map(|_| failed(error_code, None))
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

/// Checks each filter and deletes what the valid ones match, in one step.
fn delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let checked: Vec<Result<_, String>> = request
        .filters
        .iter()
        .map(|f| {
            binding_filter(
                f.resource_type_filter,
                f.resource_name_filter.as_ref().map(|n| n.as_str()),
                f.pattern_type_filter,
                f.principal_filter.as_ref().map(|p| p.as_str()),
                f.host_filter.as_ref().map(|h| h.as_str()),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<_> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let deleted = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        acl_admin::delete_acls(&valid)
    };
    let mut deleted = match deleted {
        Ok(deleted) => deleted.into_iter(),
        Err(error) => {
            // The host refuses a deletion over Kafka's cap as a whole
            // (POLICY_VIOLATION); a failed write is UNKNOWN_SERVER_ERROR.
            let message = error.message.unwrap_or_default();
            let results = checked
                .iter()
                .map(|_| failed(error.code, Some(&message)))
                .collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
    };
    let results = checked
        .iter()
        .map(|checked| match checked {
            Err(message) => failed(ResponseError::InvalidRequest.code(), Some(message)),
            Ok(_) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .iter()
                    .map(matching)
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

/// Every filter's code and every matched binding's.
fn error_codes(response: &DeleteAclsResponse) -> Vec<i16> {
    response
        .filter_results
        .iter()
        .flat_map(|filter| {
            std::iter::once(filter.error_code)
                .chain(filter.matching_acls.iter().map(|acl| acl.error_code))
        })
        .collect()
}

gregor_sdk::export_raw_handler!(DeleteAcls);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn error_responses_answer_every_filter_for_every_served_version() {
        let request = DeleteAclsRequest::default().with_filters(vec![
            DeleteAclsFilter::default(),
            DeleteAclsFilter::default(),
        ]);
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(&request, code);
        assert_eq!(error_codes(&response), vec![code, code]);
        for version in 1..=3 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
