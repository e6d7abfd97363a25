//! A 3-node cluster in combined mode (`process.roles=broker,controller`)
//! on loopback: it forms, every broker shows the same brokers, controller
//! and partition placement, produce works against each partition's leader
//! and a non-leader answers NOT_LEADER_OR_FOLLOWER; a misconfigured node
//! (wrong voters, duplicate node.id) exits with a message, never hangs.
//!
//! The nodes are started together (each waits for a quorum leader before
//! it binds its listeners, so the single-broker harness, which waits for
//! one broker at a time, does not fit); confluent-kafka drives the admin
//! and producer side (`tests/python/cluster.py`), raw Produce requests the
//! per-broker answers.

use std::fs::{self, File};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gregor_tests::wire::{self, Conn};
use gregor_tests::{free_port, gregor_bin, plugin_dir, wait_for, workspace_root};
use serde_json::Value;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

struct Node {
    id: i32,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Node {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit, up to `timeout`.
    fn exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!(
                "---- node {} log, last lines ----\n{}",
                self.id,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// `controller.quorum.voters` for these (id, quorum port) pairs.
fn voters(quorum: &[(i32, u16)]) -> String {
    quorum
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Spawns `gregor serve` as node `id` (not waiting for it).
fn spawn(dir: &tempfile::TempDir, id: i32, voters: &str, extra: &[(&str, &str)]) -> Node {
    let port = free_port();
    let controller_port = free_port();
    let data = dir.path().join(format!("node-{id}"));
    fs::create_dir_all(&data).unwrap();
    let log = dir.path().join(format!("node-{id}.log"));
    let settings = [
        ("node.id", id.to_string()),
        ("process.roles", "broker,controller".to_string()),
        ("controller.quorum.voters", voters.to_string()),
        (
            "listeners",
            format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"),
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string(),
        ),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("inter.broker.listener.name", "PLAINTEXT".to_string()),
        ("broker.heartbeat.interval.ms", "500".to_string()),
        ("broker.session.timeout.ms", "3000".to_string()),
        ("initial.broker.registration.timeout.ms", "8000".to_string()),
        ("log.dirs", data.display().to_string()),
        ("plugin.dir", plugin_dir().display().to_string()),
        ("admin.listener", String::new()),
    ];
    let mut command = Command::new(gregor_bin());
    command.arg("serve");
    for (key, value) in &settings {
        command.arg("--set").arg(format!("{key}={value}"));
    }
    for (key, value) in extra {
        command.arg("--set").arg(format!("{key}={value}"));
    }
    let out = File::create(&log).unwrap();
    let err = out.try_clone().unwrap();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "info");
    }
    let child = command.spawn().expect("spawn gregor");
    Node {
        id,
        port,
        child: Some(child),
        log,
    }
}

/// Three nodes, started together, each accepting connections.
fn cluster(dir: &tempfile::TempDir) -> Vec<Node> {
    let quorum: Vec<(i32, u16)> = (1..=3).map(|id| (id, free_port())).collect();
    let voters = voters(&quorum);
    let mut nodes: Vec<Node> = (1..=3).map(|id| spawn(dir, id, &voters, &[])).collect();
    for node in &mut nodes {
        let addr = node.addr();
        let id = node.id;
        wait_for(
            &format!("node {id} to listen"),
            Duration::from_secs(30),
            || {
                if let Some(status) = node
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    panic!("node {id} exited: {status}\n{}", node.log_text());
                }
                TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                    .ok()
                    .map(|_| ())
            },
        );
    }
    nodes
}

fn python(args: &[&str]) -> Value {
    let script = workspace_root().join("tests/python/cluster.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cluster.py {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("cluster.py printed no JSON ({e}): {stdout}"))
}

/// A raw Produce (v9) of one record to `partition` on `node`: its error code.
fn produce_error(node: &Node, topic: &str, partition: i32) -> i16 {
    let section = wire::records_section(&[b"raw"], None);
    let batch = wire::record_batch(0, 1, 1_700_000_000_000, &section);
    let request = wire::produce_request(9, 7, topic, partition, &batch);
    let mut conn = Conn::connect(node.addr());
    let response = conn.round_trip(&request, 7);
    wire::parse_produce_response(&response, 9).0
}

#[test]
fn three_nodes_form_agree_on_placement_and_route_produce_to_leaders() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let nodes = cluster(&dir);

    // The cluster forms: every broker lists the three brokers and one
    // controller, the same on each.
    let mut controller = None;
    for node in &nodes {
        let md = wait_for(
            &format!("node {} to list 3 brokers", node.id),
            Duration::from_secs(20),
            || {
                let md = python(&["metadata", &node.bootstrap()]);
                (md["brokers"] == serde_json::json!([1, 2, 3])
                    && md["controller"].as_i64().is_some_and(|c| c >= 1))
                .then_some(md)
            },
        );
        let id = md["controller"].as_i64();
        assert!(controller.is_none() || controller == id, "{md}");
        controller = id;
    }

    // RF 3 through one broker; the same placement on every broker.
    let created = python(&["create", &nodes[1].bootstrap(), "replicated", "3", "3"]);
    assert_eq!(created["error"], Value::Null, "{created}");
    let first = python(&["metadata", &nodes[0].bootstrap()])["topics"]["replicated"].clone();
    assert_eq!(first.as_object().map(|o| o.len()), Some(3), "{first}");
    for node in &nodes {
        let seen = wait_for(
            &format!("node {} to show the topic", node.id),
            Duration::from_secs(10),
            || {
                let topic =
                    python(&["metadata", &node.bootstrap()])["topics"]["replicated"].clone();
                (topic == first).then_some(topic)
            },
        );
        for partition in seen.as_object().unwrap().values() {
            let mut replicas: Vec<i64> = partition["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_i64)
                .collect();
            replicas.sort_unstable();
            assert_eq!(replicas, [1, 2, 3], "{seen}");
            assert_eq!(partition["isr"].as_array().map(Vec::len), Some(3), "{seen}");
        }
    }
    let mut leaders: Vec<i64> = first
        .as_object()
        .unwrap()
        .values()
        .filter_map(|p| p["leader"].as_i64())
        .collect();
    leaders.sort_unstable();
    assert_eq!(leaders, [1, 2, 3], "leaders spread: {first}");

    // A factor beyond the live brokers is refused.
    let wide = python(&["create", &nodes[0].bootstrap(), "too-wide", "1", "4"]);
    assert!(
        wide["error"]
            .as_str()
            .is_some_and(|e| e.contains("REPLICATION_FACTOR")),
        "{wide}"
    );

    // acks=1 produce through librdkafka reaches every partition's leader.
    let produced = python(&["produce", &nodes[2].bootstrap(), "replicated", "3"]);
    assert_eq!(produced["errors"], serde_json::json!([]), "{produced}");
    assert_eq!(produced["delivered"].as_object().map(|d| d.len()), Some(3));

    // Each broker answers for the partitions it leads, and sends clients
    // elsewhere for the others.
    for (partition, p) in first.as_object().unwrap() {
        let partition: i32 = partition.parse().unwrap();
        let leader = p["leader"].as_i64().unwrap() as i32;
        for node in &nodes {
            let error = produce_error(node, "replicated", partition);
            if node.id == leader {
                assert_eq!(error, 0, "leader {leader} of partition {partition}");
            } else {
                assert_eq!(
                    error, NOT_LEADER_OR_FOLLOWER,
                    "node {} for partition {partition} led by {leader}",
                    node.id
                );
            }
        }
    }
    eprintln!("cluster test took {:?}", started.elapsed());
}

#[test]
fn a_node_without_a_quorum_exits_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    // Its peers are not there (or not at these addresses): no leader.
    let voters = voters(&[(1, free_port()), (2, free_port()), (3, free_port())]);
    let mut node = spawn(&dir, 1, &voters, &[]);
    let status = node
        .exit_within(Duration::from_secs(20))
        .expect("the node exits instead of hanging");
    assert!(!status.success());
    assert!(
        node.log_text().contains("no metadata quorum leader"),
        "{}",
        node.log_text()
    );

    // Not among the voters: refused before anything is bound.
    let voters = voters_of_others();
    let mut node = spawn(&dir, 9, &voters, &[]);
    let status = node.exit_within(Duration::from_secs(10)).expect("exits");
    assert!(!status.success());
    assert!(
        node.log_text().contains("controller.quorum.voters"),
        "{}",
        node.log_text()
    );
}

fn voters_of_others() -> String {
    voters(&[(1, free_port()), (2, free_port())])
}

#[test]
fn a_duplicate_node_id_exits_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let quorum: Vec<(i32, u16)> = (1..=3).map(|id| (id, free_port())).collect();
    let voters = voters(&quorum);
    let nodes: Vec<Node> = (1..=3).map(|id| spawn(&dir, id, &voters, &[])).collect();
    for node in &nodes {
        let addr = node.addr();
        wait_for("the cluster", Duration::from_secs(30), || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                .ok()
                .map(|_| ())
        });
    }
    let dup_dir = tempfile::tempdir().unwrap();
    let mut dup = spawn(&dup_dir, 2, &voters, &[]);
    let status = dup
        .exit_within(Duration::from_secs(20))
        .expect("the duplicate exits instead of hanging");
    assert!(!status.success());
    let log = dup.log_text();
    assert!(log.contains("node.id=2"), "{log}");
    drop(nodes);
}
