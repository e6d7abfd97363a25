//! Helpers of the replication tests (`replication.rs`,
//! `controlled_shutdown.rs`, `isr.rs`): topics placed on chosen replicas,
//! a partition's leader and ISR as a node's Metadata shows them,
//! an idempotent acks=all producer that keeps writing while brokers come
//! and go, and reading a partition back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use crate::cluster::{call, metadata, Cluster};
use crate::kafka::poll_values;
use crate::wait_for;

/// How long replication or an election may take in these tests.
pub const CONVERGE: Duration = Duration::from_secs(40);

/// Partition 0 of a topic as one node's Metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub error_code: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// Creates `topic` with one partition on `replicas` (the first leads)
/// through node 1, with `configs`.
pub fn create_on(cluster: &Cluster, topic: &str, replicas: &[i32], configs: &[(&str, &str)]) {
    let configs = configs
        .iter()
        .map(|(name, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string((*name).to_string()))
                .with_value(Some(StrBytes::from_string((*value).to_string())))
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(replicas.iter().copied().map(BrokerId).collect())])
            .with_configs(configs)]);
    let response = call(cluster.node(1).addr(), &request, 5).expect("a CreateTopics answer");
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
}

/// Partition 0 of `topic` as node `via` answers Metadata now (None: the
/// node or the topic is not there).
pub fn partition_view(cluster: &Cluster, via: i32, topic: &str) -> Option<PartitionView> {
    let md = metadata(cluster.node(via).addr())?;
    let t = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))?;
    let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|id| id.0).collect();
    isr.sort_unstable();
    Some(PartitionView {
        error_code: p.error_code,
        leader: p.leader_id.0,
        leader_epoch: p.leader_epoch,
        replicas: p.replica_nodes.iter().map(|id| id.0).collect(),
        isr,
    })
}

/// Waits until node `via` shows partition 0 of `topic` as `ok` accepts it.
pub fn await_view(
    cluster: &Cluster,
    via: i32,
    topic: &str,
    what: &str,
    ok: impl Fn(&PartitionView) -> bool,
) -> PartitionView {
    wait_for(
        &format!("{topic}-0 {what}, seen by node {via}"),
        CONVERGE,
        || partition_view(cluster, via, topic).filter(|view| ok(view)),
    )
}

/// The partition's (leader, leader epoch) as node `via` reports it, once
/// it has a leader `ok` accepts.
pub fn leader_where(
    cluster: &Cluster,
    via: i32,
    topic: &str,
    ok: impl Fn(i32, i32) -> bool,
) -> (i32, i32) {
    let view = await_view(cluster, via, topic, "has an accepted leader", |v| {
        v.leader >= 0 && ok(v.leader, v.leader_epoch)
    });
    (view.leader, view.leader_epoch)
}

/// An idempotent acks=all producer.
/// An acks=1 producer without idempotence (a leader alone may take its
/// writes: how a tail only one replica has is made).
pub fn acks_one(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("acks", "1")
        .set("enable.idempotence", "false")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("create a producer")
}

/// Each partition's leader of `topic` as node `via` sees it, once all
/// `partitions` have one (within `within`).
pub fn partition_leaders(
    cluster: &Cluster,
    via: i32,
    topic: &str,
    partitions: usize,
    within: Duration,
) -> BTreeMap<i32, i32> {
    wait_for(&format!("leaders of {topic} on node {via}"), within, || {
        let md = metadata(cluster.node(via).addr())?;
        let found = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let leaders: BTreeMap<i32, i32> = found
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        (leaders.len() == partitions && leaders.values().all(|l| *l >= 1)).then_some(leaders)
    })
}

pub fn durable_producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("create a producer")
}

pub fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

/// Every value of partition 0, read from the beginning through `bootstrap`.
pub fn consume(bootstrap: &str, topic: &str, n: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("group.id", "replication-test")
        .set("enable.auto.commit", "false")
        .create()
        .expect("create a consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assign partition 0");
    consumer.assign(&assignment).expect("assign");
    poll_values(
        &consumer,
        n,
        Duration::from_millis(200),
        CONVERGE,
        &format!("reading {topic}"),
    )
    .expect("consume")
}

/// What a [`steady_writes`] producer did: the values sent in order, and
/// each one's delivery error, if any.
pub struct Writes {
    pub sent: Vec<String>,
    pub failed: Vec<(String, String)>,
}

/// Writes `prefix-N` values to partition 0 of `topic` one after the other
/// (each waits for its acknowledgement, so the log order is the send
/// order), every `pause`, until `stop` is set.
pub fn steady_writes(
    producer: FutureProducer,
    topic: &str,
    prefix: &str,
    pause: Duration,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Writes> {
    let topic = topic.to_string();
    let prefix = prefix.to_string();
    tokio::spawn(async move {
        let mut writes = Writes {
            sent: Vec::new(),
            failed: Vec::new(),
        };
        let mut i = 0usize;
        while !stop.load(Ordering::Acquire) {
            let value = format!("{prefix}-{i:05}");
            i += 1;
            let record = FutureRecord::<str, str>::to(&topic)
                .payload(&value)
                .partition(0);
            let delivery = producer.send(record, Duration::from_secs(60)).await;
            if let Err((error, _)) = delivery {
                writes.failed.push((value.clone(), error.to_string()));
            }
            writes.sent.push(value);
            tokio::time::sleep(pause).await;
        }
        writes
    })
}

/// Delivers `values` to partition 0 of `topic` one after the other (30 s
/// each), panicking on the first failure.
pub async fn send(producer: &FutureProducer, topic: &str, values: &[String]) {
    for value in values {
        let record = FutureRecord::<str, str>::to(topic)
            .payload(value)
            .partition(0);
        if let Err((error, _)) = producer.send(record, Duration::from_secs(30)).await {
            panic!("delivering {value:?}: {error}");
        }
    }
}

/// `topic` with `partitions` partitions and replication factor 3,
/// created through node 1 (placed by the controller).
pub fn create_replicated(cluster: &Cluster, topic: &str, partitions: i32) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(3)]);
    let response = call(cluster.node(1).addr(), &request, 5).expect("a CreateTopics answer");
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
}

/// The read_committed values of partitions `0..partitions` of `topic`,
/// read from the start until at least `at_least` have come and nothing
/// more for 3 s (a minute at most).
pub fn read_committed(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    at_least: usize,
) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("group.id", format!("reader-{topic}"))
        .create()
        .expect("create a reader");
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition");
    }
    consumer.assign(&list).expect("assign");
    let mut values = Vec::new();
    let started = std::time::Instant::now();
    let mut last = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(60)
        && (values.len() < at_least || last.elapsed() < Duration::from_secs(3))
    {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            if let Some(Ok(value)) = rdkafka::message::Message::payload_view::<str>(&message) {
                values.push(value.to_string());
            }
            last = std::time::Instant::now();
        }
    }
    values
}
