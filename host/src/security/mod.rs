//! Security services: who a connection is (TLS client certificates, SASL
//! with PLAIN and SCRAM against the credential store, the session), the
//! ACL store and delegation tokens. Everything persistent lives under
//! `<log dir>/security/`. Authorization itself is answered by an
//! authorizer module, so it lives with the plugin runtime
//! (`plugins::authorization`), which reads the ACL store from above.

pub mod acl_store;
pub mod admin;
pub mod credentials;
pub mod sasl;
pub mod sasl_client;
pub mod scram;
pub mod session;
pub mod settings;
pub mod tokens;
