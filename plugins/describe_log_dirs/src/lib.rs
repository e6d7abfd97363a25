//! DescribeLogDirs (ApiKey 35): the broker's log directories with the
//! partitions each holds and their sizes, as Kafka's
//! `KafkaApis.handleDescribeLogDirsRequest` and
//! `ReplicaManager.describeLogDirs`.
//!
//! - Versions 0-4: Kafka 4 serves 1-4; v0, which KIP-896 removed, is v1's
//!   message and is served as v1 (v2 flexible, v3 adds the
//!   top-level error code, v4 the file system's total and usable bytes).
//! - DESCRIBE on the Cluster is required: without it the answer lists no
//!   directory and, from v3, carries CLUSTER_AUTHORIZATION_FAILED.
//! - A null topic list asks for every partition; otherwise each directory
//!   lists only the requested partitions it holds (unknown ones are simply
//!   absent). Every directory is listed, even with no matching partition.
//! - A partition's offset lag is 0 (it is the current replica, never a
//!   future one: moves swap in one step, see `alter_replica_log_dirs`).
//! - Error response (a trap or timeout): no directory and, from v3, the
//!   error, as Kafka's `DescribeLogDirsRequest.getErrorResponse` (before
//!   v3 the response has no field to carry it).

use gregor_sdk::AnswerError;
use std::collections::{BTreeMap, HashSet};

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use gregor_sdk::kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use gregor_sdk::log::{self, LogDir};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

/// The first version with a top-level error code.
const ERROR_CODE_VERSION: i16 = 3;

struct DescribeLogDirs;

impl Handler for DescribeLogDirs {
    gregor_sdk::api!(DescribeLogDirsRequest, 0..=4);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::Legacy::same_as(1));

    fn handle(
        ctx: &RequestContext,
        request: &DescribeLogDirsRequest,
    ) -> Reply<DescribeLogDirsResponse> {
        if !cluster_allowed(Operation::Describe) {
            let denied = ResponseError::ClusterAuthorizationFailed.code();
            return error_response_for(ctx.api_version, denied).into();
        }
        let wanted: Option<HashSet<(String, i32)>> = request.topics.as_ref().map(|topics| {
            topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.to_string(), p)))
                .collect()
        });
        let results = log::describe_log_dirs()
            .into_iter()
            .map(|dir| describe_dir(dir, wanted.as_ref()))
            .collect();
        DescribeLogDirsResponse::default()
            .with_results(results)
            .into()
    }

    /// Kafka's `getErrorResponse`: the error, no directory.
    fn failed(
        ctx: &RequestContext,
        _: &DescribeLogDirsRequest,
        error_code: i16,
    ) -> DescribeLogDirsResponse {
        error_response_for(ctx.api_version, error_code)
    }
}

/// No directory and, from v3, `error_code`; before v3 there is no error
/// field and the list is just empty.
fn error_response_for(version: i16, error_code: i16) -> DescribeLogDirsResponse {
    let mut response = DescribeLogDirsResponse::default();
    if version >= ERROR_CODE_VERSION {
        response.error_code = error_code;
    }
    response
}

/// One directory's result, keeping the partitions asked for.
fn describe_dir(dir: LogDir, wanted: Option<&HashSet<(String, i32)>>) -> DescribeLogDirsResult {
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for p in dir.partitions {
        if wanted.is_some_and(|w| !w.contains(&(p.topic.clone(), p.partition))) {
            continue;
        }
        topics.entry(p.topic).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(p.partition)
                .with_partition_size(p.size)
                .with_offset_lag(0)
                .with_is_future_key(false),
        );
    }
    DescribeLogDirsResult::default()
        .with_error_code(dir.error.error_code())
        .with_log_dir(str_bytes(&dir.path))
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    DescribeLogDirsTopic::default()
                        .with_name(str_bytes(&name).into())
                        .with_partitions(partitions)
                })
                .collect(),
        )
        .with_total_bytes(dir.total_bytes)
        .with_usable_bytes(dir.usable_bytes)
}

gregor_sdk::export_handler!(DescribeLogDirs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::log::LogDirPartition;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn dir() -> LogDir {
        let p = |topic: &str, partition, size| LogDirPartition {
            topic: topic.to_string(),
            partition,
            size,
        };
        LogDir {
            path: "/data/a".to_string(),
            error: None,
            partitions: vec![p("t", 0, 10), p("t", 1, 20), p("u", 0, 5)],
            total_bytes: 1000,
            usable_bytes: 400,
        }
    }

    #[test]
    fn lists_what_was_asked_for() {
        let all = describe_dir(dir(), None);
        assert_eq!(all.topics.len(), 2);
        assert_eq!(all.topics[0].partitions.len(), 2);
        assert_eq!(all.topics[0].partitions[1].partition_size, 20);
        assert_eq!((all.total_bytes, all.usable_bytes), (1000, 400));
        let wanted = HashSet::from([("t".to_string(), 1), ("x".to_string(), 0)]);
        let some = describe_dir(dir(), Some(&wanted));
        assert_eq!(some.topics.len(), 1);
        assert_eq!(some.topics[0].partitions[0].partition_index, 1);
        let none = describe_dir(dir(), Some(&HashSet::new()));
        assert!(none.topics.is_empty());
        assert_eq!(none.log_dir.as_str(), "/data/a");
    }

    #[test]
    fn encodes_for_every_served_version() {
        // Before v3 the error response has no field for the error: no
        // request is checked for carrying it.
        let response =
            DescribeLogDirsResponse::default().with_results(vec![describe_dir(dir(), None)]);
        assert_encodes_for_served_versions::<DescribeLogDirs>(&[], &[response]);
    }

    #[test]
    fn the_error_needs_v3() {
        let code = ResponseError::UnknownServerError.code();
        for version in 1..=4 {
            let response = error_response_for(version, code);
            let expected = if version >= ERROR_CODE_VERSION {
                code
            } else {
                0
            };
            assert_eq!(response.error_code, expected, "v{version}");
            assert!(response.results.is_empty());
        }
    }
}
