//! CreatePartitions (ApiKey 37): add partitions to existing topics, as
//! Kafka's `KafkaApis.handleCreatePartitionsRequest` with the KRaft
//! controller's `createPartitions`.
//!
//! - Versions 0-3. A topic named twice gets INVALID_REQUEST ("Duplicate
//!   topic in request."); a topic without ALTER gets
//!   TOPIC_AUTHORIZATION_FAILED.
//! - The host checks the new count (INVALID_PARTITIONS unless it is an
//!   increase) and manual assignments (one per new partition, naming
//!   registered brokers; INVALID_REPLICA_ASSIGNMENT), and with
//!   `validate_only` changes nothing.
//! - Kafka's controller writes at most 10000 records for one request (a
//!   record per new partition): a topic whose new partitions would not fit
//!   in what the request has left gets POLICY_VIOLATION ("Unable to
//!   perform excessively large batch operation."), `validate_only` too;
//!   the host refuses such a count before placing or describing anything.
//!   (Kafka's controller answers that topic UNKNOWN_SERVER_ERROR, from the
//!   overflow of its bounded record list, after placing every partition.)
//! - The controller mutation quota (`controller_mutation_rate`, KIP-599)
//!   counts the new partitions (not with `validate_only`): from v3 a client
//!   whose quota is already exceeded gets THROTTLING_QUOTA_EXCEEDED for the
//!   topic, and a topic accepted is not throttled (strict); older versions
//!   are always accepted and throttled once over the quota. The response's
//!   throttle time is the larger of that and the request quota's.
//! - New partitions are writable at once; producers see them at their next
//!   metadata refresh.
//! - Error response (a trap or timeout): every topic with the error, as
//!   Kafka's `CreatePartitionsRequest.getErrorResponse`.

use gregor_sdk::AnswerError;
use std::collections::HashMap;

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use gregor_sdk::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use gregor_sdk::kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use gregor_sdk::request_caps;
use gregor_sdk::{metadata, quotas, Handler, KafkaError, Reply, RequestContext, ResponseError};

/// The first version whose mutation quota is strict (KIP-599).
const STRICT_SINCE_VERSION: i16 = 3;

/// Kafka's message for THROTTLING_QUOTA_EXCEEDED (`Errors.THROTTLING_QUOTA_EXCEEDED.message()`).
const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

struct CreatePartitions;

impl Handler for CreatePartitions {
    gregor_sdk::api!(CreatePartitionsRequest, 0..=3);

    fn handle(
        ctx: &RequestContext,
        request: &CreatePartitionsRequest,
    ) -> Reply<CreatePartitionsResponse> {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for topic in &request.topics {
            *count.entry(topic.name.as_str()).or_default() += 1;
        }
        let names = request.topics.iter().map(|t| t.name.as_str());
        let allowed = allowed_names(Operation::Alter, ResourceType::Topic, names);
        let strict = ctx.api_version >= STRICT_SINCE_VERSION;
        let mut mutation_throttle = 0;
        let mut budget = request_caps::MAX_RECORDS_PER_USER_OP;
        let mut response = CreatePartitionsResponse::default();
        for topic in &request.topics {
            let name = topic.name.as_str();
            // Each duplicated name is answered once.
            let outcome = match count.get(name).copied().unwrap_or(0) {
                0 => continue,
                1 if !allowed.contains(name) => Err(KafkaError {
                    code: ResponseError::TopicAuthorizationFailed.code(),
                    message: Some("The topic authorization is failed.".into()),
                }),
                1 => create(
                    topic,
                    request.validate_only,
                    strict,
                    &mut mutation_throttle,
                    &mut budget,
                ),
                _ => Err(KafkaError {
                    code: ResponseError::InvalidRequest.code(),
                    message: Some("Duplicate topic in request.".into()),
                }),
            };
            count.insert(name, 0);
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err(error) => (error.code, error.message),
            };
            response
                .results
                .push(result(topic, code, message.as_deref()));
        }
        // The SDK raises it to the request quota's.
        response.throttle_time_ms = mutation_throttle;
        response.into()
    }

    /// Kafka's `getErrorResponse`: every topic (as named, duplicates too)
    /// with the error.
    fn failed(
        _: &RequestContext,
        request: &CreatePartitionsRequest,
        error_code: i16,
    ) -> CreatePartitionsResponse {
        let results = request
            .topics
            .iter()
            .map(|topic| result(topic, error_code, None))
            .collect();
        CreatePartitionsResponse::default().with_results(results)
    }
}

fn result(
    topic: &CreatePartitionsTopic,
    error_code: i16,
    message: Option<&str>,
) -> CreatePartitionsTopicResult {
    CreatePartitionsTopicResult::default()
        .with_name(topic.name.clone())
        .with_error_code(error_code)
        .with_error_message(message.map(str_bytes))
}

/// Validates, bounds the request's new partitions, charges the mutation
/// quota, then creates. `budget` is how many more partitions the request
/// may still add.
fn create(
    topic: &CreatePartitionsTopic,
    validate_only: bool,
    strict: bool,
    mutation_throttle: &mut i32,
    budget: &mut usize,
) -> Result<(), KafkaError> {
    let name = topic.name.as_str();
    let assignments: Option<Vec<Vec<i32>>> = topic.assignments.as_ref().map(|assignments| {
        assignments
            .iter()
            .map(|a| a.broker_ids.iter().map(|id| id.0).collect())
            .collect()
    });
    let before = metadata::topic_by_name(name).map_or(0, |t| t.partitions.len());
    metadata::create_partitions(name, topic.count, assignments.as_deref(), true)?;
    let added = usize::try_from(topic.count)
        .unwrap_or(0)
        .saturating_sub(before);
    // One record per new partition, for the request as a whole.
    if added > *budget {
        return Err(request_caps::policy_violation(
            request_caps::TOO_MANY_RECORDS,
        ));
    }
    if validate_only {
        *budget -= added;
        return Ok(());
    }
    let answer = quotas::record_mutations(u32::try_from(added).unwrap_or(u32::MAX), strict);
    *mutation_throttle = (*mutation_throttle).max(answer.throttle_time_ms);
    if answer.error.error_code() != 0 {
        return Err(KafkaError {
            code: answer.error.error_code(),
            message: Some(THROTTLED_MESSAGE.into()),
        });
    }
    *budget -= added;
    metadata::create_partitions(name, topic.count, assignments.as_deref(), false).map(|_| ())
}

gregor_sdk::export_handler!(CreatePartitions);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    #[test]
    fn encodes_for_every_served_version() {
        let topic = |name: &str| {
            CreatePartitionsTopic::default()
                .with_name(str_bytes(name).into())
                .with_count(3)
        };
        let request = CreatePartitionsRequest::default().with_topics(vec![topic("a"), topic("b")]);
        let response = CreatePartitionsResponse::default()
            .with_results(vec![result(
                &topic("t"),
                37,
                Some("Topic already has 1 partition(s)."),
            )])
            .with_throttle_time_ms(5);
        assert_encodes_for_served_versions::<CreatePartitions>(&[request], &[response]);
    }
}
