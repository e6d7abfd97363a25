//! Produce (ApiKey 0): append record batches to partition logs, as Kafka's
//! `KafkaApis.handleProduceRequest`.
//!
//! - Versions 0-13. v0-2 (Kafka 4 removed them) carry message sets of the
//!   old formats (magic v0/v1) and are served as Kafka 3.9 did ([`v0_2`]):
//!   the host up-converts them to a v2 batch when it appends; they are not
//!   held to v3's one-v2-batch rule (Kafka never checked old versions).
//! - A transactional producer needs WRITE on its TransactionalId. Without it
//!   every partition fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
//!   nothing is appended. Transactional batches without a transactional id
//!   fail the same way.
//! - WRITE on each Topic, asked once for the whole request. v13 names topics
//!   by id (KIP-516); an unknown id is UNKNOWN_TOPIC_ID.
//! - Each partition carries exactly one magic-v2 batch (see [`records`]) and
//!   acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS); the host's
//!   `log.append-within` validates the batch, assigns offsets and waits for
//!   `acks` up to the request's `timeout_ms` (acks=all in a cluster: the
//!   in-sync replicas; NOT_ENOUGH_REPLICAS below `min.insync.replicas`).
//!   Failures are per partition: the others are still appended. A batch
//!   refused for some of its records (keyless records on a compacted
//!   topic) is INVALID_RECORD with those records' batch indices and
//!   messages in `record_errors` (v8+, KIP-467), as Kafka answers.
//! - The records are not copied through the module (issue 17): the host
//!   keeps a v3+ request's records; the module reads their batch headers
//!   and appends them by handle ([`gregor_sdk::produce_records`]).
//! - acks=0 gets no response, except that Kafka closes the connection when a
//!   partition failed, so the producer notices and refreshes its metadata.
//! - Client quotas (KIP-219): the request's size counts against the
//!   producer byte rate and its handler time against the request quota
//!   (not for acks=0); the response carries the larger throttle time and
//!   the host mutes the connection that long, also for acks=0.

mod records;
mod v0_2;

use gregor_sdk::authorize::{allowed_names, is_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::ids::topic_name_by_id;
use gregor_sdk::kafka_protocol::messages::produce_request::PartitionProduceData;
use gregor_sdk::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use gregor_sdk::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::log::{self, AppendResult};
use gregor_sdk::partitions::{self, TopicAnswer};
use gregor_sdk::produce_records::ProduceRecords;
use gregor_sdk::quotas;
use gregor_sdk::AnswerError;
use gregor_sdk::KafkaError;
use gregor_sdk::{log_info, Handler, Reply, RequestContext, ResponseError, NONE};

/// The first version whose records must be one magic-v2 batch.
const FIRST_V2_VERSION: i16 = 3;

struct Produce;

impl Handler for Produce {
    gregor_sdk::api!(ProduceRequest, 0..=13);

    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(v0_2::LEGACY);

    fn handle(ctx: &RequestContext, request: &ProduceRequest) -> Reply<ProduceResponse> {
        let version = ctx.api_version;
        let names: Vec<Option<String>> = request
            .topic_data
            .iter()
            .map(|topic| match version {
                13.. => topic_name_by_id(topic.topic_id),
                _ => Some(topic.name.to_string()),
            })
            .collect();
        // Each partition's records: held by the host (by reference), or
        // in the body (v0-2).
        let records: Vec<Vec<Option<ProduceRecords>>> = request
            .topic_data
            .iter()
            .enumerate()
            .map(|(t, topic)| {
                let partitions = topic.partition_data.iter().enumerate();
                partitions
                    .map(|(p, partition)| ProduceRecords::of(t, p, partition.records.as_ref()))
                    .collect()
            })
            .collect();
        // None: the transactional producer is not authorized, and Kafka then
        // fails every partition without asking about topics.
        let authorized_topics = transactional_allowed(request, &records).then(|| {
            let names = names.iter().flatten().map(String::as_str);
            allowed_names(Operation::Write, ResourceType::Topic, names)
        });

        let mut response = ProduceResponse::default();
        let mut failures = Vec::new(); // logged when acks=0 closes the connection
        for ((topic, name), topic_records) in request.topic_data.iter().zip(&names).zip(&records) {
            let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
            for (partition, records) in topic.partition_data.iter().zip(topic_records) {
                let result = match (&authorized_topics, name) {
                    (None, _) => rejected(ResponseError::TransactionalIdAuthorizationFailed, None),
                    (_, None) => rejected(ResponseError::UnknownTopicId, None),
                    (Some(allowed), Some(name)) if !allowed.contains(name) => {
                        rejected(ResponseError::TopicAuthorizationFailed, None)
                    }
                    (_, Some(name)) => append(version, request, name, partition, records),
                };
                if request.acks == 0 && result.error.error_code() != NONE {
                    let topic = name.clone().unwrap_or_else(|| topic.topic_id.to_string());
                    failures.push(format!(
                        "{topic}-{}: error {}",
                        partition.index,
                        result.error.error_code()
                    ));
                }
                partition_responses.push(partition_response(partition.index, result));
            }
            response
                .responses
                .push(TopicProduceResponse::new(topic, partition_responses));
        }

        match request.acks {
            0 if failures.is_empty() => Reply::Withhold(response),
            0 => {
                log_info(&format!(
                    "closing connection after acks=0 produce with errors (client id {:?}, \
                     correlation id {}): {}",
                    ctx.client_id,
                    ctx.correlation_id,
                    failures.join(", ")
                ));
                Reply::WithholdAndClose(response)
            }
            _ => response.into(),
        }
    }

    /// Every partition fails with `error_code`.
    fn failed(_: &RequestContext, request: &ProduceRequest, error_code: i16) -> ProduceResponse {
        ProduceResponse::default()
            .with_responses(partitions::failed(&request.topic_data, error_code))
    }

    /// acks=0 has no response: the connection is closed, as for any
    /// failed acks=0 produce.
    fn answers_failure(_: &RequestContext, request: &ProduceRequest) -> bool {
        request.acks != 0
    }

    /// The request's size against the producer byte rate, then its handler
    /// time against the request quota (not for acks=0); the larger throttle
    /// time is answered, and the host mutes the connection that long.
    fn throttle(_: &RequestContext, request: &ProduceRequest, response: &mut ProduceResponse) {
        let bandwidth_throttle = quotas::record_produce();
        let request_throttle = quotas::record_request(request.acks == 0);
        response.throttle_time_ms = bandwidth_throttle.max(request_throttle);
    }
}

/// Kafka asks for WRITE on the TransactionalId when a partition's first
/// batch is transactional (and fails it when there is no id); we ask
/// whenever the producer names a transactional id.
fn transactional_allowed(
    request: &ProduceRequest,
    records: &[Vec<Option<ProduceRecords>>],
) -> bool {
    match &request.transactional_id {
        Some(id) => is_allowed(Operation::Write, ResourceType::TransactionalId, id),
        None => !records
            .iter()
            .flatten()
            .flatten()
            .filter_map(|records| records::batch_headers(records).next())
            .any(|batch| batch.is_transactional()),
    }
}

/// Checks one authorized partition as Kafka does before `appendRecords`,
/// then appends it.
fn append(
    version: i16,
    request: &ProduceRequest,
    topic: &str,
    partition: &PartitionProduceData,
    records: &Option<ProduceRecords>,
) -> AppendResult {
    if version >= FIRST_V2_VERSION {
        if let Err((error, message)) = records::validate(version, records.as_ref()) {
            return rejected(error, Some(message));
        }
    }
    if !matches!(request.acks, -1..=1) {
        return rejected(ResponseError::InvalidRequiredAcks, None);
    }
    match records {
        Some(records) => {
            records.append_within(topic, partition.index, request.acks, request.timeout_ms)
        }
        // Null records of a v0-2 request: nothing to append, as before.
        None => log::append_within(
            topic,
            partition.index,
            &[],
            request.acks,
            request.timeout_ms,
        ),
    }
}

/// A partition that was not appended, as Kafka's `PartitionResponse(error)`.
fn rejected(error: ResponseError, message: Option<String>) -> AppendResult {
    AppendResult {
        error: Some(KafkaError {
            code: error.code(),
            message,
        }),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        record_errors: Vec::new(),
    }
}

/// The host's answer as Kafka's partition response; its record errors
/// become `record_errors` (sent from v8).
fn partition_response(index: i32, result: AppendResult) -> PartitionProduceResponse {
    let record_errors = result
        .record_errors
        .into_iter()
        .map(|e| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(e.batch_index)
                .with_batch_index_error_message(e.message.map(StrBytes::from_string))
        })
        .collect();
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(result.error.error_code())
        .with_error_message(result.error.error_message().map(StrBytes::from_string))
        .with_record_errors(record_errors)
        .with_base_offset(result.base_offset)
        .with_log_append_time_ms(result.log_append_time_ms)
        .with_log_start_offset(result.log_start_offset)
}

gregor_sdk::export_handler!(Produce);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_for_every_served_version() {
        use gregor_sdk::kafka_protocol::messages::produce_request::TopicProduceData;
        use gregor_sdk::testing::assert_encodes_for_served_versions;
        let appended = AppendResult {
            error: None,
            base_offset: 7,
            log_append_time_ms: -1,
            log_start_offset: 0,
            record_errors: Vec::new(),
        };
        let failed = rejected(ResponseError::InvalidRecord, Some("bad".to_string()));
        let with_record_errors = with_record_error("One or more records", 0);
        let partitions = vec![
            partition_response(0, appended),
            partition_response(1, failed),
            partition_response(2, with_record_errors),
        ];
        let topic = TopicProduceResponse::default().with_partition_responses(partitions);
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(gregor_sdk::ids::str_bytes("t").into())
                .with_partition_data(
                    vec![PartitionProduceData::default().with_index(2)],
                )]);
        assert_encodes_for_served_versions::<Produce>(
            &[request],
            &[ProduceResponse::default().with_responses(vec![topic])],
        );
    }

    /// INVALID_RECORD naming the record at `index`, as the host answers.
    fn with_record_error(message: &str, index: i32) -> AppendResult {
        let mut result = rejected(ResponseError::InvalidRecord, Some(message.to_string()));
        result.record_errors.push(log::RecordError {
            batch_index: index,
            message: Some("no key".to_string()),
        });
        result
    }

    #[test]
    fn record_errors_from_the_host_become_the_response_field() {
        let response = partition_response(0, with_record_error("One or more records", 2));
        assert_eq!(
            response.error_message.as_deref(),
            Some("One or more records")
        );
        assert_eq!(response.record_errors.len(), 1);
        assert_eq!(response.record_errors[0].batch_index, 2);
        assert_eq!(
            response.record_errors[0]
                .batch_index_error_message
                .as_deref(),
            Some("no key")
        );
        let plain = partition_response(0, rejected(ResponseError::InvalidRecord, Some("x".into())));
        assert_eq!(plain.error_message.as_deref(), Some("x"));
        assert!(plain.record_errors.is_empty());
    }

    #[test]
    fn rejected_partitions_have_no_offsets() {
        let response = partition_response(4, rejected(ResponseError::UnknownTopicId, None));
        assert_eq!(response.index, 4);
        assert_eq!(response.error_code, ResponseError::UnknownTopicId.code());
        assert_eq!((response.base_offset, response.log_start_offset), (-1, -1));
    }
}
