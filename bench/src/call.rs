//! `gregor-bench call --plugin-dir DIR [--module api_versions] [--iterations N]`:
//! the cost of the plugin boundary inside the host, without a network: one
//! handler call on a pooled instance, one call that instantiates a fresh
//! instance first, next to an empty native function call. Used by
//! `make bench`; never by tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use gregor::broker::Broker;
use gregor::config::BrokerConfig;
use gregor::plugins::bindings::RequestContext;
use gregor::plugins::deferred::Deferral;
use gregor::plugins::engine::{build_engine, start_epoch_ticker};
use gregor::plugins::handler::{CallOutcome, InstanceLimits, LoadedHandler};
use gregor::plugins::imports::record_set::Answered;
use gregor::plugins::loader::{Loaded, Loader};
use gregor::plugins::PluginHost;
use gregor::security::sasl::{ConnectionAuth, ANONYMOUS};
use gregor::security::session::Session;

#[inline(never)]
fn empty_native_call(x: u64) -> u64 {
    std::hint::black_box(x)
}

/// Loads `module` (`<plugin dir>/<module>.wasm`) with the config's
/// limits, its instances reused at most `max_calls` times.
pub async fn load_module(
    config: &BrokerConfig,
    host: &PluginHost,
    module: &str,
    max_calls: u64,
) -> Result<Loaded> {
    let limits = InstanceLimits {
        memory_max: config.plugin_memory_max_bytes()?,
        recycle_memory: config.plugin_memory_recycle_bytes()?,
        call_timeout: Duration::from_millis(config.plugin_call_timeout_ms()?),
        max_calls,
    };
    let engine = build_engine(limits.memory_max)?;
    start_epoch_ticker(engine.clone())?;
    let loader = Loader::new(engine, &config.plugin_cache_dir(), limits)?;
    let path = config.plugin_dir().join(format!("{module}.wasm"));
    loader.load_file(&path, host).await
}

async fn load(
    config: &BrokerConfig,
    host: &PluginHost,
    module: &str,
    max_calls: u64,
) -> Result<LoadedHandler> {
    match load_module(config, host, module, max_calls).await? {
        Loaded::Handler(handler) => Ok(handler),
        Loaded::Authorizer(_) => bail!("{module} is an authorizer, not a handler"),
        Loaded::Interceptor(_) => bail!("{module} is an interceptor, not a handler"),
    }
}

/// An anonymous plaintext client's session.
pub fn session() -> Arc<Session> {
    Arc::new(Session {
        connection_id: 0,
        client_host: "127.0.0.1".to_string(),
        listener: "PLAINTEXT".to_string(),
        security_protocol: "PLAINTEXT".to_string(),
        auth: ConnectionAuth::fixed(ANONYMOUS),
    })
}

/// The context of a request of `api_key` at `api_version` from `session`.
pub fn context(session: &Session, api_key: i16, api_version: i16) -> RequestContext {
    RequestContext {
        api_key,
        api_version,
        correlation_id: 1,
        client_id: Some("bench".to_string()),
        principal: session.principal().to_string(),
        client_host: session.client_host.clone(),
        listener: session.listener.clone(),
        security_protocol: session.security_protocol.clone(),
    }
}

async fn time_calls(handler: &LoadedHandler, host: &PluginHost, iterations: usize) -> Result<f64> {
    let session = session();
    let ctx = context(&session, handler.info().api_key, handler.info().min_version);
    let started = Instant::now();
    for _ in 0..iterations {
        let (outcome, _) = handler
            .call(
                host,
                &session,
                ctx.clone(),
                &bytes::Bytes::new(),
                0,
                Deferral::default(),
            )
            .await;
        match outcome {
            Ok(CallOutcome::Done(Answered::Respond(_))) => {}
            Ok(_) => bail!("the module did not respond"),
            Err(error) => bail!("call failed: {error}"),
        }
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / iterations as f64)
}

pub async fn run(args: &[String]) -> Result<()> {
    let mut plugin_dir = None;
    let mut module = "api_versions".to_string();
    let mut iterations = 20_000usize;
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--plugin-dir" => plugin_dir = Some(value.clone()),
            "--module" => module = value.clone(),
            "--iterations" => iterations = value.parse().context("--iterations")?,
            other => bail!("unknown flag {other}"),
        }
    }
    let plugin_dir = plugin_dir.context("--plugin-dir is required")?;
    let data = std::env::temp_dir().join(format!("gregor-bench-call-{}", std::process::id()));
    let mut config = BrokerConfig::default();
    config.set_pair(&format!("log.dirs={}", data.display()))?;
    config.set_pair(&format!("plugin.dir={plugin_dir}"))?;
    let broker = Arc::new(Broker::open(Arc::new(config.clone()))?);

    let pooled = load(&config, &broker.plugins, &module, u64::MAX).await?;
    let fresh = load(&config, &broker.plugins, &module, 1).await?;
    time_calls(&pooled, &broker.plugins, iterations / 10).await?;
    let pooled_us = time_calls(&pooled, &broker.plugins, iterations).await?;
    let fresh_us = time_calls(&fresh, &broker.plugins, (iterations / 10).max(100)).await?;
    let started = Instant::now();
    let mut acc = 0u64;
    for i in 0..iterations as u64 * 100 {
        acc = acc.wrapping_add(empty_native_call(i));
    }
    std::hint::black_box(acc);
    let native_ns = started.elapsed().as_secs_f64() * 1e9 / (iterations as f64 * 100.0);
    let _ = std::fs::remove_dir_all(&data);
    println!(
        "{{\"bench\":\"plugin_call\",\"module\":\"{module}\",\"pooled_call_us\":{pooled_us:.2},\"fresh_instance_call_us\":{fresh_us:.2},\"empty_native_call_ns\":{native_ns:.2}}}"
    );
    println!("\n| {module} handler call | µs per call |\n|---|---|");
    println!("| pooled instance (instance reused) | {pooled_us:.2} |");
    println!("| fresh instance (instantiate + call) | {fresh_us:.2} |");
    println!("| empty native function call | {:.4} |", native_ns / 1000.0);
    Ok(())
}
