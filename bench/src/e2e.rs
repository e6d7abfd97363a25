//! End-to-end latency at a fixed, moderate rate: each record carries its
//! send time; a consumer on the same machine measures arrival minus send.
//! Records sent in the first second are a warm-up (the consumer is still
//! connecting) and are not counted.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::stats::{latency_ms, Latency};

pub struct E2eRun {
    pub records: usize,
    pub rate: usize,
    pub latency: Latency,
}

impl E2eRun {
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"e2e\",\"rate\":{},\"records\":{},\"latency_ms\":{{\"p50\":{:.2},\"p99\":{:.2},\"p99_9\":{:.2},\"max\":{:.2}}}}}",
            self.rate, self.records, self.latency.p50, self.latency.p99, self.latency.p999, self.latency.max
        )
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

pub fn run(bootstrap: &str, rate: usize, seconds: usize, size: usize) -> Result<E2eRun, String> {
    // A topic of its own per run: a second run in the same process must not
    // read the first one's records.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let topic = format!("bench-e2e-{}-{run}", std::process::id());
    crate::create_topic(bootstrap, &topic, 1)?;
    let consumer: BaseConsumer = crate::client_config(bootstrap)
        .set("group.id", "gregor-bench-e2e")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .map_err(|e| format!("consumer: {e}"))?;
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&topic, 0, Offset::Beginning)
        .map_err(|e| format!("assign: {e}"))?;
    consumer
        .assign(&assignment)
        .map_err(|e| format!("assign: {e}"))?;
    let producer: BaseProducer = crate::client_config(bootstrap)
        .set("acks", "1")
        .set("linger.ms", "0")
        .create()
        .map_err(|e| format!("producer: {e}"))?;

    let warm_up = rate;
    let total = rate * seconds + warm_up;
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let mut samples = Vec::with_capacity(total);
    let mut received = 0usize;
    let started = Instant::now();
    let mut sent = 0usize;
    let deadline = started + Duration::from_secs(seconds as u64 + 61);
    let filler = vec![b'x'; size.saturating_sub(8)];
    while received < total {
        if Instant::now() > deadline {
            return Err(format!("received {received} of {total} records"));
        }
        let due = started + interval * sent as u32;
        if sent < total && Instant::now() >= due {
            let mut payload = now_us().to_be_bytes().to_vec();
            payload.extend_from_slice(&filler);
            producer
                .send(BaseRecord::<(), _>::to(&topic).payload(&payload))
                .map_err(|(e, _)| format!("send: {e}"))?;
            sent += 1;
        }
        producer.poll(Duration::ZERO);
        if let Some(result) = consumer.poll(Duration::from_micros(200)) {
            let message = result.map_err(|e| format!("consume: {e}"))?;
            if let Some(stamp) = message.payload().and_then(|p| p.get(..8)) {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(stamp);
                received += 1;
                if received > warm_up {
                    samples.push(now_us().saturating_sub(u64::from_be_bytes(raw)));
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(10))
        .map_err(|e| format!("flush: {e}"))?;
    Ok(E2eRun {
        records: samples.len(),
        rate,
        latency: latency_ms(&mut samples),
    })
}
