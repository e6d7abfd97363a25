//! The ACL store the authorizer module reads through the `acls` import.
//!
//! ACL bindings are kept in memory behind a lock, replaced as a whole on
//! change so readers never see a half-applied update. CreateAcls and
//! DeleteAcls (and their persistence) arrive with the security work; until
//! then the store starts empty and the authorizer's configuration
//! (`super.users`, `allow.everyone.if.no.acl.found`) decides.

use std::sync::{Arc, RwLock};

use crate::plugins::bindings::{Operation, ResourceType};

// ACLs are written by CreateAcls/DeleteAcls, which arrive with the security
// work; until then only the authorizer's reading side exists.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternType {
    Literal,
    Prefixed,
}

#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Deny,
    Allow,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

#[derive(Default)]
pub struct AclStore {
    bindings: RwLock<Arc<Vec<AclBinding>>>,
}

impl AclStore {
    /// Every binding, as one consistent snapshot.
    pub fn snapshot(&self) -> Arc<Vec<AclBinding>> {
        match self.bindings.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the whole set (CreateAcls/DeleteAcls, with the security work).
    #[allow(dead_code)]
    pub fn replace(&self, bindings: Vec<AclBinding>) {
        let next = Arc::new(bindings);
        match self.bindings.write() {
            Ok(mut guard) => *guard = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}
