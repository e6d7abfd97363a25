//! PushTelemetry (ApiKey 72): a client's metrics (KIP-714), as Kafka's
//! `KafkaApis.handlePushTelemetryRequest` and `ClientMetricsManager`.
//!
//! - Version 0. No authorization (KIP-714).
//! - The host checks the push against the client instance (INVALID_REQUEST
//!   after a terminating push or for a reserved id,
//!   THROTTLING_QUOTA_EXCEEDED before the push interval,
//!   UNKNOWN_SUBSCRIPTION_ID for an outdated subscription,
//!   UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE).
//! - Accepted metrics are OpenTelemetry `MetricsData` (protobuf, see
//!   [`otlp`]); each data point is exported: logged by the broker and kept
//!   as the client's latest value on `/metrics`. Metrics that do not decode
//!   (or arrive compressed, which the subscription did not offer) are
//!   INVALID_RECORD, as Kafka answers an export failure.
//! - Error response (a trap or timeout): the error alone, as Kafka's
//!   `PushTelemetryRequest.getErrorResponse`.

mod otlp;

use gregor_sdk::ids::from_kafka_uuid;
use gregor_sdk::kafka_protocol::messages::{PushTelemetryRequest, PushTelemetryResponse};
use gregor_sdk::telemetry::{self, MetricPoint};
use gregor_sdk::{
    api_info, decode, encode, log_warn, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

/// Kafka's CompressionType id for uncompressed data.
const NO_COMPRESSION: i8 = 0;

struct PushTelemetry;

impl RawHandler for PushTelemetry {
    fn describe() -> ApiInfo {
        api_info::<PushTelemetryRequest>("PushTelemetry", 0, 0)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: PushTelemetryRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let instance = from_kafka_uuid(request.client_instance_id);
        let size = u32::try_from(request.metrics.len()).unwrap_or(u32::MAX);
        let mut response = PushTelemetryResponse::default();
        let accepted = telemetry::accept_push(
            instance,
            request.subscription_id,
            request.terminating,
            request.compression_type,
            size,
        );
        if let Err(error) = accepted {
            response.error_code = error.code;
        } else if !request.metrics.is_empty() {
            match export(&request) {
                Ok(points) => telemetry::export_metrics(instance, &points),
                Err(why) => {
                    log_warn(&format!(
                        "client telemetry from {} not exported: {why}",
                        request.client_instance_id
                    ));
                    response.error_code = ResponseError::InvalidRecord.code();
                }
            }
        }
        gregor_sdk::count_errors([response.error_code]);
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: the error alone.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        // Nothing of the request is echoed, but a body that does not decode
        // gets no response.
        decode::<PushTelemetryRequest>(&ctx, &body).ok()?;
        encode(&ctx, &error_response_for(error_code))
    }
}

/// The request answered with `error_code`.
fn error_response_for(error_code: i16) -> PushTelemetryResponse {
    PushTelemetryResponse::default().with_error_code(error_code)
}

fn export(request: &PushTelemetryRequest) -> Result<Vec<MetricPoint>, String> {
    if request.compression_type != NO_COMPRESSION {
        return Err(format!(
            "compression type {} was not offered",
            request.compression_type
        ));
    }
    otlp::decode_metrics(&request.metrics)
}

gregor_sdk::export_raw_handler!(PushTelemetry);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    #[test]
    fn responses_encode() {
        let response = PushTelemetryResponse::default().with_error_code(117);
        assert!(response.encode(&mut Vec::new(), 0).is_ok());
    }

    #[test]
    fn error_responses_encode() {
        let code = ResponseError::UnknownServerError.code();
        let response = error_response_for(code);
        let mut encoded = Vec::new();
        assert!(response.encode(&mut encoded, 0).is_ok());
        // throttle_time_ms, then error_code.
        assert_eq!(encoded[4..6], code.to_be_bytes());
    }
}
