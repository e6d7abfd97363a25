//! The admin HTTP endpoint (default 127.0.0.1:9644, `admin.listener`):
//! list, upload and unload plugin modules. Deliberately small: HTTP/1.1,
//! one request per connection, `Content-Length` bodies, JSON answers.
//!
//! - `GET /plugins` — loaded handlers and authorizers (ApiKey, versions,
//!   content hash, load time, call and error counts) and refused files.
//! - `PUT /plugins/{name}` — body is a `.wasm` module; validated, then
//!   written to the plugin directory and swapped in.
//! - `DELETE /plugins/{name}` — removes the module's file and unloads it.
//! - `GET /metrics` — Prometheus metrics (see `metrics.rs`).
//! - `GET /health` — `ok`.
//! - `GET /users` — users with SCRAM credentials (mechanisms, iterations).
//! - `PUT /users/{name}` — body `{"password": "...", "mechanisms":
//!   ["SCRAM-SHA-256", "SCRAM-SHA-512"], "iterations": 4096}` (mechanisms
//!   and iterations optional): set a user's credentials.
//! - `DELETE /users/{name}` — remove every credential of a user.
//! - `GET /authorizer` — the active authorizer and the loaded ones.
//! - `PUT /authorizer` — body is an authorizer module's name, or `none`:
//!   switch live; decisions cached for the old one are dropped.

use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::apis::{ParkedGauge, WorkerIdle};
use crate::broker::Broker;
use crate::metrics::{PluginCounters, ScrapeGauges};
use crate::network::channel::RequestChannel;
use crate::plugins::manager::PluginManager;

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

/// The largest module an upload may carry.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// The largest request head (request line and headers).
const MAX_HEAD_BYTES: usize = 16 * 1024;

struct HttpRequest {
    method: String,
    path: String,
    body: Vec<u8>,
}

struct HttpResponse {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl HttpResponse {
    fn json(status: u16, value: &serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    fn message(status: u16, key: &str, text: &str) -> Self {
        Self::json(status, &json!({ key: text }))
    }
}

pub async fn serve(
    listener: TcpListener,
    state: Arc<AdminState>,
    mut shutdown: watch::Receiver<bool>,
) {
    if let Ok(address) = listener.local_addr() {
        info!(address = %address, "admin endpoint listening");
    }
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        if let Err(error) = handle_connection(stream, &state).await {
                            debug!("admin connection: {error}");
                        }
                    });
                }
                Err(error) => warn!("admin accept failed: {error}"),
            },
            _ = shutdown.changed() => return,
        }
    }
}

async fn handle_connection(stream: TcpStream, state: &AdminState) -> std::io::Result<()> {
    let (read_half, mut write_half) = stream.into_split();
    let mut reader = BufReader::new(read_half);
    let response = match read_request(&mut reader).await {
        Ok(request) => route(request, state).await,
        Err(response) => response,
    };
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    write_half.write_all(head.as_bytes()).await?;
    write_half.write_all(&response.body).await?;
    write_half.shutdown().await
}

async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<HttpRequest, HttpResponse> {
    let bad = |text: &str| HttpResponse::message(400, "error", text);
    let mut head_bytes = 0;
    let mut request_line = String::new();
    reader
        .read_line(&mut request_line)
        .await
        .map_err(|_| bad("unreadable request"))?;
    head_bytes += request_line.len();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(bad("malformed request line"));
    };
    let (method, path) = (method.to_string(), path.to_string());
    let mut content_length: Option<usize> = None;
    loop {
        let mut line = String::new();
        let read = reader
            .read_line(&mut line)
            .await
            .map_err(|_| bad("unreadable header"))?;
        head_bytes += read;
        if read == 0 || head_bytes > MAX_HEAD_BYTES {
            return Err(bad("request head too large or truncated"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                content_length = Some(
                    value
                        .trim()
                        .parse()
                        .map_err(|_| bad("invalid Content-Length"))?,
                );
            }
        }
    }
    let length = content_length.unwrap_or(0);
    if length > MAX_BODY_BYTES {
        return Err(HttpResponse::message(413, "error", "body too large"));
    }
    if method == "PUT" && content_length.is_none() {
        return Err(HttpResponse::message(
            411,
            "error",
            "Content-Length required",
        ));
    }
    let mut body = vec![0u8; length];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|_| bad("truncated body"))?;
    Ok(HttpRequest { method, path, body })
}

async fn route(request: HttpRequest, state: &AdminState) -> HttpResponse {
    let plugins = &state.plugins;
    let path = request.path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["health"]) => HttpResponse {
            status: 200,
            content_type: "text/plain",
            body: b"ok\n".to_vec(),
        },
        ("GET", ["metrics"]) => HttpResponse {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: state.metrics_text().into_bytes(),
        },
        ("GET", ["plugins"]) => HttpResponse::json(200, &plugins.status()),
        ("PUT", ["plugins", name]) => match plugins.upload(name, request.body).await {
            Ok(what) => HttpResponse::message(200, "result", &what),
            Err(reason) => HttpResponse::message(400, "error", &reason),
        },
        ("DELETE", ["plugins", name]) => match plugins.unload(name).await {
            Ok(what) => HttpResponse::message(200, "result", &what),
            Err(reason) => HttpResponse::message(404, "error", &reason),
        },
        ("GET", ["users"]) => HttpResponse::json(
            200,
            &crate::security::admin::list_users(&state.broker.services.credentials),
        ),
        ("PUT", ["users", name]) => {
            match crate::security::admin::set_user(
                &state.broker.services.credentials,
                name,
                &request.body,
            )
            .await
            {
                Ok(what) => HttpResponse::message(200, "result", &what),
                Err(reason) => HttpResponse::message(400, "error", &reason),
            }
        }
        ("DELETE", ["users", name]) => {
            match crate::security::admin::delete_user(&state.broker.services.credentials, name) {
                Ok(what) => HttpResponse::message(200, "result", &what),
                Err(reason) => HttpResponse::message(404, "error", &reason),
            }
        }
        ("GET", ["authorizer"]) => HttpResponse::json(200, &plugins.authorizer_status()),
        ("PUT", ["authorizer"]) => {
            let name = String::from_utf8_lossy(&request.body).trim().to_string();
            let choice = match name.as_str() {
                "" | "none" => None,
                other => Some(other),
            };
            match plugins.use_authorizer(choice).await {
                Ok(what) => HttpResponse::message(200, "result", &what),
                Err(reason) => HttpResponse::message(400, "error", &reason),
            }
        }
        (_, ["users", ..]) | (_, ["authorizer"]) => {
            HttpResponse::message(405, "error", "method not allowed")
        }
        (_, ["plugins", ..]) | (_, ["health"]) => {
            HttpResponse::message(405, "error", "method not allowed")
        }
        _ => HttpResponse::message(404, "error", "no such endpoint"),
    }
}
