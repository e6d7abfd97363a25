//! BrokerRegistration (ApiKey 62): a broker process joins the cluster, as
//! Kafka's `ControllerApis.handleBrokerRegistration`.
//!
//! - Versions 0-4, on the controller listener only.
//! - CLUSTER_ACTION on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
//! - The active controller decides (`controller.register-broker`): the
//!   broker epoch, or INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION,
//!   NOT_CONTROLLER (a broker then asks the active controller).

use gregor_sdk::controller::{self, BrokerRegistration as Registration, Endpoint, FeatureRange};
use gregor_sdk::ids::from_kafka_uuid;
use gregor_sdk::kafka_protocol::messages::{BrokerRegistrationRequest, BrokerRegistrationResponse};
use gregor_sdk::RequestContext;

gregor_sdk::cluster_api!(BrokerRegistration: BrokerRegistrationRequest, 0..=4, ClusterAction => register, failed);

fn register(_: &RequestContext, request: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    match controller::register_broker(&registration(request)) {
        Ok(epoch) => BrokerRegistrationResponse::default().with_broker_epoch(epoch),
        Err(error) => failed(error.code),
    }
}

/// Kafka's error response: no epoch.
fn failed(code: i16) -> BrokerRegistrationResponse {
    BrokerRegistrationResponse::default()
        .with_error_code(code)
        .with_broker_epoch(-1)
}

/// The request as the controller's record of it.
fn registration(request: &BrokerRegistrationRequest) -> Registration {
    Registration {
        broker_id: request.broker_id.0,
        cluster_id: request.cluster_id.to_string(),
        incarnation_id: from_kafka_uuid(request.incarnation_id),
        listeners: request
            .listeners
            .iter()
            .map(|l| Endpoint {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
                security_protocol: l.security_protocol,
            })
            .collect(),
        features: request
            .features
            .iter()
            .map(|f| FeatureRange {
                name: f.name.to_string(),
                min_version: f.min_supported_version,
                max_version: f.max_supported_version,
            })
            .collect(),
        rack: request.rack.as_ref().map(|r| r.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::{Action, Operation};
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::broker_registration_request::Listener;
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::kafka_protocol::protocol::StrBytes;
    use gregor_sdk::{KafkaError, ResponseError};

    fn request() -> BrokerRegistrationRequest {
        BrokerRegistrationRequest::default()
            .with_broker_id(BrokerId(2))
            .with_cluster_id(StrBytes::from_static_str("c-1"))
            .with_listeners(vec![Listener::default()
                .with_name(StrBytes::from_static_str("PLAINTEXT"))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9093)])
    }

    gregor_sdk::served_versions_test!(
        BrokerRegistration,
        [request()],
        [BrokerRegistrationResponse::default().with_broker_epoch(7)]
    );

    /// A controller that registers broker 2 of cluster c-1 at epoch 7.
    struct Controller {
        allow: bool,
    }

    impl FakeHost for Controller {
        fn authorize(&self, action: &Action) -> bool {
            assert_eq!(action.operation, Operation::ClusterAction);
            self.allow
        }
        fn register_broker(&self, registration: &Registration) -> Result<i64, KafkaError> {
            assert!(
                self.allow,
                "an unauthorized registration reached the controller"
            );
            let endpoint = &registration.listeners[0];
            assert_eq!((endpoint.host.as_str(), endpoint.port), ("127.0.0.1", 9093));
            match registration.cluster_id.as_str() {
                "c-1" => Ok(7),
                _ => Err(KafkaError {
                    code: ResponseError::InconsistentClusterId.code(),
                    message: None,
                }),
            }
        }
    }

    #[test]
    fn the_controller_answers_with_the_broker_epoch() {
        let handled = fake::handle::<BrokerRegistration>(Controller { allow: true }, 4, &request());
        let response = handled.response.unwrap();
        assert_eq!((response.error_code, response.broker_epoch), (0, 7));
        let other = request().with_cluster_id(StrBytes::from_static_str("c-2"));
        let handled = fake::handle::<BrokerRegistration>(Controller { allow: true }, 0, &other);
        let response = handled.response.unwrap();
        let inconsistent = ResponseError::InconsistentClusterId.code();
        assert_eq!(
            (response.error_code, response.broker_epoch),
            (inconsistent, -1)
        );
    }

    #[test]
    fn without_cluster_action_it_is_refused() {
        let handled =
            fake::handle::<BrokerRegistration>(Controller { allow: false }, 4, &request());
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(handled.response.map(|r| r.error_code), Some(denied));
    }
}
