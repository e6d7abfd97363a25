//! Partition reassignment in a cluster (issue 14, KIP-455): real replicas
//! move, as Kafka's controller moves them.
//!
//! Three combined-mode nodes, AlterPartitionReassignments and
//! ListPartitionReassignments as raw requests (rdkafka's AdminClient has
//! neither), sent to a node that is not the leader.
//! - RF 1, moved from broker 1 to broker 2 under an acks=all producer:
//!   broker 2 creates its log and catches up, the ISR completes the move,
//!   leadership passes to broker 2 in a new epoch; every acknowledged
//!   record is read back from it, and broker 1's log directory is gone.
//! - RF 2 -> 3 with the new broker down: the reassignment stays in
//!   progress and ListPartitionReassignments shows it (adding [3]);
//!   a cancel reverts it, a second cancel is NO_REASSIGNMENT_IN_PROGRESS.
//!   With the broker back, RF 2 -> 3 completes once it is in sync; then
//!   RF 3 -> 2 without the leader completes at once: the leader moves and
//!   the removed broker deletes its log.
//! - Errors: unknown topic or partition, empty, unregistered or repeated
//!   targets, a replication factor change that is not allowed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use gregor_tests::cluster::{self, call, Cluster};
use gregor_tests::replicated::{
    await_view, consume, create_on, durable_producer, partition_view, send, steady_writes, values,
    CONVERGE,
};
use gregor_tests::wait_for;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// AlterPartitionReassignments v1 of partition 0 of each topic through
/// node `via` (None: cancel): each partition's error code, in order.
fn reassign(
    cluster: &Cluster,
    via: i32,
    allow_factor_change: bool,
    targets: &[(&str, i32, Option<Vec<i32>>)],
) -> Vec<i16> {
    let topics = targets
        .iter()
        .map(|(topic, partition, replicas)| {
            ReassignableTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(*partition)
                    .with_replicas(
                        replicas
                            .as_ref()
                            .map(|ids| ids.iter().copied().map(BrokerId).collect()),
                    )])
        })
        .collect();
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_allow_replication_factor_change(allow_factor_change)
        .with_topics(topics);
    let response = call(cluster.node(via).addr(), &request, 1).expect("an answer");
    assert_eq!(response.error_code, 0, "{response:?}");
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// One listed reassignment: (topic, partition, replicas, adding, removing).
type Listed = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// ListPartitionReassignments v0 through node `via`: of every topic, or
/// of partitions 0..4 of `topics`.
fn list(cluster: &Cluster, via: i32, topics: Option<&[&str]>) -> Vec<Listed> {
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(topics.map(|topics| {
            topics
                .iter()
                .map(|topic| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(name(topic))
                        .with_partition_indexes(vec![0, 1, 2, 3])
                })
                .collect()
        }));
    let response = call(cluster.node(via).addr(), &request, 0).expect("an answer");
    assert_eq!(response.error_code, 0, "{response:?}");
    let ids = |ids: &[BrokerId]| ids.iter().map(|id| id.0).collect::<Vec<_>>();
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

/// Partition 0's (leader, replicas, ISR sorted) in node `via`'s Metadata.
fn placement(cluster: &Cluster, via: i32, topic: &str) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    partition_view(cluster, via, topic).map(|v| (v.leader, v.replicas, v.isr))
}

fn await_placement(
    cluster: &Cluster,
    via: i32,
    topic: &str,
    what: &str,
    ok: impl Fn(i32, &[i32], &[i32]) -> bool,
) -> (i32, Vec<i32>, Vec<i32>) {
    wait_for(
        &format!("{topic}-0 {what}, seen by node {via}"),
        CONVERGE,
        || placement(cluster, via, topic).filter(|(l, r, i)| ok(*l, r, i)),
    )
}

/// Waits until `node`'s data directory holds (or not) `topic`-0's log.
fn await_log(cluster: &Cluster, node: i32, topic: &str, present: bool) {
    let dir = cluster
        .node(node)
        .data_dir()
        .join("partitions")
        .join(format!("{topic}-0"));
    let what = if present { "created" } else { "deleted" };
    wait_for(
        &format!("{} {what} on node {node}", dir.display()),
        CONVERGE,
        || (Path::new(&dir).exists() == present).then_some(()),
    );
}

fn three_nodes() -> Cluster {
    let cluster = cluster::cluster(3)
        .set("replica.fetch.wait.max.ms", "200")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moves_to_another_broker_under_a_producer() {
    let cluster = three_nodes();
    let topic = "moved";
    create_on(&cluster, topic, &[1], &[]);
    await_view(&cluster, 3, topic, "led by 1", |v| v.leader == 1);
    let before = values("before", 200);
    send(&durable_producer(&cluster.bootstrap()), topic, &before).await;
    await_log(&cluster, 1, topic, true);
    await_log(&cluster, 2, topic, false);

    let stop = Arc::new(AtomicBool::new(false));
    let writer = steady_writes(
        durable_producer(&cluster.bootstrap()),
        topic,
        "during",
        Duration::from_millis(5),
        Arc::clone(&stop),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        reassign(&cluster, 3, true, &[(topic, 0, Some(vec![2]))]),
        [0]
    );
    let (leader, replicas, isr) = await_placement(&cluster, 3, topic, "moved to 2", |l, r, _| {
        l == 2 && r == [2]
    });
    assert_eq!((leader, replicas, isr), (2, vec![2], vec![2]));
    let view = await_view(&cluster, 2, topic, "led by 2", |v| v.leader == 2);
    assert!(view.leader_epoch > 0, "a new leader epoch: {view:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Release);
    let writes = writer.await.expect("the writer");
    assert!(writes.failed.is_empty(), "failed: {:?}", writes.failed);
    assert!(
        writes.sent.len() > 10,
        "written during the move: {}",
        writes.sent.len()
    );

    await_log(&cluster, 2, topic, true);
    await_log(&cluster, 1, topic, false);
    assert!(list(&cluster, 1, None).is_empty(), "completed: none listed");
    let all: Vec<String> = before.iter().chain(&writes.sent).cloned().collect();
    assert_eq!(consume(&cluster.node(2).bootstrap(), topic, all.len()), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_are_added_listed_cancelled_and_removed() {
    let mut cluster = three_nodes();
    let topic = "grown";
    create_on(&cluster, topic, &[1, 2], &[]);
    await_view(&cluster, 3, topic, "with the ISR [1, 2]", |v| {
        v.isr == [1, 2]
    });
    await_log(&cluster, 1, topic, true);
    let first = values("first", 100);
    send(&durable_producer(&cluster.bootstrap()), topic, &first).await;

    // Errors, decided as Kafka's controller decides them.
    assert_eq!(
        reassign(
            &cluster,
            2,
            true,
            &[
                ("no-such-topic", 0, Some(vec![1])),
                (topic, 7, Some(vec![1])),
                (topic, 0, Some(vec![])),
                (topic, 0, Some(vec![9])),
                (topic, 0, Some(vec![1, 1])),
                (topic, 0, None),
            ]
        ),
        [
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION,
            INVALID_REPLICA_ASSIGNMENT,
            INVALID_REPLICA_ASSIGNMENT,
            INVALID_REPLICA_ASSIGNMENT,
            NO_REASSIGNMENT_IN_PROGRESS,
        ]
    );
    assert_eq!(
        reassign(&cluster, 2, false, &[(topic, 0, Some(vec![1, 2, 3]))]),
        [INVALID_REPLICATION_FACTOR]
    );

    // RF 2 -> 3 while broker 3 is down: in progress until cancelled.
    cluster.node_mut(3).kill();
    assert_eq!(
        reassign(&cluster, 2, true, &[(topic, 0, Some(vec![1, 2, 3]))]),
        [0]
    );
    let ongoing = (topic.to_string(), 0, vec![1, 2, 3], vec![3], vec![]);
    assert_eq!(list(&cluster, 1, None), std::slice::from_ref(&ongoing));
    assert_eq!(
        list(&cluster, 2, Some(&[topic, "no-such-topic"][..])),
        [ongoing]
    );
    assert_eq!(
        placement(&cluster, 1, topic).map(|(_, r, i)| (r, i)),
        Some((vec![1, 2, 3], vec![1, 2])),
        "the new replica is not in sync"
    );
    assert_eq!(reassign(&cluster, 1, true, &[(topic, 0, None)]), [0]);
    // Node 2 learns of the cancel made through node 1 as it applies it.
    wait_for("node 2 to list no reassignment", CONVERGE, || {
        list(&cluster, 2, None).is_empty().then_some(())
    });
    assert_eq!(
        placement(&cluster, 2, topic).map(|(_, r, i)| (r, i)),
        Some((vec![1, 2], vec![1, 2])),
        "reverted"
    );
    assert_eq!(
        reassign(&cluster, 1, true, &[(topic, 0, None)]),
        [NO_REASSIGNMENT_IN_PROGRESS]
    );

    // RF 2 -> 3 with broker 3 back: completes once it is in sync.
    cluster.node_mut(3).restart();
    cluster.await_formed(&[1, 2, 3]);
    assert_eq!(
        reassign(&cluster, 2, true, &[(topic, 0, Some(vec![1, 2, 3]))]),
        [0]
    );
    await_placement(&cluster, 1, topic, "on 1, 2, 3, all in sync", |l, r, i| {
        l == 1 && r == [1, 2, 3] && i == [1, 2, 3]
    });
    await_log(&cluster, 3, topic, true);
    assert!(list(&cluster, 3, None).is_empty());
    let second = values("second", 50);
    send(&durable_producer(&cluster.bootstrap()), topic, &second).await;

    // RF 3 -> 2 without the leader: complete at once, a new leader.
    assert_eq!(
        reassign(&cluster, 3, true, &[(topic, 0, Some(vec![3, 2]))]),
        [0]
    );
    let (leader, replicas, isr) = placement(&cluster, 3, topic).expect("metadata");
    assert_eq!((leader, replicas, isr), (3, vec![3, 2], vec![2, 3]));
    assert!(list(&cluster, 1, None).is_empty());
    await_log(&cluster, 1, topic, false);

    let third = values("third", 50);
    send(&durable_producer(&cluster.bootstrap()), topic, &third).await;
    let all: Vec<String> = first.iter().chain(&second).chain(&third).cloned().collect();
    assert_eq!(consume(&cluster.node(3).bootstrap(), topic, all.len()), all);
}
