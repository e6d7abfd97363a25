//! JsonValidator: an interceptor in front of Produce that refuses records
//! whose value is not valid JSON on the topics named by the broker config
//! `json.validator.topics` (comma-separated names, a trailing `*` matches
//! a prefix: `orders,events.*`; the module must be granted
//! `metadata.read` to read it).
//!
//! As Kafka does when a record fails broker-side validation (KIP-467), a
//! partition with any such record is refused as a whole with
//! INVALID_RECORD (87), an error message and one `record_errors` entry per
//! bad record (its index in the batch); the other partitions of the
//! request are appended by the standard handler. The hooks keep no state:
//! `on-request` strips the refused partitions from the request (or
//! answers it, when nothing is left), `on-response` finds them again in
//! the request it is handed and adds their answers (only when the
//! handler's answer lacks a partition of the request: otherwise nothing
//! was refused and the records are not read twice). Null values
//! (tombstones) pass; a batch that cannot be read here (compressed, or
//! malformed) is refused too, since it cannot be shown to be JSON.

use bytes::Bytes;
use gregor_intercept::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use gregor_intercept::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use gregor_intercept::kafka_protocol::protocol::StrBytes;
use gregor_intercept::kafka_protocol::records::RecordBatchDecoder;
use gregor_intercept::kafka_protocol::ResponseError;
use gregor_intercept::{
    decode_request, decode_response, encode, metadata, refuse_unreadable, rewrite_response, types,
    Interceptor, RequestContext, Verdict,
};

struct JsonValidator;

/// The config naming the validated topics.
const TOPICS_CONFIG: &str = "json.validator.topics";

/// A refused partition: where, and why.
struct Refusal {
    topic: usize,
    partition: i32,
    message: String,
    records: Vec<BatchIndexAndErrorMessage>,
}

impl Interceptor for JsonValidator {
    const NAME: &'static str = "json-validator";
    const API_KEYS: &'static [i16] = &[0];

    fn on_request(ctx: &RequestContext, body: Vec<u8>) -> Verdict {
        let mut request: ProduceRequest = match decode_request(ctx, &body) {
            Ok(request) => request,
            Err(error) => return refuse_unreadable(ctx, &error.to_string()),
        };
        let refusals = refusals(&request);
        if refusals.is_empty() {
            return Verdict::Continue(body);
        }
        // acks=0 wants no answer, refused partitions included (Kafka drops
        // them as it drops any failed acks=0 write).
        for (index, topic) in request.topic_data.iter_mut().enumerate() {
            topic.partition_data.retain(|partition| {
                !refusals
                    .iter()
                    .any(|r| r.topic == index && r.partition == partition.index)
            });
        }
        request
            .topic_data
            .retain(|topic| !topic.partition_data.is_empty());
        if !request.topic_data.is_empty() {
            return match encode(ctx, &request) {
                Ok(body) => Verdict::Continue(body),
                Err(why) => refuse_unreadable(ctx, &why),
            };
        }
        if request.acks == 0 {
            // Nothing left to append and nobody to answer: an empty
            // request lets the handler answer nothing.
            return match encode(ctx, &request) {
                Ok(body) => Verdict::Continue(body),
                Err(why) => refuse_unreadable(ctx, &why),
            };
        }
        let original: ProduceRequest = match decode_request(ctx, &body) {
            Ok(request) => request,
            Err(error) => return refuse_unreadable(ctx, &error.to_string()),
        };
        let mut response = ProduceResponse::default();
        add_refusals(&mut response, &original, refusals);
        match encode(ctx, &response) {
            Ok(body) => Verdict::Reply(body),
            Err(why) => refuse_unreadable(ctx, &why),
        }
    }

    fn on_response(
        ctx: &RequestContext,
        request: Vec<u8>,
        response: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        let request: ProduceRequest = decode_request(ctx, &request).map_err(|e| e.to_string())?;
        // Refused partitions never reach the handler: an answer for every
        // partition asked means none was refused, and the records need
        // not be read again.
        let answered: ProduceResponse =
            decode_response(ctx, &response).map_err(|e| e.to_string())?;
        if answers_all(&answered, &request) {
            return Ok(response);
        }
        let refusals = refusals(&request);
        if refusals.is_empty() {
            return Ok(response);
        }
        rewrite_response(ctx, &response, |answer: &mut ProduceResponse| {
            add_refusals(answer, &request, refusals)
        })
    }
}

/// Whether `response` answers every partition of `request`.
fn answers_all(response: &ProduceResponse, request: &ProduceRequest) -> bool {
    request.topic_data.iter().all(|topic| {
        response
            .responses
            .iter()
            .find(|t| t.name == topic.name && t.topic_id == topic.topic_id)
            .is_some_and(|answer| {
                topic.partition_data.iter().all(|partition| {
                    answer
                        .partition_responses
                        .iter()
                        .any(|p| p.index == partition.index)
                })
            })
    })
}

/// Adds an INVALID_RECORD answer for each refused partition, under its
/// topic's entry (made if the handler answered none for it).
fn add_refusals(response: &mut ProduceResponse, request: &ProduceRequest, refusals: Vec<Refusal>) {
    for refusal in refusals {
        let Some(topic) = request.topic_data.get(refusal.topic) else {
            continue;
        };
        let position = response
            .responses
            .iter()
            .position(|t| t.name == topic.name && t.topic_id == topic.topic_id);
        let entry = match position {
            Some(position) => &mut response.responses[position],
            None => {
                let mut entry = TopicProduceResponse::default();
                entry.name = topic.name.clone();
                entry.topic_id = topic.topic_id;
                response.responses.push(entry);
                let last = response.responses.len() - 1;
                &mut response.responses[last]
            }
        };
        let mut partition = PartitionProduceResponse::default();
        partition.index = refusal.partition;
        partition.error_code = ResponseError::InvalidRecord.code();
        partition.base_offset = -1;
        partition.log_append_time_ms = -1;
        partition.log_start_offset = -1;
        partition.error_message = Some(StrBytes::from_string(refusal.message));
        partition.record_errors = refusal.records;
        entry.partition_responses.push(partition);
    }
}

/// The partitions of validated topics holding a record that is not JSON.
fn refusals(request: &ProduceRequest) -> Vec<Refusal> {
    let patterns = metadata::broker_config(TOPICS_CONFIG).unwrap_or_default();
    if patterns.trim().is_empty() {
        return Vec::new();
    }
    let mut refusals = Vec::new();
    for (index, topic) in request.topic_data.iter().enumerate() {
        let name = topic_name(topic);
        if !matches(&patterns, &name) {
            continue;
        }
        for partition in &topic.partition_data {
            let records = partition.records.clone().unwrap_or_default();
            match check(records) {
                Ok(bad) if bad.is_empty() => {}
                Ok(bad) => refusals.push(Refusal {
                    topic: index,
                    partition: partition.index,
                    message: format!(
                        "{} record(s) of the batch are not valid JSON (topic {name} takes JSON values only)",
                        bad.len()
                    ),
                    records: bad,
                }),
                Err(why) => refusals.push(Refusal {
                    topic: index,
                    partition: partition.index,
                    message: format!("the batch cannot be validated as JSON: {why}"),
                    records: Vec::new(),
                }),
            }
        }
    }
    refusals
}

/// The topic's name, looked up by id for requests that name topics by id.
fn topic_name(
    topic: &gregor_intercept::kafka_protocol::messages::produce_request::TopicProduceData,
) -> String {
    if !topic.name.0.is_empty() || topic.topic_id.is_nil() {
        return topic.name.0.to_string();
    }
    let (high, low) = topic.topic_id.as_u64_pair();
    metadata::topic_by_id(types::Uuid { high, low })
        .map(|topic| topic.name)
        .unwrap_or_default()
}

/// Whether `name` is one of the comma-separated `patterns` (`prefix*`
/// matches a prefix).
fn matches(patterns: &str, name: &str) -> bool {
    patterns
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        })
}

/// The records (by index in the partition's batches) whose value is not
/// JSON; an error when the batches cannot be read.
fn check(records: Bytes) -> Result<Vec<BatchIndexAndErrorMessage>, String> {
    let mut buf = records;
    let batches = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| e.to_string())?;
    let mut bad = Vec::new();
    for (index, record) in batches.iter().flat_map(|b| &b.records).enumerate() {
        let Some(value) = &record.value else {
            continue;
        };
        if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(value) {
            let mut entry = BatchIndexAndErrorMessage::default();
            entry.batch_index = i32::try_from(index).unwrap_or(i32::MAX);
            entry.batch_index_error_message =
                Some(StrBytes::from_string(format!("not valid JSON: {error}")));
            bad.push(entry);
        }
    }
    Ok(bad)
}

gregor_intercept::export_interceptor!(JsonValidator);

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_name_topics_or_prefixes() {
        assert!(matches("orders, events.*", "orders"));
        assert!(matches("orders, events.*", "events.eu"));
        assert!(!matches("orders, events.*", "orders2"));
        assert!(!matches("", "orders"));
    }
}
