//! The controller's side of a 3-node combined-mode cluster on loopback:
//! its listener serves (and advertises) only the controller APIs,
//! DescribeQuorum answers with the voters and the leader, and the active
//! controller fences a SIGKILLed broker once its session expires (other
//! brokers' Metadata no longer list it, its leaderships move) and
//! unfences it when it comes back with the same data directory.
//!
//! Requests are raw Kafka frames encoded with `kafka-protocol`; the topic
//! is created with confluent-kafka (`tests/python/cluster.py`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gregor_tests::cluster::{self, broker_ids, call, metadata, script_json, Node};
use gregor_tests::wait_for;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerHeartbeatRequest, DescribeQuorumRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];
const API_VERSIONS: i16 = 18;
const SESSION_TIMEOUT_MS: u64 = 2000;

fn api_keys(addr: SocketAddr) -> Vec<i16> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("test"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let response = call(addr, &request, 3).expect("an ApiVersions answer");
    assert_eq!(response.error_code, 0);
    let mut keys: Vec<i16> = response.api_keys.iter().map(|k| k.api_key).collect();
    keys.sort_unstable();
    keys
}

/// The quorum as each node's controller listener describes it: (node,
/// partition error, leader, voters).
fn describe_quorum(node: &Node) -> (i16, i32, Vec<i32>) {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default()])]);
    let response = call(node.controller_addr(), &request, 2).expect("a DescribeQuorum answer");
    assert_eq!(response.error_code, 0);
    let partition = &response.topics[0].partitions[0];
    let mut voters: Vec<i32> = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    voters.sort_unstable();
    (partition.error_code, partition.leader_id.0, voters)
}

fn create_topic(bootstrap: &str, topic: &str) {
    let created = script_json("cluster.py", &["create", bootstrap, topic, "6", "3"]);
    assert!(created["error"].is_null(), "create failed: {created}");
}

#[test]
fn the_active_controller_serves_its_apis_and_fences_a_silent_broker() {
    let mut cluster = cluster::cluster(3)
        .timing(300, SESSION_TIMEOUT_MS, 15000)
        .start();
    let nodes = &mut cluster.nodes;
    wait_for("three live brokers", Duration::from_secs(40), || {
        metadata(nodes[0].addr()).filter(|m| broker_ids(m) == vec![1, 2, 3])
    });

    // The controller listener serves only the controller APIs; the broker
    // listener none of them (a request for one closes the connection).
    let mut expected = CONTROLLER_APIS.to_vec();
    expected.push(API_VERSIONS);
    expected.sort_unstable();
    assert_eq!(api_keys(nodes[0].controller_addr()), expected);
    let client_keys = api_keys(nodes[0].addr());
    assert!(client_keys.contains(&3) && client_keys.contains(&API_VERSIONS));
    assert!(
        CONTROLLER_APIS.iter().all(|key| !client_keys.contains(key)),
        "{client_keys:?}"
    );
    assert!(call(nodes[0].addr(), &BrokerHeartbeatRequest::default(), 0).is_none());
    assert!(call(nodes[0].controller_addr(), &MetadataRequest::default(), 12).is_none());

    // DescribeQuorum: the leader names itself and the three voters; the
    // others answer NOT_LEADER_OR_FOLLOWER.
    let answers: Vec<(i16, i32, Vec<i32>)> = nodes.iter().map(describe_quorum).collect();
    let leaders: Vec<&(i16, i32, Vec<i32>)> = answers.iter().filter(|a| a.0 == 0).collect();
    assert_eq!(leaders.len(), 1, "{answers:?}");
    let (_, leader, voters_seen) = leaders[0];
    assert_eq!(voters_seen, &vec![1, 2, 3]);
    assert!(
        answers.iter().filter(|a| a.0 != 0).all(|a| a.0 == 6),
        "{answers:?}"
    );
    let controller = metadata(nodes[0].addr()).unwrap().controller_id.0;
    assert_eq!(controller, *leader);

    // A broker that is not the active controller is SIGKILLed.
    create_topic(&nodes[0].bootstrap(), "fenced");
    let victim = nodes.iter().position(|n| n.id != *leader).unwrap();
    let victim_id = nodes[victim].id;
    let witness = nodes.iter().position(|n| n.id != victim_id).unwrap();
    let witness_addr = nodes[witness].addr();
    let killed = Instant::now();
    nodes[victim].kill();
    let fenced = wait_for("the killed broker fenced", Duration::from_secs(20), || {
        metadata(witness_addr).filter(|m| !broker_ids(m).contains(&victim_id))
    });
    let fenced_after = killed.elapsed();
    let topic = fenced
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "fenced"))
        .expect("the topic");
    for partition in &topic.partitions {
        assert_ne!(partition.leader_id.0, victim_id, "{partition:?}");
        assert!(
            partition.offline_replicas.iter().any(|r| r.0 == victim_id),
            "{partition:?}"
        );
        assert!(!partition.isr_nodes.iter().any(|r| r.0 == victim_id));
    }
    eprintln!(
        "broker {victim_id} SIGKILLed: fenced in Metadata after {fenced_after:?} \
         (broker.session.timeout.ms={SESSION_TIMEOUT_MS})"
    );
    assert!(fenced_after >= Duration::from_millis(SESSION_TIMEOUT_MS - 300));

    // Restarted with the same data directory: registered again, unfenced,
    // listed again by every broker.
    let restarted = Instant::now();
    nodes[victim].start();
    for node in nodes.iter() {
        let addr = node.addr();
        wait_for("the broker listed again", Duration::from_secs(30), || {
            metadata(addr).filter(|m| broker_ids(m) == vec![1, 2, 3])
        });
    }
    eprintln!(
        "broker {victim_id} restarted: listed again after {:?}",
        restarted.elapsed()
    );
}
