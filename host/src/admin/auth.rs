//! Who may use the admin endpoint. Anything that reaches an open endpoint
//! can switch the authorizer off or replace a handler, which on a shared
//! host is a way around every ACL; so when the broker authenticates its
//! clients (a SASL listener) or authorizes them (an authorizer), the
//! endpoint must authenticate too, or be declared open on purpose.
//!
//! - `admin.auth` = `none`, `basic`, `token` or `basic,token`. Unset is
//!   `none`, except that with a SASL listener or an authorizer the broker
//!   refuses to start until it is set (`none` explicitly keeps it open).
//! - `basic`: HTTP basic, checked against the SCRAM credential store as
//!   SASL/PLAIN is (`CredentialStore::check_password`); the principal is
//!   `User:<name>`.
//! - `token`: `Authorization: Bearer <token>`, compared in constant time
//!   with the contents of `admin.auth.token.file` (read at each check, so
//!   a rotated file takes effect at once); the principal is
//!   `admin.auth.token.principal` (default `User:admin`).
//! - Changes (any method but GET/HEAD) need a principal of `super.users`
//!   (`;`-separated, as the ACL authorizer reads it): 401 without valid
//!   credentials, 403 for anyone else.
//! - Reads: `admin.auth.read` = `authenticated` (default) or `public`.
//!   `GET /health` is always public. Credentials that are sent are always
//!   checked: wrong ones are 401 even on a public read.
//!
//! Every refusal is logged with the principal, method and route.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use subtle::ConstantTimeEq;
use tracing::warn;

use crate::config::BrokerConfig;
use crate::security::credentials::CredentialStore;
use crate::security::settings::listener_protocol;

use super::routes::error_reply;

/// The principal of requests without credentials, in refusal logs.
const ANONYMOUS: &str = "User:ANONYMOUS";

/// How the endpoint authenticates, from the broker config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    pub basic: bool,
    /// `admin.auth.token.file`, when `token` is on.
    pub token_file: Option<PathBuf>,
    pub token_principal: String,
    /// Reads need no credentials (`admin.auth.read=public`).
    pub public_reads: bool,
    pub super_users: Vec<String>,
}

impl AuthSettings {
    /// Reads `admin.auth*` and `super.users`. `authorizer_chosen` tells
    /// whether an authorizer decides (configured or chosen earlier and
    /// persisted); with it, or with a SASL listener, an unset `admin.auth`
    /// is refused.
    pub fn from_config(config: &BrokerConfig, authorizer_chosen: bool) -> Result<Self> {
        let explicit = config
            .explicit("admin.auth")
            .map(str::trim)
            .filter(|v| !v.is_empty());
        let mut basic = false;
        let mut token = false;
        match explicit {
            None => {
                if config.admin_listener()?.is_some() {
                    if let Some(reason) = secured_broker(config, authorizer_chosen)? {
                        bail!(
                            "the admin endpoint would accept anyone while {reason}: set \
                             admin.auth=basic, token or basic,token (with super.users), \
                             or admin.auth=none to keep it open on purpose"
                        );
                    }
                }
            }
            Some("none") => {}
            Some(modes) => {
                for mode in modes.split(',').map(str::trim) {
                    match mode {
                        "basic" => basic = true,
                        "token" => token = true,
                        other => bail!(
                            "admin.auth={modes:?}: unknown mode {other:?} \
                             (expected none, basic, token or basic,token)"
                        ),
                    }
                }
            }
        }
        let token_file = match config.get("admin.auth.token.file").map(str::trim) {
            Some(path) if token && !path.is_empty() => {
                let path = PathBuf::from(path);
                read_token(&path).with_context(|| "admin.auth=token".to_string())?;
                Some(path)
            }
            _ if token => bail!("admin.auth=token needs admin.auth.token.file"),
            _ => None,
        };
        let public_reads = match config.get("admin.auth.read").unwrap_or("authenticated") {
            "authenticated" => false,
            "public" => true,
            other => bail!("admin.auth.read={other:?}: expected authenticated or public"),
        };
        let super_users = config
            .get("super.users")
            .unwrap_or_default()
            .split(';')
            .map(str::trim)
            .filter(|user| !user.is_empty())
            .map(str::to_string)
            .collect();
        Ok(Self {
            basic,
            token_file,
            token_principal: config
                .get("admin.auth.token.principal")
                .unwrap_or("User:admin")
                .to_string(),
            public_reads,
            super_users,
        })
    }

    /// Whether requests are checked at all.
    pub fn enabled(&self) -> bool {
        self.basic || self.token_file.is_some()
    }
}

/// Why the broker counts as secured, if it does.
fn secured_broker(config: &BrokerConfig, authorizer_chosen: bool) -> Result<Option<String>> {
    for listener in config.listeners()? {
        if listener_protocol(config, &listener.name)?.uses_sasl() {
            return Ok(Some(format!("listener {} uses SASL", listener.name)));
        }
    }
    if authorizer_chosen || config.authorizer().is_some() {
        return Ok(Some("an authorizer is configured".to_string()));
    }
    Ok(None)
}

/// The token in `path`: its contents without surrounding whitespace.
fn read_token(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading admin.auth.token.file {}", path.display()))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        bail!("admin.auth.token.file {} is empty", path.display());
    }
    Ok(token)
}

/// The endpoint's authentication: its settings and the credential store.
pub struct AdminAuth {
    pub settings: AuthSettings,
    pub credentials: Arc<CredentialStore>,
}

/// Who sent a request.
enum Identity {
    Anonymous,
    Principal(String),
}

/// A refusal: status and the reason given to the client and the log.
struct Refusal {
    status: StatusCode,
    reason: String,
}

impl Refusal {
    fn unauthorized(reason: &str) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            reason: reason.to_string(),
        }
    }
}

impl AdminAuth {
    /// Who the credentials in `headers` name; a refusal when they are
    /// malformed, of a disabled kind, or wrong.
    async fn identify(&self, headers: &HeaderMap) -> Result<Identity, Refusal> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Ok(Identity::Anonymous);
        };
        let value = value
            .to_str()
            .map_err(|_| Refusal::unauthorized("malformed Authorization header"))?;
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("basic") && self.settings.basic {
            self.check_basic(rest).await
        } else if scheme.eq_ignore_ascii_case("bearer") && self.settings.token_file.is_some() {
            self.check_token(rest).await
        } else {
            Err(Refusal::unauthorized(&format!(
                "{scheme} authentication is not enabled (admin.auth)"
            )))
        }
    }

    async fn check_basic(&self, encoded: &str) -> Result<Identity, Refusal> {
        let wrong = || Refusal::unauthorized("invalid user name or password");
        let decoded = BASE64.decode(encoded).map_err(|_| wrong())?;
        let text = String::from_utf8(decoded).map_err(|_| wrong())?;
        let (user, password) = text.split_once(':').ok_or_else(wrong)?;
        let (user, password) = (user.to_string(), password.to_string());
        // PBKDF2 takes milliseconds: keep it off the async workers.
        let store = Arc::clone(&self.credentials);
        let checked_user = user.clone();
        let matches =
            tokio::task::spawn_blocking(move || store.check_password(&checked_user, &password))
                .await
                .map_err(|_| wrong())?;
        if matches {
            Ok(Identity::Principal(format!("User:{user}")))
        } else {
            Err(wrong())
        }
    }

    async fn check_token(&self, presented: &str) -> Result<Identity, Refusal> {
        let Some(path) = self.settings.token_file.clone() else {
            return Err(Refusal::unauthorized("token authentication is not enabled"));
        };
        let token = tokio::task::spawn_blocking(move || read_token(&path))
            .await
            .map_err(|_| Refusal::unauthorized("the token file could not be read"))?
            .map_err(|error| {
                warn!("admin endpoint: {error:#}");
                Refusal::unauthorized("the token file could not be read")
            })?;
        if bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
            Ok(Identity::Principal(self.settings.token_principal.clone()))
        } else {
            Err(Refusal::unauthorized("invalid token"))
        }
    }

    /// Whether `identity` may make this request.
    fn permit(&self, method: &Method, path: &str, identity: &Identity) -> Result<(), Refusal> {
        let read = *method == Method::GET || *method == Method::HEAD;
        if read && (path == "/health" || self.settings.public_reads) {
            return Ok(());
        }
        let Identity::Principal(principal) = identity else {
            return Err(Refusal::unauthorized("authentication required"));
        };
        if read || self.settings.super_users.iter().any(|s| s == principal) {
            Ok(())
        } else {
            Err(Refusal {
                status: StatusCode::FORBIDDEN,
                reason: format!("{principal} is not a super user (super.users)"),
            })
        }
    }

    /// The `WWW-Authenticate` challenges of a 401.
    fn challenges(&self) -> Vec<&'static str> {
        let mut challenges = Vec::new();
        if self.settings.basic {
            challenges.push("Basic realm=\"gregor admin\", charset=\"UTF-8\"");
        }
        if self.settings.token_file.is_some() {
            challenges.push("Bearer realm=\"gregor admin\"");
        }
        challenges
    }
}

/// The middleware in front of every route: authenticates, authorizes,
/// and logs and answers refusals.
pub async fn guard(State(auth): State<Arc<AdminAuth>>, request: Request, next: Next) -> Response {
    if !auth.settings.enabled() {
        return next.run(request).await;
    }
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let refusal = match auth.identify(request.headers()).await {
        Ok(identity) => match auth.permit(&method, &path, &identity) {
            Ok(()) => return next.run(request).await,
            Err(refusal) => match identity {
                Identity::Principal(principal) => (principal, refusal),
                Identity::Anonymous => (ANONYMOUS.to_string(), refusal),
            },
        },
        Err(refusal) => (presented_user(request.headers()), refusal),
    };
    let (principal, refusal) = refusal;
    warn!(
        principal = %principal,
        method = %method,
        route = %path,
        status = refusal.status.as_u16(),
        "admin request refused: {}",
        refusal.reason
    );
    let mut response = error_reply(refusal.status, &refusal.reason).into_response();
    if refusal.status == StatusCode::UNAUTHORIZED {
        for challenge in auth.challenges() {
            response.headers_mut().append(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
    }
    response
}

/// For the log of a failed authentication: the user a basic header
/// names (never the password), else who the request claims nothing of.
fn presented_user(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, encoded)| BASE64.decode(encoded.trim()).ok())
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .and_then(|text| {
            text.split_once(':')
                .map(|(user, _)| format!("User:{user} (unauthenticated)"))
        })
        .unwrap_or_else(|| ANONYMOUS.to_string())
}
