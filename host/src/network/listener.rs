//! Listeners: bind each configured address and spawn a connection task per
//! accepted socket. A failed accept is logged and the listener goes on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::channel::Session;
use crate::config::ListenerSpec;
use crate::network::connection::{self, ConnectionContext};

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A bound listener, ready to accept.
pub struct BoundListener {
    pub spec: ListenerSpec,
    pub listener: TcpListener,
}

pub async fn bind(spec: &ListenerSpec) -> Result<BoundListener> {
    let address = spec.bind_address()?;
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("binding listener {} on {address}", spec.name))?;
    Ok(BoundListener {
        spec: spec.clone(),
        listener,
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
    info!(listener = %bound.spec.name, address = %local, "listening");
    loop {
        tokio::select! {
            accepted = bound.listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let session = Arc::new(Session {
                        connection_id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
                        principal: "User:ANONYMOUS".to_string(),
                        client_host: peer.ip().to_string(),
                        listener: bound.spec.name.clone(),
                        security_protocol: "PLAINTEXT".to_string(),
                    });
                    tokio::spawn(connection::serve(stream, session, Arc::clone(&ctx)));
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
