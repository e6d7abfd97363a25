//! The handler trait a module implements and the glue that exports it as
//! the `gregor:broker/handler` interface. Only `describe` and `handle` are
//! required; `error_response` (Kafka's `getErrorResponse`) is optional.

use std::marker::PhantomData;

use crate::bindings::exports::gregor::broker::handler::Guest;
use crate::{ApiInfo, Outcome, RequestContext};

/// One Kafka ApiKey, like one `KafkaApis.handleXxxRequest`.
pub trait Handler {
    /// The ApiKey, name and version range this module serves.
    fn describe() -> ApiInfo;

    /// Handles one request; `body` is the request body after the header.
    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome;

    /// The response to send when `handle` failed for this request (it
    /// trapped or ran out of time): every element answered with
    /// `error_code`. The default has none, and the host closes the
    /// connection instead.
    fn error_response(_ctx: RequestContext, _body: Vec<u8>, _error_code: i16) -> Option<Vec<u8>> {
        None
    }
}

/// Exports a [`Handler`] through the generated bindings.
#[doc(hidden)]
pub struct Adapter<T>(PhantomData<T>);

impl<T: Handler> Guest for Adapter<T> {
    fn describe() -> ApiInfo {
        T::describe()
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        T::handle(ctx, body)
    }

    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        T::error_response(ctx, body, error_code)
    }
}

/// Exports a type implementing [`Handler`] as this module's handler.
#[macro_export]
macro_rules! export_handler {
    ($ty:ident) => {
        type __GregorHandlerExport = $crate::handler::Adapter<$ty>;
        $crate::bindings::export_handler!(__GregorHandlerExport with_types_in $crate::bindings);
    };
}
