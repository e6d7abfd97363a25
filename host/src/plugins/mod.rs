//! The plugin runtime: a wasmtime component engine, a compile cache on
//! disk, the loader that checks a module's world and self-description, the
//! registry of ApiKey -> handler, pools of live instances, and the host
//! side of every WIT import (thin: each calls into a broker service).

pub mod authorizer;
pub mod bindings;
pub mod cache;
pub mod engine;
pub mod handler;
pub mod imports;
pub mod limits;
pub mod loader;
pub mod registry;
pub mod state;
