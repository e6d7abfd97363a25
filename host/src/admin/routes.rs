//! The admin endpoint's routes (listed in `admin.rs`) and their answers:
//! JSON `{"result": ...}` on success, `{"error": ...}` with the status of
//! what went wrong, as the CLI and tests read them.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::body::read_body;
use super::AdminState;
use crate::metrics::Exposition;
use crate::security::admin as users;

/// The largest body of the small JSON or text requests (users, authorizer).
const SMALL_BODY_BYTES: usize = 64 * 1024;

#[derive(Clone)]
struct Served {
    state: Arc<AdminState>,
    upload_max_bytes: usize,
}

pub fn router(state: Arc<AdminState>, upload_max_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/plugins", get(list_plugins))
        .route("/plugins/{name}", axum::routing::put(upload).delete(unload))
        .route("/users", get(list_users))
        .route(
            "/users/{name}",
            axum::routing::put(set_user).delete(delete_user),
        )
        .route("/authorizer", get(show_authorizer).put(use_authorizer))
        .method_not_allowed_fallback(|| async {
            error_reply(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        })
        .fallback(|| async { error_reply(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(Served {
            state,
            upload_max_bytes,
        })
}

/// A JSON answer.
pub(super) fn json_reply(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `{"error": reason}` with `status`.
pub fn error_reply(status: StatusCode, reason: &str) -> Response {
    json_reply(status, &json!({ "error": reason }))
}

/// `{"result": what}` (200), or `{"error": reason}` with `failed`.
pub(super) fn outcome(result: Result<String, String>, failed: StatusCode) -> Response {
    match result {
        Ok(what) => json_reply(StatusCode::OK, &json!({ "result": what })),
        Err(reason) => error_reply(failed, &reason),
    }
}

/// The `{name}` of a route, or a 400 naming what is wrong with it.
pub(super) fn segment(name: Result<Path<String>, PathRejection>) -> Result<String, Box<Response>> {
    name.map(|Path(name)| name)
        .map_err(|rejection| Box::new(error_reply(StatusCode::BAD_REQUEST, &rejection.body_text())))
}

async fn health() -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], "ok\n").into_response()
}

/// Prometheus text, or OpenMetrics when the scraper's `Accept` prefers it.
async fn metrics(State(served): State<Served>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Exposition::from_accept(accept);
    let text = served.state.metrics_text(format);
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

async fn list_plugins(State(served): State<Served>) -> Response {
    json_reply(StatusCode::OK, &served.state.plugins.status())
}

async fn upload(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    let module = match read_body(&headers, body, served.upload_max_bytes, true).await {
        Ok(module) => module,
        Err(response) => return response,
    };
    outcome(
        served.state.plugins.upload(&name, module).await,
        StatusCode::BAD_REQUEST,
    )
}

async fn unload(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
) -> Response {
    match segment(name) {
        Ok(name) => outcome(
            served.state.plugins.unload(&name).await,
            StatusCode::NOT_FOUND,
        ),
        Err(response) => *response,
    }
}

async fn list_users(State(served): State<Served>) -> Response {
    json_reply(
        StatusCode::OK,
        &users::list_users(&served.state.broker.services.credentials),
    )
}

async fn set_user(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    let body = match read_body(&headers, body, SMALL_BODY_BYTES, true).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    outcome(
        users::set_user(&served.state.broker.services.credentials, &name, &body).await,
        StatusCode::BAD_REQUEST,
    )
}

async fn delete_user(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
) -> Response {
    match segment(name) {
        Ok(name) => outcome(
            users::delete_user(&served.state.broker.services.credentials, &name),
            StatusCode::NOT_FOUND,
        ),
        Err(response) => *response,
    }
}

async fn show_authorizer(State(served): State<Served>) -> Response {
    json_reply(StatusCode::OK, &served.state.plugins.authorizer_status())
}

async fn use_authorizer(State(served): State<Served>, headers: HeaderMap, body: Body) -> Response {
    let body = match read_body(&headers, body, SMALL_BODY_BYTES, true).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let name = String::from_utf8_lossy(&body).trim().to_string();
    let choice = match name.as_str() {
        "" | "none" => None,
        other => Some(other),
    };
    outcome(
        served.state.plugins.use_authorizer(choice).await,
        StatusCode::BAD_REQUEST,
    )
}
