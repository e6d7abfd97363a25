//! TxnOffsetCommit (ApiKey 28): a transactional producer commits a consumer
//! group's offsets inside its transaction (after AddOffsetsToTxn); they
//! become visible to the group only when EndTxn commits. As Kafka's
//! `KafkaApis.handleTxnOffsetCommitRequest` and the group coordinator's
//! `commitTransactionalOffsets`.
//!
//! - Versions 0-4; flexible from v3. v2 adds the leader epoch, v3 the
//!   member (generation, member id, group instance id, KIP-447) so that a
//!   zombie member of an older generation is fenced; older clients send
//!   generation -1 and no member.
//! - WRITE on the TransactionalId (else every partition
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the Group (else
//!   GROUP_AUTHORIZATION_FAILED), then READ on each Topic, asked once
//!   (TOPIC_AUTHORIZATION_FAILED); a topic or partition that does not exist
//!   is UNKNOWN_TOPIC_OR_PARTITION.
//! - The rest go to the host's `txn.txn-offset-commit`, held pending in the
//!   transaction; answers keep the request's order. v0-1 clients get
//!   COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, which
//!   clients before Kafka 2.0 could not handle (KAFKA-7296).

use gregor_sdk::authorize::{allowed_names, transactional_id_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{group_allowed, opt_string, partition_counts, partition_error};
use gregor_sdk::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use gregor_sdk::kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use gregor_sdk::txn::{self, PartitionCodes, TxnGroupMember, TxnOffset};
use gregor_sdk::{
    api_info, decode, encode, request_throttle_ms, respond, ApiInfo, Outcome, RawHandler,
    RequestContext, ResponseError,
};

struct TxnOffsetCommit;

impl RawHandler for TxnOffsetCommit {
    fn describe() -> ApiInfo {
        api_info::<TxnOffsetCommitRequest>("TxnOffsetCommit", 0, 4)
    }

    fn handle(ctx: RequestContext, body: Vec<u8>) -> Outcome {
        let request: TxnOffsetCommitRequest = match decode(&ctx, &body) {
            Ok(request) => request,
            Err(outcome) => return outcome,
        };
        let codes = if !transactional_id_allowed(Operation::Write, &request.transactional_id) {
            same_code(
                &request,
                ResponseError::TransactionalIdAuthorizationFailed.code(),
            )
        } else if !group_allowed(Operation::Read, &request.group_id) {
            same_code(&request, ResponseError::GroupAuthorizationFailed.code())
        } else {
            commit(&request)
        };
        let codes = codes
            .into_iter()
            .map(|topic| {
                topic
                    .into_iter()
                    .map(|code| for_version(code, ctx.api_version))
                    .collect()
            })
            .collect();
        let mut response = response(&request, codes);
        gregor_sdk::count_errors(
            response
                .topics
                .iter()
                .flat_map(|topic| &topic.partitions)
                .map(|partition| partition.error_code),
        );
        response.throttle_time_ms = request_throttle_ms();
        respond(&ctx, &response)
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn error_response(ctx: RequestContext, body: Vec<u8>, error_code: i16) -> Option<Vec<u8>> {
        let request: TxnOffsetCommitRequest = decode(&ctx, &body).ok()?;
        let codes = same_code(&request, error_code);
        encode(&ctx, &response(&request, codes))
    }
}

/// One code per partition, per topic, in request order.
type Codes = Vec<Vec<i16>>;

fn same_code(request: &TxnOffsetCommitRequest, code: i16) -> Codes {
    request
        .topics
        .iter()
        .map(|topic| vec![code; topic.partitions.len()])
        .collect()
}

/// Checks each partition, commits the ones that pass, and merges the
/// host's answers back into request order.
fn commit(request: &TxnOffsetCommitRequest) -> Codes {
    let names = || request.topics.iter().map(|topic| topic.name.as_str());
    let authorized = allowed_names(Operation::Read, ResourceType::Topic, names());
    let counts = partition_counts(names());
    let checks: Vec<Vec<Option<i16>>> = request
        .topics
        .iter()
        .map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| partition_error(&authorized, &counts, &topic.name, p.partition_index))
                .collect()
        })
        .collect();
    let offsets: Vec<TxnOffset> = request
        .topics
        .iter()
        .zip(&checks)
        .flat_map(|(topic, checks)| {
            topic
                .partitions
                .iter()
                .zip(checks)
                .filter(|(_, check)| check.is_none())
                .map(|(partition, _)| TxnOffset {
                    topic: topic.name.to_string(),
                    partition: partition.partition_index,
                    offset: partition.committed_offset,
                    leader_epoch: partition.committed_leader_epoch,
                    metadata: opt_string(&partition.committed_metadata),
                })
        })
        .collect();
    let results = if offsets.is_empty() {
        PartitionCodes::new(Vec::new())
    } else {
        let member = TxnGroupMember {
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: opt_string(&request.group_instance_id),
        };
        PartitionCodes::new(txn::txn_offset_commit(
            &request.transactional_id,
            &request.group_id,
            request.producer_id.0,
            request.producer_epoch,
            &member,
            &offsets,
        ))
    };
    request
        .topics
        .iter()
        .zip(checks)
        .map(|(topic, checks)| {
            topic
                .partitions
                .iter()
                .zip(checks)
                .map(|(partition, check)| {
                    check.unwrap_or_else(|| results.get(&topic.name, partition.partition_index))
                })
                .collect()
        })
        .collect()
}

/// KAFKA-7296: clients before TxnOffsetCommit v2 crash on
/// COORDINATOR_LOAD_IN_PROGRESS; Kafka tells them COORDINATOR_NOT_AVAILABLE.
fn for_version(code: i16, version: i16) -> i16 {
    if version < 2 && code == ResponseError::CoordinatorLoadInProgress.code() {
        ResponseError::CoordinatorNotAvailable.code()
    } else {
        code
    }
}

fn response(request: &TxnOffsetCommitRequest, codes: Codes) -> TxnOffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .zip(codes)
        .map(|(topic, codes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(codes)
                .map(|(partition, code)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(partition.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

gregor_sdk::export_raw_handler!(TxnOffsetCommit);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use gregor_sdk::kafka_protocol::messages::TopicName;
    use gregor_sdk::kafka_protocol::protocol::Encodable;

    fn request() -> TxnOffsetCommitRequest {
        let topic = |name: &str, partitions: &[i32]| {
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            TxnOffsetCommitRequestPartition::default().with_partition_index(p)
                        })
                        .collect(),
                )
        };
        TxnOffsetCommitRequest::default().with_topics(vec![topic("a", &[0, 1]), topic("b", &[0])])
    }

    #[test]
    fn error_responses_answer_every_partition_in_order() {
        let response = response(&request(), same_code(&request(), 53));
        let shape: Vec<(String, Vec<(i32, i16)>)> = response
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code));
                (t.name.to_string(), partitions.collect())
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("a".to_string(), vec![(0, 53), (1, 53)]),
                ("b".to_string(), vec![(0, 53)])
            ]
        );
        for version in 0..=4 {
            assert!(
                response.encode(&mut Vec::new(), version).is_ok(),
                "v{version}"
            );
        }
    }

    #[test]
    fn loading_is_not_available_for_old_clients() {
        let loading = ResponseError::CoordinatorLoadInProgress.code();
        let unavailable = ResponseError::CoordinatorNotAvailable.code();
        assert_eq!(for_version(loading, 1), unavailable);
        assert_eq!(for_version(loading, 2), loading);
        assert_eq!(for_version(0, 0), 0);
    }
}
