//! DescribeAcls (ApiKey 29): the ACL bindings matching one filter, grouped
//! by resource pattern, as Kafka's AclApis answers.
//!
//! - Versions 0-3: v0, which Kafka 4 removed (KIP-896), is v1 with literal
//!   patterns only ([`gregor_sdk::legacy::acl`]).
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
use gregor_sdk::authorize::on_cluster;
use gregor_sdk::authz::Operation;
use gregor_sdk::bindings::gregor::broker::types::AclBinding;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource,
};
use gregor_sdk::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

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

impl Handler for DescribeAcls {
    gregor_sdk::api!(DescribeAclsRequest, 0..=3);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::acl::DESCRIBE);

    fn handle(ctx: &RequestContext, request: &DescribeAclsRequest) -> Reply<DescribeAclsResponse> {
        on_cluster::<Self>(ctx, request, Operation::Describe, || describe_acls(request))
    }

    /// Kafka's `getErrorResponse`: the error, no resources.
    fn failed(_: &RequestContext, _: &DescribeAclsRequest, code: i16) -> DescribeAclsResponse {
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(None)
    }
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

gregor_sdk::export_handler!(DescribeAcls);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::ResourceType;
    use gregor_sdk::bindings::gregor::broker::types::{PatternType, PermissionType};
    use gregor_sdk::testing::assert_encodes_for_served_versions;

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
    fn encodes_for_every_served_version() {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(Some(str_bytes("orders")))
            .with_pattern_type_filter(3);
        let described =
            DescribeAclsResponse::default().with_resources(resources(vec![binding("a", "User:x")]));
        let invalid = DescribeAclsResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(str_bytes("bad filter")));
        assert_encodes_for_served_versions::<DescribeAcls>(&[request], &[described, invalid]);
    }
}
