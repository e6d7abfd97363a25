//! DescribeTopicSummary (ApiKey 1000): an RPC Kafka does not have, added by
//! dropping this module into the plugin directory. In one round trip it
//! answers, per topic: id, partitions, and each partition's log start and
//! end offsets (so the records it holds).
//!
//! ApiKeys 1000 and up are outside Kafka's range (Kafka 4.x ends below
//! 100), so they will not collide with a future Kafka API.
//!
//! Version 0, classic encoding (see `plugins/sdk/src/wire.rs`):
//!
//! ```text
//! Request:  topics: ARRAY(STRING)          -- null (-1) = every topic
//! Response: throttle_time_ms: INT32
//!           topics: ARRAY(
//!             error_code: INT16, name: STRING, topic_id: UUID (16 bytes),
//!             partitions: ARRAY(partition: INT32, error_code: INT16,
//!                               log_start_offset: INT64, log_end_offset: INT64))
//! ```
//!
//! Authorization as Kafka's Metadata: DESCRIBE on each topic; listing every
//! topic leaves out the ones the principal may not describe.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::metadata::{self, TopicInfo};
use gregor_sdk::wire::{custom_api_info, Reader, Writer};
use gregor_sdk::AnswerError;
use gregor_sdk::{log, ApiInfo, Outcome, RawHandler, RequestContext, ResponseError};

pub const API_KEY: i16 = 1000;

struct TopicSummary;

impl RawHandler for TopicSummary {
    fn describe() -> ApiInfo {
        custom_api_info(API_KEY, "DescribeTopicSummary", 0, 0)
    }

    fn handle(_ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let Ok(requested) = read_request(&body) else {
            gregor_sdk::log_warn("malformed DescribeTopicSummary request");
            return Outcome::CloseConnection;
        };
        let mut out = Writer::new();
        out.i32(0); // throttle_time_ms
        match requested {
            None => {
                let topics = metadata::list_topics();
                let allowed = allowed_names(
                    Operation::Describe,
                    ResourceType::Topic,
                    topics.iter().map(|t| t.name.as_str()),
                );
                let visible: Vec<&TopicInfo> = topics
                    .iter()
                    .filter(|t| allowed.contains(&t.name))
                    .collect();
                out.array_len(visible.len());
                for topic in visible {
                    write_topic(&mut out, topic);
                }
            }
            Some(names) => {
                let allowed = allowed_names(
                    Operation::Describe,
                    ResourceType::Topic,
                    names.iter().map(String::as_str),
                );
                out.array_len(names.len());
                for name in &names {
                    if !allowed.contains(name) {
                        write_error(
                            &mut out,
                            name,
                            ResponseError::TopicAuthorizationFailed.code(),
                        );
                        continue;
                    }
                    match metadata::topic_by_name(name) {
                        Some(topic) => write_topic(&mut out, &topic),
                        None => write_error(
                            &mut out,
                            name,
                            ResponseError::UnknownTopicOrPartition.code(),
                        ),
                    }
                }
            }
        }
        Outcome::Respond(out.finish())
    }
}

/// The requested topic names; None asks for every topic.
fn read_request(body: &[u8]) -> Result<Option<Vec<String>>, gregor_sdk::wire::Malformed> {
    let mut reader = Reader::new(body);
    let Some(count) = reader.array_len()? else {
        return Ok(None);
    };
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        names.push(reader.string()?.unwrap_or_default());
    }
    Ok(Some(names))
}

fn write_error(out: &mut Writer, name: &str, code: i16) {
    out.i16(code).string(name).bytes(&[0; 16]).array_len(0);
}

fn write_topic(out: &mut Writer, topic: &TopicInfo) {
    out.i16(0).string(&topic.name);
    out.bytes(&topic.topic_id.high.to_be_bytes())
        .bytes(&topic.topic_id.low.to_be_bytes());
    out.array_len(topic.partitions.len());
    for partition in &topic.partitions {
        let start = log::list_offset(&topic.name, partition.partition, -2, 0);
        let end = log::list_offset(&topic.name, partition.partition, -1, 0);
        let error = if start.error.error_code() != 0 {
            start.error.error_code()
        } else {
            end.error.error_code()
        };
        out.i32(partition.partition)
            .i16(error)
            .i64(start.offset)
            .i64(end.offset);
    }
}

gregor_sdk::export_raw_handler!(TopicSummary);

#[cfg(test)]
mod tests {
    use super::read_request;

    #[test]
    fn requests_parse() {
        assert_eq!(read_request(&[0xff, 0xff, 0xff, 0xff]), Ok(None));
        assert_eq!(
            read_request(&[0, 0, 0, 1, 0, 1, b'a']),
            Ok(Some(vec!["a".to_string()]))
        );
        assert!(read_request(&[0, 0, 0, 9]).is_err());
    }
}
