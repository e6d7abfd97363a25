//! Listeners: bind each configured address with its security protocol and
//! spawn a connection task per accepted socket. On SSL and SASL_SSL
//! listeners the task first runs the TLS handshake (a failed handshake
//! ends that connection only); on SASL listeners the connection starts
//! unauthenticated. A failed accept is logged and the listener goes on.
//! Each accepted connection is first admitted by the connection quotas:
//! at `max.connections` the listener waits for a slot before it accepts
//! more; over `max.connections.per.ip` the connection is closed at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use crate::config::{BrokerConfig, ListenerSpec};
use crate::network::connection::{self, ConnectionContext};
use crate::network::tls;
use crate::security::sasl::{ConnectionAuth, ANONYMOUS};
use crate::security::session::Session;
use crate::security::settings::{self, SecurityProtocol};

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// How a listener secures its connections.
#[derive(Clone)]
pub struct ListenerSecurity {
    pub protocol: SecurityProtocol,
    tls: Option<TlsAcceptor>,
    sasl_mechanisms: Vec<String>,
}

impl ListenerSecurity {
    /// From the broker config; reads the TLS files now.
    pub fn from_config(config: &BrokerConfig, listener: &str) -> Result<Self> {
        let protocol = settings::listener_protocol(config, listener)?;
        let tls = if protocol.uses_tls() {
            let tls_settings = settings::tls_settings(config, listener)?;
            Some(
                tls::acceptor(&tls_settings)
                    .with_context(|| format!("TLS for listener {listener}"))?,
            )
        } else {
            None
        };
        let sasl_mechanisms = if protocol.uses_sasl() {
            settings::sasl_mechanisms(config, listener)?
        } else {
            Vec::new()
        };
        Ok(Self {
            protocol,
            tls,
            sasl_mechanisms,
        })
    }

    fn auth(&self, certificate_principal: Option<String>) -> ConnectionAuth {
        if self.protocol.uses_sasl() {
            ConnectionAuth::sasl(self.sasl_mechanisms.clone())
        } else {
            ConnectionAuth::fixed(certificate_principal.as_deref().unwrap_or(ANONYMOUS))
        }
    }
}

/// A bound listener, ready to accept.
pub struct BoundListener {
    pub spec: ListenerSpec,
    pub listener: TcpListener,
    pub security: ListenerSecurity,
}

pub async fn bind(spec: &ListenerSpec, config: &BrokerConfig) -> Result<BoundListener> {
    let security = ListenerSecurity::from_config(config, &spec.name)?;
    let address = spec.bind_address()?;
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("binding listener {} on {address}", spec.name))?;
    Ok(BoundListener {
        spec: spec.clone(),
        listener,
        security,
    })
}

/// Accepts connections until `shutdown` turns true.
pub async fn accept_loop(
    bound: BoundListener,
    ctx: Arc<ConnectionContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let local = bound
        .listener
        .local_addr()
        .map(|address| address.to_string())
        .unwrap_or_default();
    info!(
        listener = %bound.spec.name,
        address = %local,
        security_protocol = %bound.security.protocol,
        "listening"
    );
    loop {
        tokio::select! {
            accepted = bound.listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let admitted = tokio::select! {
                        admitted = ctx.connection_quotas.admit(&bound.spec.name, peer.ip()) => admitted,
                        _ = shutdown.changed() => {
                            info!(listener = %bound.spec.name, "listener stopped");
                            return;
                        }
                    };
                    let slot = match admitted {
                        Ok(slot) => slot,
                        Err(refused) => {
                            info!(listener = %bound.spec.name, "{refused}");
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let security = bound.security.clone();
                    let listener = bound.spec.name.clone();
                    let ctx = Arc::clone(&ctx);
                    tokio::spawn(async move {
                        let _slot = slot;
                        let session = |principal: Option<String>| {
                            Arc::new(Session {
                                connection_id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
                                client_host: peer.ip().to_string(),
                                listener: listener.clone(),
                                security_protocol: security.protocol.name().to_string(),
                                auth: security.auth(principal),
                            })
                        };
                        match &security.tls {
                            None => connection::serve(stream, session(None), ctx).await,
                            Some(acceptor) => match tls::accept(acceptor, stream).await {
                                Ok((stream, principal)) => {
                                    connection::serve(stream, session(principal), ctx).await
                                }
                                Err(error) => {
                                    info!(listener = %listener, peer = %peer, "{error:#}")
                                }
                            },
                        }
                    });
                }
                Err(error) => {
                    warn!(listener = %bound.spec.name, "accept failed: {error}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => {
                info!(listener = %bound.spec.name, "listener stopped");
                return;
            }
        }
    }
}
