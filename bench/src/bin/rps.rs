//! `rps`: requests per second of small requests over many connections
//! (issue 17 item 4). Each connection keeps one request in flight, as a
//! Kafka client does per broker connection, and sends hand-encoded
//! ApiVersions v0, Metadata v1 (one topic) or Produce v3 (one record of
//! `--record-size` bytes, 100 by default, a JSON string; acks=1) frames,
//! so the client spends almost nothing per request and what is measured
//! is the broker's request path.
//!
//! ```text
//! rps [--gregor-bin BIN]... [--plugin-dir DIR] [--bootstrap HOST:PORT]
//!     [--variant "LABEL:key=value;key=value"]... [--record-size B]
//!     [--connections 1,10,100] [--requests api_versions,metadata,produce]
//!     [--seconds S] [--warmup S] [--rounds R] [--threads T] [--json FILE]
//! ```
//!
//! Without `--bootstrap` it starts each `--gregor-bin` (default
//! `$GREGOR_BIN`) on a free loopback port with a fresh data directory and
//! `$GREGOR_PLUGIN_DIR`, once per `--variant` (broker settings on top of
//! those, e.g. an interceptor chain), and with two or more brokers it
//! alternates them round by round and prints the ratio of each to the
//! first, so a before/after comparison is measured back to back under the
//! same load.
//! Broker CPU (user + system from /proc) per request is reported for the
//! brokers it started. `make bench-rps`; never part of `make test`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOPIC: &str = "rps";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ApiVersions,
    Metadata,
    Produce,
}

impl Kind {
    fn parse(name: &str) -> Result<Self, String> {
        match name {
            "api_versions" => Ok(Kind::ApiVersions),
            "metadata" => Ok(Kind::Metadata),
            "produce" => Ok(Kind::Produce),
            other => Err(format!("unknown request kind {other}")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::ApiVersions => "ApiVersions v0",
            Kind::Metadata => "Metadata v1",
            Kind::Produce => "Produce v3 (1 record, acks=1)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::ApiVersions => "api_versions",
            Kind::Metadata => "metadata",
            Kind::Produce => "produce",
        }
    }

    /// The request frame (correlation id 0; patched per request); a
    /// Produce carries one record of `record_size` bytes.
    fn frame(self, record_size: usize) -> Vec<u8> {
        match self {
            Kind::ApiVersions => frame(18, 0, &[]),
            Kind::Metadata => {
                let mut body = 1i32.to_be_bytes().to_vec();
                put_string(&mut body, TOPIC);
                frame(3, 1, &body)
            }
            Kind::Produce => {
                let mut body = Vec::new();
                body.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id
                body.extend_from_slice(&1i16.to_be_bytes()); // acks
                body.extend_from_slice(&30_000i32.to_be_bytes());
                body.extend_from_slice(&1i32.to_be_bytes());
                put_string(&mut body, TOPIC);
                body.extend_from_slice(&1i32.to_be_bytes());
                body.extend_from_slice(&0i32.to_be_bytes());
                let batch = record_batch(&json_string(record_size));
                body.extend_from_slice(&(batch.len() as i32).to_be_bytes());
                body.extend_from_slice(&batch);
                frame(0, 3, &body)
            }
        }
    }

    /// The error code a response carries (after its correlation id), or
    /// a description of why it cannot be read.
    fn error_code(self, response: &[u8]) -> Result<i16, String> {
        let mut r = Reader(response);
        match self {
            Kind::ApiVersions => r.i16(),
            Kind::Metadata => {
                for _ in 0..r.i32()? {
                    r.skip(4)?;
                    r.string()?;
                    r.skip(4)?;
                    r.string()?;
                }
                r.skip(4)?; // controller id
                if r.i32()? != 1 {
                    return Err("expected one topic".into());
                }
                r.i16()
            }
            Kind::Produce => {
                if r.i32()? != 1 {
                    return Err("expected one topic".into());
                }
                r.string()?;
                if r.i32()? != 1 {
                    return Err("expected one partition".into());
                }
                r.skip(4)?;
                r.i16()
            }
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("short response".into());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn skip(&mut self, n: usize) -> Result<(), String> {
        self.take(n).map(|_| ())
    }
    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A nullable string, skipped.
    fn string(&mut self) -> Result<(), String> {
        let len = self.i16()?;
        self.skip(usize::try_from(len).unwrap_or(0))
    }
}

fn put_string(out: &mut Vec<u8>, value: &str) {
    out.extend_from_slice(&(value.len() as i16).to_be_bytes());
    out.extend_from_slice(value.as_bytes());
}

/// Request frame with header v1 (none of the three versions is flexible).
fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&api_key.to_be_bytes());
    payload.extend_from_slice(&version.to_be_bytes());
    payload.extend_from_slice(&0i32.to_be_bytes());
    put_string(&mut payload, "gregor-rps");
    payload.extend_from_slice(body);
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// A JSON string value of `size` bytes (at least 2): the broker reads no
/// values, but a JSON validator interceptor does.
fn json_string(size: usize) -> Vec<u8> {
    let mut value = vec![b'x'; size.max(2)];
    value[0] = b'"';
    let last = value.len() - 1;
    value[last] = b'"';
    value
}

/// A v2 record batch of one record with `value`, no key.
fn record_batch(value: &[u8]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut record = vec![0u8]; // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, -1); // key
    put_varint(&mut record, value.len() as i64);
    record.extend_from_slice(value);
    put_varint(&mut record, 0); // headers
    let mut after_crc = Vec::new();
    after_crc.extend_from_slice(&0i16.to_be_bytes()); // attributes
    after_crc.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    after_crc.extend_from_slice(&now.to_be_bytes());
    after_crc.extend_from_slice(&now.to_be_bytes());
    after_crc.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    after_crc.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    after_crc.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    after_crc.extend_from_slice(&1i32.to_be_bytes());
    put_varint(&mut after_crc, record.len() as i64);
    after_crc.extend_from_slice(&record);
    let mut batch = 0i64.to_be_bytes().to_vec();
    let length = 4 + 1 + 4 + after_crc.len();
    batch.extend_from_slice(&(length as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c::crc32c(&after_crc).to_be_bytes());
    batch.extend_from_slice(&after_crc);
    batch
}

/// One request and its response on `stream`.
async fn round_trip(
    stream: &mut TcpStream,
    request: &mut [u8],
    correlation_id: i32,
    response: &mut Vec<u8>,
) -> Result<(), String> {
    request[8..12].copy_from_slice(&correlation_id.to_be_bytes());
    stream.write_all(request).await.map_err(|e| e.to_string())?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| e.to_string())?;
    let len = usize::try_from(i32::from_be_bytes(size)).map_err(|_| "negative size")?;
    response.resize(len, 0);
    stream
        .read_exact(response)
        .await
        .map_err(|e| e.to_string())?;
    if response.get(..4) != Some(&correlation_id.to_be_bytes()[..]) {
        return Err("correlation id mismatch".into());
    }
    Ok(())
}

/// What one connection did inside the measured window.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    errors: u64,
}

async fn connection(
    addr: String,
    kind: Kind,
    record_size: usize,
    measured_from: Instant,
    until: Instant,
) -> Result<Tally, String> {
    let mut stream = TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut request = kind.frame(record_size);
    let mut response = Vec::new();
    let mut tally = Tally::default();
    let mut correlation_id = 0i32;
    loop {
        let started = Instant::now();
        if started >= until {
            return Ok(tally);
        }
        correlation_id = correlation_id.wrapping_add(1);
        round_trip(&mut stream, &mut request, correlation_id, &mut response).await?;
        if started >= measured_from {
            let elapsed = started.elapsed().as_micros();
            tally
                .latencies_us
                .push(u32::try_from(elapsed).unwrap_or(u32::MAX));
            if kind.error_code(&response[4..])? != 0 {
                tally.errors += 1;
            }
        }
    }
}

struct Row {
    requests: u64,
    seconds: f64,
    p50_us: u32,
    p99_us: u32,
    errors: u64,
    broker_cpu_us_per_request: Option<f64>,
    load1: f64,
}

impl Row {
    fn rps(&self) -> f64 {
        self.requests as f64 / self.seconds
    }
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// User + system CPU seconds of process `pid`.
fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / ticks)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Broker settings one set of runs adds (`--variant`).
struct Variant {
    label: String,
    settings: Vec<String>,
}

impl Variant {
    /// `LABEL` or `LABEL:key=value;key=value`.
    fn parse(raw: &str) -> Result<Self, String> {
        let (label, settings) = raw.split_once(':').unwrap_or((raw, ""));
        let settings: Vec<String> = settings
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if label.is_empty() || settings.iter().any(|s| !s.contains('=')) {
            return Err(format!(
                "--variant {raw:?}: LABEL or LABEL:key=value;key=value"
            ));
        }
        Ok(Self {
            label: label.to_string(),
            settings,
        })
    }
}

struct Options {
    bins: Vec<PathBuf>,
    plugin_dir: PathBuf,
    bootstrap: Option<String>,
    variants: Vec<Variant>,
    record_size: usize,
    connections: Vec<usize>,
    kinds: Vec<Kind>,
    seconds: f64,
    warmup: f64,
    rounds: usize,
    threads: usize,
    json: Option<PathBuf>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        bins: Vec::new(),
        plugin_dir: std::env::var_os("GREGOR_PLUGIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("build/plugins")),
        bootstrap: None,
        variants: Vec::new(),
        record_size: 100,
        connections: vec![1, 10, 100],
        kinds: vec![Kind::ApiVersions, Kind::Metadata, Kind::Produce],
        seconds: 5.0,
        warmup: 1.0,
        rounds: 1,
        threads: 1,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<f64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--gregor-bin" => o.bins.push(PathBuf::from(value()?)),
            "--plugin-dir" => o.plugin_dir = PathBuf::from(value()?),
            "--bootstrap" => o.bootstrap = Some(value()?),
            "--variant" => o.variants.push(Variant::parse(&value()?)?),
            "--record-size" => o.record_size = number(value()?)? as usize,
            "--connections" => {
                o.connections = value()?
                    .split(',')
                    .map(|n| n.parse().map_err(|e| format!("{n}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--requests" => {
                o.kinds = value()?
                    .split(',')
                    .map(Kind::parse)
                    .collect::<Result<_, _>>()?
            }
            "--seconds" => o.seconds = number(value()?)?,
            "--warmup" => o.warmup = number(value()?)?,
            "--rounds" => o.rounds = number(value()?)? as usize,
            "--threads" => o.threads = number(value()?)? as usize,
            "--json" => o.json = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.bins.is_empty() && o.bootstrap.is_none() {
        let bin = std::env::var_os("GREGOR_BIN")
            .ok_or("give --gregor-bin, --bootstrap or $GREGOR_BIN")?;
        o.bins.push(PathBuf::from(bin));
    }
    Ok(o)
}

/// A broker this program started, stopped when dropped.
struct Started {
    child: Child,
    data: PathBuf,
    addr: String,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

fn start(bin: &Path, plugin_dir: &Path, settings: &[String]) -> Result<Started, String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let data = std::env::temp_dir().join(format!("gregor-rps-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .arg("serve")
        .args(["--set", &format!("listeners=PLAINTEXT://127.0.0.1:{port}")])
        .args(["--set", &format!("log.dirs={}", data.display())])
        .args(["--set", &format!("plugin.dir={}", plugin_dir.display())])
        .args(["--set", "admin.listener="])
        .args(settings.iter().flat_map(|s| ["--set", s.as_str()]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    Ok(Started {
        child,
        data,
        addr: format!("127.0.0.1:{port}"),
    })
}

/// Waits until the broker answers and the topic exists (Metadata v1 with
/// auto-creation, the broker's default).
async fn ready(addr: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(mut stream) = TcpStream::connect(addr).await {
            let mut response = Vec::new();
            let mut request = Kind::Metadata.frame(0);
            match round_trip(&mut stream, &mut request, 1, &mut response).await {
                Ok(()) => match Kind::Metadata.error_code(&response[4..]) {
                    Ok(0) => return Ok(()),
                    Ok(code) => last = format!("metadata error {code}"),
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("broker at {addr} not ready: {last}"))
}

async fn measure(
    addr: &str,
    kind: Kind,
    connections: usize,
    o: &Options,
    broker: Option<u32>,
    ticks: f64,
) -> Result<Row, String> {
    let start = Instant::now() + Duration::from_millis(200);
    let measured_from = start + Duration::from_secs_f64(o.warmup);
    let until = measured_from + Duration::from_secs_f64(o.seconds);
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            tokio::spawn(connection(
                addr.to_string(),
                kind,
                o.record_size,
                measured_from,
                until,
            ))
        })
        .collect();
    tokio::time::sleep_until(measured_from.into()).await;
    let cpu_before = broker.and_then(|pid| cpu_seconds(pid, ticks));
    tokio::time::sleep_until(until.into()).await;
    let cpu_after = broker.and_then(|pid| cpu_seconds(pid, ticks));
    let load = load1();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let tally = task.await.map_err(|e| e.to_string())??;
        latencies.extend(tally.latencies_us);
        errors += tally.errors;
    }
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let requests = latencies.len() as u64;
    Ok(Row {
        requests,
        seconds: o.seconds,
        p50_us: at(0.5),
        p99_us: at(0.99),
        errors,
        broker_cpu_us_per_request: match (cpu_before, cpu_after) {
            (Some(a), Some(b)) if requests > 0 => Some((b - a) * 1e6 / requests as f64),
            _ => None,
        },
        load1: load,
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 0 => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        n => values[n / 2],
    }
}

fn run(o: &Options) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let ticks = clock_ticks();
    let targets = targets(o);
    // (target, kind, connections) -> rows of every round.
    let mut results: BTreeMap<(usize, Kind, usize), Vec<Row>> = BTreeMap::new();
    let mut json = Vec::new();
    for round in 0..o.rounds.max(1) {
        for (index, target) in targets.iter().enumerate() {
            let started = match target.bin {
                Some(bin) => Some(start(bin, &o.plugin_dir, target.settings)?),
                None => None,
            };
            let addr = started
                .as_ref()
                .map(|s| s.addr.clone())
                .or_else(|| o.bootstrap.clone())
                .ok_or("no broker")?;
            let pid = started.as_ref().map(|s| s.child.id());
            runtime.block_on(ready(&addr))?;
            let name = target.name(&addr);
            for &kind in &o.kinds {
                for &connections in &o.connections {
                    let row = runtime.block_on(measure(&addr, kind, connections, o, pid, ticks))?;
                    eprintln!(
                        "round {round} {name}: {} x{connections}: {:.0} req/s, p50 {} us, p99 {} us, cpu {:.1} us/req, {} errors, load {:.1}",
                        kind.name(),
                        row.rps(),
                        row.p50_us,
                        row.p99_us,
                        row.broker_cpu_us_per_request.unwrap_or(f64::NAN),
                        row.errors,
                        row.load1
                    );
                    json.push(format!(
                        "{{\"bench\":\"rps\",\"broker\":\"{}\",\"round\":{round},\"request\":\"{}\",\"record_size\":{},\"connections\":{connections},\"requests_per_s\":{:.1},\"p50_us\":{},\"p99_us\":{},\"broker_cpu_us_per_request\":{},\"errors\":{},\"load1\":{:.2}}}",
                        name.replace('\\', "\\\\").replace('"', "\\\""),
                        kind.key(),
                        o.record_size,
                        row.rps(),
                        row.p50_us,
                        row.p99_us,
                        row.broker_cpu_us_per_request.map_or("null".to_string(), |c| format!("{c:.2}")),
                        row.errors,
                        row.load1
                    ));
                    if row.errors > 0 {
                        return Err(format!("{} answered {} errors", kind.name(), row.errors));
                    }
                    results
                        .entry((index, kind, connections))
                        .or_default()
                        .push(row);
                }
            }
        }
    }
    if let Some(path) = &o.json {
        std::fs::write(path, json.join("\n") + "\n").map_err(|e| e.to_string())?;
    }
    print_table(o, &targets, &mut results);
    Ok(())
}

/// One broker to measure: a binary (None: the `--bootstrap` broker) and
/// the settings of a variant.
struct Target<'a> {
    bin: Option<&'a PathBuf>,
    label: Option<&'a str>,
    settings: &'a [String],
}

impl Target<'_> {
    fn name(&self, addr: &str) -> String {
        let broker = self
            .bin
            .map_or(addr.to_string(), |bin| bin.display().to_string());
        match self.label {
            Some(label) => format!("{broker} [{label}]"),
            None => broker,
        }
    }
}

/// Every binary with every variant (a `--bootstrap` broker as it is).
fn targets(o: &Options) -> Vec<Target<'_>> {
    if o.bootstrap.is_some() {
        return vec![Target {
            bin: None,
            label: None,
            settings: &[],
        }];
    }
    let mut targets = Vec::new();
    for bin in &o.bins {
        if o.variants.is_empty() {
            targets.push(Target {
                bin: Some(bin),
                label: None,
                settings: &[],
            });
        }
        for variant in &o.variants {
            targets.push(Target {
                bin: Some(bin),
                label: Some(&variant.label),
                settings: &variant.settings,
            });
        }
    }
    targets
}

fn print_table(
    o: &Options,
    targets: &[Target<'_>],
    results: &mut BTreeMap<(usize, Kind, usize), Vec<Row>>,
) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\nMedians of {} round(s), {} s each after {} s warm-up; Produce records of {} bytes; load = 1-minute load average at the end of each measurement.\n",
        o.rounds.max(1),
        o.seconds,
        o.warmup,
        o.record_size
    );
    for (index, target) in targets.iter().enumerate() {
        let _ = writeln!(out, "[{index}] {}", target.name("--bootstrap broker"));
    }
    let mut header = "| request | connections |".to_string();
    for index in 0..targets.len() {
        header.push_str(&format!(
            " [{index}] req/s | [{index}] p50 µs | [{index}] p99 µs | [{index}] cpu µs/req |"
        ));
        if index > 0 {
            header.push_str(&format!(" [{index}]/[0] req/s |"));
        }
    }
    header.push_str(" load |");
    let _ = writeln!(out, "{header}");
    let columns = header.matches('|').count() - 1;
    let _ = writeln!(out, "{}|", "|---".repeat(columns));
    for &kind in &o.kinds {
        for &connections in &o.connections {
            let mut line = format!("| {} | {connections} |", kind.name());
            let mut first = f64::NAN;
            let mut loads = Vec::new();
            for index in 0..targets.len() {
                let rows = results.entry((index, kind, connections)).or_default();
                let rps = median(&mut rows.iter().map(Row::rps).collect::<Vec<_>>());
                let p50 = median(&mut rows.iter().map(|r| r.p50_us as f64).collect::<Vec<_>>());
                let p99 = median(&mut rows.iter().map(|r| r.p99_us as f64).collect::<Vec<_>>());
                let cpu = median(
                    &mut rows
                        .iter()
                        .filter_map(|r| r.broker_cpu_us_per_request)
                        .collect::<Vec<_>>(),
                );
                loads.extend(rows.iter().map(|r| r.load1));
                line.push_str(&format!(" {rps:.0} | {p50:.0} | {p99:.0} | {cpu:.1} |"));
                if index == 0 {
                    first = rps;
                } else {
                    line.push_str(&format!(" {:.2}× |", rps / first));
                }
            }
            line.push_str(&format!(" {:.1} |", median(&mut loads)));
            let _ = writeln!(out, "{line}");
        }
    }
}

fn main() -> ExitCode {
    match options().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rps: {error}");
            ExitCode::FAILURE
        }
    }
}
