//! The ACL store: every ACL binding of the cluster, read by the authorizer
//! module through the `acls` import and changed by CreateAcls and
//! DeleteAcls through `acl-admin` (Kafka's AclControlManager).
//!
//! Bindings are kept in memory as one immutable snapshot, replaced as a
//! whole on change so readers never see a half-applied update, and
//! persisted crash-safely in `<log dir>/security/acls.json` before the new
//! snapshot becomes visible. Every change bumps a generation number, which
//! the authorizer's decision cache watches to drop stale decisions.
//!
//! Filters follow Kafka's AclBindingFilter: ANY matches every value, a
//! missing name, principal or host matches every one, and a MATCH pattern
//! filter selects the bindings that would apply to the named resource
//! (LITERAL equal, LITERAL `*`, PREFIXED prefixes).
//!
//! The store speaks its own types (Kafka's names, also their serde form:
//! the cluster's metadata commands carry them); the plugin runtime
//! converts them to and from the WIT contract's (`plugins::imports::acls`),
//! so the contract can evolve without touching storage.
//!
//! On a node of a cluster the bindings are the metadata log's: changes go
//! to an [`AclLog`] and the store follows what the log applied
//! ([`AclStore::replace`], which bumps the generation on every node).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde::{Deserialize, Serialize};

use crate::durable::JsonFile;
use crate::metadata::bounds;
use crate::sync;

/// Kafka's wildcard resource name (with LITERAL).
pub const WILDCARD: &str = "*";
const FORMAT_VERSION: u32 = 1;

/// An enum with Kafka's name of each variant, written once: the enum
/// (serialized by those names, as the metadata log stores them) and a
/// table of (variant, name) pairs.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $table:ident, [$($variant:ident = $text:literal),* $(,)?]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),*
        }

        const $table: &[($name, &str)] = &[$(($name::$variant, $text)),*];
    };
}

named_enum!(
    /// Kafka's ResourceType (ANY only in filters).
    ResourceType,
    RESOURCE_TYPES,
    [
        Any = "ANY",
        Topic = "TOPIC",
        Group = "GROUP",
        Cluster = "CLUSTER",
        TransactionalId = "TRANSACTIONAL_ID",
        DelegationToken = "DELEGATION_TOKEN",
        User = "USER",
    ]
);

named_enum!(
    /// Kafka's AclOperation (ANY only in filters; ALL matches every operation).
    Operation,
    OPERATIONS,
    [
        Any = "ANY",
        All = "ALL",
        Read = "READ",
        Write = "WRITE",
        Create = "CREATE",
        Delete = "DELETE",
        Alter = "ALTER",
        Describe = "DESCRIBE",
        ClusterAction = "CLUSTER_ACTION",
        DescribeConfigs = "DESCRIBE_CONFIGS",
        AlterConfigs = "ALTER_CONFIGS",
        IdempotentWrite = "IDEMPOTENT_WRITE",
        CreateTokens = "CREATE_TOKENS",
        DescribeTokens = "DESCRIBE_TOKENS",
    ]
);

named_enum!(
    PatternType,
    PATTERN_TYPES,
    [Literal = "LITERAL", Prefixed = "PREFIXED"]
);

named_enum!(Permission, PERMISSIONS, [Deny = "DENY", Allow = "ALLOW"]);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Whether this binding applies to the named resource (type equal;
    /// LITERAL name equal or `*`; PREFIXED name a prefix of it), as
    /// StandardAuthorizer matches resource patterns.
    pub fn applies_to(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => {
                    self.resource_name == name || self.resource_name == WILDCARD
                }
                PatternType::Prefixed => name.starts_with(&self.resource_name),
            }
    }
}

/// How a filter selects pattern types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PatternFilter {
    Any,
    Match,
    Literal,
    Prefixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PermissionFilter {
    Any,
    Deny,
    Allow,
}

/// Kafka's AclBindingFilter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: PermissionFilter,
}

impl AclFilter {
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_resource(acl) && self.matches_entry(acl)
    }

    /// Kafka's ResourcePatternFilter.matches.
    fn matches_resource(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        let exact = match self.pattern {
            PatternFilter::Any | PatternFilter::Match => None,
            PatternFilter::Literal => Some(PatternType::Literal),
            PatternFilter::Prefixed => Some(PatternType::Prefixed),
        };
        if exact.is_some_and(|pattern| pattern != acl.pattern_type) {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern != PatternFilter::Match {
            return *name == acl.resource_name;
        }
        match acl.pattern_type {
            PatternType::Literal => *name == acl.resource_name || acl.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
        }
    }

    /// Kafka's AccessControlEntryFilter.matches.
    fn matches_entry(&self, acl: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && match self.permission {
                PermissionFilter::Any => true,
                PermissionFilter::Deny => acl.permission == Permission::Deny,
                PermissionFilter::Allow => acl.permission == Permission::Allow,
            }
    }
}

/// Why an ACL change was not made.
#[derive(Debug)]
pub enum AclChangeError {
    /// Over Kafka's cap on one operation (POLICY_VIOLATION), with Kafka's
    /// message.
    TooLarge(String),
    /// Storing the change failed.
    Io(io::Error),
    /// The metadata log did not answer: Kafka's error code and message.
    Log { code: i16, message: String },
}

impl fmt::Display for AclChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge(message) => f.write_str(message),
            Self::Io(error) => write!(f, "storing ACLs failed: {error}"),
            Self::Log { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for AclChangeError {}

impl From<io::Error> for AclChangeError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// Bindings that differ here are different; equal keys are compared whole.
fn key_of(binding: &AclBinding) -> (&str, &str, &str) {
    (
        binding.resource_name.as_str(),
        binding.principal.as_str(),
        binding.host.as_str(),
    )
}

/// Where ACL changes go on a node of a cluster: proposed to the metadata
/// log and, once applied, brought into this store before the answer
/// (the same answers as [`AclStore::create`] and [`AclStore::delete`]).
pub trait AclLog: Send + Sync {
    fn create(&self, bindings: Vec<AclBinding>) -> Result<(), AclChangeError>;
    fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclChangeError>;
}

#[derive(Default)]
pub struct AclStore {
    /// Set on a node of a cluster: changes go there.
    log: OnceLock<Arc<dyn AclLog>>,
    bindings: RwLock<Arc<Vec<AclBinding>>>,
    /// None: in memory only (tools that need no persistence).
    file: Option<JsonFile>,
    writer: Mutex<()>,
    generation: AtomicU64,
}

impl AclStore {
    /// Opens `<dir>/acls.json`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let file = JsonFile::open(dir, "acls.json")?;
        let bindings = match file.load::<Document>()? {
            Some(document) => document
                .decode()
                .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?,
            None => Vec::new(),
        };
        Ok(Self {
            log: OnceLock::new(),
            bindings: RwLock::new(Arc::new(bindings)),
            file: Some(file),
            writer: Mutex::new(()),
            generation: AtomicU64::new(0),
        })
    }

    /// Every binding, as one consistent snapshot.
    pub fn snapshot(&self) -> Arc<Vec<AclBinding>> {
        Arc::clone(&sync::read(&self.bindings))
    }

    /// Bumped by every change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The bindings `filter` matches.
    pub fn matching(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.snapshot()
            .iter()
            .filter(|acl| filter.matches(acl))
            .cloned()
            .collect()
    }

    /// Adds the bindings not present yet; durable on return. Kafka's
    /// controller writes a record per new binding and refuses more than
    /// `MAX_RECORDS_PER_USER_OP` in one operation: then nothing changes.
    pub fn create(&self, bindings: Vec<AclBinding>) -> Result<(), AclChangeError> {
        if let Some(log) = self.log.get() {
            return log.create(bindings);
        }
        self.change(|current| {
            let mut known: HashMap<(&str, &str, &str), Vec<&AclBinding>> = HashMap::new();
            for binding in current {
                known.entry(key_of(binding)).or_default().push(binding);
            }
            let mut added: Vec<&AclBinding> = Vec::new();
            for binding in &bindings {
                let same = known.entry(key_of(binding)).or_default();
                if !same.contains(&binding) {
                    same.push(binding);
                    added.push(binding);
                }
            }
            if !bounds::records_fit(added.len()) {
                let error = AclChangeError::TooLarge(bounds::TOO_MANY_RECORDS.to_string());
                return (current.to_vec(), Err(error));
            }
            let mut next = current.to_vec();
            next.extend(added.into_iter().cloned());
            (next, Ok(()))
        })?
    }

    /// Removes every binding matching any filter; durable on return. Per
    /// filter, the bindings it matched (a binding matched by two filters
    /// is reported for both, as Kafka does). Removing more than
    /// `MAX_RECORDS_PER_USER_OP` bindings at once is refused (Kafka's
    /// AclControlManager) and changes nothing.
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclChangeError> {
        if let Some(log) = self.log.get() {
            return log.delete(filters);
        }
        self.change(|current| {
            let removed = current
                .iter()
                .filter(|acl| filters.iter().any(|filter| filter.matches(acl)))
                .count();
            if !bounds::records_fit(removed) {
                let error = AclChangeError::TooLarge(bounds::too_many_acl_deletions());
                return (current.to_vec(), Err(error));
            }
            let matched: Vec<Vec<AclBinding>> = filters
                .iter()
                .map(|filter| {
                    current
                        .iter()
                        .filter(|acl| filter.matches(acl))
                        .cloned()
                        .collect()
                })
                .collect();
            let next = current
                .iter()
                .filter(|acl| !filters.iter().any(|filter| filter.matches(acl)))
                .cloned()
                .collect();
            (next, Ok(matched))
        })?
    }

    /// Sends every later change to `log` (a node of a cluster).
    pub fn follow(&self, log: Arc<dyn AclLog>) {
        let _ = self.log.set(log);
    }

    /// Makes the store hold exactly `bindings` (what the metadata log
    /// applied), durably; nothing happens (and the generation stays) when
    /// it already does.
    pub fn replace(&self, bindings: &[AclBinding]) -> io::Result<()> {
        self.change(|_| (bindings.to_vec(), ()))
    }

    fn change<T>(&self, f: impl FnOnce(&[AclBinding]) -> (Vec<AclBinding>, T)) -> io::Result<T> {
        let _writer = sync::lock(&self.writer);
        let current = self.snapshot();
        let (next, answer) = f(&current);
        if next == *current {
            return Ok(answer);
        }
        if let Some(file) = &self.file {
            file.store(&Document::encode(&next))?;
        }
        *sync::write(&self.bindings) = Arc::new(next);
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(answer)
    }
}

/// On disk, every enum is its Kafka name (TOPIC, READ, LITERAL, ALLOW).
#[derive(Serialize, Deserialize)]
struct Document {
    version: u32,
    acls: Vec<StoredAcl>,
}

#[derive(Serialize, Deserialize)]
struct StoredAcl {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    host: String,
    operation: String,
    permission: String,
}

impl Document {
    fn encode(bindings: &[AclBinding]) -> Self {
        Self {
            version: FORMAT_VERSION,
            acls: bindings
                .iter()
                .map(|acl| StoredAcl {
                    resource_type: resource_type_name(acl.resource_type).to_string(),
                    resource_name: acl.resource_name.clone(),
                    pattern_type: name_in(PATTERN_TYPES, acl.pattern_type).to_string(),
                    principal: acl.principal.clone(),
                    host: acl.host.clone(),
                    operation: operation_name(acl.operation).to_string(),
                    permission: name_in(PERMISSIONS, acl.permission).to_string(),
                })
                .collect(),
        }
    }

    fn decode(self) -> Result<Vec<AclBinding>, String> {
        if self.version != FORMAT_VERSION {
            return Err(format!("unsupported ACL store version {}", self.version));
        }
        self.acls
            .into_iter()
            .map(|acl| {
                Ok(AclBinding {
                    resource_type: parse(RESOURCE_TYPES, &acl.resource_type, "resource type")?,
                    resource_name: acl.resource_name,
                    pattern_type: parse(PATTERN_TYPES, &acl.pattern_type, "pattern type")?,
                    principal: acl.principal,
                    host: acl.host,
                    operation: parse(OPERATIONS, &acl.operation, "operation")?,
                    permission: parse(PERMISSIONS, &acl.permission, "permission")?,
                })
            })
            .collect()
    }
}

/// Kafka's name of a resource type (TOPIC, GROUP, ...).
pub fn resource_type_name(resource_type: ResourceType) -> &'static str {
    name_in(RESOURCE_TYPES, resource_type)
}

/// Kafka's name of an operation (READ, WRITE, ...).
pub fn operation_name(operation: Operation) -> &'static str {
    name_in(OPERATIONS, operation)
}

/// `value`'s name in a [`named_enum!`] table.
fn name_in<T: PartialEq>(table: &[(T, &'static str)], value: T) -> &'static str {
    table
        .iter()
        .find(|(candidate, _)| *candidate == value)
        .map_or("UNKNOWN", |(_, name)| *name)
}

/// The variant named `name` in a [`named_enum!`] table; `what` the table
/// holds, for the error.
fn parse<T: Copy>(table: &[(T, &str)], name: &str, what: &str) -> Result<T, String> {
    table
        .iter()
        .find(|(_, candidate)| *candidate == name)
        .map(|(value, _)| *value)
        .ok_or_else(|| format!("unknown {what} {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pattern_type: PatternType, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: "*".to_string(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    fn filter(name: Option<&str>, pattern: PatternFilter) -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: name.map(str::to_string),
            pattern,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: PermissionFilter::Any,
        }
    }

    #[test]
    fn filters_follow_kafka() {
        let literal = acl("orders", PatternType::Literal, "User:a");
        let wildcard = acl("*", PatternType::Literal, "User:a");
        let prefixed = acl("ord", PatternType::Prefixed, "User:a");
        let all = [literal.clone(), wildcard.clone(), prefixed.clone()];
        let count = |f: &AclFilter| all.iter().filter(|a| f.matches(a)).count();
        assert_eq!(count(&filter(None, PatternFilter::Any)), 3);
        assert_eq!(count(&filter(Some("orders"), PatternFilter::Any)), 1);
        assert_eq!(count(&filter(Some("orders"), PatternFilter::Match)), 3);
        assert_eq!(count(&filter(Some("other"), PatternFilter::Match)), 1);
        assert_eq!(count(&filter(Some("ord"), PatternFilter::Prefixed)), 1);
        assert_eq!(count(&filter(None, PatternFilter::Literal)), 2);
        let mut by_principal = filter(None, PatternFilter::Any);
        by_principal.principal = Some("User:b".to_string());
        assert_eq!(count(&by_principal), 0);
        let mut by_op = filter(None, PatternFilter::Any);
        by_op.operation = Operation::Write;
        assert_eq!(count(&by_op), 0);
    }

    #[test]
    fn persisted_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = AclStore::open(dir.path()).unwrap();
        let a = acl("orders", PatternType::Literal, "User:a");
        let b = acl("ord", PatternType::Prefixed, "User:b");
        store.create(vec![a.clone(), b.clone(), a.clone()]).unwrap();
        assert_eq!(store.snapshot().len(), 2);
        let generation = store.generation();
        drop(store);
        let store = AclStore::open(dir.path()).unwrap();
        assert_eq!(*store.snapshot(), vec![a.clone(), b.clone()]);
        let deleted = store
            .delete(&[filter(Some("ord"), PatternFilter::Prefixed)])
            .unwrap();
        assert_eq!(deleted, vec![vec![b]]);
        assert!(store.generation() > 0 || generation > 0);
        drop(store);
        assert_eq!(*AclStore::open(dir.path()).unwrap().snapshot(), vec![a]);
    }

    #[test]
    fn changes_over_the_record_cap_change_nothing() {
        let max = bounds::MAX_RECORDS_PER_USER_OP;
        let store = AclStore::default();
        let many: Vec<AclBinding> = (0..=max)
            .map(|i| acl(&format!("t{i}"), PatternType::Literal, "User:a"))
            .collect();
        let refused = store.create(many.clone());
        assert!(
            matches!(refused, Err(AclChangeError::TooLarge(_))),
            "{refused:?}"
        );
        assert!(store.snapshot().is_empty());
        // Only new bindings count: max of them, then all again (one new).
        store.create(many[..max].to_vec()).unwrap();
        store.create(many.clone()).unwrap();
        assert_eq!(store.snapshot().len(), max + 1);
        let all = filter(None, PatternFilter::Any);
        let refused = store.delete(std::slice::from_ref(&all));
        match refused {
            Err(AclChangeError::TooLarge(message)) => {
                assert_eq!(message, bounds::too_many_acl_deletions())
            }
            other => panic!("deleting {} bindings: {other:?}", max + 1),
        }
        assert_eq!(store.snapshot().len(), max + 1);
    }
}
