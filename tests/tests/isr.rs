//! The ISR over the wire (issue 14): three combined-mode nodes.
//!
//! - A follower that stops fetching (SIGSTOP) leaves the ISR once
//!   `replica.lag.time.max.ms` passes while the leader takes writes, with
//!   its broker still registered and unfenced (a long session timeout:
//!   the shrink is the leader's doing, not fencing); Metadata and
//!   DescribeTopicPartitions show it. After SIGCONT it catches up and
//!   the leader adds it back.
//! - A partition whose only in-sync replica is a dead leader stays
//!   offline (LEADER_NOT_AVAILABLE, no leader) while
//!   `unclean.leader.election.enable` is false, though an out-of-sync
//!   replica is alive; set on the topic with IncrementalAlterConfigs, the
//!   controller elects that replica, and what only the old leader had is
//!   gone, as the operator chose (all but, possibly, the first record of
//!   the tail, answered into the paused follower's socket before it
//!   stopped).

use std::time::Duration;

use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};

use gregor_tests::cluster::{self, broker_ids, call, metadata, Cluster};
use gregor_tests::replicated::acks_one;
use gregor_tests::replicated::{await_view, create_on, send, values};
use gregor_tests::unclean::{assert_writable_without_the_tail, offline_with_a_lagging_replica};
use gregor_tests::wait_for;

/// An acks=all producer that reports a broker's error at once (no
/// retries), so NOT_ENOUGH_REPLICAS reaches the test.
fn acks_all_without_retries(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("retries", "0")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "10000")
        .create()
        .expect("create a producer")
}

/// Sends `value` to partition 0 until its delivery ends as `wanted` says
/// (tried for 20 s): the last outcome, an offset or the error code.
async fn deliver_until(
    producer: &FutureProducer,
    topic: &str,
    value: &str,
    wanted: impl Fn(&Result<i64, RDKafkaErrorCode>) -> bool,
) -> Result<i64, RDKafkaErrorCode> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let record = FutureRecord::<str, str>::to(topic)
            .payload(value)
            .partition(0);
        let outcome = producer
            .send(record, Duration::from_secs(5))
            .await
            .map(|delivery| delivery.offset)
            .map_err(|(error, _)| error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail));
        if wanted(&outcome) || std::time::Instant::now() > deadline {
            return outcome;
        }
        eprintln!("{value}: {outcome:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Partition 0's ISR as node `via` answers DescribeTopicPartitions.
fn described_isr(cluster: &Cluster, via: i32, topic: &str) -> Option<Vec<i32>> {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            TopicRequest::default().with_name(TopicName(StrBytes::from_string(topic.to_string())))
        ])
        .with_response_partition_limit(10);
    let response = call(cluster.node(via).addr(), &request, 0)?;
    let partition = response.topics.first()?.partitions.first()?;
    let mut isr: Vec<i32> = partition.isr_nodes.iter().map(|id| id.0).collect();
    isr.sort_unstable();
    Some(isr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_follower_leaves_the_isr_and_rejoins_once_caught_up() {
    // Sessions far longer than the lag time: node 3 is never fenced here.
    let cluster = cluster::cluster(3)
        .timing(500, 60_000, 8_000)
        .set("replica.lag.time.max.ms", "2000")
        .set("replica.fetch.wait.max.ms", "200")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    let topic = "lagging";
    create_on(&cluster, topic, &[1, 2, 3], &[]);
    await_view(&cluster, 1, topic, "has the ISR [1, 2, 3]", |v| {
        v.leader == 1 && v.isr == [1, 2, 3]
    });

    cluster.node(3).pause();
    let producer = acks_one(&cluster.node(1).bootstrap());
    send(&producer, topic, &values("while-3-sleeps", 50)).await;
    let view = await_view(&cluster, 2, topic, "has the ISR [1, 2]", |v| {
        v.isr == [1, 2]
    });
    assert_eq!(view.leader, 1);
    let brokers = broker_ids(&metadata(cluster.node(1).addr()).expect("metadata"));
    assert_eq!(brokers, [1, 2, 3], "node 3 was fenced, not shrunk out");
    assert_eq!(described_isr(&cluster, 1, topic), Some(vec![1, 2]));

    // With min.insync.replicas above the ISR, an acks=all write is
    // refused before the append (NOT_ENOUGH_REPLICAS), an acks=1 one not.
    set_topic_config(&cluster, 1, topic, "min.insync.replicas", "3");
    let strict = acks_all_without_retries(&cluster.node(1).bootstrap());
    let refused = deliver_until(&strict, topic, "refused", |outcome| {
        *outcome == Err(RDKafkaErrorCode::NotEnoughReplicas)
    })
    .await;
    assert_eq!(refused, Err(RDKafkaErrorCode::NotEnoughReplicas));

    cluster.node(3).resume();
    send(&producer, topic, &values("after", 10)).await;
    await_view(&cluster, 2, topic, "has the ISR [1, 2, 3] again", |v| {
        v.isr == [1, 2, 3]
    });
    // The whole ISR back: the acks=all write is taken.
    let taken = deliver_until(&strict, topic, "taken", Result::is_ok).await;
    assert!(taken.is_ok_and(|offset| offset >= 60), "{taken:?}");
    wait_for(
        "DescribeTopicPartitions to show node 3 back",
        Duration::from_secs(10),
        || (described_isr(&cluster, 1, topic)? == [1, 2, 3]).then_some(()),
    );
    assert!(
        cluster
            .node(1)
            .log_text()
            .contains("followers out of sync leave the ISR"),
        "the leader never shrank the ISR"
    );
}

/// Sets `unclean.leader.election.enable` on `topic` through node `via`.
fn enable_unclean(cluster: &Cluster, via: i32, topic: &str) {
    set_topic_config(
        cluster,
        via,
        topic,
        "unclean.leader.election.enable",
        "true",
    );
}

/// Sets one config of `topic` through node `via`.
fn set_topic_config(cluster: &Cluster, via: i32, topic: &str, name: &str, value: &str) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(name.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_string())))]),
    ]);
    let response =
        call(cluster.node(via).addr(), &request, 1).expect("an IncrementalAlterConfigs answer");
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_sync_replica_leads_only_when_unclean_election_is_enabled() {
    let mut cluster = cluster::cluster(3)
        .set("replica.lag.time.max.ms", "2000")
        .set("replica.fetch.wait.max.ms", "200")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    let topic = "fragile";
    let offline = offline_with_a_lagging_replica(&mut cluster, topic).await;
    // Allowed now: node 2 leads, without the tail.
    enable_unclean(&cluster, 3, topic);
    assert_writable_without_the_tail(&cluster, topic, &offline).await;
}
