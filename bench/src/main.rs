//! `gregor-bench`: drives a running broker with librdkafka and prints what
//! it measured. Separate from the broker and never part of `make test`.
//!
//! `gregor-bench produce --bootstrap HOST:PORT [--records N] [--size BYTES]
//! [--acks 1|all|0] [--partitions P] [--topic NAME]` produces N records of
//! SIZE bytes as fast as librdkafka allows and reports records/s, MB/s
//! and the send-to-delivery-report latency percentiles.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

struct Options {
    bootstrap: String,
    records: usize,
    size: usize,
    acks: String,
    partitions: i32,
    topic: String,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        bootstrap: "127.0.0.1:9092".to_string(),
        records: 200_000,
        size: 1024,
        acks: "1".to_string(),
        partitions: 1,
        topic: String::new(),
    };
    let mut iter = args.iter();
    match iter.next().map(String::as_str) {
        Some("produce") => {}
        other => return Err(format!("unknown command {other:?}")),
    }
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--bootstrap" => options.bootstrap = value.clone(),
            "--records" => options.records = number()?,
            "--size" => options.size = number()?,
            "--acks" => options.acks = value.clone(),
            "--partitions" => options.partitions = number()? as i32,
            "--topic" => options.topic = value.clone(),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if options.topic.is_empty() {
        options.topic = format!(
            "bench-{}b-acks{}-p{}-{}",
            options.size,
            options.acks,
            options.partitions,
            std::process::id()
        );
    }
    Ok(options)
}

/// Records each delivery's latency from the send instant carried as opaque.
struct LatencyContext;

impl ClientContext for LatencyContext {}

impl ProducerContext for LatencyContext {
    type DeliveryOpaque = Box<Instant>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        let micros = sent.elapsed().as_micros() as u64;
        LATENCIES.with(|latencies| latencies.borrow_mut().push(micros));
        if result.is_err() {
            FAILURES.with(|failures| *failures.borrow_mut() += 1);
        }
    }
}

thread_local! {
    // Delivery callbacks run on the thread that polls: ours.
    static LATENCIES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    static FAILURES: std::cell::RefCell<u64> = const { std::cell::RefCell::new(0) };
}

fn create_topic(options: &Options) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &options.bootstrap)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let topic = NewTopic::new(
        &options.topic,
        options.partitions,
        TopicReplication::Fixed(1),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let results = runtime
        .block_on(admin.create_topics(&[topic], &AdminOptions::new()))
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

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
}

fn produce(options: &Options) -> Result<(), String> {
    create_topic(options)?;
    let producer: BaseProducer<LatencyContext> = ClientConfig::new()
        .set("bootstrap.servers", &options.bootstrap)
        .set("acks", &options.acks)
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "500000")
        .create_with_context(LatencyContext)
        .map_err(|e| format!("producer: {e}"))?;
    let payload = vec![b'x'; options.size];
    let started = Instant::now();
    for i in 0..options.records {
        let key = (i as u64).to_be_bytes();
        let mut record = BaseRecord::with_opaque_to(&options.topic, Box::new(Instant::now()))
            .key(&key[..])
            .payload(&payload[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => return Err(format!("send: {error}")),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(|e| format!("flush: {e}"))?;
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies = LATENCIES.with(|l| std::mem::take(&mut *l.borrow_mut()));
    let failures = FAILURES.with(|f| *f.borrow());
    latencies.sort_unstable();
    let records_per_sec = options.records as f64 / elapsed;
    let mb_per_sec = records_per_sec * options.size as f64 / 1_000_000.0;
    println!(
        "{{\"bench\":\"produce\",\"records\":{},\"size\":{},\"acks\":\"{}\",\"partitions\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.1},\"latency_ms\":{{\"p50\":{:.2},\"p99\":{:.2},\"p99_9\":{:.2}}},\"delivered\":{},\"failed\":{}}}",
        options.records,
        options.size,
        options.acks,
        options.partitions,
        elapsed,
        records_per_sec,
        mb_per_sec,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 99.9),
        latencies.len(),
        failures
    );
    if failures > 0 || latencies.len() != options.records {
        return Err(format!(
            "{} of {} records were not delivered",
            options.records - latencies.len() + failures as usize,
            options.records
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = parse(&args).and_then(|options| produce(&options));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gregor-bench: {error}");
            ExitCode::FAILURE
        }
    }
}
