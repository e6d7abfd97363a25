//! Producer throughput: N records as fast as librdkafka allows, with the
//! latency from send to delivery report of every record.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use crate::stats::{latency_ms, Latency};

pub struct ProduceRun {
    pub topic: String,
    pub records: usize,
    pub size: usize,
    pub acks: String,
    pub partitions: i32,
    pub seconds: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency: Latency,
}

impl ProduceRun {
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"produce\",\"topic\":\"{}\",\"records\":{},\"size\":{},\"acks\":\"{}\",\"partitions\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.2},\"latency_ms\":{{\"p50\":{:.2},\"p99\":{:.2},\"p99_9\":{:.2}}}}}",
            self.topic, self.records, self.size, self.acks, self.partitions, self.seconds, self.records_per_sec,
            self.mb_per_sec, self.latency.p50, self.latency.p99, self.latency.p999
        )
    }
}

thread_local! {
    // Delivery callbacks run on the thread that polls: ours.
    static LATENCIES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static FAILURES: RefCell<u64> = const { RefCell::new(0) };
}

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

pub fn run(
    bootstrap: &str,
    records: usize,
    size: usize,
    acks: &str,
    partitions: i32,
    topic: Option<String>,
) -> Result<ProduceRun, String> {
    let topic = topic.unwrap_or_else(|| {
        format!(
            "bench-{size}b-acks{acks}-p{partitions}-{}",
            std::process::id()
        )
    });
    crate::create_topic(bootstrap, &topic, partitions)?;
    let producer: BaseProducer<LatencyContext> = crate::client_config(bootstrap)
        .set("acks", acks)
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "500000")
        .create_with_context(LatencyContext)
        .map_err(|e| format!("producer: {e}"))?;
    LATENCIES.with(|l| l.borrow_mut().clear());
    FAILURES.with(|f| *f.borrow_mut() = 0);
    // A JSON string (quotes around x's): the broker reads no values, but
    // the JSON validator interceptor does (bench/interceptors.py).
    let payload = crate::call_interceptor::json_value(size);
    let started = Instant::now();
    for i in 0..records {
        let key = (i as u64).to_be_bytes();
        let mut record = BaseRecord::with_opaque_to(&topic, Box::new(Instant::now()))
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
    // Wait for the last deliveries by polling, not with `flush`: the
    // binding's flush sleeps in whole 100 ms steps, which would count up
    // to 100 ms of idle time into every run.
    let deadline = Instant::now() + Duration::from_secs(300);
    while producer.in_flight_count() > 0 {
        if Instant::now() >= deadline {
            return Err(format!(
                "{} records undelivered after 300 s",
                producer.in_flight_count()
            ));
        }
        producer.poll(Duration::from_millis(1));
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut latencies = LATENCIES.with(|l| std::mem::take(&mut *l.borrow_mut()));
    let failures = FAILURES.with(|f| *f.borrow());
    if failures > 0 || latencies.len() != records {
        return Err(format!(
            "{failures} deliveries failed, {} of {records} reported",
            latencies.len()
        ));
    }
    let records_per_sec = records as f64 / seconds;
    Ok(ProduceRun {
        topic,
        records,
        size,
        acks: acks.to_string(),
        partitions,
        seconds,
        records_per_sec,
        mb_per_sec: records_per_sec * size as f64 / 1_000_000.0,
        latency: latency_ms(&mut latencies),
    })
}
