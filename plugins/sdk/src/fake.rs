//! A fake host, so a handler's logic can be unit-tested natively without a
//! broker: the test implements [`FakeHost`] for what the handler asks
//! (authorization, topics, the group coordinator, ...), and
//! [`handle`] runs the handler exactly as the exported `handle` does
//! (decode, handle, count errors, throttle, encode), returning the decoded
//! response and what the handler reported to the host.
//!
//! On a native build, the SDK's import modules call the fake for the
//! functions below instead of the (unreachable) component imports; a
//! handler that calls an import the fake does not cover panics with its
//! name. Add a method here when a test needs one more.

use std::cell::RefCell;

use bytes::BytesMut;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::bindings::gregor::broker::controller::{
    BrokerRegistration, Heartbeat, HeartbeatState, PartitionChange, PartitionState,
    ProducerIdBlock, QuorumState,
};
use crate::bindings::gregor::broker::groups::{GroupOverview, OffsetCommit};
use crate::bindings::gregor::broker::logging::Level;
use crate::bindings::gregor::broker::metadata::{
    Cluster, ElectionResult, NewTopic, OngoingReassignment, TopicInfo,
};
use crate::bindings::gregor::broker::scram_credentials::{Deletion, Upsertion, UserCredentials};
use crate::bindings::gregor::broker::txn::{TxnGroupMember, TxnOffset, TxnPartitionResult};
use crate::bindings::gregor::broker::types::{
    AclBinding, Action, KafkaError, Operation, ResourceType,
};
use crate::handler::{run, Handler};
use crate::{Outcome, RequestContext, Uuid};

/// The host services a test provides. Every method has a default: allow
/// everything, know no topics, no throttling; the group coordinator calls
/// panic unless the test answers them.
pub trait FakeHost {
    /// Is the action allowed for the request's principal?
    fn authorize(&self, _action: &Action) -> bool {
        true
    }
    /// May the principal perform `operation` on some resource of the type?
    fn authorize_by_resource_type(
        &self,
        _operation: Operation,
        _resource_type: ResourceType,
    ) -> bool {
        true
    }
    fn list_topics(&self) -> Vec<TopicInfo> {
        Vec::new()
    }
    fn topic_by_name(&self, name: &str) -> Option<TopicInfo> {
        self.list_topics().into_iter().find(|t| t.name == name)
    }
    fn topic_by_id(&self, id: Uuid) -> Option<TopicInfo> {
        self.list_topics()
            .into_iter()
            .find(|t| (t.topic_id.high, t.topic_id.low) == (id.high, id.low))
    }
    fn describe_cluster(&self) -> Cluster {
        unfaked("metadata.describe-cluster")
    }
    fn elect_leaders(
        &self,
        _unclean: bool,
        _partitions: Option<&[(String, i32)]>,
    ) -> Vec<ElectionResult> {
        unfaked("metadata.elect-leaders")
    }
    fn alter_partition_reassignment(
        &self,
        _topic: &str,
        _partition: i32,
        _replicas: Option<&[i32]>,
        _allow_replication_factor_change: bool,
    ) -> Result<(), KafkaError> {
        unfaked("metadata.alter-partition-reassignment")
    }
    fn list_partition_reassignments(
        &self,
        _topics: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<OngoingReassignment> {
        unfaked("metadata.list-partition-reassignments")
    }
    /// No broker config is set.
    fn broker_config(&self, _name: &str) -> Option<String> {
        None
    }
    fn create_topic(
        &self,
        _topic: &NewTopic,
        _validate_only: bool,
    ) -> Result<TopicInfo, KafkaError> {
        unfaked("metadata.create-topic")
    }
    fn heartbeat(
        &self,
        _group_id: &str,
        _generation_id: i32,
        _member_id: &str,
        _group_instance_id: Option<&str>,
    ) -> Result<(), KafkaError> {
        unfaked("groups.heartbeat")
    }
    fn delete_groups(&self, _group_ids: &[String]) -> Vec<Option<KafkaError>> {
        unfaked("groups.delete-groups")
    }
    fn list_groups(&self, _states: &[String], _types: &[String]) -> Vec<GroupOverview> {
        unfaked("groups.list-groups")
    }
    /// The request quota's throttle time.
    fn request_throttle_ms(&self) -> i32 {
        0
    }
    // Batch A (groups, offsets, transactions).
    fn commit_offsets(
        &self,
        _group_id: &str,
        _generation_id: i32,
        _member_id: &str,
        _group_instance_id: Option<&str>,
        _retention_time_ms: i64,
        _offsets: &[OffsetCommit],
    ) -> Vec<Option<KafkaError>> {
        unfaked("groups.commit-offsets")
    }
    fn txn_offset_commit(
        &self,
        _transactional_id: &str,
        _group_id: &str,
        _producer_id: i64,
        _producer_epoch: i16,
        _member: &TxnGroupMember,
        _offsets: &[TxnOffset],
    ) -> Vec<TxnPartitionResult> {
        unfaked("txn.txn-offset-commit")
    }

    // Batch C (security): SCRAM credentials and the ACL store.
    fn describe_scram_credentials(&self, _users: Option<&[String]>) -> Vec<UserCredentials> {
        unfaked("scram-credentials.describe")
    }
    fn alter_scram_credentials(
        &self,
        _deletions: &[Deletion],
        _upsertions: &[Upsertion],
    ) -> Vec<Option<KafkaError>> {
        unfaked("scram-credentials.alter")
    }
    fn create_acls(&self, _bindings: &[AclBinding]) -> Vec<Option<KafkaError>> {
        unfaked("acl-admin.create-acls")
    }

    // The active controller (`controller.wit`).
    fn register_broker(&self, _registration: &BrokerRegistration) -> Result<i64, KafkaError> {
        unfaked("controller.register-broker")
    }
    fn broker_heartbeat(&self, _heartbeat: Heartbeat) -> Result<HeartbeatState, KafkaError> {
        unfaked("controller.broker-heartbeat")
    }
    fn unregister_broker(&self, _broker_id: i32) -> Result<(), KafkaError> {
        unfaked("controller.unregister-broker")
    }
    fn allocate_producer_ids(
        &self,
        _broker_id: i32,
        _broker_epoch: i64,
    ) -> Result<ProducerIdBlock, KafkaError> {
        unfaked("controller.allocate-producer-ids")
    }
    fn alter_partition(
        &self,
        _broker_id: i32,
        _broker_epoch: i64,
        _changes: &[PartitionChange],
    ) -> Result<Vec<PartitionState>, KafkaError> {
        unfaked("controller.alter-partition")
    }
    fn describe_quorum(&self) -> Result<QuorumState, KafkaError> {
        unfaked("controller.describe-quorum")
    }
}

fn unfaked(import: &str) -> ! {
    panic!("the fake host does not answer {import}: add it to gregor_sdk::fake::FakeHost")
}

/// What one handled request produced.
#[derive(Debug)]
pub struct Handled<R> {
    /// What the host would have been told.
    pub outcome: Outcome,
    /// The response sent, decoded again for the request's version.
    pub response: Option<R>,
    /// The error codes reported for the broker's metrics.
    pub counted_errors: Vec<i16>,
    /// The lines logged.
    pub logs: Vec<String>,
}

#[derive(Default)]
struct Recorded {
    counted_errors: Vec<i16>,
    logs: Vec<String>,
}

thread_local! {
    static HOST: RefCell<Option<Box<dyn FakeHost>>> = RefCell::new(None);
    static RECORDED: RefCell<Recorded> = RefCell::new(Recorded::default());
}

/// A request context for `version` of the handler's API, from an
/// anonymous PLAINTEXT client.
pub fn context<H: Handler>(version: i16) -> RequestContext {
    RequestContext {
        api_key: crate::handler::describe::<H>().api_key,
        api_version: version,
        correlation_id: 1,
        client_id: Some("fake-client".to_string()),
        principal: "User:ANONYMOUS".to_string(),
        client_host: "127.0.0.1".to_string(),
        listener: "PLAINTEXT".to_string(),
        security_protocol: "PLAINTEXT".to_string(),
    }
}

/// Encodes `request` for `version`, handles it with `host` as the broker,
/// and returns what came out.
pub fn handle<H>(
    host: impl FakeHost + 'static,
    version: i16,
    request: &H::Request,
) -> Handled<H::Response>
where
    H: Handler,
    H::Request: Encodable,
    H::Response: Decodable + HeaderVersion,
{
    // An old version (see crate::legacy) is written as a client of it would.
    let legacy = H::LEGACY.filter(|legacy| version < legacy.base);
    let wire = legacy.map_or(version, |legacy| legacy.base);
    let mut body = BytesMut::new();
    if let Err(error) = request.encode(&mut body, wire) {
        panic!("the test's request does not encode for v{version}: {error}");
    }
    let body = match legacy.map(|legacy| legacy.request_from_base(&body, version)) {
        Some(Ok(old)) => old,
        Some(Err(error)) => panic!("the test's request does not rewrite for v{version}: {error}"),
        None => body.to_vec(),
    };
    HOST.with(|slot| *slot.borrow_mut() = Some(Box::new(host)));
    RECORDED.with(|recorded| *recorded.borrow_mut() = Recorded::default());
    let outcome = match run::<H>(&context::<H>(version), &body) {
        crate::Answer::Outcome(outcome) => outcome,
        crate::Answer::RespondReferencing(_) => {
            panic!("the fake host hands out no record sets to reference")
        }
    };
    HOST.with(|slot| *slot.borrow_mut() = None);
    let recorded = RECORDED.with(|recorded| std::mem::take(&mut *recorded.borrow_mut()));
    let response = match &outcome {
        Outcome::Respond(bytes) => {
            let bytes = match legacy.map(|legacy| legacy.response_to_base(bytes, version)) {
                Some(Ok(base)) => base,
                Some(Err(error)) => panic!("the response does not rewrite for v{version}: {error}"),
                None => bytes.clone(),
            };
            let mut bytes = bytes::Bytes::from(bytes);
            match H::Response::decode(&mut bytes, wire) {
                Ok(response) => Some(response),
                Err(error) => panic!("the response does not decode for v{version}: {error}"),
            }
        }
        _ => None,
    };
    Handled {
        outcome,
        response,
        counted_errors: recorded.counted_errors,
        logs: recorded.logs,
    }
}

fn with_host<T>(call: impl FnOnce(&dyn FakeHost) -> T) -> T {
    HOST.with(|slot| match slot.borrow().as_deref() {
        Some(host) => call(host),
        None => panic!("no fake host: run the handler through gregor_sdk::fake::handle"),
    })
}

/// The native stand-ins for the imports [`FakeHost`] answers; the SDK's
/// import modules re-export them over the generated (wasm-only) ones.
pub mod imports {
    use super::*;

    pub fn authorize(actions: &[Action]) -> Vec<bool> {
        with_host(|host| actions.iter().map(|a| host.authorize(a)).collect())
    }
    pub fn authorize_by_resource_type(operation: Operation, resource_type: ResourceType) -> bool {
        with_host(|host| host.authorize_by_resource_type(operation, resource_type))
    }
    pub fn list_topics() -> Vec<TopicInfo> {
        with_host(|host| host.list_topics())
    }
    pub fn topic_by_name(name: &str) -> Option<TopicInfo> {
        with_host(|host| host.topic_by_name(name))
    }
    pub fn topic_by_id(id: Uuid) -> Option<TopicInfo> {
        with_host(|host| host.topic_by_id(id))
    }
    pub fn describe_cluster() -> Cluster {
        with_host(|host| host.describe_cluster())
    }
    pub fn elect_leaders(
        unclean: bool,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<ElectionResult> {
        with_host(|host| host.elect_leaders(unclean, partitions))
    }
    pub fn alter_partition_reassignment(
        topic: &str,
        partition: i32,
        replicas: Option<&[i32]>,
        allow_replication_factor_change: bool,
    ) -> Result<(), KafkaError> {
        with_host(|host| {
            host.alter_partition_reassignment(
                topic,
                partition,
                replicas,
                allow_replication_factor_change,
            )
        })
    }
    pub fn list_partition_reassignments(
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<OngoingReassignment> {
        with_host(|host| host.list_partition_reassignments(topics))
    }
    pub fn broker_config(name: &str) -> Option<String> {
        with_host(|host| host.broker_config(name))
    }
    pub fn create_topic(topic: &NewTopic, validate_only: bool) -> Result<TopicInfo, KafkaError> {
        with_host(|host| host.create_topic(topic, validate_only))
    }
    pub fn heartbeat(
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), KafkaError> {
        with_host(|host| host.heartbeat(group_id, generation_id, member_id, group_instance_id))
    }
    pub fn delete_groups(group_ids: &[String]) -> Vec<Option<KafkaError>> {
        with_host(|host| host.delete_groups(group_ids))
    }
    pub fn list_groups(states: &[String], types: &[String]) -> Vec<GroupOverview> {
        with_host(|host| host.list_groups(states, types))
    }
    pub fn record_request(exempt: bool) -> i32 {
        if exempt {
            0
        } else {
            with_host(|host| host.request_throttle_ms())
        }
    }
    pub fn count_errors(codes: &[i16]) {
        RECORDED.with(|recorded| recorded.borrow_mut().counted_errors.extend(codes));
    }
    pub fn log(_level: Level, message: &str) {
        RECORDED.with(|recorded| recorded.borrow_mut().logs.push(message.to_string()));
    }
    // Batch A (groups, offsets, transactions).
    pub fn commit_offsets(
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        retention_time_ms: i64,
        offsets: &[OffsetCommit],
    ) -> Vec<Option<KafkaError>> {
        with_host(|host| {
            host.commit_offsets(
                group_id,
                generation_id,
                member_id,
                group_instance_id,
                retention_time_ms,
                offsets,
            )
        })
    }
    pub fn txn_offset_commit(
        transactional_id: &str,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        member: &TxnGroupMember,
        offsets: &[TxnOffset],
    ) -> Vec<TxnPartitionResult> {
        with_host(|host| {
            host.txn_offset_commit(
                transactional_id,
                group_id,
                producer_id,
                producer_epoch,
                member,
                offsets,
            )
        })
    }

    // Batch C (security): SCRAM credentials and the ACL store.
    pub fn describe_scram_credentials(users: Option<&[String]>) -> Vec<UserCredentials> {
        with_host(|host| host.describe_scram_credentials(users))
    }
    pub fn alter_scram_credentials(
        deletions: &[Deletion],
        upsertions: &[Upsertion],
    ) -> Vec<Option<KafkaError>> {
        with_host(|host| host.alter_scram_credentials(deletions, upsertions))
    }
    pub fn register_broker(registration: &BrokerRegistration) -> Result<i64, KafkaError> {
        with_host(|host| host.register_broker(registration))
    }
    pub fn broker_heartbeat(heartbeat: Heartbeat) -> Result<HeartbeatState, KafkaError> {
        with_host(|host| host.broker_heartbeat(heartbeat))
    }
    pub fn unregister_broker(broker_id: i32) -> Result<(), KafkaError> {
        with_host(|host| host.unregister_broker(broker_id))
    }
    pub fn allocate_producer_ids(
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<ProducerIdBlock, KafkaError> {
        with_host(|host| host.allocate_producer_ids(broker_id, broker_epoch))
    }
    pub fn alter_partition(
        broker_id: i32,
        broker_epoch: i64,
        changes: &[PartitionChange],
    ) -> Result<Vec<PartitionState>, KafkaError> {
        with_host(|host| host.alter_partition(broker_id, broker_epoch, changes))
    }
    pub fn describe_quorum() -> Result<QuorumState, KafkaError> {
        with_host(|host| host.describe_quorum())
    }
    pub fn create_acls(bindings: &[AclBinding]) -> Vec<Option<KafkaError>> {
        with_host(|host| host.create_acls(bindings))
    }
}

// Fixtures for FakeHost answers (batch B).

/// Broker 1 alone, on localhost:9092, as a single node describes itself.
pub fn single_node_cluster() -> Cluster {
    Cluster {
        cluster_id: "fake-cluster".to_string(),
        controller_id: 1,
        brokers: vec![crate::bindings::gregor::broker::metadata::Broker {
            node_id: 1,
            host: "localhost".to_string(),
            port: 9092,
            rack: None,
        }],
    }
}

/// A topic with `partitions` partitions, each led by broker 1 (its only
/// replica) in epoch 0, as a single node hosts it; its id is derived from
/// its name.
pub fn single_node_topic(name: &str, partitions: i32) -> TopicInfo {
    let partition = |partition| crate::bindings::gregor::broker::metadata::PartitionInfo {
        partition,
        leader_id: 1,
        leader_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        offline_replicas: Vec::new(),
    };
    TopicInfo {
        name: name.to_string(),
        topic_id: Uuid {
            high: 0,
            low: name.bytes().fold(1, |id: u64, b| {
                id.wrapping_mul(31).wrapping_add(u64::from(b))
            }),
        },
        is_internal: false,
        partitions: (0..partitions).map(partition).collect(),
    }
}
