//! Test harness for Gregor's integration tests.
//!
//! Every test starts its own `gregor serve` process on its own port with its
//! own temporary data directory, so tests run in parallel and never see each
//! other's topics. The broker's stderr and stdout go to `broker.log` in that
//! directory; when a test panics, [`Broker`]'s `Drop` prints the tail of that
//! log, which is usually the fastest way to see why.
//!
//! Environment:
//! - `GREGOR_BIN`: the broker binary (default `<workspace>/target/release/gregor`,
//!   or under `$CARGO_TARGET_DIR` when that is set).
//! - `GREGOR_PLUGIN_DIR`: the handler plugins (default `<workspace>/build/plugins`).
//! - `GREGOR_KEEP_TEST_DIRS=1`: keep each test's temporary directory.
//! - `RUST_LOG`: passed to the broker (default `info`).
//!
//! [`cluster`] starts several nodes as one cluster, [`replicated`] holds
//! what the replication tests share, [`kafka`] holds rdkafka helpers
//! shared by the client tests and [`wire`] hand-encodes Kafka frames for
//! the raw-protocol tests.

pub mod certs;
pub mod cluster;
pub mod kafka;
pub mod netns;
pub mod replicated;
pub mod unclean;
pub mod wire;

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a starting broker may take to accept connections. Generous:
/// a cold plugin compile cache on a loaded 2-core machine is slow.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a broker may take to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of the broker log printed when a test fails.
const LOG_TAIL_LINES: usize = 100;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent directory")
        .to_path_buf()
}

/// An example module (`make plugins` puts them in build/examples, or
/// `GREGOR_EXAMPLE_DIR`); panics when it was not built.
pub fn example_module(name: &str) -> PathBuf {
    let dir = std::env::var_os("GREGOR_EXAMPLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/examples"));
    let path = dir.join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "example module {} not built (make plugins)",
        path.display()
    );
    path
}

/// The broker binary: `$GREGOR_BIN`, else `release/gregor` in
/// `$CARGO_TARGET_DIR` if set, else `<workspace>/target/release/gregor`.
pub fn gregor_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("GREGOR_BIN") {
        return PathBuf::from(path);
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    };
    target.join("release/gregor")
}

/// Runs the `gregor` command line with `args` against the admin endpoint
/// `admin`: whether it succeeded, and its stdout followed by its stderr.
pub fn gregor_cli(args: &[&str], admin: &str) -> (bool, String) {
    let output = Command::new(gregor_bin())
        .args(args)
        .args(["--admin", admin])
        .output()
        .expect("run gregor");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// The plugin directory: `$GREGOR_PLUGIN_DIR` or `<workspace>/build/plugins`.
pub fn plugin_dir() -> PathBuf {
    match std::env::var_os("GREGOR_PLUGIN_DIR") {
        Some(path) => PathBuf::from(path),
        None => workspace_root().join("build/plugins"),
    }
}

/// A port that was free a moment ago: bind 127.0.0.1:0 and drop the
/// listener. Never the same port twice in one test run: a broker takes a
/// while to bind the port it was given, and meanwhile the kernel could hand
/// that port to a parallel test. Test binaries run side by side (`make
/// test` runs them with cargo-nextest, one process per test), so besides
/// this process's own set a port is claimed with a file in a directory all
/// test processes share ([`claim_across_processes`]).
pub fn free_port() -> u16 {
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(Default::default);
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("local address of a bound listener")
            .port();
        if handed_out.lock().unwrap().insert(port) && claim_across_processes(port) {
            return port;
        }
    }
}

/// How long another process's claim on a port holds: long enough for its
/// broker to bind it; after that the port is in use (bind fails) or free.
const PORT_CLAIM: Duration = Duration::from_secs(120);

/// Claims `port` for this process with a file named after it under the
/// temporary directory: false if another live claim exists. A claim older
/// than [`PORT_CLAIM`] is taken over. Where the directory cannot be used,
/// the claim succeeds (the in-process set still holds).
fn claim_across_processes(port: u16) -> bool {
    let dir = std::env::temp_dir().join("gregor-test-ports");
    if fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let path = dir.join(port.to_string());
    match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let stale = fs::metadata(&path)
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_none_or(|age| age > PORT_CLAIM);
            // Taking over a stale claim: touch it so others see it fresh.
            stale
                && OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(std::time::SystemTime::now()))
                    .is_ok()
        }
        Err(_) => true,
    }
}

/// Whether process `pid` has a listening TCP socket on 127.0.0.1:`port` or
/// 0.0.0.0:`port`, from /proc (Linux). `None` when /proc cannot tell.
fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let table = fs::read_to_string("/proc/net/tcp").ok()?;
    let wanted = [
        format!("0100007F:{port:04X}"),
        format!("00000000:{port:04X}"),
    ];
    let inodes: HashSet<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            let listening = fields.get(3) == Some(&"0A");
            let ours = fields.get(1).is_some_and(|l| wanted.iter().any(|w| w == l));
            (listening && ours).then(|| fields.get(9).map(|i| format!("socket:[{i}]")))?
        })
        .collect();
    if inodes.is_empty() {
        return Some(false);
    }
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(fds.flatten().any(|fd| {
        fs::read_link(fd.path())
            .map(|target| inodes.contains(target.to_string_lossy().as_ref()))
            .unwrap_or(false)
    }))
}

/// A running (or stopped, between [`Broker::kill`] and [`Broker::restart`])
/// `gregor serve` process with its own port and data directory.
pub struct Broker {
    child: Option<Child>,
    port: u16,
    /// The admin HTTP endpoint's port (`admin.listener`): its own per
    /// broker, so that parallel brokers do not fight over the default.
    admin_port: u16,
    /// Removed on drop (unless `GREGOR_KEEP_TEST_DIRS` is set).
    dir: Option<tempfile::TempDir>,
    data_dir: PathBuf,
    log_path: PathBuf,
    settings: Vec<(String, String)>,
    /// Listeners besides the harness's PLAINTEXT one: name and port.
    extra_listeners: Vec<(String, u16)>,
    /// A command the broker runs under (`prlimit ...`, `unshare ...`),
    /// which must exec the broker with the arguments it is given.
    wrapper: Vec<String>,
    starts: u32,
}

impl Broker {
    /// Starts a broker with the default settings.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// Starts a broker with extra `--set key=value` properties (after the
    /// harness's own `listeners`, `log.dirs`, `plugin.dir` and
    /// `admin.listener`, so they can override those).
    pub fn start_with(settings: &[(&str, &str)]) -> Broker {
        Broker::start_with_listeners(&[], settings)
    }

    /// Starts a broker with more listeners (by name, each on a port of its
    /// own) beside the PLAINTEXT one the harness waits for. Their security
    /// protocols come from the names or `listener.security.protocol.map`
    /// in `settings`; [`Broker::listener_bootstrap`] gives their address.
    pub fn start_with_listeners(extra: &[&str], settings: &[(&str, &str)]) -> Broker {
        Broker::start_wrapped(&[], extra, settings)
    }

    /// Starts a broker with `settings` on a copy of `fixture`, a data
    /// directory an earlier release wrote (under `tests/fixtures`): its
    /// first start on that directory is the upgrade.
    pub fn start_on_copy_of(fixture: &Path, settings: &[(&str, &str)]) -> Broker {
        assert!(fixture.is_dir(), "no fixture at {}", fixture.display());
        let mut broker = Broker::start_with(settings);
        broker.stop();
        fs::remove_dir_all(&broker.data_dir).expect("empty the data directory");
        copy_dir(fixture, &broker.data_dir);
        broker.spawn();
        broker
    }

    /// Starts the broker under `wrapper` (a command and its arguments,
    /// such as `prlimit --nofile=500`, that execs the broker binary with
    /// the arguments after it, keeping the process id).
    pub fn start_wrapped(wrapper: &[&str], extra: &[&str], settings: &[(&str, &str)]) -> Broker {
        let bin = gregor_bin();
        assert!(
            bin.is_file(),
            "gregor binary not found at {} (build it with `cargo build --release -p gregor`, \
             or point GREGOR_BIN at it)",
            bin.display()
        );
        let plugins = plugin_dir();
        assert!(
            plugins.is_dir(),
            "plugin directory not found at {} (build the plugins, or point GREGOR_PLUGIN_DIR at them)",
            plugins.display()
        );

        let dir = tempfile::Builder::new()
            .prefix("gregor-test-")
            .tempdir()
            .expect("create a temporary directory");
        let data_dir = dir.path().join("data");
        fs::create_dir_all(&data_dir).expect("create the data directory");
        let log_path = dir.path().join("broker.log");

        let mut broker = Broker {
            child: None,
            port: 0,
            admin_port: 0,
            data_dir,
            log_path,
            dir: Some(dir),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_listeners: extra.iter().map(|name| (name.to_string(), 0)).collect(),
            wrapper: wrapper.iter().map(|w| w.to_string()).collect(),
            starts: 0,
        };
        // The port was free when picked, but another process (a client's
        // outgoing connection, another test) may take it before the broker
        // binds it: pick another one then.
        for attempt in 1.. {
            broker.port = free_port();
            broker.admin_port = free_port();
            for listener in &mut broker.extra_listeners {
                listener.1 = free_port();
            }
            match broker.try_spawn() {
                Ok(()) => break,
                Err(StartError::PortTaken) if attempt < 5 => {
                    broker.note(&format!(
                        "port {} or {} was taken, trying others",
                        broker.port, broker.admin_port
                    ));
                }
                Err(e) => broker.start_failed(e),
            }
        }
        broker
    }

    /// `host:port` of an extra listener (see [`Broker::start_with_listeners`]).
    pub fn listener_bootstrap(&self, name: &str) -> String {
        let port = self
            .extra_listeners
            .iter()
            .find(|(listener, _)| listener == name)
            .map(|(_, port)| *port)
            .unwrap_or_else(|| panic!("the broker has no listener {name}"));
        format!("127.0.0.1:{port}")
    }

    /// `host:port` for a client's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The admin HTTP endpoint (`admin.listener`).
    pub fn admin_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.admin_port))
    }

    /// The broker's `log.dirs`, kept across restarts.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The file that collects the broker's stderr and stdout.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the broker's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = match fs::read(&self.log_path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return format!("(cannot read {}: {e})", self.log_path.display()),
        };
        let all: Vec<&str> = text.lines().collect();
        let start = all.len().saturating_sub(lines);
        all[start..].join("\n")
    }

    /// The process id of the running broker (for /proc), if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A field of the running broker's /proc/<pid>/status in bytes
    /// (VmRSS, VmHWM: the peak resident set).
    pub fn status_bytes(&self, field: &str) -> u64 {
        let pid = self.pid().expect("the broker runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
        kib * 1024
    }

    /// Whether the process is still alive.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the broker (SIGTERM, expecting a clean exit) if it runs, then
    /// starts it again on the same port with the same data directory. After
    /// [`Broker::kill`] this is the restart after a crash.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            let status = self.stop();
            assert!(
                status.success(),
                "broker did not exit cleanly after SIGTERM: {status}"
            );
        }
        self.spawn();
    }

    /// Sends SIGTERM and waits for the process to exit (panics after
    /// [`STOP_TIMEOUT`]). Returns its exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("stop: the broker is not running");
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.note(&format!("stopped with SIGTERM: {status}"));
                    return status;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("broker did not exit within {STOP_TIMEOUT:?} of SIGTERM");
                }
                Err(e) => panic!("waiting for the broker: {e}"),
            }
        }
    }

    /// SIGKILL: the process dies at once, without any chance to flush or
    /// close. [`Broker::restart`] brings it back on the same data directory.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("kill: the broker is not running");
        signal(&child, libc::SIGKILL);
        let status = child.wait().expect("wait for the killed broker");
        self.note(&format!("killed with SIGKILL: {status}"));
    }

    fn note(&self, line: &str) {
        if let Ok(mut log) = OpenOptions::new().append(true).open(&self.log_path) {
            let _ = writeln!(log, "=== gregor-tests: {line} ===");
        }
    }

    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            self.start_failed(e);
        }
    }

    /// Panics; `Drop` then prints the log tail.
    fn start_failed(&self, error: StartError) -> ! {
        panic!("{error} (log: {})", self.log_path.display());
    }

    fn try_spawn(&mut self) -> Result<(), StartError> {
        assert!(self.child.is_none(), "spawn: the broker is already running");
        self.starts += 1;
        let mut args: Vec<String> = vec!["serve".into()];
        let mut listeners = format!("PLAINTEXT://127.0.0.1:{}", self.port);
        for (name, port) in &self.extra_listeners {
            listeners.push_str(&format!(",{name}://127.0.0.1:{port}"));
        }
        let own = [
            ("listeners", listeners),
            ("log.dirs", self.data_dir.display().to_string()),
            ("plugin.dir", plugin_dir().display().to_string()),
            // Off unless a test asks for it: parallel brokers would fight
            // over the default admin port.
            ("admin.listener", String::new()),
            // What the example handlers use (PLUGINS.md, "Grants"), as an
            // operator would grant it; tests/tests/grants.rs overrides it.
            (
                "plugin.grants.topic_summary",
                "authz,log.read,metadata.read".to_string(),
            ),
            ("plugin.grants.chaos", "log.read".to_string()),
        ];
        for (key, value) in own
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .chain(self.settings.iter().cloned())
        {
            args.push("--set".into());
            args.push(format!("{key}={value}"));
        }

        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open the broker log");
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = writeln!(
            log,
            "=== gregor-tests: start #{}: {} {} ===",
            self.starts,
            gregor_bin().display(),
            args.join(" ")
        );
        let stdout: File = log.try_clone().expect("clone the log file handle");
        let mut command = match self.wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = Command::new(program);
                command.args(wrapper_args).arg(gregor_bin());
                command
            }
            None => Command::new(gregor_bin()),
        };
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(log));
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", gregor_bin().display()));
        self.child = Some(child);
        self.wait_ready(log_start)
    }

    /// Polls the port until it accepts a TCP connection and (where /proc
    /// tells) the listening socket is our broker's, not another process's
    /// that happens to hold the same port.
    fn wait_ready(&mut self, log_start: u64) -> Result<(), StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = self.addr();
        loop {
            if let Some(child) = self.child.as_mut() {
                let pid = child.id();
                if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
                    && listens_on(pid, self.port) != Some(false)
                {
                    return Ok(());
                }
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    let log = fs::read(&self.log_path).unwrap_or_default();
                    let this_start = log.get(log_start as usize..).unwrap_or_default();
                    if String::from_utf8_lossy(this_start).contains("in use") {
                        return Err(StartError::PortTaken);
                    }
                    return Err(StartError::Exited(status));
                }
            }
            if Instant::now() >= deadline {
                if let Some(mut child) = self.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(StartError::NotReady(addr));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Why a broker did not start.
#[derive(Debug)]
enum StartError {
    /// It exited saying its port is in use.
    PortTaken,
    Exited(ExitStatus),
    NotReady(SocketAddr),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::PortTaken => write!(f, "broker could not bind its port: in use"),
            StartError::Exited(status) => write!(f, "broker exited during start-up ({status})"),
            StartError::NotReady(addr) => write!(
                f,
                "broker did not accept connections on {addr} within {START_TIMEOUT:?}"
            ),
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- gregor broker log ({}), last {LOG_TAIL_LINES} lines ----\n{}\n---- end of broker log ----",
                self.log_path.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("GREGOR_KEEP_TEST_DIRS").is_some() {
                let kept = dir.keep();
                eprintln!("gregor-tests: kept {}", kept.display());
            }
        }
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits in pid_t");
    // SAFETY: kill(2) on the pid of a child we have not yet reaped, so the
    // pid cannot have been reused by another process.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        std::io::Error::last_os_error()
    );
}

/// Polls `check` every 100 ms until it returns `Some`, or panics with
/// `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A broker with its admin endpoint (`/metrics`, plugins) on a port of its
/// own, and that endpoint's `host:port`.
pub fn start_with_admin(settings: &[(&str, &str)]) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut all = vec![("admin.listener", admin.as_str())];
    all.extend_from_slice(settings);
    (Broker::start_with(&all), admin)
}

/// `GET /metrics` on an admin endpoint: the Prometheus text (asserting a
/// 200 answer).
/// The value of one sample of a /metrics text, by its exact name and
/// labels.
pub fn metric_sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

pub fn scrape_metrics(admin: &str) -> String {
    let (head, body) = get_metrics(admin);
    assert!(head.starts_with("HTTP/1.1 200"), "scrape failed: {head}");
    body
}

/// `GET /metrics` on an admin endpoint: the response head and body, as
/// they come.
pub fn get_metrics(admin: &str) -> (String, String) {
    get_metrics_accepting(admin, None)
}

/// `GET /metrics` with an `Accept` header: the response head and body.
pub fn get_metrics_accepting(admin: &str, accept: Option<&str>) -> (String, String) {
    use std::io::Read;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let mut stream = TcpStream::connect(admin).expect("connect to the admin endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {admin}\r\n{accept}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .expect("send scrape");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read scrape");
    let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
    (head.to_string(), body.to_string())
}

/// Copies the directory tree `from` to `to` (created as needed).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries = fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}

/// Runs `tests/python/<script>` with `args`, asserting it succeeded: its
/// stdout and stderr.
pub fn run_python(script: &str, args: &[&str]) -> (String, String) {
    let path = workspace_root().join("tests/python").join(script);
    let output = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {script} (kafka-python is installed by .ci/deps.sh): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{script} {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// A temporary plugin directory (named `prefix...`) with a copy of every
/// standard module, for a test that changes what is loaded.
pub fn private_plugin_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create a plugin dir");
    copy_modules(dir.path());
    dir
}

/// Copies every module of [`plugin_dir`] into `dir`.
fn copy_modules(dir: &Path) {
    for entry in fs::read_dir(plugin_dir()).expect("read the plugin dir") {
        let path = entry.expect("plugin dir entry").path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            fs::copy(&path, dir.join(path.file_name().expect("file name"))).expect("copy a module");
        }
    }
}

/// A temporary plugin directory with every standard module and the named
/// example modules (`chaos`, ...) from `$GREGOR_EXAMPLE_DIR` (default
/// `build/examples`).
pub fn plugin_dir_with_examples(examples: &[&str]) -> tempfile::TempDir {
    let plugins = tempfile::tempdir().expect("plugin dir");
    copy_modules(plugins.path());
    let dir = std::env::var_os("GREGOR_EXAMPLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/examples"));
    for name in examples {
        let file = format!("{name}.wasm");
        fs::copy(dir.join(&file), plugins.path().join(&file)).expect("copy an example module");
    }
    plugins
}
