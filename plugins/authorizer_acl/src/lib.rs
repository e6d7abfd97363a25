//! The default authorizer: Kafka's `StandardAuthorizer` over the broker's
//! ACL store, as a module of the `kafka-authorizer` world.
//!
//! Each call reads the authorizer config (`super.users`,
//! `allow.everyone.if.no.acl.found`) and, per action, the ACLs that apply
//! to its resource from the host, and decides with the pure rules in
//! [`policy`], so an ACL change applies to the next request. The host
//! caches the decisions until the ACLs change, and fails closed: a trap
//! here is a denial. "By resource type" questions are Kafka's default
//! over the whole list of ACLs (`gregor_sdk::by_resource_type`).

mod policy;

wit_bindgen::generate!({
    path: "../../wit",
    world: "kafka-authorizer",
});

use exports::gregor::broker::authorizer::{AuthorizableRequest, Guest};
use gregor::broker::acls;
use gregor::broker::logging::{self, Level};
use gregor::broker::types::{
    AclBinding, Action, Operation, PatternType, PermissionType, ResourceType,
};
use gregor_sdk::by_resource_type::{self, Binding, HARDCODED_NAME};

struct AclAuthorizer;

/// The authorizer config as this call finds it.
fn config() -> policy::Config {
    policy::Config::parse(
        acls::authorizer_config("super.users").as_deref(),
        acls::authorizer_config("allow.everyone.if.no.acl.found").as_deref(),
    )
}

impl Guest for AclAuthorizer {
    fn authorize(request: AuthorizableRequest, actions: Vec<Action>) -> Vec<bool> {
        let config = config();
        actions
            .iter()
            .map(|action| {
                // Only the bindings that apply to this resource cross the
                // boundary, so the cost follows them, not the store's size.
                let acls = acls::acls_for_resource(action.resource_type, &action.resource_name);
                let allowed = policy::authorize(&config, &acls, &request.principal, &request.client_host, action);
                if !allowed {
                    logging::log(
                        Level::Debug,
                        &format!(
                            "Principal = {} is Denied operation = {:?} from host = {} on resource = {:?}:LITERAL:{}",
                            request.principal,
                            action.operation,
                            request.client_host,
                            action.resource_type,
                            action.resource_name
                        ),
                    );
                }
                allowed
            })
            .collect()
    }

    /// Kafka's default `authorizeByResourceType` (StandardAuthorizer has no
    /// other): the answer for a resource named "hardcode" first (super
    /// users, `allow.everyone.if.no.acl.found`), then the type's ACL
    /// patterns alone.
    fn authorize_by_resource_type(
        request: AuthorizableRequest,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let hardcoded = Action {
            operation,
            resource_type,
            resource_name: HARDCODED_NAME.to_string(),
        };
        let hardcoded_allowed = || Self::authorize(request.clone(), vec![hardcoded]) == [true];
        let acls: Vec<AclBinding> = acls::list_acls()
            .into_iter()
            .filter(|acl| acl.resource_type == resource_type)
            .collect();
        let bindings = acls.iter().map(|acl| Binding {
            principal: &acl.principal,
            host: &acl.host,
            operation_matches: acl.operation == operation || acl.operation == Operation::All,
            allow: acl.permission == PermissionType::Allow,
            prefixed: acl.pattern_type == PatternType::Prefixed,
            name: &acl.resource_name,
        });
        by_resource_type::allowed(
            &request.principal,
            &request.client_host,
            hardcoded_allowed,
            bindings,
        )
    }
}

export!(AclAuthorizer);
