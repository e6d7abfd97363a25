//! The admin routes of rollouts (`plugins::rollout`), kept apart from the
//! other routes; `admin.rs` merges them:
//!
//! - `GET /rollouts` — rollouts in progress (both versions' calls, traps,
//!   timeouts, error responses and p99 over the window and since the
//!   start, the canary's error codes, a shadow's differences) and the
//!   last ended ones with why they ended.
//! - `PUT /rollouts/{module}/canary?percent=10&principals=User:a,User:b&client_ids=x`
//!   — body is the new version's `.wasm`; it serves the selected share.
//! - `PUT /rollouts/{module}/shadow` — body is the new version's `.wasm`;
//!   it runs on copies of live requests with its writes dry-run.
//! - `POST /rollouts/{module}/promote` — the new version replaces the
//!   module's file and serves everything.
//! - `POST /rollouts/{module}/rollback` — the serving version serves
//!   everything again.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::Router;

use super::body::read_body;
use super::routes::{error_reply, json_reply, outcome, segment};
use super::AdminState;
use crate::plugins::rollout::{ops, Selector};

#[derive(Clone)]
struct Served {
    state: Arc<AdminState>,
    upload_max_bytes: usize,
}

pub fn router(state: Arc<AdminState>, upload_max_bytes: usize) -> Router {
    Router::new()
        .route("/rollouts", get(status))
        .route("/rollouts/{module}/canary", put(canary))
        .route("/rollouts/{module}/shadow", put(shadow))
        .route("/rollouts/{module}/promote", post(promote))
        .route("/rollouts/{module}/rollback", post(rollback))
        .with_state(Served {
            state,
            upload_max_bytes,
        })
}

async fn status(State(served): State<Served>) -> Response {
    json_reply(
        StatusCode::OK,
        &served.state.broker.registry().rollouts.status(),
    )
}

async fn canary(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    let selector = match selector(uri.query().unwrap_or("")) {
        Ok(selector) => selector,
        Err(reason) => return error_reply(StatusCode::BAD_REQUEST, &reason),
    };
    let bytes = match read_body(&headers, body, served.upload_max_bytes, true).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let state = &served.state;
    let result = ops::canary(
        &state.plugins,
        state.broker.registry(),
        &state.broker.services.config,
        &name,
        bytes,
        selector,
    )
    .await;
    outcome(result, StatusCode::BAD_REQUEST)
}

async fn shadow(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    let bytes = match read_body(&headers, body, served.upload_max_bytes, true).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let state = &served.state;
    let result = ops::shadow(
        &state.plugins,
        state.broker.registry(),
        &state.broker.services.config,
        &name,
        bytes,
    )
    .await;
    outcome(result, StatusCode::BAD_REQUEST)
}

async fn promote(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    let state = &served.state;
    let result = ops::promote(&state.plugins, state.broker.registry(), &name).await;
    outcome(result, StatusCode::NOT_FOUND)
}

async fn rollback(
    State(served): State<Served>,
    name: Result<Path<String>, PathRejection>,
) -> Response {
    let name = match segment(name) {
        Ok(name) => name,
        Err(response) => return *response,
    };
    outcome(
        ops::rollback(served.state.broker.registry(), &name),
        StatusCode::NOT_FOUND,
    )
}

/// The canary's selector from the query: `percent` (0-100, default 0),
/// `principals` and `client_ids` (comma-separated).
fn selector(query: &str) -> Result<Selector, String> {
    let mut selector = Selector::default();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value)?;
        let list = || {
            value
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        match key {
            "percent" => {
                selector.percent = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|percent| *percent <= 100)
                    .ok_or_else(|| format!("percent is 0 to 100, got {value:?}"))?;
            }
            "principals" => selector.principals.extend(list()),
            "client_ids" => selector.client_ids.extend(list()),
            other => return Err(format!("unknown canary parameter {other:?}")),
        }
    }
    if selector.percent == 0 && selector.principals.is_empty() && selector.client_ids.is_empty() {
        return Err("a canary needs percent, principals or client_ids".to_string());
    }
    Ok(selector)
}

/// Percent-decodes a query value (`+` is a space).
fn decode(value: &str) -> Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = value
                    .get(i + 1..i + 3)
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                    .ok_or_else(|| format!("bad percent-encoding in {value:?}"))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{value:?} is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_from_queries() {
        let parsed = selector("percent=10&principals=User%3Aalice,User:bob&client_ids=beta")
            .expect("parses");
        assert_eq!(parsed.percent, 10);
        assert_eq!(parsed.principals, vec!["User:alice", "User:bob"]);
        assert_eq!(parsed.client_ids, vec!["beta"]);
        assert!(selector("percent=101").is_err());
        assert!(selector("").is_err());
        assert!(selector("colour=red").is_err());
    }
}
