//! The admin HTTP endpoint (default 127.0.0.1:9644, `admin.listener`):
//! list, upload and unload plugin modules, manage SCRAM users, switch the
//! authorizer, serve metrics. axum on hyper (HTTP/1.1, keep-alive, chunked
//! or `Content-Length` bodies), JSON answers: `{"result": ...}` on
//! success, `{"error": ...}` with a 4xx status otherwise. Who may do what
//! is `auth.rs`; the routes are `routes.rs`.
//!
//! - `GET /plugins` — loaded handlers and authorizers (ApiKey, versions,
//!   content hash, load time, call and error counts) and refused files.
//! - `PUT /plugins/{name}` — body is a `.wasm` module, read as it streams
//!   in up to `admin.upload.max.bytes` (default 64 MiB; 413 past it);
//!   validated, then written to the plugin directory and swapped in.
//! - `DELETE /plugins/{name}` — removes the module's file and unloads it.
//! - `GET /metrics` — Prometheus metrics (see `metrics.rs`).
//! - `GET /health` — `ok` (never needs credentials).
//! - `GET /users` — users with SCRAM credentials (mechanisms, iterations).
//! - `PUT /users/{name}` — body `{"password": "...", "mechanisms":
//!   ["SCRAM-SHA-256", "SCRAM-SHA-512"], "iterations": 4096}` (mechanisms
//!   and iterations optional): set a user's credentials.
//! - `DELETE /users/{name}` — remove every credential of a user.
//! - `GET /authorizer` — the active authorizer and the loaded ones.
//! - `PUT /authorizer` — body is an authorizer module's name, or `none`:
//!   switch live; decisions cached for the old one are dropped.

mod auth;
mod body;
mod routes;

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::apis::{ParkedGauge, WorkerIdle};
use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::metrics::{PluginCounters, ScrapeGauges};
use crate::network::channel::RequestChannel;
use crate::plugins::manager::PluginManager;

pub use auth::AuthSettings;

/// What the admin endpoint serves from.
pub struct AdminState {
    pub plugins: Arc<PluginManager>,
    pub broker: Arc<Broker>,
    pub channel: RequestChannel,
    pub worker_idle: Arc<WorkerIdle>,
    pub parked: Arc<ParkedGauge>,
}

impl AdminState {
    fn metrics_text(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let plugins = self
            .broker
            .registry()
            .handlers()
            .iter()
            .map(|handler| PluginCounters {
                name: handler.source().name.to_string(),
                api_key: handler.info().api_key,
                calls: handler.stats.calls.load(Relaxed),
                traps: handler.stats.traps.load(Relaxed),
                timeouts: handler.stats.timeouts.load(Relaxed),
            })
            .collect();
        let gauges = ScrapeGauges {
            queue_size: self.channel.queue_size(),
            parked_requests: self.parked.get(),
            idle_ratio: self.worker_idle.ratio(),
            plugins,
        };
        self.broker.services.metrics.render(&gauges)
    }
}

/// The default largest module an upload may carry.
const DEFAULT_UPLOAD_MAX_BYTES: usize = 64 * 1024 * 1024;

/// How the endpoint is set up, from the broker config.
pub struct EndpointSettings {
    pub auth: AuthSettings,
    /// `admin.upload.max.bytes`: the largest module body read.
    pub upload_max_bytes: usize,
}

impl EndpointSettings {
    /// Fails, naming the setting, on a bad value or on an unauthenticated
    /// endpoint of a secured broker (see `auth.rs`). `authorizer_chosen`:
    /// whether an authorizer decides (persisted choices included).
    pub fn from_config(config: &BrokerConfig, authorizer_chosen: bool) -> Result<Self> {
        let upload_max_bytes = match config.get("admin.upload.max.bytes") {
            Some(raw) => raw
                .trim()
                .parse()
                .with_context(|| format!("invalid value {raw:?} for admin.upload.max.bytes"))?,
            None => DEFAULT_UPLOAD_MAX_BYTES,
        };
        Ok(Self {
            auth: AuthSettings::from_config(config, authorizer_chosen)?,
            upload_max_bytes,
        })
    }
}

pub async fn serve(
    listener: TcpListener,
    state: Arc<AdminState>,
    settings: EndpointSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    if let Ok(address) = listener.local_addr() {
        info!(
            address = %address,
            authentication = settings.auth.enabled(),
            "admin endpoint listening"
        );
    }
    if settings.auth.enabled() && settings.auth.super_users.is_empty() {
        warn!("admin.auth is on but super.users is empty: no one may change plugins, users or the authorizer");
    }
    let auth = Arc::new(auth::AdminAuth {
        credentials: Arc::clone(&state.broker.services.credentials),
        settings: settings.auth,
    });
    let app = routes::router(state, settings.upload_max_bytes)
        .layer(axum::middleware::from_fn_with_state(auth, auth::guard));
    let stopped = async move {
        while !*shutdown.borrow_and_update() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
    };
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped)
        .await
    {
        warn!("admin endpoint failed: {error}");
    }
}
