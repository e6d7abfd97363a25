//! `gregor`: a Kafka-compatible broker whose request handlers are
//! WebAssembly components.
//!
//! `gregor serve [--config server.properties] [--set key=value]...` starts
//! the broker: it opens storage, loads every module of the plugin
//! directory, binds the listeners and serves until SIGTERM or Ctrl-C, then
//! drains in-flight requests and flushes the logs.

mod admin;
mod apis;
mod bench_authz;
mod bench_call;
mod broker;
mod channel;
mod cli;
mod clock;
mod config;
mod coordinator;
mod durable;
mod error_code;
mod fd_limit;
#[cfg(test)]
mod fuzz_input;
mod log;
mod metadata;
mod metrics;
mod network;
mod plugins;
mod producer_ids;
mod purgatory;
mod quota;
mod replica;
mod runtime_loggers;
mod security;
mod sync;
mod telemetry;
mod transactions;
mod uuid;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::apis::KafkaApis;
use crate::broker::{AdvertisedListener, Broker};
use crate::channel::RequestChannel;
use crate::config::BrokerConfig;
use crate::network::connection::ConnectionContext;
use crate::network::connection_quotas::{ConnectionQuotas, QuotaLimits};
use crate::network::listener;
use crate::network::memory_pool::MemoryPool;
use crate::plugins::engine::{build_engine, start_epoch_ticker};
use crate::plugins::handler::InstanceLimits;
use crate::plugins::loader::Loader;
use crate::plugins::manager::PluginManager;

const USAGE: &str = "usage: gregor serve [--config FILE] [--set key=value]...
       gregor plugins list | load FILE [--name NAME] | unload NAME [--admin HOST:PORT]
       gregor users list | add NAME --password PASSWORD [--mechanism M] [--iterations N] | delete NAME [--admin HOST:PORT]
       gregor authorizer show | use NAME|none [--admin HOST:PORT]";

/// How long shutdown waits for in-flight requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("bench-authz") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build();
        let result = runtime
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(bench_authz::run(&args[1..])));
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("bench-call") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build();
        let result = runtime
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(bench_call::run(&args[1..])));
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    if matches!(
        args.first().map(String::as_str),
        Some("users" | "authorizer")
    ) {
        return match cli::run_security(&args[0], &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("plugins") {
        return match cli::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("gregor: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match parse_args(&args) {
        Ok(Some(config)) => config,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("gregor: {error:#}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    runtime_loggers::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gregor: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            error!("gregor failed: {error:#}");
            eprintln!("gregor: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(args: &[String]) -> Result<Option<BrokerConfig>> {
    let mut iter = args.iter();
    match iter.next().map(String::as_str) {
        Some("serve") => {}
        Some("--help" | "-h" | "help") | None => return Ok(None),
        Some(other) => bail!("unknown command {other:?}"),
    }
    let mut file: Option<PathBuf> = None;
    let mut overrides = Vec::new();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--config" => file = Some(PathBuf::from(iter.next().context("--config needs a file")?)),
            "--set" => overrides.push(iter.next().context("--set needs key=value")?.clone()),
            other => bail!("unknown argument {other:?}"),
        }
    }
    let mut config = match file {
        Some(path) => BrokerConfig::from_file(&path)?,
        None => BrokerConfig::default(),
    };
    for pair in overrides {
        config.set_pair(&pair)?;
    }
    config.validate()?;
    Ok(Some(config))
}

async fn serve(config: BrokerConfig) -> Result<()> {
    let started = Instant::now();
    fd_limit::raise_to_hard_limit();
    let config = Arc::new(config);
    let broker = Arc::new(Broker::open(Arc::clone(&config))?);

    let limits = InstanceLimits {
        memory_max: config.plugin_memory_max_bytes()?,
        recycle_memory: config.plugin_memory_recycle_bytes()?,
        call_timeout: Duration::from_millis(config.plugin_call_timeout_ms()?),
        max_calls: config.plugin_instance_max_calls()?,
    };
    let engine = build_engine(limits.memory_max)?;
    start_epoch_ticker(engine.clone())?;
    let loader = Loader::new(engine, &config.plugin_cache_dir(), limits)?;
    let plugins = Arc::new(PluginManager::new(loader, Arc::clone(&broker)));
    plugins.load_all().await?;

    let mut bound = Vec::new();
    let mut advertised = Vec::new();
    for spec in config.listeners()? {
        let listener = listener::bind(&spec, &config).await?;
        let port = listener.listener.local_addr()?.port();
        advertised.push(AdvertisedListener {
            name: spec.name.clone(),
            host: advertised_host(&spec.host),
            port,
        });
        bound.push(listener);
    }
    broker.set_advertised(advertised.clone());

    let channel = RequestChannel::new(config.queued_max_requests()?);
    let apis = Arc::new(KafkaApis::new(Arc::clone(&broker), channel.clone()));
    let parked = apis.parked();
    let (workers, worker_idle) = apis::spawn_workers(config.io_threads()?, &channel, apis);
    let ctx = Arc::new(ConnectionContext {
        registry: Arc::clone(&broker.registry),
        metrics: Arc::clone(&broker.metrics),
        channel: channel.clone(),
        max_request_bytes: config.socket_request_max_bytes()?,
        memory_pool: MemoryPool::new(
            config.queued_max_request_bytes()?,
            Arc::clone(&broker.metrics),
        ),
        connection_quotas: ConnectionQuotas::new(
            QuotaLimits::from_config(&config)?,
            Arc::clone(&broker.metrics),
        ),
    });
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(sweep_expired_tokens(Arc::clone(&broker), stopped.clone()));
    tokio::spawn(abort_timed_out_transactions(
        Arc::clone(&broker),
        broker.transaction_abort_interval()?,
        broker.transactional_id_expiration_ms()?,
        stopped.clone(),
    ));
    tokio::spawn(Arc::clone(&plugins).watch(config.plugin_watch_interval()?, stopped.clone()));
    if let Some(address) = config.admin_listener()? {
        let admin_listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the admin endpoint on {address}"))?;
        let admin_state = admin::AdminState {
            plugins: Arc::clone(&plugins),
            broker: Arc::clone(&broker),
            channel: channel.clone(),
            worker_idle: Arc::clone(&worker_idle),
            parked: Arc::clone(&parked),
        };
        tokio::spawn(admin::serve(
            admin_listener,
            Arc::new(admin_state),
            stopped.clone(),
        ));
    }
    let listeners: Vec<_> = bound
        .into_iter()
        .map(|bound| {
            tokio::spawn(listener::accept_loop(
                bound,
                Arc::clone(&ctx),
                stopped.clone(),
            ))
        })
        .collect();
    let addresses: Vec<String> = advertised
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect();
    info!(
        listeners = %addresses.join(","),
        startup_ms = started.elapsed().as_millis() as u64,
        "gregor started"
    );

    wait_for_signal().await;
    info!("shutting down: draining in-flight requests");
    let _ = stop.send(true);
    for listener in listeners {
        let _ = listener.await;
    }
    // Parked requests (long polls, rebalances) come back through the
    // channel once their wait is over: keep it open for them first.
    let drain_deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while parked.get() > 0 && tokio::time::Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    channel.close();
    let drained =
        tokio::time::timeout_at(drain_deadline, futures_util::future::join_all(workers)).await;
    if drained.is_err() {
        warn!("in-flight requests did not finish within {DRAIN_TIMEOUT:?}");
    }
    broker.flush()?;
    info!("gregor stopped");
    Ok(())
}

/// Removes expired delegation tokens every
/// `delegation.token.expiry.check.interval.ms`, as Kafka's controller does.
async fn sweep_expired_tokens(broker: Arc<Broker>, mut stopped: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(broker.tokens.check_interval());
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let tokens = Arc::clone(&broker.tokens);
                let _ = tokio::task::spawn_blocking(move || tokens.sweep()).await;
            }
            _ = stopped.changed() => return,
        }
    }
}

/// The transaction coordinator's clock: finishes transactions a crash or a
/// failed marker left prepared, aborts those open past their timeout and
/// forgets idle transactional ids.
async fn abort_timed_out_transactions(
    broker: Arc<Broker>,
    interval: Duration,
    id_expiration_ms: i64,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let broker = Arc::clone(&broker);
                let _ = tokio::task::spawn_blocking(move || {
                    broker.transactions.finish_prepared(broker.as_ref());
                    broker.transactions.abort_timed_out(
                        broker.as_ref(),
                        crate::clock::now_ms(),
                        id_expiration_ms,
                    );
                })
                .await;
            }
            _ = stopped.changed() => return,
        }
    }
}

/// The host clients should use: a wildcard bind advertises loopback.
fn advertised_host(bind_host: &str) -> String {
    match bind_host {
        "0.0.0.0" | "::" | "" => "127.0.0.1".to_string(),
        other => other.to_string(),
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(error) => {
                    warn!("cannot listen for SIGTERM: {error}");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
