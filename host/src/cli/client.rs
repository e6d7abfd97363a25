//! The CLI's HTTP client for the admin endpoint: ureq (blocking, plain
//! HTTP, no TLS stack), with basic or bearer credentials. A module upload
//! streams from its file with its size as `Content-Length`.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ureq::http::{header, Request};

/// How long one admin request may take (a large module compiles first).
const TIMEOUT: Duration = Duration::from_secs(120);

/// The credentials sent with every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    Basic { user: String, password: String },
    Token(String),
}

/// Why a command failed; `cli::exit_code` maps it to the exit status.
#[derive(Debug)]
pub enum Failure {
    /// The endpoint answered with an error status and this message.
    Refused { status: u16, message: String },
    /// The endpoint could not be reached, or the exchange broke off.
    Unreachable(String),
    /// Something on this side: a file, an option, the answer's format.
    Local(anyhow::Error),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Refused { status, message } => {
                write!(f, "{message} (the admin endpoint answered HTTP {status})")
            }
            Failure::Unreachable(reason) => write!(f, "{reason}"),
            Failure::Local(error) => write!(f, "{error:#}"),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure::Local(error)
    }
}

pub struct AdminClient {
    agent: ureq::Agent,
    base: String,
    authorization: Option<String>,
}

impl AdminClient {
    pub fn new(admin: &str, credentials: Credentials) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .max_redirects(0)
            .build()
            .into();
        let authorization = match credentials {
            Credentials::None => None,
            Credentials::Basic { user, password } => Some(format!(
                "Basic {}",
                BASE64.encode(format!("{user}:{password}"))
            )),
            Credentials::Token(token) => Some(format!("Bearer {token}")),
        };
        Self {
            agent,
            base: format!("http://{admin}"),
            authorization,
        }
    }

    /// One request; the answer's body when the status is 2xx.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<String, Failure> {
        let request = self.builder(method, path);
        let response = match body {
            Some(body) => request.body(body).map(|request| self.agent.run(request)),
            None => request.body(()).map(|request| self.agent.run(request)),
        };
        self.answer(response)
    }

    /// PUT of a file, streamed from disk.
    pub fn upload(&self, path: &str, file: &Path) -> Result<String, Failure> {
        let opened = std::fs::File::open(file).map_err(|error| {
            Failure::Local(anyhow::anyhow!("reading {}: {error}", file.display()))
        })?;
        let response = self
            .builder("PUT", path)
            .header(header::CONTENT_TYPE, "application/wasm")
            .body(opened)
            .map(|request| self.agent.run(request));
        self.answer(response)
    }

    fn builder(&self, method: &str, path: &str) -> ureq::http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if let Some(authorization) = &self.authorization {
            builder = builder.header(header::AUTHORIZATION, authorization);
        }
        builder
    }

    fn answer(
        &self,
        response: Result<Result<ureq::http::Response<ureq::Body>, ureq::Error>, ureq::http::Error>,
    ) -> Result<String, Failure> {
        let mut response = response
            .map_err(|error| Failure::Local(anyhow::anyhow!("invalid request: {error}")))?
            .map_err(|error| {
                Failure::Unreachable(format!("the admin endpoint {}: {error}", self.base))
            })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|error| {
            Failure::Unreachable(format!("reading the admin endpoint's answer: {error}"))
        })?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|value| value["error"].as_str().map(str::to_string))
            .unwrap_or(text);
        Err(Failure::Refused { status, message })
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters (a
/// name as one path segment).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_encoded_segment() {
        assert_eq!(percent_encode("alice"), "alice");
        assert_eq!(percent_encode("a b/c%d"), "a%20b%2Fc%25d");
        assert_eq!(percent_encode("ü"), "%C3%BC");
    }
}
