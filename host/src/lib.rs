//! `gregor`: a Kafka-compatible broker whose request handlers are
//! WebAssembly components, as a library: the `gregor` binary (`main.rs`)
//! is its command line, and the benchmarks (`bench/`) drive the plugin
//! runtime through it without a broker binary of their own.
//!
//! Layers, each using only those below it (`.ci/import_cycles.py` checks
//! there is no cycle):
//!
//! - `server`, `admin`, `cli`: the process (serve, HTTP admin, commands);
//! - `broker` (assembly), `apis` (Kafka's KafkaApis: route by ApiKey);
//! - `network`: listeners, connections, the request channel;
//! - `plugins`: the Wasm runtime, registry, authorization and the host
//!   side of the WIT imports;
//! - `services`: the broker's services opened from storage, and below it
//!   each service (`log`, `replica`, `metadata`, `config_admin`,
//!   `coordinator`, `transactions`, `producer_ids`, `security`, `quota`,
//!   `telemetry`, `metrics`, `config`, ...).

pub mod admin;
pub mod apis;
pub mod authorizer_choice;
pub mod broker;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod config_admin;
pub mod coordinator;
pub mod durable;
pub mod error_code;
pub mod fd_limit;
#[cfg(test)]
pub mod fuzz_input;
pub mod kafka_wire;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod network;
pub mod plugin_grants;
pub mod plugins;
pub mod producer_ids;
pub mod purgatory;
pub mod quota;
pub mod replica;
pub mod runtime_loggers;
pub mod security;
pub mod server;
pub mod services;
pub mod sync;
pub mod telemetry;
pub mod topic_name;
pub mod transactions;
pub mod uuid;
