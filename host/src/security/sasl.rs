//! Who a connection is, and how far its SASL authentication has got: the
//! state machine of Kafka's SaslServerAuthenticator, kept per connection.
//!
//! On a SASL listener a connection starts unauthenticated. Until it has
//! authenticated only ApiVersions (any number of times) and SaslHandshake
//! may come; after a handshake only SaslAuthenticate; anything else closes
//! the connection, as Kafka closes it. A successful exchange replaces the
//! connection's principal with `User:<name>` for every later request; a
//! failed one answers SASL_AUTHENTICATION_FAILED and the connection is
//! closed once that answer is written. The SaslHandshake and
//! SaslAuthenticate handler modules drive this through the `sasl` import;
//! after a SaslHandshake v0 the connection itself steps the exchange with
//! the client's unframed tokens (`network::sasl_v0`).
//!
//! The principal sits in its own cell so that requests read it cheaply
//! while the (rare) authentication step changes it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::error_code::ErrorCode;
use crate::security::credentials::{CredentialStore, ScramMechanism};
use crate::security::scram::{ScramServer, ScramStep};

/// The principal of a connection nobody has authenticated.
pub const ANONYMOUS: &str = "User:ANONYMOUS";
/// The mechanisms Gregor implements.
pub const SUPPORTED_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

const SASL_HANDSHAKE_KEY: i16 = 17;
const API_VERSIONS_KEY: i16 = 18;
const SASL_AUTHENTICATE_KEY: i16 = 36;

enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
}

enum Stage {
    /// Waiting for SaslHandshake (ApiVersions may come first).
    Handshake,
    /// A mechanism is selected; waiting for SaslAuthenticate.
    Authenticate {
        mechanism: String,
        exchange: Exchange,
    },
    Complete,
    /// Authentication failed: the connection closes after this response.
    Failed,
}

/// The answer to SaslHandshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeOutcome {
    pub error_code: i16,
    pub mechanisms: Vec<String>,
}

/// The answer to SaslAuthenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticateOutcome {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub token: Vec<u8>,
}

/// Whether a request may be served in the connection's current stage.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Close the connection: the reason is logged.
    Refuse(String),
}

/// A connection's identity and SASL progress.
pub struct ConnectionAuth {
    principal: RwLock<Arc<str>>,
    /// None on a listener without SASL.
    sasl: Option<Mutex<Stage>>,
    mechanisms: Vec<String>,
    /// Authenticated with a delegation token (KIP-48).
    token_authenticated: AtomicBool,
}

impl ConnectionAuth {
    /// A connection that needs no SASL (PLAINTEXT, SSL): its principal is
    /// fixed by the transport.
    pub fn fixed(principal: &str) -> Self {
        Self {
            principal: RwLock::new(Arc::from(principal)),
            sasl: None,
            mechanisms: Vec::new(),
            token_authenticated: AtomicBool::new(false),
        }
    }

    /// A connection on a SASL listener with these enabled mechanisms.
    pub fn sasl(mechanisms: Vec<String>) -> Self {
        Self {
            principal: RwLock::new(Arc::from(ANONYMOUS)),
            sasl: Some(Mutex::new(Stage::Handshake)),
            mechanisms,
            token_authenticated: AtomicBool::new(false),
        }
    }

    /// Whether the connection authenticated with a delegation token (such
    /// connections may not manage tokens, as in Kafka).
    pub fn token_authenticated(&self) -> bool {
        self.token_authenticated.load(Ordering::Acquire)
    }

    pub fn principal(&self) -> Arc<str> {
        Arc::clone(&crate::sync::read(&self.principal))
    }

    fn set_principal(&self, principal: String) {
        let principal: Arc<str> = Arc::from(principal);
        *crate::sync::write(&self.principal) = principal
    }

    fn with_stage<T>(&self, f: impl FnOnce(&mut Stage) -> T) -> Option<T> {
        let sasl = self.sasl.as_ref()?;
        let mut guard = crate::sync::lock(sasl);
        Some(f(&mut guard))
    }

    /// May a request with this ApiKey be served now?
    pub fn admits(&self, api_key: i16) -> Admission {
        let verdict = self.with_stage(|stage| match stage {
            Stage::Complete => None,
            Stage::Handshake if api_key == API_VERSIONS_KEY || api_key == SASL_HANDSHAKE_KEY => {
                None
            }
            Stage::Handshake => Some("before SASL authentication"),
            Stage::Authenticate { .. } if api_key == SASL_AUTHENTICATE_KEY => None,
            Stage::Authenticate { .. } => Some("during SASL authentication"),
            Stage::Failed => Some("after failed SASL authentication"),
        });
        match verdict.flatten() {
            None => Admission::Admit,
            Some(when) => {
                Admission::Refuse(format!("unexpected request (api key {api_key}) {when}"))
            }
        }
    }

    /// Whether a mechanism is selected and its exchange not yet done.
    pub fn awaiting_token(&self) -> bool {
        self.with_stage(|stage| matches!(stage, Stage::Authenticate { .. }))
            .unwrap_or(false)
    }

    /// Whether the connection must close once the current response is out.
    pub fn failed(&self) -> bool {
        self.with_stage(|stage| matches!(stage, Stage::Failed))
            .unwrap_or(false)
    }

    /// SaslHandshake: select a mechanism.
    pub fn handshake(&self, mechanism: &str) -> HandshakeOutcome {
        let mechanisms = self.mechanisms.clone();
        let outcome = self.with_stage(|stage| match stage {
            Stage::Handshake if mechanisms.iter().any(|m| m == mechanism) => {
                let exchange = match ScramMechanism::from_name(mechanism) {
                    Some(scram) => Exchange::Scram(Box::new(ScramServer::new(scram))),
                    None => Exchange::Plain,
                };
                *stage = Stage::Authenticate {
                    mechanism: mechanism.to_string(),
                    exchange,
                };
                0
            }
            Stage::Handshake => {
                *stage = Stage::Failed;
                ErrorCode::UnsupportedSaslMechanism.code()
            }
            _ => ErrorCode::IllegalSaslState.code(),
        });
        HandshakeOutcome {
            error_code: outcome.unwrap_or(ErrorCode::IllegalSaslState.code()),
            mechanisms,
        }
    }

    /// SaslAuthenticate: one step of the selected exchange.
    pub fn authenticate(&self, token: &[u8], store: &CredentialStore) -> AuthenticateOutcome {
        let illegal = |message: &str| AuthenticateOutcome {
            error_code: ErrorCode::IllegalSaslState.code(),
            error_message: Some(message.to_string()),
            token: Vec::new(),
        };
        let outcome = self.with_stage(|stage| {
            let Stage::Authenticate {
                mechanism,
                exchange,
            } = stage
            else {
                return match stage {
                    Stage::Complete => Err(illegal(
                        "SaslAuthenticate request received after successful authentication",
                    )),
                    _ => Err(illegal("Unexpected SaslAuthenticate request")),
                };
            };
            let step = match exchange {
                Exchange::Plain => plain(token, store).map(|user| (Some(user), Vec::new())),
                Exchange::Scram(server) => match server.step(token, store) {
                    Ok(ScramStep::Continue(token)) => Ok((None, token)),
                    Ok(ScramStep::Complete { user, token }) => {
                        if server.delegation_token() {
                            self.token_authenticated.store(true, Ordering::Release);
                        }
                        Ok((Some(user), token))
                    }
                    Err(error) => Err(error.0),
                },
            };
            match step {
                Ok((Some(user), token)) => {
                    *stage = Stage::Complete;
                    Ok((Some(user), token))
                }
                Ok((None, token)) => Ok((None, token)),
                Err(message) => {
                    let detail = format!(
                        "{message} (Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism})"
                    );
                    *stage = Stage::Failed;
                    Err(AuthenticateOutcome {
                        error_code: ErrorCode::SaslAuthenticationFailed.code(),
                        error_message: Some(detail),
                        token: Vec::new(),
                    })
                }
            }
        });
        match outcome {
            None => illegal("SASL is not enabled on this listener"),
            Some(Err(outcome)) => outcome,
            Some(Ok((user, token))) => {
                if let Some(user) = user {
                    self.set_principal(format!("User:{user}"));
                }
                AuthenticateOutcome {
                    error_code: 0,
                    error_message: None,
                    token,
                }
            }
        }
    }
}

/// PLAIN (RFC 4616): `authzid NUL authcid NUL passwd`, checked against the
/// credential store.
fn plain(token: &[u8], store: &CredentialStore) -> Result<String, String> {
    let text = std::str::from_utf8(token)
        .map_err(|_| "Authentication failed: PLAIN message is not UTF-8".to_string())?;
    let parts: Vec<&str> = text.split('\u{0}').collect();
    let [authzid, user, password] = parts.as_slice() else {
        return Err("Invalid SASL/PLAIN response: expected 3 tokens".to_string());
    };
    if user.is_empty() {
        return Err("Authentication failed: username not specified".to_string());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".to_string());
    }
    if !authzid.is_empty() && authzid != user {
        return Err(
            "Authentication failed: Client requested an authorization id that is different from username"
                .to_string(),
        );
    }
    if !store.check_password(user, password) {
        return Err("Authentication failed: Invalid username or password".to_string());
    }
    Ok(user.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, CredentialStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        store
            .set_password("alice", "secret", &ScramMechanism::ALL, 4096)
            .unwrap();
        (dir, store)
    }

    fn all() -> Vec<String> {
        SUPPORTED_MECHANISMS.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn plain_success_changes_the_principal() {
        let (_dir, store) = store();
        let auth = ConnectionAuth::sasl(all());
        assert_eq!(auth.admits(API_VERSIONS_KEY), Admission::Admit);
        assert!(matches!(auth.admits(3), Admission::Refuse(_)));
        assert_eq!(auth.handshake("PLAIN").error_code, 0);
        assert!(matches!(
            auth.admits(API_VERSIONS_KEY),
            Admission::Refuse(_)
        ));
        assert!(auth.awaiting_token());
        let outcome = auth.authenticate(b"\0alice\0secret", &store);
        assert_eq!(outcome.error_code, 0, "{outcome:?}");
        assert!(!auth.awaiting_token());
        assert_eq!(&*auth.principal(), "User:alice");
        assert_eq!(auth.admits(3), Admission::Admit);
        assert_eq!(
            auth.handshake("PLAIN").error_code,
            ErrorCode::IllegalSaslState.code()
        );
        assert_eq!(
            auth.authenticate(b"\0alice\0secret", &store).error_code,
            ErrorCode::IllegalSaslState.code()
        );
        assert!(!auth.failed());
    }

    #[test]
    fn failures_close() {
        let (_dir, store) = store();
        let auth = ConnectionAuth::sasl(all());
        auth.handshake("PLAIN");
        let outcome = auth.authenticate(b"\0alice\0wrong", &store);
        assert_eq!(
            outcome.error_code,
            ErrorCode::SaslAuthenticationFailed.code()
        );
        assert!(auth.failed());
        assert_eq!(&*auth.principal(), ANONYMOUS);

        let auth = ConnectionAuth::sasl(vec!["SCRAM-SHA-512".to_string()]);
        let outcome = auth.handshake("PLAIN");
        assert_eq!(
            outcome.error_code,
            ErrorCode::UnsupportedSaslMechanism.code()
        );
        assert_eq!(outcome.mechanisms, vec!["SCRAM-SHA-512".to_string()]);
        assert!(auth.failed());

        let fixed = ConnectionAuth::fixed("User:CN=client");
        assert_eq!(fixed.admits(3), Admission::Admit);
        assert_eq!(
            fixed.handshake("PLAIN").error_code,
            ErrorCode::IllegalSaslState.code()
        );
        assert_eq!(&*fixed.principal(), "User:CN=client");
    }
}
