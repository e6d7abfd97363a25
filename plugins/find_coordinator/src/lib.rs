//! FindCoordinator (ApiKey 10): which broker coordinates a group or a
//! transactional id, as Kafka's `KafkaApis.handleFindCoordinatorRequest`.
//!
//! - Versions 0-6; v4+ asks for a batch of keys (`coordinator_keys`) and
//!   answers per key, older versions ask for one key and answer at the top
//!   level (an error there carries node -1, host "" and port -1).
//! - Key type 0 (group) needs DESCRIBE on the Group, else
//!   GROUP_AUTHORIZATION_FAILED; key type 1 (transaction) needs DESCRIBE on
//!   the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; key
//!   type 2 (share) needs CLUSTER_ACTION on the Cluster, checked first as
//!   Kafka does (CLUSTER_AUTHORIZATION_FAILED), and is then INVALID_REQUEST
//!   (before v6, and here always: this broker has no share coordinator),
//!   as is any other key type.
//! - A group's coordinator is the leader of its partition of
//!   `__consumer_offsets`: Kafka's `Utils.abs(groupId.hashCode()) %
//!   partitions` (Java's String.hashCode), the leader as the request's
//!   listener advertises it (`metadata.describe-cluster`). A leader that
//!   is not a live broker there is COORDINATOR_NOT_AVAILABLE. The topic
//!   does not exist before the first group needs it: then it is created
//!   as Kafka's `getOrCreateInternalTopic` does, with
//!   `offsets.topic.num.partitions` (50), `offsets.topic.replication.factor`
//!   (3, at most the brokers there are) and `offsets.topic.segment.bytes`,
//!   compacted, through the controller in a cluster.
//! - A transactional id's coordinator is the leader of its partition of
//!   `__transaction_state`, by the same hash, created on first use as
//!   Kafka's `getOrCreateInternalTopic` does with
//!   `transaction.state.log.num.partitions` (50),
//!   `transaction.state.log.replication.factor` (3, at most the brokers
//!   there are), `transaction.state.log.segment.bytes` and
//!   `min.insync.replicas` from `transaction.state.log.min.isr` (2, at most
//!   the replication factor, so a small cluster's topic can be written),
//!   compacted and uncompressed.
//! - A failed handler (trap or timeout) is answered as Kafka's
//!   `getErrorResponse`: the error (and its message) for every key, with no
//!   coordinator.

use gregor_sdk::authorize::{cluster_allowed, is_allowed};
use gregor_sdk::authz::{Operation, ResourceType};
use gregor_sdk::kafka_protocol::messages::find_coordinator_response::Coordinator;
use gregor_sdk::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use gregor_sdk::kafka_protocol::protocol::StrBytes;
use gregor_sdk::metadata::{self, Broker, Cluster, NewTopic, TopicInfo};
use gregor_sdk::{Handler, Reply, RequestContext, ResponseError, NONE};

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;
const SHARE: i8 = 2;

/// Kafka's internal topic of group state.
const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's internal topic of transaction state.
const TRANSACTION_TOPIC: &str = "__transaction_state";

struct FindCoordinator;

impl Handler for FindCoordinator {
    gregor_sdk::api!(FindCoordinatorRequest, 0..=6);

    fn handle(
        ctx: &RequestContext,
        request: &FindCoordinatorRequest,
    ) -> Reply<FindCoordinatorResponse> {
        let mut nodes = Coordinators::new(metadata::describe_cluster());
        let version = ctx.api_version;
        let mut response = FindCoordinatorResponse::default();
        if version >= 4 {
            for key in &request.coordinator_keys {
                let (error, node) = coordinator(request.key_type, key, &mut nodes);
                let (node_id, host, port) = node_fields(node);
                response.coordinators.push(
                    Coordinator::default()
                        .with_key(key.clone())
                        .with_error_code(error)
                        .with_node_id(node_id)
                        .with_host(host)
                        .with_port(port),
                );
            }
        } else {
            let (error, node) = coordinator(request.key_type, &request.key, &mut nodes);
            let (node_id, host, port) = node_fields(node);
            response = response
                .with_error_code(error)
                .with_node_id(node_id)
                .with_host(host)
                .with_port(port);
            if version >= 1 {
                response.error_message = Some(StrBytes::from_static_str(message(error)));
            }
        }
        response.into()
    }

    /// Kafka's `getErrorResponse`: every key with the error.
    fn failed(
        ctx: &RequestContext,
        request: &FindCoordinatorRequest,
        error_code: i16,
    ) -> FindCoordinatorResponse {
        failed(request, ctx.api_version, error_code)
    }
}

/// The request answered with one error and no coordinator, as Kafka's
/// `prepareOldResponse` (before v4) and `prepareErrorResponse` (v4+).
fn failed(
    request: &FindCoordinatorRequest,
    version: i16,
    error_code: i16,
) -> FindCoordinatorResponse {
    let (node_id, host, port) = node_fields(None);
    let error_message = Some(StrBytes::from_static_str(message(error_code)));
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_error_code(error_code)
                    .with_error_message(error_message.clone())
                    .with_node_id(node_id)
                    .with_host(host.clone())
                    .with_port(port)
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        FindCoordinatorResponse::default()
            .with_error_code(error_code)
            .with_error_message(if version >= 1 { error_message } else { None })
            .with_node_id(node_id)
            .with_host(host)
            .with_port(port)
    }
}

/// Where coordinators are, looked up once per request: the cluster, and
/// each internal topic once a key needs it.
struct Coordinators {
    cluster: Cluster,
    offsets: Option<Result<TopicInfo, i16>>,
    transactions: Option<Result<TopicInfo, i16>>,
}

impl Coordinators {
    fn new(cluster: Cluster) -> Self {
        Self {
            cluster,
            offsets: None,
            transactions: None,
        }
    }

    fn broker(&self, node_id: i32) -> Option<Broker> {
        self.cluster
            .brokers
            .iter()
            .find(|broker| broker.node_id == node_id)
            .cloned()
    }

    /// The leader of `group`'s partition of `__consumer_offsets`.
    fn group(&mut self, group: &str) -> Result<Broker, i16> {
        let topic = self
            .offsets
            .get_or_insert_with(|| internal_topic(&OFFSETS))
            .clone()?;
        self.leader_for(&topic, group)
    }

    /// The leader of `transactional_id`'s partition of
    /// `__transaction_state`.
    fn transaction(&mut self, transactional_id: &str) -> Result<Broker, i16> {
        let topic = self
            .transactions
            .get_or_insert_with(|| internal_topic(&TRANSACTIONS))
            .clone()?;
        self.leader_for(&topic, transactional_id)
    }

    /// The live broker leading `key`'s partition of `topic`.
    fn leader_for(&self, topic: &TopicInfo, key: &str) -> Result<Broker, i16> {
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let partition = partition_for(key, count);
        let leader = topic
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.leader_id);
        leader
            .and_then(|leader| self.broker(leader))
            .ok_or(ResponseError::CoordinatorNotAvailable.code())
    }
}

/// The partition of `__consumer_offsets` that holds `group`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions` (Java's String.hashCode
/// over UTF-16 units; Utils.abs maps MIN_VALUE to 0).
fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    hash.checked_abs().unwrap_or(0) % partitions.max(1)
}

/// An internal topic and the broker settings Kafka creates it with.
struct Internal {
    name: &'static str,
    prefix: &'static str,
    /// `compression.type` (the producer's for offsets, none for
    /// transaction state, as Kafka).
    compression: &'static str,
    /// The setting `min.insync.replicas` comes from, if any.
    min_isr: Option<&'static str>,
}

const OFFSETS: Internal = Internal {
    name: OFFSETS_TOPIC,
    prefix: "offsets.topic",
    compression: "producer",
    min_isr: None,
};

const TRANSACTIONS: Internal = Internal {
    name: TRANSACTION_TOPIC,
    prefix: "transaction.state.log",
    compression: "uncompressed",
    min_isr: Some("transaction.state.log.min.isr"),
};

/// The internal topic, created if it does not exist yet (Kafka's
/// `getOrCreateInternalTopic`); COORDINATOR_NOT_AVAILABLE when it cannot be.
/// The configured replication factor is asked for first: the host decides
/// it on an image brought up to date with the quorum, so a cluster still
/// forming on this broker's view gets its full factor. Only when the
/// cluster has fewer live brokers is it capped at them (counted after
/// that refusal), as a small cluster needs.
fn internal_topic(internal: &Internal) -> Result<TopicInfo, i16> {
    if let Some(topic) = metadata::topic_by_name(internal.name) {
        return Ok(topic);
    }
    let setting = |name: &str, default: i64| {
        metadata::broker_config(name)
            .and_then(|value| value.trim().parse::<i64>().ok())
            .unwrap_or(default)
    };
    let prefix = internal.prefix;
    let configured = setting(&format!("{prefix}.replication.factor"), 3).max(1);
    match create_internal(internal, &setting, configured) {
        Err(code) if code == ResponseError::InvalidReplicationFactor.code() => {
            let brokers = metadata::describe_cluster().brokers.len();
            let capped = configured
                .min(i64::try_from(brokers).unwrap_or(i64::MAX))
                .max(1);
            create_internal(internal, &setting, capped)
                .map_err(|_| ResponseError::CoordinatorNotAvailable.code())
        }
        Err(_) => Err(ResponseError::CoordinatorNotAvailable.code()),
        created => created,
    }
}

/// Creates `internal` with `factor` replicas; the host's error code when
/// it cannot (a topic created meanwhile, by another broker's
/// FindCoordinator, is taken as it is).
fn create_internal(
    internal: &Internal,
    setting: &dyn Fn(&str, i64) -> i64,
    factor: i64,
) -> Result<TopicInfo, i16> {
    let prefix = internal.prefix;
    let partitions = setting(&format!("{prefix}.num.partitions"), 50);
    let segment_bytes = setting(&format!("{prefix}.segment.bytes"), 100 * 1024 * 1024);
    let mut configs = vec![
        ("cleanup.policy".into(), Some("compact".into())),
        ("compression.type".into(), Some(internal.compression.into())),
        ("segment.bytes".into(), Some(segment_bytes.to_string())),
    ];
    if let Some(min_isr) = internal.min_isr {
        let min_isr = setting(min_isr, 2).clamp(1, factor);
        configs.push(("min.insync.replicas".into(), Some(min_isr.to_string())));
    }
    let topic = NewTopic {
        name: internal.name.to_string(),
        num_partitions: i32::try_from(partitions).unwrap_or(50),
        replication_factor: i16::try_from(factor).unwrap_or(1),
        configs,
        replica_assignment: Vec::new(),
    };
    match metadata::create_topic(&topic, false) {
        Ok(created) => Ok(created),
        Err(error) if error.code == ResponseError::TopicAlreadyExists.code() => {
            metadata::topic_by_name(internal.name)
                .ok_or(ResponseError::CoordinatorNotAvailable.code())
        }
        Err(error) => Err(error.code),
    }
}

/// Kafka's `getCoordinator`: an error, or the coordinator's node.
fn coordinator(key_type: i8, key: &str, nodes: &mut Coordinators) -> (i16, Option<Broker>) {
    let denied = match key_type {
        GROUP => (!is_allowed(Operation::Describe, ResourceType::Group, key))
            .then_some(ResponseError::GroupAuthorizationFailed),
        TRANSACTION => (!is_allowed(Operation::Describe, ResourceType::TransactionalId, key))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed),
        // Kafka checks CLUSTER_ACTION before it looks at the key type: a
        // caller without it learns nothing about share support.
        SHARE if !cluster_allowed(Operation::ClusterAction) => {
            Some(ResponseError::ClusterAuthorizationFailed)
        }
        // No share coordinator here (nor before v6), and no other key type.
        _ => Some(ResponseError::InvalidRequest),
    };
    if let Some(error) = denied {
        return (error.code(), None);
    }
    let found = if key_type == GROUP {
        nodes.group(key)
    } else {
        nodes.transaction(key)
    };
    match found {
        Ok(node) => (NONE, Some(node)),
        Err(code) => (code, None),
    }
}

fn node_fields(node: Option<Broker>) -> (BrokerId, StrBytes, i32) {
    match node {
        Some(node) => (
            BrokerId(node.node_id),
            StrBytes::from_string(node.host),
            node.port,
        ),
        None => (BrokerId(-1), StrBytes::default(), -1),
    }
}

/// What Kafka puts in `error_message` (v1-3): the error's message, "NONE"
/// on success.
fn message(error: i16) -> &'static str {
    match error {
        NONE => "NONE",
        code if code == ResponseError::GroupAuthorizationFailed.code() => {
            "Not authorized to access group."
        }
        code if code == ResponseError::TransactionalIdAuthorizationFailed.code() => {
            "Transactional Id authorization failed."
        }
        code if code == ResponseError::ClusterAuthorizationFailed.code() => {
            "Cluster authorization failed."
        }
        code if code == ResponseError::CoordinatorNotAvailable.code() => {
            "The coordinator is not available."
        }
        code if code == ResponseError::UnknownServerError.code() => {
            "The server experienced an unexpected error when processing the request."
        }
        _ => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker.",
    }
}

gregor_sdk::export_handler!(FindCoordinator);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::testing::assert_encodes_for_served_versions;
    use gregor_sdk::KafkaError;
    use gregor_sdk::KafkaResponse;

    fn broker() -> Broker {
        Broker {
            node_id: 1,
            host: "h".into(),
            port: 9,
            rack: None,
        }
    }

    #[test]
    fn unknown_key_types_are_invalid() {
        let mut nodes = Coordinators::new(fake::single_node_cluster());
        let (error, node) = coordinator(7, "k", &mut nodes);
        assert_eq!(error, ResponseError::InvalidRequest.code());
        assert!(node.is_none());
        assert_eq!(node_fields(None).2, -1);
    }

    /// A principal without CLUSTER_ACTION on the Cluster.
    struct NoClusterAction;

    impl FakeHost for NoClusterAction {
        fn authorize(&self, action: &Action) -> bool {
            action.operation != Operation::ClusterAction
        }
        fn describe_cluster(&self) -> Cluster {
            OneBroker.describe_cluster()
        }
    }

    #[test]
    fn share_keys_need_cluster_action_before_anything_else() {
        let request = FindCoordinatorRequest::default()
            .with_key_type(SHARE)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g:t:0")]);
        let codes = |handled: fake::Handled<FindCoordinatorResponse>| {
            let response = handled.response.unwrap_or_default();
            response
                .coordinators
                .iter()
                .map(|c| c.error_code)
                .collect::<Vec<_>>()
        };
        let denied = fake::handle::<FindCoordinator>(NoClusterAction, 6, &request);
        let cluster_denied = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(codes(denied), vec![cluster_denied]);
        let allowed = fake::handle::<FindCoordinator>(OneBroker, 6, &request);
        assert_eq!(codes(allowed), vec![ResponseError::InvalidRequest.code()]);
        let old = FindCoordinatorRequest::default()
            .with_key_type(SHARE)
            .with_key(StrBytes::from_static_str("g:t:0"));
        let response = fake::handle::<FindCoordinator>(NoClusterAction, 3, &old).response;
        assert_eq!(response.map(|r| r.error_code), Some(cluster_denied));
    }

    fn request() -> FindCoordinatorRequest {
        FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("g"))
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("a"),
                StrBytes::from_static_str("b"),
            ])
    }

    #[test]
    fn encodes_for_every_served_version() {
        let code = ResponseError::UnknownServerError.code();
        for version in 0..=6 {
            let response = failed(&request(), version, code);
            if version >= 4 {
                assert_eq!(response.error_codes(), vec![NONE, code, code], "v{version}");
                let keys: Vec<&str> = response
                    .coordinators
                    .iter()
                    .map(|c| c.key.as_str())
                    .collect();
                assert_eq!(keys, vec!["a", "b"]);
                assert!(response.coordinators.iter().all(|c| c.port == -1));
            } else {
                assert_eq!(response.error_codes(), vec![code], "v{version}");
                assert_eq!((response.node_id, response.port), (BrokerId(-1), -1));
            }
        }
        // The answers' shapes per version (per key from v4, at the top level
        // with a message before) are encoded by the fake-host tests below.
        assert_encodes_for_served_versions::<FindCoordinator>(
            &[request()],
            &[FindCoordinatorResponse::default()],
        );
    }

    /// One broker, the controller; the principal may not DESCRIBE "secret".
    struct OneBroker;

    impl FakeHost for OneBroker {
        fn authorize(&self, action: &Action) -> bool {
            action.resource_name != "secret"
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            vec![
                fake::single_node_topic(OFFSETS_TOPIC, 50),
                fake::single_node_topic(TRANSACTION_TOPIC, 50),
            ]
        }
        fn describe_cluster(&self) -> Cluster {
            Cluster {
                cluster_id: "c".into(),
                controller_id: 1,
                brokers: vec![broker()],
            }
        }
    }

    #[test]
    fn every_key_is_answered_with_this_broker_or_its_error() {
        let request = FindCoordinatorRequest::default()
            .with_key_type(TRANSACTION)
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("t"),
                StrBytes::from_static_str("secret"),
            ]);
        let handled = fake::handle::<FindCoordinator>(OneBroker, 4, &request);
        let answers: Vec<(String, i16, i32)> = handled
            .response
            .map(|r| r.coordinators)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.key.to_string(), c.error_code, c.port))
            .collect();
        let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
        assert_eq!(
            answers,
            vec![("t".into(), NONE, 9), ("secret".into(), denied, -1)]
        );
        assert_eq!(handled.counted_errors, vec![denied]);
    }

    #[test]
    fn old_versions_answer_at_the_top_with_a_message() {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let handled = fake::handle::<FindCoordinator>(OneBroker, 3, &request);
        let response = handled.response.expect("an answer");
        assert_eq!(
            (response.error_code, response.node_id, response.port),
            (NONE, BrokerId(1), 9)
        );
        assert_eq!(response.error_message.as_deref(), Some("NONE"));
    }

    #[test]
    fn groups_hash_to_partitions_as_kafka_does() {
        // Java: "group".hashCode() == 98629247; "zzzzzzzz" == -1910022912
        // (Utils.abs: 1910022912); "polygenelubricants" == MIN_VALUE.
        assert_eq!(partition_for("group", 50), 47);
        assert_eq!(partition_for("zzzzzzzz", 50), 12);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("", 50), 0);
    }

    /// Three brokers; partition p of `__consumer_offsets` led by broker
    /// p % 3 + 1, partition 5 by a broker that is not live.
    struct ThreeBrokers;

    impl FakeHost for ThreeBrokers {
        fn describe_cluster(&self) -> Cluster {
            let broker = |node_id| Broker {
                node_id,
                host: format!("b{node_id}"),
                port: 9000 + node_id,
                rack: None,
            };
            Cluster {
                cluster_id: "c".into(),
                controller_id: 2,
                brokers: vec![broker(1), broker(2), broker(3)],
            }
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            [OFFSETS_TOPIC, TRANSACTION_TOPIC]
                .into_iter()
                .map(|name| {
                    let mut topic = fake::single_node_topic(name, 50);
                    for p in &mut topic.partitions {
                        p.leader_id = if p.partition == 5 {
                            9
                        } else {
                            p.partition % 3 + 1
                        };
                    }
                    topic
                })
                .collect()
        }
    }

    fn answers(handled: fake::Handled<FindCoordinatorResponse>) -> Vec<(String, i16, i32, i32)> {
        handled
            .response
            .map(|r| r.coordinators)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.key.to_string(), c.error_code, c.node_id.0, c.port))
            .collect()
    }

    #[test]
    fn a_group_is_coordinated_by_its_partition_leader() {
        // "group" is in partition 47 (led by 3), "zzzzzzzz" in 12 (by 1),
        // "e" (101 % 50 = 1) by 2, and "7" (55 % 50 = 5) by no live broker.
        let request = FindCoordinatorRequest::default().with_coordinator_keys(
            ["group", "zzzzzzzz", "e", "7"]
                .into_iter()
                .map(StrBytes::from_static_str)
                .collect(),
        );
        let handled = fake::handle::<FindCoordinator>(ThreeBrokers, 4, &request);
        let unavailable = ResponseError::CoordinatorNotAvailable.code();
        assert_eq!(
            answers(handled),
            vec![
                ("group".into(), NONE, 3, 9003),
                ("zzzzzzzz".into(), NONE, 1, 9001),
                ("e".into(), NONE, 2, 9002),
                ("7".into(), unavailable, -1, -1),
            ]
        );
        // A transactional id is coordinated by the leader of its
        // partition of __transaction_state, by the same hash.
        let request = FindCoordinatorRequest::default()
            .with_key_type(TRANSACTION)
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("group"),
                StrBytes::from_static_str("7"),
            ]);
        let handled = fake::handle::<FindCoordinator>(ThreeBrokers, 4, &request);
        assert_eq!(
            answers(handled),
            vec![
                ("group".into(), NONE, 3, 9003),
                ("7".into(), unavailable, -1, -1)
            ]
        );
    }

    /// The host's answer to a factor beyond its one broker.
    fn beyond_one_broker(topic: &NewTopic) -> Option<KafkaError> {
        (topic.replication_factor > 1).then(|| KafkaError {
            code: ResponseError::InvalidReplicationFactor.code(),
            message: Some("only 1 broker".into()),
        })
    }

    /// No `__consumer_offsets` yet: it is created as Kafka creates it,
    /// with the configured partitions, the configured factor refused by
    /// the one broker, then that factor capped at it.
    struct NoOffsetsTopic;

    impl FakeHost for NoOffsetsTopic {
        fn describe_cluster(&self) -> Cluster {
            fake::single_node_cluster()
        }
        fn broker_config(&self, name: &str) -> Option<String> {
            (name == "offsets.topic.num.partitions").then(|| "7".to_string())
        }
        fn create_topic(
            &self,
            topic: &NewTopic,
            validate_only: bool,
        ) -> Result<TopicInfo, KafkaError> {
            assert!(!validate_only);
            assert_eq!(topic.name, OFFSETS_TOPIC);
            if let Some(refused) = beyond_one_broker(topic) {
                assert_eq!(topic.replication_factor, 3, "the configured factor first");
                return Err(refused);
            }
            assert_eq!((topic.num_partitions, topic.replication_factor), (7, 1));
            assert!(topic
                .configs
                .contains(&("cleanup.policy".into(), Some("compact".into()))));
            Ok(fake::single_node_topic(OFFSETS_TOPIC, topic.num_partitions))
        }
    }

    #[test]
    fn the_offsets_topic_is_created_on_first_use() {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let handled = fake::handle::<FindCoordinator>(NoOffsetsTopic, 3, &request);
        let response = handled.response.expect("an answer");
        assert_eq!((response.error_code, response.node_id), (NONE, BrokerId(1)));
    }

    /// This broker sees one broker, but the host (deciding on the
    /// quorum's image) places three replicas: the configured factor is
    /// asked for, not the count this broker saw.
    struct LaggingView;

    /// The factors LaggingView was asked for.
    static ASKED: std::sync::Mutex<Vec<i16>> = std::sync::Mutex::new(Vec::new());

    impl FakeHost for LaggingView {
        fn describe_cluster(&self) -> Cluster {
            fake::single_node_cluster()
        }
        fn create_topic(
            &self,
            topic: &NewTopic,
            _validate_only: bool,
        ) -> Result<TopicInfo, KafkaError> {
            ASKED.lock().unwrap().push(topic.replication_factor);
            Ok(fake::single_node_topic(OFFSETS_TOPIC, topic.num_partitions))
        }
    }

    #[test]
    fn the_offsets_topic_gets_the_configured_factor_when_the_cluster_has_it() {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let handled = fake::handle::<FindCoordinator>(LaggingView, 3, &request);
        let response = handled.response.expect("an answer");
        assert_eq!(response.error_code, NONE);
        assert_eq!(*ASKED.lock().unwrap(), vec![3]);
    }

    /// No `__transaction_state` yet: created as Kafka creates it, with
    /// `min.insync.replicas` from its setting, at most the factor.
    struct NoTransactionTopic;

    impl FakeHost for NoTransactionTopic {
        fn describe_cluster(&self) -> Cluster {
            fake::single_node_cluster()
        }
        fn broker_config(&self, name: &str) -> Option<String> {
            (name == "transaction.state.log.num.partitions").then(|| "3".to_string())
        }
        fn create_topic(
            &self,
            topic: &NewTopic,
            validate_only: bool,
        ) -> Result<TopicInfo, KafkaError> {
            assert!(!validate_only);
            assert_eq!(topic.name, TRANSACTION_TOPIC);
            if let Some(refused) = beyond_one_broker(topic) {
                return Err(refused);
            }
            assert_eq!((topic.num_partitions, topic.replication_factor), (3, 1));
            for config in [
                ("cleanup.policy", "compact"),
                ("compression.type", "uncompressed"),
                ("min.insync.replicas", "1"),
            ] {
                assert!(
                    topic
                        .configs
                        .contains(&(config.0.into(), Some(config.1.into()))),
                    "{config:?} in {:?}",
                    topic.configs
                );
            }
            Ok(fake::single_node_topic(
                TRANSACTION_TOPIC,
                topic.num_partitions,
            ))
        }
    }

    #[test]
    fn the_transaction_topic_is_created_on_first_use() {
        let request = FindCoordinatorRequest::default()
            .with_key_type(TRANSACTION)
            .with_key(StrBytes::from_static_str("t"));
        let handled = fake::handle::<FindCoordinator>(NoTransactionTopic, 3, &request);
        let response = handled.response.expect("an answer");
        assert_eq!((response.error_code, response.node_id), (NONE, BrokerId(1)));
    }
}
