//! The plugin registry: ApiKey -> the handler module serving it, the
//! loaded authorizer modules by name, and the last refusal per module file.
//! The handler map is swapped as a whole, so a lookup is one read lock and
//! an `Arc` clone, and a request keeps the module version it was routed to
//! for its whole life even if a new version is installed meanwhile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::plugins::authorizer::LoadedAuthorizer;
use crate::plugins::bindings::ApiInfo;
use crate::plugins::handler::LoadedHandler;
use crate::plugins::rollout::Rollouts;
use crate::sync::{read, write};

type HandlerMap = BTreeMap<i16, Arc<LoadedHandler>>;

/// Why a module file was refused, kept until it loads successfully.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    pub reason: String,
    pub at: SystemTime,
}

#[derive(Default)]
pub struct Registry {
    handlers: RwLock<Arc<HandlerMap>>,
    authorizers: RwLock<BTreeMap<String, Arc<LoadedAuthorizer>>>,
    failures: RwLock<BTreeMap<PathBuf, LoadFailure>>,
    /// New versions rolled out beside the serving ones.
    pub rollouts: Rollouts,
}

impl Registry {
    fn snapshot(&self) -> Arc<HandlerMap> {
        Arc::clone(&read(&self.handlers))
    }

    /// The module serving `api_key`, if any.
    pub fn handler(&self, api_key: i16) -> Option<Arc<LoadedHandler>> {
        self.snapshot().get(&api_key).cloned()
    }

    pub fn handlers(&self) -> Vec<Arc<LoadedHandler>> {
        self.snapshot().values().cloned().collect()
    }

    /// Installs a handler for its ApiKey, unless another module file
    /// already serves that key. Returns the version it replaces.
    pub fn install(
        &self,
        handler: Arc<LoadedHandler>,
    ) -> Result<Option<Arc<LoadedHandler>>, String> {
        let mut guard = write(&self.handlers);
        let key = handler.info().api_key;
        if let Some(existing) = guard.get(&key) {
            if existing.source().path != handler.source().path {
                return Err(format!(
                    "api key {key} is already served by {}",
                    existing.source().path.display()
                ));
            }
        }
        let mut next = HandlerMap::clone(&guard);
        let previous = next.insert(key, handler);
        *guard = Arc::new(next);
        Ok(previous)
    }

    /// Removes whatever handler was loaded from `path`.
    pub fn unload_path(&self, path: &Path) -> Option<Arc<LoadedHandler>> {
        let mut guard = write(&self.handlers);
        let key = guard
            .iter()
            .find(|(_, handler)| handler.source().path == path)
            .map(|(key, _)| *key)?;
        let mut next = HandlerMap::clone(&guard);
        let removed = next.remove(&key);
        *guard = Arc::new(next);
        removed
    }

    /// What ApiVersions advertises: every served key with its range.
    pub fn supported_apis(&self) -> Vec<ApiInfo> {
        self.snapshot()
            .values()
            .map(|handler| handler.info().clone())
            .collect()
    }

    pub fn install_authorizer(&self, name: &str, authorizer: Arc<LoadedAuthorizer>) {
        write(&self.authorizers).insert(name.to_string(), authorizer);
    }

    pub fn authorizer(&self, name: &str) -> Option<Arc<LoadedAuthorizer>> {
        read(&self.authorizers).get(name).cloned()
    }

    pub fn authorizers(&self) -> Vec<Arc<LoadedAuthorizer>> {
        read(&self.authorizers).values().cloned().collect()
    }

    /// Removes the authorizer loaded from `path`; returns its name.
    pub fn unload_authorizer_path(&self, path: &Path) -> Option<String> {
        let mut guard = write(&self.authorizers);
        let name = guard
            .iter()
            .find(|(_, authorizer)| authorizer.source().path == path)
            .map(|(name, _)| name.clone())?;
        guard.remove(&name);
        Some(name)
    }

    pub fn record_failure(&self, path: &Path, reason: String) {
        write(&self.failures).insert(
            path.to_path_buf(),
            LoadFailure {
                reason,
                at: SystemTime::now(),
            },
        );
    }

    pub fn clear_failure(&self, path: &Path) {
        write(&self.failures).remove(path);
    }

    pub fn failures(&self) -> Vec<(PathBuf, LoadFailure)> {
        read(&self.failures)
            .iter()
            .map(|(path, failure)| (path.clone(), failure.clone()))
            .collect()
    }
}
