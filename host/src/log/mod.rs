//! Partition logs: the host's storage for record data (DESIGN.md §6).
//!
//! Each partition is a Kafka-style segmented log under
//! `<log.dir>/<topic>-<partition>/`, made of `<base-offset>.log` files (the
//! base offset zero-padded to 20 digits, as Kafka names them). A segment holds
//! record batches *verbatim*, exactly as they travel on the wire, with only
//! the broker-owned header fields rewritten (base offset, partition leader
//! epoch, and the timestamp fields when the topic uses LogAppendTime). Keeping
//! the wire format on disk means a fetch is a byte-range read with no
//! re-encoding, and a handler never needs to understand records to move them.
//!
//! Why it is built this way:
//! - **Validate everything, then write once.** An append checks every batch
//!   (framing, magic, CRC-32C, counts, sizes, and every record, compressed
//!   ones decompressed as a bounded stream: see `validate`) before touching
//!   the file, and writes all batches with one positional write, so a
//!   rejected request leaves nothing behind and a failed write is rolled
//!   back by truncation.
//! - **Sparse indexes on disk.** Each segment has Kafka-style `.index` and
//!   `.timeindex` files with an entry roughly every `index.interval.bytes`
//!   of log (see `index`). A read binary-searches them and scans at most a
//!   few KiB of batch headers; ListOffsets by timestamp uses the time index
//!   the same way. Opening a segment that is known to be whole reads its
//!   index files and the batches after the last entry, not the whole log.
//! - **Recovery by re-validation after the recovery point.** A flush records
//!   how far each partition is fsynced in the log directory's
//!   `recovery-point-offset-checkpoint`; a clean shutdown flushes everything
//!   and leaves a `.kafka_cleanshutdown` marker. After an unclean stop only
//!   the segments from the one holding the recovery point on are re-validated
//!   (length, magic, CRC-32C, offsets increasing); a torn tail is truncated
//!   and their indexes rebuilt, as Kafka does. Everything before it — every
//!   acknowledged batch — is kept.
//! - **Maintenance in the background.** A scheduler thread flushes by
//!   `flush.ms` and after segment rolls (advancing recovery points), writes
//!   the checkpoints and deletes old segments by `retention.ms`,
//!   `retention.bytes` and the log start offset; a cleaner thread compacts
//!   `cleanup.policy=compact` logs (see `cleaner`).
//! - **Concurrency without contention.** Partitions are independent (one lock
//!   set each), so different partitions append in parallel. Within a
//!   partition, appenders serialize on an append mutex while they write; the
//!   shared state (segment list, sizes, index) is behind a read-write lock that
//!   is held only to look up or publish positions, never during file I/O.
//!   Readers snapshot a segment's file handle and its committed size and then
//!   read with positional reads (`FileExt::read_at`), so they never wait for a
//!   write to finish and never see a partially written batch.
//! - **Descriptors follow use.** Only the segment being written keeps its
//!   file open; other segment files are opened on demand through a small
//!   bounded cache and index files only while a flush writes them
//!   (`handles`), so tens of thousands of partitions fit the default limit
//!   and running out of descriptors fails only the operation that needed one.
//! - **A trait as the seam.** Handlers and host services use [`LogStore`]; a
//!   replicated or remote engine can implement it later without touching them.
//!
//! Durability follows Kafka's defaults: an append returns once the data is in
//! the page cache (it survives a killed process); `flush.messages` /
//! `flush.ms` make appends fsync sooner, and a clean shutdown
//! ([`LogStore::shutdown`]) fsyncs everything.

mod batch;
#[cfg(test)]
pub(crate) use batch::testing as batch_testing;
mod batch_writer;
#[cfg(test)]
mod bench;
mod checkpoint;
mod cleaner;
pub mod client_records;
mod codec;
pub mod control;
pub mod epoch_cache;
pub mod file_records;
#[cfg(test)]
mod fuzz;
mod handles;
mod index;
pub mod keyed_records;
pub mod legacy_format;
pub mod manager;
mod partition;
mod positional;
pub mod producer_state;
mod record_stream;
mod segment;
pub mod validate;
mod varint;

use crate::error_code::ErrorCode;

use std::fmt;
use std::fs::File;
use std::path::Path;

/// A topic partition, the unit of a log.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// What an append did, as the Produce response reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the first record.
    pub base_offset: i64,
    /// Offset assigned to the last record.
    pub last_offset: i64,
    /// The broker time written into the batches when the topic uses
    /// LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// Records appended, summed over the batches.
    pub record_count: u64,
    /// Bytes appended.
    pub bytes: usize,
}

/// Whole record batches read from a partition: their bytes, or where
/// they are (`file_records::Records`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult<R = Vec<u8>> {
    /// Record batches as on the wire; empty when nothing is available.
    pub records: R,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// The bounds of a partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: i64,
    /// The log end offset: on a single node every appended record is
    /// committed.
    pub high_watermark: i64,
}

/// Per-partition settings, from the topic's configs (Kafka's `LogConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll to a new segment when an append would take the
    /// active one past this size. Capped at `i32::MAX`, like Kafka's.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older
    /// than this.
    pub segment_ms: i64,
    /// `max.message.bytes`: the largest record batch (and append) accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.type=LogAppendTime`: the broker stamps each batch.
    pub log_append_time: bool,
    /// `index.interval.bytes`: log bytes between two index entries.
    pub index_interval_bytes: u64,
    /// `flush.messages`: fsync once this many records are unflushed.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the last flush is older than this.
    pub flush_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older (-1:
    /// never).
    pub retention_ms: i64,
    /// `retention.bytes`: delete the oldest segments while the log is
    /// larger (-1: no limit).
    pub retention_bytes: i64,
    /// `cleanup.policy` contains `delete`.
    pub delete: bool,
    /// `cleanup.policy` contains `compact`.
    pub compact: bool,
    /// `delete.retention.ms`: how long a compacted log keeps tombstones.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment older than this is
    /// compacted whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for LogConfig {
    /// Kafka's defaults: 1 GiB or 7-day segments, 1 MiB + 12 bytes messages,
    /// CreateTime, no forced flushes, 7-day retention, delete policy.
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 3600 * 1000,
            max_message_bytes: 1024 * 1024 + 12,
            log_append_time: false,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            delete: true,
            compact: false,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// One log directory as DescribeLogDirs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirInfo {
    /// The directory as configured in `log.dirs`.
    pub path: String,
    /// Partitions in it with their size in bytes (the sum of their segments).
    pub partitions: Vec<(TopicPartition, u64)>,
    /// Size of the file system holding it, and what is free there.
    pub total_bytes: i64,
    pub usable_bytes: i64,
}

/// Why a storage operation failed, in Kafka's terms.
#[derive(Debug)]
pub enum StorageError {
    /// The partition does not exist (or is being deleted).
    UnknownTopicOrPartition,
    /// A batch is malformed: bad framing, CRC mismatch, unknown magic.
    CorruptMessage(String),
    /// A batch is well formed but breaks a rule (empty append, record count
    /// inconsistent with the offset range, malformed records).
    InvalidRecord(String),
    /// Records refused for their own content (INVALID_RECORD with each
    /// record's batch index, KIP-467).
    RecordErrors(validate::RecordErrors),
    /// A compressed batch whose records do not decompress: CORRUPT_MESSAGE.
    /// (Kafka's record iterator throws a plain `KafkaException` here, which
    /// its clients see as UNKNOWN_SERVER_ERROR, a broker fault; the batch is
    /// what is broken, so Gregor says so, as for a bad CRC.)
    Decompression(String),
    /// A batch or the whole append exceeds `max.message.bytes`.
    MessageTooLarge(String),
    /// The offset is outside `[log start offset, high watermark]`.
    OffsetOutOfRange,
    /// A zstd batch read by a client of the old message formats, which
    /// cannot be down-converted.
    UnsupportedCompressionType(String),
    /// The topic name cannot be a partition directory.
    InvalidTopic(String),
    /// The topic's configs forbid the operation (DeleteRecords on a
    /// compact-only topic).
    PolicyViolation(String),
    /// A log directory that is not one of `log.dirs`.
    LogDirNotFound(String),
    /// The file system failed; the broker's own fault (KAFKA_STORAGE_ERROR).
    Io(std::io::Error),
}

impl StorageError {
    /// The Kafka error code to put in a response.
    pub fn error_code(&self) -> i16 {
        match self {
            StorageError::UnknownTopicOrPartition => ErrorCode::UnknownTopicOrPartition.code(),
            StorageError::CorruptMessage(_) => ErrorCode::CorruptMessage.code(),
            StorageError::InvalidRecord(_) | StorageError::RecordErrors(_) => {
                ErrorCode::InvalidRecord.code()
            }
            StorageError::Decompression(_) => ErrorCode::CorruptMessage.code(),
            StorageError::MessageTooLarge(_) => ErrorCode::MessageTooLarge.code(),
            StorageError::OffsetOutOfRange => ErrorCode::OffsetOutOfRange.code(),
            StorageError::UnsupportedCompressionType(_) => {
                ErrorCode::UnsupportedCompressionType.code()
            }
            StorageError::InvalidTopic(_) => ErrorCode::InvalidTopicException.code(),
            StorageError::PolicyViolation(_) => ErrorCode::PolicyViolation.code(),
            StorageError::LogDirNotFound(_) => ErrorCode::LogDirNotFound.code(),
            StorageError::Io(_) => ErrorCode::KafkaStorageError.code(),
        }
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::UnknownTopicOrPartition => {
                f.write_str("this server does not host this topic-partition")
            }
            StorageError::CorruptMessage(m) => write!(f, "corrupt record batch: {m}"),
            StorageError::InvalidRecord(m) => write!(f, "invalid record: {m}"),
            StorageError::RecordErrors(errors) => f.write_str(&errors.summary()),
            StorageError::Decompression(m) => {
                write!(f, "failed to decompress the record stream: {m}")
            }
            StorageError::MessageTooLarge(m) => write!(f, "message too large: {m}"),
            StorageError::OffsetOutOfRange => f.write_str("offset out of range"),
            StorageError::UnsupportedCompressionType(m) => f.write_str(m),
            StorageError::InvalidTopic(m) => write!(f, "invalid topic: {m}"),
            StorageError::PolicyViolation(m) => f.write_str(m),
            StorageError::LogDirNotFound(m) => write!(f, "log directory not found: {m}"),
            StorageError::Io(e) => write!(f, "storage I/O error: {e}"),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for StorageError {
    fn from(e: std::io::Error) -> Self {
        StorageError::Io(e)
    }
}

/// The storage seam between host services and the partition logs (Kafka's
/// ReplicaManager/LogManager as KafkaApis sees them). Every method is
/// synchronous and may block on file I/O; async callers run it on a blocking
/// thread.
pub trait LogStore: Send + Sync {
    /// Creates the partition's log if it does not exist. Idempotent: for an
    /// existing partition the data is kept and `config` replaces its config
    /// (which is also how configs are applied after [`manager::LogManager::open`]).
    fn create_partition(&self, tp: &TopicPartition, config: LogConfig) -> Result<(), StorageError>;

    /// Removes every partition of the topic with its files. Deleting a topic
    /// that has no partitions here succeeds (it may have been half deleted).
    fn delete_topic(&self, topic: &str) -> Result<(), StorageError>;

    /// Removes one partition's log with its files (a stray replica in a
    /// cluster); a partition that is not here is no error.
    fn delete_partition(&self, tp: &TopicPartition) -> Result<(), StorageError>;

    /// Every partition hosted, sorted.
    fn partitions(&self) -> Vec<TopicPartition>;

    /// Validates `batches` (one or more v2 record batches as on the wire,
    /// or a magic v0/v1 message set, up-converted to one v2 batch: see
    /// `legacy_format`), assigns offsets from the log end offset and appends them, all or
    /// nothing. `now_ms` is the broker time for LogAppendTime.
    fn append(
        &self,
        tp: &TopicPartition,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError>;

    /// Reads whole batches starting with the one containing `offset`, up to
    /// `max_bytes`; with `min_one_batch` the first batch is returned even if
    /// it is larger (KIP-74). `offset` equal to the high watermark gives no
    /// records; outside `[log start, high watermark]` is `OffsetOutOfRange`.
    fn read(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError>;

    /// As `read`, the batches where they are (a range of a segment file),
    /// for a fetch to send without reading them into memory first.
    fn read_records(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult<file_records::Records>, StorageError>;

    /// Log start offset and high watermark.
    fn offsets(&self, tp: &TopicPartition) -> Result<PartitionOffsets, StorageError>;

    /// ListOffsets by timestamp: the offset and timestamp of the first record
    /// whose timestamp is at or after `timestamp_ms`, or `None`. Exact: a
    /// compressed CreateTime batch is walked as it decompresses.
    fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, StorageError>;

    /// ListOffsets MAX_TIMESTAMP: offset and timestamp of the first record
    /// with the largest timestamp, or `None` for an empty log.
    fn max_timestamp(&self, tp: &TopicPartition) -> Result<Option<(i64, i64)>, StorageError>;

    /// DeleteRecords: moves the partition's log start offset up to
    /// `offset` (-1: the high watermark) and returns the new log start
    /// offset (the low watermark). Segments wholly below it are deleted.
    fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, StorageError>;

    /// Every log directory with the partitions it holds and their sizes.
    fn describe_log_dirs(&self) -> Vec<LogDirInfo>;

    /// Moves a partition's log to another of the configured log
    /// directories while it stays online (appends wait only for the final
    /// catch-up copy). Moving it where it already is succeeds.
    fn move_partition(&self, tp: &TopicPartition, log_dir: &str) -> Result<(), StorageError>;

    /// The log directory holding the partition.
    fn partition_dir(&self, tp: &TopicPartition) -> Result<String, StorageError>;

    /// A follower's append (replication, Kafka's `appendAsFollower`):
    /// batches fetched from the leader, stored verbatim with the leader's
    /// offsets and partition leader epochs, each new epoch entered in the
    /// epoch cache. Only framing and CRC are checked (the leader validated
    /// the records); batches must not start below the log end offset.
    fn append_replicated(
        &self,
        tp: &TopicPartition,
        batches: &[u8],
    ) -> Result<AppendInfo, StorageError>;

    /// Truncates the log to `offset`: the batches holding it or later
    /// offsets go (whole batches, so the new end may be lower), with the
    /// epochs starting there. Returns the new log end offset.
    fn truncate_to(&self, tp: &TopicPartition, offset: i64) -> Result<i64, StorageError>;

    /// Empties the log and starts it at `offset` (a follower that fell
    /// behind the leader's log start offset).
    fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError>;

    /// This broker leads the partition from now on in `epoch`: the epoch
    /// starts at the log end offset and is stamped on the batches
    /// [`LogStore::append`] writes. A single node leads in epoch 0.
    fn become_leader(&self, tp: &TopicPartition, epoch: i32) -> Result<(), StorageError>;

    /// The epoch this broker leads (or last led) the partition in: what
    /// [`LogStore::append`] stamps.
    fn leader_epoch(&self, tp: &TopicPartition) -> Result<i32, StorageError>;

    /// The partition's leader-epoch cache (a copy).
    fn epochs(&self, tp: &TopicPartition) -> Result<epoch_cache::EpochCache, StorageError>;

    /// OffsetForLeaderEpoch: the epoch at or below `epoch` the log knows
    /// and the offset where its data ends, as Kafka's
    /// `LeaderEpochFileCache.endOffsetFor` ((-1, -1) when unknown).
    fn end_offset_for_epoch(
        &self,
        tp: &TopicPartition,
        epoch: i32,
    ) -> Result<(i32, i64), StorageError>;

    /// Clean shutdown: stops the background work, flushes, writes the
    /// checkpoints and the clean-shutdown marker, so the next start
    /// re-validates nothing.
    fn shutdown(&self) -> Result<(), StorageError>;
}

/// Fsyncs a directory, making file creations, renames and removals in it
/// durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    handles::retrying(|| File::open(dir))?.sync_all()
}

/// Creates `dir` (and missing parents) if needed, fsyncing the parent so the
/// new directory survives a crash.
fn create_dir_durably(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}
