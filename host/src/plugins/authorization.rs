//! Authorization as handlers see it: a batch of actions for the current
//! request's principal. With no authorizer active every action is allowed,
//! as in Kafka without `authorizer.class.name`; otherwise the active
//! authorizer module answers, and any failure of it (trap, timeout, wrong
//! answer count) is a denial: it fails closed.
//!
//! Decisions are cached per (principal, client host, listener, action):
//! asking a Wasm authorizer costs microseconds (a Python one more), while
//! a handler asks on every request. The cache is dropped whenever the ACLs
//! change (the store's generation moves) or another authorizer (or a new
//! version of the same one) becomes active, and answers computed while a
//! change happened are not kept. Denials caused by a failing authorizer
//! are never cached.
//!
//! "By resource type" questions (Kafka's `authorizeByResourceType`, asked
//! once per idempotent producer by InitProducerId) go to the module
//! uncached: they are rare, and the answer depends on every ACL of the
//! type rather than on one resource.
//!
//! The active authorizer can be switched live (admin API, `gregor
//! authorizer use`); the choice is persisted in the security directory
//! and wins over the `authorizer` config at the next start, as a dynamic
//! broker config wins over a static one in Kafka. On a cluster node the
//! switch goes through the [`ChoiceLog`] seam (the metadata log): every
//! node follows the log's choice ([`Authorization::follow`]), and until a
//! choice is made there each node keeps its own (config or file).
//!
//! An authorizer is chosen but not loaded only when the cluster chose one
//! this node lacks: every action is denied then (fail closed) until the
//! module is loaded, never allowed.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::durable::JsonFile;
use crate::plugins::authorizer::LoadedAuthorizer;
use crate::plugins::bindings::{Action, Operation, ResourceType};
use crate::security::acl_store::AclStore;
use crate::security::session::Session;
use crate::sync::{read, write};

/// Decisions kept at most; the cache starts over when full.
const MAX_CACHED_DECISIONS: usize = 100_000;

#[derive(Clone, PartialEq, Eq, Hash)]
struct DecisionKey {
    principal: Arc<str>,
    client_host: String,
    listener: String,
    operation: u8,
    resource_type: u8,
    resource_name: String,
}

#[derive(Default)]
struct DecisionCache {
    /// The ACL store generation and authorizer epoch the decisions hold for.
    acl_generation: u64,
    epoch: u64,
    decisions: HashMap<DecisionKey, bool>,
}

/// The persisted choice of authorizer.
#[derive(Serialize, Deserialize)]
struct Choice {
    /// None: no authorizer (allow everything).
    authorizer: Option<String>,
}

/// Where the choice of authorizer is made on a cluster node: it is
/// proposed, and answered once this node follows it.
pub trait ChoiceLog: Send + Sync {
    /// Proposes `name` (None: no authorizer); the error says why not.
    fn choose(&self, name: Option<String>) -> BoxFuture<'_, Result<(), String>>;
}

pub struct Authorization {
    acls: Arc<AclStore>,
    /// The name of the authorizer that should decide (None: none).
    active_name: RwLock<Option<String>>,
    active: RwLock<Option<Arc<LoadedAuthorizer>>>,
    /// Bumped whenever the active authorizer changes.
    epoch: AtomicU64,
    cache: RwLock<DecisionCache>,
    choice: Option<JsonFile>,
    /// Set on a cluster node: the choice goes through the metadata log.
    log: OnceLock<Arc<dyn ChoiceLog>>,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
}

impl Authorization {
    /// With the choice persisted in `dir` if any, else `configured`.
    pub fn open(acls: Arc<AclStore>, dir: &Path, configured: Option<&str>) -> io::Result<Self> {
        let file = JsonFile::open(dir, "authorizer.json")?;
        let name = match file.load::<Choice>()? {
            Some(choice) => choice.authorizer,
            None => configured.map(str::to_string),
        };
        let mut authorization = Self::in_memory(acls, name);
        authorization.choice = Some(file);
        Ok(authorization)
    }

    /// Without persistence (tools).
    pub fn in_memory(acls: Arc<AclStore>, name: Option<String>) -> Self {
        Self {
            acls,
            active_name: RwLock::new(name),
            active: RwLock::new(None),
            epoch: AtomicU64::new(0),
            cache: RwLock::new(DecisionCache::default()),
            choice: None,
            log: OnceLock::new(),
            cache_hits: AtomicU64::new(0),
            cache_misses: AtomicU64::new(0),
        }
    }

    /// The name of the authorizer that should decide.
    pub fn active_name(&self) -> Option<String> {
        read(&self.active_name).clone()
    }

    /// From now on the choice is made through `log` (a cluster node).
    pub fn choose_through(&self, log: Arc<dyn ChoiceLog>) {
        let _ = self.log.set(log);
    }

    /// The log the choice goes through, on a cluster node.
    pub fn choice_log(&self) -> Option<Arc<dyn ChoiceLog>> {
        self.log.get().cloned()
    }

    /// Follows a choice made elsewhere (the metadata log's): `authorizer`
    /// is this node's module of that name, None when it is not loaded
    /// (then every action is denied until it is). Nothing happens when the
    /// choice is already in force, so the cache survives unrelated changes.
    pub fn follow(
        &self,
        name: Option<&str>,
        authorizer: Option<Arc<LoadedAuthorizer>>,
    ) -> io::Result<bool> {
        // The same name: a missing module keeps whatever is active (as
        // when the active module's file is removed), a loaded one is in
        // force once it is the active one.
        let in_force = read(&self.active_name).as_deref() == name
            && authorizer.as_ref().is_none_or(|module| {
                self.active()
                    .is_some_and(|active| Arc::ptr_eq(&active, module))
            });
        if in_force {
            return Ok(false);
        }
        self.choose(name, authorizer)?;
        Ok(true)
    }

    /// Makes `name` the authorizer that decides (None: allow everything),
    /// persisting the choice; `authorizer` is its loaded module.
    pub fn choose(
        &self,
        name: Option<&str>,
        authorizer: Option<Arc<LoadedAuthorizer>>,
    ) -> io::Result<()> {
        if let Some(file) = &self.choice {
            file.store(&Choice {
                authorizer: name.map(str::to_string),
            })?;
        }
        *write(&self.active_name) = name.map(str::to_string);
        self.set_active(authorizer);
        Ok(())
    }

    /// Installs the module that decides (a new version of the active one
    /// after a reload, or None).
    pub fn set_active(&self, authorizer: Option<Arc<LoadedAuthorizer>>) {
        *write(&self.active) = authorizer;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *write(&self.cache) = DecisionCache::default();
    }

    pub fn active(&self) -> Option<Arc<LoadedAuthorizer>> {
        read(&self.active).clone()
    }

    /// Forgets every cached decision.
    pub fn clear_cache(&self) {
        *write(&self.cache) = DecisionCache::default();
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    fn key(session: &Session, principal: &Arc<str>, action: &Action) -> DecisionKey {
        DecisionKey {
            principal: Arc::clone(principal),
            client_host: session.client_host.clone(),
            listener: session.listener.clone(),
            operation: action.operation as u8,
            resource_type: action.resource_type as u8,
            resource_name: action.resource_name.clone(),
        }
    }

    /// With no module active: allowed when no authorizer is chosen, denied
    /// when the chosen one is not loaded here (see [`Authorization::follow`]).
    fn nothing_chosen(&self) -> bool {
        let chosen = read(&self.active_name).clone();
        if let Some(name) = &chosen {
            warn!(authorizer = %name, "the chosen authorizer is not loaded on this node: denied");
        }
        chosen.is_none()
    }

    /// One answer per action, true meaning allowed.
    pub async fn authorize(
        &self,
        session: Option<&Session>,
        client_id: Option<&str>,
        actions: Vec<Action>,
    ) -> Vec<bool> {
        let Some(authorizer) = self.active() else {
            return vec![self.nothing_chosen(); actions.len()];
        };
        let Some(session) = session else {
            warn!("authorization asked outside a request: denied");
            return vec![false; actions.len()];
        };
        let principal = session.principal();
        let acl_generation = self.acls.generation();
        let epoch = self.epoch.load(Ordering::Acquire);
        let mut answers: Vec<Option<bool>> = {
            let cache = read(&self.cache);
            let current = cache.acl_generation == acl_generation && cache.epoch == epoch;
            actions
                .iter()
                .map(|action| {
                    current
                        .then(|| cache.decisions.get(&Self::key(session, &principal, action)))
                        .flatten()
                        .copied()
                })
                .collect()
        };
        let missing: Vec<usize> = (0..actions.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        self.cache_hits
            .fetch_add((actions.len() - missing.len()) as u64, Ordering::Relaxed);
        if missing.is_empty() {
            return answers.into_iter().map(|a| a.unwrap_or(false)).collect();
        }
        self.cache_misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        let asked: Vec<Action> = missing.iter().map(|&i| actions[i].clone()).collect();
        let decided = authorizer
            .authorize(session, &principal, client_id, asked)
            .await;
        match decided {
            Some(decided) => {
                let mut cache = write(&self.cache);
                // Keep the answers only if nothing changed while asking.
                let unchanged = self.acls.generation() == acl_generation
                    && self.epoch.load(Ordering::Acquire) == epoch;
                let stale = cache.acl_generation != acl_generation
                    || cache.epoch != epoch
                    || cache.decisions.len() + missing.len() > MAX_CACHED_DECISIONS;
                if unchanged && stale {
                    *cache = DecisionCache {
                        acl_generation,
                        epoch,
                        decisions: HashMap::new(),
                    };
                }
                for (&i, allowed) in missing.iter().zip(decided) {
                    answers[i] = Some(allowed);
                    if unchanged {
                        cache
                            .decisions
                            .insert(Self::key(session, &principal, &actions[i]), allowed);
                    }
                }
                answers.into_iter().map(|a| a.unwrap_or(false)).collect()
            }
            None => vec![false; actions.len()],
        }
    }

    /// May the request's principal perform `operation` on some resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`)? Allowed with no
    /// authorizer; a question about `any` is refused, as Kafka refuses it.
    pub async fn authorize_by_resource_type(
        &self,
        session: Option<&Session>,
        client_id: Option<&str>,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(authorizer) = self.active() else {
            return self.nothing_chosen();
        };
        let Some(session) = session else {
            warn!("authorization asked outside a request: denied");
            return false;
        };
        if operation == Operation::Any || resource_type == ResourceType::Any {
            return false;
        }
        let principal = session.principal();
        authorizer
            .authorize_by_resource_type(session, &principal, client_id, operation, resource_type)
            .await
    }
}
