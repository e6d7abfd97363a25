//! ProvisionReader (ApiKey 1001): a self-service API Kafka does not have.
//! In one round trip it lets a principal read a topic (an ACL) and notes
//! that on the topic itself (one record on partition 0).
//!
//! It exists to show least privilege (PLUGINS.md, "Grants"): it writes
//! ACLs (`acl-admin.write`) and records (`log.append`), so the broker loads
//! it only when an operator grants it those, e.g.
//! `plugin.grants.provision_reader=authz,acl-admin.write,log.append`.
//!
//! Version 0, classic encoding (see `plugins/sdk/src/wire.rs`):
//!
//! ```text
//! Request:  topic: STRING, principal: STRING      -- e.g. "User:alice"
//! Response: throttle_time_ms: INT32, acl_error_code: INT16,
//!           append_error_code: INT16, base_offset: INT64 (-1 on error)
//! ```
//!
//! Authorization as the APIs it combines: ALTER on the cluster (CreateAcls)
//! for the ACL, WRITE on the topic (Produce) for the record.

use std::time::{SystemTime, UNIX_EPOCH};

use gregor_sdk::acl_admin;
use gregor_sdk::authorize::{cluster_allowed, is_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::bindings::gregor::broker::types::{AclBinding, PatternType, PermissionType};
use gregor_sdk::kafka_protocol::indexmap::IndexMap;
use gregor_sdk::kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use gregor_sdk::wire::{custom_api_info, Reader, Writer};
use gregor_sdk::AnswerError;
use gregor_sdk::{log, ApiInfo, Outcome, RawHandler, RequestContext, ResponseError};

pub const API_KEY: i16 = 1001;

struct ProvisionReader;

impl RawHandler for ProvisionReader {
    fn describe() -> ApiInfo {
        custom_api_info(API_KEY, "ProvisionReader", 0, 0)
    }

    fn handle(_ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let Ok((topic, principal)) = read_request(&body) else {
            gregor_sdk::log_warn("malformed ProvisionReader request");
            return Outcome::CloseConnection;
        };
        let acl_error = if cluster_allowed(Operation::Alter) {
            grant_read(&topic, &principal)
        } else {
            ResponseError::ClusterAuthorizationFailed.code()
        };
        let (append_error, base_offset) =
            if is_allowed(Operation::Write, ResourceType::Topic, &topic) {
                note(&topic, &principal)
            } else {
                (ResponseError::TopicAuthorizationFailed.code(), -1)
            };
        let mut out = Writer::new();
        out.i32(0).i16(acl_error).i16(append_error).i64(base_offset);
        Outcome::Respond(out.finish())
    }
}

/// ALLOW `principal` READ on `topic` from any host.
fn grant_read(topic: &str, principal: &str) -> i16 {
    let binding = AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: topic.to_string(),
        pattern_type: PatternType::Literal,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: Operation::Read,
        permission: PermissionType::Allow,
    };
    acl_admin::create_acls(&[binding])
        .first()
        .map_or(ResponseError::UnknownServerError.code(), |entry| {
            entry.error_code()
        })
}

/// Appends one record saying who may now read the topic: its error code
/// and base offset.
fn note(topic: &str, principal: &str) -> (i16, i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key: None,
        value: Some(bytes::Bytes::from(format!("READ granted to {principal}"))),
        headers: IndexMap::new(),
    };
    let mut batch = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    if RecordBatchEncoder::encode(&mut batch, [&record], &options).is_err() {
        return (ResponseError::UnknownServerError.code(), -1);
    }
    let appended = log::append(topic, 0, &batch, -1);
    (appended.error.error_code(), appended.base_offset)
}

fn read_request(body: &[u8]) -> Result<(String, String), gregor_sdk::wire::Malformed> {
    let mut reader = Reader::new(body);
    let topic = reader.string()?.ok_or(gregor_sdk::wire::Malformed)?;
    let principal = reader.string()?.ok_or(gregor_sdk::wire::Malformed)?;
    Ok((topic, principal))
}

gregor_sdk::export_raw_handler!(ProvisionReader);

#[cfg(test)]
mod tests {
    use super::read_request;

    #[test]
    fn requests_parse() {
        assert_eq!(
            read_request(&[0, 1, b't', 0, 3, b'U', b':', b'a']),
            Ok(("t".to_string(), "U:a".to_string()))
        );
        assert!(read_request(&[0, 1, b't', 0xff, 0xff]).is_err());
    }
}
