//! The decision rules of Kafka's `StandardAuthorizer` (`StandardAuthorizerData`),
//! as pure functions over the ACL bindings and one action:
//!
//! 1. Super users (`super.users`, `;`-separated principals) may do anything.
//! 2. An ACL applies to the action's resource when its resource type is the
//!    same and its pattern matches the name: LITERAL equal (a LITERAL `*`
//!    matches every name) or PREFIXED a prefix of it.
//! 3. Of those, an ACL matches the request when its principal is the
//!    request's or `User:*`, its host is the client's IP or `*`, and its
//!    operation is the action's or ALL. An ALLOW on READ, WRITE, DELETE or
//!    ALTER also allows DESCRIBE, and an ALLOW on ALTER_CONFIGS also allows
//!    DESCRIBE_CONFIGS; a DENY never extends beyond its operation.
//! 4. Any matching DENY denies; otherwise any matching ALLOW allows.
//! 5. No matching ACL: denied if the resource has ACLs at all (whoever they
//!    are for), else `allow.everyone.if.no.acl.found` decides (default false).

use crate::gregor::broker::types::{
    AclBinding, Action, Operation, PatternType, PermissionType, ResourceType,
};

/// Kafka's wildcard resource name (with LITERAL) and host.
const WILDCARD: &str = "*";
/// Kafka's wildcard principal.
const WILDCARD_PRINCIPAL: &str = "User:*";

/// The authorizer's configuration.
#[derive(Debug, Default, PartialEq)]
pub struct Config {
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl Config {
    /// From the values of `super.users` and `allow.everyone.if.no.acl.found`.
    pub fn parse(
        super_users: Option<&str>,
        allow_everyone_if_no_acl_found: Option<&str>,
    ) -> Config {
        Config {
            super_users: super_users
                .unwrap_or_default()
                .split(';')
                .map(str::trim)
                .filter(|user| !user.is_empty())
                .map(str::to_string)
                .collect(),
            allow_everyone_if_no_acl_found: allow_everyone_if_no_acl_found
                .is_some_and(|value| value.trim().eq_ignore_ascii_case("true")),
        }
    }
}

/// May `principal`, connected from `host`, perform `action`?
pub fn authorize(
    config: &Config,
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    action: &Action,
) -> bool {
    if config.super_users.iter().any(|user| user == principal) {
        return true;
    }
    // A question about no operation or resource in particular is not a
    // permission anyone can hold.
    if action.operation == Operation::Any || action.resource_type == ResourceType::Any {
        return false;
    }
    let mut resource_has_acls = false;
    let mut allowed = false;
    for acl in acls.iter().filter(|acl| applies_to_resource(acl, action)) {
        resource_has_acls = true;
        match matches_request(acl, principal, host, action.operation) {
            Some(PermissionType::Deny) => return false,
            Some(PermissionType::Allow) => allowed = true,
            None => {}
        }
    }
    if resource_has_acls {
        allowed
    } else {
        config.allow_everyone_if_no_acl_found
    }
}

/// Does the ACL's resource pattern cover the action's resource?
fn applies_to_resource(acl: &AclBinding, action: &Action) -> bool {
    acl.resource_type == action.resource_type
        && match acl.pattern_type {
            PatternType::Literal => {
                acl.resource_name == action.resource_name || acl.resource_name == WILDCARD
            }
            PatternType::Prefixed => action.resource_name.starts_with(&acl.resource_name),
        }
}

/// The ACL's permission if it matches the principal, host and operation.
fn matches_request(
    acl: &AclBinding,
    principal: &str,
    host: &str,
    operation: Operation,
) -> Option<PermissionType> {
    let principal_matches = acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL;
    let host_matches = acl.host == WILDCARD || acl.host == host;
    let operation_matches = acl.operation == Operation::All
        || acl.operation == operation
        || (acl.permission == PermissionType::Allow && implies(acl.operation, operation));
    (principal_matches && host_matches && operation_matches).then_some(acl.permission)
}

/// Does an ALLOW on `granted` also allow `wanted`?
fn implies(granted: Operation, wanted: Operation) -> bool {
    use Operation::*;
    match wanted {
        Describe => matches!(granted, Read | Write | Delete | Alter),
        DescribeConfigs => granted == AlterConfigs,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "User:alice";
    const HOST: &str = "10.0.0.1";

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern_type: PatternType,
        principal: &str,
        host: &str,
        operation: Operation,
        permission: PermissionType,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: host.to_string(),
            operation,
            permission,
        }
    }

    /// An ACL on topic `name` (LITERAL) for alice from any host.
    fn topic_acl(name: &str, operation: Operation, permission: PermissionType) -> AclBinding {
        acl(
            ResourceType::Topic,
            name,
            PatternType::Literal,
            ALICE,
            "*",
            operation,
            permission,
        )
    }

    fn allow(name: &str, operation: Operation) -> AclBinding {
        topic_acl(name, operation, PermissionType::Allow)
    }

    fn deny(name: &str, operation: Operation) -> AclBinding {
        topic_acl(name, operation, PermissionType::Deny)
    }

    /// A PREFIXED ALLOW for alice from any host.
    fn allow_prefixed(prefix: &str, operation: Operation) -> AclBinding {
        let literal = allow(prefix, operation);
        AclBinding {
            pattern_type: PatternType::Prefixed,
            ..literal
        }
    }

    /// Bob may read topic `name` (LITERAL) from any host.
    fn bob_reads(name: &str) -> AclBinding {
        AclBinding {
            principal: "User:bob".to_string(),
            ..allow(name, Operation::Read)
        }
    }

    fn topic(operation: Operation, name: &str) -> Action {
        Action {
            operation,
            resource_type: ResourceType::Topic,
            resource_name: name.to_string(),
        }
    }

    fn check(acls: &[AclBinding], action: &Action) -> bool {
        authorize(&Config::default(), acls, ALICE, HOST, action)
    }

    /// Whether alice may read topic "orders" under `acls` when resources
    /// without ACLs are open to everyone.
    fn open_reads_orders(acls: &[AclBinding]) -> bool {
        let open = Config::parse(None, Some("true"));
        authorize(&open, acls, ALICE, HOST, &topic(Operation::Read, "orders"))
    }

    #[test]
    fn config_parses_super_users_and_default() {
        let config = Config::parse(Some(" User:admin ;User:ops;; "), None);
        assert_eq!(config.super_users, vec!["User:admin", "User:ops"]);
        assert!(!config.allow_everyone_if_no_acl_found);
        assert!(Config::parse(None, Some("TRUE")).allow_everyone_if_no_acl_found);
        assert!(!Config::parse(None, Some("false")).allow_everyone_if_no_acl_found);
        assert!(!Config::parse(None, Some("yes")).allow_everyone_if_no_acl_found);
        assert_eq!(Config::parse(None, None), Config::default());
    }

    #[test]
    fn super_users_are_always_allowed() {
        let config = Config::parse(Some("User:admin;User:alice"), None);
        let acls = [deny("orders", Operation::All)];
        assert!(authorize(
            &config,
            &acls,
            ALICE,
            HOST,
            &topic(Operation::Write, "orders")
        ));
        assert!(authorize(
            &config,
            &[],
            "User:admin",
            HOST,
            &topic(Operation::Delete, "x")
        ));
        assert!(!authorize(
            &config,
            &acls,
            "User:bob",
            HOST,
            &topic(Operation::Write, "orders")
        ));
        // Exact principal match only: no prefixing, no case folding.
        assert!(!authorize(
            &config,
            &[],
            "User:ADMIN",
            HOST,
            &topic(Operation::Read, "x")
        ));
    }

    #[test]
    fn no_acl_on_resource_uses_allow_everyone() {
        let open = Config::parse(None, Some("true"));
        let action = topic(Operation::Read, "orders");
        assert!(!authorize(&Config::default(), &[], ALICE, HOST, &action));
        assert!(authorize(&open, &[], ALICE, HOST, &action));
        // ACLs on other resources do not count as ACLs on this one.
        let elsewhere = [allow("payments", Operation::Read)];
        assert!(authorize(&open, &elsewhere, ALICE, HOST, &action));
        let on_group = [acl(
            ResourceType::Group,
            "orders",
            PatternType::Literal,
            ALICE,
            "*",
            Operation::Read,
            PermissionType::Allow,
        )];
        assert!(authorize(&open, &on_group, ALICE, HOST, &action));
    }

    #[test]
    fn acls_on_resource_for_someone_else_deny_even_when_open() {
        let for_bob = [bob_reads("orders")];
        assert!(!open_reads_orders(&for_bob));
        // Another operation's ACL on the resource also means "has ACLs".
        let write_only = [allow("orders", Operation::Write)];
        assert!(!open_reads_orders(&write_only));
    }

    #[test]
    fn allow_matches_its_operation_only() {
        let acls = [allow("orders", Operation::Read)];
        assert!(check(&acls, &topic(Operation::Read, "orders")));
        assert!(!check(&acls, &topic(Operation::Write, "orders")));
        assert!(!check(&acls, &topic(Operation::Read, "orders2")));
    }

    #[test]
    fn deny_wins_over_allow() {
        let acls = [
            allow("orders", Operation::All),
            deny("orders", Operation::Write),
        ];
        assert!(check(&acls, &topic(Operation::Read, "orders")));
        assert!(!check(&acls, &topic(Operation::Write, "orders")));
        // Order does not matter.
        let acls = [
            deny("orders", Operation::Write),
            allow("orders", Operation::Write),
        ];
        assert!(!check(&acls, &topic(Operation::Write, "orders")));
        // A DENY through a wildcard principal, prefix or host applies too.
        let acls = [
            allow("orders", Operation::Read),
            acl(
                ResourceType::Topic,
                "ord",
                PatternType::Prefixed,
                WILDCARD_PRINCIPAL,
                HOST,
                Operation::Read,
                PermissionType::Deny,
            ),
        ];
        assert!(!check(&acls, &topic(Operation::Read, "orders")));
    }

    #[test]
    fn all_operation_matches_every_operation() {
        let acls = [allow("orders", Operation::All)];
        for operation in [
            Operation::Read,
            Operation::Write,
            Operation::Create,
            Operation::Delete,
            Operation::Alter,
            Operation::Describe,
            Operation::DescribeConfigs,
            Operation::AlterConfigs,
        ] {
            assert!(check(&acls, &topic(operation, "orders")), "{operation:?}");
        }
        let acls = [
            allow("orders", Operation::All),
            deny("orders", Operation::All),
        ];
        assert!(!check(&acls, &topic(Operation::Describe, "orders")));
    }

    #[test]
    fn allow_implies_describe() {
        for granted in [
            Operation::Read,
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
        ] {
            assert!(
                check(&[allow("t", granted)], &topic(Operation::Describe, "t")),
                "{granted:?}"
            );
        }
        for granted in [
            Operation::Create,
            Operation::AlterConfigs,
            Operation::DescribeConfigs,
        ] {
            assert!(
                !check(&[allow("t", granted)], &topic(Operation::Describe, "t")),
                "{granted:?}"
            );
        }
        // Implication does not run backwards.
        assert!(!check(
            &[allow("t", Operation::Describe)],
            &topic(Operation::Read, "t")
        ));
    }

    #[test]
    fn alter_configs_implies_describe_configs() {
        assert!(check(
            &[allow("t", Operation::AlterConfigs)],
            &topic(Operation::DescribeConfigs, "t")
        ));
        assert!(!check(
            &[allow("t", Operation::Alter)],
            &topic(Operation::DescribeConfigs, "t")
        ));
        assert!(!check(
            &[allow("t", Operation::DescribeConfigs)],
            &topic(Operation::AlterConfigs, "t")
        ));
    }

    #[test]
    fn deny_implies_nothing() {
        // DENY READ does not deny DESCRIBE, and DENY ALTER_CONFIGS does not
        // deny DESCRIBE_CONFIGS.
        let acls = [allow("t", Operation::Describe), deny("t", Operation::Read)];
        assert!(check(&acls, &topic(Operation::Describe, "t")));
        assert!(!check(&acls, &topic(Operation::Read, "t")));
        let acls = [
            allow("t", Operation::DescribeConfigs),
            deny("t", Operation::AlterConfigs),
        ];
        assert!(check(&acls, &topic(Operation::DescribeConfigs, "t")));
        // A DENY READ next to an ALLOW WRITE: DESCRIBE is still allowed.
        let acls = [allow("t", Operation::Write), deny("t", Operation::Read)];
        assert!(check(&acls, &topic(Operation::Describe, "t")));
    }

    #[test]
    fn wildcard_principal_matches_everyone() {
        let acls = [acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            WILDCARD_PRINCIPAL,
            "*",
            Operation::Read,
            PermissionType::Allow,
        )];
        assert!(check(&acls, &topic(Operation::Read, "t")));
        assert!(authorize(
            &Config::default(),
            &acls,
            "User:bob",
            HOST,
            &topic(Operation::Read, "t")
        ));
        // Only `User:*` is a wildcard.
        let acls = [acl(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            "*",
            "*",
            Operation::Read,
            PermissionType::Allow,
        )];
        assert!(!check(&acls, &topic(Operation::Read, "t")));
    }

    #[test]
    fn literal_wildcard_name_matches_every_name() {
        let acls = [allow("*", Operation::Read)];
        assert!(check(&acls, &topic(Operation::Read, "orders")));
        assert!(check(&acls, &topic(Operation::Read, "*")));
        assert!(!check(&acls, &topic(Operation::Write, "orders")));
        // A literal "*" ACL counts as an ACL on every resource of its type.
        let for_bob = [bob_reads("*")];
        assert!(!open_reads_orders(&for_bob));
        // A PREFIXED "*" is an ordinary prefix.
        let acls = [allow_prefixed("*", Operation::Read)];
        assert!(!check(&acls, &topic(Operation::Read, "orders")));
        assert!(check(&acls, &topic(Operation::Read, "*orders")));
    }

    #[test]
    fn prefixed_patterns_match_names_that_start_with_them() {
        let acls = [allow_prefixed("orders.", Operation::Write)];
        assert!(check(&acls, &topic(Operation::Write, "orders.eu")));
        assert!(check(&acls, &topic(Operation::Write, "orders.")));
        assert!(!check(&acls, &topic(Operation::Write, "orders")));
        assert!(!check(
            &acls,
            &topic(Operation::Write, "payments.orders.eu")
        ));
        // A LITERAL name is not a prefix.
        assert!(!check(
            &[allow("orders", Operation::Write)],
            &topic(Operation::Write, "orders.eu")
        ));
    }

    #[test]
    fn host_is_wildcard_or_exact() {
        let from = |host: &str| {
            acl(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                ALICE,
                host,
                Operation::Read,
                PermissionType::Allow,
            )
        };
        assert!(check(&[from(HOST)], &topic(Operation::Read, "t")));
        assert!(check(&[from("*")], &topic(Operation::Read, "t")));
        assert!(!check(&[from("10.0.0.2")], &topic(Operation::Read, "t")));
        assert!(!check(&[from("10.0.0.")], &topic(Operation::Read, "t")));
        // A DENY from another host does not apply.
        let acls = [
            from("*"),
            acl(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                ALICE,
                "10.0.0.2",
                Operation::Read,
                PermissionType::Deny,
            ),
        ];
        assert!(check(&acls, &topic(Operation::Read, "t")));
    }

    #[test]
    fn resource_types_are_separate() {
        let acls = [allow("orders", Operation::Read)];
        let group = Action {
            operation: Operation::Read,
            resource_type: ResourceType::Group,
            resource_name: "orders".to_string(),
        };
        assert!(!check(&acls, &group));
        let cluster_acl = acl(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            ALICE,
            "*",
            Operation::Create,
            PermissionType::Allow,
        );
        let create = Action {
            operation: Operation::Create,
            resource_type: ResourceType::Cluster,
            resource_name: "kafka-cluster".to_string(),
        };
        assert!(check(&[cluster_acl], &create));
    }

    #[test]
    fn non_concrete_actions_are_denied() {
        let open = Config::parse(None, Some("true"));
        let any_operation = topic(Operation::Any, "t");
        assert!(!authorize(&open, &[], ALICE, HOST, &any_operation));
        let any_resource = Action {
            operation: Operation::Read,
            resource_type: ResourceType::Any,
            resource_name: "t".to_string(),
        };
        assert!(!authorize(&open, &[], ALICE, HOST, &any_resource));
    }
}
