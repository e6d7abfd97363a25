//! DescribeClientQuotas (ApiKey 48): the client quota entities matching a
//! filter, as Kafka's `KafkaApis.handleDescribeClientQuotasRequest` and
//! `ClientQuotasImage.describe`.
//!
//! - Versions 0-1. DESCRIBE_CONFIGS on the Cluster is required, else
//!   CLUSTER_AUTHORIZATION_FAILED and no entries.
//! - Filter components name an entity type (`user`, `client-id`, `ip`) and
//!   match it exactly (match type 0, a name), as the default entity (1) or
//!   any entity (2); `strict` leaves out entities with other types. A
//!   malformed filter is INVALID_REQUEST with Kafka's message; an unknown
//!   entity type is UNSUPPORTED_VERSION.
//! - Each entry is an entity (null name: the default) with its quota values.
//! - Error response (a trap or timeout): the error and null entries, as
//!   Kafka's `DescribeClientQuotasRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use gregor_sdk::kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use gregor_sdk::quotas::{self, FilterComponent, MatchType};
use gregor_sdk::{Handler, KafkaError, Reply, RequestContext, ResponseError};

struct DescribeClientQuotas;

impl Handler for DescribeClientQuotas {
    gregor_sdk::api!(DescribeClientQuotasRequest, 0..=1);

    fn handle(
        _: &RequestContext,
        request: &DescribeClientQuotasRequest,
    ) -> Reply<DescribeClientQuotasResponse> {
        let answer = if cluster_allowed(Operation::DescribeConfigs) {
            describe(request)
        } else {
            let error = ResponseError::ClusterAuthorizationFailed;
            Err(KafkaError {
                code: error.code(),
                message: Some(error.to_string()),
            })
        };
        match answer {
            Ok(entries) => DescribeClientQuotasResponse::default()
                .with_error_message(None)
                .with_entries(Some(entries)),
            Err(error) => refused(error.code, error.message.as_deref()),
        }
        .into()
    }

    /// Kafka's `getErrorResponse`: the error, null entries.
    fn failed(
        _: &RequestContext,
        _: &DescribeClientQuotasRequest,
        error_code: i16,
    ) -> DescribeClientQuotasResponse {
        refused(error_code, None)
    }
}

/// The request answered with an error and null entries.
fn refused(error_code: i16, message: Option<&str>) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
        .with_entries(None)
}

fn describe(request: &DescribeClientQuotasRequest) -> Result<Vec<EntryData>, KafkaError> {
    let mut components = Vec::with_capacity(request.components.len());
    for component in &request.components {
        let match_type = match component.match_type {
            0 => MatchType::Exact,
            1 => MatchType::Default,
            2 => MatchType::Specified,
            other => {
                return Err(KafkaError {
                    code: ResponseError::InvalidRequest.code(),
                    message: Some(format!("Unknown match type {other}")),
                })
            }
        };
        components.push(FilterComponent {
            entity_type: component.entity_type.to_string(),
            match_type,
            match_: component._match.as_ref().map(|m| m.to_string()),
        });
    }
    let entries = quotas::describe(&components, request.strict)?;
    Ok(entries
        .into_iter()
        .map(|entry| {
            EntryData::default()
                .with_entity(
                    entry
                        .entity
                        .iter()
                        .map(|part| {
                            EntityData::default()
                                .with_entity_type(str_bytes(&part.entity_type))
                                .with_entity_name(part.name.as_deref().map(str_bytes))
                        })
                        .collect(),
                )
                .with_values(
                    entry
                        .values
                        .iter()
                        .map(|value| {
                            ValueData::default()
                                .with_key(str_bytes(&value.key))
                                .with_value(value.value)
                        })
                        .collect(),
                )
        })
        .collect())
}

gregor_sdk::export_handler!(DescribeClientQuotas);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let entry = EntryData::default()
            .with_entity(vec![EntityData::default()
                .with_entity_type(str_bytes("user"))
                .with_entity_name(None)])
            .with_values(vec![ValueData::default()
                .with_key(str_bytes("producer_byte_rate"))
                .with_value(1024.0)]);
        let request =
            DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
                .with_entity_type(str_bytes("user"))
                .with_match_type(1)]);
        let invalid = ResponseError::InvalidRequest.code();
        assert_encodes_for_served_versions::<DescribeClientQuotas>(
            &[request],
            &[
                DescribeClientQuotasResponse::default().with_entries(Some(vec![entry])),
                refused(invalid, Some("Unknown match type 7")),
            ],
        );
    }
}
