//! The default authorizer: Kafka's `StandardAuthorizer` over the broker's
//! ACL store, as a module of the `kafka-authorizer` world.
//!
//! Each call reads the ACLs and the authorizer config (`super.users`,
//! `allow.everyone.if.no.acl.found`) from the host and decides every action
//! with the pure rules in [`policy`], so an ACL change applies to the next
//! request. The host fails closed: a trap here is a denial.

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
        let acls = acls::list_acls();
        actions
            .iter()
            .map(|action| {
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
