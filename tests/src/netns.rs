//! A network namespace of the test's own, for fault tests that cut links
//! between brokers (DESIGN.md §11): loopback only, and its routes and
//! firewall rules vanish with it.
//!
//! A `#[test]` re-runs itself inside `unshare -n` ([`run_inside`]); there it
//! brings up loopback and gives each broker's user its own source address
//! ([`Namespace::source_addresses`]), because on loopback every connection
//! would otherwise leave from 127.0.0.1 and a rule could not tell broker 2
//! talking to broker 1 from broker 1 talking to itself. [`Firewall`] then
//! cuts links by address with nftables.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// Set in the environment of the test re-run inside the namespace.
const INSIDE: &str = "GREGOR_TEST_NETNS";

/// The source address of the test's own connections (its clients) inside
/// the namespace: not one a broker listens on.
pub const CLIENT_SOURCE: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 100);

/// Whether this process is the re-run inside the namespace.
pub fn inside() -> bool {
    std::env::var_os(INSIDE).is_some()
}

/// Why a fault namespace cannot be made here, if it cannot: it needs root
/// (to unshare, route and switch users) and `nft`.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".to_string());
    }
    let probe = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !probe("unshare", &["-n", "true"]) {
        return Some("`unshare -n` is not permitted".to_string());
    }
    if !probe("nft", &["--version"]) {
        return Some("no `nft` (Debian package nftables)".to_string());
    }
    None
}

/// Runs the test `name` of this test binary again inside a new network
/// namespace, its output shown as it goes: whether it passed.
pub fn run_inside(name: &str) -> bool {
    let exe = std::env::current_exe().expect("the test binary's path");
    let status = Command::new("unshare")
        .arg("-n")
        .arg(exe)
        .args([
            name,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(INSIDE, "1")
        .status()
        .expect("run unshare");
    status.success()
}

/// The namespace as a test inside it sets it up.
pub struct Namespace;

impl Namespace {
    /// Brings loopback up (it starts down in a new namespace).
    pub fn loopback() -> Namespace {
        ip(&["link", "set", "lo", "up"]);
        Namespace
    }

    /// Connections made by user `uid` leave from `source` (policy routing
    /// by user: its own table whose loopback route prefers that source);
    /// the test's own (root's) leave from [`CLIENT_SOURCE`].
    pub fn source_addresses(&self, users: &[(u32, Ipv4Addr)]) {
        let root = [(0, CLIENT_SOURCE)];
        for (i, (uid, source)) in root.iter().chain(users).enumerate() {
            let table = (100 + i).to_string();
            let local = "127.0.0.0/8";
            let src = source.to_string();
            ip(&[
                "route", "add", "local", local, "dev", "lo", "src", &src, "table", &table,
            ]);
            let range = format!("{uid}-{uid}");
            let pref = (10 + i).to_string();
            ip(&[
                "rule", "add", "pref", &pref, "uidrange", &range, "lookup", &table,
            ]);
        }
        // The kernel's own local table first would pick 127.0.0.1 for all.
        ip(&["rule", "add", "pref", "1000", "lookup", "local"]);
        ip(&["rule", "del", "pref", "0"]);
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// nftables rules of the namespace that cut links between addresses.
pub struct Firewall {
    cut: Vec<(Ipv4Addr, Vec<Ipv4Addr>)>,
}

impl Firewall {
    /// An empty `inet gregor_faults` table with an input chain.
    pub fn new() -> Firewall {
        nft("add table inet gregor_faults");
        nft("add chain inet gregor_faults input { type filter hook input priority 0; }");
        Firewall { cut: Vec::new() }
    }

    /// Drops every packet between `host` and each of `others`, both ways
    /// (established connections stall, new ones time out).
    pub fn isolate(&mut self, host: Ipv4Addr, others: &[Ipv4Addr]) {
        let set = others
            .iter()
            .map(Ipv4Addr::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        nft(&format!(
            "add rule inet gregor_faults input ip saddr {host} ip daddr {{ {set} }} drop"
        ));
        nft(&format!(
            "add rule inet gregor_faults input ip saddr {{ {set} }} ip daddr {host} drop"
        ));
        self.cut.push((host, others.to_vec()));
    }

    /// Whether some link is cut now.
    pub fn is_cut(&self) -> bool {
        !self.cut.is_empty()
    }

    /// Removes every rule: all links work again.
    pub fn heal(&mut self) {
        nft("flush chain inet gregor_faults input");
        self.cut.clear();
    }
}

impl Default for Firewall {
    fn default() -> Self {
        Firewall::new()
    }
}

fn nft(command: &str) {
    let out = Command::new("nft")
        .args(command.split_whitespace())
        .output()
        .expect("run nft");
    assert!(
        out.status.success(),
        "nft {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
