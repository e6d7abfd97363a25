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
use gregor_sdk::{Handler, Reply, RequestContext};

struct GetTelemetrySubscriptions;

impl Handler for GetTelemetrySubscriptions {
    gregor_sdk::api!(GetTelemetrySubscriptionsRequest, 0..=0);

    fn handle(
        _: &RequestContext,
        request: &GetTelemetrySubscriptionsRequest,
    ) -> Reply<GetTelemetrySubscriptionsResponse> {
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
        response.into()
    }
}

gregor_sdk::export_handler!(GetTelemetrySubscriptions);

gregor_sdk::served_versions_test!(
    GetTelemetrySubscriptions,
    [GetTelemetrySubscriptionsRequest::default()],
    [GetTelemetrySubscriptionsResponse::default()
        .with_requested_metrics(vec![str_bytes("org.apache.kafka.")])
        .with_push_interval_ms(1000)]
);
