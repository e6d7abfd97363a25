//! AlterReplicaLogDirs (ApiKey 34): move partitions to another of the
//! broker's log directories, as Kafka's
//! `KafkaApis.handleAlterReplicaLogDirsRequest` and
//! `ReplicaManager.alterReplicaLogDirs`.
//!
//! - Versions 0-2: Kafka 4 serves 1-2 (v2 flexible); v0, which KIP-896
//!   removed, is v1's message and is served as v1.
//! - ALTER on the Cluster is required: without it every partition gets
//!   CLUSTER_AUTHORIZATION_FAILED.
//! - Each partition goes to the host's `log.alter-log-dir`: a directory that
//!   is not one of `log.dirs` is LOG_DIR_NOT_FOUND, an unknown partition
//!   UNKNOWN_TOPIC_OR_PARTITION. As in Kafka the answer comes once the move
//!   is accepted; the copy runs in the background while the partition keeps
//!   serving appends and fetches, and DescribeLogDirs shows it in its new
//!   directory when the move is done.
//! - A partition named in two directories gets the last one, as Kafka's map
//!   from partition to directory keeps it.
//! - Error response (a trap or timeout): every partition of every
//!   directory with the error, as Kafka's
//!   `AlterReplicaLogDirsRequest.getErrorResponse`.

use gregor_sdk::AnswerError;
use std::collections::BTreeMap;

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use gregor_sdk::kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
};
use gregor_sdk::partitions;
use gregor_sdk::{log, Handler, Reply, RequestContext, ResponseError};

struct AlterReplicaLogDirs;

impl Handler for AlterReplicaLogDirs {
    gregor_sdk::api!(AlterReplicaLogDirsRequest, 0..=2);
    const LEGACY: Option<gregor_sdk::legacy::Legacy> = Some(gregor_sdk::legacy::Legacy::same_as(1));

    fn handle(
        _ctx: &RequestContext,
        request: &AlterReplicaLogDirsRequest,
    ) -> Reply<AlterReplicaLogDirsResponse> {
        let moves = partition_dirs(request);
        let allowed = cluster_allowed(Operation::Alter);
        let mut by_topic: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> =
            BTreeMap::new();
        for ((topic, partition), dir) in moves {
            let error_code = if allowed {
                log::alter_log_dir(&topic, partition, &dir).error_code()
            } else {
                ResponseError::ClusterAuthorizationFailed.code()
            };
            by_topic.entry(topic).or_default().push(
                AlterReplicaLogDirPartitionResult::default()
                    .with_partition_index(partition)
                    .with_error_code(error_code),
            );
        }
        let results = by_topic
            .into_iter()
            .map(|(name, partitions)| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(str_bytes(&name).into())
                    .with_partitions(partitions)
            })
            .collect();
        AlterReplicaLogDirsResponse::default()
            .with_results(results)
            .into()
    }

    /// Kafka's `getErrorResponse`: every partition of every directory with
    /// the error, one result per directory's topic, in request order.
    fn failed(
        _: &RequestContext,
        request: &AlterReplicaLogDirsRequest,
        error_code: i16,
    ) -> AlterReplicaLogDirsResponse {
        let topics = request.dirs.iter().flat_map(|dir| &dir.topics);
        AlterReplicaLogDirsResponse::default().with_results(partitions::failed(topics, error_code))
    }
}

/// The target directory of each partition in the request (the last one
/// wins when a partition is named twice).
fn partition_dirs(request: &AlterReplicaLogDirsRequest) -> BTreeMap<(String, i32), String> {
    let mut moves = BTreeMap::new();
    for dir in &request.dirs {
        for topic in &dir.topics {
            for &partition in &topic.partitions {
                moves.insert((topic.name.to_string(), partition), dir.path.to_string());
            }
        }
    }
    moves
}

gregor_sdk::export_handler!(AlterReplicaLogDirs);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };

    fn dir(path: &str, topic: &str, partitions: Vec<i32>) -> AlterReplicaLogDir {
        AlterReplicaLogDir::default()
            .with_path(str_bytes(path))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(str_bytes(topic).into())
                .with_partitions(partitions)])
    }

    #[test]
    fn the_last_directory_named_wins() {
        let request = AlterReplicaLogDirsRequest::default()
            .with_dirs(vec![dir("/a", "t", vec![0, 1]), dir("/b", "t", vec![1])]);
        let moves = partition_dirs(&request);
        assert_eq!(moves.len(), 2);
        assert_eq!(moves[&("t".to_string(), 0)], "/a");
        assert_eq!(moves[&("t".to_string(), 1)], "/b");
    }

    gregor_sdk::served_versions_test!(
        AlterReplicaLogDirs,
        [AlterReplicaLogDirsRequest::default()
            .with_dirs(vec![dir("/a", "t", vec![0, 1]), dir("/b", "u", vec![2])])],
        [AlterReplicaLogDirsResponse::default().with_results(vec![
            AlterReplicaLogDirTopicResult::default().with_partitions(vec![
                AlterReplicaLogDirPartitionResult::default().with_error_code(57),
            ])
        ])]
    );
}
