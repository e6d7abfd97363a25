//! DeleteAcls (ApiKey 31): remove every ACL binding matching any of the
//! filters, as Kafka's AclApis and AclControlManager do, in one durable
//! step.
//!
//! - Versions 0-3: v0, which Kafka 4 removed (KIP-896), is v1 with literal
//!   patterns only ([`gregor_sdk::legacy::acl`]).
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
use gregor_sdk::authorize::on_cluster;
use gregor_sdk::authz::Operation;
use gregor_sdk::bindings::gregor::broker::types::AclBinding;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use gregor_sdk::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

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

fn filter_error(error_code: i16, message: Option<&str>) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

impl Handler for DeleteAcls {
    gregor_sdk::api!(DeleteAclsRequest, 0..=3);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::acl::DELETE);

    fn handle(ctx: &RequestContext, request: &DeleteAclsRequest) -> Reply<DeleteAclsResponse> {
        on_cluster::<Self>(ctx, request, Operation::Alter, || delete(request))
    }

    /// Kafka's `getErrorResponse`: every filter with the error and no
    /// bindings.
    fn failed(_: &RequestContext, request: &DeleteAclsRequest, code: i16) -> DeleteAclsResponse {
        let results = request.filters.iter().map(|_| filter_error(code, None));
        DeleteAclsResponse::default().with_filter_results(results.collect())
    }
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
                .map(|_| filter_error(error.code, Some(&message)))
                .collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
    };
    let results = checked
        .iter()
        .map(|checked| match checked {
            Err(message) => filter_error(ResponseError::InvalidRequest.code(), Some(message)),
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

gregor_sdk::export_handler!(DeleteAcls);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::ResourceType;
    use gregor_sdk::bindings::gregor::broker::types::{PatternType, PermissionType};
    use gregor_sdk::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let request = DeleteAclsRequest::default().with_filters(vec![
            DeleteAclsFilter::default().with_resource_name_filter(Some(str_bytes("orders"))),
            DeleteAclsFilter::default(),
        ]);
        let deleted = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "orders".to_string(),
            pattern_type: PatternType::Prefixed,
            principal: "User:a".to_string(),
            host: "*".to_string(),
            operation: Operation::Write,
            permission: PermissionType::Deny,
        };
        let response = DeleteAclsResponse::default().with_filter_results(vec![
            DeleteAclsFilterResult::default().with_matching_acls(vec![matching(&deleted)]),
            filter_error(ResponseError::InvalidRequest.code(), Some("bad filter")),
        ]);
        assert_encodes_for_served_versions::<DeleteAcls>(&[request], &[response]);
    }
}
