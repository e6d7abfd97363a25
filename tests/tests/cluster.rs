//! A 3-node cluster in combined mode (`process.roles=broker,controller`)
//! on loopback: it forms, every broker shows the same brokers, controller
//! and partition placement, produce works against each partition's leader
//! and a non-leader answers NOT_LEADER_OR_FOLLOWER; a misconfigured node
//! (wrong voters, duplicate node.id) exits with a message, never hangs.
//!
//! The nodes come from the cluster harness (`gregor_tests::cluster`,
//! started together: each waits for a quorum leader before it binds its
//! listeners); confluent-kafka drives the admin
//! and producer side (`tests/python/cluster.py`), raw Produce requests the
//! per-broker answers.

use std::fs::{self, File};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gregor_tests::cluster::{self, script_json, voters, Cluster, Node};
use gregor_tests::wire::{self, Conn};
use gregor_tests::{free_port, gregor_bin, plugin_dir, wait_for, workspace_root};
use serde_json::Value;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Three combined-mode nodes, each accepting connections.
fn three() -> Cluster {
    cluster::cluster(3).start()
}

/// Waits until every node lists the brokers 1-3 and one controller, the
/// same on each; that controller.
fn await_formed(nodes: &Cluster) -> i64 {
    i64::from(nodes.await_formed(&[1, 2, 3]))
}

fn python(args: &[&str]) -> Value {
    script_json("cluster.py", args)
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
    let cluster = three();
    let nodes = &cluster.nodes;

    // The cluster forms: every broker lists the three brokers and one
    // controller, the same on each.
    await_formed(&cluster);

    // RF 3 through one broker; the same placement on every broker.
    let created = python(&["create", &nodes[1].bootstrap(), "replicated", "3", "3"]);
    assert_eq!(created["error"], Value::Null, "{created}");
    let first = python(&["metadata", &nodes[0].bootstrap()])["topics"]["replicated"].clone();
    assert_eq!(first.as_object().map(|o| o.len()), Some(3), "{first}");
    for node in nodes {
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
        for node in nodes {
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
    let builder = cluster::cluster(3);
    // Its peers are not there (or not at these addresses): no leader.
    let mut node = builder.node(dir.path(), 1, &builder.free_voters());
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
        let mut node = builder.node(dir.path(), id, voters);
        let status = node.exit_within(Duration::from_secs(10)).expect("exits");
        assert!(!status.success());
        let log = node.log_text();
        assert!(log.contains("controller.quorum.voters"), "{log}");
        assert!(TcpStream::connect_timeout(&node.addr(), Duration::from_millis(200)).is_err());
    }
}

#[test]
fn a_duplicate_node_id_exits_with_a_message() {
    let mut cluster = three();
    let dup_dir = tempfile::tempdir().unwrap();
    let mut dup = cluster.builder().node(dup_dir.path(), 2, cluster.voters());
    let status = dup
        .exit_within(Duration::from_secs(20))
        .expect("the duplicate exits instead of hanging");
    assert!(!status.success());
    let log = dup.log_text();
    assert!(log.contains("node.id=2"), "{log}");
    // No split: the three go on as one cluster, the first node 2 with them.
    assert!(cluster.nodes.iter_mut().all(Node::is_running));
    await_formed(&cluster);
}

/// SIGKILL of the active controller (the quorum leader): the survivors
/// agree on another and CreateTopics through one works again. How long
/// that took is printed, not asserted.
#[test]
fn killing_the_active_controller_moves_it_and_create_topics_works_again() {
    let mut cluster = three();
    let controller = await_formed(&cluster);
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    cluster.node_mut(controller as i32).kill();
    let survivors: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.pid().is_some())
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
    let mut names: Vec<String> = fs::read_dir(node.data_dir().join("partitions"))
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
    let mut cluster = three();
    await_formed(&cluster);
    let nodes = &mut cluster.nodes;
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
    fs::create_dir_all(node.data_dir().join("partitions/ghost-0")).unwrap();
    node.restart();
    let dirs = wait_for("the stray log to go", Duration::from_secs(20), || {
        let dirs = partition_dirs(node);
        (!dirs.contains(&"ghost-0".to_string())).then_some(dirs)
    });
    assert_eq!(dirs, own, "only its own replica came back");
    let segment = node.data_dir().join("partitions").join(&own[0]);
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
