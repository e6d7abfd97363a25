//! Security services: the ACL store and authorization through the active
//! authorizer module.

pub mod acl_store;
pub mod authorization;
