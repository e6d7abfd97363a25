//! GetTelemetrySubscriptions (ApiKey 71): which metrics a client should
//! push and how often (KIP-714), as Kafka's
//! `KafkaApis.handleGetTelemetrySubscriptionsRequest` and
//! `ClientMetricsManager`.
//!
//! - Version 0. No authorization (KIP-714 leaves it to subscriptions).
//! - A client sending the zero UUID gets a new client instance id. The
//!   host matches the client against the CLIENT_METRICS subscriptions
//!   (`kafka-client-metrics.sh`, IncrementalAlterConfigs) and answers their
//!   metric prefixes (none subscribed: an empty list, and the client pushes
//!   nothing) and shortest interval. Asking again before that interval has
//!   passed is THROTTLING_QUOTA_EXCEEDED.
//! - Pushes are accepted uncompressed (the accepted compression list is
//!   empty, which tells clients so).
//! - Error response (a trap or timeout): the error alone, as Kafka's
//!   `GetTelemetrySubscriptionsRequest.getErrorResponse`.

use gregor_sdk::ids::{from_kafka_uuid, str_bytes, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
};
use gregor_sdk::telemetry;
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext,
};

struct GetTelemetrySubscriptions;

impl RawHandler for GetTelemetrySubscriptions {
    fn describe() -> ApiInfo {
        api_info::<GetTelemetrySubscriptionsRequest>("GetTelemetrySubscriptions", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: GetTelemetrySubscriptionsRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let mut response = GetTelemetrySubscriptionsResponse::default();
        match telemetry::get_subscription(from_kafka_uuid(request.client_instance_id)) {
            Ok(subscription) => {
                response.client_instance_id = to_kafka_uuid(subscription.client_instance_id);
                response.subscription_id = subscription.subscription_id;
                response.accepted_compression_types = subscription.accepted_compression_types;
                response.push_interval_ms = subscription.push_interval_ms;
                response.telemetry_max_bytes = subscription.telemetry_max_bytes;
                response.delta_temporality = subscription.delta_temporality;
                response.requested_metrics = subscription
                    .requested_metrics
                    .iter()
                    .map(|m| str_bytes(m))
                    .collect();
            }
            Err(error) => response.error_code = error.code,
        }
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error alone.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        // Nothing of the request is echoed, but a body that does not decode
        // gets no response.
        decode::<GetTelemetrySubscriptionsRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(error_code))
    }
}

/// The request answered with `error_code` and no subscription.
fn error_response_for(error_code: i16) -> GetTelemetrySubscriptionsResponse {
    GetTelemetrySubscriptionsResponse::default().with_error_code(error_code)
}

gregor_sdk::export_raw_handler!(GetTelemetrySubscriptions);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode() {
        let response = GetTelemetrySubscriptionsResponse::default()
            .with_requested_metrics(vec![str_bytes("org.apache.kafka.")])
            .with_push_interval_ms(1000);
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
    }

    #[test]
    fn error_responses_encode() {
        let code = gregor_sdk::ResponseError::UnknownServerError.code();
        let response = error_response_for(code);
        assert_eq!(response.error_code, code);
        assert!(response.requested_metrics.is_empty());
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
    }
}
