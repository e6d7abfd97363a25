//! ConsumerGroupHeartbeat (ApiKey 68): the consumer group protocol of
//! KIP-848, as Kafka's `KafkaApis.handleConsumerGroupHeartbeat`. One call
//! joins, heartbeats, reports owned partitions and leaves; the coordinator
//! runs the assignor (uniform or range) and answers with the member's
//! epoch and, when it changed, its assignment.
//!
//! - Versions 0-1 (v1: the client picks its member id; v0 lets the
//!   coordinator pick it on the first join).
//! - UNSUPPORTED_VERSION when `group.coordinator.rebalance.protocols` does
//!   not list `consumer`, as Kafka answers when the protocol is off.
//! - READ on the Group, else GROUP_AUTHORIZATION_FAILED; then DESCRIBE on
//!   every subscribed topic, else TOPIC_AUTHORIZATION_FAILED and no join
//!   (KAFKA-18813, Kafka 4.0), before the request checks as in Kafka.
//! - Kafka's request checks give INVALID_REQUEST with a message: a group
//!   id, a member id (v1, or when not joining), a rebalance timeout and a
//!   subscription on the first join, no owned partitions on a (re)join, an
//!   instance id to leave a static member's place. Regular-expression
//!   subscriptions are not supported here.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error at the top level alone.

use gregor_sdk::authorize::allowed_names;
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::groups::{
    self, group_allowed, opt_str_bytes, opt_string, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResult, TopicIdPartitions,
};
use gregor_sdk::ids::{from_kafka_uuid, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions,
};
use gregor_sdk::kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::AnswerError;
use gregor_sdk::KafkaError;
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

struct ConsumerGroupHeartbeat;

impl Handler for ConsumerGroupHeartbeat {
    gregor_sdk::api!(ConsumerGroupHeartbeatRequest, 0..=1);

    fn handle(
        ctx: &RequestContext,
        request: &ConsumerGroupHeartbeatRequest,
    ) -> Reply<ConsumerGroupHeartbeatResponse> {
        let result = if !protocol_enabled() {
            error(ResponseError::UnsupportedVersion.code(), None)
        } else if !group_allowed(Operation::Read, &request.group_id) {
            error(ResponseError::GroupAuthorizationFailed.code(), None)
        } else if !subscription_allowed(request) {
            error(ResponseError::TopicAuthorizationFailed.code(), None)
        } else if let Some(problem) = invalid(request, ctx.api_version) {
            error(ResponseError::InvalidRequest.code(), Some(problem))
        } else {
            groups::consumer_heartbeat(&ConsumerHeartbeatRequest {
                group_id: request.group_id.to_string(),
                member_id: request.member_id.to_string(),
                member_epoch: request.member_epoch,
                instance_id: opt_string(&request.instance_id),
                rack_id: opt_string(&request.rack_id),
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                subscribed_topic_names: request
                    .subscribed_topic_names
                    .as_ref()
                    .map(|names| names.iter().map(|n| n.to_string()).collect()),
                server_assignor: opt_string(&request.server_assignor),
                owned: request.topic_partitions.as_ref().map(|owned| {
                    owned
                        .iter()
                        .map(|t| TopicIdPartitions {
                            topic_id: from_kafka_uuid(t.topic_id),
                            partitions: t.partitions.clone(),
                        })
                        .collect()
                }),
            })
        };
        response(result).into()
    }
}

/// DESCRIBE on every subscribed topic (KAFKA-18813): a member must not
/// learn the ids and partitions of topics it may not see by subscribing.
fn subscription_allowed(request: &ConsumerGroupHeartbeatRequest) -> bool {
    let Some(names) = request
        .subscribed_topic_names
        .as_ref()
        .filter(|n| !n.is_empty())
    else {
        return true;
    };
    let names: Vec<&str> = names.iter().map(|name| name.as_str()).collect();
    let allowed = allowed_names(
        Operation::Describe,
        ResourceType::Topic,
        names.iter().copied(),
    );
    names.iter().all(|name| allowed.contains(name))
}

/// `group.coordinator.rebalance.protocols` (Kafka 4: classic,consumer).
fn protocol_enabled() -> bool {
    metadata::broker_config("group.coordinator.rebalance.protocols")
        .unwrap_or_else(|| "classic,consumer".to_string())
        .split(',')
        .any(|p| p.trim().eq_ignore_ascii_case("consumer"))
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn invalid(request: &ConsumerGroupHeartbeatRequest, version: i16) -> Option<String> {
    let problem = if request.group_id.is_empty() {
        "GroupId can't be empty."
    } else if request.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        "InstanceId can't be empty."
    } else if request
        .subscribed_topic_regex
        .as_ref()
        .is_some_and(|r| !r.is_empty())
    {
        // An empty regex means none (librdkafka always sends the field).
        "SubscribedTopicRegex is not supported by this broker."
    } else if request.member_id.is_empty() && (version >= 1 || request.member_epoch != 0) {
        "MemberId can't be empty."
    } else if request.member_epoch == 0 && request.rebalance_timeout_ms <= 0 {
        "RebalanceTimeoutMs must be provided in first request."
    } else if request.member_epoch == 0
        && request
            .topic_partitions
            .as_ref()
            .is_none_or(|p| !p.is_empty())
    {
        "TopicPartitions must be empty when (re-)joining."
    } else if request.member_epoch == 0 && request.subscribed_topic_names.is_none() {
        "SubscribedTopicNames must be set in first request."
    } else if request.member_epoch == -2 && request.instance_id.is_none() {
        "InstanceId can't be null."
    } else if request.member_epoch < -2 {
        "MemberEpoch is invalid."
    } else {
        return None;
    };
    Some(problem.to_string())
}

fn error(error_code: i16, message: Option<String>) -> ConsumerHeartbeatResult {
    ConsumerHeartbeatResult {
        error: Some(KafkaError {
            code: error_code,
            message,
        }),
        member_id: None,
        member_epoch: -1,
        heartbeat_interval_ms: 0,
        assignment: None,
    }
}

fn response(result: ConsumerHeartbeatResult) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(result.error.error_code())
        .with_error_message(opt_str_bytes(result.error.error_message()))
        .with_member_id(result.member_id.map(StrBytes::from_string))
        .with_member_epoch(result.member_epoch)
        .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
        .with_assignment(result.assignment.map(|topics| {
            Assignment::default().with_topic_partitions(
                topics
                    .into_iter()
                    .map(|t| {
                        TopicPartitions::default()
                            .with_topic_id(to_kafka_uuid(t.topic_id))
                            .with_partitions(t.partitions)
                    })
                    .collect(),
            )
        }))
}

gregor_sdk::export_handler!(ConsumerGroupHeartbeat);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::GroupId;
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::Uuid;

    fn join() -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_rebalance_timeout_ms(300_000)
            .with_subscribed_topic_names(Some(Vec::new()))
            .with_topic_partitions(Some(Vec::new()))
    }

    #[test]
    fn requests_are_checked_like_kafka() {
        assert_eq!(invalid(&join(), 1), None);
        assert!(invalid(&join().with_member_id(StrBytes::default()), 1).is_some());
        assert_eq!(
            invalid(&join().with_member_id(StrBytes::default()), 0),
            None
        );
        assert!(invalid(&join().with_rebalance_timeout_ms(-1), 1).is_some());
        assert!(invalid(&join().with_subscribed_topic_names(None), 1).is_some());
        assert!(invalid(&join().with_member_epoch(-2), 1).is_some());
        assert_eq!(invalid(&join().with_member_epoch(-1), 1), None);
        assert!(invalid(&join().with_member_epoch(-3), 1).is_some());
    }

    #[test]
    fn encodes_for_every_served_version() {
        let result = ConsumerHeartbeatResult {
            error: None,
            member_id: Some("m".into()),
            member_epoch: 3,
            heartbeat_interval_ms: 5000,
            assignment: Some(vec![TopicIdPartitions {
                topic_id: Uuid { high: 1, low: 2 },
                partitions: vec![0, 1],
            }]),
        };
        assert_encodes_for_served_versions::<ConsumerGroupHeartbeat>(
            &[join()],
            &[response(result)],
        );
    }
}
