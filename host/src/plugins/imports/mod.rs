//! Host implementations of the WIT imports. Each is thin: it converts
//! between contract types and the broker's services and calls them.

pub mod acls;
mod authz;
pub mod configs;
mod groups;
mod log;
mod logging;
mod metadata;
mod quotas;
mod security;
mod stats;
mod telemetry;
mod tokens;
mod txn;
mod uuid;

pub use logging::LogBudget;

use crate::plugins::bindings::handler::gregor::broker::types;
use crate::plugins::state::HandlerState;

/// `types` declares no functions.
impl types::Host for HandlerState {}

impl types::Host for crate::plugins::authorizer::AuthorizerState {}
