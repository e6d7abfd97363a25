//! An offline partition with an out-of-sync replica alive, the case unclean
//! leader election is for (`isr.rs` elects through the topic's
//! `unclean.leader.election.enable`, `elect_leaders.rs` through an UNCLEAN
//! ElectLeaders), and the log such an election leaves.
//!
//! The cluster runs with a short `replica.lag.time.max.ms` (2 s) so the
//! ISR shrinks within the test.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::cluster::{broker_ids, metadata, Cluster};
use crate::replicated::{
    acks_one, await_view, consume, create_on, durable_producer, partition_view, send, values,
};
use crate::wait_for;

/// Kafka's LEADER_NOT_AVAILABLE.
pub const LEADER_NOT_AVAILABLE: i16 = 5;

/// What both replicas had, and the tail only the dead leader had.
pub struct Offline {
    pub shared: Vec<String>,
    pub tail: Vec<String>,
}

/// Creates `topic` on replicas 1 and 2 (node 3 holds none and keeps the
/// metadata quorum a majority) and makes partition 0 offline with node 2
/// alive but out of sync: node 2 is paused until the ISR shrinks to node
/// 1, node 1 takes an acks=1 tail node 2 never fetches and is killed, node
/// 2 resumes. Checks the partition is offline, the dead leader the last
/// ISR member, and node 2 live again.
pub async fn offline_with_a_lagging_replica(cluster: &mut Cluster, topic: &str) -> Offline {
    create_on(cluster, topic, &[1, 2], &[]);
    await_view(cluster, 1, topic, "has the ISR [1, 2]", |v| {
        v.leader == 1 && v.isr == [1, 2]
    });
    let shared = values("shared", 50);
    send(
        &durable_producer(&cluster.node(1).bootstrap()),
        topic,
        &shared,
    )
    .await;

    cluster.node(2).pause();
    let tail = values("only-on-1", 20);
    send(&acks_one(&cluster.node(1).bootstrap()), topic, &tail).await;
    await_view(cluster, 3, topic, "has the ISR [1]", |v| v.isr == [1]);

    cluster.node_mut(1).kill();
    cluster.node(2).resume();
    let offline = await_view(cluster, 3, topic, "offline", |v| v.leader == -1);
    assert_eq!(offline.error_code, LEADER_NOT_AVAILABLE);
    assert_eq!(offline.isr, [1], "the last in-sync replica stays recorded");
    wait_for("node 2 to be live again", Duration::from_secs(30), || {
        let md = metadata(cluster.node(3).addr())?;
        broker_ids(&md).contains(&2).then_some(())
    });
    // Still offline a while after node 2 is back: no clean leader.
    std::thread::sleep(Duration::from_secs(3));
    let still = partition_view(cluster, 2, topic).expect("metadata from node 2");
    assert_eq!(
        still.leader, -1,
        "an out-of-sync replica was elected: {still:?}"
    );
    Offline { shared, tail }
}

/// After an unclean election made node 2 leader, alone in the ISR: the
/// partition takes acks=all writes again, and its log is what node 2
/// had, without the dead leader's tail (but, possibly, its first record:
/// a fetch answered into node 2's socket just before SIGSTOP and read
/// after SIGCONT), then the new writes.
pub async fn assert_writable_without_the_tail(cluster: &Cluster, topic: &str, offline: &Offline) {
    let view = await_view(cluster, 3, topic, "led by node 2", |v| v.leader == 2);
    assert_eq!(view.isr, [2]);
    let bootstrap = format!(
        "{},{}",
        cluster.node(2).bootstrap(),
        cluster.node(3).bootstrap()
    );
    let after = values("after", 10);
    send(&durable_producer(&bootstrap), topic, &after).await;
    let watermarks: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("broker.address.family", "v4")
        .create()
        .expect("create a consumer");
    let (_, high) = watermarks
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("the watermarks");
    let read = consume(
        &bootstrap,
        topic,
        usize::try_from(high).expect("a watermark"),
    );
    let kept = read.len() - offline.shared.len() - after.len();
    assert!(
        kept < offline.tail.len(),
        "the whole tail survived: {read:?}"
    );
    let expected: Vec<String> = offline
        .shared
        .iter()
        .chain(&offline.tail[..kept])
        .chain(&after)
        .cloned()
        .collect();
    assert_eq!(read, expected);
}
