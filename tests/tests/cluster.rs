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
    /// `gregor serve` and its settings, for a restart on the same ports
    /// and data.
    args: Vec<String>,
    data: PathBuf,
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

    /// Starts the process (its output appended to the node's log).
    fn start(&mut self) {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let err = out.try_clone().unwrap();
        let mut command = Command::new(gregor_bin());
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        self.child = Some(command.spawn().expect("spawn gregor"));
    }

    /// SIGKILL, and the exit reaped.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits until the node accepts connections (panics if it exits).
    fn await_listening(&mut self, timeout: Duration) {
        let (addr, id) = (self.addr(), self.id);
        wait_for(&format!("node {id} to listen"), timeout, || {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("node {id} exited: {status}\n{}", self.log_text());
            }
            TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                .ok()
                .map(|_| ())
        });
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
        self.kill();
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
    let mut args = vec!["serve".to_string()];
    let extra = extra.iter().map(|(k, v)| (*k, v.to_string()));
    for (key, value) in settings.into_iter().chain(extra) {
        args.push("--set".into());
        args.push(format!("{key}={value}"));
    }
    let mut node = Node {
        id,
        port,
        args,
        data,
        child: None,
        log,
    };
    node.start();
    node
}

/// Voters 1 to 3 on free ports.
fn three_voters() -> String {
    voters(&[(1, free_port()), (2, free_port()), (3, free_port())])
}

/// Three nodes on `voters`, started together, each accepting connections.
fn cluster_on(dir: &tempfile::TempDir, voters: &str) -> Vec<Node> {
    let mut nodes: Vec<Node> = (1..=3).map(|id| spawn(dir, id, voters, &[])).collect();
    for node in &mut nodes {
        node.await_listening(Duration::from_secs(30));
    }
    nodes
}

fn cluster(dir: &tempfile::TempDir) -> Vec<Node> {
    cluster_on(dir, &three_voters())
}

/// Waits until every node lists the brokers `ids` and one controller, the
/// same on each; that controller.
fn await_formed(nodes: &[&Node], ids: &[i64]) -> i64 {
    let mut controller = None;
    for node in nodes {
        let md = wait_for(
            &format!("node {} to list brokers {ids:?}", node.id),
            Duration::from_secs(20),
            || {
                let md = python(&["metadata", &node.bootstrap()]);
                (md["brokers"] == serde_json::json!(ids)
                    && md["controller"].as_i64().is_some_and(|c| c >= 1))
                .then_some(md)
            },
        );
        let id = md["controller"].as_i64();
        assert!(controller.is_none() || controller == id, "{md}");
        controller = id;
    }
    controller.unwrap_or_default()
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
    await_formed(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]);

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
    let mut node = spawn(&dir, 1, &three_voters(), &[]);
    let status = node
        .exit_within(Duration::from_secs(20))
        .expect("the node exits instead of hanging");
    assert!(!status.success());
    assert!(
        node.log_text().contains("no metadata quorum leader"),
        "{}",
        node.log_text()
    );

    // Not among the voters, or a malformed entry: refused before anything
    // is bound, naming the setting.
    let others = voters(&[(1, free_port()), (2, free_port())]);
    for (id, voters) in [(9, others.as_str()), (1, "1@127.0.0.1:19092,2@127.0.0.1")] {
        let dir = tempfile::tempdir().unwrap();
        let mut node = spawn(&dir, id, voters, &[]);
        let status = node.exit_within(Duration::from_secs(10)).expect("exits");
        assert!(!status.success());
        let log = node.log_text();
        assert!(log.contains("controller.quorum.voters"), "{log}");
        assert!(TcpStream::connect_timeout(&node.addr(), Duration::from_millis(200)).is_err());
    }
}

#[test]
fn a_duplicate_node_id_exits_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let voters = three_voters();
    let mut nodes = cluster_on(&dir, &voters);
    let dup_dir = tempfile::tempdir().unwrap();
    let mut dup = spawn(&dup_dir, 2, &voters, &[]);
    let status = dup
        .exit_within(Duration::from_secs(20))
        .expect("the duplicate exits instead of hanging");
    assert!(!status.success());
    let log = dup.log_text();
    assert!(log.contains("node.id=2"), "{log}");
    // No split: the three go on as one cluster, the first node 2 with them.
    assert!(nodes.iter_mut().all(Node::is_running));
    await_formed(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]);
}

/// SIGKILL of the active controller (the quorum leader): the survivors
/// agree on another and CreateTopics through one works again. How long
/// that took is printed, not asserted.
#[test]
fn killing_the_active_controller_moves_it_and_create_topics_works_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = cluster(&dir);
    let controller = await_formed(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]);
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let victim = nodes.iter_mut().find(|n| i64::from(n.id) == controller);
    victim.expect("the controller is a node").kill();
    let survivors: Vec<String> = nodes
        .iter()
        .filter(|n| n.child.is_some())
        .map(Node::bootstrap)
        .collect();
    let old = controller.to_string();
    let mut args = vec!["failover", killed_at.as_str(), old.as_str()];
    args.extend(survivors.iter().map(String::as_str));
    let failover = python(&args);
    let new = failover["controller"].as_i64().unwrap_or_default();
    assert!(new >= 1 && new != controller, "{failover}");
    eprintln!(
        "controller failover: {controller} -> {new}, survivors agreed after {} ms, first \
         CreateTopics after {} ms ({} attempt(s))",
        failover["controller_ms"], failover["create_ms"], failover["attempts"]
    );
}

/// Partition directories (`<topic>-<n>`) of a node's logs.
fn partition_dirs(node: &Node) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(node.data.join("partitions"))
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.rsplit_once('-')
                .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    names.sort();
    names
}

/// A restarted node reopens the logs of its own replicas only (before, it
/// recreated every partition of every topic it knew), keeps their data,
/// and removes stray logs (a partition of no topic in the image) once its
/// image has caught up.
#[test]
fn a_restarted_node_keeps_its_replicas_and_removes_stray_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = cluster(&dir);
    await_formed(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]);
    let created = python(&["create", &nodes[0].bootstrap(), "spread", "3", "1"]);
    assert_eq!(created["error"], Value::Null, "{created}");
    let produced = python(&["produce", &nodes[0].bootstrap(), "spread", "3"]);
    assert_eq!(produced["errors"], serde_json::json!([]), "{produced}");
    let topic = python(&["metadata", &nodes[0].bootstrap()])["topics"]["spread"].clone();
    let node = &mut nodes[2];
    let own: Vec<String> = topic
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, p)| p["replicas"] == serde_json::json!([node.id]))
        .map(|(partition, _)| format!("spread-{partition}"))
        .collect();
    assert_eq!(own.len(), 1, "one replica per node: {topic}");
    assert_eq!(partition_dirs(node), own);

    node.kill();
    fs::create_dir_all(node.data.join("partitions/ghost-0")).unwrap();
    node.start();
    node.await_listening(Duration::from_secs(30));
    let dirs = wait_for("the stray log to go", Duration::from_secs(20), || {
        let dirs = partition_dirs(node);
        (!dirs.contains(&"ghost-0".to_string())).then_some(dirs)
    });
    assert_eq!(dirs, own, "only its own replica came back");
    let segment = node.data.join("partitions").join(&own[0]);
    let segment = segment.join("00000000000000000000.log");
    let size = fs::metadata(&segment).map(|m| m.len()).unwrap_or_default();
    assert!(size > 0, "{} kept its data", segment.display());
}

/// The gregor processes whose parent is `parent`.
fn gregor_children(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: comm may hold spaces, the rest not.
        let Some((comm, rest)) = stat.split_once(" (").and_then(|(_, r)| r.rsplit_once(") "))
        else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if comm == "gregor" && ppid == Some(parent) {
            pids.push(pid);
        }
    }
    pids
}

/// Gone, or a zombie nobody reaps yet: not running.
fn is_alive(pid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// `make cluster`'s script: three nodes that form one cluster, output
/// prefixed per node, and Ctrl-C (SIGINT to its process group, as a
/// terminal sends it) stops every node cleanly, leaving none behind.
#[test]
fn the_cluster_script_forms_a_cluster_and_ctrl_c_stops_every_node() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let ports = |n: usize| -> String {
        (0..n)
            .map(|_| free_port().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let client = ports(3);
    let output = dir.path().join("cluster.out");
    let out = File::create(&output).unwrap();
    let mut script = Command::new(workspace_root().join("scripts/cluster.sh"))
        .env("GREGOR_BIN", gregor_bin())
        .env("GREGOR_PLUGIN_DIR", plugin_dir())
        .env("CLUSTER_DATA", dir.path().join("data"))
        .env("CLUSTER_PORTS", &client)
        .env("CLUSTER_CONTROLLER_PORTS", ports(3))
        .env("CLUSTER_QUORUM_PORTS", ports(3))
        .env("CLUSTER_ADMIN_PORTS", ports(3))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .process_group(0)
        .spawn()
        .expect("run scripts/cluster.sh");
    let text = || fs::read_to_string(&output).unwrap_or_default();
    for port in client.split(' ') {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_for(
            "the script's nodes to listen",
            Duration::from_secs(40),
            || {
                if let Ok(Some(status)) = script.try_wait() {
                    panic!("cluster.sh exited: {status}\n{}", text());
                }
                TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                    .ok()
                    .map(|_| ())
            },
        );
    }
    let first = format!("127.0.0.1:{}", client.split(' ').next().unwrap_or_default());
    wait_for("the script's cluster", Duration::from_secs(20), || {
        let md = python(&["metadata", &first]);
        (md["brokers"] == serde_json::json!([1, 2, 3])).then_some(())
    });
    for id in 1..=3 {
        assert!(text().contains(&format!("[node {id}] ")), "{}", text());
        assert!(dir
            .path()
            .join(format!("data/{id}/meta.properties"))
            .exists());
    }
    let nodes = gregor_children(script.id());
    assert_eq!(nodes.len(), 3, "{nodes:?}");

    let group = i32::try_from(script.id()).unwrap();
    // SAFETY: kill(2) with a negative pid signals that process group.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Ok(Some(status)) = script.try_wait() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "cluster.sh did not stop\n{}",
            text()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{}", text());
    for pid in nodes {
        assert!(!is_alive(pid), "node pid {pid} outlived the script");
    }
    let stopped = text().matches("gregor stopped").count();
    assert_eq!(stopped, 3, "every node stopped cleanly:\n{}", text());
}
