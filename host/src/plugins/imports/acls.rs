//! `acls` (the authorizer's read access to the ACL store) and the one
//! place where the store's own types meet the contract's: the store keeps
//! Kafka's names in its own enums, and every conversion to or from the
//! WIT-generated types happens here.

use crate::plugins::authorizer::AuthorizerState;
use crate::plugins::bindings::authorizer::gregor::broker::acls;
use crate::plugins::bindings::handler::gregor::broker::types::{
    AclBinding as WitAclBinding, Operation as WitOperation, PatternType as WitPatternType,
    PermissionType as WitPermission, ResourceType as WitResourceType,
};
use crate::security::acl_store::{AclBinding, Operation, PatternType, Permission, ResourceType};

/// `From` both ways between a store enum and the contract's enum of the
/// same variants.
macro_rules! same_variants {
    ($domain:ident, $wit:ident, [$($variant:ident),+ $(,)?]) => {
        impl From<$wit> for $domain {
            fn from(value: $wit) -> Self {
                match value {
                    $($wit::$variant => $domain::$variant,)+
                }
            }
        }

        impl From<$domain> for $wit {
            fn from(value: $domain) -> Self {
                match value {
                    $($domain::$variant => $wit::$variant,)+
                }
            }
        }
    };
}

same_variants!(
    ResourceType,
    WitResourceType,
    [
        Any,
        Topic,
        Group,
        Cluster,
        TransactionalId,
        DelegationToken,
        User
    ]
);
same_variants!(
    Operation,
    WitOperation,
    [
        Any,
        All,
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        ClusterAction,
        DescribeConfigs,
        AlterConfigs,
        IdempotentWrite,
        CreateTokens,
        DescribeTokens,
    ]
);
same_variants!(PatternType, WitPatternType, [Literal, Prefixed]);
same_variants!(Permission, WitPermission, [Deny, Allow]);

/// A stored ACL binding in the contract's terms.
pub fn to_wit_binding(binding: &AclBinding) -> WitAclBinding {
    WitAclBinding {
        resource_type: binding.resource_type.into(),
        resource_name: binding.resource_name.clone(),
        pattern_type: binding.pattern_type.into(),
        principal: binding.principal.clone(),
        host: binding.host.clone(),
        operation: binding.operation.into(),
        permission: binding.permission.into(),
    }
}

/// A binding from the contract's terms.
pub fn from_wit_binding(binding: WitAclBinding) -> AclBinding {
    AclBinding {
        resource_type: binding.resource_type.into(),
        resource_name: binding.resource_name,
        pattern_type: binding.pattern_type.into(),
        principal: binding.principal,
        host: binding.host,
        operation: binding.operation.into(),
        permission: binding.permission.into(),
    }
}

impl acls::Host for AuthorizerState {
    fn list_acls(&mut self) -> Vec<WitAclBinding> {
        self.acls.snapshot().iter().map(to_wit_binding).collect()
    }

    fn acls_for_resource(
        &mut self,
        resource_type: WitResourceType,
        resource_name: String,
    ) -> Vec<WitAclBinding> {
        let resource_type = ResourceType::from(resource_type);
        self.acls
            .snapshot()
            .iter()
            .filter(|acl| acl.applies_to(resource_type, &resource_name))
            .map(to_wit_binding)
            .collect()
    }

    fn authorizer_config(&mut self, name: String) -> Option<String> {
        self.config.get(&name).map(str::to_string)
    }
}
