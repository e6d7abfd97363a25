//! A loaded authorizer module (the `kafka-authorizer` world): Kafka's
//! `Authorizer.authorize(ctx, actions)` and `authorizeByResourceType` as a
//! Wasm component with read access to the ACL store and its config.
//! Instances are pooled like handlers. It fails closed: a trap, a timeout
//! or an answer of the wrong length denies every action of that batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use tracing::warn;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::config::BrokerConfig;
use crate::plugins::bindings::authorizer::exports::gregor::broker::authorizer::AuthorizableRequest;
use crate::plugins::bindings::authorizer::{KafkaAuthorizer, KafkaAuthorizerPre};
use crate::plugins::bindings::{Action, Operation, ResourceType};
use crate::plugins::engine::EPOCH_TICK;
use crate::plugins::handler::ModuleSource;
use crate::plugins::imports::LogBudget;
use crate::plugins::limits::{GuestLimits, GuestMemoryBudget};
use crate::plugins::{PluginHost, WasmContext};
use crate::security::acl_store::AclStore;
use crate::security::session::Session;

const MAX_IDLE_INSTANCES: usize = 16;

/// The Store data of an authorizer instance.
pub struct AuthorizerState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: GuestLimits,
    pub acls: Arc<AclStore>,
    pub config: Arc<BrokerConfig>,
    pub plugin: Arc<str>,
    pub log_budget: LogBudget,
}

impl WasiView for AuthorizerState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// What the module is asked: a batch of actions, or one question by
/// resource type.
enum Question<'a> {
    Actions(&'a [Action]),
    ByResourceType(Operation, ResourceType),
}

struct LiveAuthorizer {
    store: Store<AuthorizerState>,
    bindings: KafkaAuthorizer,
}

pub struct LoadedAuthorizer {
    source: ModuleSource,
    engine: Engine,
    pre: KafkaAuthorizerPre<AuthorizerState>,
    acls: Arc<AclStore>,
    config: Arc<BrokerConfig>,
    memory_max: usize,
    memory_budget: Arc<GuestMemoryBudget>,
    deadline_ticks: u64,
    idle: Mutex<Vec<LiveAuthorizer>>,
    pub calls: AtomicU64,
    pub failures: AtomicU64,
}

impl LoadedAuthorizer {
    pub fn new(
        engine: &Engine,
        pre: KafkaAuthorizerPre<AuthorizerState>,
        source: ModuleSource,
        host: &PluginHost,
        memory_max: usize,
        call_timeout: Duration,
    ) -> Self {
        let ticks = (call_timeout.as_millis() / EPOCH_TICK.as_millis().max(1)).max(1);
        Self {
            source,
            engine: engine.clone(),
            pre,
            acls: Arc::clone(&host.services.acls),
            config: Arc::clone(&host.services.config),
            memory_max,
            memory_budget: Arc::clone(&host.memory_budget),
            deadline_ticks: u64::try_from(ticks).unwrap_or(u64::MAX),
            idle: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    pub fn source(&self) -> &ModuleSource {
        &self.source
    }

    /// Checks that the module instantiates, so a broken one is refused at
    /// load time rather than denying every request later.
    pub async fn warm_up(&self) -> Result<()> {
        let live = self.instantiate().await?;
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(live);
        }
        Ok(())
    }

    async fn instantiate(&self) -> Result<LiveAuthorizer> {
        let state = AuthorizerState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: GuestLimits::new(self.memory_max, Arc::clone(&self.memory_budget)),
            acls: Arc::clone(&self.acls),
            config: Arc::clone(&self.config),
            plugin: Arc::clone(&self.source.name),
            log_budget: LogBudget::default(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limits);
        store.set_epoch_deadline(self.deadline_ticks);
        let bindings = self
            .pre
            .instantiate_async(&mut store)
            .await
            .wasm_context("instantiating the authorizer")?;
        Ok(LiveAuthorizer { store, bindings })
    }

    /// Asks the module for `principal` (the session's, read once by the
    /// caller). None when the module failed: the caller denies the whole
    /// batch and must not remember that denial.
    pub async fn authorize(
        &self,
        session: &Session,
        principal: &str,
        client_id: Option<&str>,
        actions: Vec<Action>,
    ) -> Option<Vec<bool>> {
        let count = actions.len();
        let request = authorizable(session, principal, client_id);
        match self.ask(&request, Question::Actions(&actions)).await {
            Ok(answers) if answers.len() == count => Some(answers),
            Ok(answers) => {
                self.failed(&format!(
                    "authorizer answered {} of {count} actions: denying all",
                    answers.len()
                ));
                None
            }
            Err(error) => {
                self.failed(&format!("authorizer failed, denying: {error:#}"));
                None
            }
        }
    }

    /// Kafka's `authorizeByResourceType` from the module, for `principal`;
    /// false (fail closed) when the module failed.
    pub async fn authorize_by_resource_type(
        &self,
        session: &Session,
        principal: &str,
        client_id: Option<&str>,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let request = authorizable(session, principal, client_id);
        let question = Question::ByResourceType(operation, resource_type);
        match self.ask(&request, question).await {
            Ok(answer) => answer == [true],
            Err(error) => {
                self.failed(&format!(
                    "authorizer failed by resource type, denying: {error:#}"
                ));
                false
            }
        }
    }

    /// One call into a pooled instance (or a new one) with a fresh
    /// deadline; an instance whose call failed is dropped, not pooled. A
    /// by-resource-type question is answered as one action would be.
    async fn ask(
        &self,
        request: &AuthorizableRequest,
        question: Question<'_>,
    ) -> Result<Vec<bool>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut live = match pooled {
            Some(live) => live,
            None => self.instantiate().await?,
        };
        live.store.set_epoch_deadline(self.deadline_ticks);
        let exports = live.bindings.gregor_broker_authorizer();
        let answers = match question {
            Question::Actions(actions) => {
                exports
                    .call_authorize(&mut live.store, request, actions)
                    .await?
            }
            Question::ByResourceType(operation, resource_type) => {
                let allowed = exports
                    .call_authorize_by_resource_type(
                        &mut live.store,
                        request,
                        operation,
                        resource_type,
                    )
                    .await?;
                vec![allowed]
            }
        };
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE_INSTANCES {
                idle.push(live);
            }
        }
        Ok(answers)
    }

    fn failed(&self, why: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        warn!(plugin = %self.source.name, "{why}");
    }
}

/// What the module is told about the request being authorized.
fn authorizable(
    session: &Session,
    principal: &str,
    client_id: Option<&str>,
) -> AuthorizableRequest {
    AuthorizableRequest {
        principal: principal.to_string(),
        client_host: session.client_host.clone(),
        listener: session.listener.clone(),
        security_protocol: session.security_protocol.clone(),
        client_id: client_id.map(str::to_string),
    }
}
