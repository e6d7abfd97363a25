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
use gregor::broker::types::{Action, ResourceType};

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

impl Guest for PrefixAuthorizer {
    fn authorize(request: AuthorizableRequest, actions: Vec<Action>) -> Vec<bool> {
        actions
            .iter()
            .map(|action| allowed(&request.principal, action))
            .collect()
    }
}

export!(PrefixAuthorizer);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor::broker::types::Operation;

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
}
