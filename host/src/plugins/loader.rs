//! Loading modules: read the file, compile it (or take it from the compile
//! cache) off the async runtime, check which world it targets, and build a
//! handler (asking `describe()`), an interceptor (asking `describe()`) or
//! an authorizer.
//!
//! A handler or an interceptor is then checked against its grants
//! (`grants`): what it imports must be covered by what it is granted.
//!
//! A module must export `gregor:broker/handler@0.4.0`,
//! `gregor:broker/interceptor@0.4.0` or `gregor:broker/authorizer@0.4.0`
//! and import nothing but this package's
//! interfaces at this version and WASI; anything else is refused with a
//! message that says what it targets and what the broker provides. A module
//! built for another version of the contract is refused by name: the
//! version it was built for and the one this broker serves (PLUGINS.md,
//! "Evolving the contract": a breaking change bumps the version).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use tracing::info;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::Engine;

use crate::plugins::authorizer::{AuthorizerState, LoadedAuthorizer};
use crate::plugins::bindings::authorizer::{KafkaAuthorizer, KafkaAuthorizerPre};
use crate::plugins::bindings::handler::{KafkaHandler, KafkaHandlerPre};
use crate::plugins::bindings::interceptor::KafkaInterceptorPre;
use crate::plugins::cache::{content_hash, CacheOutcome, CompileCache};
use crate::plugins::grants::{self, Grants};
use crate::plugins::handler::{InstanceLimits, LoadedHandler, ModuleSource};
use crate::plugins::interceptor::LoadedInterceptor;
use crate::plugins::state::HandlerState;
use crate::plugins::{PluginHost, WasmContext};

/// The contract package and version this broker provides.
pub const PACKAGE: &str = "gregor:broker";
pub const PACKAGE_VERSION: &str = "0.4.0";
const HANDLER_EXPORT: &str = "gregor:broker/handler@0.4.0";
const AUTHORIZER_EXPORT: &str = "gregor:broker/authorizer@0.4.0";
const INTERCEPTOR_EXPORT: &str = "gregor:broker/interceptor@0.4.0";
/// The import that makes a handler take a Produce request's records by
/// reference (`plugins::produce_records`).
const REQUEST_RECORDS_IMPORT: &str = "log.request-records";

/// A successfully loaded module.
pub enum Loaded {
    Handler(LoadedHandler),
    Interceptor(LoadedInterceptor),
    Authorizer(LoadedAuthorizer),
}

/// What kind of module a component is, judged by its exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleKind {
    Handler,
    Interceptor,
    Authorizer,
}

pub struct Loader {
    engine: Engine,
    handler_linker: Linker<HandlerState>,
    authorizer_linker: Linker<AuthorizerState>,
    cache: Arc<CompileCache>,
    limits: InstanceLimits,
}

impl Loader {
    pub fn new(engine: Engine, cache_dir: &Path, limits: InstanceLimits) -> Result<Self> {
        let mut handler_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut handler_linker)?;
        KafkaHandler::add_to_linker::<HandlerState, HasSelf<HandlerState>>(
            &mut handler_linker,
            |state| state,
        )?;
        crate::plugins::metering::link_counted(&mut handler_linker)?;
        let mut authorizer_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut authorizer_linker)?;
        KafkaAuthorizer::add_to_linker::<AuthorizerState, HasSelf<AuthorizerState>>(
            &mut authorizer_linker,
            |state| state,
        )?;
        let cache = Arc::new(CompileCache::new(cache_dir, &engine));
        Ok(Self {
            engine,
            handler_linker,
            authorizer_linker,
            cache,
            limits,
        })
    }

    /// The `.wasm` files of a plugin directory, in name order.
    pub fn module_files(dir: &Path) -> Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading plugin dir {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Loads one module file.
    pub async fn load_file(&self, path: &Path, host: &PluginHost) -> Result<Loaded> {
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        self.load_bytes(path, bytes, host).await
    }

    /// Loads a module from its bytes; `path` names it (its file stem is
    /// the module's name) and is where it lives or will live.
    pub async fn load_bytes(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        host: &PluginHost,
    ) -> Result<Loaded> {
        let started = Instant::now();
        let hash = content_hash(&bytes);
        let engine = self.engine.clone();
        let cache = Arc::clone(&self.cache);
        let compile_hash = hash.clone();
        let (component, outcome) =
            tokio::task::spawn_blocking(move || cache.load(&engine, &bytes, &compile_hash))
                .await
                .map_err(|error| anyhow!("compile task failed: {error}"))??;
        let name: Arc<str> = Arc::from(
            path.file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| "module".to_string()),
        );
        let kind = classify(&self.engine, &component)?;
        // Least privilege: a handler's imports against its grants, before
        // anything of it runs.
        let mut takes_request_records = false;
        let grants = match kind {
            ModuleKind::Handler | ModuleKind::Interceptor => {
                let needed = grants::required(&self.engine, &component, PACKAGE, PACKAGE_VERSION)?;
                takes_request_records = needed
                    .values()
                    .flatten()
                    .any(|function| function == REQUEST_RECORDS_IMPORT);
                let layers = host.services.dynamic.broker_layers();
                let resolved = grants::resolve(&name, &host.services.config, &layers)?;
                grants::check(&name, &needed, resolved)?
            }
            ModuleKind::Authorizer => Grants::authorizer(),
        };
        let source = ModuleSource {
            name: Arc::clone(&name),
            path: path.to_path_buf(),
            content_hash: hash,
            loaded_at: SystemTime::now(),
            grants,
            takes_request_records,
        };
        let loaded = match kind {
            ModuleKind::Handler => {
                let pre = self
                    .handler_linker
                    .instantiate_pre(&component)
                    .wasm_context("linking the handler's imports")?;
                let pre =
                    KafkaHandlerPre::new(pre).wasm_context("checking the handler's exports")?;
                let handler =
                    LoadedHandler::load(&self.engine, pre, source, self.limits, host).await?;
                let info = handler.info();
                grants::check_api_key(&name, &handler.source().grants, info.api_key)?;
                info!(
                    plugin = %name,
                    api_key = info.api_key,
                    api = %info.name,
                    versions = %format!("{}..={}", info.min_version, info.max_version),
                    cache = if outcome == CacheOutcome::Hit { "hit" } else { "compiled" },
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    sha256 = %handler.source().content_hash,
                    "handler loaded"
                );
                Loaded::Handler(handler)
            }
            ModuleKind::Interceptor => {
                // The handler linker offers every import the interceptor
                // world has.
                let pre = self
                    .handler_linker
                    .instantiate_pre(&component)
                    .wasm_context("linking the interceptor's imports")?;
                let pre = KafkaInterceptorPre::new(pre)
                    .wasm_context("checking the interceptor's exports")?;
                let interceptor =
                    LoadedInterceptor::load(&self.engine, pre, source, self.limits, host).await?;
                info!(
                    plugin = %name,
                    interceptor = %interceptor.info().name,
                    api_keys = ?interceptor.info().api_keys,
                    cache = if outcome == CacheOutcome::Hit { "hit" } else { "compiled" },
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "interceptor loaded"
                );
                Loaded::Interceptor(interceptor)
            }
            ModuleKind::Authorizer => {
                let pre = self
                    .authorizer_linker
                    .instantiate_pre(&component)
                    .wasm_context("linking the authorizer's imports")?;
                let pre = KafkaAuthorizerPre::new(pre)
                    .wasm_context("checking the authorizer's exports")?;
                let authorizer = LoadedAuthorizer::new(
                    &self.engine,
                    pre,
                    source,
                    host,
                    self.limits.memory_max,
                    self.limits.call_timeout,
                );
                authorizer.warm_up().await?;
                info!(
                    plugin = %name,
                    cache = if outcome == CacheOutcome::Hit { "hit" } else { "compiled" },
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "authorizer loaded"
                );
                Loaded::Authorizer(authorizer)
            }
        };
        Ok(loaded)
    }
}

/// Decides the module kind from its exports and checks its imports.
pub fn classify(engine: &Engine, component: &Component) -> Result<ModuleKind> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let imports: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if let Some(version) = other_version(exports.iter().chain(&imports)) {
        bail!(
            "the module was built for {PACKAGE}@{version}, this broker serves \
             {PACKAGE}@{PACKAGE_VERSION}: rebuild it against this broker's wit/"
        );
    }
    let kind = if exports.iter().any(|name| name == HANDLER_EXPORT) {
        ModuleKind::Handler
    } else if exports.iter().any(|name| name == INTERCEPTOR_EXPORT) {
        ModuleKind::Interceptor
    } else if exports.iter().any(|name| name == AUTHORIZER_EXPORT) {
        ModuleKind::Authorizer
    } else {
        bail!(
            "the module exports [{}]; a Gregor module must target world {PACKAGE}/kafka-handler@{PACKAGE_VERSION} \
             (export {HANDLER_EXPORT}), {PACKAGE}/kafka-interceptor@{PACKAGE_VERSION} (export {INTERCEPTOR_EXPORT}) \
             or {PACKAGE}/kafka-authorizer@{PACKAGE_VERSION} (export {AUTHORIZER_EXPORT})",
            exports.join(", ")
        );
    };
    for import in &imports {
        if import.starts_with("wasi:") {
            continue;
        }
        let ours = import
            .strip_prefix(&format!("{PACKAGE}/"))
            .and_then(|rest| rest.split_once('@'))
            .is_some_and(|(_, version)| version == PACKAGE_VERSION);
        if !ours {
            bail!(
                "the module imports {import}, which this broker does not provide \
                 (it provides {PACKAGE}@{PACKAGE_VERSION} and WASI 0.2)"
            );
        }
    }
    Ok(kind)
}

/// The version of this package a module names, when it is not the one
/// this broker serves.
fn other_version<'a>(names: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
    names
        .into_iter()
        .filter_map(|name| name.strip_prefix(PACKAGE)?.strip_prefix('/'))
        .filter_map(|rest| rest.split_once('@').map(|(_, version)| version))
        .find(|version| *version != PACKAGE_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component exporting an empty instance named `name` (at most 127
    /// bytes): enough for `classify`, which reads names only.
    fn exporting(name: &str) -> Vec<u8> {
        let len = u8::try_from(name.len()).expect("a short name");
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        // Instance section: one instance of no inline exports.
        bytes.extend([0x05, 0x03, 0x01, 0x01, 0x00]);
        // Export section: that instance under `name`.
        bytes.extend([0x0b, len + 6, 0x01, 0x00, len]);
        bytes.extend(name.as_bytes());
        bytes.extend([0x05, 0x00, 0x00]);
        bytes
    }

    fn classified(name: &str) -> Result<ModuleKind> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).expect("engine");
        let component = Component::new(&engine, exporting(name)).expect("a component");
        classify(&engine, &component)
    }

    #[test]
    fn exports_name_this_version() {
        assert!(HANDLER_EXPORT.ends_with(&format!("@{PACKAGE_VERSION}")));
        assert!(AUTHORIZER_EXPORT.ends_with(&format!("@{PACKAGE_VERSION}")));
        assert_eq!(
            classified(INTERCEPTOR_EXPORT).expect("an interceptor"),
            ModuleKind::Interceptor
        );
        assert_eq!(
            classified(HANDLER_EXPORT).expect("a handler"),
            ModuleKind::Handler
        );
    }

    #[test]
    fn a_module_for_an_older_contract_is_refused_by_version() {
        for old in ["0.1.0", "0.2.0", "0.3.0"] {
            let refusal = classified(&format!("gregor:broker/handler@{old}"))
                .expect_err("an older handler is refused")
                .to_string();
            assert!(
                refusal.contains(&format!("built for gregor:broker@{old}"))
                    && refusal.contains("serves gregor:broker@0.4.0"),
                "{refusal}"
            );
        }
    }
}
