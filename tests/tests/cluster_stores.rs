//! The broker's stores follow the metadata log on a 3-node cluster: a
//! topic config, a cluster-wide and a per-broker config, a SCRAM user, an
//! ACL, a client quota and a client-metrics subscription set through one
//! broker are what another broker describes and enforces, and a node
//! restarted after missing a change has them all.
//!
//! Each node has a PLAINTEXT listener, whose ANONYMOUS user is a super
//! user (the admin side), and a SASL_PLAINTEXT one where `alice` (PLAIN)
//! is authorized by `authorizer_acl`. confluent-kafka drives configs,
//! ACLs and SCRAM (`tests/python/cluster_stores.py`), kafka-python the
//! quota and client-metrics APIs librdkafka lacks (`admin_wire.py`); the
//! nodes start together as in `cluster.rs` (each waits for a quorum).

use std::fs::{self, File};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use gregor_tests::{free_port, gregor_bin, plugin_dir, run_python, wait_for};
use serde_json::{json, Value};

/// One `gregor serve` of the cluster, restartable on its ports and data.
struct Member {
    id: i32,
    plain: u16,
    sasl: u16,
    args: Vec<String>,
    log: PathBuf,
    process: Option<Child>,
}

impl Member {
    fn new(dir: &std::path::Path, id: i32, voters: &str) -> Self {
        let (plain, sasl, controller) = (free_port(), free_port(), free_port());
        let data = dir.join(format!("data-{id}"));
        let listeners = format!(
            "PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},\
             CONTROLLER://127.0.0.1:{controller}"
        );
        let settings = format!(
            "node.id={id}
process.roles=broker,controller
controller.quorum.voters={voters}
listeners={listeners}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
initial.broker.registration.timeout.ms=8000
authorizer=authorizer_acl
super.users=User:ANONYMOUS
log.dirs={}
plugin.dir={}
admin.listener=",
            data.display(),
            plugin_dir().display()
        );
        let args = std::iter::once("serve".to_string())
            .chain(
                settings
                    .lines()
                    .flat_map(|line| ["--set".to_string(), line.to_string()]),
            )
            .collect();
        let mut member = Self {
            id,
            plain,
            sasl,
            args,
            log: dir.join(format!("node-{id}.log")),
            process: None,
        };
        member.launch();
        member
    }

    fn launch(&mut self) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(gregor_bin());
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stderr(Stdio::from(log.try_clone().unwrap()))
            .stdout(Stdio::from(log));
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        self.process = Some(command.spawn().expect("spawn gregor"));
    }

    fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    fn plaintext(&self) -> String {
        format!("127.0.0.1:{}", self.plain)
    }

    fn sasl_plaintext(&self) -> String {
        format!("127.0.0.1:{}", self.sasl)
    }

    fn listening(&mut self) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.plain));
        let id = self.id;
        let log = self.log.clone();
        let process = self.process.as_mut().expect("started");
        wait_for(
            &format!("node {id} listening"),
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = process.try_wait() {
                    panic!(
                        "node {id}: {status}\n{}",
                        fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()
            },
        );
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            let text = fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!("---- node {} ----\n{}", self.id, tail.join("\n"));
        }
    }
}

/// A script of `tests/python` with these arguments: its last JSON line.
fn script(name: &str, args: &[&str]) -> Value {
    let (stdout, _) = run_python(name, args);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{name} printed no JSON ({e}): {stdout}"))
}

/// `cluster_stores.py COMMAND NODE ARGS` for `node`.
fn stores(command: &str, node: &Member, args: &[&str]) -> Value {
    let id = node.id.to_string();
    script(
        "cluster_stores.py",
        &[&[command, id.as_str()][..], args].concat(),
    )
}

/// admin_wire.py's `command`, pinned to `node`.
fn wire(node: &Member, args: &[&str]) -> Value {
    stores(
        "wire",
        node,
        &[&[node.plaintext().as_str()][..], args].concat(),
    )
}

/// Waits until `answer()` satisfies `check` (another node applies a
/// change a moment after the one that proposed it); the answer.
fn until(what: &str, answer: impl Fn() -> Value, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, Duration::from_secs(15), || {
        Some(answer()).filter(|value| check(value))
    })
}

fn config_of(node: &Member, kind: &str, name: &str, key: &str) -> Value {
    stores("config", node, &[&node.plaintext(), kind, name, key])["value"].clone()
}

fn set_config(node: &Member, kind: &str, name: &str, key: &str, value: &str) -> Value {
    stores(
        "set-config",
        node,
        &[&node.plaintext(), kind, name, key, value],
    )
}

/// Waits until `node` describes `key` of a resource as `value`.
fn config_becomes(node: &Member, kind: &str, name: &str, key: &str, value: &str) {
    let what = format!("node {} to describe {kind} {name:?} {key}={value}", node.id);
    until(
        &what,
        || config_of(node, kind, name, key),
        |seen| seen == value,
    );
}

/// What `alice` (PLAIN) is told about `topic` on `node`'s SASL listener.
fn alice_on(node: &Member, topic: &str) -> Value {
    let sasl = node.sasl_plaintext();
    stores("as-user", node, &[&sasl, "alice", "alice-secret", topic])
}

/// Waits until `alice` may describe `topic` on `node`.
fn alice_allowed(node: &Member, topic: &str) {
    let what = format!("alice allowed on node {}", node.id);
    until(
        &what,
        || alice_on(node, topic),
        |seen| seen["error"].is_null() && seen["topic_error"].is_null(),
    );
}

/// Every quota entity and the subscription `sub`, as `node` describes them.
fn quota_state(node: &Member) -> Value {
    wire(node, &["show-state", "sub"])
}

#[test]
fn configs_acls_users_and_quotas_set_on_one_broker_hold_on_every_broker() {
    let dir = tempfile::tempdir().unwrap();
    let voters: Vec<String> = (1..=3)
        .map(|id| format!("{id}@127.0.0.1:{}", free_port()))
        .collect();
    let voters = voters.join(",");
    let mut nodes: Vec<Member> = (1..=3)
        .map(|id| Member::new(dir.path(), id, &voters))
        .collect();
    nodes.iter_mut().for_each(Member::listening);
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    until(
        "three brokers",
        || script("cluster.py", &["metadata", &a.plaintext()]),
        |md| md["brokers"] == json!([1, 2, 3]),
    );
    let created = script("cluster.py", &["create", &a.plaintext(), "kept", "3", "3"]);
    assert_eq!(created["error"], Value::Null, "{created}");

    // A topic config and the cluster-wide default through A, read on B and C.
    let set = set_config(a, "topic", "kept", "segment.ms", "654321");
    assert_eq!(set["error"], Value::Null, "{set}");
    let default = set_config(a, "broker", "", "log.retention.ms", "7200000");
    assert_eq!(default["error"], Value::Null, "{default}");
    for node in [b, c] {
        config_becomes(node, "topic", "kept", "segment.ms", "654321");
        // The default reaches the topic's effective config.
        config_becomes(node, "topic", "kept", "retention.ms", "7200000");
    }
    config_becomes(c, "broker", "", "log.retention.ms", "7200000");
    // This broker's own, through it, survives its restart below.
    let own = set_config(b, "broker", "2", "log.retention.ms", "3600000");
    assert_eq!(own["error"], Value::Null, "{own}");

    // A SCRAM user through A logs in on B; an ACL through A authorizes it there.
    let refused = alice_on(b, "kept");
    assert_ne!(refused["error"], Value::Null, "no such user yet: {refused}");
    let added = stores("add-user", a, &[&a.plaintext(), "alice", "alice-secret"]);
    assert_eq!(added["error"], Value::Null, "{added}");
    let denied = until(
        "alice to log in on B",
        || alice_on(b, "kept"),
        |seen| seen["error"].is_null(),
    );
    let denial = &denied["topic_error"];
    assert_eq!(denial, "TOPIC_AUTHORIZATION_FAILED", "{denied}");
    let allowed = stores("allow", a, &[&a.plaintext(), "User:alice", "kept"]);
    assert_eq!(allowed["error"], Value::Null, "{allowed}");
    alice_allowed(b, "kept");
    alice_allowed(c, "kept");

    // A client quota and a client-metrics subscription through A, on C.
    wire(
        a,
        &[
            "set-quota",
            "user",
            "alice",
            "producer_byte_rate",
            "1048576",
        ],
    );
    wire(
        a,
        &[
            "client-metrics",
            "sub",
            "org.apache.kafka.producer.",
            "60000",
        ],
    );
    let alice_quota =
        json!([{"entity": {"user": "alice"}, "values": {"producer_byte_rate": 1048576.0}}]);
    let state = until(
        "C to have the quota",
        || quota_state(c),
        |state| state["quotas"] == alice_quota,
    );
    assert_eq!(state["subscription"]["interval.ms"], "60000", "{state}");

    // B misses a change while it is down, and has everything once back.
    nodes[1].stop();
    let a = &nodes[0];
    let set = set_config(a, "topic", "kept", "segment.ms", "111111");
    assert_eq!(set["error"], Value::Null, "{set}");
    nodes[1].launch();
    nodes[1].listening();
    let b = &nodes[1];
    config_becomes(b, "topic", "kept", "segment.ms", "111111");
    assert_eq!(config_of(b, "broker", "", "log.retention.ms"), "7200000");
    assert_eq!(config_of(b, "broker", "2", "log.retention.ms"), "3600000");
    alice_allowed(b, "kept");
    let state = quota_state(b);
    assert_eq!(state["quotas"], alice_quota, "{state}");
    assert_eq!(state["subscription"]["interval.ms"], "60000", "{state}");
}
