//! UnregisterBroker (ApiKey 64): an operator removes a broker's
//! registration (`kafka-cluster.sh unregister`), as Kafka's
//! `ControllerApis.handleUnregisterBroker`.
//!
//! - Version 0, on the controller listener only.
//! - ALTER on the Cluster (as Kafka: an admin request, not an inter-broker
//!   one), else CLUSTER_AUTHORIZATION_FAILED.
//! - The active controller moves the broker out of every ISR and
//!   leadership and removes it; errors BROKER_ID_NOT_REGISTERED,
//!   NOT_CONTROLLER.

use gregor_sdk::controller;
use gregor_sdk::kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::{AnswerError, RequestContext};

gregor_sdk::cluster_api!(UnregisterBroker: UnregisterBrokerRequest, 0..=0, Alter => unregister);

fn unregister(_: &RequestContext, request: &UnregisterBrokerRequest) -> UnregisterBrokerResponse {
    let answer = controller::unregister_broker(request.broker_id.0);
    UnregisterBrokerResponse::default()
        .with_error_code(answer.error_code())
        .with_error_message(answer.error_message().map(StrBytes::from_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::{Action, Operation};
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::{KafkaError, ResponseError};

    fn request(id: i32) -> UnregisterBrokerRequest {
        UnregisterBrokerRequest::default().with_broker_id(BrokerId(id))
    }

    gregor_sdk::served_versions_test!(
        UnregisterBroker,
        [request(1)],
        [UnregisterBrokerResponse::default()]
    );

    /// Broker 1 is registered; ALTER is allowed when `allow`.
    struct Controller {
        allow: bool,
    }

    impl FakeHost for Controller {
        fn authorize(&self, action: &Action) -> bool {
            self.allow && action.operation == Operation::Alter
        }
        fn unregister_broker(&self, broker_id: i32) -> Result<(), KafkaError> {
            assert!(self.allow, "an unauthorized request reached the controller");
            match broker_id {
                1 => Ok(()),
                _ => Err(KafkaError {
                    code: ResponseError::BrokerIdNotRegistered.code(),
                    message: Some(format!("Broker ID {broker_id} is not registered.")),
                }),
            }
        }
    }

    #[test]
    fn the_controller_removes_a_registered_broker_only() {
        let ok = fake::handle::<UnregisterBroker>(Controller { allow: true }, 0, &request(1));
        assert_eq!(ok.response.map(|r| r.error_code), Some(0));
        let unknown = fake::handle::<UnregisterBroker>(Controller { allow: true }, 0, &request(5))
            .response
            .unwrap();
        assert_eq!(
            unknown.error_code,
            ResponseError::BrokerIdNotRegistered.code()
        );
        assert!(unknown.error_message.is_some());
        let denied = fake::handle::<UnregisterBroker>(Controller { allow: false }, 0, &request(1));
        assert_eq!(
            denied.response.map(|r| r.error_code),
            Some(ResponseError::ClusterAuthorizationFailed.code())
        );
    }
}
