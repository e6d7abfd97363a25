//! CreateAcls (ApiKey 30): add ACL bindings, as Kafka's AclApis and
//! AclControlManager do.
//!
//! - Versions 0-3: v0, which Kafka 4 removed (KIP-896), is v1 with literal
//!   patterns only ([`gregor_sdk::legacy::acl`]).
//! - ALTER on the Cluster is required; without it every creation gets
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - Each binding is validated alone (INVALID_REQUEST with Kafka's
//!   message): the resource type, operation and permission must be
//!   concrete (not ANY or UNKNOWN), the pattern LITERAL or PREFIXED, the
//!   name non-empty (and `kafka-cluster` for the Cluster), the principal
//!   `Type:name`. The valid ones are stored together, durably; adding a
//!   binding that exists changes nothing.
//! - Kafka's controller writes a record per new binding and at most 10000
//!   for one request: over that, every creation gets POLICY_VIOLATION
//!   ("Unable to perform excessively large batch operation.") and nothing
//!   is stored (the host checks this).
//! - Unlike Kafka without an authorizer (SECURITY_DISABLED), the store
//!   accepts ACLs whichever authorizer is active, since the authorizer
//!   can be switched live to one that reads them.
//! - Error response (a trap or timeout): every creation with the error, as
//!   Kafka's `CreateAclsRequest.getErrorResponse`.

use gregor_sdk::acl;
use gregor_sdk::acl_admin;
use gregor_sdk::authorize::{on_cluster, CLUSTER_NAME};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::bindings::gregor::broker::types::AclBinding;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::create_acls_request::AclCreation;
use gregor_sdk::kafka_protocol::messages::create_acls_response::AclCreationResult;
use gregor_sdk::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use gregor_sdk::request_caps;
use gregor_sdk::AnswerError;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct CreateAcls;

/// A creation as a binding, or why it is invalid.
fn binding(creation: &AclCreation) -> Result<AclBinding, String> {
    let resource_type = acl::resource_type(creation.resource_type)
        .filter(|t| *t != ResourceType::Any)
        .ok_or_else(|| format!("Invalid resourceType {}", creation.resource_type))?;
    let pattern_type = acl::pattern_type(creation.resource_pattern_type)
        .ok_or_else(|| format!("Invalid patternType {}", creation.resource_pattern_type))?;
    let operation = acl::operation(creation.operation)
        .filter(|op| *op != Operation::Any)
        .ok_or_else(|| format!("Invalid operation {}", creation.operation))?;
    let permission = acl::permission(creation.permission_type)
        .ok_or_else(|| format!("Invalid permissionType {}", creation.permission_type))?;
    let name = creation.resource_name.as_str();
    if name.is_empty() {
        return Err("Invalid empty resource name".to_string());
    }
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    let principal = creation.principal.as_str();
    if !principal.contains(':') {
        return Err(format!(
            "Could not parse principal from `{principal}` (no colon is present separating the principal type from the principal name)"
        ));
    }
    Ok(AclBinding {
        resource_type,
        resource_name: name.to_string(),
        pattern_type,
        principal: principal.to_string(),
        host: creation.host.to_string(),
        operation,
        permission,
    })
}

impl Handler for CreateAcls {
    gregor_sdk::api!(CreateAclsRequest, 0..=3);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::acl::CREATE);

    fn handle(ctx: &RequestContext, request: &CreateAclsRequest) -> Reply<CreateAclsResponse> {
        on_cluster::<Self>(ctx, request, Operation::Alter, || create(request))
    }

    /// Kafka's `getErrorResponse`: every creation with the error.
    fn failed(_: &RequestContext, request: &CreateAclsRequest, code: i16) -> CreateAclsResponse {
        let results = request.creations.iter().map(|_| result(code, None));
        CreateAclsResponse::default().with_results(results.collect())
    }
}

/// Validates each creation and stores the valid ones together.
fn create(request: &CreateAclsRequest) -> CreateAclsResponse {
    let checked: Vec<Result<AclBinding, String>> = request.creations.iter().map(binding).collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|checked| checked.as_ref().ok().cloned())
        .collect();
    let stored = if valid.is_empty() {
        Vec::new()
    } else {
        acl_admin::create_acls(&valid)
    };
    // Over Kafka's cap the whole request fails: every creation, valid or
    // not, gets the host's POLICY_VIOLATION.
    if let Some(refused) = stored
        .iter()
        .find(|outcome| outcome.error_code() == request_caps::POLICY_VIOLATION)
    {
        let results = request
            .creations
            .iter()
            .map(|_| result(refused.error_code(), refused.error_message().as_deref()))
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let mut stored = stored.into_iter();
    let results = checked
        .iter()
        .map(|checked| match checked {
            Err(message) => result(ResponseError::InvalidRequest.code(), Some(message)),
            Ok(_) => match stored.next() {
                Some(outcome) => result(outcome.error_code(), outcome.error_message().as_deref()),
                None => result(ResponseError::UnknownServerError.code(), None),
            },
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// One creation's answer.
fn result(code: i16, message: Option<&str>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code)
        .with_error_message(message.map(str_bytes))
}

gregor_sdk::export_handler!(CreateAcls);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaError;

    fn creation(
        resource_type: i8,
        name: &str,
        pattern: i8,
        principal: &str,
        operation: i8,
    ) -> AclCreation {
        AclCreation::default()
            .with_resource_type(resource_type)
            .with_resource_name(str_bytes(name))
            .with_resource_pattern_type(pattern)
            .with_principal(str_bytes(principal))
            .with_host(str_bytes("*"))
            .with_operation(operation)
            .with_permission_type(3)
    }

    #[test]
    fn validates_like_kafka() {
        let good = binding(&creation(2, "orders", 4, "User:alice", 4)).unwrap();
        assert_eq!(good.resource_type, ResourceType::Topic);
        assert_eq!(good.operation, Operation::Write);
        for (bad, why) in [
            (creation(1, "orders", 3, "User:a", 4), "resourceType"),
            (creation(0, "orders", 3, "User:a", 4), "resourceType"),
            (creation(2, "orders", 2, "User:a", 4), "patternType"),
            (creation(2, "orders", 3, "User:a", 1), "operation"),
            (creation(2, "", 3, "User:a", 4), "empty"),
            (creation(4, "other", 3, "User:a", 7), "CLUSTER"),
            (creation(2, "orders", 3, "alice", 4), "colon"),
        ] {
            let message = binding(&bad).unwrap_err();
            assert!(message.contains(why), "{message} should mention {why}");
        }
        assert!(binding(&creation(4, CLUSTER_NAME, 3, "User:a", 7)).is_ok());
    }

    #[test]
    fn encodes_for_every_served_version() {
        let request = CreateAclsRequest::default().with_creations(vec![
            creation(2, "orders", 3, "User:a", 4),
            creation(2, "", 3, "User:a", 4),
        ]);
        assert_encodes_for_served_versions::<CreateAcls>(
            &[request],
            &[CreateAclsResponse::default().with_results(vec![
                result(0, None),
                result(
                    ResponseError::InvalidRequest.code(),
                    Some("Invalid empty resource name"),
                ),
            ])],
        );
    }

    /// An ACL store that refuses nothing; ALTER on the Cluster as
    /// `allowed` says.
    struct Store {
        allowed: bool,
    }

    impl FakeHost for Store {
        fn authorize(&self, _: &Action) -> bool {
            self.allowed
        }
        fn create_acls(&self, bindings: &[AclBinding]) -> Vec<Option<KafkaError>> {
            assert!(self.allowed, "an unauthorized creation reached the store");
            vec![None; bindings.len()]
        }
    }

    fn codes(handled: fake::Handled<CreateAclsResponse>) -> Vec<i16> {
        let response = handled.response.unwrap();
        response.results.iter().map(|r| r.error_code).collect()
    }

    #[test]
    fn invalid_creations_are_refused_alone() {
        let request = CreateAclsRequest::default().with_creations(vec![
            creation(2, "", 3, "User:a", 4),
            creation(2, "orders", 3, "User:a", 4),
            creation(2, "orders", 3, "alice", 4),
        ]);
        let invalid = ResponseError::InvalidRequest.code();
        let handled = fake::handle::<CreateAcls>(Store { allowed: true }, 3, &request);
        assert_eq!(codes(handled), [invalid, 0, invalid]);
    }

    #[test]
    fn without_alter_on_the_cluster_every_creation_is_refused() {
        let request = CreateAclsRequest::default().with_creations(vec![
            creation(2, "orders", 3, "User:a", 4),
            creation(2, "", 3, "User:a", 4),
        ]);
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let handled = fake::handle::<CreateAcls>(Store { allowed: false }, 1, &request);
        assert_eq!(handled.counted_errors, [denied, denied]);
        assert_eq!(codes(handled), [denied, denied]);
    }
}
