//! The guest SDK every Gregor handler plugin builds on.
//!
//! A handler is one Kafka ApiKey. It implements [`Handler`] (the exported
//! `gregor:broker/handler` interface), describes itself with [`api_info`],
//! turns the body into a typed request with [`decode`], asks the host's
//! services (`log`, `metadata`, `groups`, `txn`, `authz`) for what it
//! needs, and answers with [`respond`]. Everything here is shared so that
//! each handler crate reads like Kafka's `handleXxxRequest` and nothing
//! else.

pub mod acl;
pub mod authorize;
pub mod bounded;
pub mod codec;
pub mod configs;
pub mod groups;
pub mod handler;
pub mod ids;
pub mod request_caps;
pub mod txn;
pub mod wire;

/// Bindings generated from the `kafka-handler` world in `wit/`.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "kafka-handler",
        pub_export_macro: true,
        export_macro_name: "export_handler",
        default_bindings_module: "gregor_sdk::bindings",
    });
}

pub use bindings::gregor::broker::types::{ApiInfo, KafkaError, Outcome, RequestContext, Uuid};
/// Host security services: SASL for this connection, SCRAM credentials and
/// ACL administration.
pub use bindings::gregor::broker::{acl_admin, sasl, scram_credentials};
/// Client quotas, delegation tokens and client telemetry.
pub use bindings::gregor::broker::{delegation_tokens, quotas, telemetry};
pub use bindings::gregor::broker::{log, logging, metadata};
pub use handler::Handler;

/// Authorization: the `authz` import and the vocabulary it speaks.
pub mod authz {
    pub use crate::bindings::gregor::broker::authz::*;
    pub use crate::bindings::gregor::broker::types::{Action, Operation, ResourceType};
}
pub use bounded::DecodeError;
pub use codec::{api_info, decode, decode_request, encode, respond};
pub use kafka_protocol;
pub use kafka_protocol::error::ResponseError;
pub use uuid;

/// Kafka's "no error" code.
pub const NONE: i16 = 0;

/// The throttle time for this response's `throttle_time_ms` (Kafka's
/// `sendResponseMaybeThrottle`): records the request's handler time
/// against the client's request quota; if it is exceeded the host mutes
/// the connection that long after the response.
pub fn request_throttle_ms() -> i32 {
    quotas::record_request(false)
}

/// Reports the error codes of a response for the broker's metrics
/// (`gregor_response_errors_total`); NONE (0) codes are ignored.
pub fn count_errors(codes: impl IntoIterator<Item = i16>) {
    let codes: Vec<i16> = codes.into_iter().filter(|code| *code != NONE).collect();
    if !codes.is_empty() {
        bindings::gregor::broker::stats::count_errors(&codes);
    }
}

/// Writes a line into the broker's log, tagged with this module.
pub fn log_info(message: &str) {
    logging::log(logging::Level::Info, message);
}

/// Writes a warning into the broker's log, tagged with this module.
pub fn log_warn(message: &str) {
    logging::log(logging::Level::Warn, message);
}
