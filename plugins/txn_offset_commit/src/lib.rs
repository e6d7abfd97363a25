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
//!   is UNKNOWN_TOPIC_OR_PARTITION (`gregor_sdk::offset_commit`, shared
//!   with OffsetCommit).
//! - The rest go to the host's `txn.txn-offset-commit`, held pending in the
//!   transaction; answers keep the request's order. v0-1 clients get
//!   COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, which
//!   clients before Kafka 2.0 could not handle (KAFKA-7296).
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error.

use gregor_sdk::authorize::transactional_id_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{group_allowed, opt_string, OffsetCommit};
use gregor_sdk::kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use gregor_sdk::offset_commit::{self, CommitRequest};
use gregor_sdk::txn::{self, PartitionCodes, TxnGroupMember, TxnOffset};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct TxnOffsetCommit;

impl Handler for TxnOffsetCommit {
    gregor_sdk::api!(TxnOffsetCommitRequest, 0..=4);

    fn handle(
        ctx: &RequestContext,
        request: &TxnOffsetCommitRequest,
    ) -> Reply<TxnOffsetCommitResponse> {
        let codes = if !transactional_id_allowed(Operation::Write, &request.transactional_id) {
            let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
            request.same_code(denied)
        } else if !group_allowed(Operation::Read, &request.group_id) {
            request.same_code(ResponseError::GroupAuthorizationFailed.code())
        } else {
            offset_commit::commit(request.topics(), |offsets| commit(request, offsets))
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
        request.answer(codes).into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn failed(
        _: &RequestContext,
        request: &TxnOffsetCommitRequest,
        code: i16,
    ) -> TxnOffsetCommitResponse {
        request.answer(request.same_code(code))
    }
}

/// Holds the checked offsets pending in the transaction; a code each.
fn commit(request: &TxnOffsetCommitRequest, offsets: &[OffsetCommit]) -> Vec<i16> {
    let member = TxnGroupMember {
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: opt_string(&request.group_instance_id),
    };
    let pending: Vec<TxnOffset> = offsets
        .iter()
        .map(|o| TxnOffset {
            topic: o.topic.clone(),
            partition: o.partition,
            offset: o.offset,
            leader_epoch: o.leader_epoch,
            metadata: o.metadata.clone(),
        })
        .collect();
    let results = PartitionCodes::new(txn::txn_offset_commit(
        &request.transactional_id,
        &request.group_id,
        request.producer_id.0,
        request.producer_epoch,
        &member,
        &pending,
    ));
    offsets
        .iter()
        .map(|o| results.get(&o.topic, o.partition))
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

gregor_sdk::export_handler!(TxnOffsetCommit);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::ids::str_bytes;
    use gregor_sdk::kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use gregor_sdk::kafka_protocol::messages::{GroupId, TopicName, TransactionalId};
    use gregor_sdk::metadata::TopicInfo;
    use gregor_sdk::offset_commit::CommitResponse;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::txn::TxnPartitionResult;

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
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(str_bytes("t")))
            .with_group_id(GroupId(str_bytes("g")))
            .with_topics(vec![topic("a", &[0, 1]), topic("b", &[0])])
    }

    #[test]
    fn encodes_for_every_served_version() {
        let ctx = fake::context::<TxnOffsetCommit>(0);
        let failed = TxnOffsetCommit::failed(&ctx, &request(), 53);
        assert_eq!(
            failed.codes_by_topic(),
            vec![
                ("a".to_string(), vec![(0, 53), (1, 53)]),
                ("b".to_string(), vec![(0, 53)])
            ]
        );
        assert_encodes_for_served_versions::<TxnOffsetCommit>(&[request()], &[failed]);
    }

    #[test]
    fn loading_is_not_available_for_old_clients() {
        let loading = ResponseError::CoordinatorLoadInProgress.code();
        let unavailable = ResponseError::CoordinatorNotAvailable.code();
        assert_eq!(for_version(loading, 1), unavailable);
        assert_eq!(for_version(loading, 2), loading);
        assert_eq!(for_version(0, 0), 0);
    }

    /// Topic "a" has one partition; the principal may not READ group "g"
    /// unless `group_readable`. The coordinator is still loading.
    struct Coordinator {
        group_readable: bool,
    }

    impl FakeHost for Coordinator {
        fn authorize(&self, action: &Action) -> bool {
            self.group_readable || action.resource_name != "g"
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![fake::single_node_topic("a", 1)]
        }
        fn txn_offset_commit(
            &self,
            _: &str,
            _: &str,
            _: i64,
            _: i16,
            _: &TxnGroupMember,
            offsets: &[TxnOffset],
        ) -> Vec<TxnPartitionResult> {
            let loading = ResponseError::CoordinatorLoadInProgress.code();
            let result = |o: &TxnOffset| TxnPartitionResult {
                topic: o.topic.clone(),
                partition: o.partition,
                error: gregor_sdk::error_of(loading),
            };
            offsets.iter().map(result).collect()
        }
    }

    #[test]
    fn checked_partitions_go_to_the_transaction() {
        let host = || Coordinator {
            group_readable: true,
        };
        let (loading, unavailable, unknown) = (14, 15, 3);
        let handled = fake::handle::<TxnOffsetCommit>(host(), 4, &request());
        assert_eq!(
            handled.response.map(|r| r.codes_by_topic()),
            Some(vec![
                ("a".to_string(), vec![(0, loading), (1, unknown)]),
                ("b".to_string(), vec![(0, unknown)])
            ])
        );
        let old = fake::handle::<TxnOffsetCommit>(host(), 1, &request());
        assert_eq!(old.counted_errors, vec![unavailable, unknown, unknown]);
    }

    #[test]
    fn an_unreadable_group_is_refused() {
        let host = Coordinator {
            group_readable: false,
        };
        let handled = fake::handle::<TxnOffsetCommit>(host, 3, &request());
        let denied = ResponseError::GroupAuthorizationFailed.code();
        assert_eq!(handled.counted_errors, vec![denied; 3]);
    }
}
