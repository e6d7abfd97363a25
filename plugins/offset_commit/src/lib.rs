//! OffsetCommit (ApiKey 8): a consumer stores its position, as Kafka's
//! `KafkaApis.handleOffsetCommitRequest`.
//!
//! - Versions 0-9. Kafka 4 dropped v0-1 (KIP-896); Gregor serves them
//!   through v2 for Kafka 3.x-era clients (see [`v0_1`]). v2-4 carry a
//!   retention time, v6 the leader epoch, v7 the group_instance_id.
//! - READ on the Group first (else every partition gets
//!   GROUP_AUTHORIZATION_FAILED), then READ on each Topic (else
//!   TOPIC_AUTHORIZATION_FAILED); a topic or partition that does not exist
//!   is UNKNOWN_TOPIC_OR_PARTITION (`gregor_sdk::offset_commit`, shared
//!   with TxnOffsetCommit). The rest goes to the coordinator, which
//!   checks generation and membership (a generation of -1 from a consumer
//!   without group management commits into an empty group) and stores the
//!   offsets with their metadata, returned as is by OffsetFetch.
//! - Answers keep the request's order of topics and partitions.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every partition with the error.

mod v0_1;

use gregor_sdk::authz::Operation;
use gregor_sdk::groups::{self, group_allowed, opt_string};
use gregor_sdk::kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use gregor_sdk::legacy::Legacy;
use gregor_sdk::offset_commit::{self, CommitRequest};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError};

struct OffsetCommit;

impl Handler for OffsetCommit {
    gregor_sdk::api!(OffsetCommitRequest, 0..=9);
    const LEGACY: Option<Legacy> = Some(v0_1::LEGACY);

    fn handle(_ctx: &RequestContext, request: &OffsetCommitRequest) -> Reply<OffsetCommitResponse> {
        let codes = if !group_allowed(Operation::Read, &request.group_id) {
            let denied = ResponseError::GroupAuthorizationFailed.code();
            request.same_code(denied)
        } else {
            offset_commit::commit(request.topics(), |offsets| {
                gregor_sdk::codes(groups::commit_offsets(
                    &request.group_id,
                    request.generation_id_or_member_epoch,
                    &request.member_id,
                    opt_string(&request.group_instance_id).as_deref(),
                    request.retention_time_ms,
                    offsets,
                ))
            })
        };
        request.answer(codes).into()
    }

    /// Kafka's `getErrorResponse`: every partition with the error.
    fn failed(
        _: &RequestContext,
        request: &OffsetCommitRequest,
        code: i16,
    ) -> OffsetCommitResponse {
        request.answer(request.same_code(code))
    }
}

gregor_sdk::export_handler!(OffsetCommit);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::groups::OffsetCommit as Offset;
    use gregor_sdk::kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use gregor_sdk::kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    use gregor_sdk::kafka_protocol::messages::{GroupId, TopicName};
    use gregor_sdk::kafka_protocol::protocol::StrBytes;
    use gregor_sdk::metadata::TopicInfo;
    use gregor_sdk::offset_commit::CommitResponse;
    use gregor_sdk::{error_of, KafkaError};

    fn request(group: &'static str, topics: &[(&'static str, &[i32])]) -> OffsetCommitRequest {
        let topic = |&(name, partitions): &(&'static str, &[i32])| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(10 + i64::from(p))
                        })
                        .collect(),
                )
        };
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(group)))
            .with_topics(topics.iter().map(topic).collect())
    }

    gregor_sdk::served_versions_test!(
        OffsetCommit,
        [request("g", &[("a", &[0, 1]), ("b", &[2])])],
        [OffsetCommitResponse::default()
            .with_topics(vec![OffsetCommitResponseTopic::default().with_partitions(
                vec![OffsetCommitResponsePartition::default().with_error_code(22)]
            )])]
    );

    /// Topics "a" (2 partitions) and "secret" (1) exist; the principal may
    /// not read "secret" nor group "denied". The coordinator stores offsets
    /// at or above 11 and refuses the others with OFFSET_METADATA_TOO_LARGE;
    /// it expects commits with this generation and member.
    struct Coordinator(i32, &'static str);

    /// A consumer without group management.
    const UNMANAGED: Coordinator = Coordinator(-1, "");

    impl FakeHost for Coordinator {
        fn authorize(&self, action: &Action) -> bool {
            !["secret", "denied"].contains(&action.resource_name.as_str())
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![
                fake::single_node_topic("a", 2),
                fake::single_node_topic("secret", 1),
            ]
        }
        fn commit_offsets(
            &self,
            group: &str,
            generation: i32,
            member: &str,
            _: Option<&str>,
            retention: i64,
            offsets: &[Offset],
        ) -> Vec<Option<KafkaError>> {
            assert_eq!(
                (group, generation, member, retention),
                ("g", self.0, self.1, -1)
            );
            let code = |o: &Offset| if o.offset >= 11 { 0 } else { 12 };
            offsets.iter().map(|o| error_of(code(o))).collect()
        }
    }

    #[test]
    fn partitions_are_checked_then_stored_in_request_order() {
        let request = request("g", &[("secret", &[0]), ("a", &[0, 5, 1]), ("b", &[0])]);
        let handled = fake::handle::<OffsetCommit>(UNMANAGED, 9, &request);
        let (denied, unknown) = (29, 3);
        assert_eq!(
            handled.response.map(|r| r.codes_by_topic()),
            Some(vec![
                ("secret".to_string(), vec![(0, denied)]),
                ("a".to_string(), vec![(0, 12), (5, unknown), (1, 0)]),
                ("b".to_string(), vec![(0, unknown)]),
            ])
        );
        assert_eq!(handled.counted_errors, vec![denied, 12, unknown, unknown]);
    }

    #[test]
    fn an_unauthorized_group_fails_every_partition_without_the_coordinator() {
        let request = request("denied", &[("a", &[0, 1])]);
        let handled = fake::handle::<OffsetCommit>(UNMANAGED, 2, &request);
        let denied = ResponseError::GroupAuthorizationFailed.code();
        assert_eq!(
            handled.response.map(|r| r.codes_by_topic()),
            Some(vec![("a".to_string(), vec![(0, denied), (1, denied)])])
        );
    }

    #[test]
    fn v0_commits_without_a_generation_and_v1_with_it() {
        let request = request("g", &[("a", &[1])])
            .with_generation_id_or_member_epoch(5)
            .with_member_id(StrBytes::from_static_str("m"));
        for (version, coordinator) in [(0, UNMANAGED), (1, Coordinator(5, "m"))] {
            let handled = fake::handle::<OffsetCommit>(coordinator, version, &request);
            let codes = handled.response.map(|r| r.codes_by_topic());
            assert_eq!(
                codes,
                Some(vec![("a".to_string(), vec![(1, 0)])]),
                "v{version}"
            );
        }
    }
}
