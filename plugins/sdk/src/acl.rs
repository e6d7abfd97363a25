//! ACLs on the wire: Kafka's byte codes for resource types, operations,
//! pattern types and permissions (`ResourceType.code()`, `AclOperation`,
//! `PatternType`, `AclPermissionType`) to and from the contract's enums,
//! shared by the CreateAcls, DescribeAcls and DeleteAcls handlers. A code
//! Kafka does not know, or UNKNOWN (0), maps to `None`.

use crate::acl_admin::{PatternTypeFilter, PermissionTypeFilter};
use crate::authorize::operation_code;
use crate::bindings::gregor::broker::types::{
    Operation, PatternType, PermissionType, ResourceType,
};

const RESOURCE_TYPES: [(i8, ResourceType); 7] = [
    (1, ResourceType::Any),
    (2, ResourceType::Topic),
    (3, ResourceType::Group),
    (4, ResourceType::Cluster),
    (5, ResourceType::TransactionalId),
    (6, ResourceType::DelegationToken),
    (7, ResourceType::User),
];

const OPERATIONS: [Operation; 14] = [
    Operation::Any,
    Operation::All,
    Operation::Read,
    Operation::Write,
    Operation::Create,
    Operation::Delete,
    Operation::Alter,
    Operation::Describe,
    Operation::ClusterAction,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
    Operation::IdempotentWrite,
    Operation::CreateTokens,
    Operation::DescribeTokens,
];

pub fn resource_type(code: i8) -> Option<ResourceType> {
    RESOURCE_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, t)| *t)
}

pub fn resource_type_code(resource_type: ResourceType) -> i8 {
    RESOURCE_TYPES
        .iter()
        .find(|(_, t)| *t == resource_type)
        .map(|(c, _)| *c)
        .unwrap_or(0)
}

pub fn operation(code: i8) -> Option<Operation> {
    OPERATIONS
        .iter()
        .copied()
        .find(|op| i16::from(operation_code(*op)) == i16::from(code))
}

pub fn operation_wire_code(operation: Operation) -> i8 {
    i8::try_from(operation_code(operation)).unwrap_or(0)
}

/// A pattern type filter: 1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED.
pub fn pattern_filter(code: i8) -> Option<PatternTypeFilter> {
    match code {
        1 => Some(PatternTypeFilter::Any),
        2 => Some(PatternTypeFilter::Match),
        3 => Some(PatternTypeFilter::Literal),
        4 => Some(PatternTypeFilter::Prefixed),
        _ => None,
    }
}

/// A concrete pattern type (LITERAL or PREFIXED) of a new binding.
pub fn pattern_type(code: i8) -> Option<PatternType> {
    match code {
        3 => Some(PatternType::Literal),
        4 => Some(PatternType::Prefixed),
        _ => None,
    }
}

pub fn pattern_type_code(pattern_type: PatternType) -> i8 {
    match pattern_type {
        PatternType::Literal => 3,
        PatternType::Prefixed => 4,
    }
}

/// A permission filter: 1 ANY, 2 DENY, 3 ALLOW.
pub fn permission_filter(code: i8) -> Option<PermissionTypeFilter> {
    match code {
        1 => Some(PermissionTypeFilter::Any),
        2 => Some(PermissionTypeFilter::Deny),
        3 => Some(PermissionTypeFilter::Allow),
        _ => None,
    }
}

pub fn permission(code: i8) -> Option<PermissionType> {
    match code {
        2 => Some(PermissionType::Deny),
        3 => Some(PermissionType::Allow),
        _ => None,
    }
}

pub fn permission_code(permission: PermissionType) -> i8 {
    match permission {
        PermissionType::Deny => 2,
        PermissionType::Allow => 3,
    }
}

/// Kafka's AclBindingFilter from its wire fields (DescribeAcls, DeleteAcls),
/// or the message of the INVALID_REQUEST it deserves: a filter may not
/// hold UNKNOWN elements.
pub fn binding_filter(
    resource_type_code: i8,
    resource_name: Option<&str>,
    pattern_type_code: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation_code: i8,
    permission_code: i8,
) -> Result<crate::acl_admin::AclBindingFilter, String> {
    let unknown = || "The filter contains UNKNOWN elements".to_string();
    Ok(crate::acl_admin::AclBindingFilter {
        resource_type: resource_type(resource_type_code).ok_or_else(unknown)?,
        resource_name: resource_name.map(str::to_string),
        pattern_type: pattern_filter(pattern_type_code).ok_or_else(unknown)?,
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: operation(operation_code).ok_or_else(unknown)?,
        permission: permission_filter(permission_code).ok_or_else(unknown)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 1..=7 {
            assert_eq!(resource_type_code(resource_type(code).unwrap()), code);
        }
        for code in 1..=14 {
            assert_eq!(operation_wire_code(operation(code).unwrap()), code);
        }
        assert!(operation(0).is_none() && resource_type(0).is_none());
        assert_eq!(pattern_type_code(pattern_type(4).unwrap()), 4);
        assert!(pattern_type(2).is_none());
        assert_eq!(permission_code(permission(3).unwrap()), 3);
    }
}
