//! Heartbeat (ApiKey 12): a group member says it is alive, as Kafka's
//! `KafkaApis.handleHeartbeatRequest`.
//!
//! - Versions 0-4 (group_instance_id from v3).
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED.
//! - The coordinator answers: NONE, REBALANCE_IN_PROGRESS (rejoin),
//!   ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ...
//! - A failed handler (trap or timeout) is answered with the error, as
//!   Kafka's `getErrorResponse`.

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_string};
use gregor_sdk::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use gregor_sdk::{AnswerError, Handler, Reply, RequestContext, ResponseError};

struct Heartbeat;

impl Handler for Heartbeat {
    gregor_sdk::api!(HeartbeatRequest, 0..=4);

    fn handle(_ctx: &RequestContext, request: &HeartbeatRequest) -> Reply<HeartbeatResponse> {
        let error = if !group_allowed(Operation::Read, &request.group_id) {
            ResponseError::GroupAuthorizationFailed.code()
        } else {
            groups::heartbeat(
                &request.group_id,
                request.generation_id,
                &request.member_id,
                opt_string(&request.group_instance_id).as_deref(),
            )
            .error_code()
        };
        HeartbeatResponse::default().with_error_code(error).into()
    }
}

gregor_sdk::export_handler!(Heartbeat);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::GroupId;
    use gregor_sdk::kafka_protocol::protocol::StrBytes;
    use gregor_sdk::{result_of, KafkaError};

    fn request(group: &'static str) -> HeartbeatRequest {
        HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(group)))
            .with_generation_id(3)
            .with_member_id(StrBytes::from_static_str("m-1"))
    }

    gregor_sdk::served_versions_test!(
        Heartbeat,
        [request("g")],
        [HeartbeatResponse::default().with_error_code(ResponseError::RebalanceInProgress.code())]
    );

    /// A coordinator that knows group "g" at generation 3 only.
    struct Coordinator;

    impl FakeHost for Coordinator {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name != "secret"
        }
        fn heartbeat(
            &self,
            group: &str,
            generation: i32,
            member: &str,
            _: Option<&str>,
        ) -> Result<(), KafkaError> {
            result_of(match (group, generation, member) {
                ("secret", ..) => panic!("an unauthorized heartbeat reached the coordinator"),
                ("g", 3, "m-1") => 0,
                _ => ResponseError::IllegalGeneration.code(),
            })
        }
    }

    #[test]
    fn the_coordinator_answers_an_authorized_member() {
        let handled = fake::handle::<Heartbeat>(Coordinator, 4, &request("g"));
        assert_eq!(handled.response.map(|r| r.error_code), Some(0));
        // NONE is not reported to the broker's error counter.
        assert!(
            handled.counted_errors.is_empty(),
            "{:?}",
            handled.counted_errors
        );
    }

    #[test]
    fn an_unauthorized_group_is_refused_without_asking_the_coordinator() {
        let denied = ResponseError::GroupAuthorizationFailed.code();
        let handled = fake::handle::<Heartbeat>(Coordinator, 0, &request("secret"));
        assert_eq!(handled.response.map(|r| r.error_code), Some(denied));
        assert_eq!(handled.counted_errors, vec![denied]);
    }
}
