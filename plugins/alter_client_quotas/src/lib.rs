//! AlterClientQuotas (ApiKey 49): set or remove client quotas, as Kafka's
//! `KafkaApis.handleAlterClientQuotasRequest` and the controller's
//! `ClientQuotaControlManager`.
//!
//! - Versions 0-1. ALTER_CONFIGS on the Cluster is required, else every
//!   entry gets CLUSTER_AUTHORIZATION_FAILED.
//! - Entities combine `user` and `client-id` (a null name is the default
//!   entity); keys are `producer_byte_rate`, `consumer_byte_rate` (whole
//!   numbers), `request_percentage` and `controller_mutation_rate`, all
//!   greater than 0. Anything else is INVALID_REQUEST with Kafka's message,
//!   per entry. An entity named twice is refused ("Ignoring duplicate
//!   entity"). IP entities (`connection_creation_rate`) are refused:
//!   Gregor does not limit connection creation.
//! - Kafka's controller writes a record per op of the valid entries and at
//!   most 10000 for one request: over that, every entry gets
//!   POLICY_VIOLATION ("Request parameters do not satisfy the configured
//!   policy.", as Kafka's `getErrorResponse` words it), `validate_only`
//!   too. Entries are validated first and only then applied.
//! - Unless `validate_only`, changes are durable and take effect at once:
//!   the next request of a matching client is measured against them.
//! - Error response (a trap or timeout): every entry with the error, as
//!   Kafka's `AlterClientQuotasRequest.getErrorResponse`.

use std::collections::HashMap;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_client_quotas_request::EntryData as RequestEntry;
use gregor_sdk::kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use gregor_sdk::kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use gregor_sdk::quotas::{self, EntityPart, QuotaOp};
use gregor_sdk::request_caps;
use gregor_sdk::{Handler, KafkaError, Reply, RequestContext, ResponseError};

struct AlterClientQuotas;

impl Handler for AlterClientQuotas {
    gregor_sdk::api!(AlterClientQuotasRequest, 0..=1);

    fn handle(
        _: &RequestContext,
        request: &AlterClientQuotasRequest,
    ) -> Reply<AlterClientQuotasResponse> {
        alter_all(request).into()
    }

    /// Kafka's `getErrorResponse`: every entry with the error.
    fn failed(
        _: &RequestContext,
        request: &AlterClientQuotasRequest,
        error_code: i16,
    ) -> AlterClientQuotasResponse {
        let entries = request
            .entries
            .iter()
            .map(|entry| {
                EntryData::default()
                    .with_error_code(error_code)
                    .with_error_message(None)
                    .with_entity(response_entity(entry))
            })
            .collect();
        AlterClientQuotasResponse::default().with_entries(entries)
    }
}

/// Validates every entry, then (unless `validate_only`, and within Kafka's
/// record cap) applies the valid ones; one answer per entry.
fn alter_all(request: &AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let allowed = cluster_allowed(Operation::AlterConfigs);
    let entities: Vec<Vec<EntityPart>> = request.entries.iter().map(entity_of).collect();
    let keys: Vec<EntityKey> = entities.iter().map(|e| entity_key(e)).collect();
    let mut mentions: HashMap<&EntityKey, usize> = HashMap::new();
    for key in &keys {
        *mentions.entry(key).or_default() += 1;
    }
    // Validate every entry first: Kafka's controller writes a record
    // per op of the valid entries, at most MAX_RECORDS_PER_USER_OP for
    // the request, and refuses the whole request over that.
    let mut records = 0usize;
    let mut results: Vec<Result<(), KafkaError>> = Vec::new();
    for ((entry, entity), key) in request.entries.iter().zip(&entities).zip(&keys) {
        let result = if !allowed {
            let error = ResponseError::ClusterAuthorizationFailed;
            Err(KafkaError {
                code: error.code(),
                message: Some(error.to_string()),
            })
        } else if mentions.get(key).copied().unwrap_or(0) > 1 {
            Err(KafkaError {
                code: ResponseError::InvalidRequest.code(),
                message: Some(format!("Ignoring duplicate entity {}", describe(entity))),
            })
        } else {
            alter(entry, entity, true)
        };
        if result.is_ok() {
            records = records.saturating_add(entry.ops.len());
        }
        results.push(result);
    }
    if records > request_caps::MAX_RECORDS_PER_USER_OP {
        let message = request_caps::POLICY_VIOLATION_MESSAGE;
        for result in &mut results {
            *result = Err(request_caps::policy_violation(message));
        }
    } else if !request.validate_only {
        for ((result, entry), entity) in results.iter_mut().zip(&request.entries).zip(&entities) {
            if result.is_ok() {
                *result = alter(entry, entity, false);
            }
        }
    }
    let mut response = AlterClientQuotasResponse::default();
    for (entry, result) in request.entries.iter().zip(results) {
        let (code, message) = match result {
            Ok(()) => (0, None),
            Err(error) => (error.code, error.message),
        };
        response.entries.push(
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message.as_deref().map(str_bytes))
                .with_entity(response_entity(entry)),
        );
    }
    response
}

/// The entry's entity, as the response echoes it.
fn response_entity(entry: &RequestEntry) -> Vec<EntityData> {
    entry
        .entity
        .iter()
        .map(|part| {
            EntityData::default()
                .with_entity_type(part.entity_type.clone())
                .with_entity_name(part.entity_name.clone())
        })
        .collect()
}

fn entity_of(entry: &RequestEntry) -> Vec<EntityPart> {
    entry
        .entity
        .iter()
        .map(|part| EntityPart {
            entity_type: part.entity_type.to_string(),
            name: part.entity_name.as_ref().map(|n| n.to_string()),
        })
        .collect()
}

/// An entity as a map of type to name: the order of parts does not matter.
type EntityKey = Vec<(String, Option<String>)>;

fn entity_key(parts: &[EntityPart]) -> EntityKey {
    let mut key: EntityKey = parts
        .iter()
        .map(|p| (p.entity_type.clone(), p.name.clone()))
        .collect();
    key.sort();
    key
}

/// Kafka's ClientQuotaEntity text: `ClientQuotaEntity(entries={user=alice})`.
fn describe(entity: &[EntityPart]) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|p| format!("{}={}", p.entity_type, p.name.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

fn alter(
    entry: &RequestEntry,
    entity: &[EntityPart],
    validate_only: bool,
) -> Result<(), KafkaError> {
    let ops: Vec<QuotaOp> = entry
        .ops
        .iter()
        .map(|op| QuotaOp {
            key: op.key.to_string(),
            value: op.value,
            remove: op.remove,
        })
        .collect();
    quotas::alter(entity, &ops, validate_only)
}

gregor_sdk::export_handler!(AlterClientQuotas);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn part(t: &str, n: Option<&str>) -> EntityPart {
        EntityPart {
            entity_type: t.into(),
            name: n.map(str::to_string),
        }
    }

    #[test]
    fn entities_compare_as_maps() {
        let a = [part("user", Some("u")), part("client-id", None)];
        let b = [part("client-id", None), part("user", Some("u"))];
        assert_eq!(entity_key(&a), entity_key(&b));
        assert_ne!(entity_key(&a), entity_key(&[part("user", Some("u"))]));
        assert_eq!(
            describe(&[part("user", None)]),
            "ClientQuotaEntity(entries={user=null})"
        );
    }

    #[test]
    fn encodes_for_every_served_version() {
        use gregor_sdk::kafka_protocol::messages::alter_client_quotas_request::EntityData as RequestEntity;
        let entry = |name: Option<&str>| {
            RequestEntry::default().with_entity(vec![RequestEntity::default()
                .with_entity_type(str_bytes("user"))
                .with_entity_name(name.map(str_bytes))])
        };
        let request = AlterClientQuotasRequest::default()
            .with_entries(vec![entry(Some("alice")), entry(None)]);
        let answer = EntryData::default().with_error_code(42).with_entity(vec![
            EntityData::default().with_entity_type(str_bytes("user")),
        ]);
        assert_encodes_for_served_versions::<AlterClientQuotas>(
            &[request],
            &[AlterClientQuotasResponse::default().with_entries(vec![answer])],
        );
    }
}
