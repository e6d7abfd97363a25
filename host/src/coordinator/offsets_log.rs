//! A coordinator's internal topic on this broker's log: `__consumer_offsets`
//! for the group store, `__transaction_state` for the transaction
//! coordinator ([`InternalTopic`] names each one's settings). The topic
//! is created on first use as Kafka creates it (compacted,
//! `<prefix>.num.partitions` partitions, `<prefix>.replication.factor`
//! capped at the brokers there are), appends and reads go through the
//! host's log service like any partition's. On a cluster node the topic is
//! the controller's to create (FindCoordinator asks it), and an append
//! here is the leader's: followers fetch it like any partition's, woken by
//! it. [`read_records`] replays a partition for either coordinator.

use std::io;
use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::error_code::ErrorCode;
use crate::log::{LogStore, TopicPartition};
use crate::metadata::topics::{NewTopic, TopicManager};
use crate::purgatory::FetchPurgatory;

use crate::log::keyed_records::{self, Entry};

use super::offsets_topic::TOPIC;

/// Kafka's `offsets.topic.num.partitions`.
pub const NUM_PARTITIONS: &str = "offsets.topic.num.partitions";
/// Kafka's `offsets.topic.replication.factor`.
pub const REPLICATION_FACTOR: &str = "offsets.topic.replication.factor";
/// Kafka's `offsets.topic.segment.bytes`.
pub const SEGMENT_BYTES: &str = "offsets.topic.segment.bytes";
/// The most bytes one read of a partition returns while replaying.
const READ_BYTES: usize = 1 << 20;

/// A coordinator topic's name and the settings Kafka names for it.
#[derive(Clone, Copy, Debug)]
pub struct InternalTopic {
    pub topic: &'static str,
    pub num_partitions: &'static str,
    pub replication_factor: &'static str,
    pub segment_bytes: &'static str,
    /// The topic's `min.insync.replicas` setting, if it has one.
    pub min_isr: Option<&'static str>,
}

/// `__consumer_offsets`.
pub const OFFSETS: InternalTopic = InternalTopic {
    topic: TOPIC,
    num_partitions: NUM_PARTITIONS,
    replication_factor: REPLICATION_FACTOR,
    segment_bytes: SEGMENT_BYTES,
    min_isr: None,
};

/// The log a coordinator's store writes to.
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
    spec: InternalTopic,
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
    /// `min.insync.replicas` for the topic, if its setting is given.
    min_isr: Option<String>,
}

impl TopicOffsetsLog {
    /// `__consumer_offsets`.
    pub fn new(
        config: &BrokerConfig,
        topics: Arc<TopicManager>,
        logs: Arc<dyn LogStore>,
        fetches: Arc<FetchPurgatory>,
        node_id: i32,
    ) -> anyhow::Result<Self> {
        Self::for_topic(OFFSETS, config, topics, logs, fetches, node_id)
    }

    /// The internal topic `spec` names.
    pub fn for_topic(
        spec: InternalTopic,
        config: &BrokerConfig,
        topics: Arc<TopicManager>,
        logs: Arc<dyn LogStore>,
        fetches: Arc<FetchPurgatory>,
        node_id: i32,
    ) -> anyhow::Result<Self> {
        let num_partitions: i32 = parsed(config, spec.num_partitions, 50)?;
        let replication_factor: i16 = parsed(config, spec.replication_factor, 3)?;
        if num_partitions < 1 || replication_factor < 1 {
            anyhow::bail!(
                "{} and {} must be at least 1",
                spec.num_partitions,
                spec.replication_factor
            );
        }
        let segment_bytes: i64 = parsed(config, spec.segment_bytes, 100 * 1024 * 1024)?;
        let min_isr = match spec.min_isr {
            Some(key) => Some(parsed::<i16>(config, key, 2)?),
            None => None,
        };
        Ok(Self {
            spec,
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
            // One replica here: a min.isr above it could never be met.
            min_isr: min_isr.map(|isr| isr.clamp(1, replication_factor.min(1)).to_string()),
        })
    }

    /// The topic of a cluster node: created by the controller, never here.
    pub fn in_cluster(mut self) -> Self {
        self.creates = false;
        self
    }

    fn tp(&self, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: self.spec.topic.to_string(),
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

fn storage(topic: &str, error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{topic}: {error}"))
}

impl OffsetsLog for TopicOffsetsLog {
    fn partitions(&self, create: bool) -> io::Result<Option<i32>> {
        let name = self.spec.topic;
        if let Some(topic) = self.topics.get(name) {
            return Ok(Some(topic.partitions));
        }
        if !create || !self.creates {
            return Ok(None);
        }
        let mut configs = vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("compression.type".into(), Some("producer".into())),
            ("segment.bytes".into(), Some(self.segment_bytes.clone())),
        ];
        if let Some(min_isr) = &self.min_isr {
            configs.push(("min.insync.replicas".into(), Some(min_isr.clone())));
        }
        let request = NewTopic {
            name: name.to_string(),
            num_partitions: self.num_partitions,
            replication_factor: self.replication_factor,
            configs,
            replica_assignment: Vec::new(),
        };
        match self.topics.create(&request, self.node_id, false) {
            Ok(topic) => Ok(Some(topic.partitions)),
            // Created meanwhile (by an admin, say): use it as it is.
            Err(error) if error.code == ErrorCode::TopicAlreadyExists.code() => {
                Ok(self.topics.get(name).map(|topic| topic.partitions))
            }
            Err(error) => Err(storage(name, error.message)),
        }
    }

    fn append(&self, partition: i32, batch: &[u8]) -> io::Result<i64> {
        let tp = self.tp(partition);
        let info = self
            .logs
            .append(&tp, batch, crate::clock::now_ms())
            .map_err(|e| storage(self.spec.topic, e))?;
        self.fetches.appended(&tp);
        Ok(info.last_offset.saturating_add(1))
    }

    fn bounds(&self, partition: i32) -> io::Result<(i64, i64)> {
        let offsets = self
            .logs
            .offsets(&self.tp(partition))
            .map_err(|e| storage(self.spec.topic, e))?;
        Ok((offsets.log_start_offset, offsets.high_watermark))
    }

    fn read(&self, partition: i32, offset: i64) -> io::Result<Vec<u8>> {
        self.logs
            .read(&self.tp(partition), offset, READ_BYTES, true)
            .map(|read| read.records)
            .map_err(|e| storage(self.spec.topic, e))
    }
}

/// Hands each record and transaction end of `partition` of `topic` on
/// `log`, from its log start to its end, in log order, to `apply`; the
/// number of entries read.
pub fn read_records(
    log: &dyn OffsetsLog,
    topic: &str,
    partition: i32,
    apply: &mut dyn FnMut(&Entry),
) -> io::Result<usize> {
    let mut count = 0usize;
    let (start, end) = log.bounds(partition)?;
    let mut offset = start;
    while offset < end {
        let bytes = log.read(partition, offset)?;
        let (records, next) = keyed_records::decode(&bytes).map_err(|why| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{topic}-{partition} at {offset}: {why}"),
            )
        })?;
        let Some(next) = next.filter(|next| *next > offset) else {
            break;
        };
        for record in &records {
            count += 1;
            apply(record);
        }
        offset = next;
    }
    Ok(count)
}

/// The coordinators' tests: a topic on a real log manager, created on
/// first use.
#[cfg(test)]
pub mod testing {
    use std::io;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::OffsetsLog;
    use crate::log::manager::LogManager;
    use crate::log::{LogConfig, LogStore, TopicPartition};

    pub const PARTITIONS: i32 = 5;

    pub struct Logs {
        pub logs: LogManager,
        topic: &'static str,
        created: AtomicBool,
    }

    impl Logs {
        /// `topic` on `dir`'s logs (created if a partition is there).
        pub fn open(dir: &Path, topic: &'static str) -> Self {
            let logs = LogManager::open(&dir.join("partitions")).unwrap();
            let created = logs.partitions().iter().any(|tp| tp.topic == topic);
            Self {
                logs,
                topic,
                created: AtomicBool::new(created),
            }
        }

        fn tp(&self, partition: i32) -> TopicPartition {
            TopicPartition::new(self.topic, partition)
        }
    }

    impl OffsetsLog for Logs {
        fn partitions(&self, create: bool) -> io::Result<Option<i32>> {
            if !self.created.load(Ordering::Acquire) && create {
                for p in 0..PARTITIONS {
                    self.logs
                        .create_partition(&self.tp(p), LogConfig::default())
                        .map_err(io::Error::other)?;
                }
                self.created.store(true, Ordering::Release);
            }
            Ok(self.created.load(Ordering::Acquire).then_some(PARTITIONS))
        }

        fn append(&self, partition: i32, batch: &[u8]) -> io::Result<i64> {
            self.logs
                .append(&self.tp(partition), batch, 1)
                .map(|info| info.last_offset + 1)
                .map_err(io::Error::other)
        }

        fn bounds(&self, partition: i32) -> io::Result<(i64, i64)> {
            let o = self
                .logs
                .offsets(&self.tp(partition))
                .map_err(io::Error::other)?;
            Ok((o.log_start_offset, o.high_watermark))
        }

        fn read(&self, partition: i32, offset: i64) -> io::Result<Vec<u8>> {
            self.logs
                .read(&self.tp(partition), offset, 1 << 20, true)
                .map(|r| r.records)
                .map_err(io::Error::other)
        }
    }
}
