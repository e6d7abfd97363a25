//! Per-record errors of a refused batch (KIP-467): the host names each
//! record it refused for its own content (a keyless record on a compacted
//! topic) so the response can carry them in `record_errors` (v8+) and the
//! producer fails exactly those records, the rest of the batch as "a
//! different record". Until the WIT's `append-result` has a field for
//! them they come in its error message: Kafka's message for the batch on
//! the first line, then one line per record,
//! `record-error <batch index>: <message>`.

use gregor_sdk::kafka_protocol::messages::produce_response::BatchIndexAndErrorMessage;
use gregor_sdk::kafka_protocol::protocol::StrBytes;

const PREFIX: &str = "record-error ";

/// The batch's message and its record errors, if `message` carries any;
/// otherwise the message is only a message.
pub fn split(message: &str) -> Option<(String, Vec<BatchIndexAndErrorMessage>)> {
    let mut lines = message.split('\n');
    let summary = lines.next()?;
    let errors = lines
        .map(|line| {
            let (index, text) = line.strip_prefix(PREFIX)?.split_once(": ")?;
            Some(
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(index.parse().ok()?)
                    .with_batch_index_error_message(Some(StrBytes::from_string(text.to_string()))),
            )
        })
        .collect::<Option<Vec<_>>>()?;
    (!errors.is_empty()).then(|| (summary.to_string(), errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_host_lines_and_leaves_other_messages() {
        let (summary, errors) =
            split("One or more records\nrecord-error 1: no key\nrecord-error 3: no key").unwrap();
        assert_eq!(summary, "One or more records");
        let indices: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indices, [1, 3]);
        assert_eq!(
            errors[0].batch_index_error_message.as_deref(),
            Some("no key")
        );
        assert!(split("invalid record: bad offsets").is_none());
        assert!(split("a\nsomething else").is_none());
        assert!(split("a\nrecord-error x: y").is_none());
        assert!(split("").is_none());
    }
}
