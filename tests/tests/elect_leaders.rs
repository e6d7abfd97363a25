//! ElectLeaders in a cluster (issue 14, KIP-460): real elections through
//! the controller's rules and the metadata quorum.
//!
//! Three combined-mode nodes, a topic on replicas 1, 2, 3 (node 1 is the
//! preferred leader). Node 1 is killed and another replica takes over;
//! a PREFERRED election is refused while node 1 is away
//! (PREFERRED_LEADER_NOT_AVAILABLE); once node 1 is back in the ISR it
//! moves leadership back to node 1, a second one is ELECTION_NOT_NEEDED,
//! as is an UNCLEAN one of a partition that has a leader; an unknown
//! partition is UNKNOWN_TOPIC_OR_PARTITION. Records written before and
//! after are all read back from node 1.
//!
//! An UNCLEAN election brings back an offline partition whose only
//! in-sync replica is a dead broker (the topic's
//! `unclean.leader.election.enable` left false): the out-of-sync replica
//! leads, alone in the ISR, and takes writes again; what only the dead
//! leader had is gone.

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ElectLeadersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use gregor_tests::cluster::{self, call, Cluster};
use gregor_tests::replicated::{
    await_view, consume, create_on, durable_producer, leader_where, partition_view, send, values,
};
use gregor_tests::unclean::{assert_writable_without_the_tail, offline_with_a_lagging_replica};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
const ELECTION_NOT_NEEDED: i16 = 84;

/// ElectLeaders v2 of `partitions` through node `via`: each partition's
/// error code, in order.
fn elect(cluster: &Cluster, via: i32, unclean: bool, partitions: &[(&str, i32)]) -> Vec<i16> {
    let topics = partitions
        .iter()
        .map(|(topic, partition)| {
            TopicPartitions::default()
                .with_topic(TopicName(StrBytes::from_string((*topic).to_string())))
                .with_partitions(vec![*partition])
        })
        .collect();
    let request = ElectLeadersRequest::default()
        .with_election_type(i8::from(unclean))
        .with_topic_partitions(Some(topics))
        .with_timeout_ms(30_000);
    let response = call(cluster.node(via).addr(), &request, 2).expect("an ElectLeaders answer");
    assert_eq!(response.error_code, 0, "{response:?}");
    response
        .replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preferred_election_gives_leadership_back_to_the_first_replica() {
    let mut cluster = cluster::cluster(3)
        .set("replica.fetch.wait.max.ms", "200")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    let topic = "preferred";
    create_on(&cluster, topic, &[1, 2, 3], &[]);
    await_view(&cluster, 2, topic, "led by 1 with the ISR [1, 2, 3]", |v| {
        v.leader == 1 && v.isr == [1, 2, 3]
    });
    let before = values("before", 50);
    send(&durable_producer(&cluster.bootstrap()), topic, &before).await;
    assert_eq!(
        elect(&cluster, 2, false, &[(topic, 0)]),
        [ELECTION_NOT_NEEDED]
    );

    // Failover: another replica leads; the preferred one is away.
    cluster.node_mut(1).kill();
    let (interim, epoch) = leader_where(&cluster, 2, topic, |l, _| l != 1);
    assert_eq!(
        elect(&cluster, 2, false, &[(topic, 0)]),
        [PREFERRED_LEADER_NOT_AVAILABLE]
    );
    let during = values("during", 30);
    let bootstrap = format!(
        "{},{}",
        cluster.node(2).bootstrap(),
        cluster.node(3).bootstrap()
    );
    send(&durable_producer(&bootstrap), topic, &during).await;

    // Node 1 returns as a follower and rejoins the ISR; the election
    // moves leadership back to it.
    cluster.node_mut(1).restart();
    await_view(&cluster, 3, topic, "with node 1 back in the ISR", |v| {
        v.isr == [1, 2, 3]
    });
    let now = partition_view(&cluster, 3, topic).expect("metadata from node 3");
    assert_eq!(now.leader, interim, "the interim leader still leads");
    assert_eq!(
        elect(&cluster, 3, false, &[(topic, 0), ("no-such-topic", 0)]),
        [NONE, UNKNOWN_TOPIC_OR_PARTITION]
    );
    let view = await_view(&cluster, 2, topic, "led by node 1 again", |v| v.leader == 1);
    assert!(view.leader_epoch > epoch, "{view:?}");
    assert_eq!(
        elect(&cluster, 2, false, &[(topic, 0)]),
        [ELECTION_NOT_NEEDED]
    );
    assert_eq!(
        elect(&cluster, 2, true, &[(topic, 0)]),
        [ELECTION_NOT_NEEDED]
    );

    let after = values("after", 20);
    send(
        &durable_producer(&cluster.node(1).bootstrap()),
        topic,
        &after,
    )
    .await;
    let all: Vec<String> = before
        .iter()
        .chain(&during)
        .chain(&after)
        .cloned()
        .collect();
    assert_eq!(consume(&cluster.node(1).bootstrap(), topic, all.len()), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclean_election_brings_an_offline_partition_back() {
    let mut cluster = cluster::cluster(3)
        .set("replica.lag.time.max.ms", "2000")
        .set("replica.fetch.wait.max.ms", "200")
        .start();
    cluster.await_formed(&[1, 2, 3]);
    let topic = "offline";
    let offline = offline_with_a_lagging_replica(&mut cluster, topic).await;
    // The preferred replica (node 1) is dead; a clean election has no
    // candidate, an unclean one takes node 2.
    assert_eq!(
        elect(&cluster, 3, false, &[(topic, 0)]),
        [PREFERRED_LEADER_NOT_AVAILABLE]
    );
    assert_eq!(elect(&cluster, 3, true, &[(topic, 0)]), [NONE]);
    assert_writable_without_the_tail(&cluster, topic, &offline).await;
    assert_eq!(
        elect(&cluster, 3, true, &[(topic, 0)]),
        [ELECTION_NOT_NEEDED],
        "it has a leader now"
    );
}
