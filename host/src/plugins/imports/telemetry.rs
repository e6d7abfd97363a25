//! `telemetry`: KIP-714 subscriptions and pushes for the client of the
//! request being handled (its client id and address come from the
//! connection).

use crate::plugins::bindings::handler::gregor::broker::telemetry::{
    self, MetricPoint, Subscription,
};
use crate::plugins::bindings::handler::gregor::broker::types::{KafkaError, Uuid};
use crate::plugins::state::HandlerState;
use crate::telemetry::{ClientAttributes, TelemetryError};

fn kafka_error(error: TelemetryError) -> KafkaError {
    KafkaError {
        code: error.code,
        message: Some(error.message),
    }
}

impl HandlerState {
    fn client_attributes(&self) -> ClientAttributes {
        ClientAttributes {
            client_id: self.client_id.clone().unwrap_or_default(),
            software_name: None,
            software_version: None,
            source_address: self
                .session
                .as_ref()
                .map(|session| session.client_host.clone())
                .unwrap_or_default(),
            source_port: None,
        }
    }
}

impl telemetry::Host for HandlerState {
    fn get_subscription(&mut self, client_instance_id: Uuid) -> Result<Subscription, KafkaError> {
        let attributes = self.client_attributes();
        self.services
            .telemetry
            .get_subscription(u128::from(client_instance_id), attributes)
            .map(|subscription| Subscription {
                client_instance_id: Uuid::from(subscription.client_instance_id),
                subscription_id: subscription.subscription_id,
                // Pushes are decoded uncompressed; an empty list tells the
                // client to send them so (KIP-714).
                accepted_compression_types: Vec::new(),
                push_interval_ms: subscription.push_interval_ms,
                telemetry_max_bytes: subscription.telemetry_max_bytes,
                delta_temporality: true,
                requested_metrics: subscription.requested_metrics,
            })
            .map_err(kafka_error)
    }

    fn accept_push(
        &mut self,
        client_instance_id: Uuid,
        subscription_id: i32,
        terminating: bool,
        compression_type: i8,
        metrics_bytes: u32,
    ) -> Result<(), KafkaError> {
        let attributes = self.client_attributes();
        self.services
            .telemetry
            .accept_push(
                u128::from(client_instance_id),
                attributes,
                subscription_id,
                terminating,
                compression_type,
                metrics_bytes,
            )
            .map_err(kafka_error)
    }

    fn export_metrics(&mut self, client_instance_id: Uuid, points: Vec<MetricPoint>) {
        let points = points
            .into_iter()
            .map(|point| (point.name, point.attributes, point.value))
            .collect();
        self.services
            .telemetry
            .export(u128::from(client_instance_id), points);
    }
}
