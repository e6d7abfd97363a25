//! Cross-site request forgery: a browser that holds the console's basic
//! credentials attaches them to any request to the admin port, including
//! one a hostile page makes it send. A change is refused when a browser
//! says it comes from elsewhere: `Sec-Fetch-Site` other than
//! `same-origin` (or `none`, typed by the user), or an `Origin` whose
//! host is not the `Host` the request was sent to. The console's own
//! script is same-origin; the CLI and other programs send neither header
//! and are unaffected. Reads are not checked: they change nothing and a
//! cross-origin page cannot read the answers.

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use tracing::warn;

use crate::admin::routes::error_reply;

/// Why a change looks cross-origin, if it does.
fn cross_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or_default();
        if site != "same-origin" && site != "none" {
            return Some(format!("Sec-Fetch-Site: {site}"));
        }
    }
    let origin = headers.get(header::ORIGIN)?;
    let origin = origin.to_str().unwrap_or_default();
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin
        .split_once("://")
        .map_or("", |(_, rest)| rest.trim_end_matches('/'));
    if origin_host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
        return Some(format!("Origin {origin} is not {host}"));
    }
    None
}

/// The middleware: refuses (403) and logs cross-origin changes.
pub async fn same_origin(request: Request, next: Next) -> Response {
    let method = request.method();
    if method == Method::GET || method == Method::HEAD || method == Method::OPTIONS {
        return next.run(request).await;
    }
    if let Some(reason) = cross_origin(request.headers()) {
        warn!(
            method = %method,
            route = %request.uri().path(),
            "admin request refused: cross-origin ({reason})"
        );
        return error_reply(
            StatusCode::FORBIDDEN,
            &format!("cross-origin request refused ({reason})"),
        );
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn same_origin_and_non_browsers_pass() {
        assert_eq!(cross_origin(&headers(&[("host", "127.0.0.1:9644")])), None);
        assert_eq!(
            cross_origin(&headers(&[
                ("host", "127.0.0.1:9644"),
                ("origin", "http://127.0.0.1:9644"),
                ("sec-fetch-site", "same-origin"),
            ])),
            None
        );
    }

    #[test]
    fn other_origins_are_refused() {
        for pairs in [
            vec![
                ("host", "127.0.0.1:9644"),
                ("origin", "http://evil.example"),
            ],
            vec![("host", "127.0.0.1:9644"), ("origin", "null")],
            vec![("host", "127.0.0.1:9644"), ("sec-fetch-site", "cross-site")],
            vec![("host", "127.0.0.1:9644"), ("sec-fetch-site", "same-site")],
        ] {
            assert!(cross_origin(&headers(&pairs)).is_some(), "{pairs:?}");
        }
    }
}
