//! An example authorizer with a policy of its own, no ACLs involved:
//! tenant isolation by name. A principal `User:<name>` may do anything to
//! the topics and consumer groups whose names start with `<name>`, and
//! nothing else; `User:admin` may do everything. The same policy is
//! written in Python (`authorizer_prefix_py`) and JavaScript
//! (`authorizer_prefix_js`), to show that a policy can be written in any
//! language that compiles to a component, and to compare their cost.
//!
//! Load it like any module (drop it into the plugin dir or `gregor
//! plugins load`), then switch to it live with `gregor authorizer use
//! authorizer_prefix`.

wit_bindgen::generate!({
    path: "../../../wit",
    world: "kafka-authorizer",
});

use exports::gregor::broker::authorizer::{AuthorizableRequest, Guest};
use gregor::broker::types::{Action, Operation, ResourceType};

/// The principal that may do everything.
const ADMIN: &str = "User:admin";

struct PrefixAuthorizer;

/// May `principal` perform `action`?
fn allowed(principal: &str, action: &Action) -> bool {
    if principal == ADMIN {
        return true;
    }
    let Some(name) = principal.strip_prefix("User:").filter(|n| !n.is_empty()) else {
        return false;
    };
    matches!(
        action.resource_type,
        ResourceType::Topic | ResourceType::Group
    ) && action.resource_name.starts_with(name)
}

/// May `principal` perform some operation on some resource of the type?
/// A tenant owns every name under its prefix, existing or not.
fn allowed_by_type(principal: &str, resource_type: ResourceType) -> bool {
    principal == ADMIN
        || principal
            .strip_prefix("User:")
            .is_some_and(|n| !n.is_empty())
            && matches!(resource_type, ResourceType::Topic | ResourceType::Group)
}

impl Guest for PrefixAuthorizer {
    fn authorize(request: AuthorizableRequest, actions: Vec<Action>) -> Vec<bool> {
        actions
            .iter()
            .map(|action| allowed(&request.principal, action))
            .collect()
    }

    /// This policy reads no ACLs, so Kafka's default over ACL patterns
    /// (the SDK's) does not apply: the answer follows the policy.
    fn authorize_by_resource_type(
        request: AuthorizableRequest,
        _operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        allowed_by_type(&request.principal, resource_type)
    }
}

export!(PrefixAuthorizer);

#[cfg(test)]
mod tests {
    use super::*;

    fn action(resource_type: ResourceType, name: &str) -> Action {
        Action {
            operation: Operation::Write,
            resource_type,
            resource_name: name.to_string(),
        }
    }

    #[test]
    fn tenants_see_only_their_prefix() {
        assert!(allowed(
            "User:alice",
            &action(ResourceType::Topic, "alice-orders")
        ));
        assert!(allowed("User:alice", &action(ResourceType::Group, "alice")));
        assert!(!allowed(
            "User:alice",
            &action(ResourceType::Topic, "bob-orders")
        ));
        assert!(!allowed(
            "User:alice",
            &action(ResourceType::Cluster, "kafka-cluster")
        ));
        assert!(!allowed("User:", &action(ResourceType::Topic, "x")));
        assert!(allowed(
            "User:admin",
            &action(ResourceType::Cluster, "kafka-cluster")
        ));
    }

    #[test]
    fn tenants_may_write_topics_they_have_not_created_yet() {
        assert!(allowed_by_type("User:alice", ResourceType::Topic));
        assert!(allowed_by_type("User:alice", ResourceType::Group));
        assert!(!allowed_by_type("User:alice", ResourceType::Cluster));
        assert!(!allowed_by_type("User:", ResourceType::Topic));
        assert!(!allowed_by_type("Group:x", ResourceType::Topic));
        assert!(allowed_by_type("User:admin", ResourceType::Cluster));
    }
}
