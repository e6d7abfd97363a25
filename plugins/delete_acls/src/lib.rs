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
    api_info, decode, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
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

fn failed(error: ResponseError, message: Option<&str>) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error.code())
        .with_error_message(message.map(str_bytes))
}

impl Handler for DeleteAcls {
    fn describe() -> ApiInfo {
        api_info::<DeleteAclsRequest>("DeleteAcls", 1, 3)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DeleteAclsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = DeleteAclsResponse::default();
        if !cluster_allowed(Operation::Alter) {
            response.filter_results = request
                .filters
                .iter()
                .map(|_| failed(ResponseError::ClusterAuthorizationFailed, None))
                .collect();
            return respond(&ctx, &response);
        }
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
                let message = error.message.unwrap_or_default();
                response.filter_results = checked
                    .iter()
                    .map(|_| failed(ResponseError::UnknownServerError, Some(&message)))
                    .collect();
                return respond(&ctx, &response);
            }
        };
        response.filter_results = checked
            .iter()
            .map(|checked| match checked {
                Err(message) => failed(ResponseError::InvalidRequest, Some(message)),
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
        respond(&ctx, &response)
    }
}

gregor_sdk::export_handler!(DeleteAcls);
