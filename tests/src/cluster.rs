//! A cluster of `gregor serve` processes on loopback, for the cluster
//! tests: every node on free ports with its own data directory under one
//! temporary directory, restartable with the same ports and data.
//!
//! The single-broker [`crate::Broker`] waits for one broker at a time, but
//! a cluster node binds its client listener only once the quorum has a
//! leader, so the nodes of a cluster are spawned together and then waited
//! for ([`ClusterBuilder::start`]). Each node has a PLAINTEXT client
//! listener (brokers), a CONTROLLER listener (controllers), any extra
//! listeners a test asks for, and a quorum (openraft) port when it is a
//! voter. When a test panics, every node's log tail is printed.
//!
//! [`call`] sends one request encoded with `kafka-protocol`, for the raw
//! checks of what a node answers.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use serde_json::Value;

use crate::{free_port, gregor_bin, plugin_dir, run_python, wait_for};

/// How long a node of a starting cluster may take to accept connections.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of each node's log printed when a test fails.
const LOG_TAIL_LINES: usize = 40;

/// What a node does (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    Combined,
    Broker,
    Controller,
}

impl Roles {
    pub fn is_broker(self) -> bool {
        self != Roles::Controller
    }

    pub fn is_controller(self) -> bool {
        self != Roles::Broker
    }

    fn setting(self) -> &'static str {
        match self {
            Roles::Combined => "broker,controller",
            Roles::Broker => "broker",
            Roles::Controller => "controller",
        }
    }
}

/// How the nodes of a cluster are configured; [`ClusterBuilder::start`]
/// starts them.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    /// Node `i + 1` has `roles[i]`.
    roles: Vec<Roles>,
    heartbeat_ms: u64,
    session_ms: u64,
    registration_ms: u64,
    /// Listeners besides PLAINTEXT and CONTROLLER: (name, protocol).
    extra_listeners: Vec<(String, String)>,
    controller_protocol: String,
    /// Each node's admin endpoint on a port of its own (else none).
    admin: bool,
    /// `--set` after the harness's own, so they can override them.
    settings: Vec<(String, String)>,
    /// `--set` for one node (by id) after all the others.
    node_settings: Vec<(i32, String, String)>,
    /// Node `id` on 127.0.0.`id` instead of every node on 127.0.0.1.
    distinct_hosts: bool,
    /// Node `id` runs as user `base + id` (the fault test's firewall rules
    /// tell the nodes' own connections apart by their owner).
    uid_base: Option<u32>,
}

/// `n` combined-mode nodes (ids 1 to `n`), heartbeats every 500 ms, a
/// 3 s session, 8 s for the first registration.
pub fn cluster(n: usize) -> ClusterBuilder {
    ClusterBuilder {
        roles: vec![Roles::Combined; n],
        heartbeat_ms: 500,
        session_ms: 3000,
        registration_ms: 8000,
        extra_listeners: Vec::new(),
        controller_protocol: "PLAINTEXT".to_string(),
        admin: false,
        settings: Vec::new(),
        node_settings: Vec::new(),
        distinct_hosts: false,
        uid_base: None,
    }
}

impl ClusterBuilder {
    /// Nodes with these roles (ids 1, 2, ...), instead of combined ones.
    pub fn roles(mut self, roles: &[Roles]) -> Self {
        self.roles = roles.to_vec();
        self
    }

    /// `broker.heartbeat.interval.ms`, `broker.session.timeout.ms` and
    /// `initial.broker.registration.timeout.ms`.
    pub fn timing(mut self, heartbeat_ms: u64, session_ms: u64, registration_ms: u64) -> Self {
        (self.heartbeat_ms, self.session_ms, self.registration_ms) =
            (heartbeat_ms, session_ms, registration_ms);
        self
    }

    /// Another listener `name` with security protocol `protocol` on every
    /// broker ([`Node::listener_bootstrap`] gives its address).
    pub fn listener(mut self, name: &str, protocol: &str) -> Self {
        self.extra_listeners
            .push((name.to_string(), protocol.to_string()));
        self
    }

    /// The CONTROLLER listener's security protocol (PLAINTEXT unless set).
    pub fn controller_protocol(mut self, protocol: &str) -> Self {
        self.controller_protocol = protocol.to_string();
        self
    }

    /// An admin endpoint on every node ([`Node::admin`]), open
    /// (`admin.auth=none`): the tests drive it with `gregor` commands.
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// One more `--set key=value` for every node.
    pub fn set(mut self, key: &str, value: &str) -> Self {
        self.settings.push((key.to_string(), value.to_string()));
        self
    }

    /// One more `--set key=value` for node `id` only, after every other.
    pub fn set_on(mut self, id: i32, key: &str, value: &str) -> Self {
        self.node_settings
            .push((id, key.to_string(), value.to_string()));
        self
    }

    /// Node `id` listens (and has its quorum port) on 127.0.0.`id`; only
    /// inside a network namespace of the test's own, where those addresses
    /// are the namespace's loopback.
    pub fn distinct_hosts(mut self) -> Self {
        self.distinct_hosts = true;
        self
    }

    /// Node `id` runs as user (and group) `base + id`, with its data
    /// directory owned by it; the test must run as root.
    pub fn run_as_users(mut self, base: u32) -> Self {
        self.uid_base = Some(base);
        self
    }

    /// The address node `id` listens on.
    pub fn host(&self, id: i32) -> Ipv4Addr {
        match u8::try_from(id) {
            Ok(last) if self.distinct_hosts => Ipv4Addr::new(127, 0, 0, last),
            _ => Ipv4Addr::LOCALHOST,
        }
    }

    /// `controller.quorum.voters` on free quorum ports for the nodes with
    /// the controller role.
    pub fn free_voters(&self) -> String {
        (1..)
            .zip(&self.roles)
            .filter(|(_, roles)| roles.is_controller())
            .map(|(id, _)| format!("{id}@{}:{}", self.host(id), free_port()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts every node on free voters and waits until each accepts
    /// connections.
    pub fn start(self) -> Cluster {
        let voters = self.free_voters();
        self.start_on(&voters)
    }

    /// Starts every node with these `controller.quorum.voters` and waits
    /// until each accepts connections.
    pub fn start_on(self, voters: &str) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("gregor-cluster-")
            .tempdir()
            .expect("create a temporary directory");
        let mut nodes: Vec<Node> = (1..)
            .zip(self.roles.clone())
            .map(|(id, roles)| self.node_with(dir.path(), id, roles, voters))
            .collect();
        for node in &mut nodes {
            node.await_listening(LISTEN_TIMEOUT);
        }
        Cluster {
            nodes,
            voters: voters.to_string(),
            builder: self,
            dir: Some(dir),
        }
    }

    /// Spawns node `id` (combined, or the role of that id in this
    /// builder) in `dir` with `voters`, without waiting for it.
    pub fn node(&self, dir: &Path, id: i32, voters: &str) -> Node {
        let roles = usize::try_from(id - 1)
            .ok()
            .and_then(|i| self.roles.get(i).copied())
            .unwrap_or(Roles::Combined);
        self.node_with(dir, id, roles, voters)
    }

    fn node_with(&self, dir: &Path, id: i32, roles: Roles, voters: &str) -> Node {
        let mut ports = Vec::new();
        if roles.is_broker() {
            ports.push(("PLAINTEXT".to_string(), free_port()));
            for (name, _) in &self.extra_listeners {
                ports.push((name.clone(), free_port()));
            }
        }
        if roles.is_controller() {
            ports.push(("CONTROLLER".to_string(), free_port()));
        }
        let admin = self.admin.then(free_port);
        let data = dir.join(format!("node-{id}"));
        fs::create_dir_all(&data).expect("create a node's data directory");
        let uid = self.uid_base.map(|base| base + id.unsigned_abs());
        if let Some(uid) = uid {
            // The cluster directory is the test's (0700 from tempfile).
            let open = std::os::unix::fs::PermissionsExt::from_mode(0o755);
            fs::set_permissions(dir, open).expect("open the cluster directory");
            std::os::unix::fs::chown(&data, Some(uid), Some(uid))
                .expect("give a node its data directory");
        }
        let host = self.host(id);
        let listeners: Vec<String> = ports
            .iter()
            .map(|(name, port)| format!("{name}://{host}:{port}"))
            .collect();
        let mut map = vec!["PLAINTEXT:PLAINTEXT".to_string()];
        map.extend(
            self.extra_listeners
                .iter()
                .map(|(name, protocol)| format!("{name}:{protocol}")),
        );
        map.push(format!("CONTROLLER:{}", self.controller_protocol));
        let own = [
            ("node.id", id.to_string()),
            ("process.roles", roles.setting().to_string()),
            ("controller.quorum.voters", voters.to_string()),
            ("listeners", listeners.join(",")),
            ("listener.security.protocol.map", map.join(",")),
            ("controller.listener.names", "CONTROLLER".to_string()),
            (
                "broker.heartbeat.interval.ms",
                self.heartbeat_ms.to_string(),
            ),
            ("broker.session.timeout.ms", self.session_ms.to_string()),
            (
                "initial.broker.registration.timeout.ms",
                self.registration_ms.to_string(),
            ),
            ("log.dirs", data.display().to_string()),
            ("plugin.dir", plugin_dir().display().to_string()),
            (
                "admin.listener",
                admin.map_or(String::new(), |port| format!("{host}:{port}")),
            ),
        ];
        let open_admin = admin.map(|_| ("admin.auth", "none".to_string()));
        let broker_only = roles
            .is_broker()
            .then(|| ("inter.broker.listener.name", "PLAINTEXT".to_string()));
        let mut args = vec!["serve".to_string()];
        for (key, value) in own
            .into_iter()
            .chain(broker_only)
            .chain(open_admin)
            .map(|(k, v)| (k.to_string(), v))
            .chain(self.settings.iter().cloned())
            .chain(
                self.node_settings
                    .iter()
                    .filter(|(node, _, _)| *node == id)
                    .map(|(_, k, v)| (k.clone(), v.clone())),
            )
        {
            args.push("--set".into());
            args.push(format!("{key}={value}"));
        }
        let mut node = Node {
            id,
            roles,
            host,
            uid,
            ports,
            admin,
            args,
            data,
            log: dir.join(format!("node-{id}.log")),
            child: None,
            starts: 0,
        };
        node.start();
        node
    }
}

/// A compile cache every user may write (nodes running as other users
/// cannot reach the test's own under /root), kept across runs and seeded
/// with the test user's entries, so those nodes do not compile every
/// module again at each start.
fn shared_compile_cache() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join("gregor-tests-compile-cache");
    if fs::create_dir_all(&dir).is_ok() {
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o777));
    }
    let own = std::env::var_os("GREGOR_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/gregor")));
    if let Some(Ok(entries)) = own.map(fs::read_dir) {
        for entry in entries.filter_map(Result::ok) {
            let to = dir.join(entry.file_name());
            if !to.exists() && fs::hard_link(entry.path(), &to).is_err() {
                let _ = fs::copy(entry.path(), &to);
            }
        }
    }
    dir
}

/// `controller.quorum.voters` for these (id, quorum port) pairs.
pub fn voters(quorum: &[(i32, u16)]) -> String {
    quorum
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The nodes of a started cluster (their directory removed on drop,
/// unless `GREGOR_KEEP_TEST_DIRS` is set).
pub struct Cluster {
    pub nodes: Vec<Node>,
    voters: String,
    builder: ClusterBuilder,
    dir: Option<tempfile::TempDir>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The nodes stop first, so that the directory holds their whole logs.
        self.nodes.clear();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("GREGOR_KEEP_TEST_DIRS").is_some() {
                eprintln!("gregor-tests: kept {}", dir.keep().display());
            }
        }
    }
}

impl Cluster {
    /// The node with id `id`.
    pub fn node(&self, id: i32) -> &Node {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    pub fn node_mut(&mut self, id: i32) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The nodes with the broker role.
    pub fn brokers(&self) -> Vec<&Node> {
        self.nodes.iter().filter(|n| n.roles.is_broker()).collect()
    }

    /// `controller.quorum.voters` of the cluster.
    pub fn voters(&self) -> &str {
        &self.voters
    }

    /// The cluster's temporary directory (node data and logs).
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .expect("the directory is kept until the cluster drops")
            .path()
    }

    /// How the nodes were configured (for another node in `dir`).
    pub fn builder(&self) -> &ClusterBuilder {
        &self.builder
    }

    /// `bootstrap.servers` naming every running broker.
    pub fn bootstrap(&self) -> String {
        let running = self.brokers().into_iter().filter(|n| n.child.is_some());
        running.map(Node::bootstrap).collect::<Vec<_>>().join(",")
    }

    /// Waits until every running broker's Metadata lists the brokers `ids`
    /// and one controller, the same on each; that controller.
    pub fn await_formed(&self, ids: &[i32]) -> i32 {
        let mut controller = None;
        for node in self.brokers().into_iter().filter(|n| n.child.is_some()) {
            let md = wait_for(
                &format!("node {} to list brokers {ids:?}", node.id),
                Duration::from_secs(20),
                || {
                    metadata(node.addr())
                        .filter(|md| broker_ids(md) == ids && md.controller_id.0 >= 1)
                },
            );
            let id = md.controller_id.0;
            assert!(
                controller.is_none() || controller == Some(id),
                "node {} names controller {id}, another {controller:?}",
                node.id
            );
            controller = Some(id);
        }
        controller.unwrap_or_default()
    }
}

/// One `gregor serve` process of a cluster, restartable on its ports and
/// data directory.
pub struct Node {
    pub id: i32,
    pub roles: Roles,
    host: Ipv4Addr,
    /// The user the process runs as, if not the test's.
    uid: Option<u32>,
    /// Listener name and port.
    ports: Vec<(String, u16)>,
    admin: Option<u16>,
    /// `serve` and its `--set`s.
    args: Vec<String>,
    data: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Node {
    fn port(&self, listener: &str) -> u16 {
        self.ports
            .iter()
            .find(|(name, _)| name == listener)
            .map(|(_, port)| *port)
            .unwrap_or_else(|| panic!("node {} has no listener {listener}", self.id))
    }

    /// The PLAINTEXT client listener (brokers).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.port("PLAINTEXT")))
    }

    /// The address the node listens on (127.0.0.1 unless
    /// [`ClusterBuilder::distinct_hosts`]).
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The user the node runs as ([`ClusterBuilder::run_as_users`]).
    pub fn uid(&self) -> Option<u32> {
        self.uid
    }

    /// `host:port` of the PLAINTEXT listener, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.listener_bootstrap("PLAINTEXT")
    }

    /// `host:port` of listener `name`.
    pub fn listener_bootstrap(&self, name: &str) -> String {
        format!("{}:{}", self.host, self.port(name))
    }

    /// The CONTROLLER listener (controllers).
    pub fn controller_addr(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.port("CONTROLLER")))
    }

    /// `host:port` of the admin endpoint (see [`ClusterBuilder::admin`]).
    pub fn admin(&self) -> String {
        let port = self
            .admin
            .expect("the cluster was built without admin endpoints");
        format!("{}:{port}", self.host)
    }

    /// The node's `log.dirs`, kept across restarts.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Everything the node has logged, over all its starts.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Spawns the process (its output appended to the node's log), not
    /// waiting for it.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "node {} already runs", self.id);
        self.starts += 1;
        let mut out = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the node's log");
        let _ = writeln!(out, "=== gregor-tests: start #{} ===", self.starts);
        let err = out.try_clone().expect("clone the log handle");
        let mut command = Command::new(gregor_bin());
        command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        if let Some(uid) = self.uid {
            command
                .uid(uid)
                .gid(uid)
                .env("HOME", &self.data)
                .env("GREGOR_CACHE_DIR", shared_compile_cache());
        }
        self.child = Some(command.spawn().expect("spawn gregor"));
    }

    /// Starts the node again (after [`Node::kill`] or [`Node::stop`]) and
    /// waits until it accepts connections.
    pub fn restart(&mut self) {
        self.start();
        self.await_listening(LISTEN_TIMEOUT);
    }

    /// SIGKILL, as a crash, and the exit reaped. Nothing if not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.note("killed with SIGKILL");
        }
    }

    /// SIGTERM, and waits for the exit (panics after 30 s): its status.
    pub fn stop(&mut self) -> ExitStatus {
        let child = self.child.as_ref().expect("stop: the node is not running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits in pid_t");
        // SAFETY: kill(2) on a child not yet reaped: its pid is not reused.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let Some(status) = self.exit_within(Duration::from_secs(30)) else {
            self.note_thread_stacks(pid);
            panic!("node {} ignored SIGTERM for 30 s", self.id);
        };
        self.note(&format!("stopped with SIGTERM: {status}"));
        status
    }

    /// SIGSTOP: the process freezes (its sockets stay open), as a long GC
    /// pause or a stalled VM would. Nothing if not running.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP, "paused with SIGSTOP");
    }

    /// SIGCONT after [`Node::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT, "resumed with SIGCONT");
    }

    fn signal(&self, signal: libc::c_int, what: &str) {
        let Some(child) = self.child.as_ref() else {
            return;
        };
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits in pid_t");
        // SAFETY: kill(2) on a child not yet reaped: its pid is not reused.
        if unsafe { libc::kill(pid, signal) } == 0 {
            self.note(what);
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits until the node accepts connections on its first listener
    /// (panics if it exits).
    pub fn await_listening(&mut self, timeout: Duration) {
        let addr = SocketAddr::from((self.host, self.ports[0].1));
        let id = self.id;
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

    /// Waits for the process to exit, up to `timeout`: its status, or
    /// `None` if it still runs.
    pub fn exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
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

    /// What a process that does not stop is doing, into the node's log:
    /// each thread's state and system call (/proc), and its stacks where
    /// gdb is installed (a diagnosis, nothing more).
    fn note_thread_stacks(&self, pid: libc::pid_t) {
        let mut text = String::new();
        if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.filter_map(Result::ok) {
                let path = task.path();
                let read = |name: &str| fs::read_to_string(path.join(name)).unwrap_or_default();
                let stat = read("stat");
                let state = stat.rsplit(')').next().unwrap_or_default();
                let state = state.split_whitespace().next().unwrap_or("?");
                text.push_str(&format!(
                    "task {} {} state {state} wchan {} syscall {}\n",
                    task.file_name().to_string_lossy(),
                    read("comm").trim(),
                    read("wchan").trim(),
                    read("syscall").trim()
                ));
            }
        }
        let stacks = Command::new("gdb")
            .args([
                "-p",
                &pid.to_string(),
                "-batch",
                "-ex",
                "thread apply all bt",
            ])
            .output();
        if let Ok(out) = stacks {
            text.push_str(&String::from_utf8_lossy(&out.stdout));
            text.push_str(&String::from_utf8_lossy(&out.stderr));
        }
        self.note(&format!("what the process is doing:\n{text}"));
    }

    fn note(&self, line: &str) {
        if let Ok(mut log) = File::options().append(true).open(&self.log) {
            let _ = writeln!(log, "=== gregor-tests: {line} ===");
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let text = self.log_text();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "---- node {} log, last lines ----\n{}",
                self.id,
                tail.join("\n")
            );
        }
    }
}

/// Sends one request on a fresh connection: the response, or `None` when
/// the node closed the connection (or is not there).
pub fn call<R>(addr: SocketAddr, request: &R, version: i16) -> Option<R::Response>
where
    R: Request + Encodable + HeaderVersion,
    R::Response: Decodable + HeaderVersion,
{
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    call_on(&mut stream, request, version)
}

/// Sends one request on `stream`: the response, or `None` when the node
/// closed the connection.
pub fn call_on<R>(stream: &mut TcpStream, request: &R, version: i16) -> Option<R::Response>
where
    R: Request + Encodable + HeaderVersion,
    R::Response: Decodable + HeaderVersion,
{
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("gregor-cluster-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .expect("encode a request header");
    request
        .encode(&mut body, version)
        .expect("encode a request");
    let size = i32::try_from(body.len()).expect("a small request");
    let mut frame = size.to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).ok()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let size = usize::try_from(i32::from_be_bytes(size)).expect("a response size");
    let mut payload = vec![0u8; size];
    stream.read_exact(&mut payload).ok()?;
    let mut payload = Bytes::from(payload);
    let header = ResponseHeader::decode(&mut payload, R::Response::header_version(version))
        .expect("a response header");
    assert_eq!(header.correlation_id, 7);
    Some(R::Response::decode(&mut payload, version).expect("a response body"))
}

/// The partition of `__consumer_offsets` or `__transaction_state` (of
/// `partitions`) that Kafka keeps `key` (a group or transactional id) in:
/// `Utils.abs(key.hashCode()) % partitions`, Java's `String.hashCode` over
/// UTF-16 units.
pub fn coordinator_partition(key: &str, partitions: i32) -> i32 {
    let hash = key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    hash.checked_abs().unwrap_or(0) % partitions
}

/// Metadata (v12, all topics) from the broker at `addr`.
pub fn metadata(addr: SocketAddr) -> Option<MetadataResponse> {
    call(addr, &MetadataRequest::default().with_topics(None), 12)
}

/// The broker ids a Metadata answer lists, sorted.
pub fn broker_ids(response: &MetadataResponse) -> Vec<i32> {
    let mut ids: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort_unstable();
    ids
}

/// Runs `tests/python/<script>` with `args` (asserting it succeeded): the
/// JSON of its last line.
pub fn script_json(script: &str, args: &[&str]) -> Value {
    let (stdout, _) = run_python(script, args);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}"))
}
