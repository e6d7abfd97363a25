//! Who is on the other end of a connection: fixed at accept except for
//! the principal, which SASL may set once. It lives with security because
//! everything that reads it asks a security question (authorization keys
//! its decisions on it, SASL fills it in); the network layer creates one
//! per connection and the request channel carries it to the handlers.

use std::sync::Arc;

use crate::security::sasl::ConnectionAuth;

/// Who is on the other end of a connection. The principal can change
/// once, when SASL authentication completes, so it lives in `auth`
/// (see `security::sasl`); everything else is fixed at accept.
pub struct Session {
    pub connection_id: u64,
    pub client_host: String,
    pub listener: String,
    pub security_protocol: String,
    pub auth: ConnectionAuth,
}

impl Session {
    /// The principal requests on this connection act as, e.g.
    /// "User:ANONYMOUS" or "User:alice" after SASL.
    pub fn principal(&self) -> Arc<str> {
        self.auth.principal()
    }
}
