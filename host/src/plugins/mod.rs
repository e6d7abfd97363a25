//! The plugin runtime: a wasmtime component engine, a compile cache on
//! disk, the loader that checks a module's world and self-description, the
//! registry of ApiKey -> handler, interceptor chains around handlers
//! (`interception`), pools of live instances, canary and
//! shadow rollouts of new versions (`rollout`), the active
//! authorizer with its decision cache, and the host side of every WIT
//! import (thin: each calls into a broker service).
//!
//! The runtime sits above the services (`services::Services`) and is
//! handed them in a `PluginHost` (`host`); nothing below this module knows of
//! plugins, and the broker that assembles both (`broker.rs`) is above it.

pub mod authorization;
pub mod authorizer;
pub mod bindings;
pub mod cache;
pub mod deferred;
pub mod engine;
pub mod exposure;
pub mod grants;
pub mod handler;
mod host;
pub mod imports;
pub mod interception;
pub mod interceptor;
pub mod limits;
pub mod loader;
pub mod manager;
pub mod metering;
pub mod produce_records;
pub mod registry;
pub mod rollout;
pub mod state;

pub use host::PluginHost;

/// `.context()` for wasmtime's own error type.
pub trait WasmContext<T> {
    fn wasm_context(self, what: &'static str) -> anyhow::Result<T>;
}

impl<T> WasmContext<T> for Result<T, wasmtime::Error> {
    fn wasm_context(self, what: &'static str) -> anyhow::Result<T> {
        self.map_err(|error| anyhow::Error::from(error).context(what))
    }
}
