//! ACL bindings (Kafka's AclsImage), what a single broker keeps in
//! `security/acls.json`. Creating adds the bindings not present yet;
//! deleting removes what the filters match when the command is applied,
//! so two concurrent DeleteAcls each report what they really removed.
//! Kafka's cap on records per operation applies here too (it depends on
//! the image, and is a constant).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::cluster::command::{Applied, Refusal, Response};
use crate::error_code::ErrorCode;
use crate::metadata::bounds;
use crate::security::acl_store::{AclBinding, AclFilter};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclsImage {
    bindings: Vec<AclBinding>,
}

impl AclsImage {
    /// Every binding, in the order created.
    pub fn bindings(&self) -> &[AclBinding] {
        &self.bindings
    }

    pub fn matching(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.bindings
            .iter()
            .filter(|acl| filter.matches(acl))
            .cloned()
            .collect()
    }

    pub(super) fn create(&mut self, bindings: &[AclBinding]) -> Response {
        let key = |b: &AclBinding| (b.resource_name.clone(), b.principal.clone(), b.host.clone());
        let mut known: HashMap<(String, String, String), Vec<AclBinding>> = HashMap::new();
        for binding in &self.bindings {
            known.entry(key(binding)).or_default().push(binding.clone());
        }
        let mut added = Vec::new();
        for binding in bindings {
            let same = known.entry(key(binding)).or_default();
            if !same.contains(binding) {
                same.push(binding.clone());
                added.push(binding.clone());
            }
        }
        if !bounds::records_fit(added.len()) {
            return Err(Refusal::new(
                ErrorCode::PolicyViolation,
                bounds::TOO_MANY_RECORDS,
            ));
        }
        self.bindings.extend(added);
        Ok(Applied::Done)
    }

    pub(super) fn delete(&mut self, filters: &[AclFilter]) -> Response {
        let doomed = |acl: &AclBinding| filters.iter().any(|f| f.matches(acl));
        let removed = self.bindings.iter().filter(|acl| doomed(acl)).count();
        if !bounds::records_fit(removed) {
            return Err(Refusal::new(
                ErrorCode::PolicyViolation,
                bounds::too_many_acl_deletions(),
            ));
        }
        let matched = filters.iter().map(|f| self.matching(f)).collect();
        self.bindings.retain(|acl| !doomed(acl));
        Ok(Applied::AclsDeleted(matched))
    }
}
