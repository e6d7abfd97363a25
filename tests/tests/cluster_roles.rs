//! A cluster with separate roles, as Kafka runs in production: three
//! controller-only nodes (`process.roles=controller`, ids 1-3, the
//! metadata quorum) and two broker-only nodes (`process.roles=broker`,
//! ids 4-5, which follow the metadata log without voting).
//!
//! Clients bootstrap from the brokers only; Metadata lists only the
//! brokers (and a broker as the controller, since clients cannot reach
//! the controllers); an RF 2 topic is created, produced to and consumed;
//! a controller node serves only its controller listener and the
//! controller APIs; SIGKILL of the active controller leaves the cluster
//! working; idempotent producers get producer ids from blocks the active
//! controller hands out over AllocateProducerIds, distinct across brokers.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use gregor_tests::cluster::{self, broker_ids, call, call_on, metadata, script_json, Roles};
use gregor_tests::wait_for;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeQuorumRequest, InitProducerIdRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];
const API_VERSIONS: i16 = 18;
const BROKERS: [i32; 2] = [4, 5];
/// More than one block (1000 ids) per broker, so each asks the
/// controller again (the prefetched block).
const IDS_PER_BROKER: usize = 1100;

fn roles() -> [Roles; 5] {
    [
        Roles::Controller,
        Roles::Controller,
        Roles::Controller,
        Roles::Broker,
        Roles::Broker,
    ]
}

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

/// The quorum leader as a controller's listener describes it (-1 if
/// that controller is not the leader).
fn quorum_leader(addr: SocketAddr) -> Option<i32> {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default()])]);
    let response = call(addr, &request, 2)?;
    let partition = response.topics.first()?.partitions.first()?;
    (partition.error_code == 0).then_some(partition.leader_id.0)
}

/// `count` idempotent InitProducerId (v4) answers from the broker at
/// `addr`, on one connection: the producer ids.
fn producer_ids(addr: SocketAddr, count: usize) -> Vec<i64> {
    let mut stream = TcpStream::connect(addr).expect("connect to a broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let request = InitProducerIdRequest::default()
        .with_transaction_timeout_ms(60_000)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    (0..count)
        .map(|_| {
            let answer = call_on(&mut stream, &request, 4).expect("an InitProducerId answer");
            assert_eq!(answer.error_code, 0, "{answer:?}");
            answer.producer_id.0
        })
        .collect()
}

fn roundtrip(bootstrap: &str, topic: &str) {
    let result = script_json("cluster_roles.py", &["roundtrip", bootstrap, topic, "200"]);
    assert_eq!(result["errors"], Value::Array(vec![]), "{result}");
    assert_eq!(result["produced"], 200, "{result}");
    assert_eq!(result["consumed"], 200, "{result}");
    assert_eq!(result["values_match"], true, "{result}");
}

#[test]
fn controller_only_and_broker_only_nodes_form_one_cluster() {
    let mut cluster = cluster::cluster(5).roles(&roles()).start();
    // Metadata lists the two brokers only, and names one of them as the
    // controller (the same on both).
    let controller = cluster.await_formed(&BROKERS);
    assert!(BROKERS.contains(&controller), "controller {controller}");
    let bootstrap = cluster.bootstrap();
    let listed = script_json("cluster.py", &["metadata", &bootstrap]);
    assert_eq!(listed["brokers"], serde_json::json!(BROKERS), "{listed}");

    // A controller-only node: its controller listener serves only the
    // controller APIs (a client API closes the connection), and it has no
    // other listener.
    let controller_node = cluster.node(1);
    let mut expected = CONTROLLER_APIS.to_vec();
    expected.push(API_VERSIONS);
    expected.sort_unstable();
    assert_eq!(api_keys(controller_node.controller_addr()), expected);
    assert!(call(
        controller_node.controller_addr(),
        &MetadataRequest::default(),
        12
    )
    .is_none());
    // The brokers serve the client APIs (and only the forwarded
    // controller ones).
    let broker_keys = api_keys(cluster.node(4).addr());
    assert!(broker_keys.contains(&0) && broker_keys.contains(&3));
    assert!(!broker_keys.contains(&62) && !broker_keys.contains(&67));

    // RF 2 over the two brokers: each partition on both, leaders spread.
    let created = script_json("cluster.py", &["create", &bootstrap, "roles", "4", "2"]);
    assert_eq!(created["error"], Value::Null, "{created}");
    let topic = wait_for(
        "both brokers show the topic",
        Duration::from_secs(10),
        || {
            let seen: Vec<Value> = cluster
                .brokers()
                .iter()
                .map(|b| {
                    script_json("cluster.py", &["metadata", &b.bootstrap()])["topics"]["roles"]
                        .clone()
                })
                .collect();
            (seen[0].as_object().map(|o| o.len()) == Some(4) && seen[0] == seen[1])
                .then(|| seen[0].clone())
        },
    );
    let mut leaders = HashSet::new();
    for partition in topic.as_object().unwrap().values() {
        let mut replicas: Vec<i64> = partition["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_i64)
            .collect();
        replicas.sort_unstable();
        assert_eq!(replicas, [4, 5], "{topic}");
        leaders.insert(partition["leader"].as_i64().unwrap());
    }
    assert_eq!(
        leaders.len(),
        2,
        "leaders spread over both brokers: {topic}"
    );
    let wide = script_json("cluster.py", &["create", &bootstrap, "too-wide", "1", "3"]);
    assert!(
        wide["error"]
            .as_str()
            .is_some_and(|e| e.contains("REPLICATION_FACTOR")),
        "{wide}"
    );
    roundtrip(&bootstrap, "roles");

    // Producer ids come from the controller's blocks: never the same id
    // on two brokers, nor twice on one, over more than a block each.
    let mut seen = HashSet::new();
    for broker in BROKERS {
        for id in producer_ids(cluster.node(broker).addr(), IDS_PER_BROKER) {
            assert!(
                id >= 0 && seen.insert(id),
                "producer id {id} handed out twice"
            );
        }
    }

    // SIGKILL of the active controller: another takes over, the brokers
    // stay registered and unfenced, and admin, produce and consume work.
    let active = wait_for("a quorum leader", Duration::from_secs(10), || {
        (1..=3).find_map(|id| quorum_leader(cluster.node(id).controller_addr()))
    });
    assert!((1..=3).contains(&active), "leader {active}");
    cluster.node_mut(active).kill();
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != active).collect();
    let next = wait_for("a new quorum leader", Duration::from_secs(20), || {
        survivors
            .iter()
            .find_map(|id| quorum_leader(cluster.node(*id).controller_addr()))
    });
    assert_ne!(next, active);
    // (A retry after an attempt whose answer was lost finds the topic.)
    wait_for(
        "CreateTopics after failover",
        Duration::from_secs(30),
        || {
            let answer = script_json("cluster.py", &["create", &bootstrap, "after", "2", "2"]);
            (answer["error"].is_null()
                || answer["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("TOPIC_ALREADY_EXISTS")))
            .then_some(())
        },
    );
    roundtrip(&bootstrap, "after");
    // More than a session timeout later, both brokers are still live
    // (their heartbeats reach the new controller).
    std::thread::sleep(Duration::from_secs(4));
    for broker in cluster.brokers() {
        let md = metadata(broker.addr()).expect("Metadata from a broker");
        assert_eq!(broker_ids(&md), BROKERS, "broker {}", broker.id);
    }
    // The new controller hands out fresh blocks: still no id twice.
    for broker in BROKERS {
        for id in producer_ids(cluster.node(broker).addr(), 20) {
            assert!(seen.insert(id), "producer id {id} handed out twice");
        }
    }
}
