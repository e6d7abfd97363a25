//! The controller's side of a 3-node combined-mode cluster on loopback:
//! its listener serves (and advertises) only the controller APIs,
//! DescribeQuorum answers with the voters and the leader (on any broker
//! listener too, forwarded to the active controller), and the active
//! controller fences a SIGKILLed broker once its session expires (other
//! brokers' Metadata no longer list it, its leaderships move) and
//! unfences it when it comes back with the same data directory.
//!
//! Requests are raw Kafka frames encoded with `kafka-protocol`; the topic
//! is created with confluent-kafka (`tests/python/cluster.py`).

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use gregor_tests::cluster::{self, broker_ids, call, call_on, metadata, script_json, Node};
use gregor_tests::wait_for;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerHeartbeatRequest, BrokerId, DescribeQuorumRequest, MetadataRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];
/// DescribeQuorum, UnregisterBroker: broker listeners forward them.
const FORWARDED_APIS: [i16; 2] = [55, 64];
const BROKER_ID_NOT_REGISTERED: i16 = 102;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
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
    describe_quorum_at(node.controller_addr())
}

/// DescribeQuorum v2 of the metadata partition at `addr`: (partition
/// error, leader, voters).
fn describe_quorum_at(addr: SocketAddr) -> (i16, i32, Vec<i32>) {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default()])]);
    let response = call(addr, &request, 2).expect("a DescribeQuorum answer");
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
    // listener none of them (a request for one closes the connection) but
    // DescribeQuorum and UnregisterBroker, which it forwards (Kafka 4).
    let mut expected = CONTROLLER_APIS.to_vec();
    expected.push(API_VERSIONS);
    expected.sort_unstable();
    assert_eq!(api_keys(nodes[0].controller_addr()), expected);
    let client_keys = api_keys(nodes[0].addr());
    assert!(client_keys.contains(&3) && client_keys.contains(&API_VERSIONS));
    let advertised: Vec<i16> = CONTROLLER_APIS
        .into_iter()
        .filter(|key| client_keys.contains(key))
        .collect();
    assert_eq!(advertised, FORWARDED_APIS, "{client_keys:?}");
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
    // Every broker listener answers it, forwarded to the active controller.
    for node in nodes.iter() {
        let forwarded = describe_quorum_at(node.addr());
        assert_eq!(forwarded, (0, *leader, vec![1, 2, 3]), "node {}", node.id);
    }
    // UnregisterBroker through a broker listener reaches the controller:
    // an id never registered is its BROKER_ID_NOT_REGISTERED.
    let unregister = UnregisterBrokerRequest::default().with_broker_id(BrokerId(77));
    let answer = call(nodes[0].addr(), &unregister, 0).expect("an UnregisterBroker answer");
    assert_eq!(answer.error_code, BROKER_ID_NOT_REGISTERED, "{answer:?}");

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

/// Logs in with SASL/PLAIN on a fresh connection to `addr`.
fn plain_login(addr: SocketAddr, user: &str, password: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let answer = call_on(&mut stream, &handshake, 1).expect("a SaslHandshake answer");
    assert_eq!(answer.error_code, 0, "{answer:?}");
    let token = format!("\0{user}\0{password}");
    let login = SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into());
    let answer = call_on(&mut stream, &login, 2).expect("a SaslAuthenticate answer");
    assert_eq!(answer.error_code, 0, "{answer:?}");
    stream
}

/// The controller listener is SASL_PLAINTEXT: brokers log in there with
/// SCRAM-SHA-512 as the `broker` user (`sasl.mechanism.controller.protocol`
/// and the listener's JAAS config), a super user (as is ANONYMOUS, the
/// PLAINTEXT clients), so their registrations
/// and heartbeats pass CLUSTER_ACTION and the cluster forms; a client
/// without SASL is not served there, and a user without CLUSTER_ACTION is
/// refused a heartbeat.
#[test]
fn brokers_log_in_to_a_sasl_controller_listener() {
    let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                username=\"broker\" password=\"broker-secret\";";
    let cluster = cluster::cluster(3)
        .controller_protocol("SASL_PLAINTEXT")
        .set(
            "sasl.bootstrap.users",
            "broker:broker-secret,mallory:mallory-secret",
        )
        .set("sasl.mechanism.controller.protocol", "SCRAM-SHA-512")
        .set(
            "listener.name.controller.scram-sha-512.sasl.jaas.config",
            jaas,
        )
        .set("authorizer", "authorizer_acl")
        .set("super.users", "User:broker;User:ANONYMOUS")
        .start();
    let formed = Instant::now();
    let controller = cluster.await_formed(&[1, 2, 3]);
    eprintln!(
        "SASL controller listener: formed {:?} after the nodes listened",
        formed.elapsed()
    );
    let active = cluster.node(controller).controller_addr();
    assert!(call(active, &BrokerHeartbeatRequest::default(), 0).is_none());
    let mut mallory = plain_login(active, "mallory", "mallory-secret");
    let heartbeat = BrokerHeartbeatRequest::default()
        .with_broker_id(BrokerId(1))
        .with_broker_epoch(1);
    let answer = call_on(&mut mallory, &heartbeat, 0).expect("a BrokerHeartbeat answer");
    assert_eq!(
        answer.error_code, CLUSTER_AUTHORIZATION_FAILED,
        "{answer:?}"
    );
    // The forwarded DescribeQuorum goes over the same SASL channel.
    let forwarded = describe_quorum_at(cluster.node(1).addr());
    assert_eq!(forwarded, (0, controller, vec![1, 2, 3]));
}
