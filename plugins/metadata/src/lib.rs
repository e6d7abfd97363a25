//! Metadata (ApiKey 3): brokers, cluster id, controller and the partitions
//! of topics, as Kafka's `KafkaApis.handleTopicMetadataRequest`.
//!
//! - No topic list (v1+), or an empty one in v0, means every topic; topics
//!   the principal may not DESCRIBE are left out silently.
//! - Named topics the principal may not DESCRIBE get TOPIC_AUTHORIZATION_FAILED
//!   (without their id, so existence is not disclosed). From v12 topics may be
//!   named by id (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID. A topic id, or
//!   a topic without a name, before v12 is an INVALID_REQUEST, as in Kafka.
//! - Auto-creation: a named topic that does not exist is created when the
//!   request allows it (always before v4), `auto.create.topics.enable` is
//!   true and the principal may CREATE on the Cluster or the Topic; it is
//!   answered LEADER_NOT_AVAILABLE and shows up in the next Metadata. Without
//!   CREATE it is TOPIC_AUTHORIZATION_FAILED; with auto-creation off it is
//!   UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for a bad name.
//!   Kafka's internal topic names (`__consumer_offsets`,
//!   `__transaction_state`, `__share_group_state`) and `__cluster_metadata`
//!   are never auto-created: Kafka creates the internal ones only as its
//!   coordinators' own topics (Gregor keeps that state outside topics) and
//!   refuses the last; they are answered UNKNOWN_TOPIC_OR_PARTITION,
//!   flagged `is_internal` as Kafka flags them.
//!   Topics one request would auto-create are bounded as Kafka's controller
//!   bounds the CreateTopics its auto-creation sends (10000 records: one
//!   per topic and per partition): over that none is created and each is
//!   answered LEADER_NOT_AVAILABLE.
//! - Partitions whose leader is not a live broker get LEADER_NOT_AVAILABLE;
//!   v0 lists only live replicas and flags missing ones REPLICA_NOT_AVAILABLE.
//! - v8+: topic (and, up to v10, cluster) authorized operations as Kafka's
//!   bitfield when asked for, else `i32::MIN`.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: every named topic with the error, no partitions
//!   and no brokers.
//! - A request naming more topics than the module can hold (decoded past
//!   the SDK's decode budget, e.g. 1.4 M names in 36 MB) is refused before
//!   it runs the module out of memory: v13+ answers with a top-level
//!   INVALID_REQUEST; older versions, which have no top-level error and
//!   could only list every topic with an error in an answer as large as
//!   the request, close the connection, as Kafka does for a request it
//!   cannot handle.

use std::collections::HashSet;
use std::hash::Hash;

use gregor_sdk::authorize::{
    allowed_names, authorized_operations, cluster_allowed, cluster_authorized_operations,
};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::configs::broker_flag;
use gregor_sdk::ids::{from_kafka_uuid, is_internal_topic, str_bytes, to_kafka_uuid};
use gregor_sdk::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, TopicName,
};
use gregor_sdk::metadata::{self, NewTopic, PartitionInfo, TopicInfo};
use gregor_sdk::request_caps;
use gregor_sdk::uuid::Uuid;
use gregor_sdk::{log_warn, Handler, Reply, RequestContext, ResponseError};

struct Metadata;

impl Handler for Metadata {
    gregor_sdk::api!(MetadataRequest, 0..=13);

    fn handle(ctx: &RequestContext, request: &MetadataRequest) -> Reply<MetadataResponse> {
        let version = ctx.api_version;
        if valid_topic_references(request, version) {
            cluster_metadata(request, version).into()
        } else {
            failed(request, ResponseError::InvalidRequest.code()).into()
        }
    }

    /// Kafka's `getErrorResponse`: every named topic with the error.
    fn failed(_: &RequestContext, request: &MetadataRequest, error_code: i16) -> MetadataResponse {
        failed(request, error_code)
    }

    /// A request too large to decode: a top-level INVALID_REQUEST from
    /// v13, a closed connection before.
    fn too_large(ctx: &RequestContext) -> Reply<MetadataResponse> {
        if ctx.api_version < 13 {
            log_warn("Metadata request too large to answer: closing the connection");
            return Reply::Close;
        }
        MetadataResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .into()
    }
}

/// The answer to a request whose topic references are valid.
fn cluster_metadata(request: &MetadataRequest, version: i16) -> MetadataResponse {
    let cluster = metadata::describe_cluster();
    let live: HashSet<i32> = cluster.brokers.iter().map(|b| b.node_id).collect();
    let mut response = MetadataResponse::default()
        .with_cluster_id(Some(str_bytes(&cluster.cluster_id)))
        .with_controller_id(BrokerId(cluster.controller_id))
        .with_topics(topic_metadata(request, version, &live));
    if request.include_topic_authorized_operations {
        add_authorized_operations(&mut response.topics);
    }
    response.brokers = cluster
        .brokers
        .iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(str_bytes(&b.host))
                .with_port(b.port)
                .with_rack(b.rack.as_deref().map(str_bytes))
        })
        .collect();
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = cluster_authorized_operations();
    }
    response
}

/// The topics of the response, in the order the request names them.
fn topic_metadata(
    request: &MetadataRequest,
    version: i16,
    live: &HashSet<i32>,
) -> Vec<MetadataResponseTopic> {
    let requested = match &request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => topics,
        // All topics: only those the principal may describe, without errors.
        _ => {
            let topics = metadata::list_topics();
            let allowed = allowed_names(
                Operation::Describe,
                ResourceType::Topic,
                topics.iter().map(|t| t.name.as_str()),
            );
            return topics
                .iter()
                .filter(|t| allowed.contains(&t.name))
                .map(|t| existing_topic(t, version, live))
                .collect();
        }
    };

    if requested.is_empty() {
        // Brokers only: clients ask this way to learn the cluster.
        return Vec::new();
    }
    // Kafka looks topics up by id as soon as the request names any id; the
    // names are then ignored.
    let mut ids: Vec<Uuid> = requested
        .iter()
        .map(|t| t.topic_id)
        .filter(|id| !id.is_nil())
        .collect();
    dedup_in_order(&mut ids);
    if !ids.is_empty() {
        return topics_by_id(&ids, version, live);
    }

    let mut names: Vec<&str> = requested
        .iter()
        .filter_map(|t| t.name.as_deref().map(|n| n.as_str()))
        .collect();
    dedup_in_order(&mut names);
    let describable = allowed_names(
        Operation::Describe,
        ResourceType::Topic,
        names.iter().copied(),
    );
    let topics: Vec<(&str, Option<TopicInfo>)> = names
        .iter()
        .filter(|name| describable.contains(name))
        .map(|name| (*name, metadata::topic_by_name(name)))
        .collect();

    let auto_create =
        request.allow_auto_topic_creation && broker_flag("auto.create.topics.enable", true);
    let missing: Vec<&str> = topics
        .iter()
        .filter(|(_, info)| info.is_none())
        .map(|(name, _)| *name)
        .collect();
    let creatable = if !auto_create || missing.is_empty() || cluster_allowed(Operation::Create) {
        // Everything missing may be created (or nothing will be).
        None
    } else {
        Some(allowed_names(
            Operation::Create,
            ResourceType::Topic,
            missing.iter().copied(),
        ))
    };

    let may_create = |name: &str| creatable.as_ref().is_none_or(|c| c.contains(name));
    // Kafka auto-creates with one CreateTopics to its controller, which
    // refuses the whole batch over its record cap (a record per topic and
    // per partition): then every such topic stays LEADER_NOT_AVAILABLE
    // and none is created.
    let to_create = missing
        .iter()
        .filter(|name| auto_create && may_create(name) && auto_creatable(name))
        .count();
    let per_topic =
        request_caps::requested_partitions(-1, 0, default_partitions()).saturating_add(1);
    let within_cap = to_create.saturating_mul(per_topic) <= request_caps::MAX_RECORDS_PER_USER_OP;
    let mut responses = Vec::with_capacity(names.len());
    for (name, info) in &topics {
        responses.push(match info {
            Some(info) => existing_topic(info, version, live),
            None if auto_create && !may_create(name) => {
                missing_topic(name, ResponseError::TopicAuthorizationFailed.code())
            }
            None if !valid_topic_name(name) => {
                missing_topic(name, ResponseError::InvalidTopicException.code())
            }
            None if !auto_create || reserved_topic_name(name) => {
                missing_topic(name, ResponseError::UnknownTopicOrPartition.code())
            }
            None if !within_cap => missing_topic(name, ResponseError::LeaderNotAvailable.code()),
            None => missing_topic(name, auto_create_topic(name)),
        });
    }
    responses.extend(
        names
            .iter()
            .filter(|name| !describable.contains(name))
            .map(|name| {
                missing_topic(name, ResponseError::TopicAuthorizationFailed.code())
                    .with_is_internal(false)
            }),
    );
    responses
}

/// Topics named by id: unknown ids get UNKNOWN_TOPIC_ID; topics the principal
/// may not describe get TOPIC_AUTHORIZATION_FAILED without their name (ids
/// are not secret, names are).
fn topics_by_id(ids: &[Uuid], version: i16, live: &HashSet<i32>) -> Vec<MetadataResponseTopic> {
    let known: Vec<(Uuid, Option<TopicInfo>)> = ids
        .iter()
        .map(|id| (*id, metadata::topic_by_id(from_kafka_uuid(*id))))
        .collect();
    let describable = allowed_names(
        Operation::Describe,
        ResourceType::Topic,
        known
            .iter()
            .filter_map(|(_, info)| info.as_ref().map(|t| t.name.as_str())),
    );
    known
        .into_iter()
        .map(|(id, info)| {
            let unnamed = |error: ResponseError| {
                MetadataResponseTopic::default()
                    .with_name(None)
                    .with_topic_id(id)
                    .with_error_code(error.code())
            };
            match info {
                None => unnamed(ResponseError::UnknownTopicId),
                Some(info) if describable.contains(&info.name) => {
                    existing_topic(&info, version, live)
                }
                Some(_) => unnamed(ResponseError::TopicAuthorizationFailed),
            }
        })
        .collect()
}

/// A topic that exists, with its partitions as the host reports them.
fn existing_topic(info: &TopicInfo, version: i16, live: &HashSet<i32>) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&info.name)))
        .with_topic_id(to_kafka_uuid(info.topic_id))
        .with_is_internal(info.is_internal)
        .with_partitions(
            info.partitions
                .iter()
                .map(|p| partition(p, version, live))
                .collect(),
        )
}

/// One partition, as Kafka's metadata cache answers: LEADER_NOT_AVAILABLE
/// (and leader -1) when the leader is not a live broker; in v0 only live
/// replicas are listed and a missing one is REPLICA_NOT_AVAILABLE.
fn partition(info: &PartitionInfo, version: i16, live: &HashSet<i32>) -> MetadataResponsePartition {
    let listed = |ids: &[i32]| -> Vec<BrokerId> {
        let live_only = |id: &i32| version > 0 || live.contains(id);
        ids.iter()
            .copied()
            .filter(live_only)
            .map(BrokerId)
            .collect()
    };
    let (replicas, isr) = (listed(&info.replicas), listed(&info.isr));
    let listed_all = |ids: &[i32]| ids.iter().copied().map(BrokerId).collect();
    let (leader, error) = if !live.contains(&info.leader_id) {
        (-1, ResponseError::LeaderNotAvailable.code())
    } else if replicas.len() < info.replicas.len() || isr.len() < info.isr.len() {
        (info.leader_id, ResponseError::ReplicaNotAvailable.code())
    } else {
        (info.leader_id, gregor_sdk::NONE)
    };
    MetadataResponsePartition::default()
        .with_error_code(error)
        .with_partition_index(info.partition)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(info.leader_epoch)
        .with_replica_nodes(replicas)
        .with_isr_nodes(isr)
        .with_offline_replicas(listed_all(&info.offline_replicas))
}

/// A named topic without partitions: an error, or LEADER_NOT_AVAILABLE
/// right after auto-creation.
fn missing_topic(name: &str, error_code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(error_code)
        .with_is_internal(is_internal_topic(name))
}

/// The broker's `num.partitions`, which an auto-created topic gets.
fn default_partitions() -> i32 {
    metadata::broker_config("num.partitions")
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(1)
}

/// Creates a topic with the broker's defaults, as Kafka's
/// AutoTopicCreationManager does. The new topic has no leader to report in
/// this response: LEADER_NOT_AVAILABLE tells the client to ask again (also
/// when another request created it first); other errors pass through.
fn auto_create_topic(name: &str) -> i16 {
    let topic = NewTopic {
        name: name.to_string(),
        num_partitions: -1,
        replication_factor: -1,
        configs: Vec::new(),
        replica_assignment: Vec::new(),
    };
    match metadata::create_topic(&topic, false) {
        Ok(_) => ResponseError::LeaderNotAvailable.code(),
        Err(error) if error.code == ResponseError::TopicAlreadyExists.code() => {
            ResponseError::LeaderNotAvailable.code()
        }
        Err(error) => error.code,
    }
}

/// Fills the authorized-operations bitfield (v8+, when asked for) of every
/// topic the principal may describe, in one authorization batch. As in
/// Kafka, authorization failures and unknown ids keep the default.
fn add_authorized_operations(topics: &mut [MetadataResponseTopic]) {
    let failed = ResponseError::TopicAuthorizationFailed.code();
    let described = |t: &&mut MetadataResponseTopic| t.name.is_some() && t.error_code != failed;
    let names: Vec<String> = topics
        .iter()
        .filter(|t| t.error_code != failed)
        .filter_map(|t| t.name.as_ref().map(|name| name.to_string()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut operations = authorized_operations(ResourceType::Topic, &names).into_iter();
    for topic in topics.iter_mut().filter(described) {
        topic.topic_authorized_operations = operations.next().unwrap_or(0);
    }
}

/// Kafka rejects topic ids and unnamed topics before v12 (ids arrived in the
/// v10 schema but were never served there), and a topic with neither a name
/// nor an id in any version.
fn valid_topic_references(request: &MetadataRequest, version: i16) -> bool {
    request.topics.iter().flatten().all(|t| {
        let has_id = !t.topic_id.is_nil();
        if version < 12 {
            t.name.is_some() && !has_id
        } else {
            t.name.is_some() || has_id
        }
    })
}

/// Kafka's `MetadataRequest.getErrorResponse`: every named topic with the
/// error (an unnamed one as ""), not internal, without partitions.
fn failed(request: &MetadataRequest, error_code: i16) -> MetadataResponse {
    let topics = request
        .topics
        .iter()
        .flatten()
        .map(|t| {
            MetadataResponseTopic::default()
                .with_name(Some(t.name.clone().unwrap_or_default()))
                .with_topic_id(t.topic_id)
                .with_error_code(error_code)
                .with_is_internal(false)
        })
        .collect();
    MetadataResponse::default().with_topics(topics)
}

/// Kafka's KRaft metadata log, which its controller refuses to create as
/// a topic.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Names auto-creation must not make user topics of: Kafka's internal
/// topics and its metadata log.
fn reserved_topic_name(name: &str) -> bool {
    is_internal_topic(name) || name == CLUSTER_METADATA_TOPIC
}

/// A missing topic auto-creation makes: a valid, unreserved name.
fn auto_creatable(name: &str) -> bool {
    valid_topic_name(name) && !reserved_topic_name(name)
}

/// Kafka's `Topic.validate`: 1 to 249 of `[a-zA-Z0-9._-]`, not "." or "..".
fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 249
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(str_bytes(name))
}

fn dedup_in_order<T: Eq + Hash + Copy>(items: &mut Vec<T>) {
    let mut seen = HashSet::with_capacity(items.len());
    items.retain(|item| seen.insert(*item));
}

gregor_sdk::export_handler!(Metadata);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use gregor_sdk::kafka_protocol::protocol::Encodable;
    use gregor_sdk::testing::assert_encodes_for_served_versions;

    fn info(leader_id: i32, replicas: &[i32]) -> PartitionInfo {
        PartitionInfo {
            partition: 0,
            leader_id,
            leader_epoch: 3,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            offline_replicas: Vec::new(),
        }
    }

    #[test]
    fn partitions_report_leader_and_replicas_as_kafka_does() {
        let live = HashSet::from([1]);
        let ok = partition(&info(1, &[1]), 9, &live);
        assert_eq!(
            (ok.error_code, ok.leader_id, ok.leader_epoch),
            (0, BrokerId(1), 3)
        );
        let offline = partition(&info(2, &[2]), 9, &live);
        let no_leader = ResponseError::LeaderNotAvailable.code();
        assert_eq!(
            (offline.error_code, offline.leader_id),
            (no_leader, BrokerId(-1))
        );
        // v0 lists only live replicas and flags the missing ones.
        let v0 = partition(&info(1, &[1, 2]), 0, &live);
        assert_eq!(v0.error_code, ResponseError::ReplicaNotAvailable.code());
        assert_eq!(v0.replica_nodes, vec![BrokerId(1)]);
        let v1 = partition(&info(1, &[1, 2]), 1, &live);
        assert_eq!((v1.error_code, v1.replica_nodes.len()), (0, 2));
    }

    #[test]
    fn topic_ids_are_served_from_v12() {
        let by_id = MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(Uuid::from_u64_pair(1, 2));
        let by_name = MetadataRequestTopic::default().with_name(Some(topic_name("t")));
        let request = |topics| MetadataRequest::default().with_topics(Some(topics));
        assert!(valid_topic_references(&request(vec![by_name.clone()]), 1));
        assert!(!valid_topic_references(&request(vec![by_id.clone()]), 11));
        assert!(valid_topic_references(&request(vec![by_id.clone()]), 12));
        let unnamed = MetadataRequestTopic::default().with_name(None);
        assert!(!valid_topic_references(&request(vec![unnamed]), 12));
        assert!(valid_topic_references(&MetadataRequest::default(), 12));
    }

    #[test]
    fn topic_names_follow_kafka() {
        assert!(valid_topic_name("orders.v1_eu-west"));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name("."));
        assert!(!valid_topic_name(".."));
        assert!(!valid_topic_name("with space"));
        assert!(!valid_topic_name(&"a".repeat(250)));
        assert!(valid_topic_name(&"a".repeat(249)));
    }

    #[test]
    fn internal_names_are_not_auto_created() {
        for name in [
            "__consumer_offsets",
            "__transaction_state",
            "__share_group_state",
            "__cluster_metadata",
        ] {
            assert!(!auto_creatable(name), "{name}");
        }
        assert!(auto_creatable("__my_topic"));
        assert!(auto_creatable("orders"));
        assert!(!auto_creatable("with space"));
        let internal = missing_topic(
            "__consumer_offsets",
            ResponseError::UnknownTopicOrPartition.code(),
        );
        assert!(internal.is_internal);
        assert!(!missing_topic("__cluster_metadata", 3).is_internal);
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        let named = |name: &str| MetadataRequestTopic::default().with_name(Some(topic_name(name)));
        let request = MetadataRequest::default().with_topics(Some(vec![named("a"), named("b")]));
        let names: Vec<Option<String>> = failed(&request, code)
            .topics
            .iter()
            .map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect();
        assert_eq!(names, vec![Some("a".to_string()), Some("b".to_string())]);
        // All topics asked for: no topic to answer.
        let all = failed(&MetadataRequest::default().with_topics(None), code);
        assert!(all.topics.is_empty());
        let live = HashSet::from([1]);
        let existing = TopicInfo {
            name: "t".to_string(),
            topic_id: gregor_sdk::Uuid { high: 1, low: 2 },
            is_internal: false,
            partitions: vec![info(1, &[1])],
        };
        let response = MetadataResponse::default().with_topics(vec![
            existing_topic(&existing, 9, &live),
            missing_topic("m", ResponseError::LeaderNotAvailable.code()),
        ]);
        assert_encodes_for_served_versions::<Metadata>(&[request], &[response]);
    }

    #[test]
    fn an_id_only_topic_fails_with_its_id() {
        let by_id = MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(Uuid::from_u64_pair(1, 2));
        let code = ResponseError::UnknownServerError.code();
        let response = failed(
            &MetadataRequest::default().with_topics(Some(vec![by_id])),
            code,
        );
        assert!(response.encode(&mut Vec::new(), 12).is_ok());
        assert_eq!(response.topics[0].topic_id, Uuid::from_u64_pair(1, 2));
    }
}
