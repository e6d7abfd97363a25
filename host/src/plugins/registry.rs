//! The plugin registry: ApiKey -> the handler module serving it, and the
//! loaded authorizer modules by name. The handler map is swapped as a
//! whole, so a lookup is one read lock and an `Arc` clone, and a request
//! keeps the module version it was routed to for its whole life.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::plugins::authorizer::LoadedAuthorizer;
use crate::plugins::bindings::ApiInfo;
use crate::plugins::handler::LoadedHandler;

type HandlerMap = BTreeMap<i16, Arc<LoadedHandler>>;

#[derive(Default)]
pub struct Registry {
    handlers: RwLock<Arc<HandlerMap>>,
    authorizers: RwLock<BTreeMap<String, Arc<LoadedAuthorizer>>>,
}

impl Registry {
    fn snapshot(&self) -> Arc<HandlerMap> {
        match self.handlers.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The module serving `api_key`, if any.
    pub fn handler(&self, api_key: i16) -> Option<Arc<LoadedHandler>> {
        self.snapshot().get(&api_key).cloned()
    }

    pub fn handlers(&self) -> Vec<Arc<LoadedHandler>> {
        self.snapshot().values().cloned().collect()
    }

    /// Installs a handler for its ApiKey; returns the one it replaces.
    pub fn install(&self, handler: Arc<LoadedHandler>) -> Option<Arc<LoadedHandler>> {
        let mut guard = match self.handlers.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = HandlerMap::clone(&guard);
        let previous = next.insert(handler.info().api_key, handler);
        *guard = Arc::new(next);
        previous
    }

    /// What ApiVersions advertises: every served key with its range.
    pub fn supported_apis(&self) -> Vec<ApiInfo> {
        self.snapshot()
            .values()
            .map(|handler| handler.info().clone())
            .collect()
    }

    pub fn install_authorizer(&self, name: &str, authorizer: Arc<LoadedAuthorizer>) {
        let mut guard = match self.authorizers.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.insert(name.to_string(), authorizer);
    }

    pub fn authorizer(&self, name: &str) -> Option<Arc<LoadedAuthorizer>> {
        let guard = match self.authorizers.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.get(name).cloned()
    }
}
