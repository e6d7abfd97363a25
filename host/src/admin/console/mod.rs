//! The web console at `/` on the admin port: the cluster and its brokers,
//! topics with partitions, offsets, sizes and configs, consumer groups
//! with members and lag, the plugins per ApiKey, and live charts of
//! request rate, latency and bytes. Server-rendered pages (`pages.rs`,
//! from `views.rs` and the admin API's own status answers), one small
//! stylesheet and script compiled in (`assets/`), nothing fetched from
//! elsewhere.
//!
//! The console adds no way to change anything: its buttons call the admin
//! API (`PUT`/`DELETE /plugins/{name}`, `PUT /authorizer`) from the page,
//! and its charts poll `/metrics`. So it sits behind the same
//! authentication (`auth.rs`: a browser is challenged for basic
//! credentials, only super users may change things), and the changes
//! are guarded against cross-site requests (`csrf.rs`).

mod csrf;
mod html;
mod pages;
mod views;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::AdminState;

pub use csrf::same_origin;

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

pub fn router(state: Arc<AdminState>) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/console/topics", get(topics))
        .route("/console/topics/{name}", get(topic))
        .route("/console/groups", get(groups))
        .route("/console/plugins", get(plugins))
        .route("/console/console.css", get(css))
        .route("/console/console.js", get(js))
        .with_state(state)
}

/// A page; `no-store` so that the back button shows the broker's state
/// now, not a copy.
fn html(status: StatusCode, body: String) -> Response {
    (status, [(header::CACHE_CONTROL, "no-store")], Html(body)).into_response()
}

async fn overview(State(state): State<Arc<AdminState>>) -> Response {
    let overview = views::overview(&state.broker.services);
    let authorizer = state.plugins.authorizer_status();
    html(StatusCode::OK, pages::overview(&overview, &authorizer))
}

async fn topics(State(state): State<Arc<AdminState>>) -> Response {
    html(
        StatusCode::OK,
        pages::topics(&views::topics(&state.broker.services)),
    )
}

async fn topic(State(state): State<Arc<AdminState>>, name: Option<Path<String>>) -> Response {
    let Some(Path(name)) = name else {
        return html(StatusCode::BAD_REQUEST, pages::not_found("bad topic name"));
    };
    match views::topic(&state.broker.services, &name) {
        Some((row, configs)) => html(StatusCode::OK, pages::topic(&row, &configs)),
        None => html(
            StatusCode::NOT_FOUND,
            pages::not_found(&format!("no topic named {name}")),
        ),
    }
}

async fn groups(State(state): State<Arc<AdminState>>) -> Response {
    html(
        StatusCode::OK,
        pages::groups(&views::groups(&state.broker.services)),
    )
}

async fn plugins(State(state): State<Arc<AdminState>>) -> Response {
    let status = state.plugins.status();
    let authorizer = state.plugins.authorizer_status();
    html(StatusCode::OK, pages::plugins(&status, &authorizer))
}

async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
        .into_response()
}
