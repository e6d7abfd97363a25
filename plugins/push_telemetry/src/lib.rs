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
use gregor_sdk::{log_warn, Handler, Reply, RequestContext, ResponseError};

/// Kafka's CompressionType id for uncompressed data.
const NO_COMPRESSION: i8 = 0;

struct PushTelemetry;

impl Handler for PushTelemetry {
    gregor_sdk::api!(PushTelemetryRequest, 0..=0);

    fn handle(_: &RequestContext, request: &PushTelemetryRequest) -> Reply<PushTelemetryResponse> {
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
            match export(request) {
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
        response.into()
    }
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

gregor_sdk::export_handler!(PushTelemetry);

gregor_sdk::served_versions_test!(
    PushTelemetry,
    [PushTelemetryRequest::default().with_metrics(vec![1, 2, 3].into())],
    [PushTelemetryResponse::default().with_error_code(ResponseError::TelemetryTooLarge.code())]
);
