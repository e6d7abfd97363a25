//! `gregor serve`: opens storage, loads every module of the plugin
//! directory, binds the listeners and serves until SIGTERM or Ctrl-C,
//! then (a broker in a cluster) waits for its controlled shutdown, drains
//! in-flight requests and flushes the logs. Also the
//! services' clocks that run beside the request path (expired delegation
//! tokens, timed-out transactions).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::apis::{self, KafkaApis};
use crate::broker::Broker;
use crate::cluster::config::ClusterConfig;
use crate::cluster::image::MetadataImage;
use crate::cluster::node::ClusterNode;
use crate::cluster::quorum::Quorum;
use crate::config::BrokerConfig;
use crate::network::channel::RequestChannel;
use crate::network::connection::ConnectionContext;
use crate::network::connection_quotas::{ConnectionQuotas, QuotaLimits};
use crate::network::listener;
use crate::network::memory_pool::MemoryPool;
use crate::plugins::engine::{build_engine, start_epoch_ticker};
use crate::plugins::handler::InstanceLimits;
use crate::plugins::loader::Loader;
use crate::plugins::manager::PluginManager;
use crate::services::{AdvertisedListener, Services};
use crate::{admin, fd_limit};

/// How long shutdown waits for in-flight requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn serve(config: BrokerConfig) -> Result<()> {
    let started = Instant::now();
    fd_limit::raise_to_hard_limit();
    // Cluster settings are checked before anything is opened or bound:
    // a misconfigured node exits with the offending key.
    let cluster_config = ClusterConfig::from(&config)?;
    let config = Arc::new(config);
    let broker = Arc::new(Broker::open(Arc::clone(&config))?);
    let cluster = match cluster_config {
        Some(cluster_config) => {
            Some(ClusterNode::start(&config, cluster_config, &broker.services).await?)
        }
        None => None,
    };
    if let Some(node) = &cluster {
        let quorum: Arc<dyn Quorum<MetadataImage>> = node.quorum.clone();
        crate::authorizer_choice::attach(quorum, &broker.plugins);
        if let Some(forwarder) = node.forwarder(&config)? {
            let _ = broker.plugins.forwarder.set(Arc::new(forwarder));
        }
    }
    if let Some(active) = cluster.as_ref().and_then(|node| node.active.clone()) {
        let _ = broker.plugins.controller.set(active);
    }

    let limits = InstanceLimits {
        memory_max: config.plugin_memory_max_bytes()?,
        recycle_memory: config.plugin_memory_recycle_bytes()?,
        call_timeout: Duration::from_millis(config.plugin_call_timeout_ms()?),
        max_calls: config.plugin_instance_max_calls()?,
    };
    let engine = build_engine(limits.memory_max)?;
    start_epoch_ticker(engine.clone())?;
    let loader = Loader::new(engine, &config.plugin_cache_dir(), limits)?;
    let plugins = Arc::new(PluginManager::new(loader, broker.plugins.clone()));
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
    broker.services.set_advertised(advertised.clone());
    let (stop, stopped) = watch::channel(false);
    let mut fatal = match &cluster {
        Some(node) => Some(
            node.run(&config, &broker.services, &advertised, stopped.clone())
                .await?,
        ),
        None => None,
    };

    let channel = RequestChannel::new(config.queued_max_requests()?);
    let apis = Arc::new(KafkaApis::new(Arc::clone(&broker), channel.clone()));
    let parked = apis.parked();
    let (workers, worker_idle) = apis::spawn_workers(config.io_threads()?, &channel, apis);
    let ctx = Arc::new(ConnectionContext {
        registry: Arc::clone(broker.registry()),
        metrics: Arc::clone(&broker.services.metrics),
        channel: channel.clone(),
        max_request_bytes: config.socket_request_max_bytes()?,
        memory_pool: MemoryPool::new(
            config.queued_max_request_bytes()?,
            Arc::clone(&broker.services.metrics),
        ),
        connection_quotas: ConnectionQuotas::new(
            QuotaLimits::from_config(&config)?,
            Arc::clone(&broker.services.metrics),
        ),
        credentials: Arc::clone(&broker.services.credentials),
        controller_listeners: cluster
            .as_ref()
            .map(ClusterNode::controller_listeners)
            .unwrap_or_default(),
        forwards_controller_apis: broker.plugins.forwarder.get().is_some(),
    });
    tokio::spawn(sweep_expired_tokens(
        Arc::clone(&broker.services),
        stopped.clone(),
    ));
    tokio::spawn(abort_timed_out_transactions(
        Arc::clone(&broker.services),
        broker.services.transaction_abort_interval()?,
        broker.services.transactional_id_expiration_ms()?,
        stopped.clone(),
    ));
    tokio::spawn(Arc::clone(&plugins).watch(config.plugin_watch_interval()?, stopped.clone()));
    if let Some(address) = config.admin_listener()? {
        let authorizer_chosen = broker.authorization().active_name().is_some();
        let admin_settings = admin::EndpointSettings::from_config(&config, authorizer_chosen)?;
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
            admin_settings,
            stopped.clone(),
        ));
    }
    // The controller listeners first (brokers, this one too, register
    // through them); the client listeners once this broker has caught up
    // with the metadata log.
    let (controller, clients): (Vec<_>, Vec<_>) = bound
        .into_iter()
        .partition(|bound| ctx.controller_listeners.contains(&bound.spec.name));
    let accept = |bound| {
        tokio::spawn(listener::accept_loop(
            bound,
            Arc::clone(&ctx),
            stopped.clone(),
        ))
    };
    let mut listeners: Vec<_> = controller.into_iter().map(accept).collect();
    if let Some(node) = &cluster {
        node.catch_up().await;
    }
    listeners.extend(clients.into_iter().map(accept));
    let addresses: Vec<String> = advertised
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect();
    info!(
        listeners = %addresses.join(","),
        startup_ms = started.elapsed().as_millis() as u64,
        "gregor started"
    );

    let mut signals = Signals::listen();
    let failure = match fatal.as_mut() {
        Some(fatal) => tokio::select! {
            () = signals.next() => None,
            error = fatal.recv() => error,
        },
        None => {
            signals.next().await;
            None
        }
    };
    if failure.is_none() {
        if let Some(node) = &cluster {
            // Still serving: clients and followers move to the new leaders.
            tokio::select! {
                () = node.controlled_shutdown() => {}
                () = signals.next() => warn!("a second signal: not waiting for the controller"),
            }
        }
    }
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
    broker.services.flush()?;
    if let Some(node) = &cluster {
        node.shutdown().await;
    }
    if let Some(error) = failure {
        anyhow::bail!("{error}");
    }
    info!("gregor stopped");
    Ok(())
}

/// Removes expired delegation tokens every
/// `delegation.token.expiry.check.interval.ms`, as Kafka's controller does.
async fn sweep_expired_tokens(services: Arc<Services>, mut stopped: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(services.tokens.check_interval());
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let tokens = Arc::clone(&services.tokens);
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
    services: Arc<Services>,
    interval: Duration,
    id_expiration_ms: i64,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let services = Arc::clone(&services);
                let _ = tokio::task::spawn_blocking(move || {
                    services.transactions.finish_prepared(services.as_ref());
                    services.transactions.abort_timed_out(
                        services.as_ref(),
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

/// SIGINT and SIGTERM, listened for once: a second signal that comes
/// while the first is being handled is kept, not lost between two
/// listeners (Ctrl-C in a terminal sends SIGINT to a whole process group,
/// and `scripts/cluster.sh` follows it with SIGTERM: without it, a node
/// whose controller had already stopped waited out its controlled
/// shutdown).
struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(stream) => Some(stream),
                Err(error) => {
                    warn!("cannot listen for {name}: {error}");
                    None
                }
            };
            Self {
                interrupt: listen(SignalKind::interrupt(), "SIGINT"),
                terminate: listen(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) {
        #[cfg(unix)]
        match (self.interrupt.as_mut(), self.terminate.as_mut()) {
            (Some(interrupt), Some(terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            (Some(interrupt), None) => {
                interrupt.recv().await;
            }
            (None, Some(terminate)) => {
                terminate.recv().await;
            }
            (None, None) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
