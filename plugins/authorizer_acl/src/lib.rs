//! The default authorizer: Kafka's `StandardAuthorizer` over the broker's
//! ACL store, as a module of the `kafka-authorizer` world.
//!
//! Each call reads the authorizer config (`super.users`,
//! `allow.everyone.if.no.acl.found`) and, per action, the ACLs that apply
//! to its resource from the host, and decides with the pure rules in
//! [`policy`], so an ACL change applies to the next request. The host
//! caches the decisions until the ACLs change, and fails closed: a trap
//! here is a denial.

mod policy;

wit_bindgen::generate!({
    path: "../../wit",
    world: "kafka-authorizer",
});

use exports::gregor::broker::authorizer::{AuthorizableRequest, Guest};
use gregor::broker::acls;
use gregor::broker::logging::{self, Level};
use gregor::broker::types::Action;

struct AclAuthorizer;

impl Guest for AclAuthorizer {
    fn authorize(request: AuthorizableRequest, actions: Vec<Action>) -> Vec<bool> {
        let config = policy::Config::parse(
            acls::authorizer_config("super.users").as_deref(),
            acls::authorizer_config("allow.everyone.if.no.acl.found").as_deref(),
        );
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
}

export!(AclAuthorizer);
