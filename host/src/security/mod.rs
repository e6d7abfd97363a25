//! Security services: who a connection is (TLS client certificates, SASL
//! with PLAIN and SCRAM against the credential store), the ACL store, and
//! authorization through the active authorizer module with a decision
//! cache. Everything persistent lives under `<log dir>/security/`.

pub mod acl_store;
pub mod admin;
pub mod authorization;
pub mod credentials;
pub mod sasl;
pub mod scram;
pub mod settings;
pub mod tokens;
