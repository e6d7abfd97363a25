//! The controller's side of a 3-node combined-mode cluster on loopback:
//! its listener serves (and advertises) only the controller APIs,
//! DescribeQuorum answers with the voters and the leader, and the active
//! controller fences a SIGKILLed broker once its session expires (other
//! brokers' Metadata no longer list it, its leaderships move) and
//! unfences it when it comes back with the same data directory.
//!
//! Requests are raw Kafka frames encoded with `kafka-protocol`; the topic
//! is created with confluent-kafka (`tests/python/cluster.py`).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use gregor_tests::{free_port, gregor_bin, plugin_dir, wait_for, workspace_root};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerHeartbeatRequest, DescribeQuorumRequest, MetadataRequest,
    MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];
const API_VERSIONS: i16 = 18;
const SESSION_TIMEOUT_MS: u64 = 2000;

/// One `gregor serve` process, restartable with the same settings.
struct Process {
    id: i32,
    /// Client (PLAINTEXT) and controller listener ports.
    port: u16,
    controller_port: u16,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    fn new(dir: &Path, id: i32, voters: &str) -> Self {
        let (port, controller_port) = (free_port(), free_port());
        let data = dir.join(format!("node-{id}"));
        fs::create_dir_all(&data).unwrap();
        // Whitespace-separated key=value pairs, each one --set.
        let settings = format!(
            "node.id={id} process.roles=broker,controller controller.quorum.voters={voters} \
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port} \
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT \
             controller.listener.names=CONTROLLER inter.broker.listener.name=PLAINTEXT \
             broker.heartbeat.interval.ms=300 broker.session.timeout.ms={SESSION_TIMEOUT_MS} \
             initial.broker.registration.timeout.ms=15000 log.dirs={} plugin.dir={} \
             admin.listener=",
            data.display(),
            plugin_dir().display(),
        );
        let args = settings
            .split_whitespace()
            .flat_map(|pair| ["--set".to_string(), pair.to_string()])
            .collect();
        let mut process = Self {
            id,
            port,
            controller_port,
            args,
            log: dir.join(format!("node-{id}.log")),
            child: None,
        };
        process.start();
        process
    }

    fn start(&mut self) {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let mut command = Command::new(gregor_bin());
        command
            .arg("serve")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        self.child = Some(command.spawn().expect("spawn gregor"));
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn client(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn controller(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.controller_port))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let text = fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!("---- node {} ----\n{}", self.id, tail.join("\n"));
        }
    }
}

/// Sends one request on a fresh connection: the response, or None when the
/// node closed the connection (or is not there).
fn call<R>(addr: SocketAddr, request: &R, version: i16) -> Option<R::Response>
where
    R: Request + Encodable + HeaderVersion,
    R::Response: Decodable + HeaderVersion,
{
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("cluster-controller-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).ok()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut payload = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut payload).ok()?;
    let mut payload = Bytes::from(payload);
    let header =
        ResponseHeader::decode(&mut payload, R::Response::header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 7);
    Some(R::Response::decode(&mut payload, version).unwrap())
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

fn metadata(addr: SocketAddr) -> Option<MetadataResponse> {
    call(addr, &MetadataRequest::default().with_topics(None), 12)
}

fn broker_ids(response: &MetadataResponse) -> Vec<i32> {
    let mut ids: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort_unstable();
    ids
}

/// The quorum as each node's controller listener describes it: (node,
/// partition error, leader, voters).
fn describe_quorum(node: &Process) -> (i16, i32, Vec<i32>) {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default()])]);
    let response = call(node.controller(), &request, 2).expect("a DescribeQuorum answer");
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
    let script = workspace_root().join("tests/python/cluster.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(["create", bootstrap, topic, "6", "3"])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("\"error\": null"),
        "create failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_active_controller_serves_its_apis_and_fences_a_silent_broker() {
    let dir = tempfile::tempdir().unwrap();
    let voters: String = (1..=3)
        .map(|id| format!("{id}@127.0.0.1:{}", free_port()))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes: Vec<Process> = (1..=3)
        .map(|id| Process::new(dir.path(), id, &voters))
        .collect();
    wait_for("three live brokers", Duration::from_secs(40), || {
        metadata(nodes[0].client()).filter(|m| broker_ids(m) == vec![1, 2, 3])
    });

    // The controller listener serves only the controller APIs; the broker
    // listener none of them (a request for one closes the connection).
    let mut expected = CONTROLLER_APIS.to_vec();
    expected.push(API_VERSIONS);
    expected.sort_unstable();
    assert_eq!(api_keys(nodes[0].controller()), expected);
    let client_keys = api_keys(nodes[0].client());
    assert!(client_keys.contains(&3) && client_keys.contains(&API_VERSIONS));
    assert!(
        CONTROLLER_APIS.iter().all(|key| !client_keys.contains(key)),
        "{client_keys:?}"
    );
    assert!(call(nodes[0].client(), &BrokerHeartbeatRequest::default(), 0).is_none());
    assert!(call(nodes[0].controller(), &MetadataRequest::default(), 12).is_none());

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
    let controller = metadata(nodes[0].client()).unwrap().controller_id.0;
    assert_eq!(controller, *leader);

    // A broker that is not the active controller is SIGKILLed.
    create_topic(&format!("127.0.0.1:{}", nodes[0].port), "fenced");
    let victim = nodes.iter().position(|n| n.id != *leader).unwrap();
    let victim_id = nodes[victim].id;
    let witness = nodes.iter().position(|n| n.id != victim_id).unwrap();
    let witness_addr = nodes[witness].client();
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
    for node in &nodes {
        let addr = node.client();
        wait_for("the broker listed again", Duration::from_secs(30), || {
            metadata(addr).filter(|m| broker_ids(m) == vec![1, 2, 3])
        });
    }
    eprintln!(
        "broker {victim_id} restarted: listed again after {:?}",
        restarted.elapsed()
    );
}
