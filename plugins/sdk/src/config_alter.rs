//! AlterConfigs and IncrementalAlterConfigs are one request twice: the
//! legacy API replaces each resource's whole dynamic config, the
//! incremental one edits the configs it names. Everything around that edit
//! is the same in Kafka's `ConfigAdminManager` and `KafkaApis`, so it is
//! written here once: a resource named twice is INVALID_REQUEST, an
//! unknown resource type (or one the API does not serve) INVALID_REQUEST,
//! ALTER_CONFIGS is authorized per type in one batch, and every resource is
//! answered in request order, echoing its type and name; a failed handler
//! answers every resource with the error. Each handler crate implements
//! [`ConfigEdit`] (its messages and its edit) and exports
//! [`ConfigAlter`] over it.

use std::collections::HashMap;
use std::marker::PhantomData;

use kafka_protocol::messages::{
    alter_configs_request, alter_configs_response, incremental_alter_configs_request,
    incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::authz::Operation;
use crate::configs::{authorization_error, authorize_resources, resource_type_of, ResourceType};
use crate::ids::str_bytes;
use crate::response::KafkaResponse;
use crate::{Handler, KafkaError, Reply, RequestContext, ResponseError};

/// One API's side of the shared body.
pub trait ConfigEdit {
    type Request: Request + Decodable + HeaderVersion + AlterRequest;
    type Response: Encodable
        + KafkaResponse
        + Default
        + AlterResponse<Answer = Answer<Self::Request>>;
    const NAME: &'static str;
    const MIN_VERSION: i16;
    const MAX_VERSION: i16;

    /// Does the API alter resources of this type at all? (The legacy API
    /// never served BROKER_LOGGER.)
    fn serves(kind: ResourceType) -> bool;

    /// Applies (or with `validate_only` checks) the change to one
    /// authorized resource.
    fn edit(
        kind: ResourceType,
        resource: &<Self::Request as AlterRequest>::Resource,
        validate_only: bool,
    ) -> Result<(), KafkaError>;
}

/// The per-resource answer of a request's response.
type Answer<R> = <<R as AlterRequest>::Resource as AlterResource>::Answer;

/// The handler for a [`ConfigEdit`].
pub struct ConfigAlter<E>(PhantomData<E>);

impl<E: ConfigEdit> Handler for ConfigAlter<E> {
    type Request = E::Request;
    type Response = E::Response;
    const NAME: &'static str = E::NAME;
    const MIN_VERSION: i16 = E::MIN_VERSION;
    const MAX_VERSION: i16 = E::MAX_VERSION;

    fn handle(_: &RequestContext, request: &E::Request) -> Reply<E::Response> {
        let resources = request.resources();
        let keys: Vec<(i8, &str)> = resources.iter().map(|r| r.key()).collect();
        let results = alter_resources(&keys, |index, allowed| {
            let resource = &resources[index];
            let id = resource.key().0;
            let kind = match resource_type_of(id) {
                Some(kind) if E::serves(kind) => kind,
                _ => {
                    return Err(error(
                        ResponseError::InvalidRequest,
                        &format!("Unknown resource type {id}"),
                    ))
                }
            };
            if !allowed {
                let denied = authorization_error(kind);
                return Err(error(denied, &denied.to_string()));
            }
            E::edit(kind, resource, request.validate_only())
        });
        let answered = resources
            .iter()
            .zip(results)
            .map(|(resource, (code, message))| resource.answer(code, message.as_deref()));
        E::Response::with_answers(answered.collect()).into()
    }

    /// Kafka's `getErrorResponse`: every resource with the error.
    fn failed(_: &RequestContext, request: &E::Request, error_code: i16) -> E::Response {
        let answered = request
            .resources()
            .iter()
            .map(|r| r.answer(error_code, None));
        E::Response::with_answers(answered.collect())
    }
}

/// An error with its message.
pub fn error(code: ResponseError, message: &str) -> KafkaError {
    KafkaError {
        code: code.code(),
        message: Some(message.to_string()),
    }
}

/// Authorizes ALTER_CONFIGS on every resource (given as Kafka type id and
/// name) in one batch, answers a resource named twice with INVALID_REQUEST
/// as Kafka does, and calls `alter(index, allowed)` for the others. One
/// (error code, message) per resource, in request order.
pub fn alter_resources(
    resources: &[(i8, &str)],
    mut alter: impl FnMut(usize, bool) -> Result<(), KafkaError>,
) -> Vec<(i16, Option<String>)> {
    let mut count: HashMap<(i8, &str), usize> = HashMap::new();
    for key in resources {
        *count.entry(*key).or_default() += 1;
    }
    let allowed = authorize_resources(Operation::AlterConfigs, resources);
    resources
        .iter()
        .zip(allowed)
        .enumerate()
        .map(|(index, (key, allowed))| {
            let result = if count.get(key).copied().unwrap_or(0) > 1 {
                Err(error(
                    ResponseError::InvalidRequest,
                    "Each resource must appear at most once.",
                ))
            } else {
                alter(index, allowed)
            };
            match result {
                Ok(()) => (0, None),
                Err(error) => (error.code, error.message),
            }
        })
        .collect()
}

/// A request of either API: its resources and `validate_only`.
pub trait AlterRequest {
    type Resource: AlterResource;
    fn resources(&self) -> &[Self::Resource];
    fn validate_only(&self) -> bool;
}

/// A resource of either request, and how its answer looks.
pub trait AlterResource {
    type Answer;
    /// Kafka's type id and the name.
    fn key(&self) -> (i8, &str);
    /// The answer for this resource, echoing its type and name.
    fn answer(&self, error_code: i16, message: Option<&str>) -> Self::Answer;
}

/// A response of either API, from its per-resource answers.
pub trait AlterResponse: Sized {
    type Answer;
    fn with_answers(answers: Vec<Self::Answer>) -> Self;
}

/// The two APIs' messages have the same fields under different types.
macro_rules! alter_messages {
    ($($request:ty, $resource:ty => $response:ty, $answer:ty;)*) => {$(
        impl AlterRequest for $request {
            type Resource = $resource;
            fn resources(&self) -> &[$resource] {
                &self.resources
            }
            fn validate_only(&self) -> bool {
                self.validate_only
            }
        }

        impl AlterResource for $resource {
            type Answer = $answer;
            fn key(&self) -> (i8, &str) {
                (self.resource_type, self.resource_name.as_str())
            }
            fn answer(&self, error_code: i16, message: Option<&str>) -> $answer {
                let name: StrBytes = self.resource_name.clone();
                <$answer>::default()
                    .with_error_code(error_code)
                    .with_error_message(message.map(str_bytes))
                    .with_resource_type(self.resource_type)
                    .with_resource_name(name)
            }
        }

        impl AlterResponse for $response {
            type Answer = $answer;
            fn with_answers(answers: Vec<$answer>) -> Self {
                <$response>::default().with_responses(answers)
            }
        }
    )*};
}

alter_messages! {
    AlterConfigsRequest, alter_configs_request::AlterConfigsResource =>
        AlterConfigsResponse, alter_configs_response::AlterConfigsResourceResponse;
    IncrementalAlterConfigsRequest, incremental_alter_configs_request::AlterConfigsResource =>
        IncrementalAlterConfigsResponse,
        incremental_alter_configs_response::AlterConfigsResourceResponse;
}
