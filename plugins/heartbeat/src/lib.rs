//! Heartbeat (ApiKey 12): a group member says it is alive, as Kafka's
//! `KafkaApis.handleHeartbeatRequest`.
//!
//! - Versions 0-4 (group_instance_id from v3).
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED.
//! - The coordinator answers: NONE, REBALANCE_IN_PROGRESS (rejoin),
//!   ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ...

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_string};
use gregor_sdk::kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use gregor_sdk::{
    api_info, decode, respond, ApiInfo, Handler, Outcome, RequestContext, ResponseError,
};

struct Heartbeat;

impl Handler for Heartbeat {
    fn describe() -> ApiInfo {
        api_info::<HeartbeatRequest>("Heartbeat", 0, 4)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: HeartbeatRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let error = if !group_allowed(Operation::Read, &request.group_id) {
            ResponseError::GroupAuthorizationFailed.code()
        } else {
            groups::heartbeat(
                &request.group_id,
                request.generation_id,
                &request.member_id,
                opt_string(&request.group_instance_id).as_deref(),
            )
        };
        respond(&ctx, &HeartbeatResponse::default().with_error_code(error))
    }
}

gregor_sdk::export_handler!(Heartbeat);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode_for_every_served_version() {
        for version in 0..=4 {
            let response = HeartbeatResponse::default().with_error_code(27);
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }
}
