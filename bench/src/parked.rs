//! Parked long polls: many consumers waiting at once must not slow the
//! rest down. Opens `fetches` connections that each send one Fetch with a
//! long `max_wait_ms` on an empty topic and then wait, checks on the
//! broker's `/metrics` that they are all parked, and measures the small
//! request round trips and end-to-end latency of a live producer and
//! consumer with and without them, and the broker's memory per parked
//! fetch. Raw frames, so the waiting side costs the client nothing but a
//! socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::{e2e, rtt};

pub struct ParkedRun {
    pub fetches: usize,
    pub parked_seen: u64,
    pub rss_before_kb: u64,
    pub rss_parked_kb: u64,
    pub open_seconds: f64,
    pub baseline: Vec<rtt::Rtt>,
    pub loaded: Vec<rtt::Rtt>,
    pub e2e_baseline: e2e::E2eRun,
    pub e2e_loaded: e2e::E2eRun,
    pub parked_after_close: u64,
    pub drain_seconds: f64,
}

impl ParkedRun {
    pub fn bytes_per_parked_fetch(&self) -> f64 {
        let grown = self.rss_parked_kb.saturating_sub(self.rss_before_kb) as f64 * 1024.0;
        grown / self.fetches.max(1) as f64
    }

    pub fn json(&self) -> String {
        let rtts = |list: &[rtt::Rtt]| {
            list.iter()
                .map(|r| {
                    format!(
                        "\"{}\":{{\"p50_us\":{:.1},\"p99_us\":{:.1}}}",
                        r.name, r.p50_us, r.p99_us
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{{\"bench\":\"parked_fetches\",\"fetches\":{},\"parked_seen\":{},\"rss_before_kb\":{},\"rss_parked_kb\":{},\
             \"bytes_per_parked_fetch\":{:.0},\"open_seconds\":{:.2},\"rtt_baseline\":{{{}}},\"rtt_parked\":{{{}}},\
             \"e2e_baseline_p50_ms\":{:.3},\"e2e_baseline_p99_ms\":{:.3},\"e2e_parked_p50_ms\":{:.3},\"e2e_parked_p99_ms\":{:.3},\
             \"parked_after_close\":{},\"drain_seconds\":{:.2}}}",
            self.fetches,
            self.parked_seen,
            self.rss_before_kb,
            self.rss_parked_kb,
            self.bytes_per_parked_fetch(),
            self.open_seconds,
            rtts(&self.baseline),
            rtts(&self.loaded),
            self.e2e_baseline.latency.p50,
            self.e2e_baseline.latency.p99,
            self.e2e_loaded.latency.p50,
            self.e2e_loaded.latency.p99,
            self.parked_after_close,
            self.drain_seconds,
        )
    }
}

/// Fetch v4 (header v1, not flexible) of partition 0 of `topic` from
/// offset 0, waiting up to `max_wait_ms` for one byte.
fn fetch_frame(topic: &str, max_wait_ms: i32, correlation_id: i32) -> Vec<u8> {
    let client_id = b"gregor-bench-parked";
    let mut payload = Vec::new();
    payload.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    payload.extend_from_slice(&4i16.to_be_bytes());
    payload.extend_from_slice(&correlation_id.to_be_bytes());
    payload.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    payload.extend_from_slice(client_id);
    payload.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    payload.extend_from_slice(&max_wait_ms.to_be_bytes());
    payload.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    payload.extend_from_slice(&(1i32 << 20).to_be_bytes()); // max bytes
    payload.push(0); // read_uncommitted
    payload.extend_from_slice(&1i32.to_be_bytes()); // one topic
    payload.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    payload.extend_from_slice(topic.as_bytes());
    payload.extend_from_slice(&1i32.to_be_bytes()); // one partition
    payload.extend_from_slice(&0i32.to_be_bytes());
    payload.extend_from_slice(&0i64.to_be_bytes()); // fetch offset
    payload.extend_from_slice(&(1i32 << 20).to_be_bytes());
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

/// Resident memory of `pid` in KiB.
fn rss_kb(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("no VmRSS for {pid}"))
}

/// `gregor_parked_requests` from the admin endpoint's `/metrics`.
fn parked_requests(admin: &str) -> Result<u64, String> {
    let mut stream = TcpStream::connect(admin).map_err(|e| format!("admin {admin}: {e}"))?;
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    text.lines()
        .find_map(|line| line.strip_prefix("gregor_parked_requests "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| "no gregor_parked_requests in /metrics".to_string())
}

fn wait_for_parked(
    admin: &str,
    wanted: impl Fn(u64) -> bool,
    timeout: Duration,
) -> Result<u64, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let parked = parked_requests(admin)?;
        if wanted(parked) || Instant::now() >= deadline {
            return Ok(parked);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(
    bootstrap: &str,
    admin: &str,
    broker_pid: u32,
    fetches: usize,
    seconds: usize,
) -> Result<ParkedRun, String> {
    let topic = format!("parked-{}", std::process::id());
    crate::create_topic(bootstrap, &topic, 1)?;
    let iterations = 3000;
    let baseline = rtt::run(bootstrap, iterations)?;
    let e2e_baseline = e2e::run(bootstrap, 2000, seconds, 1024)?;
    let rss_before_kb = rss_kb(broker_pid)?;

    let opened = Instant::now();
    let mut waiting = Vec::with_capacity(fetches);
    // Long enough to outlast the measurement; closing the sockets ends them.
    let max_wait_ms = 600_000;
    for i in 0..fetches {
        let mut stream =
            TcpStream::connect(bootstrap).map_err(|e| format!("connection {i}: {e}"))?;
        stream
            .write_all(&fetch_frame(&topic, max_wait_ms, i as i32))
            .map_err(|e| format!("fetch {i}: {e}"))?;
        waiting.push(stream);
    }
    let parked_seen = wait_for_parked(admin, |n| n as usize >= fetches, Duration::from_secs(60))?;
    let open_seconds = opened.elapsed().as_secs_f64();
    let rss_parked_kb = rss_kb(broker_pid)?;
    let loaded = rtt::run(bootstrap, iterations)?;
    let e2e_loaded = e2e::run(bootstrap, 2000, seconds, 1024)?;

    let closed = Instant::now();
    drop(waiting);
    let parked_after_close = wait_for_parked(admin, |n| n == 0, Duration::from_secs(30))?;
    let drain_seconds = closed.elapsed().as_secs_f64();
    Ok(ParkedRun {
        fetches,
        parked_seen,
        rss_before_kb,
        rss_parked_kb,
        open_seconds,
        baseline,
        loaded,
        e2e_baseline,
        e2e_loaded,
        parked_after_close,
        drain_seconds,
    })
}
