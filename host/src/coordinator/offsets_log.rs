//! `__consumer_offsets` on this broker's log, for the group store: the
//! topic created on first use as Kafka creates it (compacted,
//! `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`
//! capped at the brokers there are), appends and reads through the host's
//! log service like any partition's. On a cluster node the topic is the
//! controller's to create (FindCoordinator asks it), and an append here
//! is the leader's: followers fetch it like any partition's, woken by it.

use std::io;
use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::error_code::ErrorCode;
use crate::log::{LogStore, TopicPartition};
use crate::metadata::topics::{NewTopic, TopicManager};
use crate::purgatory::FetchPurgatory;

use super::offsets_topic::TOPIC;

/// Kafka's `offsets.topic.num.partitions`.
pub const NUM_PARTITIONS: &str = "offsets.topic.num.partitions";
/// Kafka's `offsets.topic.replication.factor`.
pub const REPLICATION_FACTOR: &str = "offsets.topic.replication.factor";
/// Kafka's `offsets.topic.segment.bytes`.
pub const SEGMENT_BYTES: &str = "offsets.topic.segment.bytes";
/// The most bytes one read of a partition returns while replaying.
const READ_BYTES: usize = 1 << 20;

/// The log the group store writes to.
pub trait OffsetsLog: Send + Sync {
    /// The topic's partition count; `create`s the topic first if it does
    /// not exist (else `None`).
    fn partitions(&self, create: bool) -> io::Result<Option<i32>>;
    /// Appends one batch to `partition`; the log's end offset after it.
    fn append(&self, partition: i32, batch: &[u8]) -> io::Result<i64>;
    /// `partition`'s log start and end offsets.
    fn bounds(&self, partition: i32) -> io::Result<(i64, i64)>;
    /// Whole batches of `partition` from `offset` (at least one).
    fn read(&self, partition: i32, offset: i64) -> io::Result<Vec<u8>>;
}

/// The topic on this broker: created through its topic manager on a
/// single node, stored in its log.
pub struct TopicOffsetsLog {
    topics: Arc<TopicManager>,
    logs: Arc<dyn LogStore>,
    /// Fetches waiting for appends (a cluster's followers among them).
    fetches: Arc<FetchPurgatory>,
    /// Whether this broker creates the topic (a single node).
    creates: bool,
    node_id: i32,
    num_partitions: i32,
    replication_factor: i16,
    segment_bytes: String,
}

impl TopicOffsetsLog {
    pub fn new(
        config: &BrokerConfig,
        topics: Arc<TopicManager>,
        logs: Arc<dyn LogStore>,
        fetches: Arc<FetchPurgatory>,
        node_id: i32,
    ) -> anyhow::Result<Self> {
        let num_partitions: i32 = parsed(config, NUM_PARTITIONS, 50)?;
        let replication_factor: i16 = parsed(config, REPLICATION_FACTOR, 3)?;
        if num_partitions < 1 || replication_factor < 1 {
            anyhow::bail!("{NUM_PARTITIONS} and {REPLICATION_FACTOR} must be at least 1");
        }
        let segment_bytes: i64 = parsed(config, SEGMENT_BYTES, 100 * 1024 * 1024)?;
        Ok(Self {
            topics,
            logs,
            fetches,
            creates: true,
            node_id,
            num_partitions,
            // One broker here: Kafka caps the factor at the live brokers
            // when it creates the topic on a small cluster.
            replication_factor: replication_factor.min(1),
            segment_bytes: segment_bytes.to_string(),
        })
    }

    /// The topic of a cluster node: created by the controller, never here.
    pub fn in_cluster(mut self) -> Self {
        self.creates = false;
        self
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition {
            topic: TOPIC.to_string(),
            partition,
        }
    }
}

fn parsed<T: std::str::FromStr>(config: &BrokerConfig, key: &str, default: T) -> anyhow::Result<T> {
    match config.get(key) {
        None => Ok(default),
        Some(raw) => raw
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{key}={raw} is not a valid number")),
    }
}

fn storage(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{TOPIC}: {error}"))
}

impl OffsetsLog for TopicOffsetsLog {
    fn partitions(&self, create: bool) -> io::Result<Option<i32>> {
        if let Some(topic) = self.topics.get(TOPIC) {
            return Ok(Some(topic.partitions));
        }
        if !create || !self.creates {
            return Ok(None);
        }
        let request = NewTopic {
            name: TOPIC.to_string(),
            num_partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            configs: vec![
                ("cleanup.policy".into(), Some("compact".into())),
                ("compression.type".into(), Some("producer".into())),
                ("segment.bytes".into(), Some(self.segment_bytes.clone())),
            ],
            replica_assignment: Vec::new(),
        };
        match self.topics.create(&request, self.node_id, false) {
            Ok(topic) => Ok(Some(topic.partitions)),
            // Created meanwhile (by an admin, say): use it as it is.
            Err(error) if error.code == ErrorCode::TopicAlreadyExists.code() => {
                Ok(self.topics.get(TOPIC).map(|topic| topic.partitions))
            }
            Err(error) => Err(storage(error.message)),
        }
    }

    fn append(&self, partition: i32, batch: &[u8]) -> io::Result<i64> {
        let tp = Self::tp(partition);
        let info = self
            .logs
            .append(&tp, batch, crate::clock::now_ms())
            .map_err(storage)?;
        self.fetches.appended(&tp);
        Ok(info.last_offset.saturating_add(1))
    }

    fn bounds(&self, partition: i32) -> io::Result<(i64, i64)> {
        let offsets = self.logs.offsets(&Self::tp(partition)).map_err(storage)?;
        Ok((offsets.log_start_offset, offsets.high_watermark))
    }

    fn read(&self, partition: i32, offset: i64) -> io::Result<Vec<u8>> {
        self.logs
            .read(&Self::tp(partition), offset, READ_BYTES, true)
            .map(|read| read.records)
            .map_err(storage)
    }
}
