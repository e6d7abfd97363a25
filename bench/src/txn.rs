//! Transactional throughput: T transactions of R records each from one
//! librdkafka transactional producer (begin, R sends, commit; the commit
//! flushes the records, then EndTxn writes the markers), against the same
//! T x R records from an idempotent producer without transactions.
//!
//! Every transaction costs at least AddPartitionsToTxn, the Produce
//! requests and EndTxn (markers on every partition in it) one after the
//! other, so the figures that matter are transactions per second and the
//! commit latency; records per second against the idempotent run shows
//! what the transactions cost.
//!
//! Before `commit_transaction` (and at the end of the idempotent run) the
//! producer is flushed with librdkafka's own `rd_kafka_flush`, as a C
//! application's commit does: rust-rdkafka's `flush`, which its
//! `commit_transaction` calls first, polls in 100 ms steps that always run
//! to their end, and would add up to 100 ms to every commit that neither
//! librdkafka nor the broker spends. Delivery reports are served by the
//! `ThreadedProducer`'s thread meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::bindings::{rd_kafka_flush, rd_kafka_resp_err_t};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use crate::stats::{latency_ms, Latency};

/// Timeout of each transactional call and of the final flush.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

pub struct TxnRun {
    pub topic: String,
    pub transactions: usize,
    pub records_per_txn: usize,
    pub size: usize,
    pub partitions: i32,
    pub seconds: f64,
    pub txn_per_sec: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
    /// From begin_transaction to commit_transaction returning.
    pub txn_latency: Latency,
    /// From the last send to commit_transaction returning: delivery of the
    /// records still in flight, then EndTxn.
    pub commit_latency: Latency,
    /// The same number of records, idempotent, no transactions.
    pub idempotent_seconds: f64,
    pub idempotent_records_per_sec: f64,
}

impl TxnRun {
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"txn\",\"topic\":\"{}\",\"transactions\":{},\"records_per_txn\":{},\"size\":{},\"partitions\":{},\"seconds\":{:.3},\"txn_per_sec\":{:.1},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.2},\"txn_latency_ms\":{{\"p50\":{:.2},\"p99\":{:.2},\"max\":{:.2}}},\"commit_latency_ms\":{{\"p50\":{:.2},\"p99\":{:.2},\"max\":{:.2}}},\"idempotent_seconds\":{:.3},\"idempotent_records_per_sec\":{:.0}}}",
            self.topic,
            self.transactions,
            self.records_per_txn,
            self.size,
            self.partitions,
            self.seconds,
            self.txn_per_sec,
            self.records_per_sec,
            self.mb_per_sec,
            self.txn_latency.p50,
            self.txn_latency.p99,
            self.txn_latency.max,
            self.commit_latency.p50,
            self.commit_latency.p99,
            self.commit_latency.max,
            self.idempotent_seconds,
            self.idempotent_records_per_sec
        )
    }
}

/// Counts failed deliveries (callbacks run on the producer's polling
/// thread).
#[derive(Default)]
struct Failures(AtomicU64);

impl ClientContext for Failures {}

impl ProducerContext for Failures {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type TxnProducer = ThreadedProducer<Failures>;

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Result<TxnProducer, String> {
    let mut config = crate::client_config(bootstrap);
    config
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("compression.type", "none")
        .set("queue.buffering.max.messages", "500000");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config
        .create_with_context(Failures::default())
        .map_err(|e| format!("producer: {e}"))
}

/// librdkafka's flush: sends what lingers at once and waits until every
/// record is delivered (its delivery report served by the polling thread).
fn flush(producer: &TxnProducer) -> Result<(), String> {
    let timeout_ms = CALL_TIMEOUT.as_millis() as i32;
    // SAFETY: the pointer is the live rd_kafka_t of `producer`, which
    // outlives the call; rd_kafka_flush may be called from any thread.
    let error = unsafe { rd_kafka_flush(producer.client().native_ptr(), timeout_ms) };
    if error == rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(format!(
            "flush: {} (librdkafka error {error:?})",
            RDKafkaErrorCode::from(error)
        ))
    }
}

/// Enqueues record `i` (key `i`, round-robin over the partitions), waiting
/// while the queue is full.
fn send(
    producer: &TxnProducer,
    topic: &str,
    partitions: i32,
    i: usize,
    payload: &[u8],
) -> Result<(), String> {
    let key = (i as u64).to_be_bytes();
    let mut record = BaseRecord::to(topic)
        .key(&key[..])
        .payload(payload)
        .partition((i % partitions as usize) as i32);
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((error, _)) => return Err(format!("send: {error}")),
        }
    }
}

pub fn run(
    bootstrap: &str,
    transactions: usize,
    records_per_txn: usize,
    size: usize,
    partitions: i32,
) -> Result<TxnRun, String> {
    let pid = std::process::id();
    let topic = format!("bench-txn-{size}b-p{partitions}-{pid}");
    let idempotent_topic = format!("bench-idem-{size}b-p{partitions}-{pid}");
    crate::create_topic(bootstrap, &topic, partitions)?;
    crate::create_topic(bootstrap, &idempotent_topic, partitions)?;
    let payload = vec![b'x'; size];
    let records = transactions * records_per_txn;

    let transactional_id = format!("gregor-bench-txn-{size}b-p{partitions}-{pid}");
    let txn = producer(bootstrap, &[("transactional.id", &transactional_id)])?;
    txn.init_transactions(CALL_TIMEOUT)
        .map_err(|e| format!("init_transactions: {e}"))?;
    let mut txn_samples = Vec::with_capacity(transactions);
    let mut commit_samples = Vec::with_capacity(transactions);
    let started = Instant::now();
    for t in 0..transactions {
        let began = Instant::now();
        txn.begin_transaction()
            .map_err(|e| format!("begin_transaction {t}: {e}"))?;
        for r in 0..records_per_txn {
            send(&txn, &topic, partitions, t * records_per_txn + r, &payload)?;
        }
        let committing = Instant::now();
        flush(&txn)?;
        txn.commit_transaction(CALL_TIMEOUT)
            .map_err(|e| format!("commit_transaction {t}: {e}"))?;
        commit_samples.push(committing.elapsed().as_micros() as u64);
        txn_samples.push(began.elapsed().as_micros() as u64);
    }
    let seconds = started.elapsed().as_secs_f64();
    let failed = txn.context().0.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} transactional deliveries failed"));
    }
    drop(txn);

    let idempotent = producer(
        bootstrap,
        &[("enable.idempotence", "true"), ("acks", "all")],
    )?;
    // Off the clock, as init_transactions is for the transactional run: a
    // record per partition gets the producer id and the topic's metadata.
    for i in 0..partitions as usize {
        send(&idempotent, &idempotent_topic, partitions, i, &payload)?;
    }
    flush(&idempotent)?;
    let idempotent_started = Instant::now();
    for i in 0..records {
        send(&idempotent, &idempotent_topic, partitions, i, &payload)?;
    }
    flush(&idempotent)?;
    let idempotent_seconds = idempotent_started.elapsed().as_secs_f64();
    let failed = idempotent.context().0.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} idempotent deliveries failed"));
    }

    let records_per_sec = records as f64 / seconds;
    Ok(TxnRun {
        topic,
        transactions,
        records_per_txn,
        size,
        partitions,
        seconds,
        txn_per_sec: transactions as f64 / seconds,
        records_per_sec,
        mb_per_sec: records_per_sec * size as f64 / 1_000_000.0,
        txn_latency: latency_ms(&mut txn_samples),
        commit_latency: latency_ms(&mut commit_samples),
        idempotent_seconds,
        idempotent_records_per_sec: records as f64 / idempotent_seconds,
    })
}
