//! FindCoordinator (ApiKey 10): which broker coordinates a group or a
//! transactional id, as Kafka's `KafkaApis.handleFindCoordinatorRequest`.
//!
//! - Versions 0-6; v4+ asks for a batch of keys (`coordinator_keys`) and
//!   answers per key, older versions ask for one key and answer at the top
//!   level (an error there carries node -1, host "" and port -1).
//! - Key type 0 (group) needs DESCRIBE on the Group, else
//!   GROUP_AUTHORIZATION_FAILED; key type 1 (transaction) needs DESCRIBE on
//!   the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; key
//!   type 2 (share) needs CLUSTER_ACTION on the Cluster, checked first as
//!   Kafka does (CLUSTER_AUTHORIZATION_FAILED), and is then INVALID_REQUEST
//!   (before v6, and here always: this broker has no share coordinator),
//!   as is any other key type.
//! - On one broker every coordinator is this broker, as the request's
//!   listener advertises it (`metadata.describe-cluster`).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error (and its message) for every key, with no
//!   coordinator.

use gregor_sdk::authorize::{cluster_allowed, is_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::find_coordinator_response::Coordinator;
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::metadata::{self, Broker};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

struct FindCoordinator;

impl Handler for FindCoordinator {
    gregor_sdk::api!(FindCoordinatorRequest, 0..=6);

    fn handle(
        ctx: &RequestContext,
        request: &FindCoordinatorRequest,
    ) -> Reply<FindCoordinatorResponse> {
        let cluster = metadata::describe_cluster();
        let node = cluster
            .brokers
            .into_iter()
            .find(|broker| broker.node_id == cluster.controller_id);
        let version = ctx.api_version;
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            for key in &request.coordinator_keys {
                let (error, node) = coordinator(request.key_type, key, node.as_ref());
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
            let (error, node) = coordinator(request.key_type, &request.key, node.as_ref());
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
        response.into()
    }

    /// Kafka's `getErrorResponse`: every key with the error.
    fn failed(
        ctx: &RequestContext,
        request: &FindCoordinatorRequest,
        error_code: i16,
    ) -> FindCoordinatorResponse {
        failed(request, ctx.api_version, error_code)
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

/// Kafka's `getCoordinator`: an error, or the coordinator's node.
fn coordinator<'a>(key_type: i8, key: &str, node: Option<&'a Broker>) -> (i16, Option<&'a Broker>) {
    let denied = match key_type {
        GROUP => (!is_allowed(Operation::Describe, ResourceType::Group, key))
            .then_some(ResponseError::GroupAuthorizationFailed),
        TRANSACTION => (!is_allowed(Operation::Describe, ResourceType::TransactionalId, key))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed),
        // Kafka checks CLUSTER_ACTION before it looks at the key type: a
        // caller without it learns nothing about share support.
        SHARE if !cluster_allowed(Operation::ClusterAction) => {
            Some(ResponseError::ClusterAuthorizationFailed)
        }
        // No share coordinator here (nor before v6), and no other key type.
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
        code if code == ResponseError::ClusterAuthorizationFailed.code() => {
            "Cluster authorization failed."
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

gregor_sdk::export_handler!(FindCoordinator);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::metadata::Cluster;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaResponse;

    fn broker() -> Broker {
        Broker {
            node_id: 1,
            host: "h".into(),
            port: 9,
            rack: None,
        }
    }

    #[test]
    fn unknown_key_types_are_invalid() {
        let (error, node) = coordinator(7, "k", None);
        assert_eq!(error, ResponseError::InvalidRequest.code());
        assert!(node.is_none());
        assert_eq!(node_fields(None).2, -1);
    }

    /// A principal without CLUSTER_ACTION on the Cluster.
    struct NoClusterAction;

    impl FakeHost for NoClusterAction {
        fn authorize(&self, action: &Action) -> bool {
            action.operation != Operation::ClusterAction
        }
        fn describe_cluster(&self) -> Cluster {
            OneBroker.describe_cluster()
        }
    }

    #[test]
    fn share_keys_need_cluster_action_before_anything_else() {
        let request = FindCoordinatorRequest::default()
            .with_key_type(SHARE)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g:t:0")]);
        let codes = |handled: fake::Handled<FindCoordinatorResponse>| {
            let response = handled.response.unwrap_or_default();
            response
                .coordinators
                .iter()
                .map(|c| c.error_code)
                .collect::<Vec<_>>()
        };
        let denied = fake::handle::<FindCoordinator>(NoClusterAction, 6, &request);
        let cluster_denied = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(codes(denied), vec![cluster_denied]);
        let allowed = fake::handle::<FindCoordinator>(OneBroker, 6, &request);
        assert_eq!(codes(allowed), vec![ResponseError::InvalidRequest.code()]);
        let old = FindCoordinatorRequest::default()
            .with_key_type(SHARE)
            .with_key(StrBytes::from_static_str("g:t:0"));
        let response = fake::handle::<FindCoordinator>(NoClusterAction, 3, &old).response;
        assert_eq!(response.map(|r| r.error_code), Some(cluster_denied));
    }

    fn request() -> FindCoordinatorRequest {
        FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("g"))
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("a"),
                StrBytes::from_static_str("b"),
            ])
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        for version in 0..=6 {
            let response = failed(&request(), version, code);
            if version >= 4 {
                assert_eq!(response.error_codes(), vec![NONE, code, code], "v{version}");
                let keys: Vec<&str> = response
                    .coordinators
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect();
                assert_eq!(keys, vec!["a", "b"]);
                assert!(response.coordinators.iter().all(|c| c.port == -1));
            } else {
                assert_eq!(response.error_codes(), vec![code], "v{version}");
                assert_eq!((response.node_id, response.port), (BrokerId(-1), -1));
            }
        }
        // The answers' shapes per version (per key from v4, at the top level
        // with a message before) are encoded by the fake-host tests below.
        assert_encodes_for_served_versions::<FindCoordinator>(
            &[request()],
            &[FindCoordinatorResponse::default()],
        );
    }

    /// One broker, the controller; the principal may not DESCRIBE "secret".
    struct OneBroker;

    impl FakeHost for OneBroker {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name != "secret"
        }
        fn describe_cluster(&self) -> Cluster {
            Cluster {
                cluster_id: "c".into(),
                controller_id: 1,
                brokers: vec![broker()],
            }
        }
    }

    #[test]
    fn every_key_is_answered_with_this_broker_or_its_error() {
        let request = FindCoordinatorRequest::default()
            .with_key_type(TRANSACTION)
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("t"),
                StrBytes::from_static_str("secret"),
            ]);
        let handled = fake::handle::<FindCoordinator>(OneBroker, 4, &request);
        let answers: Vec<(String, i16, i32)> = handled
            .response
            .map(|r| r.coordinators)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.key.to_string(), c.error_code, c.port))
            .collect();
        let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
        assert_eq!(
            answers,
            vec![("t".into(), NONE, 9), ("secret".into(), denied, -1)]
        );
        assert_eq!(handled.counted_errors, vec![denied]);
    }

    #[test]
    fn old_versions_answer_at_the_top_with_a_message() {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let handled = fake::handle::<FindCoordinator>(OneBroker, 3, &request);
        let response = handled.response.expect("an answer");
        assert_eq!(
            (response.error_code, response.node_id, response.port),
            (NONE, BrokerId(1), 9)
        );
        assert_eq!(response.error_message.as_deref(), Some("NONE"));
    }
}
