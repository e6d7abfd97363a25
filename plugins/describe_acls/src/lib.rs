//! DescribeAcls (ApiKey 29): the ACL bindings matching one filter, grouped
//! by resource pattern, as Kafka's AclApis answers.
//!
//! - DESCRIBE on the Cluster is required; without it the response carries
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - The filter follows Kafka's AclBindingFilter: ANY matches every type,
//!   operation and permission, a null name, principal or host matches
//!   every one, and the MATCH pattern type selects every binding that
//!   applies to the named resource (LITERAL equal or `*`, PREFIXED
//!   prefixes). A filter with UNKNOWN elements is INVALID_REQUEST.
//! - Error response (a trap or timeout): the error and no resources, as
//!   Kafka's `DescribeAclsRequest.getErrorResponse`.

use gregor_sdk::acl::{self, binding_filter};
use gregor_sdk::acl_admin;
use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::bindings::gregor::broker::types::AclBinding;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource,
};
use gregor_sdk::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct DescribeAcls;

/// Kafka's `DescribeAclsResponse.aclsResources`: one resource per
/// pattern, in order of first appearance, with its ACLs.
fn resources(bindings: Vec<AclBinding>) -> Vec<DescribeAclsResource> {
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for binding in bindings {
        let resource_type = acl::resource_type_code(binding.resource_type);
        let pattern_type = acl::pattern_type_code(binding.pattern_type);
        let description = AclDescription::default()
            .with_principal(str_bytes(&binding.principal))
            .with_host(str_bytes(&binding.host))
            .with_operation(acl::operation_wire_code(binding.operation))
            .with_permission_type(acl::permission_code(binding.permission));
        let existing = resources.iter_mut().find(|resource| {
            resource.resource_type == resource_type
                && resource.pattern_type == pattern_type
                && resource.resource_name.as_str() == binding.resource_name
        });
        match existing {
            Some(resource) => resource.acls.push(description),
            None => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(str_bytes(&binding.resource_name))
                    .with_pattern_type(pattern_type)
                    .with_acls(vec![description]),
            ),
        }
    }
    resources
}

impl RawHandler for DescribeAcls {
    fn describe() -> ApiInfo {
        api_info::<DescribeAclsRequest>("DescribeAcls", 1, 3)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: DescribeAclsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = if cluster_allowed(Operation::Describe) {
            describe_acls(&request)
        } else {
            error_response_for(ResponseError::ClusterAuthorizationFailed.code())
        };
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error, no resources.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        // Nothing of the request is echoed, but a body that does not decode
        // gets no response.
        decode::<DescribeAclsRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(error_code))
    }
}

/// The request answered with `error_code` and no resources.
fn error_response_for(error_code: i16) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(error_code)
        .with_error_message(None)
}

/// The bindings matching the request's filter, or INVALID_REQUEST.
fn describe_acls(request: &DescribeAclsRequest) -> DescribeAclsResponse {
    let filter = binding_filter(
        request.resource_type_filter,
        request.resource_name_filter.as_ref().map(|n| n.as_str()),
        request.pattern_type_filter,
        request.principal_filter.as_ref().map(|p| p.as_str()),
        request.host_filter.as_ref().map(|h| h.as_str()),
        request.operation,
        request.permission_type,
    );
    match filter {
        Ok(filter) => DescribeAclsResponse::default()
            .with_resources(resources(acl_admin::describe_acls(&filter))),
        Err(message) => DescribeAclsResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(str_bytes(&message))),
    }
}

gregor_sdk::export_raw_handler!(DescribeAcls);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::ResourceType;
    use gregor_sdk::bindings::gregor::broker::types::{PatternType, PermissionType};

    fn binding(name: &str, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.to_string(),
            pattern_type: PatternType::Literal,
            principal: principal.to_string(),
            host: "*".to_string(),
            operation: Operation::Read,
            permission: PermissionType::Allow,
        }
    }

    #[test]
    fn groups_bindings_by_resource_pattern() {
        let grouped = resources(vec![
            binding("a", "User:x"),
            binding("b", "User:x"),
            binding("a", "User:y"),
        ]);
        assert_eq!(grouped.len(), 2);
        assert_eq!(grouped[0].resource_name.as_str(), "a");
        assert_eq!(grouped[0].acls.len(), 2);
        assert_eq!(grouped[0].resource_type, 2);
        assert_eq!(grouped[0].pattern_type, 3);
        assert_eq!(grouped[0].acls[1].operation, 3);
        assert_eq!(grouped[0].acls[1].permission_type, 3);
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        use gregor_sdk::kafka_protocol::protocol::Encodable;
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(code);
        assert_eq!(response.error_code, code);
        assert!(response.resources.is_empty());
        for version in 1..=3 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
