//! The coordinator's state machine: one record per transactional id, the
//! transitions the transaction APIs make, and the completion of decided
//! transactions through [`TxnEffects`]. Every change goes to
//! `__transaction_state` ([`StateLog`]) before memory; on a cluster node
//! the in-sync replicas have it before memory changes and the caller is
//! answered, and only the ids of the partitions this broker leads (and
//! has loaded) are here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::coordinator::offsets_log::OffsetsLog;
use crate::coordinator::ReplicationWait;
use crate::error_code::ErrorCode;
use crate::log::TopicPartition;
use crate::producer_ids::ProducerIdManager;

use super::state_log::StateLog;
use super::state_topic::TOPIC;

/// How long a partition load waits before trying the log again.
const LOAD_RETRY: Duration = Duration::from_millis(200);

/// `transaction.max.timeout.ms` default (15 minutes).
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;
/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` default.
pub const DEFAULT_ABORT_INTERVAL_MS: u64 = 10_000;
/// `transactional.id.expiration.ms` default (7 days).
pub const DEFAULT_ID_EXPIRATION_MS: i64 = 7 * 24 * 3600 * 1000;

/// A transaction's state, with Kafka's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    #[default]
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
}

impl TxnState {
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
        }
    }

    fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// An offset waiting in a transaction for its commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl PendingOffset {
    /// The offset as the group coordinator commits it.
    pub fn to_commit(&self) -> crate::coordinator::OffsetCommit {
        crate::coordinator::OffsetCommit {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.clone(),
        }
    }
}

/// One transactional id's durable record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionalProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The producer id and epoch before the last InitProducerId, which a
    /// retried call may still name (KIP-360).
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    #[serde(default)]
    pub state: TxnState,
    /// Partitions written in the current transaction.
    #[serde(default)]
    pub partitions: BTreeSet<TopicPartition>,
    /// Groups added with AddOffsetsToTxn, with the offsets sent for them.
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<PendingOffset>>,
    /// When the current transaction started (ms), -1 if none.
    #[serde(default = "minus_one")]
    pub start_ms: i64,
    /// Last change (ms): transactional ids idle for
    /// `transactional.id.expiration.ms` are forgotten.
    #[serde(default)]
    pub updated_ms: i64,
}

impl TransactionalProducer {
    /// Moves to `state` with a new (empty) transaction that started at
    /// `start_ms` (-1: none).
    fn enter(&mut self, state: TxnState, start_ms: i64) {
        self.state = state;
        self.partitions.clear();
        self.groups.clear();
        self.start_ms = start_ms;
        self.updated_ms = now_ms();
    }
}

fn minus_one() -> i64 {
    -1
}

/// What the coordinator does to the rest of the broker.
pub trait TxnEffects {
    fn partition_exists(&self, topic: &str, partition: i32) -> bool;
    /// Appends a commit or abort marker from the coordinator at
    /// `coordinator_epoch` (the leader epoch of the `__transaction_state`
    /// partition of the transactional id); a Kafka error code.
    fn write_marker(
        &self,
        partition: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16;
    /// Commits a transaction's offsets to a group; a Kafka error code.
    fn commit_offsets(&self, group_id: &str, offsets: &[PendingOffset]) -> i16;
    /// Ends the transaction at `group_id`'s coordinator (a cluster node:
    /// the marker for the group's partition of `__consumer_offsets`,
    /// which commits or drops the offsets its TxnOffsetCommits left
    /// there), from the coordinator at `coordinator_epoch`; a Kafka error
    /// code.
    fn complete_group(
        &self,
        group_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16;
}

/// Where a marker goes on a cluster node: a partition another broker
/// leads gets it through a WriteTxnMarkers request to that leader.
pub trait MarkerRoute: Send + Sync {
    /// The partition's leader (-1: none now), None if the partition is not
    /// in the cluster's metadata.
    fn leader(&self, partition: &TopicPartition) -> Option<i32>;
    /// A topic's partition count in the cluster's metadata.
    fn partitions(&self, topic: &str) -> Option<i32>;
    /// This broker's id.
    fn this_broker(&self) -> i32;
    /// Sends the marker, from the coordinator at `coordinator_epoch`, to
    /// `leader`; its Kafka error code.
    fn send(
        &self,
        leader: i32,
        partition: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16;
}

/// The member a TxnOffsetCommit names, checked by the caller against the
/// group before the offsets are added here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerRef<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// The answer to InitProducerId.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitAnswer {
    pub error_code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitAnswer {
    fn failed(error_code: i16) -> Self {
        InitAnswer {
            error_code,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

/// A transaction as DescribeTransactions shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnDescription {
    pub state: TxnState,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub partitions: Vec<TopicPartition>,
}

/// A transaction a Prepare state left to finish: what of its markers and
/// offsets is still to be written. Each one written leaves it, as Kafka's
/// `TransactionMarkerChannelManager` removes a partition from the
/// transaction once its marker is written, so a retry writes only what
/// failed.
#[derive(Clone, Debug)]
struct Completion {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    /// The leader epoch of the id's `__transaction_state` partition when
    /// this coordinator decided to complete it (0 on a single node): the
    /// markers carry it, and a partition refuses markers from an older one.
    coordinator_epoch: i32,
    /// Partitions whose marker is not written yet.
    partitions: BTreeSet<TopicPartition>,
    /// Groups whose coordinator has not ended the transaction yet (a
    /// cluster node).
    groups_to_end: BTreeSet<String>,
    /// Offsets not committed to their group yet (a commit).
    offsets: BTreeMap<String, Vec<PendingOffset>>,
}

impl Completion {
    /// Whether `other` completes the same decision of the same producer.
    fn same_transaction(&self, other: &Completion) -> bool {
        (
            self.producer_id,
            self.producer_epoch,
            self.commit,
            self.coordinator_epoch,
        ) == (
            other.producer_id,
            other.producer_epoch,
            other.commit,
            other.coordinator_epoch,
        )
    }

    fn is_done(&self) -> bool {
        self.partitions.is_empty() && self.groups_to_end.is_empty() && self.offsets.is_empty()
    }
}

/// A prepared transaction's completion as this coordinator goes through
/// it: what is left, and which call is writing it now (at most one, so
/// the end of a transaction and the periodic retry never both write a
/// marker).
struct InProgress {
    left: Completion,
    /// The claim of the call writing it (0: none).
    running: u64,
}

/// The effects a loaded partition's prepared transactions are finished
/// with.
pub type SharedEffects = Arc<dyn TxnEffects + Send + Sync>;

/// What the ISR wait of a cluster node's writes runs on.
struct Replication {
    wait: Arc<dyn ReplicationWait>,
    runtime: tokio::runtime::Handle,
}

impl Replication {
    /// Blocks until the ISR of `partition` has its log up to `end`: NONE,
    /// or the error the write is answered with.
    fn wait(&self, partition: i32, end: i64) -> i16 {
        let wait = self.wait.replicated(partition, end);
        match tokio::runtime::Handle::try_current() {
            // On a runtime worker: let the runtime move its other tasks.
            Ok(_) => tokio::task::block_in_place(|| self.runtime.block_on(wait)),
            Err(_) => self.runtime.block_on(wait),
        }
    }
}

/// The records of the coordinated ids, locked.
type Records<'a> = MutexGuard<'a, BTreeMap<String, TransactionalProducer>>;

/// The partitions of `__transaction_state` a cluster node coordinates:
/// each led partition's leader epoch, and whether it is loaded.
#[derive(Default)]
struct Ownership {
    led: HashMap<i32, (i32, bool)>,
}

pub struct TransactionStore {
    max_timeout_ms: i32,
    producers: Mutex<BTreeMap<String, TransactionalProducer>>,
    log: StateLog,
    /// On a cluster node, the partitions whose ids are here (none on a
    /// single node, which coordinates every id).
    ownership: Option<Mutex<Ownership>>,
    /// On a cluster node, what every write waits on for the ISR.
    replication: OnceLock<Replication>,
    /// Prepared transactions being completed, by transactional id: what
    /// their markers and offsets still need (memory only: a new
    /// coordinator, or the next start, writes them all again).
    completing: Mutex<HashMap<String, InProgress>>,
    /// The last claim given to a completing call.
    claims: AtomicU64,
    /// Ids with changes in the log that wait for the in-sync replicas, and
    /// how many (one but for a reload's completion racing the previous
    /// epoch's). Changed only with the records locked.
    writing: Mutex<HashMap<String, u32>>,
}

impl TransactionStore {
    /// Replays `__transaction_state` on `log` (a single node), first
    /// migrating an earlier release's `transactions.journal` in `dir`.
    pub fn open_on_topic(
        log: Arc<dyn OffsetsLog>,
        dir: &Path,
        max_timeout_ms: i32,
    ) -> Result<Self> {
        let log = StateLog::new(log).with_context(|| format!("opening {TOPIC}"))?;
        let mut producers = log.replay().with_context(|| format!("replaying {TOPIC}"))?;
        log.migrate(dir, &mut producers)?;
        Ok(Self {
            max_timeout_ms,
            producers: Mutex::new(producers),
            log,
            ownership: None,
            replication: OnceLock::new(),
            completing: Mutex::new(HashMap::new()),
            claims: AtomicU64::new(0),
            writing: Mutex::new(HashMap::new()),
        })
    }

    /// A cluster node's coordinator on `__transaction_state` through
    /// `log`: no id until the broker leads a partition
    /// ([`TransactionStore::on_elected`]).
    pub fn open_in_cluster(log: Arc<dyn OffsetsLog>, max_timeout_ms: i32) -> Result<Self> {
        let log = StateLog::new(log).with_context(|| format!("opening {TOPIC}"))?;
        Ok(Self {
            max_timeout_ms,
            producers: Mutex::new(BTreeMap::new()),
            log,
            ownership: Some(Mutex::new(Ownership::default())),
            replication: OnceLock::new(),
            completing: Mutex::new(HashMap::new()),
            claims: AtomicU64::new(0),
            writing: Mutex::new(HashMap::new()),
        })
    }

    /// From now on every write waits for the in-sync replicas of its
    /// partition (a cluster node's leader side). Set once, on the runtime
    /// the waits run on.
    pub fn wait_for_replication(&self, wait: Arc<dyn ReplicationWait>) -> Result<()> {
        let runtime = tokio::runtime::Handle::try_current()
            .context("the transaction coordinator's ISR wait needs a tokio runtime")?;
        let _ = self.replication.set(Replication { wait, runtime });
        Ok(())
    }

    /// Held while a cluster node waits for a producer id block from the
    /// controller (not for a write's in-sync replicas: [`Self::put`]).
    fn lock(&self) -> Records<'_> {
        crate::sync::lock_held_across_io(&self.producers)
    }

    /// Whether this is a cluster node's coordinator (ids by partition
    /// leadership; offsets of transactions wait at their group's
    /// coordinator).
    pub fn in_cluster(&self) -> bool {
        self.ownership.is_some()
    }

    /// NOT_COORDINATOR when this broker does not coordinate
    /// `transactional_id` (a cluster node not leading its partition),
    /// COORDINATOR_LOAD_IN_PROGRESS while it loads it; None when it does.
    pub fn elsewhere(&self, transactional_id: &str) -> Option<i16> {
        let ownership = self.ownership.as_ref()?;
        let Some(partition) = self.log.partition_of(transactional_id) else {
            return Some(ErrorCode::NotCoordinator.code());
        };
        match crate::sync::lock(ownership).led.get(&partition) {
            None => Some(ErrorCode::NotCoordinator.code()),
            Some((_, false)) => Some(ErrorCode::CoordinatorLoadInProgress.code()),
            Some((_, true)) => None,
        }
    }

    /// This broker leads `partition` of `__transaction_state` at `epoch`:
    /// its ids are loaded on a blocking thread (answered
    /// COORDINATOR_LOAD_IN_PROGRESS until then), then the transactions it
    /// finds prepared are completed with `effects`, as Kafka's new
    /// coordinator does. A new epoch of a partition already led reloads it.
    pub fn on_elected(self: &Arc<Self>, partition: i32, epoch: i32, effects: SharedEffects) {
        let Some(ownership) = self.ownership.as_ref() else {
            return;
        };
        let reload = {
            let mut owned = crate::sync::lock(ownership);
            if owned
                .led
                .get(&partition)
                .is_some_and(|(led, _)| *led == epoch)
            {
                return;
            }
            owned.led.insert(partition, (epoch, false)).is_some()
        };
        // (Lock order: the records before the ownership, as `load` takes them.)
        if reload {
            self.drop_partition(partition);
        }
        let store = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            if store.load(partition, epoch) {
                store.finish_prepared(effects.as_ref());
            }
        });
    }

    /// Replays `partition` and takes its ids on, unless the broker stopped
    /// leading it (at `epoch`) meanwhile; whether it did. A log not there
    /// yet (the image ahead of the replica) is retried.
    fn load(&self, partition: i32, epoch: i32) -> bool {
        let Some(ownership) = self.ownership.as_ref() else {
            return false;
        };
        let started = Instant::now();
        loop {
            let loaded = self
                .log
                .partition_count(false)
                .and_then(|count| match count {
                    Some(_) => self.log.load_partition(partition),
                    None => Err(std::io::Error::other(format!("{TOPIC} is not known yet"))),
                });
            let mut producers = self.lock();
            let mut owned = crate::sync::lock(ownership);
            if owned.led.get(&partition) != Some(&(epoch, false)) {
                return false;
            }
            match loaded {
                Ok(records) => {
                    owned.led.insert(partition, (epoch, true));
                    let ids = records.len();
                    producers.extend(records);
                    tracing::info!(
                        partition,
                        epoch,
                        ids,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "loaded the transactional ids of {TOPIC}-{partition}"
                    );
                    return true;
                }
                Err(error) => {
                    drop(owned);
                    drop(producers);
                    tracing::warn!(partition, "cannot load {TOPIC}-{partition} yet: {error}");
                    std::thread::sleep(LOAD_RETRY);
                }
            }
        }
    }

    /// This broker no longer leads `partition`: its ids go (their clients
    /// are answered NOT_COORDINATOR and look the coordinator up again).
    pub fn on_resigned(&self, partition: i32) {
        let Some(ownership) = self.ownership.as_ref() else {
            return;
        };
        if crate::sync::lock(ownership)
            .led
            .remove(&partition)
            .is_some()
        {
            let dropped = self.drop_partition(partition);
            tracing::info!(
                partition,
                ids = dropped,
                "resigned as transaction coordinator of {TOPIC}-{partition}"
            );
        }
    }

    /// Forgets the ids of `partition`; how many there were.
    fn drop_partition(&self, partition: i32) -> usize {
        let mut producers = self.lock();
        let before = producers.len();
        producers.retain(|id, _| self.log.partition_of(id) != Some(partition));
        // (Lock order: the records, then the completions.)
        crate::sync::lock(&self.completing)
            .retain(|id, _| self.log.partition_of(id) != Some(partition));
        before - producers.len()
    }

    /// The partitions of `__transaction_state` whose ids are here, and
    /// whether each is loaded (a cluster node; empty on a single node).
    pub fn coordinated_partitions(&self) -> BTreeMap<i32, bool> {
        self.ownership
            .iter()
            .flat_map(|o| {
                crate::sync::lock(o)
                    .led
                    .iter()
                    .map(|(p, (_, loaded))| (*p, *loaded))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// InitProducerId for `transactional_id`. `expected` is the producer id
    /// and epoch a v3+ client names (-1: none). An ongoing transaction is
    /// aborted first, fenced with the new epoch, as Kafka does.
    pub fn init_producer_id(
        &self,
        ids: &ProducerIdManager,
        effects: &dyn TxnEffects,
        transactional_id: &str,
        timeout_ms: i32,
        expected: (i64, i16),
    ) -> InitAnswer {
        if let Some(code) = self.elsewhere(transactional_id) {
            return InitAnswer::failed(code);
        }
        if timeout_ms <= 0 || timeout_ms > self.max_timeout_ms {
            return InitAnswer::failed(ErrorCode::InvalidTransactionTimeout.code());
        }
        let mut producers = self.lock();
        if self.is_writing(transactional_id) {
            return InitAnswer::failed(ErrorCode::ConcurrentTransactions.code());
        }
        let current = producers.get(transactional_id).cloned();
        let mut next = match &current {
            None => match ids.allocate() {
                Ok(producer_id) => TransactionalProducer {
                    producer_id,
                    producer_epoch: 0,
                    last_producer_id: -1,
                    last_producer_epoch: -1,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    groups: BTreeMap::new(),
                    start_ms: -1,
                    updated_ms: now_ms(),
                },
                Err(error) => {
                    tracing::error!("allocating a producer id failed: {error:#}");
                    return InitAnswer::failed(ErrorCode::KafkaStorageError.code());
                }
            },
            Some(record) => {
                if record.state.is_prepare() {
                    return InitAnswer::failed(ErrorCode::ConcurrentTransactions.code());
                }
                let (expected_id, expected_epoch) = expected;
                if expected_id >= 0 {
                    let is_current = (expected_id, expected_epoch)
                        == (record.producer_id, record.producer_epoch);
                    let is_retry = (expected_id, expected_epoch)
                        == (record.last_producer_id, record.last_producer_epoch);
                    if is_retry && record.state != TxnState::Ongoing {
                        // The answer to this call was lost: give it again.
                        return InitAnswer {
                            error_code: ErrorCode::None.code(),
                            producer_id: record.producer_id,
                            producer_epoch: record.producer_epoch,
                        };
                    }
                    if !is_current && !is_retry {
                        return InitAnswer::failed(ErrorCode::ProducerFenced.code());
                    }
                }
                let mut next = match bumped(record, ids) {
                    Ok(next) => next,
                    Err(error) => {
                        tracing::error!("allocating a producer id failed: {error:#}");
                        return InitAnswer::failed(ErrorCode::KafkaStorageError.code());
                    }
                };
                next.timeout_ms = timeout_ms;
                next
            }
        };
        if let Some(old) = current.filter(|record| record.state == TxnState::Ongoing) {
            // Fence the open transaction: abort it with the new epoch (or,
            // when the producer id changed, the old id's newest epoch).
            let fence_epoch = if next.producer_id == old.producer_id {
                next.producer_epoch
            } else {
                old.producer_epoch
            };
            let mut aborting = old.clone();
            aborting.producer_epoch = fence_epoch;
            aborting.state = TxnState::PrepareAbort;
            if let (_, Err(code)) = self.put(producers, transactional_id, Some(aborting.clone())) {
                return InitAnswer::failed(code);
            }
            let completion = self.completion_of(transactional_id, &aborting);
            self.complete(effects, completion);
            producers = self.lock();
            if self.is_writing(transactional_id)
                || producers
                    .get(transactional_id)
                    .is_some_and(|record| record.state.is_prepare())
            {
                return InitAnswer::failed(ErrorCode::ConcurrentTransactions.code());
            }
        }
        next.enter(TxnState::Empty, -1);
        if let (_, Err(code)) = self.put(producers, transactional_id, Some(next.clone())) {
            return InitAnswer::failed(code);
        }
        InitAnswer {
            error_code: ErrorCode::None.code(),
            producer_id: next.producer_id,
            producer_epoch: next.producer_epoch,
        }
    }

    /// The record of a producer about to change its transaction: the
    /// checks every transaction request starts with.
    fn checked<'a>(
        &self,
        producers: &'a BTreeMap<String, TransactionalProducer>,
        producer: ProducerRef<'_>,
    ) -> Result<&'a TransactionalProducer, i16> {
        let record = producers
            .get(producer.transactional_id)
            .filter(|record| record.state != TxnState::Dead)
            .ok_or(ErrorCode::InvalidProducerIdMapping.code())?;
        if record.producer_id != producer.producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping.code());
        }
        if record.producer_epoch != producer.producer_epoch {
            return Err(ErrorCode::ProducerFenced.code());
        }
        if self.is_writing(producer.transactional_id) || record.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions.code());
        }
        Ok(record)
    }

    /// Makes the transaction Ongoing (a new one if none is) and applies
    /// `change` to it; persisted when it changed anything.
    fn join_transaction(
        &self,
        producer: ProducerRef<'_>,
        change: impl FnOnce(&mut TransactionalProducer) -> bool,
    ) -> i16 {
        if let Some(code) = self.elsewhere(producer.transactional_id) {
            return code;
        }
        let producers = self.lock();
        let record = match self.checked(&producers, producer) {
            Ok(record) => record,
            Err(code) => return code,
        };
        let mut next = record.clone();
        let mut changed = false;
        if next.state != TxnState::Ongoing {
            next.enter(TxnState::Ongoing, now_ms());
            changed = true;
        }
        changed |= change(&mut next);
        if !changed {
            return ErrorCode::None.code();
        }
        next.updated_ms = now_ms();
        match self.put(producers, producer.transactional_id, Some(next)) {
            (_, Ok(())) => ErrorCode::None.code(),
            (_, Err(code)) => code,
        }
    }

    /// AddPartitionsToTxn. One error per partition, in order.
    pub fn add_partitions(
        &self,
        effects: &dyn TxnEffects,
        producer: ProducerRef<'_>,
        partitions: &[TopicPartition],
        verify_only: bool,
    ) -> Vec<i16> {
        if let Some(code) = self.elsewhere(producer.transactional_id) {
            return vec![code; partitions.len()];
        }
        let unknown: Vec<bool> = partitions
            .iter()
            .map(|p| !effects.partition_exists(&p.topic, p.partition))
            .collect();
        if unknown.iter().any(|u| *u) {
            return unknown
                .iter()
                .map(|u| {
                    if *u {
                        ErrorCode::UnknownTopicOrPartition.code()
                    } else {
                        ErrorCode::OperationNotAttempted.code()
                    }
                })
                .collect();
        }
        if verify_only {
            let producers = self.lock();
            return match self.checked(&producers, producer) {
                Err(code) => vec![code; partitions.len()],
                Ok(record) => partitions
                    .iter()
                    .map(|p| {
                        if record.state == TxnState::Ongoing && record.partitions.contains(p) {
                            ErrorCode::None.code()
                        } else {
                            ErrorCode::InvalidTxnState.code()
                        }
                    })
                    .collect(),
            };
        }
        let code = self.join_transaction(producer, |record| {
            let before = record.partitions.len();
            record.partitions.extend(partitions.iter().cloned());
            record.partitions.len() != before
        });
        vec![code; partitions.len()]
    }

    /// AddOffsetsToTxn: the group joins the transaction.
    pub fn add_offsets(&self, producer: ProducerRef<'_>, group_id: &str) -> i16 {
        self.join_transaction(producer, |record| {
            if record.groups.contains_key(group_id) {
                return false;
            }
            record.groups.insert(group_id.to_string(), Vec::new());
            true
        })
    }

    /// TxnOffsetCommit: offsets wait in the transaction. The group must
    /// be part of it (AddOffsetsToTxn first). A stale epoch is
    /// INVALID_PRODUCER_EPOCH here, as Kafka's group coordinator answers.
    pub fn txn_offset_commit(
        &self,
        producer: ProducerRef<'_>,
        group_id: &str,
        offsets: &[PendingOffset],
    ) -> i16 {
        if let Some(code) = self.elsewhere(producer.transactional_id) {
            return code;
        }
        let producers = self.lock();
        let record = match self.checked(&producers, producer) {
            Ok(record) => record,
            Err(code) if code == ErrorCode::ProducerFenced.code() => {
                return ErrorCode::InvalidProducerEpoch.code()
            }
            Err(code) => return code,
        };
        if record.state != TxnState::Ongoing || !record.groups.contains_key(group_id) {
            return ErrorCode::InvalidTxnState.code();
        }
        let mut next = record.clone();
        let pending = next.groups.entry(group_id.to_string()).or_default();
        for offset in offsets {
            pending
                .retain(|p| (p.topic.as_str(), p.partition) != (&offset.topic, offset.partition));
            pending.push(offset.clone());
        }
        next.updated_ms = now_ms();
        match self.put(producers, producer.transactional_id, Some(next)) {
            (_, Ok(())) => ErrorCode::None.code(),
            (_, Err(code)) => code,
        }
    }

    /// Whether a transaction holds offsets for `group_id` on one of
    /// `partitions` (all of the group's if None) that are not yet
    /// committed: OffsetFetch with require_stable answers
    /// UNSTABLE_OFFSET_COMMIT for them.
    pub fn pending_offsets(&self, group_id: &str) -> BTreeSet<(String, i32)> {
        self.lock()
            .values()
            .filter(|record| record.state == TxnState::Ongoing || record.state.is_prepare())
            .filter_map(|record| record.groups.get(group_id))
            .flatten()
            .map(|offset| (offset.topic.clone(), offset.partition))
            .collect()
    }

    /// Whether producer `producer_id` at `producer_epoch` has an ongoing
    /// transaction that added this partition (produce verification).
    pub fn includes_partition(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
    ) -> bool {
        let wanted = TopicPartition::new(topic, partition);
        let producers = self.lock();
        let mut known = producers
            .values()
            .filter(|record| record.producer_id == producer_id)
            .peekable();
        if known.peek().is_none() && self.in_cluster() {
            // Coordinated by another broker: Kafka's partition leader asks
            // it (AddPartitionsToTxn, verify only); not done here yet, so
            // the batch is taken unverified.
            return true;
        }
        known.any(|record| {
            record.producer_epoch == producer_epoch
                && record.state == TxnState::Ongoing
                && record.partitions.contains(&wanted)
        })
    }

    /// EndTxn: commit or abort the ongoing transaction.
    pub fn end_txn(
        &self,
        effects: &dyn TxnEffects,
        producer: ProducerRef<'_>,
        commit: bool,
    ) -> i16 {
        if let Some(code) = self.elsewhere(producer.transactional_id) {
            return code;
        }
        let producers = self.lock();
        let record = match self.checked(&producers, producer) {
            Ok(record) => record,
            Err(code) => return code,
        };
        match (record.state, commit) {
            (TxnState::Ongoing, _) => {}
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                return ErrorCode::None.code();
            }
            _ => return ErrorCode::InvalidTxnState.code(),
        }
        let mut prepared = record.clone();
        prepared.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        prepared.updated_ms = now_ms();
        if let (_, Err(code)) =
            self.put(producers, producer.transactional_id, Some(prepared.clone()))
        {
            return code;
        }
        // Decided: from here the markers are retried until written, so the
        // producer may go on.
        self.complete(
            effects,
            self.completion_of(producer.transactional_id, &prepared),
        );
        ErrorCode::None.code()
    }

    /// Writes what is left of a prepared transaction's markers and
    /// offsets, then marks it complete. What fails for a reason other than
    /// a deleted partition is kept, and the transaction left prepared, for
    /// [`Self::finish_prepared`] to retry that alone. A call finding
    /// another one writing the same transaction leaves it to that one.
    fn complete(&self, effects: &dyn TxnEffects, completion: Completion) {
        let Some((claim, work)) = self.claim(completion) else {
            return;
        };
        let id = work.transactional_id.clone();
        let (producer_id, commit) = (work.producer_id, work.commit);
        let left = write_completion(effects, work, self.in_cluster());
        let done = left.is_done();
        if !self.release(claim, left) || !done {
            return;
        }
        let producers = self.lock();
        let prepared = producers
            .get(&id)
            .filter(|record| record.state.is_prepare() && record.producer_id == producer_id)
            .cloned();
        let Some(mut finished) = prepared else {
            // Completed or replaced meanwhile: nothing left to do for it.
            crate::sync::lock(&self.completing).remove(&id);
            return;
        };
        finished.enter(
            if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            },
            -1,
        );
        match self.put(producers, &id, Some(finished)) {
            (_records, Ok(())) => {
                // (Lock order: the records, then the completions.)
                crate::sync::lock(&self.completing).remove(&id);
            }
            (_, Err(code)) => tracing::warn!(
                error_code = code,
                "recording a completed transaction failed"
            ),
        }
    }

    /// The coordinator epoch of `transactional_id` here: the leader epoch
    /// of its `__transaction_state` partition on a cluster node (None when
    /// not led here), 0 on a single node.
    fn coordinator_epoch(&self, transactional_id: &str) -> Option<i32> {
        let Some(ownership) = self.ownership.as_ref() else {
            return Some(0);
        };
        let partition = self.log.partition_of(transactional_id)?;
        crate::sync::lock(ownership)
            .led
            .get(&partition)
            .map(|(epoch, _)| *epoch)
    }

    /// What a prepared `record` leaves to write, from this coordinator.
    fn completion_of(&self, transactional_id: &str, record: &TransactionalProducer) -> Completion {
        let coordinator_epoch = self.coordinator_epoch(transactional_id).unwrap_or(-1);
        completion_of(transactional_id, record, coordinator_epoch)
    }

    /// Takes on writing `completion`: what is left of it (all of it the
    /// first time, or when it is another decision than the one in
    /// progress) and the claim to release it with; None when another call
    /// is writing it now.
    fn claim(&self, completion: Completion) -> Option<(u64, Completion)> {
        if self.coordinator_epoch(&completion.transactional_id)
            != Some(completion.coordinator_epoch)
        {
            // Resigned or reloaded since: the new coordinator (or the new
            // load) completes it, as Kafka's channel manager drops the
            // markers of an older coordinator epoch.
            return None;
        }
        let claim = self.claims.fetch_add(1, Ordering::Relaxed) + 1;
        let mut completing = crate::sync::lock(&self.completing);
        match completing.get_mut(&completion.transactional_id) {
            Some(progress) if progress.left.same_transaction(&completion) => {
                if progress.running != 0 {
                    return None;
                }
                progress.running = claim;
                Some((claim, progress.left.clone()))
            }
            _ => {
                completing.insert(
                    completion.transactional_id.clone(),
                    InProgress {
                        left: completion.clone(),
                        running: claim,
                    },
                );
                Some((claim, completion))
            }
        }
    }

    /// Keeps what `claim` left to write; false when its transaction was
    /// dropped or replaced meanwhile (the partition resigned or reloaded).
    fn release(&self, claim: u64, left: Completion) -> bool {
        let mut completing = crate::sync::lock(&self.completing);
        match completing.get_mut(&left.transactional_id) {
            Some(progress) if progress.running == claim => {
                progress.left = left;
                progress.running = 0;
                true
            }
            _ => false,
        }
    }

    /// Finishes every prepared transaction (after a restart, or when
    /// markers failed).
    pub fn finish_prepared(&self, effects: &dyn TxnEffects) {
        let completions: Vec<Completion> = self
            .lock()
            .iter()
            .filter(|(_, record)| record.state.is_prepare())
            .map(|(id, record)| self.completion_of(id, record))
            .collect();
        for completion in completions {
            tracing::info!(transactional_id = %completion.transactional_id, commit = completion.commit, "finishing a prepared transaction");
            self.complete(effects, completion);
        }
    }

    /// Aborts transactions open for longer than their timeout, bumping the
    /// epoch so the producer is fenced (Kafka's
    /// `abortTimedOutTransactions`), and forgets ids idle for
    /// `id_expiration_ms`. Returns how many transactions were aborted.
    pub fn abort_timed_out(
        &self,
        effects: &dyn TxnEffects,
        now: i64,
        id_expiration_ms: i64,
    ) -> usize {
        let timed_out = |record: &TransactionalProducer| {
            record.state == TxnState::Ongoing
                && record.start_ms >= 0
                && now.saturating_sub(record.start_ms) > i64::from(record.timeout_ms)
        };
        let idle = |record: &TransactionalProducer| {
            matches!(
                record.state,
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            ) && now.saturating_sub(record.updated_ms) > id_expiration_ms
        };
        let mut completions = Vec::new();
        let mut producers = self.lock();
        for id in self.ids_where(&producers, timed_out) {
            // Each write may unlock the records: look again.
            let record = producers
                .get(&id)
                .filter(|record| timed_out(record) && !self.is_writing(&id))
                .cloned();
            let Some(record) = record else { continue };
            let mut aborting = record.clone();
            if record.producer_epoch < i16::MAX - 1 {
                aborting.last_producer_id = record.producer_id;
                aborting.last_producer_epoch = record.producer_epoch;
                aborting.producer_epoch = record.producer_epoch + 1;
            }
            aborting.state = TxnState::PrepareAbort;
            aborting.updated_ms = now;
            tracing::info!(transactional_id = %id, timeout_ms = record.timeout_ms, "aborting a timed-out transaction");
            let written;
            (producers, written) = self.put(producers, &id, Some(aborting.clone()));
            if written.is_ok() {
                completions.push(self.completion_of(&id, &aborting));
            }
        }
        for id in self.ids_where(&producers, idle) {
            if !producers.get(&id).is_some_and(idle) || self.is_writing(&id) {
                continue;
            }
            tracing::info!(transactional_id = %id, "transactional id expired");
            let written;
            (producers, written) = self.put(producers, &id, None);
            if let Err(code) = written {
                tracing::warn!(error_code = code, "forgetting a transactional id failed");
            }
        }
        drop(producers);
        let aborted = completions.len();
        for completion in completions {
            self.complete(effects, completion);
        }
        aborted
    }

    /// DescribeTransactions for one id: NOT_COORDINATOR (or
    /// COORDINATOR_LOAD_IN_PROGRESS) when it is not coordinated here,
    /// TRANSACTIONAL_ID_NOT_FOUND when it is not known.
    pub fn describe(&self, transactional_id: &str) -> Result<TxnDescription, i16> {
        if let Some(code) = self.elsewhere(transactional_id) {
            return Err(code);
        }
        self.lock()
            .get(transactional_id)
            .map(|record| TxnDescription {
                state: record.state,
                producer_id: record.producer_id,
                producer_epoch: record.producer_epoch,
                timeout_ms: record.timeout_ms,
                start_ms: record.start_ms,
                partitions: record.partitions.iter().cloned().collect(),
            })
            .ok_or(ErrorCode::TransactionalIdNotFound.code())
    }

    /// ListTransactions: (id, producer id, state) filtered by state names
    /// and producer ids (empty: any) and by running time (-1: any).
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
        now: i64,
    ) -> Vec<(String, i64, TxnState)> {
        self.lock()
            .iter()
            .filter(|(_, r)| states.is_empty() || states.iter().any(|s| s == r.state.name()))
            .filter(|(_, r)| producer_ids.is_empty() || producer_ids.contains(&r.producer_id))
            .filter(|(_, r)| {
                min_duration_ms < 0
                    || (r.start_ms >= 0 && now.saturating_sub(r.start_ms) >= min_duration_ms)
            })
            .map(|(id, r)| (id.clone(), r.producer_id, r.state))
            .collect()
    }

    /// Stores `id`'s record (None: forgets the id): the log first, then
    /// memory. On a cluster node the change then waits for the in-sync
    /// replicas with the records unlocked: the id is marked as writing
    /// meanwhile (Kafka's `pendingState`), so its own further changes are
    /// answered CONCURRENT_TRANSACTIONS while reads, produce verification
    /// and other ids go on. The change reaches memory once replicated, and
    /// only if this broker still coordinates the id at the same epoch.
    /// Returns the records locked again, with the error the change is
    /// answered with, mapped as Kafka's
    /// `TransactionStateManager.appendTransactionToLog` maps it.
    fn put<'a>(
        &'a self,
        mut producers: Records<'a>,
        id: &str,
        record: Option<TransactionalProducer>,
    ) -> (Records<'a>, Result<(), i16>) {
        let appended = self.log.append(id, record.as_ref()).map_err(|error| {
            tracing::error!("persisting transaction state failed: {error}");
            if self.in_cluster() {
                ErrorCode::NotCoordinator.code()
            } else {
                ErrorCode::KafkaStorageError.code()
            }
        });
        let (partition, end) = match appended {
            Ok(at) => at,
            Err(code) => return (producers, Err(code)),
        };
        if let Some(replication) = self.replication.get() {
            let epoch = self.coordinator_epoch(id);
            *crate::sync::lock(&self.writing)
                .entry(id.to_string())
                .or_default() += 1;
            drop(producers);
            let code = replication.wait(partition, end);
            producers = self.lock();
            let mut writing = crate::sync::lock(&self.writing);
            if let Some(count) = writing.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    writing.remove(id);
                }
            }
            drop(writing);
            if code != ErrorCode::None.code() {
                tracing::warn!(
                    transactional_id = id,
                    partition,
                    error_code = code,
                    "a transaction state change was not replicated in time"
                );
                return (producers, Err(append_error(code)));
            }
            if self.coordinator_epoch(id) != epoch {
                // Resigned or reloaded meanwhile: the log is the new
                // coordinator's to read, memory no longer holds this id.
                return (producers, Err(ErrorCode::NotCoordinator.code()));
            }
        }
        match record {
            Some(record) => producers.insert(id.to_string(), record),
            None => producers.remove(id),
        };
        (producers, Ok(()))
    }

    /// The ids whose records are `wanted` and that no change is writing.
    fn ids_where(
        &self,
        producers: &BTreeMap<String, TransactionalProducer>,
        wanted: impl Fn(&TransactionalProducer) -> bool,
    ) -> Vec<String> {
        producers
            .iter()
            .filter(|(id, record)| wanted(record) && !self.is_writing(id))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether a change of `id` waits for the in-sync replicas (asked with
    /// the records locked).
    fn is_writing(&self, id: &str) -> bool {
        crate::sync::lock(&self.writing).contains_key(id)
    }
}

/// Kafka's mapping of a failed `__transaction_state` write (already
/// mapped once as the group coordinator's commits are) to the answer.
fn append_error(code: i16) -> i16 {
    if code == ErrorCode::CoordinatorNotAvailable.code() || code == ErrorCode::NotCoordinator.code()
    {
        code
    } else {
        ErrorCode::UnknownServerError.code()
    }
}

/// What a prepared `record` of `transactional_id` leaves to write, by
/// the coordinator at `coordinator_epoch`.
fn completion_of(
    transactional_id: &str,
    record: &TransactionalProducer,
    coordinator_epoch: i32,
) -> Completion {
    let commit = record.state == TxnState::PrepareCommit;
    Completion {
        transactional_id: transactional_id.to_string(),
        producer_id: record.producer_id,
        producer_epoch: record.producer_epoch,
        commit,
        coordinator_epoch,
        partitions: record.partitions.clone(),
        groups_to_end: record.groups.keys().cloned().collect(),
        offsets: record
            .groups
            .iter()
            .filter(|(_, offsets)| commit && !offsets.is_empty())
            .map(|(group, offsets)| (group.clone(), offsets.clone()))
            .collect(),
    }
}

/// A marker's answer that leaves nothing to write: written, the partition
/// is gone, a newer epoch has fenced the producer there, or a newer
/// coordinator has written there (this one is a zombie: as Kafka's
/// marker channel, it stops sending the transaction's markers).
fn marker_done(code: i16) -> bool {
    [
        ErrorCode::None,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::TransactionCoordinatorFenced,
    ]
    .iter()
    .any(|done| done.code() == code)
}

/// Writes `work`'s markers, group ends (`in_cluster`: the groups'
/// coordinators end the transaction) and offsets; what is left, the
/// failed ones.
fn write_completion(
    effects: &dyn TxnEffects,
    mut work: Completion,
    in_cluster: bool,
) -> Completion {
    let id = work.transactional_id.clone();
    let (producer_id, epoch, commit) = (work.producer_id, work.producer_epoch, work.commit);
    let coordinator_epoch = work.coordinator_epoch;
    work.partitions.retain(|partition| {
        let code = effects.write_marker(partition, producer_id, epoch, commit, coordinator_epoch);
        if marker_done(code) {
            return false;
        }
        tracing::warn!(
            transactional_id = %id,
            topic = %partition.topic,
            partition = partition.partition,
            error_code = code,
            "writing a transaction marker failed; will retry"
        );
        true
    });
    if in_cluster {
        work.groups_to_end.retain(|group| {
            let code =
                effects.complete_group(group, producer_id, epoch, commit, coordinator_epoch);
            if code == ErrorCode::None.code() || code == ErrorCode::UnknownTopicOrPartition.code() {
                return false;
            }
            tracing::warn!(transactional_id = %id, group = %group, error_code = code, "ending a transaction at its group's coordinator failed; will retry");
            true
        });
    } else {
        work.groups_to_end.clear();
    }
    work.offsets.retain(|group, offsets| {
        let code = effects.commit_offsets(group, offsets);
        if code == ErrorCode::None.code() {
            return false;
        }
        tracing::warn!(transactional_id = %id, group = %group, error_code = code, "committing transactional offsets failed; will retry");
        true
    });
    work
}

/// The next epoch of a record, or a new producer id at epoch 0 when the
/// epoch is exhausted.
fn bumped(
    record: &TransactionalProducer,
    ids: &ProducerIdManager,
) -> Result<TransactionalProducer> {
    let (producer_id, producer_epoch) = if record.producer_epoch >= i16::MAX - 1 {
        (ids.allocate()?, 0)
    } else {
        (record.producer_id, record.producer_epoch + 1)
    };
    Ok(TransactionalProducer {
        producer_id,
        producer_epoch,
        last_producer_id: record.producer_id,
        last_producer_epoch: record.producer_epoch,
        ..record.clone()
    })
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
