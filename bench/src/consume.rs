//! Consumer throughput: read a topic from the beginning of every partition
//! (assign, no group) until the expected number of records has arrived.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

pub struct ConsumeRun {
    pub topic: String,
    pub records: usize,
    pub bytes: usize,
    pub seconds: f64,
    pub records_per_sec: f64,
    pub mb_per_sec: f64,
}

impl ConsumeRun {
    pub fn json(&self) -> String {
        format!(
            "{{\"bench\":\"consume\",\"topic\":\"{}\",\"records\":{},\"bytes\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.2}}}",
            self.topic, self.records, self.bytes, self.seconds, self.records_per_sec, self.mb_per_sec
        )
    }
}

pub fn run(
    bootstrap: &str,
    topic: &str,
    records: usize,
    _size: usize,
) -> Result<ConsumeRun, String> {
    let consumer: BaseConsumer = crate::client_config(bootstrap)
        .set("group.id", "gregor-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .create()
        .map_err(|e| format!("consumer: {e}"))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .map_err(|e| format!("metadata: {e}"))?;
    let partitions = metadata
        .topics()
        .first()
        .map(|t| t.partitions().len())
        .ok_or("topic not found")?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition as i32, Offset::Beginning)
            .map_err(|e| format!("assign: {e}"))?;
    }
    consumer
        .assign(&assignment)
        .map_err(|e| format!("assign: {e}"))?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(300);
    let mut count = 0usize;
    let mut bytes = 0usize;
    while count < records {
        if Instant::now() > deadline {
            return Err(format!("consumed {count} of {records} before the deadline"));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                count += 1;
                bytes += message.payload_len();
            }
            Some(Err(error)) => return Err(format!("consume: {error}")),
            None => {}
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(ConsumeRun {
        topic: topic.to_string(),
        records: count,
        bytes,
        seconds,
        records_per_sec: count as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1_000_000.0,
    })
}
