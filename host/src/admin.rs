//! The admin HTTP endpoint (default 127.0.0.1:9644, `admin.listener`):
//! list, upload and unload plugin modules, manage SCRAM users, switch the
//! authorizer, serve metrics. axum on hyper (HTTP/1.1, keep-alive, chunked
//! or `Content-Length` bodies), JSON answers: `{"result": ...}` on
//! success, `{"error": ...}` with a 4xx status otherwise. Who may do what
//! is `auth.rs`; the routes are `routes.rs`; the web console at `/` is
//! `console/`; HTTPS with client certificates (`admin.tls=true`) is
//! `tls.rs`.
//!
//! - `GET /plugins` — loaded handlers, authorizers and interceptors
//!   (ApiKey, versions, content hash, load time, call and error counts, a
//!   handler's or interceptor's `metering`: guest time, host calls by
//!   interface, bytes in and out, peak memory, CPU-limit throttling; see
//!   `plugins::metering`), interceptor chains and refused files.
//! - `PUT /plugins/{name}` — body is a `.wasm` module, read as it streams
//!   in up to `admin.upload.max.bytes` (default 64 MiB; 413 past it);
//!   validated, then written to the plugin directory and swapped in.
//! - `DELETE /plugins/{name}` — removes the module's file and unloads it.
//! - `GET /metrics` — Prometheus metrics (see `metrics.rs`).
//! - `GET /health` — `ok` (never needs credentials).
//! - `GET /`, `GET /console/...` — the web console (`console/`).
//! - `GET /users` — users with SCRAM credentials (mechanisms, iterations).
//! - `PUT /users/{name}` — body `{"password": "...", "mechanisms":
//!   ["SCRAM-SHA-256", "SCRAM-SHA-512"], "iterations": 4096}` (mechanisms
//!   and iterations optional): set a user's credentials.
//! - `DELETE /users/{name}` — remove every credential of a user.
//! - `GET /authorizer` — the active authorizer and the loaded ones.
//! - `PUT /authorizer` — body is an authorizer module's name, or `none`:
//!   switch live; decisions cached for the old one are dropped.
//! - `/rollouts...` — canary and shadow rollouts (`rollout.rs`).
//!
//! `admin.tls=true` serves HTTPS with the listeners' TLS settings
//! (`listener.name.admin.ssl.*`, else `ssl.*`); `admin.auth=tls` then
//! takes the client certificate as the identity (`tls.rs`, `auth.rs`).

mod auth;
mod body;
mod console;
mod rollout;
mod routes;
mod tls;

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::apis::{ParkedGauge, WorkerIdle};
use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::metrics::{Exposition, PluginCounters, ScrapeGauges};
use crate::network::channel::RequestChannel;
use crate::plugins::manager::PluginManager;
use crate::security::settings::{tls_settings, ClientAuth};

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
    fn metrics_text(&self, format: Exposition) -> String {
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
                metering: handler.stats.meter.reading(),
            })
            .chain(
                self.broker
                    .registry()
                    .interceptors()
                    .iter()
                    .map(|interceptor| PluginCounters {
                        name: interceptor.source().name.to_string(),
                        // An interceptor may wrap several ApiKeys.
                        api_key: INTERCEPTOR_API_KEY,
                        calls: interceptor.stats.calls.load(Relaxed),
                        traps: interceptor.stats.traps.load(Relaxed),
                        timeouts: interceptor.stats.timeouts.load(Relaxed),
                        metering: interceptor.stats.meter.reading(),
                    }),
            )
            .collect();
        let gauges = ScrapeGauges {
            queue_size: self.channel.queue_size(),
            parked_requests: self.parked.get(),
            idle_ratio: self.worker_idle.ratio(),
            plugins,
        };
        let text = self.broker.services.metrics.render_as(&gauges, format);
        let rollouts = crate::plugins::rollout::metrics::render(
            &self.broker.registry().handlers(),
            &self.broker.registry().rollouts,
            format,
        );
        // The per-version families go before OpenMetrics' closing `# EOF`.
        match text.strip_suffix("# EOF\n") {
            Some(families) => format!("{families}{rollouts}# EOF\n"),
            None => text + &rollouts,
        }
    }
}

/// The `api_key` label of an interceptor module's families in `/metrics`
/// (it wraps as many ApiKeys as its chains say).
pub const INTERCEPTOR_API_KEY: i16 = -1;

/// The default largest module an upload may carry.
const DEFAULT_UPLOAD_MAX_BYTES: usize = 64 * 1024 * 1024;

/// How the endpoint is set up, from the broker config.
pub struct EndpointSettings {
    pub auth: AuthSettings,
    /// `admin.upload.max.bytes`: the largest module body read.
    pub upload_max_bytes: usize,
    /// `admin.tls=true`: HTTPS, with the listeners' TLS settings.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
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
        let auth = AuthSettings::from_config(config, authorizer_chosen)?;
        let tls = match config.get("admin.tls").map(str::trim) {
            None | Some("false") => None,
            Some("true") => {
                let tls = tls_settings(config, "admin").context("admin.tls=true")?;
                if auth.tls && tls.client_auth == ClientAuth::None {
                    bail!(
                        "admin.auth=tls needs client certificates: set ssl.client.auth \
                         (or listener.name.admin.ssl.client.auth) to required or requested"
                    );
                }
                Some(crate::network::tls::acceptor(&tls).context("admin.tls=true")?)
            }
            Some(other) => bail!("invalid value {other:?} for admin.tls (true or false)"),
        };
        Ok(Self {
            auth,
            upload_max_bytes,
            tls,
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
            tls = settings.tls.is_some(),
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
    let app = routes::router(Arc::clone(&state), settings.upload_max_bytes)
        .merge(rollout::router(
            Arc::clone(&state),
            settings.upload_max_bytes,
        ))
        .merge(console::router(state))
        .layer(axum::middleware::from_fn_with_state(auth, auth::guard))
        .layer(axum::middleware::from_fn(console::same_origin));
    let stopped = async move {
        while !*shutdown.borrow_and_update() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
    };
    let served = match settings.tls {
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor);
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<tls::Peer>(),
            )
            .with_graceful_shutdown(stopped)
            .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
        }
    };
    if let Err(error) = served {
        warn!("admin endpoint failed: {error}");
    }
}
