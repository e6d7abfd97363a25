//! The log manager: every partition log under one data directory.
//!
//! Layout, as Kafka's: `<log.dir>/<topic>-<partition>/<base-offset>.log`.
//! Opening the manager takes an exclusive lock on `<log.dir>/.lock` (two
//! brokers on one directory would corrupt each other's logs), then discovers
//! and recovers every partition directory.
//!
//! The partition map is behind a read-write lock, held briefly to find a
//! partition (creating or deleting one, which is rare, holds it across the
//! few file operations that takes); each partition has its own locks, so
//! appends to different partitions run in parallel.
//!
//! Deleting a topic first renames each partition directory to
//! `<topic>-<partition>.<unique>-delete` (one atomic step, so a crash never
//! leaves a half-deleted log that looks live), then removes it; leftovers
//! are removed the next time the manager opens.
//!
//! The manager does not persist topic configs: the metadata store does. After
//! [`LogManager::open`], discovered partitions run with
//! [`LogConfig::default`] until the caller applies each topic's configs with
//! [`LogStore::create_partition`].

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::partition::Partition;
use super::{
    sync_dir, AppendInfo, LogConfig, LogStore, PartitionOffsets, ReadResult, StorageError,
    TopicPartition,
};

const LOCK_FILE: &str = ".lock";
const DELETE_SUFFIX: &str = "-delete";
/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;

/// Partition logs under one directory; the [`LogStore`] of a single broker.
#[derive(Debug)]
pub struct LogManager {
    dir: PathBuf,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Held (and locked) for the manager's lifetime.
    _lock: File,
}

/// Checks a topic name as Kafka does (`[a-zA-Z0-9._-]{1,249}`, not `.` or
/// `..`), which also makes it a safe directory name.
pub fn validate_topic_name(name: &str) -> Result<(), StorageError> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(StorageError::InvalidTopic(format!(
            "topic name {name:?} is illegal"
        )));
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(StorageError::InvalidTopic(format!(
            "topic name is longer than {MAX_TOPIC_NAME_LEN} characters"
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(StorageError::InvalidTopic(format!(
            "topic name {name:?} contains {c:?}; allowed are ASCII letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

fn dir_name(tp: &TopicPartition) -> String {
    format!("{}-{}", tp.topic, tp.partition)
}

/// The partition a directory name stands for, if it is one.
fn parse_dir_name(name: &str) -> Option<TopicPartition> {
    let (topic, partition) = name.rsplit_once('-')?;
    if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let tp = TopicPartition::new(topic, partition.parse().ok()?);
    (validate_topic_name(topic).is_ok() && dir_name(&tp) == name).then_some(tp)
}

/// A name no other deletion uses: time plus a process-wide counter.
fn deletion_name(tp: &TopicPartition) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}.{nanos}{n}{DELETE_SUFFIX}", dir_name(tp))
}

impl LogManager {
    /// Opens (creating if needed) the data directory, locks it, removes
    /// leftovers of interrupted topic deletions and opens and recovers every
    /// partition found.
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        super::create_dir_durably(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StorageError::Io(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "log directory {} is in use by another process",
                        dir.display()
                    ),
                )))
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }

        let mut partitions = HashMap::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(path = %path.display(), "ignoring a directory with a non UTF-8 name");
                continue;
            };
            if name.ends_with(DELETE_SUFFIX) {
                if let Err(e) = fs::remove_dir_all(&path) {
                    tracing::warn!(path = %path.display(), "cannot remove a deleted partition: {e}");
                }
                continue;
            }
            let Some(tp) = parse_dir_name(&name) else {
                tracing::warn!(path = %path.display(), "ignoring a directory that is not a partition");
                continue;
            };
            let partition = Partition::open(path, tp.clone(), LogConfig::default())?;
            partitions.insert(tp, Arc::new(partition));
        }

        Ok(LogManager {
            dir: dir.to_path_buf(),
            partitions: RwLock::new(partitions),
            _lock: lock,
        })
    }

    /// Every partition hosted, sorted: after [`LogManager::open`], the
    /// caller deletes those its metadata no longer knows (a crash between
    /// removing a topic's record and its logs leaves them behind).
    #[allow(dead_code)] // until startup reconciles logs with the metadata store
    pub fn partitions(&self) -> Vec<TopicPartition> {
        let mut tps: Vec<_> = self
            .partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        tps.sort();
        tps
    }

    fn get(&self, tp: &TopicPartition) -> Result<Arc<Partition>, StorageError> {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tp)
            .cloned()
            .ok_or(StorageError::UnknownTopicOrPartition)
    }
}

impl LogStore for LogManager {
    fn create_partition(&self, tp: &TopicPartition, config: LogConfig) -> Result<(), StorageError> {
        validate_topic_name(&tp.topic)?;
        if tp.partition < 0 {
            return Err(StorageError::InvalidTopic(format!(
                "negative partition {}",
                tp.partition
            )));
        }
        if let Ok(existing) = self.get(tp) {
            existing.set_config(config);
            return Ok(());
        }
        let mut partitions = self
            .partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = partitions.get(tp) {
            existing.set_config(config);
            return Ok(());
        }
        let partition = Partition::open(self.dir.join(dir_name(tp)), tp.clone(), config)?;
        partitions.insert(tp.clone(), Arc::new(partition));
        Ok(())
    }

    fn delete_topic(&self, topic: &str) -> Result<(), StorageError> {
        let mut renamed = Vec::new();
        let mut first_error = None;
        {
            let mut partitions = self
                .partitions
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let tps: Vec<TopicPartition> = partitions
                .keys()
                .filter(|tp| tp.topic == topic)
                .cloned()
                .collect();
            for tp in tps {
                let Some(partition) = partitions.remove(&tp) else {
                    continue;
                };
                partition.mark_deleted();
                let target = self.dir.join(deletion_name(&tp));
                match fs::rename(partition.dir(), &target) {
                    Ok(()) => renamed.push(target),
                    Err(e) => {
                        tracing::error!(partition = %tp, "cannot delete the partition directory: {e}");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        if !renamed.is_empty() {
            sync_dir(&self.dir)?;
        }
        for path in renamed {
            // Not fatal: the renamed directory is removed at the next open.
            if let Err(e) = fs::remove_dir_all(&path) {
                tracing::warn!(path = %path.display(), "cannot remove a deleted partition: {e}");
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn append(
        &self,
        tp: &TopicPartition,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        self.get(tp)?.append(batches, now_ms)
    }

    fn read(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, StorageError> {
        self.get(tp)?.read(offset, max_bytes, min_one_batch)
    }

    fn offsets(&self, tp: &TopicPartition) -> Result<PartitionOffsets, StorageError> {
        self.get(tp)?.offsets()
    }

    fn offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        timestamp_ms: i64,
    ) -> Result<Option<(i64, i64)>, StorageError> {
        self.get(tp)?.offset_for_timestamp(timestamp_ms)
    }

    fn max_timestamp(&self, tp: &TopicPartition) -> Result<Option<(i64, i64)>, StorageError> {
        self.get(tp)?.max_timestamp()
    }

    fn flush(&self) -> Result<(), StorageError> {
        let partitions: Vec<Arc<Partition>> = self
            .partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for partition in partitions {
            partition.flush()?;
        }
        sync_dir(&self.dir)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::batch::testing::*;
    use super::super::segment;
    use super::*;
    use std::io::Write;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn open_with(dir: &Path, tps: &[TopicPartition], config: LogConfig) -> LogManager {
        let m = LogManager::open(dir).unwrap();
        for tp in tps {
            m.create_partition(tp, config.clone()).unwrap();
        }
        m
    }

    fn offsets_of(records: &[u8]) -> Vec<i64> {
        headers(records).iter().map(|h| h.base_offset).collect()
    }

    fn segment_path(dir: &Path, tp: &TopicPartition, base: i64) -> PathBuf {
        dir.join(dir_name(tp)).join(segment::file_name(base))
    }

    #[test]
    fn append_and_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("orders", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let b1 = simple_batch(3, 10, 1000);
        let b2 = simple_batch(2, 10, 2000);
        let i1 = m.append(&t0, &b1, 0).unwrap();
        assert_eq!(
            i1,
            AppendInfo {
                base_offset: 0,
                last_offset: 2,
                log_append_time_ms: -1,
                log_start_offset: 0,
                record_count: 3,
                bytes: b1.len(),
            }
        );
        let i2 = m.append(&t0, &b2, 0).unwrap();
        assert_eq!((i2.base_offset, i2.last_offset), (3, 4));

        let r = m.read(&t0, 0, 1 << 20, true).unwrap();
        assert_eq!((r.high_watermark, r.log_start_offset), (5, 0));
        assert_eq!(r.records.len(), b1.len() + b2.len());
        assert_eq!(offsets_of(&r.records), vec![0, 3]);
        // Apart from base offset and leader epoch the bytes are the client's.
        assert_eq!(r.records[12..16], 0i32.to_be_bytes());
        assert_eq!(r.records[16..b1.len()], b1[16..]);
        assert_eq!(r.records[b1.len() + 16..], b2[16..]);

        assert_eq!(
            m.offsets(&t0).unwrap(),
            PartitionOffsets {
                log_start_offset: 0,
                high_watermark: 5
            }
        );
    }

    #[test]
    fn several_batches_in_one_append_get_consecutive_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        m.append(&t0, &simple_batch(1, 5, 0), 0).unwrap();
        let mut input = simple_batch(4, 5, 0);
        input.extend_from_slice(&simple_batch(2, 5, 0));
        input.extend_from_slice(&simple_batch(3, 5, 0));
        let info = m.append(&t0, &input, 0).unwrap();
        assert_eq!(
            (info.base_offset, info.last_offset, info.record_count),
            (1, 9, 9)
        );
        let r = m.read(&t0, 1, 1 << 20, true).unwrap();
        assert_eq!(offsets_of(&r.records), vec![1, 5, 7]);
    }

    #[test]
    fn read_starts_with_the_batch_containing_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        for _ in 0..3 {
            m.append(&t0, &simple_batch(10, 5, 0), 0).unwrap();
        }
        assert_eq!(
            offsets_of(&m.read(&t0, 15, 1 << 20, true).unwrap().records),
            vec![10, 20]
        );
        assert_eq!(
            offsets_of(&m.read(&t0, 29, 1 << 20, true).unwrap().records),
            vec![20]
        );
        assert_eq!(
            offsets_of(&m.read(&t0, 10, 1 << 20, true).unwrap().records),
            vec![10, 20]
        );
    }

    #[test]
    fn crc_mismatch_appends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        m.append(&t0, &simple_batch(2, 10, 0), 0).unwrap();
        let good = simple_batch(2, 10, 0);
        let mut bad = simple_batch(2, 10, 0);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        // A valid batch followed by a corrupt one: neither is written.
        let mut input = good.clone();
        input.extend_from_slice(&bad);
        let err = m.append(&t0, &input, 0).unwrap_err();
        assert!(matches!(err, StorageError::CorruptMessage(_)), "{err}");
        assert_eq!(err.error_code(), 2);
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 2);
        let size = fs::metadata(segment_path(dir.path(), &t0, 0))
            .unwrap()
            .len();
        assert_eq!(size, good.len() as u64);
        assert_eq!(m.append(&t0, &good, 0).unwrap().base_offset, 2);
    }

    #[test]
    fn oversize_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let batch = simple_batch(5, 100, 0);
        let config = LogConfig {
            max_message_bytes: batch.len() + 10,
            ..LogConfig::default()
        };
        let m = open_with(dir.path(), std::slice::from_ref(&t0), config);
        m.append(&t0, &batch, 0).unwrap();
        let err = m.append(&t0, &simple_batch(6, 100, 0), 0).unwrap_err();
        assert!(matches!(err, StorageError::MessageTooLarge(_)), "{err}");
        assert_eq!(err.error_code(), 10);
        let mut two = batch.clone();
        two.extend_from_slice(&batch);
        assert!(matches!(
            m.append(&t0, &two, 0),
            Err(StorageError::MessageTooLarge(_))
        ));
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 5);
    }

    #[test]
    fn other_rejections_and_codes() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let err = m.append(&t0, &[], 0).unwrap_err();
        assert_eq!(err.error_code(), 87);
        let mut v1 = simple_batch(1, 1, 0);
        v1[16] = 1;
        assert_eq!(m.append(&t0, &v1, 0).unwrap_err().error_code(), 43);
        let unknown = tp("nope", 0);
        assert_eq!(
            m.append(&unknown, &simple_batch(1, 1, 0), 0)
                .unwrap_err()
                .error_code(),
            3
        );
        assert_eq!(m.read(&unknown, 0, 1, true).unwrap_err().error_code(), 3);
        assert!(matches!(
            m.create_partition(&tp("../etc", 0), LogConfig::default()),
            Err(StorageError::InvalidTopic(_))
        ));
        assert!(matches!(
            m.create_partition(&tp("ok", -1), LogConfig::default()),
            Err(StorageError::InvalidTopic(_))
        ));
        assert_eq!(StorageError::Io(io::Error::other("x")).error_code(), 56);
        assert_eq!(StorageError::OffsetOutOfRange.error_code(), 1);
    }

    #[test]
    fn max_bytes_and_min_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let batch = simple_batch(4, 100, 0);
        let n = batch.len();
        for _ in 0..5 {
            m.append(&t0, &batch, 0).unwrap();
        }
        // Only whole batches that fit.
        assert_eq!(
            m.read(&t0, 0, 2 * n + n / 2, false).unwrap().records.len(),
            2 * n
        );
        assert_eq!(m.read(&t0, 0, 2 * n, false).unwrap().records.len(), 2 * n);
        // The first batch does not fit: nothing, unless min_one_batch.
        assert!(m.read(&t0, 4, n - 1, false).unwrap().records.is_empty());
        let r = m.read(&t0, 4, n - 1, true).unwrap();
        assert_eq!(offsets_of(&r.records), vec![4]);
        let r = m.read(&t0, 4, 0, true).unwrap();
        assert_eq!(offsets_of(&r.records), vec![4]);
        // Everything, then the tail.
        assert_eq!(
            m.read(&t0, 0, usize::MAX, false).unwrap().records.len(),
            5 * n
        );
        assert_eq!(
            offsets_of(&m.read(&t0, 19, 10 * n, false).unwrap().records),
            vec![16]
        );
    }

    #[test]
    fn offset_out_of_range() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        assert!(m.read(&t0, 0, 100, true).unwrap().records.is_empty());
        m.append(&t0, &simple_batch(3, 1, 0), 0).unwrap();
        let at_hw = m.read(&t0, 3, 100, true).unwrap();
        assert!(at_hw.records.is_empty());
        assert_eq!(at_hw.high_watermark, 3);
        assert!(matches!(
            m.read(&t0, 4, 100, true),
            Err(StorageError::OffsetOutOfRange)
        ));
        assert!(matches!(
            m.read(&t0, -1, 100, true),
            Err(StorageError::OffsetOutOfRange)
        ));
    }

    #[test]
    fn reads_from_the_middle_of_a_big_segment_via_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        for i in 0..2000 {
            m.append(&t0, &simple_batch(2, 50, i * 10), 0).unwrap();
        }
        // One segment of ~300 KB.
        assert_eq!(fs::read_dir(dir.path().join("t-0")).unwrap().count(), 1);
        for offset in [0, 1, 777, 1999, 2000, 3001, 3999] {
            let r = m.read(&t0, offset, 150, true).unwrap();
            assert_eq!(
                offsets_of(&r.records),
                vec![offset / 2 * 2],
                "offset {offset}"
            );
        }
        // Through the log manager's reopen too (rebuilt index).
        drop(m);
        let m = LogManager::open(dir.path()).unwrap();
        let r = m.read(&t0, 3333, 150, true).unwrap();
        assert_eq!(offsets_of(&r.records), vec![3332]);
    }

    #[test]
    fn timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(
            dir.path(),
            std::slice::from_ref(&t0),
            LogConfig {
                segment_bytes: 2000,
                ..LogConfig::default()
            },
        );
        assert_eq!(m.offset_for_timestamp(&t0, 0).unwrap(), None);
        assert_eq!(m.max_timestamp(&t0).unwrap(), None);
        // Batches of 5 records: offsets 5i.., timestamps 100i + 0, 10, 20, ...
        for i in 0..40 {
            let recs: Vec<Rec> = (0..5).map(|j| Rec::new(100 * i + 10 * j, b"v")).collect();
            m.append(&t0, &encode_batch(&recs), 0).unwrap();
        }
        assert!(fs::read_dir(dir.path().join("t-0")).unwrap().count() > 2);
        assert_eq!(m.offset_for_timestamp(&t0, 0).unwrap(), Some((0, 0)));
        assert_eq!(m.offset_for_timestamp(&t0, 1).unwrap(), Some((1, 10)));
        assert_eq!(m.offset_for_timestamp(&t0, 1230).unwrap(), Some((63, 1230)));
        assert_eq!(m.offset_for_timestamp(&t0, 1241).unwrap(), Some((65, 1300)));
        assert_eq!(
            m.offset_for_timestamp(&t0, 3940).unwrap(),
            Some((199, 3940))
        );
        assert_eq!(m.offset_for_timestamp(&t0, 3941).unwrap(), None);
        assert_eq!(m.max_timestamp(&t0).unwrap(), Some((199, 3940)));

        // An out-of-order batch: the max is in the middle of it.
        let recs = [Rec::new(10, b"a"), Rec::new(9000, b"b"), Rec::new(20, b"c")];
        m.append(&t0, &encode_batch(&recs), 0).unwrap();
        assert_eq!(m.max_timestamp(&t0).unwrap(), Some((201, 9000)));
        assert_eq!(
            m.offset_for_timestamp(&t0, 5000).unwrap(),
            Some((201, 9000))
        );
    }

    #[test]
    fn log_append_time() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let config = LogConfig {
            log_append_time: true,
            ..LogConfig::default()
        };
        let m = open_with(dir.path(), std::slice::from_ref(&t0), config);
        let info = m.append(&t0, &simple_batch(3, 1, 5), 777).unwrap();
        assert_eq!(info.log_append_time_ms, 777);
        m.append(&t0, &simple_batch(3, 1, 5), 888).unwrap();
        let h = headers(&m.read(&t0, 0, 1 << 20, true).unwrap().records);
        assert!(h.iter().all(|h| h.is_log_append_time()));
        assert_eq!(
            h.iter().map(|h| h.max_timestamp).collect::<Vec<_>>(),
            vec![777, 888]
        );
        assert_eq!(m.max_timestamp(&t0).unwrap(), Some((3, 888)));
        assert_eq!(m.offset_for_timestamp(&t0, 800).unwrap(), Some((3, 888)));
    }

    #[test]
    fn compressed_batches_are_stored_opaquely() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let batch = encode_batch_with(
            4,
            &[Rec::new(10, b"a"), Rec::new(30, b"b"), Rec::new(20, b"c")],
        );
        m.append(&t0, &batch, 0).unwrap();
        assert_eq!(m.max_timestamp(&t0).unwrap(), Some((2, 30)));
        assert_eq!(m.offset_for_timestamp(&t0, 5).unwrap(), Some((0, 10)));
        assert_eq!(m.offset_for_timestamp(&t0, 25).unwrap(), Some((0, 30)));
        assert_eq!(
            m.read(&t0, 1, 1 << 20, true).unwrap().records[16..],
            batch[16..]
        );
    }

    #[test]
    fn restart_keeps_data() {
        let dir = tempfile::tempdir().unwrap();
        let (a0, a1, b0) = (tp("a", 0), tp("a", 1), tp("b-with-dash", 0));
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let m = open_with(dir.path(), &[a0.clone(), a1.clone(), b0.clone()], config);
        let mut expected = Vec::new();
        for i in 0..50 {
            m.append(&a0, &simple_batch(3, 40, i), 0).unwrap();
            m.append(&b0, &simple_batch(1, 40, i), 0).unwrap();
        }
        expected.extend(m.read(&a0, 0, usize::MAX, false).unwrap().records);
        let mut all_a0 = Vec::new();
        let mut offset = 0;
        while offset < 150 {
            let r = m.read(&a0, offset, usize::MAX, false).unwrap();
            offset = headers(&r.records).last().unwrap().next_offset();
            all_a0.extend(r.records);
        }
        m.flush().unwrap();
        drop(m);

        let m = LogManager::open(dir.path()).unwrap();
        assert_eq!(m.partitions(), vec![a0.clone(), a1.clone(), b0.clone()]);
        assert_eq!(m.offsets(&a0).unwrap().high_watermark, 150);
        assert_eq!(m.offsets(&a1).unwrap().high_watermark, 0);
        assert_eq!(m.offsets(&b0).unwrap().high_watermark, 50);
        assert_eq!(m.read(&a0, 0, usize::MAX, false).unwrap().records, expected);
        let mut again = Vec::new();
        let mut offset = 0;
        while offset < 150 {
            let r = m.read(&a0, offset, usize::MAX, false).unwrap();
            offset = headers(&r.records).last().unwrap().next_offset();
            again.extend(r.records);
        }
        assert_eq!(again, all_a0);
        assert_eq!(
            m.append(&a0, &simple_batch(1, 1, 0), 0)
                .unwrap()
                .base_offset,
            150
        );
    }

    #[test]
    fn recovery_truncates_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let batch = simple_batch(4, 30, 0);
        for _ in 0..3 {
            m.append(&t0, &batch, 0).unwrap();
        }
        drop(m);
        // Tear the last batch: as if the process died mid-write.
        let path = segment_path(dir.path(), &t0, 0);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(3 * batch.len() as u64 - 7).unwrap();
        drop(f);
        let m = LogManager::open(dir.path()).unwrap();
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 8);
        assert_eq!(fs::metadata(&path).unwrap().len(), 2 * batch.len() as u64);
        assert_eq!(m.append(&t0, &batch, 0).unwrap().base_offset, 8);
        assert_eq!(
            offsets_of(&m.read(&t0, 0, usize::MAX, false).unwrap().records),
            vec![0, 4, 8]
        );
    }

    #[test]
    fn recovery_cuts_garbage_after_the_last_batch() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let batch = simple_batch(4, 30, 0);
        m.append(&t0, &batch, 0).unwrap();
        m.append(&t0, &batch, 0).unwrap();
        drop(m);
        let path = segment_path(dir.path(), &t0, 0);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        // Garbage that even looks like the start of a batch header.
        let mut garbage = batch[..30].to_vec();
        garbage.extend_from_slice(&[0x5a; 500]);
        f.write_all(&garbage).unwrap();
        // And a whole valid-looking batch with a stale offset after it.
        f.write_all(&batch).unwrap();
        drop(f);
        let m = LogManager::open(dir.path()).unwrap();
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 8);
        assert_eq!(fs::metadata(&path).unwrap().len(), 2 * batch.len() as u64);

        // A complete copy of a batch whose offset goes backwards is cut too.
        drop(m);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        let mut stale = batch.clone();
        stale[..8].copy_from_slice(&4i64.to_be_bytes());
        f.write_all(&stale).unwrap();
        drop(f);
        let m = LogManager::open(dir.path()).unwrap();
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 8);
    }

    #[test]
    fn create_is_idempotent_and_updates_config() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        m.append(&t0, &simple_batch(1, 1, 0), 0).unwrap();
        let lat = LogConfig {
            log_append_time: true,
            ..LogConfig::default()
        };
        m.create_partition(&t0, lat).unwrap();
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 1);
        assert_eq!(
            m.append(&t0, &simple_batch(1, 1, 0), 5)
                .unwrap()
                .log_append_time_ms,
            5
        );
    }

    #[test]
    fn delete_topic_removes_its_partitions_only() {
        let dir = tempfile::tempdir().unwrap();
        let (a0, a1, ab0) = (tp("a", 0), tp("a", 1), tp("a-b", 0));
        let m = open_with(
            dir.path(),
            &[a0.clone(), a1.clone(), ab0.clone()],
            LogConfig::default(),
        );
        m.append(&a0, &simple_batch(1, 1, 0), 0).unwrap();
        m.append(&ab0, &simple_batch(1, 1, 0), 0).unwrap();
        m.delete_topic("a").unwrap();
        assert_eq!(m.partitions(), vec![ab0.clone()]);
        assert!(matches!(
            m.append(&a0, &simple_batch(1, 1, 0), 0),
            Err(StorageError::UnknownTopicOrPartition)
        ));
        assert!(!dir.path().join("a-0").exists());
        assert!(!dir.path().join("a-1").exists());
        assert!(dir.path().join("a-b-0").exists());
        m.delete_topic("a").unwrap();
        // Re-creating starts from scratch.
        m.create_partition(&a0, LogConfig::default()).unwrap();
        assert_eq!(m.offsets(&a0).unwrap().high_watermark, 0);
        drop(m);
        // A half-finished deletion is cleaned up at open.
        fs::create_dir(dir.path().join("a-1.123-delete")).unwrap();
        let m = LogManager::open(dir.path()).unwrap();
        assert_eq!(m.partitions(), vec![a0, ab0]);
        assert!(!dir.path().join("a-1.123-delete").exists());
    }

    #[test]
    fn the_directory_is_locked() {
        let dir = tempfile::tempdir().unwrap();
        let m = LogManager::open(dir.path()).unwrap();
        assert!(matches!(
            LogManager::open(dir.path()),
            Err(StorageError::Io(_))
        ));
        drop(m);
        LogManager::open(dir.path()).unwrap();
    }

    #[test]
    fn directory_names() {
        assert_eq!(parse_dir_name("a-b-12"), Some(tp("a-b", 12)));
        assert_eq!(parse_dir_name("t-0"), Some(tp("t", 0)));
        assert_eq!(parse_dir_name("t-01"), None);
        assert_eq!(parse_dir_name("t-"), None);
        assert_eq!(parse_dir_name("-0"), None);
        assert_eq!(parse_dir_name("t-+1"), None);
        assert_eq!(parse_dir_name("t-0.5-delete"), None);
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("..").is_err());
    }

    #[test]
    fn partitions_append_concurrently() {
        let dir = tempfile::tempdir().unwrap();
        let tps: Vec<_> = (0..4).map(|p| tp("c", p)).collect();
        let m = Arc::new(open_with(
            dir.path(),
            &tps,
            LogConfig {
                segment_bytes: 64 * 1024,
                ..LogConfig::default()
            },
        ));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let m = Arc::clone(&m);
                let tp = tp("c", i % 4);
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        m.append(&tp, &simple_batch(2, 100, 0), 0).unwrap();
                        let hw = m.offsets(&tp).unwrap().high_watermark;
                        let r = m.read(&tp, hw - 1, 1 << 20, true).unwrap();
                        assert!(!r.records.is_empty());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for tp in &tps {
            assert_eq!(m.offsets(tp).unwrap().high_watermark, 800);
            // Every offset is readable, batch by batch, with no gap.
            let mut offset = 0;
            while offset < 800 {
                let r = m.read(tp, offset, 1 << 16, true).unwrap();
                let h = headers(&r.records);
                assert_eq!(h[0].base_offset, offset);
                offset = h.last().unwrap().next_offset();
            }
        }
    }
}
