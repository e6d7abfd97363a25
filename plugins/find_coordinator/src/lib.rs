//! FindCoordinator (ApiKey 10): which broker coordinates a group or a
//! transactional id, as Kafka's `KafkaApis.handleFindCoordinatorRequest`.
//!
//! - Versions 0-6; v4+ asks for a batch of keys (`coordinator_keys`) and
//!   answers per key, older versions ask for one key and answer at the top
//!   level (an error there carries node -1, host "" and port -1).
//! - Key type 0 (group) needs DESCRIBE on the Group, else
//!   GROUP_AUTHORIZATION_FAILED; key type 1 (transaction) needs DESCRIBE on
//!   the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; key
//!   type 2 (share) is INVALID_REQUEST (before v6, and here always: this
//!   broker has no share coordinator), as is any other key type.
//! - On one broker every coordinator is this broker, as the request's
//!   listener advertises it (`metadata.describe-cluster`).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error (and its message) for every key, with no
//!   coordinator.

use gregor_sdk::authorize::is_allowed;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::find_coordinator_response::Coordinator;
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::metadata::{self, Broker};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError, NONE,
};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

struct FindCoordinator;

impl RawHandler for FindCoordinator {
    fn describe() -> ApiInfo {
        api_info::<FindCoordinatorRequest>("FindCoordinator", 0, 6)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: FindCoordinatorRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let cluster = metadata::describe_cluster();
        let node = cluster
            .brokers
            .into_iter()
            .find(|broker| broker.node_id == cluster.controller_id);
        let version = ctx.api_version;
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            for key in &request.coordinator_keys {
                let (error, node) = coordinator(request.key_type, key, version, node.as_ref());
                let (node_id, host, port) = node_fields(node);
                response.coordinators.push(
                    Coordinator::default()
                        .with_key(key.clone())
                        .with_error_code(error)
                        .with_node_id(node_id)
                        .with_host(host)
                        .with_port(port),
                );
            }
        } else {
            let (error, node) = coordinator(request.key_type, &request.key, version, node.as_ref());
            let (node_id, host, port) = node_fields(node);
            response = response
                .with_error_code(error)
                .with_node_id(node_id)
                .with_host(host)
                .with_port(port);
            if version >= 1 {
                response.error_message = Some(StrBytes::from_static_str(message(error)));
            }
        }
        gregor_sdk::count_errors(error_codes(&response));
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every key with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: FindCoordinatorRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &failed(&request, ctx.api_version, error_code))
    }
}

/// The request answered with one error and no coordinator, as Kafka's
/// `prepareOldResponse` (before v4) and `prepareErrorResponse` (v4+).
fn failed(
    request: &FindCoordinatorRequest,
    version: i16,
    error_code: i16,
) -> FindCoordinatorResponse {
    let (node_id, host, port) = node_fields(None);
    let error_message = Some(StrBytes::from_static_str(message(error_code)));
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_error_code(error_code)
                    .with_error_message(error_message.clone())
                    .with_node_id(node_id)
                    .with_host(host.clone())
                    .with_port(port)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        FindCoordinatorResponse::default()
            .with_error_code(error_code)
            .with_error_message(if version >= 1 { error_message } else { None })
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port)
    }
}

/// The top-level code and every key's.
fn error_codes(response: &FindCoordinatorResponse) -> Vec<i16> {
    std::iter::once(response.error_code)
        .chain(response.coordinators.iter().map(|c| c.error_code))
        .collect()
}

/// Kafka's `getCoordinator`: an error, or the coordinator's node.
fn coordinator<'a>(
    key_type: i8,
    key: &str,
    version: i16,
    node: Option<&'a Broker>,
) -> (i16, Option<&'a Broker>) {
    let denied = match key_type {
        GROUP => (!is_allowed(Operation::Describe, ResourceType::Group, key))
            .then_some(ResponseError::GroupAuthorizationFailed),
        TRANSACTION => (!is_allowed(Operation::Describe, ResourceType::TransactionalId, key))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed),
        SHARE if version < 6 => Some(ResponseError::InvalidRequest),
        // No share coordinator here, and no other key type exists.
        _ => Some(ResponseError::InvalidRequest),
    };
    match (denied, node) {
        (Some(error), _) => (error.code(), None),
        (None, None) => (ResponseError::CoordinatorNotAvailable.code(), None),
        (None, Some(node)) => (NONE, Some(node)),
    }
}

fn node_fields(node: Option<&Broker>) -> (BrokerId, StrBytes, i32) {
    match node {
        Some(node) => (
            BrokerId(node.node_id),
            StrBytes::from_string(node.host.clone()),
            node.port,
        ),
        None => (BrokerId(-1), StrBytes::default(), -1),
    }
}

/// What Kafka puts in `error_message` (v1-3): the error's message, "NONE"
/// on success.
fn message(error: i16) -> &'static str {
    match error {
        NONE => "NONE",
        code if code == ResponseError::GroupAuthorizationFailed.code() => {
            "Not authorized to access group."
        }
        code if code == ResponseError::TransactionalIdAuthorizationFailed.code() => {
            "Transactional Id authorization failed."
        }
        code if code == ResponseError::CoordinatorNotAvailable.code() => {
            "The coordinator is not available."
        }
        code if code == ResponseError::UnknownServerError.code() => {
            "The server experienced an unexpected error when processing the request."
        }
        _ => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker.",
    }
}

gregor_sdk::export_raw_handler!(FindCoordinator);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn unknown_key_types_are_invalid() {
        let broker = Broker {
            node_id: 1,
            host: "h".into(),
            port: 9,
            rack: None,
        };
        let (error, node) = coordinator(SHARE, "g:t:0", 5, Some(&broker));
        assert_eq!(error, ResponseError::InvalidRequest.code());
        assert!(node.is_none());
        assert_eq!(
            coordinator(7, "k", 6, None).0,
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(node_fields(None).2, -1);
    }

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=6 {
            let mut response = FindCoordinatorResponse::default();
            if version >= 4 {
                response
                    .coordinators
                    .push(Coordinator::default().with_port(9));
            } else {
                response = response.with_port(9);
                if version >= 1 {
                    response.error_message = Some(StrBytes::from_static_str(message(NONE)));
                }
            }
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("g"))
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("a"),
                StrBytes::from_static_str("b"),
            ]);
        for version in 0..=6 {
            let response = failed(&request, version, code);
            if version >= 4 {
                assert_eq!(error_codes(&response), vec![NONE, code, code], "v{version}");
                let keys: Vec<&str> = response
                    .coordinators
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect();
                assert_eq!(keys, vec!["a", "b"]);
                assert!(response.coordinators.iter().all(|c| c.port == -1));
            } else {
                assert_eq!(error_codes(&response), vec![code], "v{version}");
                assert_eq!((response.node_id, response.port), (BrokerId(-1), -1));
            }
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
