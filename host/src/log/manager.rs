//! The log manager: every partition log under the configured log
//! directories (`log.dirs`), and the background work on them.
//!
//! Layout, as Kafka's: `<log dir>/<topic>-<partition>/<base-offset>.log`
//! (with `.index` and `.timeindex`), and per log directory the checkpoint
//! files (see `checkpoint`) and, after a clean shutdown, the
//! `.kafka_cleanshutdown` marker. Opening the manager takes an exclusive
//! lock on `<log dir>/.lock` in each directory (two brokers on one
//! directory would corrupt each other's logs), then discovers and opens
//! every partition directory with what the checkpoints say about it.
//!
//! New partitions go to the directory holding the fewest, as Kafka places
//! them. A partition moves between directories (AlterReplicaLogDirs) while
//! it is being written: its segments are copied into a
//! `<topic>-<partition>.<unique>-future` directory while appends go on, then
//! appends pause for the final catch-up copy, the future directory is
//! renamed into place and the old one removed. A crash mid-move leaves
//! either a `-future` directory (discarded at open) or, for an instant, two
//! identical copies (the one with the longer log is kept).
//!
//! The partition map is behind a read-write lock, held briefly to find a
//! partition; each partition has its own locks, so appends to different
//! partitions run in parallel.
//!
//! Deleting a topic first renames each partition directory to
//! `<topic>-<partition>.<unique>-delete` (one atomic step, so a crash never
//! leaves a half-deleted log that looks live), then removes it; leftovers
//! are removed the next time the manager opens.
//!
//! Two threads do the background work: the scheduler flushes by `flush.ms`
//! and after segment rolls (as Kafka flushes a rolled segment), writes the
//! checkpoints and applies retention; the cleaner compacts. Both stop (and
//! are joined) on [`LogStore::shutdown`] or when the manager is dropped.
//!
//! The manager does not persist topic configs: the metadata store does. After
//! [`LogManager::open`], discovered partitions run with
//! [`LogConfig::default`] until the caller applies each topic's configs with
//! [`LogStore::create_partition`].

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::checkpoint;
use super::cleaner;
use super::epoch_cache::EpochCache;
use super::file_records::Records;
use super::partition::{now_ms, OpenHints, Partition};
use super::segment::Segment;
use super::{
    create_dir_durably, sync_dir, AppendInfo, LogConfig, LogDirInfo, LogStore, PartitionOffsets,
    ReadResult, StorageError, TopicPartition,
};
use crate::sync::{lock, read, write};
use crate::topic_name::{self, Invalid, MAX_LENGTH};

const LOCK_FILE: &str = ".lock";
const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
const DELETE_SUFFIX: &str = "-delete";
const FUTURE_SUFFIX: &str = "-future";
/// How often the scheduler looks for flushes due.
const SCHEDULER_TICK: Duration = Duration::from_millis(100);
/// Checkpoints are rewritten at most this often after flushes.
const CHECKPOINT_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Broker-level settings of the log manager (Kafka's `log.*` properties).
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// Where partition directories go, one per log directory; at least one.
    pub dirs: Vec<PathBuf>,
    /// The log directories' names as `log.dirs` gives them (absolute),
    /// which DescribeLogDirs reports and AlterReplicaLogDirs names; the
    /// same length as `dirs` (missing names default to the paths).
    pub names: Vec<String>,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval: Duration,
    /// `log.cleaner.backoff.ms`: how often the cleaner looks for work.
    pub cleaner_backoff: Duration,
    /// `log.cleaner.enable`.
    pub cleaner_enable: bool,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub checkpoint_interval: Duration,
}

impl ManagerConfig {
    /// One directory with Kafka's default intervals.
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        ManagerConfig {
            names: dirs.iter().map(|d| d.display().to_string()).collect(),
            dirs,
            retention_check_interval: Duration::from_millis(300_000),
            cleaner_backoff: Duration::from_millis(15_000),
            cleaner_enable: true,
            checkpoint_interval: Duration::from_millis(60_000),
        }
    }
}

/// One configured log directory.
#[derive(Debug)]
struct LogDir {
    path: PathBuf,
    name: String,
    /// Held (and locked) for the manager's lifetime.
    _lock: File,
}

#[derive(Debug)]
struct Inner {
    config: ManagerConfig,
    dirs: Vec<LogDir>,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Serializes checkpoint writes.
    checkpoint_lock: Mutex<()>,
    /// Set by a clean shutdown; an append after it takes the clean-shutdown
    /// markers back.
    closed: AtomicBool,
}

/// Partition logs under the log directories; the [`LogStore`] of a single
/// broker.
#[derive(Debug)]
pub struct LogManager {
    inner: Arc<Inner>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Checks a topic name as Kafka does (`[a-zA-Z0-9._-]{1,249}`, not `.` or
/// `..`), which also makes it a safe directory name.
pub fn validate_topic_name(name: &str) -> Result<(), StorageError> {
    let message = match topic_name::check(name) {
        Ok(()) => return Ok(()),
        Err(Invalid::Empty | Invalid::Dots) => format!("topic name {name:?} is illegal"),
        Err(Invalid::TooLong) => {
            format!("topic name is longer than {MAX_LENGTH} characters")
        }
        Err(Invalid::Character(c)) => format!(
            "topic name {name:?} contains {c:?}; allowed are ASCII letters, digits, '.', '_' and '-'"
        ),
    };
    Err(StorageError::InvalidTopic(message))
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

/// `<topic>-<partition>.<unique><suffix>`: time plus a process-wide counter.
fn unique_name(tp: &TopicPartition, suffix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}.{nanos}{n}{suffix}", dir_name(tp))
}

fn lock_dir(dir: &Path) -> Result<File, StorageError> {
    create_dir_durably(dir)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(TryLockError::WouldBlock) => Err(StorageError::Io(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "log directory {} is in use by another process",
                dir.display()
            ),
        ))),
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}

fn remove_dir_logged(path: &Path) {
    if let Err(e) = fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), "cannot remove a directory: {e}");
    }
}

impl LogManager {
    /// Opens one log directory with Kafka's default intervals.
    #[cfg(test)]
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        Self::open_with(ManagerConfig::new(vec![dir.to_path_buf()]))
    }

    /// Opens (creating if needed) every log directory, locks them, removes
    /// leftovers of interrupted deletions and moves, opens every partition
    /// found (re-validating what the checkpoints do not vouch for) and
    /// starts the background threads.
    pub fn open_with(config: ManagerConfig) -> Result<Self, StorageError> {
        if config.dirs.is_empty() {
            return Err(StorageError::LogDirNotFound(
                "log.dirs names no directory".into(),
            ));
        }
        let mut dirs = Vec::new();
        for (i, path) in config.dirs.iter().enumerate() {
            if dirs.iter().any(|d: &LogDir| &d.path == path) {
                continue;
            }
            dirs.push(LogDir {
                _lock: lock_dir(path)?,
                path: path.clone(),
                name: config
                    .names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| path.display().to_string()),
            });
        }

        let mut partitions: HashMap<TopicPartition, Arc<Partition>> = HashMap::new();
        for dir in &dirs {
            let marker = dir.path.join(CLEAN_SHUTDOWN_FILE);
            let clean_shutdown = marker.is_file();
            if clean_shutdown {
                // From now on a crash must be noticed.
                fs::remove_file(&marker)?;
                sync_dir(&dir.path)?;
            }
            let recovery_points = checkpoint::read(&dir.path, checkpoint::RECOVERY_POINT);
            let start_offsets = checkpoint::read(&dir.path, checkpoint::LOG_START_OFFSET);
            let cleaner_offsets = checkpoint::read(&dir.path, checkpoint::CLEANER_OFFSET);
            for entry in fs::read_dir(&dir.path)? {
                let entry = entry?;
                if !entry.file_type()?.is_dir() {
                    continue;
                }
                let path = entry.path();
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    tracing::warn!(path = %path.display(), "ignoring a directory with a non UTF-8 name");
                    continue;
                };
                if name.ends_with(DELETE_SUFFIX) || name.ends_with(FUTURE_SUFFIX) {
                    remove_dir_logged(&path);
                    continue;
                }
                let Some(tp) = parse_dir_name(&name) else {
                    tracing::warn!(path = %path.display(), "ignoring a directory that is not a partition");
                    continue;
                };
                let hints = OpenHints {
                    clean_shutdown,
                    recovery_point: recovery_points.get(&tp).copied(),
                    log_start_offset: start_offsets.get(&tp).copied(),
                    cleaner_offset: cleaner_offsets.get(&tp).copied(),
                };
                let partition = Partition::open(path, tp.clone(), LogConfig::default(), hints)?;
                if let Some(other) = partitions.get(&tp) {
                    // A move that died after its copy was renamed into place:
                    // both copies are whole; keep the longer one.
                    let (keep, drop) =
                        if other.offsets()?.high_watermark >= partition.offsets()?.high_watermark {
                            (Arc::clone(other), Arc::new(partition))
                        } else {
                            (Arc::new(partition), Arc::clone(other))
                        };
                    tracing::warn!(partition = %tp, kept = %keep.dir().display(), "partition found in two log directories");
                    remove_dir_logged(&drop.dir());
                    partitions.insert(tp, keep);
                    continue;
                }
                partitions.insert(tp, Arc::new(partition));
            }
        }

        let manager = LogManager {
            inner: Arc::new(Inner {
                config,
                dirs,
                partitions: RwLock::new(partitions),
                checkpoint_lock: Mutex::new(()),
                closed: AtomicBool::new(false),
            }),
            stop: Arc::new((Mutex::new(false), Condvar::new())),
            threads: Mutex::new(Vec::new()),
        };
        // Recovery fsynced what it re-validated: record it, so a crash
        // right after this start does not redo the work.
        manager.inner.write_checkpoints()?;
        manager.start_threads()?;
        Ok(manager)
    }

    fn start_threads(&self) -> Result<(), StorageError> {
        let mut threads = lock(&self.threads);
        let inner = Arc::clone(&self.inner);
        let stop = Arc::clone(&self.stop);
        threads.push(
            std::thread::Builder::new()
                .name("log-scheduler".into())
                .spawn(move || scheduler(&inner, &stop))?,
        );
        if self.inner.config.cleaner_enable {
            let inner = Arc::clone(&self.inner);
            let stop = Arc::clone(&self.stop);
            threads.push(
                std::thread::Builder::new()
                    .name("log-cleaner".into())
                    .spawn(move || cleaner_loop(&inner, &stop))?,
            );
        }
        Ok(())
    }

    fn stop_threads(&self) {
        {
            let (stopped, wake) = &*self.stop;
            *lock(stopped) = true;
            wake.notify_all();
        }
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a log background thread panicked");
            }
        }
    }

    /// Fsyncs every partition's unsynced data and writes the checkpoints
    /// (the scheduler does this as flushes fall due).
    #[cfg(test)]
    pub fn flush(&self) -> Result<(), StorageError> {
        self.inner.flush_all()
    }

    fn get(&self, tp: &TopicPartition) -> Result<Arc<Partition>, StorageError> {
        self.inner.get(tp)
    }

    /// Removes the partitions `doomed` picks, files and all: each
    /// directory is renamed to a `-delete` one first (atomic), then removed.
    fn remove_partitions(
        &self,
        doomed: impl Fn(&TopicPartition) -> bool,
    ) -> Result<(), StorageError> {
        let mut renamed = Vec::new();
        let mut first_error = None;
        {
            let mut partitions = write(&self.inner.partitions);
            let tps: Vec<TopicPartition> =
                partitions.keys().filter(|tp| doomed(tp)).cloned().collect();
            for tp in tps {
                let Some(partition) = partitions.remove(&tp) else {
                    continue;
                };
                partition.mark_deleted();
                let dir = partition.dir();
                let Some(parent) = dir.parent().map(Path::to_path_buf) else {
                    continue;
                };
                let target = parent.join(unique_name(&tp, DELETE_SUFFIX));
                match fs::rename(&dir, &target) {
                    Ok(()) => renamed.push((parent, target)),
                    Err(e) => {
                        tracing::error!(partition = %tp, "cannot delete the partition directory: {e}");
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        for (parent, _) in &renamed {
            sync_dir(parent)?;
        }
        for (_, path) in renamed {
            // Not fatal: the renamed directory is removed at the next open.
            remove_dir_logged(&path);
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Runs one retention pass over every partition now (the scheduler does
    /// this every `log.retention.check.interval.ms`).
    #[cfg(test)]
    pub fn run_retention(&self) -> usize {
        self.inner.retention(now_ms())
    }

    /// Runs one cleaner pass over every compacted partition now.
    #[cfg(test)]
    pub fn run_cleaner(&self, now_ms: i64) -> usize {
        self.inner.clean_all(now_ms)
    }
}

impl Drop for LogManager {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

impl Inner {
    fn get(&self, tp: &TopicPartition) -> Result<Arc<Partition>, StorageError> {
        read(&self.partitions)
            .get(tp)
            .cloned()
            .ok_or(StorageError::UnknownTopicOrPartition)
    }

    fn all(&self) -> Vec<Arc<Partition>> {
        read(&self.partitions).values().cloned().collect()
    }

    fn dir_index(&self, log_dir: &Path) -> Option<usize> {
        self.dirs.iter().position(|d| d.path == log_dir)
    }

    /// Flushes what is due; returns whether anything was flushed.
    fn flush_due(&self, now_ms: i64) -> bool {
        let mut flushed = false;
        for p in self.all() {
            if p.flush_due(now_ms) {
                match p.flush() {
                    Ok(()) => flushed = true,
                    Err(e) => tracing::error!(partition = %p.tp, "flush failed: {e}"),
                }
            }
        }
        flushed
    }

    fn retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for p in self.all() {
            match p.delete_old_segments(now_ms) {
                Ok(n) => deleted += n,
                Err(e) => tracing::error!(partition = %p.tp, "retention failed: {e}"),
            }
        }
        if deleted > 0 {
            self.write_checkpoints_logged();
        }
        deleted
    }

    fn clean_all(&self, now_ms: i64) -> usize {
        let mut cleaned = 0;
        for p in self.all() {
            match cleaner::clean(&p, now_ms) {
                Ok(Some(_)) => cleaned += 1,
                Ok(None) => {}
                Err(e) => tracing::error!(partition = %p.tp, "compaction failed: {e}"),
            }
        }
        if cleaned > 0 {
            self.write_checkpoints_logged();
        }
        cleaned
    }

    /// A write after a clean shutdown takes its markers back: the next
    /// start must recover.
    fn written_after_shutdown(&self) {
        if self.closed.swap(false, Ordering::AcqRel) {
            for dir in &self.dirs {
                let _ = fs::remove_file(dir.path.join(CLEAN_SHUTDOWN_FILE));
            }
        }
    }

    /// Rewrites every directory's checkpoints from the partitions' state.
    fn write_checkpoints(&self) -> Result<(), StorageError> {
        let _writing = lock(&self.checkpoint_lock);
        let mut by_dir: Vec<[Vec<(TopicPartition, i64)>; 3]> =
            self.dirs.iter().map(|_| Default::default()).collect();
        for p in self.all() {
            if p.is_deleted() {
                continue;
            }
            let Some(i) = p.dir().parent().and_then(|parent| self.dir_index(parent)) else {
                continue;
            };
            let (recovery_point, log_start_offset, first_dirty) = p.checkpoint_values();
            by_dir[i][0].push((p.tp.clone(), recovery_point));
            by_dir[i][1].push((p.tp.clone(), log_start_offset));
            if p.config().compact {
                by_dir[i][2].push((p.tp.clone(), first_dirty));
            }
        }
        for (dir, mut entries) in self.dirs.iter().zip(by_dir) {
            for (name, list) in [
                checkpoint::RECOVERY_POINT,
                checkpoint::LOG_START_OFFSET,
                checkpoint::CLEANER_OFFSET,
            ]
            .into_iter()
            .zip(entries.iter_mut())
            {
                list.sort();
                checkpoint::write(&dir.path, name, list)?;
            }
        }
        Ok(())
    }

    fn write_checkpoints_logged(&self) {
        if let Err(e) = self.write_checkpoints() {
            tracing::error!("cannot write log checkpoints: {e}");
        }
    }

    fn flush_all(&self) -> Result<(), StorageError> {
        for partition in self.all() {
            partition.flush()?;
        }
        for dir in &self.dirs {
            sync_dir(&dir.path)?;
        }
        self.write_checkpoints()
    }
}

/// Waits up to `timeout` for the stop flag; true once stopped.
fn wait_stop(stop: &(Mutex<bool>, Condvar), timeout: Duration) -> bool {
    let (stopped, wake) = stop;
    let guard = lock(stopped);
    if *guard {
        return true;
    }
    let (guard, _) = wake
        .wait_timeout(guard, timeout)
        .unwrap_or_else(PoisonError::into_inner);
    *guard
}

fn scheduler(inner: &Inner, stop: &(Mutex<bool>, Condvar)) {
    let mut last_retention = Instant::now();
    // The first flush after start is checkpointed at once.
    let mut last_checkpoint = Instant::now()
        .checked_sub(CHECKPOINT_MIN_INTERVAL)
        .unwrap_or_else(Instant::now);
    let mut checkpoint_pending = false;
    while !wait_stop(stop, SCHEDULER_TICK) {
        let now = now_ms();
        checkpoint_pending |= inner.flush_due(now);
        if last_retention.elapsed() >= inner.config.retention_check_interval {
            inner.retention(now);
            last_retention = Instant::now();
        }
        let since = last_checkpoint.elapsed();
        if (checkpoint_pending && since >= CHECKPOINT_MIN_INTERVAL)
            || since >= inner.config.checkpoint_interval
        {
            inner.write_checkpoints_logged();
            last_checkpoint = Instant::now();
            checkpoint_pending = false;
        }
    }
}

fn cleaner_loop(inner: &Inner, stop: &(Mutex<bool>, Condvar)) {
    while !wait_stop(stop, inner.config.cleaner_backoff) {
        inner.clean_all(now_ms());
    }
}

/// Total and free bytes of the file system holding `path`.
fn filesystem_space(path: &Path) -> (i64, i64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return (-1, -1);
    };
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` a valid
    // out-pointer for the duration of the call.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return (-1, -1);
    }
    let block = stat.f_frsize as i64;
    (
        (stat.f_blocks as i64).saturating_mul(block),
        (stat.f_bavail as i64).saturating_mul(block),
    )
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
        let mut partitions = write(&self.inner.partitions);
        if let Some(existing) = partitions.get(tp) {
            existing.set_config(config);
            return Ok(());
        }
        // The directory with the fewest partitions, as Kafka places them.
        let mut counts = vec![0usize; self.inner.dirs.len()];
        for p in partitions.values() {
            if let Some(i) = p.dir().parent().and_then(|d| self.inner.dir_index(d)) {
                counts[i] += 1;
            }
        }
        let target = (0..counts.len()).min_by_key(|&i| counts[i]).unwrap_or(0);
        let Some(dir) = self.inner.dirs.get(target) else {
            return Err(StorageError::LogDirNotFound("no log directory".into()));
        };
        let path = dir.path.join(dir_name(tp));
        let fresh = !path.exists();
        let partition =
            match Partition::open(path.clone(), tp.clone(), config, OpenHints::default()) {
                Ok(partition) => partition,
                Err(e) => {
                    // Out of descriptors or space: leave no half-made directory
                    // for a later start to find.
                    if fresh {
                        remove_dir_logged(&path);
                    }
                    return Err(e);
                }
            };
        partitions.insert(tp.clone(), Arc::new(partition));
        Ok(())
    }

    fn delete_topic(&self, topic: &str) -> Result<(), StorageError> {
        self.remove_partitions(|tp| tp.topic == topic)
    }

    fn delete_partition(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        self.remove_partitions(|found| found == tp)
    }

    fn partitions(&self) -> Vec<TopicPartition> {
        let mut tps: Vec<_> = read(&self.inner.partitions).keys().cloned().collect();
        tps.sort();
        tps
    }

    fn append(
        &self,
        tp: &TopicPartition,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        self.inner.written_after_shutdown();
        self.get(tp)?.append(batches, now_ms)
    }

    fn append_replicated(
        &self,
        tp: &TopicPartition,
        batches: &[u8],
    ) -> Result<AppendInfo, StorageError> {
        self.inner.written_after_shutdown();
        self.get(tp)?.append_replicated(batches)
    }

    fn truncate_to(&self, tp: &TopicPartition, offset: i64) -> Result<i64, StorageError> {
        self.inner.written_after_shutdown();
        let end = self.get(tp)?.truncate_to(offset)?;
        // The recovery point may have moved back.
        self.inner.write_checkpoints()?;
        Ok(end)
    }

    fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        self.inner.written_after_shutdown();
        self.get(tp)?.truncate_fully_and_start_at(offset)?;
        // The log start offset may be inside no segment's data.
        self.inner.write_checkpoints()
    }

    fn become_leader(&self, tp: &TopicPartition, epoch: i32) -> Result<(), StorageError> {
        self.get(tp)?.become_leader(epoch)
    }

    fn leader_epoch(&self, tp: &TopicPartition) -> Result<i32, StorageError> {
        self.get(tp)?.leader_epoch()
    }

    fn epochs(&self, tp: &TopicPartition) -> Result<EpochCache, StorageError> {
        self.get(tp)?.epochs()
    }

    fn end_offset_for_epoch(
        &self,
        tp: &TopicPartition,
        epoch: i32,
    ) -> Result<(i32, i64), StorageError> {
        self.get(tp)?.end_offset_for_epoch(epoch)
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

    fn read_records(
        &self,
        tp: &TopicPartition,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult<Records>, StorageError> {
        self.get(tp)?.read_records(offset, max_bytes, min_one_batch)
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

    fn delete_records(&self, tp: &TopicPartition, offset: i64) -> Result<i64, StorageError> {
        let low_watermark = self.get(tp)?.delete_records(offset)?;
        // A log start offset inside a segment exists only in the checkpoint.
        self.inner.write_checkpoints()?;
        Ok(low_watermark)
    }

    fn describe_log_dirs(&self) -> Vec<LogDirInfo> {
        let all = self.inner.all();
        self.inner
            .dirs
            .iter()
            .map(|dir| {
                let mut partitions: Vec<(TopicPartition, u64)> = all
                    .iter()
                    .filter(|p| !p.is_deleted() && p.dir().parent() == Some(dir.path.as_path()))
                    .map(|p| (p.tp.clone(), p.size()))
                    .collect();
                partitions.sort();
                let (total_bytes, usable_bytes) = filesystem_space(&dir.path);
                LogDirInfo {
                    path: dir.name.clone(),
                    partitions,
                    total_bytes,
                    usable_bytes,
                }
            })
            .collect()
    }

    fn move_partition(&self, tp: &TopicPartition, log_dir: &str) -> Result<(), StorageError> {
        let wanted = Path::new(log_dir);
        let canonical = fs::canonicalize(wanted).ok();
        let found = self.inner.dirs.iter().position(|d| {
            Path::new(&d.name) == wanted
                || (canonical.is_some() && fs::canonicalize(&d.name).ok() == canonical)
        });
        let Some(i) = found else {
            return Err(StorageError::LogDirNotFound(format!(
                "{log_dir} is not one of log.dirs"
            )));
        };
        let partition = self.get(tp)?;
        move_partition(&partition, &self.inner.dirs[i].path)?;
        self.inner.write_checkpoints()
    }

    fn partition_dir(&self, tp: &TopicPartition) -> Result<String, StorageError> {
        let dir = self.get(tp)?.dir();
        let i = dir
            .parent()
            .and_then(|parent| self.inner.dir_index(parent))
            .ok_or_else(|| StorageError::LogDirNotFound(dir.display().to_string()))?;
        Ok(self.inner.dirs[i].name.clone())
    }

    fn shutdown(&self) -> Result<(), StorageError> {
        self.stop_threads();
        self.inner.flush_all()?;
        for dir in &self.inner.dirs {
            File::create(dir.path.join(CLEAN_SHUTDOWN_FILE))?.sync_all()?;
            sync_dir(&dir.path)?;
        }
        self.inner.closed.store(true, Ordering::Release);
        Ok(())
    }
}

/// Moves a partition's directory under `target` (another log dir) while it
/// stays online; see the module doc.
fn move_partition(p: &Partition, target: &Path) -> Result<(), StorageError> {
    let _maintenance = lock(&p.maintenance);
    let old = p.dir();
    if old.parent() == Some(target) {
        return Ok(());
    }
    if p.is_deleted() {
        return Err(StorageError::UnknownTopicOrPartition);
    }
    let future = target.join(unique_name(&p.tp, FUTURE_SUFFIX));
    create_dir_durably(&future)?;
    let result = copy_and_swap(p, &old, &future, target);
    if result.is_err() {
        remove_dir_logged(&future);
    }
    result
}

fn copy_and_swap(
    p: &Partition,
    old: &Path,
    future: &Path,
    target: &Path,
) -> Result<(), StorageError> {
    // Bytes already copied, per segment base offset.
    let mut copied: HashMap<i64, (File, u64)> = HashMap::new();
    let copy_all = |copied: &mut HashMap<i64, (File, u64)>| -> Result<(), StorageError> {
        let views = read(&p.state)
            .segments
            .iter()
            .map(|s| s.view(0))
            .collect::<Result<Vec<_>, _>>()?;
        for view in views {
            let base = view.base_offset();
            let entry = match copied.entry(base) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let file = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(future.join(super::segment::file_name(base)))?;
                    v.insert((file, 0))
                }
            };
            const CHUNK: u64 = 8 << 20;
            while entry.1 < view.end() {
                let to = (entry.1 + CHUNK).min(view.end());
                let bytes = view.copy_range(entry.1, to)?;
                entry.0.write_all_at(&bytes, entry.1)?;
                entry.1 = to;
            }
        }
        Ok(())
    };
    // While appends go on.
    copy_all(&mut copied)?;
    // The catch-up copy with appends paused.
    let _append = lock(&p.append_lock);
    copy_all(&mut copied)?;
    {
        let state = read(&p.state);
        for s in &state.segments {
            s.copy_index_to(future)?;
        }
        state.epochs.write(future)?;
    }
    for (file, _) in copied.values() {
        file.sync_all()?;
    }
    sync_dir(future)?;
    let bases: Vec<i64> = read(&p.state)
        .segments
        .iter()
        .map(Segment::base_offset)
        .collect();
    let final_dir = target.join(old.file_name().unwrap_or_default());
    fs::rename(future, &final_dir)?;
    sync_dir(target)?;
    let mut segments = Vec::with_capacity(bases.len());
    for base in bases {
        let segment = match Segment::load(&final_dir, base)? {
            Some(s) => s,
            None => Segment::recover(&final_dir, base)?.0,
        };
        segments.push(segment);
    }
    {
        let mut state = write(&p.state);
        state.segments = segments;
        *write(&p.dir) = final_dir.clone();
    }
    // The old copy goes; a crash before this leaves two identical copies.
    if let Some(parent) = old.parent() {
        let trash = parent.join(unique_name(&p.tp, DELETE_SUFFIX));
        fs::rename(old, &trash)?;
        sync_dir(parent)?;
        remove_dir_logged(&trash);
    }
    tracing::info!(partition = %p.tp, to = %final_dir.display(), "moved partition to another log directory");
    Ok(())
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
        // A v2 batch with magic 1 reads as a legacy message with a bad CRC.
        let mut v1 = simple_batch(1, 1, 0);
        v1[16] = 1;
        assert_eq!(m.append(&t0, &v1, 0).unwrap_err().error_code(), 2);
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
        // One segment of ~300 KB (with its two index files), beside the
        // leader-epoch checkpoint.
        let files = fs::read_dir(dir.path().join("t-0")).unwrap();
        let segment_files = files
            .filter(|e| e.as_ref().unwrap().file_name() != super::super::epoch_cache::CHECKPOINT)
            .count();
        assert_eq!(segment_files, 3);
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
    fn compressed_batches_are_stored_as_sent() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        let batch = compressed_batch(
            &encode_batch(&[Rec::new(10, b"a"), Rec::new(30, b"b"), Rec::new(20, b"c")]),
            4,
        );
        m.append(&t0, &batch, 0).unwrap();
        // Timestamp lookups are exact inside the compressed batch.
        assert_eq!(m.max_timestamp(&t0).unwrap(), Some((1, 30)));
        assert_eq!(m.offset_for_timestamp(&t0, 5).unwrap(), Some((0, 10)));
        assert_eq!(m.offset_for_timestamp(&t0, 25).unwrap(), Some((1, 30)));
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

    fn two_dirs(root: &Path) -> ManagerConfig {
        ManagerConfig::new(vec![root.join("a"), root.join("b")])
    }

    #[test]
    fn clean_shutdown_leaves_a_marker_and_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let m = open_with(dir.path(), std::slice::from_ref(&t0), LogConfig::default());
        m.append(&t0, &simple_batch(3, 10, 0), 0).unwrap();
        m.shutdown().unwrap();
        assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).is_file());
        let points = checkpoint::read(dir.path(), checkpoint::RECOVERY_POINT);
        assert_eq!(points[&t0], 3);
        drop(m);
        // The marker is consumed by the next start: a crash after it is
        // noticed.
        let m = LogManager::open(dir.path()).unwrap();
        assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 3);
        // An append after a shutdown takes the marker back.
        m.shutdown().unwrap();
        m.append(&t0, &simple_batch(1, 10, 0), 0).unwrap();
        assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    }

    #[test]
    fn the_log_start_offset_survives_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let config = LogConfig {
            retention_ms: -1,
            ..LogConfig::default()
        };
        let m = open_with(dir.path(), std::slice::from_ref(&t0), config);
        for _ in 0..4 {
            m.append(&t0, &simple_batch(5, 10, 0), 0).unwrap();
        }
        assert_eq!(m.delete_records(&t0, 7).unwrap(), 7);
        drop(m); // no shutdown: as after a crash
        let m = LogManager::open(dir.path()).unwrap();
        let o = m.offsets(&t0).unwrap();
        assert_eq!((o.log_start_offset, o.high_watermark), (7, 20));
        assert!(matches!(
            m.read(&t0, 6, 100, true),
            Err(StorageError::OffsetOutOfRange)
        ));
    }

    #[test]
    fn partitions_spread_across_log_dirs() {
        let root = tempfile::tempdir().unwrap();
        let m = LogManager::open_with(two_dirs(root.path())).unwrap();
        for p in 0..4 {
            m.create_partition(&tp("t", p), LogConfig::default())
                .unwrap();
        }
        let dirs = m.describe_log_dirs();
        assert_eq!(dirs.len(), 2);
        assert_eq!(dirs[0].partitions.len(), 2);
        assert_eq!(dirs[1].partitions.len(), 2);
        assert!(dirs[0].total_bytes > 0 && dirs[0].usable_bytes > 0);
        m.append(&tp("t", 0), &simple_batch(2, 100, 0), 0).unwrap();
        let size: u64 = m
            .describe_log_dirs()
            .iter()
            .flat_map(|d| d.partitions.clone())
            .filter(|(p, _)| *p == tp("t", 0))
            .map(|(_, size)| size)
            .sum();
        assert_eq!(size, simple_batch(2, 100, 0).len() as u64);
        drop(m);
        let m = LogManager::open_with(two_dirs(root.path())).unwrap();
        assert_eq!(m.partitions().len(), 4);
        assert!(matches!(
            m.move_partition(&tp("t", 0), "/nowhere"),
            Err(StorageError::LogDirNotFound(_))
        ));
    }

    #[test]
    fn a_partition_moves_between_log_dirs_while_written() {
        let root = tempfile::tempdir().unwrap();
        let m = Arc::new(LogManager::open_with(two_dirs(root.path())).unwrap());
        let t0 = tp("t", 0);
        let config = LogConfig {
            segment_bytes: 64 * 1024,
            ..LogConfig::default()
        };
        m.create_partition(&t0, config).unwrap();
        for _ in 0..500 {
            m.append(&t0, &simple_batch(2, 200, 0), 0).unwrap();
        }
        let from = m.partition_dir(&t0).unwrap();
        let to = m
            .describe_log_dirs()
            .into_iter()
            .map(|d| d.path)
            .find(|p| *p != from)
            .unwrap();
        let writer = {
            let m = Arc::clone(&m);
            let t0 = t0.clone();
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    m.append(&t0, &simple_batch(2, 200, 0), 0).unwrap();
                }
            })
        };
        m.move_partition(&t0, &to).unwrap();
        writer.join().unwrap();
        assert_eq!(m.partition_dir(&t0).unwrap(), to);
        assert!(!Path::new(&from).join("t-0").exists());
        let check = |m: &LogManager| {
            assert_eq!(m.offsets(&t0).unwrap().high_watermark, 5000);
            let mut offset = 0;
            while offset < 5000 {
                let r = m.read(&t0, offset, 1 << 16, true).unwrap();
                let h = headers(&r.records);
                assert_eq!(h[0].base_offset, offset);
                offset = h.last().unwrap().next_offset();
            }
        };
        check(&m);
        m.append(&t0, &simple_batch(1, 1, 0), 0).unwrap();
        drop(m);
        let m = LogManager::open_with(two_dirs(root.path())).unwrap();
        assert_eq!(m.partition_dir(&t0).unwrap(), to);
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 5001);
        // Moving back, and moving to where it is, both work.
        m.move_partition(&t0, &from).unwrap();
        m.move_partition(&t0, &from).unwrap();
        assert_eq!(m.offsets(&t0).unwrap().high_watermark, 5001);
    }

    #[test]
    fn a_leftover_future_dir_is_discarded() {
        let root = tempfile::tempdir().unwrap();
        let config = two_dirs(root.path());
        fs::create_dir_all(root.path().join("b").join("t-0.123-future")).unwrap();
        let m = LogManager::open_with(config).unwrap();
        assert!(m.partitions().is_empty());
        assert!(!root.path().join("b").join("t-0.123-future").exists());
    }

    #[test]
    fn background_passes_over_every_partition_and_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (c, d) = (tp("compacted", 0), tp("deleted", 0));
        let m = LogManager::open(dir.path()).unwrap();
        let compact = LogConfig {
            segment_bytes: 100,
            compact: true,
            delete: false,
            min_cleanable_dirty_ratio: 0.0,
            ..LogConfig::default()
        };
        m.create_partition(&c, compact).unwrap();
        let delete = LogConfig {
            segment_bytes: 100,
            retention_ms: 1000,
            ..LogConfig::default()
        };
        m.create_partition(&d, delete).unwrap();
        for _ in 0..4 {
            let mut rec = Rec::new(1000, b"v");
            rec.key = Some(b"k".to_vec());
            m.append(&c, &encode_batch(&[rec]), 0).unwrap();
            m.append(&d, &simple_batch(1, 50, 1000), 0).unwrap();
        }
        assert_eq!(m.run_cleaner(10_000), 1);
        let cleaned = checkpoint::read(dir.path(), checkpoint::CLEANER_OFFSET);
        assert_eq!(cleaned[&c], 3, "the active segment starts at 3");
        assert!(!cleaned.contains_key(&d));
        // Everything in `deleted` is older than retention.ms.
        assert_eq!(m.run_retention(), 4);
        assert_eq!(m.offsets(&d).unwrap().log_start_offset, 4);
        let starts = checkpoint::read(dir.path(), checkpoint::LOG_START_OFFSET);
        assert_eq!(starts[&d], 4);
        assert_eq!(m.offsets(&c).unwrap().log_start_offset, 0);
    }

    #[test]
    fn the_scheduler_flushes_rolled_segments_and_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = tp("t", 0);
        let config = LogConfig {
            segment_bytes: 1000,
            ..LogConfig::default()
        };
        let m = open_with(dir.path(), std::slice::from_ref(&t0), config);
        for _ in 0..10 {
            m.append(&t0, &simple_batch(2, 200, 0), 0).unwrap();
        }
        let points = wait_until(|| {
            let points = checkpoint::read(dir.path(), checkpoint::RECOVERY_POINT);
            points.get(&t0).is_some_and(|&p| p >= 18).then_some(points)
        });
        assert!(points[&t0] <= 20);
    }

    #[test]
    fn only_the_segment_being_written_keeps_its_file_open() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 1000,
            ..LogConfig::default()
        };
        let tps: Vec<_> = (0..20).map(|i| tp("many", i)).collect();
        let m = open_with(dir.path(), &tps, config);
        for round in 0..30 {
            for t in &tps {
                m.append(t, &simple_batch(2, 100, round), 0).unwrap();
            }
        }
        for t in &tps {
            let p = m.get(t).unwrap();
            let state = read(&p.state);
            assert!(
                state.segments.len() >= 5,
                "{} segments",
                state.segments.len()
            );
            let pinned: Vec<bool> = state.segments.iter().map(|s| s.is_pinned()).collect();
            let (last, sealed) = pinned.split_last().unwrap();
            assert!(*last && sealed.iter().all(|p| !p), "{pinned:?}");
        }
        // Reads of sealed segments still work, through the handle cache.
        for t in &tps {
            let r = m.read(t, 0, 1 << 20, true).unwrap();
            assert_eq!(offsets_of(&r.records)[0], 0);
        }
        assert!(super::super::handles::cached() <= super::super::handles::CAPACITY);
        // Reopened, nothing is pinned until written.
        m.shutdown().unwrap();
        drop(m);
        let m = open_with(dir.path(), &tps, LogConfig::default());
        let p = m.get(&tps[0]).unwrap();
        assert!(read(&p.state).segments.iter().all(|s| !s.is_pinned()));
        m.append(&tps[0], &simple_batch(1, 1, 0), 0).unwrap();
        assert!(read(&p.state).segments.last().unwrap().is_pinned());
    }

    fn wait_until<T>(mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
