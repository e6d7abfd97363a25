//! The one wasmtime engine every module runs on: component model, async
//! support (guests suspend in host calls such as a long-poll fetch),
//! epoch interruption for per-call deadlines and the pooling allocator so
//! that instantiation is cheap.
//!
//! The epoch ticker is an OS thread: on a busy runtime a tokio task might
//! never run while a guest spins, and then no deadline would ever fire.

use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::plugins::WasmContext;

/// How often the epoch advances; deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Live component instances the pool has room for, across all modules.
const MAX_INSTANCES: u32 = 512;

pub fn build_engine(memory_max_bytes: usize) -> Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(MAX_INSTANCES)
        .total_core_instances(MAX_INSTANCES * 4)
        .total_memories(MAX_INSTANCES * 2)
        .total_tables(MAX_INSTANCES * 4)
        .total_stacks(MAX_INSTANCES)
        .max_memory_size(memory_max_bytes);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).wasm_context("creating the wasmtime engine")
}

/// Starts the thread that advances the engine's epoch every tick.
pub fn start_epoch_ticker(engine: Engine) -> Result<()> {
    std::thread::Builder::new()
        .name("wasm-epoch".to_string())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
        })
        .context("starting the epoch ticker thread")?;
    Ok(())
}
