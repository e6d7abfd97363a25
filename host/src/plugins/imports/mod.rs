//! Host implementations of the WIT imports. Each is thin: it converts
//! between contract types and the broker's services and calls them.

pub mod acls;
mod authz;
pub mod configs;
mod controller;
pub mod dry_run;
mod groups;
mod log;
mod logging;
mod metadata;
mod quotas;
pub mod record_set;
mod security;
mod stats;
mod telemetry;
mod tokens;
mod txn;
mod uuid;

pub use logging::LogBudget;

use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::types::{self, KafkaError};
use crate::plugins::state::HandlerState;

// The contract's error convention (`wit/types.wit`): the services answer
// Kafka error codes with 0 for success; the contract shows success by its
// shape and carries only real errors.

/// An error code as a contract error, with no message.
pub(crate) fn failure(code: i16) -> KafkaError {
    KafkaError {
        code,
        message: None,
    }
}

/// An error code and message as an `error` field: none for success.
pub(crate) fn error_field(code: i16, message: Option<String>) -> Option<KafkaError> {
    (code != ErrorCode::None.code()).then_some(KafkaError { code, message })
}

/// An error code as an `error` field or per-item entry: none for success.
pub(crate) fn error_of(code: i16) -> Option<KafkaError> {
    error_field(code, None)
}

/// An error code as the answer of a call that returns nothing else.
pub(crate) fn result_of(code: i16) -> Result<(), KafkaError> {
    error_of(code).map_or(Ok(()), Err)
}

/// `types` declares no functions.
impl types::Host for HandlerState {}

impl types::Host for crate::plugins::authorizer::AuthorizerState {}
