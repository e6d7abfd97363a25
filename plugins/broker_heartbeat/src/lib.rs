//! BrokerHeartbeat (ApiKey 63): a broker renews its session with the active
//! controller, as Kafka's `ControllerApis.handleBrokerHeartbeatRequest`.
//!
//! - Versions 0-1, on the controller listener only.
//! - CLUSTER_ACTION on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
//! - The active controller decides (`controller.broker-heartbeat`):
//!   unfenced once caught up, fenced or shut down on request; errors
//!   STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER. A failed
//!   heartbeat answers fenced and not caught up, as Kafka's error response.

use gregor_sdk::controller::{self, Heartbeat};
use gregor_sdk::kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerHeartbeatResponse};
use gregor_sdk::{AnswerError, RequestContext};

gregor_sdk::cluster_api!(BrokerHeartbeat: BrokerHeartbeatRequest, 0..=1, ClusterAction => heartbeat, failed);

fn heartbeat(_: &RequestContext, request: &BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
    let answer = controller::broker_heartbeat(Heartbeat {
        broker_id: request.broker_id.0,
        broker_epoch: request.broker_epoch,
        current_metadata_offset: request.current_metadata_offset,
        want_fence: request.want_fence,
        want_shut_down: request.want_shut_down,
    });
    match answer {
        Ok(state) => BrokerHeartbeatResponse::default()
            .with_is_caught_up(state.is_caught_up)
            .with_is_fenced(state.is_fenced)
            .with_should_shut_down(state.should_shut_down),
        Err(error) => failed(error.error_code()),
    }
}

/// Kafka's error response: fenced, not caught up, not shutting down.
fn failed(code: i16) -> BrokerHeartbeatResponse {
    BrokerHeartbeatResponse::default()
        .with_error_code(code)
        .with_is_fenced(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::{Action, Operation};
    use gregor_sdk::controller::HeartbeatState;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::{KafkaError, ResponseError};

    fn request(epoch: i64) -> BrokerHeartbeatRequest {
        BrokerHeartbeatRequest::default()
            .with_broker_id(BrokerId(3))
            .with_broker_epoch(epoch)
            .with_current_metadata_offset(40)
    }

    gregor_sdk::served_versions_test!(
        BrokerHeartbeat,
        [request(12)],
        [BrokerHeartbeatResponse::default().with_is_caught_up(true)]
    );

    /// Broker 3 of epoch 12, caught up from offset 12 on.
    struct Controller;

    impl FakeHost for Controller {
        fn authorize(&self, action: &Action) -> bool {
            action.operation == Operation::ClusterAction
        }
        fn broker_heartbeat(&self, heartbeat: Heartbeat) -> Result<HeartbeatState, KafkaError> {
            if heartbeat.broker_epoch != 12 {
                return Err(KafkaError {
                    code: ResponseError::StaleBrokerEpoch.code(),
                    message: None,
                });
            }
            Ok(HeartbeatState {
                is_caught_up: heartbeat.current_metadata_offset >= 12,
                is_fenced: false,
                should_shut_down: false,
            })
        }
    }

    #[test]
    fn a_current_broker_is_unfenced_and_a_stale_one_refused() {
        let response = fake::handle::<BrokerHeartbeat>(Controller, 1, &request(12))
            .response
            .unwrap();
        assert_eq!(
            (
                response.error_code,
                response.is_caught_up,
                response.is_fenced
            ),
            (0, true, false)
        );
        let response = fake::handle::<BrokerHeartbeat>(Controller, 0, &request(11))
            .response
            .unwrap();
        let stale = ResponseError::StaleBrokerEpoch.code();
        assert_eq!((response.error_code, response.is_fenced), (stale, true));
    }
}
