//! RenewDelegationToken and ExpireDelegationToken are one API twice: the
//! token named by its HMAC gets a new expiry from the host (Kafka's
//! `DelegationTokenControlManager`), answered as the new expiry timestamp,
//! or an error with expiry -1; a failed handler answers the error and
//! expiry -1 (Kafka's `getErrorResponse` for both). Each crate names its
//! messages and the host call ([`LifetimeChange`]) and exports
//! [`TokenLifetime`] over it.

use std::marker::PhantomData;

use kafka_protocol::messages::{ExpireDelegationTokenResponse, RenewDelegationTokenResponse};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use crate::legacy::Legacy;
use crate::response::KafkaResponse;
use crate::{Handler, KafkaError, Reply, RequestContext};

/// One API's side: its messages, versions and the host's change.
pub trait LifetimeChange {
    type Request: Request + Decodable + HeaderVersion;
    type Response: Encodable + KafkaResponse + ExpiryResponse + Default;
    const NAME: &'static str;
    const MIN_VERSION: i16;
    const MAX_VERSION: i16;

    /// The token's new expiry timestamp, or why not.
    fn change(request: &Self::Request) -> Result<i64, KafkaError>;
}

/// The handler for a [`LifetimeChange`].
pub struct TokenLifetime<C>(PhantomData<C>);

impl<C: LifetimeChange> Handler for TokenLifetime<C> {
    type Request = C::Request;
    type Response = C::Response;
    const NAME: &'static str = C::NAME;
    const MIN_VERSION: i16 = C::MIN_VERSION;
    const MAX_VERSION: i16 = C::MAX_VERSION;
    /// v0 of both (Kafka 4 removed it, KIP-896) is v1's message.
    const LEGACY: Option<Legacy> = Some(Legacy::same_as(1));

    fn handle(_: &RequestContext, request: &C::Request) -> Reply<C::Response> {
        match C::change(request) {
            Ok(expiry) => C::Response::answer(0, expiry),
            Err(error) => C::Response::answer(error.code, -1),
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: the error, expiry -1.
    fn failed(_: &RequestContext, _: &C::Request, error_code: i16) -> C::Response {
        C::Response::answer(error_code, -1)
    }
}

/// A response made of an error code and an expiry timestamp.
pub trait ExpiryResponse {
    fn answer(error_code: i16, expiry_timestamp_ms: i64) -> Self;
}

macro_rules! expiry_responses {
    ($($response:ty),*) => {$(
        impl ExpiryResponse for $response {
            fn answer(error_code: i16, expiry_timestamp_ms: i64) -> Self {
                <$response>::default()
                    .with_error_code(error_code)
                    .with_expiry_timestamp_ms(expiry_timestamp_ms)
            }
        }
    )*};
}

expiry_responses!(RenewDelegationTokenResponse, ExpireDelegationTokenResponse);
