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
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Handler, Outcome,
    RequestContext, ResponseError,
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
        gregor_sdk::count_errors([error]);
        let response = response(error).with_throttle_time_ms(request_throttle_ms());
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let _: HeartbeatRequest = decode(&ctx, &body).ok()?;
        encode(&ctx, &response(error_code))
    }
}

/// The answer: a heartbeat carries nothing but its error code.
fn response(error_code: i16) -> HeartbeatResponse {
    HeartbeatResponse::default().with_error_code(error_code)
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

    #[test]
    fn error_responses_encode_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let response = response(code);
        assert_eq!(response.error_code, code);
        for version in 0..=4 {
            let encoded = response.encode(&mut Vec::new(), version);
            assert!(encoded.is_ok(), "v{version}: {encoded:?}");
        }
    }
}
