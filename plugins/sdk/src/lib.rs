//! The guest SDK every Gregor handler plugin builds on.
//!
//! A handler is one Kafka ApiKey. It implements [`Handler`]: it names its
//! request and response messages and versions, and writes `handle` (Kafka's
//! `handleXxxRequest`, asking the host's services `log`, `metadata`,
//! `groups`, `txn`, `authz`, ... for what it needs) and `failed` (Kafka's
//! `getErrorResponse`). The SDK decodes, counts errors, sets the throttle
//! time and encodes, once for every handler ([`handler`]); [`testing`]
//! checks a handler's responses encode for every served version and
//! [`fake`] runs a handler natively against a fake host. Everything here is
//! shared so that each handler crate reads like Kafka's `handleXxxRequest`
//! and nothing else.

pub mod acl;
pub mod authorize;
pub mod bounded;
pub mod by_resource_type;
pub mod codec;
pub mod config_alter;
pub mod configs;
#[cfg(not(target_arch = "wasm32"))]
pub mod fake;
pub mod groups;
pub mod handler;
pub mod ids;
pub mod legacy;
pub mod offset_commit;
pub mod partitions;
pub mod produce_records;
pub mod records;
pub mod request_caps;
pub mod response;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod token_lifetime;
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

pub use bindings::exports::gregor::broker::handler::Answer;
pub use bindings::gregor::broker::log;
/// Host security services: SASL for this connection.
pub use bindings::gregor::broker::sasl;
pub use bindings::gregor::broker::types::{
    ApiInfo, KafkaError, Outcome, RequestContext, TopicPartition, Uuid,
};
/// Delegation tokens and client telemetry.
pub use bindings::gregor::broker::{delegation_tokens, telemetry};
pub use handler::{Handler, RawHandler, Reply};
pub use response::KafkaResponse;

// Import modules some of whose functions the native fake host answers
// (see [`fake`]): on wasm they are exactly the generated ones.

/// Authorization: the `authz` import and the vocabulary it speaks.
pub mod authz {
    #[cfg(target_arch = "wasm32")]
    pub use crate::bindings::gregor::broker::authz::*;
    pub use crate::bindings::gregor::broker::types::{Action, Operation, ResourceType};
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::{authorize, authorize_by_resource_type};
}

/// Topics, the cluster and broker configuration.
pub mod metadata {
    pub use crate::bindings::gregor::broker::metadata::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::{
        alter_partition_reassignment, broker_config, create_topic, describe_cluster, elect_leaders,
        list_partition_reassignments, list_topics, topic_by_id, topic_by_name,
    };
}

/// The active controller (the controller's request APIs ask it; it
/// decides).
pub mod controller {
    pub use crate::bindings::gregor::broker::controller::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::{
        allocate_producer_ids, alter_partition, broker_heartbeat, describe_quorum, register_broker,
        unregister_broker,
    };
}

/// Client quotas.
pub mod quotas {
    pub use crate::bindings::gregor::broker::quotas::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::record_request;
}

/// SCRAM credentials (batch C: the fake host answers describe and alter).
pub mod scram_credentials {
    pub use crate::bindings::gregor::broker::scram_credentials::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::{
        alter_scram_credentials as alter, describe_scram_credentials as describe,
    };
}

/// ACL administration (batch C: the fake host answers create-acls).
pub mod acl_admin {
    pub use crate::bindings::gregor::broker::acl_admin::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::create_acls;
}

/// The broker's log.
pub mod logging {
    pub use crate::bindings::gregor::broker::logging::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::log;
}

/// The broker's metrics.
mod stats {
    #[cfg(target_arch = "wasm32")]
    pub use crate::bindings::gregor::broker::stats::*;
    #[cfg(not(target_arch = "wasm32"))]
    pub use crate::fake::imports::count_errors;
}
pub use bounded::DecodeError;
pub use codec::{api_info, decode, decode_request, encode, respond};
pub use kafka_protocol;
pub use kafka_protocol::error::ResponseError;
pub use uuid;

/// Kafka's "no error" code.
pub const NONE: i16 = 0;

/// The Kafka error code and message of a host answer, read through the
/// contract's error convention (`wit/types.wit`): a `kafka-error`, an
/// `error: option<kafka-error>` field (none: success) or a
/// `result<_, kafka-error>`. Success is NONE with no message.
pub trait AnswerError {
    fn error_code(&self) -> i16;
    fn error_message(&self) -> Option<String>;
}

impl AnswerError for KafkaError {
    fn error_code(&self) -> i16 {
        self.code
    }
    fn error_message(&self) -> Option<String> {
        self.message.clone()
    }
}

impl AnswerError for Option<KafkaError> {
    fn error_code(&self) -> i16 {
        self.as_ref().map_or(NONE, |error| error.code)
    }
    fn error_message(&self) -> Option<String> {
        self.as_ref().and_then(|error| error.message.clone())
    }
}

impl<T> AnswerError for Result<T, KafkaError> {
    fn error_code(&self) -> i16 {
        self.as_ref().err().map_or(NONE, |error| error.code)
    }
    fn error_message(&self) -> Option<String> {
        self.as_ref().err().and_then(|error| error.message.clone())
    }
}

/// An error code as an `error` field or per-item entry of the contract:
/// none for NONE (what a fake host answers).
pub fn error_of(code: i16) -> Option<KafkaError> {
    (code != NONE).then_some(KafkaError {
        code,
        message: None,
    })
}

/// An error code as the answer of a call that returns nothing else.
pub fn result_of(code: i16) -> Result<(), KafkaError> {
    error_of(code).map_or(Ok(()), Err)
}

/// The error codes of per-item entries, NONE for success, in order.
pub fn codes(entries: impl IntoIterator<Item = Option<KafkaError>>) -> Vec<i16> {
    entries
        .into_iter()
        .map(|entry| entry.error_code())
        .collect()
}

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
        stats::count_errors(&codes);
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
