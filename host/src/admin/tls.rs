//! HTTPS on the admin port (`admin.tls=true`), with the listeners' TLS
//! settings: `listener.name.admin.ssl.*`, else the broker's `ssl.*`
//! (`security::settings::tls_settings`), the same acceptor and the same
//! certificate principal (`User:` + the subject as an RFC 2253 name) as
//! an SSL listener (`network::tls`). With `admin.auth=tls` that principal
//! is who the request comes from (`auth.rs`), so super users are named
//! by certificate as on the Kafka listeners.
//!
//! Handshakes run in tasks of their own, bounded by the handshake
//! timeout: a slow or silent client never holds up the next one. axum
//! takes the finished streams through [`axum::serve::Listener`], with the
//! principal as the connection's [`Peer`] (`ConnectInfo`).

use std::future::pending;
use std::io;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// Handshakes finished but not yet taken by the server.
const READY: usize = 64;

/// Who is on the other end of a connection: the client certificate's
/// principal, when one was presented.
#[derive(Debug, Clone)]
pub struct Peer {
    pub principal: Option<String>,
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// The admin port's listener, handing out streams after their handshake.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, Peer)>,
}

impl TlsListener {
    /// Accepts on `listener` until this listener is dropped.
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> Self {
        let (sender, ready) = mpsc::channel(READY);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = sender.closed() => return,
                };
                let (stream, address) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of descriptors and the like: wait, retry.
                        warn!("admin endpoint: accept failed: {error}");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match crate::network::tls::accept(&acceptor, stream).await {
                        Ok((stream, principal)) => {
                            let _ = sender.send((stream, Peer { principal })).await;
                        }
                        Err(error) => debug!(%address, "admin endpoint: {error:#}"),
                    }
                });
            }
        });
        Self { ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task is gone only once this listener is.
            None => pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(Peer { principal: None })
    }
}
