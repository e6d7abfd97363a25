//! Field-by-field comparison of two responses to the same request, the
//! serving version's and a shadow's. The host keeps no schema of its own
//! for handler bodies, so both are decoded with kafka-protocol's response
//! types for the request's ApiKey and version, and each is flattened into
//! leaf fields named by their path (`responses[0].partition_responses[0].
//! error_code`) from the decoded message's structure (its pretty `Debug`
//! form, which names every field of every nested message and list).
//! Bodies that do not decode (a custom ApiKey, a version the codec lacks)
//! are compared as bytes, under the field name `<body>`.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseKind};

/// One field whose value differs (None: absent on that side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub field: String,
    pub serving: Option<String>,
    pub shadow: Option<String>,
}

impl Difference {
    /// The field with list indexes dropped (`responses[].error_code`): what
    /// metrics count differences under, so their labels stay few.
    pub fn family(&self) -> String {
        let mut family = String::with_capacity(self.field.len());
        let mut in_index = false;
        for c in self.field.chars() {
            match c {
                '[' => {
                    in_index = true;
                    family.push('[');
                }
                ']' => {
                    in_index = false;
                    family.push(']');
                }
                _ if in_index => {}
                c => family.push(c),
            }
        }
        family
    }
}

/// The differing fields of two response bodies for `api_key` at
/// `version`, leaving out fields whose last segment is in `ignored`.
pub fn differences(
    api_key: i16,
    version: i16,
    serving: &[u8],
    shadow: &[u8],
    ignored: &[String],
) -> Vec<Difference> {
    let (Some(serving_fields), Some(shadow_fields)) = (
        fields(api_key, version, serving),
        fields(api_key, version, shadow),
    ) else {
        return if serving == shadow {
            Vec::new()
        } else {
            vec![Difference {
                field: "<body>".to_string(),
                serving: Some(format!("{} bytes", serving.len())),
                shadow: Some(format!("{} bytes", shadow.len())),
            }]
        };
    };
    let kept = |field: &String| {
        let last = field.rsplit('.').next().unwrap_or(field);
        !ignored.iter().any(|name| name == last)
    };
    let mut out = Vec::new();
    for (field, value) in &serving_fields {
        if !kept(field) {
            continue;
        }
        let other = shadow_fields.get(field);
        if other != Some(value) {
            out.push(Difference {
                field: field.clone(),
                serving: Some(value.clone()),
                shadow: other.cloned(),
            });
        }
    }
    for (field, value) in &shadow_fields {
        if kept(field) && !serving_fields.contains_key(field) {
            out.push(Difference {
                field: field.clone(),
                serving: None,
                shadow: Some(value.clone()),
            });
        }
    }
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

/// A response body's leaf fields by path, if it decodes as a whole.
pub fn fields(api_key: i16, version: i16, body: &[u8]) -> Option<BTreeMap<String, String>> {
    let key = ApiKey::try_from(api_key).ok()?;
    let mut bytes = Bytes::copy_from_slice(body);
    let decoded = ResponseKind::decode(key, &mut bytes, version).ok()?;
    if !bytes.is_empty() {
        return None;
    }
    Some(flatten(&format!("{decoded:#?}")))
}

/// What encloses the current line of a pretty `Debug` form.
enum Frame {
    /// A struct: its fields are named.
    Struct(String),
    /// A list: its elements are numbered.
    List(String, usize),
    /// A tuple struct or `Some(..)`: its one value stands for it.
    Tuple(String),
}

/// The leaf values of a pretty `Debug` form by field path.
fn flatten(debug: &str) -> BTreeMap<String, String> {
    let mut leaves = BTreeMap::new();
    let mut frames: Vec<Frame> = vec![Frame::Tuple(String::new())];
    for line in debug.lines() {
        let line = line.trim();
        let value = line.strip_suffix(',').unwrap_or(line);
        if matches!(value, "}" | "]" | ")") {
            if frames.len() > 1 {
                frames.pop();
            }
            continue;
        }
        let Some(frame) = frames.last_mut() else {
            break;
        };
        let (path, value) = match frame {
            Frame::List(path, next) => {
                let path = format!("{path}[{next}]");
                *next += 1;
                (path, value)
            }
            Frame::Tuple(path) => (path.clone(), value),
            Frame::Struct(path) => match split_field(value) {
                Some((name, rest)) if path.is_empty() => (name.to_string(), rest),
                Some((name, rest)) => (format!("{path}.{name}"), rest),
                None => (path.clone(), value),
            },
        };
        if value.ends_with('{') {
            frames.push(Frame::Struct(path));
        } else if value.ends_with('[') {
            frames.push(Frame::List(path, 0));
        } else if value.ends_with('(') {
            frames.push(Frame::Tuple(path));
        } else {
            leaves.insert(path, value.to_string());
        }
    }
    leaves
}

/// `name: rest` when the line starts with a field name.
fn split_field(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = line.split_once(": ")?;
    let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    is_name.then_some((name, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{ProduceResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn produce_response(error_code: i16, base_offset: i64) -> Vec<u8> {
        let mut partition = PartitionProduceResponse::default();
        partition.index = 1;
        partition.error_code = error_code;
        partition.base_offset = base_offset;
        let mut topic = TopicProduceResponse::default();
        topic.name = TopicName(StrBytes::from_static_str("orders"));
        topic.partition_responses.push(partition);
        let mut response = ProduceResponse::default();
        response.responses.push(topic);
        let mut out = BytesMut::new();
        response.encode(&mut out, 9).expect("encodes");
        out.to_vec()
    }

    #[test]
    fn a_changed_error_code_is_named_by_its_path() {
        let serving = produce_response(0, 10);
        let shadow = produce_response(19, 11);
        let ignored = vec!["base_offset".to_string()];
        let found = differences(0, 9, &serving, &shadow, &ignored);
        assert_eq!(
            found,
            vec![Difference {
                field: "responses[0].partition_responses[0].error_code".to_string(),
                serving: Some("0".to_string()),
                shadow: Some("19".to_string()),
            }]
        );
        assert_eq!(
            found[0].family(),
            "responses[].partition_responses[].error_code"
        );
        assert!(differences(0, 9, &serving, &produce_response(0, 12), &ignored).is_empty());
        assert_eq!(
            differences(0, 9, &serving, &produce_response(0, 12), &[]).len(),
            1
        );
    }

    #[test]
    fn names_are_leaves_too() {
        let fields = fields(0, 9, &produce_response(0, 1)).expect("decodes");
        assert_eq!(
            fields.get("responses[0].name").map(String::as_str),
            Some("\"orders\"")
        );
    }

    #[test]
    fn undecodable_bodies_compare_as_bytes() {
        assert!(differences(1099, 0, b"abc", b"abc", &[]).is_empty());
        let found = differences(1099, 0, b"abc", b"abd", &[]);
        assert_eq!(found[0].field, "<body>");
    }
}
