//! `gregor-bench`: drives a running broker with librdkafka (the `rdkafka`
//! crate) and raw Kafka frames, and reports what it measured as JSON lines
//! and Markdown tables. Separate from the broker; never part of `make test`.
//!
//! ```text
//! gregor-bench suite   --bootstrap HOST:PORT [--records N] [--json FILE]
//! gregor-bench produce --bootstrap HOST:PORT [--records N] [--size B] [--acks 1|all|0] [--partitions P]
//! gregor-bench consume --bootstrap HOST:PORT --topic T --records N
//! gregor-bench e2e     --bootstrap HOST:PORT [--rate R] [--seconds S] [--size B]
//! gregor-bench rtt     --bootstrap HOST:PORT [--iterations N]
//! gregor-bench txn     --bootstrap HOST:PORT [--transactions T] [--records-per-txn R] [--size B] [--partitions P]
//! gregor-bench parked  --bootstrap HOST:PORT --admin HOST:PORT --broker-pid PID [--fetches N] [--seconds S]
//! gregor-bench call    --plugin-dir DIR [--module api_versions] [--iterations N]
//! gregor-bench call-interceptor --plugin-dir DIR --interceptor NAME [--size B] [--iterations N] [--set K=V]...
//! gregor-bench authz   --module FILE.wasm [--iterations N] [--actions K] [--acls M]
//!
//! Every command takes `--client-properties "k=v;k=v"`, librdkafka
//! properties for every client of the run (TLS, SASL), except `call`,
//! `call-interceptor` and `authz`, which need no broker: they measure the plugin boundary and
//! authorization inside the host, through the `gregor` library.
//! ```
//!
//! `make bench` starts a fresh broker and runs `suite`.

mod authz;
mod call;
mod call_interceptor;
mod consume;
mod e2e;
mod parked;
mod produce;
mod rtt;
mod stats;
mod txn;

use std::collections::BTreeMap;
use std::process::ExitCode;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;

/// Client properties every client of this run gets on top of its own
/// (`--client-properties "security.protocol=ssl;ssl.ca.location=ca.pem"`):
/// how the benchmarks reach TLS and SASL listeners.
static CLIENT_PROPERTIES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// A client config for `bootstrap` with the run's client properties.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in CLIENT_PROPERTIES.get().into_iter().flatten() {
        config.set(key, value);
    }
    config
}

fn parse_client_properties(raw: &str) -> Result<Vec<(String, String)>, String> {
    raw.split(';')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("--client-properties: {pair:?} is not key=value"))
        })
        .collect()
}

/// `--flag value` pairs after the command.
pub struct Args {
    values: BTreeMap<String, String>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut values = BTreeMap::new();
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            let Some(name) = flag.strip_prefix("--") else {
                return Err(format!("unexpected argument {flag}"));
            };
            let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
            values.insert(name.to_string(), value.clone());
        }
        Ok(Self { values })
    }

    pub fn text(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    pub fn number(&self, name: &str, default: usize) -> Result<usize, String> {
        match self.values.get(name) {
            Some(value) => value
                .parse()
                .map_err(|_| format!("--{name}: not a number: {value}")),
            None => Ok(default),
        }
    }
}

/// Creates a topic (an existing one is fine).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = crate::client_config(bootstrap)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = runtime
        .block_on(admin.create_topics(&[new_topic], &AdminOptions::new()))
        .map_err(|e| format!("create topic: {e}"))?;
    for result in results {
        if let Err((name, code)) = result {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(format!("create topic {name}: {code}"));
            }
        }
    }
    Ok(())
}

/// Records per transaction in the suite's transactional runs.
const RECORDS_PER_TXN: usize = 100;

/// The whole suite: producer matrix, consumers reading the same data back,
/// end-to-end latency, the plugin path round trips and transactions.
fn suite(args: &Args) -> Result<(), String> {
    let bootstrap = args.text("bootstrap", "127.0.0.1:9092");
    let records = args.number("records", 200_000)?;
    let mut results = Vec::new();
    println!("## Producer throughput ({records} records per run, librdkafka, linger.ms=5)\n");
    println!("| record size | acks | partitions | records/s | MB/s | p50 ms | p99 ms | p99.9 ms |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut topics = Vec::new();
    for size in [100usize, 1024] {
        for acks in ["1", "all"] {
            for partitions in [1i32, 8] {
                let run = produce::run(&bootstrap, records, size, acks, partitions, None)?;
                println!(
                    "| {size} B | {acks} | {partitions} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} |",
                    run.records_per_sec,
                    run.mb_per_sec,
                    run.latency.p50,
                    run.latency.p99,
                    run.latency.p999
                );
                topics.push((run.topic.clone(), size, acks, partitions));
                results.push(run.json());
            }
        }
    }
    println!("\n## Consumer throughput (reading back the acks=1 topics)\n");
    println!("| record size | partitions | records/s | MB/s |");
    println!("|---|---|---|---|");
    for (topic, size, acks, partitions) in &topics {
        if *acks != "1" {
            continue;
        }
        let run = consume::run(&bootstrap, topic, records, *size)?;
        println!(
            "| {size} B | {partitions} | {:.0} | {:.1} |",
            run.records_per_sec, run.mb_per_sec
        );
        results.push(run.json());
    }
    let rate = args.number("rate", 2000)?;
    let seconds = args.number("seconds", 10)?;
    let e2e = e2e::run(&bootstrap, rate, seconds, 1024)?;
    println!(
        "\n## End-to-end latency ({rate} records/s of 1 KiB for {seconds} s, produce to consume)\n"
    );
    println!("| p50 ms | p99 ms | p99.9 ms | max ms | records |");
    println!("|---|---|---|---|---|");
    println!(
        "| {:.2} | {:.2} | {:.2} | {:.2} | {} |",
        e2e.latency.p50, e2e.latency.p99, e2e.latency.p999, e2e.latency.max, e2e.records
    );
    results.push(e2e.json());
    let iterations = args.number("iterations", 5000)?;
    let rtts = rtt::run(&bootstrap, iterations)?;
    println!(
        "\n## Plugin path: request round trips over loopback ({iterations} each, one connection)\n"
    );
    println!("| request | p50 µs | p99 µs | p99.9 µs |");
    println!("|---|---|---|---|");
    for rtt in &rtts {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            rtt.name, rtt.p50_us, rtt.p99_us, rtt.p999_us
        );
        results.push(rtt.json());
    }
    let transactions = args.number("transactions", 1000)?;
    println!(
        "\n## Transactions ({transactions} transactions of {RECORDS_PER_TXN} records, one librdkafka \
         transactional producer, linger.ms=5), against the same records from an idempotent producer\n"
    );
    println!(
        "| record size | partitions | transactions/s | records/s | MB/s | transaction p50 ms | p99 ms | \
         commit p50 ms | p99 ms | idempotent records/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (size, partitions) in [(100usize, 1i32), (1024, 1), (1024, 4)] {
        let run = txn::run(&bootstrap, transactions, RECORDS_PER_TXN, size, partitions)?;
        println!(
            "| {size} B | {partitions} | {:.0} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
            run.txn_per_sec,
            run.records_per_sec,
            run.mb_per_sec,
            run.txn_latency.p50,
            run.txn_latency.p99,
            run.commit_latency.p50,
            run.commit_latency.p99,
            run.idempotent_records_per_sec
        );
        results.push(run.json());
    }
    if let Some(path) = args.values.get("json") {
        let text = results.join("\n") + "\n";
        std::fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

type InHostBench =
    fn(&[String]) -> std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + '_>>;

/// The benchmarks that run the plugin runtime in this process.
fn in_host_bench(command: &str) -> Option<InHostBench> {
    match command {
        "call" => Some(|args| Box::pin(call::run(args))),
        "call-interceptor" => Some(|args| Box::pin(call_interceptor::run(args))),
        "authz" => Some(|args| Box::pin(authz::run(args))),
        _ => None,
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let Some(command) = args.first() else {
        return Err(
            "usage: gregor-bench suite|produce|consume|e2e|rtt|txn|parked --bootstrap HOST:PORT ... | call|call-interceptor|authz ..."
                .to_string(),
        );
    };
    if let Some(in_host) = in_host_bench(command) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        return runtime
            .block_on(in_host(&args[1..]))
            .map_err(|e| format!("{e:#}"));
    }
    let options = Args::parse(&args[1..])?;
    if let Some(raw) = options.values.get("client-properties") {
        let _ = CLIENT_PROPERTIES.set(parse_client_properties(raw)?);
    }
    let bootstrap = options.text("bootstrap", "127.0.0.1:9092");
    // Every run but the suite's and rtt's prints one JSON line.
    let json = match command.as_str() {
        "suite" => return suite(&options),
        "produce" => produce::run(
            &bootstrap,
            options.number("records", 200_000)?,
            options.number("size", 1024)?,
            &options.text("acks", "1"),
            options.number("partitions", 1)? as i32,
            options.values.get("topic").cloned(),
        )?
        .json(),
        "consume" => {
            let topic = options.values.get("topic").ok_or("--topic is required")?;
            consume::run(
                &bootstrap,
                topic,
                options.number("records", 200_000)?,
                options.number("size", 1024)?,
            )?
            .json()
        }
        "e2e" => e2e::run(
            &bootstrap,
            options.number("rate", 2000)?,
            options.number("seconds", 10)?,
            options.number("size", 1024)?,
        )?
        .json(),
        "rtt" => {
            for rtt in rtt::run(&bootstrap, options.number("iterations", 5000)?)? {
                println!("{}", rtt.json());
            }
            return Ok(());
        }
        "txn" => txn::run(
            &bootstrap,
            options.number("transactions", 1000)?,
            options.number("records-per-txn", RECORDS_PER_TXN)?,
            options.number("size", 1024)?,
            options.number("partitions", 1)? as i32,
        )?
        .json(),
        "parked" => {
            let admin = options.values.get("admin").ok_or("--admin is required")?;
            let pid = options.number("broker-pid", 0)?;
            parked::run(
                &bootstrap,
                admin,
                u32::try_from(pid).map_err(|_| "--broker-pid: too large")?,
                options.number("fetches", 10_000)?,
                options.number("seconds", 5)?,
            )?
            .json()
        }
        other => return Err(format!("unknown command {other}")),
    };
    println!("{json}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gregor-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
