//! DeleteTopics (ApiKey 20): delete topics and their data, as Kafka's
//! `handleDeleteTopics` (the KRaft controller's semantics).
//!
//! - Versions 0-6. Kafka 4 no longer serves v0 (KIP-896), v1's request
//!   answered without a throttle time; Gregor does (see [`v0`]).
//! - Topics are named by name, or from v6 by name or by id (KIP-516).
//! - DELETE on the Cluster allows every topic; otherwise DELETE is asked per
//!   topic. A topic named by name that the principal may not DESCRIBE gets
//!   TOPIC_AUTHORIZATION_FAILED before its existence is looked at; one named
//!   by id keeps its name hidden unless the principal may describe it.
//! - Unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids
//!   UNKNOWN_TOPIC_ID; a name or id given twice, a topic with both or neither
//!   get INVALID_REQUEST.
//! - With `delete.topic.enable=false` every topic gets TOPIC_DELETION_DISABLED
//!   (INVALID_REQUEST before v3).
//! - Results carry the topic's id from v6 and an error message from v5.
//! - The controller mutation quota (`controller_mutation_rate`, KIP-599)
//!   counts the deleted partitions: from v5 a client whose quota is already
//!   exceeded gets THROTTLING_QUOTA_EXCEEDED for the topic, and a topic
//!   deleted is not throttled; older versions are always accepted and
//!   throttled once over the quota. The response carries the larger of
//!   that throttle time and the request quota's.
//! - Error response (a trap or timeout): every topic named with the error,
//!   as Kafka's `DeleteTopicsRequest.getErrorResponse`.

mod v0;

use gregor_sdk::AnswerError;
use std::collections::{HashMap, HashSet};

use gregor_sdk::authorize::{allowed_names, cluster_allowed, Allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::configs::broker_flag;
use gregor_sdk::ids::{from_kafka_uuid, str_bytes, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use gregor_sdk::kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use gregor_sdk::metadata;
use gregor_sdk::quotas;
use gregor_sdk::uuid::Uuid;
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// The first version whose mutation quota is strict (KIP-599).
const STRICT_SINCE_VERSION: i16 = 5;

/// Kafka's message for THROTTLING_QUOTA_EXCEEDED (`Errors.THROTTLING_QUOTA_EXCEEDED.message()`).
const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

struct DeleteTopics;

/// A topic the request names, once its reference has been checked.
enum Target {
    /// Named by name; the topic may or may not exist.
    Name(String),
    /// Named by id, resolved to the topic's current name.
    Id(Uuid, String),
    /// Already answered.
    Done(DeletableTopicResult),
}

impl Handler for DeleteTopics {
    gregor_sdk::api!(DeleteTopicsRequest, 0..=6);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0::LEGACY);

    fn handle(ctx: &RequestContext, request: &DeleteTopicsRequest) -> Reply<DeleteTopicsResponse> {
        let references = references(request, ctx.api_version);
        let strict = ctx.api_version >= STRICT_SINCE_VERSION;
        let mut mutation_throttle = 0;
        let responses = if !broker_flag("delete.topic.enable", true) {
            let error = if ctx.api_version < 3 {
                ResponseError::InvalidRequest
            } else {
                ResponseError::TopicDeletionDisabled
            };
            same_code(&references, error.code())
        } else {
            delete_topics(&references, strict, &mut mutation_throttle)
        };
        // The SDK raises the throttle time to the request quota's.
        DeleteTopicsResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(mutation_throttle)
            .into()
    }

    /// Kafka's `getErrorResponse`: every topic with the error.
    fn failed(
        ctx: &RequestContext,
        request: &DeleteTopicsRequest,
        error_code: i16,
    ) -> DeleteTopicsResponse {
        let references = references(request, ctx.api_version);
        DeleteTopicsResponse::default().with_responses(same_code(&references, error_code))
    }
}

/// The topics the request names, as (name, id): before v6 a list of names;
/// from v6 each has a name or an id.
fn references(request: &DeleteTopicsRequest, version: i16) -> Vec<(Option<&str>, Uuid)> {
    if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_deref().map(|n| n.as_str()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.as_str()), Uuid::nil()))
            .collect()
    }
}

/// Every reference, as named (duplicates too), answered with `error_code`.
fn same_code(references: &[(Option<&str>, Uuid)], error_code: i16) -> Vec<DeletableTopicResult> {
    references
        .iter()
        .map(|(name, id)| result(*name, *id, error_code, None))
        .collect()
}

/// Authorizes and deletes the topics the references name, answering each
/// name or id once.
fn delete_topics(
    references: &[(Option<&str>, Uuid)],
    strict: bool,
    mutation_throttle: &mut i32,
) -> Vec<DeletableTopicResult> {
    let targets = resolve(references, |id| {
        metadata::topic_by_id(from_kafka_uuid(id)).map(|topic| topic.name)
    });
    let names: Vec<&str> = targets
        .iter()
        .filter_map(|target| match target {
            Target::Name(name) | Target::Id(_, name) => Some(name.as_str()),
            Target::Done(_) => None,
        })
        .collect();
    // DELETE on the Cluster covers every topic, as in Kafka's controller.
    let cluster = cluster_allowed(Operation::Delete);
    let ask = |operation| {
        (!cluster).then(|| allowed_names(operation, ResourceType::Topic, names.iter().copied()))
    };
    let (describable, deletable) = (ask(Operation::Describe), ask(Operation::Delete));
    let allowed = |names: &Option<Allowed>, name: &str| {
        names.as_ref().is_none_or(|names| names.contains(name))
    };
    let ids_named: HashSet<Uuid> = targets
        .iter()
        .filter_map(|target| match target {
            Target::Id(id, name) if allowed(&deletable, name) => Some(*id),
            _ => None,
        })
        .collect();

    let mut results = Vec::with_capacity(targets.len());
    for target in targets {
        results.push(match target {
            Target::Done(result) => result,
            Target::Id(id, name) if !allowed(&deletable, &name) => {
                denied(allowed(&describable, &name).then_some(name.as_str()), id)
            }
            Target::Id(id, name) => delete(&name, id, strict, mutation_throttle),
            Target::Name(name) if !allowed(&describable, &name) => denied(Some(&name), Uuid::nil()),
            Target::Name(name) => match metadata::topic_by_name(&name) {
                None => result(
                    Some(&name),
                    Uuid::nil(),
                    ResponseError::UnknownTopicOrPartition.code(),
                    Some("This server does not host this topic-partition."),
                ),
                Some(_) if !allowed(&deletable, &name) => denied(Some(&name), Uuid::nil()),
                Some(topic) if ids_named.contains(&to_kafka_uuid(topic.topic_id)) => result(
                    Some(&name),
                    to_kafka_uuid(topic.topic_id),
                    ResponseError::InvalidRequest.code(),
                    Some("The provided topic name maps to an ID that was already supplied."),
                ),
                Some(_) => delete(&name, Uuid::nil(), strict, mutation_throttle),
            },
        });
    }
    results
}

/// Checks each reference as Kafka's controller does, answering the invalid,
/// duplicate and unknown-id ones; each name or id is answered once.
fn resolve(
    references: &[(Option<&str>, Uuid)],
    name_of: impl Fn(Uuid) -> Option<String>,
) -> Vec<Target> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut ids: HashMap<Uuid, usize> = HashMap::new();
    for (name, id) in references {
        match name {
            Some(name) if id.is_nil() => *names.entry(name).or_default() += 1,
            None if !id.is_nil() => *ids.entry(*id).or_default() += 1,
            _ => {}
        }
    }
    let invalid = ResponseError::InvalidRequest.code();
    let mut targets = Vec::with_capacity(references.len());
    for &(name, id) in references {
        targets.push(match name {
            Some(name) if !id.is_nil() => Target::Done(result(
                Some(name),
                id,
                invalid,
                Some("You may not specify both topic name and topic id."),
            )),
            None if id.is_nil() => Target::Done(result(
                None,
                id,
                invalid,
                Some("Neither topic name nor id were specified."),
            )),
            Some(name) => match names.insert(name, 0) {
                Some(0) | None => continue,
                Some(1) => Target::Name(name.to_string()),
                Some(_) => Target::Done(result(
                    Some(name),
                    id,
                    invalid,
                    Some("Duplicate topic name."),
                )),
            },
            None => match ids.insert(id, 0) {
                Some(0) | None => continue,
                Some(1) => match name_of(id) {
                    Some(name) => Target::Id(id, name),
                    None => Target::Done(result(
                        None,
                        id,
                        ResponseError::UnknownTopicId.code(),
                        Some("This server does not host this topic ID."),
                    )),
                },
                Some(_) => Target::Done(result(None, id, invalid, Some("Duplicate topic id."))),
            },
        });
    }
    targets
}

/// Deletes one topic through the host, charging its partitions to the
/// controller mutation quota first; the result carries the deleted topic's
/// id (on failure, the id the request gave, if any).
fn delete(
    name: &str,
    requested_id: Uuid,
    strict: bool,
    mutation_throttle: &mut i32,
) -> DeletableTopicResult {
    let partitions = metadata::topic_by_name(name).map_or(0, |topic| topic.partitions.len());
    let answer = quotas::record_mutations(u32::try_from(partitions).unwrap_or(u32::MAX), strict);
    *mutation_throttle = (*mutation_throttle).max(answer.throttle_time_ms);
    if answer.error.error_code() != gregor_sdk::NONE {
        return result(
            Some(name),
            requested_id,
            answer.error.error_code(),
            Some(THROTTLED_MESSAGE),
        );
    }
    match metadata::delete_topic(name) {
        Ok(id) => result(Some(name), to_kafka_uuid(id), gregor_sdk::NONE, None),
        Err(error) => result(
            Some(name),
            requested_id,
            error.code,
            error.message.as_deref(),
        ),
    }
}

/// TOPIC_AUTHORIZATION_FAILED, with Kafka's default message.
fn denied(name: Option<&str>, id: Uuid) -> DeletableTopicResult {
    let code = ResponseError::TopicAuthorizationFailed.code();
    result(name, id, code, Some("Topic authorization failed."))
}

fn result(
    name: Option<&str>,
    id: Uuid,
    error_code: i16,
    message: Option<&str>,
) -> DeletableTopicResult {
    DeletableTopicResult::default()
        .with_name(name.map(|name| TopicName(str_bytes(name))))
        .with_topic_id(id)
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

gregor_sdk::export_handler!(DeleteTopics);

#[cfg(test)]
mod tests {
    use super::*;

    /// What each target became: the name or id it stands for, or its error.
    fn outcome(target: &Target) -> String {
        match target {
            Target::Name(name) => format!("name {name}"),
            Target::Id(id, name) => format!("id {} {name}", id.as_u64_pair().1),
            Target::Done(result) => format!("error {}", result.error_code),
        }
    }

    #[test]
    fn references_are_checked_as_kafka_does() {
        let id = |n| Uuid::from_u64_pair(0, n);
        let references = [
            (Some("a"), Uuid::nil()),
            (Some("b"), Uuid::nil()),
            (Some("b"), Uuid::nil()),
            (None, id(1)),
            (None, id(2)),
            (None, id(3)),
            (None, id(3)),
            (Some("c"), id(4)),
            (None, Uuid::nil()),
        ];
        let name_of = |id: Uuid| (id.as_u64_pair().1 == 1).then(|| "one".to_string());
        let outcomes: Vec<String> = resolve(&references, name_of).iter().map(outcome).collect();
        let invalid = format!("error {}", ResponseError::InvalidRequest.code());
        let unknown_id = format!("error {}", ResponseError::UnknownTopicId.code());
        let expected = [
            "name a",
            &invalid, // b twice: one answer
            "id 1 one",
            &unknown_id,
            &invalid, // id 3 twice: one answer
            &invalid, // name and id
            &invalid, // neither
        ];
        assert_eq!(outcomes, expected);
    }

    #[test]
    fn encodes_for_every_served_version() {
        use gregor_sdk::kafka_protocol::messages::delete_topics_request::DeleteTopicState;
        use gregor_sdk::testing::assert_encodes_for_served_versions;
        let id = Uuid::from_u64_pair(0, 7);
        // Names up to v5, names or ids from v6.
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(str_bytes("a")), TopicName(str_bytes("b"))])
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(TopicName(str_bytes("a")))),
                DeleteTopicState::default().with_topic_id(id),
            ]);
        let deleted = result(Some("a"), Uuid::nil(), 0, None);
        assert_encodes_for_served_versions::<DeleteTopics>(
            &[request.clone()],
            &[DeleteTopicsResponse::default().with_responses(vec![deleted])],
        );
        // Each version's failure names the topics as that version does.
        let code = ResponseError::UnknownServerError.code();
        for version in 1..=6 {
            let ctx = gregor_sdk::fake::context::<DeleteTopics>(version);
            let response = DeleteTopics::failed(&ctx, &request, code);
            let shape: Vec<(Option<String>, Uuid)> = response
                .responses
                .iter()
                .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id))
                .collect();
            let second = if version >= 6 {
                (None, id)
            } else {
                (Some("b".to_string()), Uuid::nil())
            };
            let first = (Some("a".to_string()), Uuid::nil());
            assert_eq!(shape, vec![first, second], "v{version}");
        }
    }
}
