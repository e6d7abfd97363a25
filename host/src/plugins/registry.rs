//! The plugin registry: ApiKey -> the handler module serving it, the
//! loaded authorizer and interceptor modules by name, the configured
//! interceptor chains, and the last refusal per module file.
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
use crate::plugins::interception::Chains;
use crate::plugins::interceptor::LoadedInterceptor;
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
    interceptors: RwLock<BTreeMap<String, Arc<LoadedInterceptor>>>,
    chains: RwLock<Arc<Chains>>,
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

    pub fn install_interceptor(
        &self,
        interceptor: Arc<LoadedInterceptor>,
    ) -> Option<Arc<LoadedInterceptor>> {
        let name = interceptor.source().name.to_string();
        write(&self.interceptors).insert(name, interceptor)
    }

    pub fn interceptors(&self) -> Vec<Arc<LoadedInterceptor>> {
        read(&self.interceptors).values().cloned().collect()
    }

    /// Removes the interceptor loaded from `path`; returns its name.
    pub fn unload_interceptor_path(&self, path: &Path) -> Option<String> {
        let mut guard = write(&self.interceptors);
        let name = guard
            .iter()
            .find(|(_, interceptor)| interceptor.source().path == path)
            .map(|(name, _)| name.clone())?;
        guard.remove(&name);
        Some(name)
    }

    pub fn set_chains(&self, chains: Chains) {
        *write(&self.chains) = Arc::new(chains);
    }

    pub fn chains(&self) -> Arc<Chains> {
        Arc::clone(&read(&self.chains))
    }

    /// The interceptors wrapping `api_key`, outermost first (empty: none
    /// configured). An error names a configured interceptor that is not
    /// loaded or does not wrap this ApiKey: the request must fail.
    pub fn chain(&self, api_key: i16) -> Result<Vec<Arc<LoadedInterceptor>>, String> {
        let chains = self.chains();
        let Some(names) = chains.get(api_key) else {
            return Ok(Vec::new());
        };
        let loaded = read(&self.interceptors);
        names
            .iter()
            .map(|name| match loaded.get(name.as_ref()) {
                Some(interceptor) if interceptor.wraps(api_key) => Ok(Arc::clone(interceptor)),
                Some(_) => Err(format!(
                    "interceptor {name} is configured for api key {api_key} but does not wrap it"
                )),
                None => Err(format!(
                    "interceptor {name} is configured for api key {api_key} but not loaded"
                )),
            })
            .collect()
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
