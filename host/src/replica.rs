//! The ReplicaManager of Gregor: what KafkaApis asks of the partition logs.
//! Appends go to the log store and wake waiting fetches; a fetch reads the
//! partitions in request order and, when fewer than `min_bytes` are
//! available, waits for an append or for `max_wait_ms` (Kafka's fetch
//! purgatory) as an async wait that suspends only the calling guest.
//! Appends that carry a producer id pass the idempotent-producer checks
//! first (`log::producer_state`), atomically with the write. The same state
//! gives each partition its last stable offset and aborted transactions,
//! which read_committed fetches are cut to; transaction markers are
//! appended here for the coordinator.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::error_code::ErrorCode;
use crate::log::file_records::Records;
use crate::log::producer_state::{self, AbortedTxn, ProducerBatch, ProducerStateMap, Verdict};
use crate::log::{control, validate};
use crate::log::{LogStore, PartitionOffsets, ReadResult, StorageError, TopicPartition};
use crate::metadata::view::Leadership;
use crate::metrics::Metrics;
use crate::purgatory::FetchPurgatory;

/// How long a marker's write waits for the ISR (Kafka waits up to its
/// `request.timeout.ms`; this stays below the sending coordinator's socket
/// timeout, so a slow ISR is answered REQUEST_TIMED_OUT and retried, not
/// taken for a dead broker).
pub const MARKER_REPLICATION_TIMEOUT: Duration = Duration::from_secs(15);

/// One transaction marker to write: the partition, the producer whose
/// transaction it ends, how, and the coordinator's epoch.
#[derive(Debug, Clone, Copy)]
pub struct MarkerWrite<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// The records refused for their own content (KIP-467), with
    /// INVALID_RECORD; empty otherwise.
    pub record_errors: Vec<validate::RecordError>,
    /// The log end offset right after the write (what acks=all waits
    /// for the ISR to reach); -1 on error.
    pub end_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub topic: String,
    pub partition: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
    /// A follower's view (KIP-320, KIP-595): the leader epoch it fetches
    /// in, and the epoch of its last fetched batch; -1 for consumers.
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct FetchOptions {
    pub max_wait: Duration,
    pub min_bytes: usize,
    pub max_bytes: usize,
    /// read_committed: stop at the last stable offset and list the
    /// aborted transactions.
    pub read_committed: bool,
    /// The follower fetching (its broker id), or -1 for a consumer. A
    /// follower reads up to the log end offset, a consumer up to the high
    /// watermark.
    pub replica_id: i32,
    /// A shadow version's fetch (`plugins::imports::dry_run`): a
    /// follower's fetch reads what it would, but the leader records
    /// nothing of it (the follower's position, its caught-up time, the
    /// ISR and the high watermark stay as they are).
    pub dry_run: bool,
}

impl FetchOptions {
    fn is_replica_fetch(&self) -> bool {
        self.replica_id >= 0
    }
}

#[derive(Debug, Clone)]
pub struct FetchedPartition {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Whole batches, in the segment file until the response is written.
    pub records: Records,
    /// read_committed only: aborted transactions overlapping `records`.
    pub aborted_transactions: Vec<AbortedTxn>,
    /// A follower's fetch whose last fetched epoch ends before its fetch
    /// offset here (KIP-320): the epoch and its end offset, to truncate
    /// to; no records then.
    pub diverging_epoch: Option<(i32, i64)>,
}

/// A consumer's read once cut to what it may see.
struct ConsumerRead {
    records: Records,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// read_committed with records: the offset after them, up to which
    /// aborted transactions are listed.
    aborted_until: Option<i64>,
}

/// One producer in a DescribeProducers answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction, -1 if none.
    pub current_txn_start_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAnswer {
    pub error_code: i16,
    pub offset: i64,
    pub timestamp: i64,
}

pub struct ReplicaManager {
    logs: Arc<dyn LogStore>,
    /// Broker-side cap on a fetch response (`fetch.max.bytes`).
    fetch_max_bytes: usize,
    /// Fetches waiting for appends (and, in a cluster, for the high
    /// watermark to move), by partition.
    purgatory: Arc<FetchPurgatory>,
    metrics: Arc<Metrics>,
    /// Idempotent-producer state per partition; a partition's lock is held
    /// across the sequence check and the append.
    producers: Mutex<HashMap<TopicPartition, Arc<Mutex<ProducerStateMap>>>>,
    /// `producer.id.expiration.ms`.
    producer_expiration_ms: AtomicI64,
    /// In a cluster, which partitions this broker leads; unset on a
    /// single node, which leads them all (and checks nothing).
    leadership: OnceLock<Arc<dyn Leadership>>,
    /// In a cluster, the leader side of replication: the high watermark
    /// and the followers. Unset on a single node, whose high watermark is
    /// its log end offset.
    replication: OnceLock<Arc<dyn PartitionReplication>>,
    /// The leader-epoch lookup for followers' diverging epochs.
    epochs: OnceLock<Arc<dyn EpochEnds>>,
}

/// The leader side of replication as the ReplicaManager sees it (in a
/// cluster, `cluster::replication::leader` implements it): the high
/// watermark, the ISR that acks=all waits for, and followers' fetches.
/// A trait of the ReplicaManager's own so the log path does not name the
/// cluster that sits above it.
pub trait PartitionReplication: Send + Sync {
    /// This broker now leads `tp` after following it with `high_watermark`.
    fn seed_high_watermark(&self, tp: &TopicPartition, high_watermark: i64);
    /// The high watermark consumers read up to; None when not the leader.
    fn high_watermark(&self, tp: &TopicPartition) -> Option<i64>;
    /// The committed ISR's size; None when not the leader.
    fn isr_size(&self, tp: &TopicPartition) -> Option<usize>;
    /// The topic's `min.insync.replicas`.
    fn min_insync_replicas(&self, topic: &str) -> usize;
    /// The leader epoch of a partition this broker leads.
    fn leader_epoch(&self, tp: &TopicPartition) -> Option<i32>;
    /// A follower `replica` fetched at `fetch_offset` (its log end offset).
    fn follower_fetched(
        &self,
        tp: &TopicPartition,
        replica: i32,
        fetch_offset: i64,
    ) -> Result<FollowerFetch, ErrorCode>;
    /// What `follower_fetched` would answer `replica`, recording nothing:
    /// a shadow's dry run of a follower's fetch.
    fn follower_view(&self, tp: &TopicPartition, replica: i32) -> Result<FollowerFetch, ErrorCode>;
    /// Whether an acks=all write of `[.., required)` must wait for the ISR.
    fn must_wait(&self, tp: &TopicPartition, required: i64) -> bool;
    /// acks=all: waits until every ISR member has `[.., required)` or
    /// `timeout` passes; the error the produce is answered with.
    fn await_replicated<'a>(
        &'a self,
        tp: &'a TopicPartition,
        required: i64,
        min_isr: usize,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = ErrorCode> + Send + 'a>>;
}

/// What a follower's fetch learns from the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    pub high_watermark: i64,
}

/// The end offset of a leader epoch in a partition's log (Kafka's
/// `LeaderEpochFileCache.endOffsetFor`): the largest epoch at or below
/// `epoch` and the first offset after it; None when unknown.
pub trait EpochEnds: Send + Sync {
    fn end_offset_for(&self, tp: &TopicPartition, epoch: i32) -> Option<(i32, i64)>;
}

impl ReplicaManager {
    pub fn new(logs: Arc<dyn LogStore>, metrics: Arc<Metrics>, fetch_max_bytes: usize) -> Self {
        Self {
            logs,
            fetch_max_bytes,
            purgatory: Arc::default(),
            metrics,
            producers: Mutex::new(HashMap::new()),
            producer_expiration_ms: AtomicI64::new(producer_state::DEFAULT_EXPIRATION_MS),
            leadership: OnceLock::new(),
            replication: OnceLock::new(),
            epochs: OnceLock::new(),
        }
    }

    /// The waiting fetches, shared with the replication that wakes them
    /// when the high watermark moves.
    pub fn purgatory(&self) -> Arc<FetchPurgatory> {
        Arc::clone(&self.purgatory)
    }

    /// From now on the high watermark is the ISR's, and followers' fetches
    /// are tracked. Set once; a second call is ignored.
    pub fn set_replication(&self, replication: Arc<dyn PartitionReplication>) {
        let _ = self.replication.set(replication);
    }

    /// This broker now leads `tp`, whose high watermark it had as a
    /// follower (see `PartitionReplication::seed_high_watermark`).
    pub fn seed_high_watermark(&self, tp: &TopicPartition, high_watermark: i64) {
        if let Some(replication) = self.replication.get() {
            replication.seed_high_watermark(tp, high_watermark);
        }
    }

    /// Where followers' diverging epochs are looked up. Set once.
    pub fn set_epoch_ends(&self, epochs: Arc<dyn EpochEnds>) {
        let _ = self.epochs.set(epochs);
    }

    /// What a consumer may read up to: the log end offset on a single
    /// node, the ISR's high watermark in a cluster.
    fn committed_end(&self, tp: &TopicPartition, offsets: PartitionOffsets) -> i64 {
        match self.replication.get() {
            None => offsets.high_watermark,
            Some(replication) => replication
                .high_watermark(tp)
                .map_or(offsets.high_watermark, |hw| hw.min(offsets.high_watermark)),
        }
    }

    /// From now on, partitions `leadership` says this broker does not
    /// lead are answered NOT_LEADER_OR_FOLLOWER (Produce, consumer Fetch,
    /// ListOffsets, OffsetForLeaderEpoch, DeleteRecords all come here).
    /// Set once; a second call is ignored.
    pub fn set_leadership(&self, leadership: Arc<dyn Leadership>) {
        let _ = self.leadership.set(leadership);
    }

    /// Whether a client must be sent to the partition's leader: this
    /// broker does not lead it, or leads it in an epoch its log has not
    /// entered yet (Kafka's `makeLeader` has not run). Until then an append
    /// would be stamped with an older epoch, and a former leader's tail in
    /// that epoch could never be told apart from it (its divergence would
    /// go unnoticed and both logs would keep different records).
    fn not_leader(&self, topic: &str, partition: i32) -> bool {
        let Some(leadership) = self.leadership.get() else {
            return false;
        };
        if !leadership.leads(topic, partition) {
            return true;
        }
        let Some(replication) = self.replication.get() else {
            return false;
        };
        let tp = TopicPartition::new(topic, partition);
        match (replication.leader_epoch(&tp), self.logs.leader_epoch(&tp)) {
            (Some(led), Ok(stamped)) => led != stamped,
            _ => false,
        }
    }

    /// Sets `producer.id.expiration.ms`: how long a partition remembers an
    /// idle idempotent producer.
    pub fn with_producer_id_expiration_ms(self, expiration_ms: i64) -> Self {
        self.producer_expiration_ms
            .store(expiration_ms, Ordering::Relaxed);
        self
    }

    /// Appends one partition's batches. On a single node acks=1 and
    /// acks=-1 are both satisfied once the write is in the log.
    ///
    /// A transactional batch that would open a transaction in this
    /// partition must belong to an ongoing transaction that has added the
    /// partition (`in_transaction(producer id, epoch)`), else
    /// INVALID_TXN_STATE: Kafka's partition verification (KIP-890), which
    /// keeps a zombie or a buggy producer from leaving a transaction open
    /// in a partition its coordinator does not know of.
    pub fn append(
        &self,
        topic: &str,
        partition: i32,
        records: &[u8],
        acks: i16,
        in_transaction: &dyn Fn(i64, i16) -> bool,
    ) -> AppendOutcome {
        if !matches!(acks, -1..=1) {
            return AppendOutcome::failed(ErrorCode::InvalidRequiredAcks.code(), None);
        }
        if self.not_leader(topic, partition) {
            return AppendOutcome::failed(ErrorCode::NotLeaderOrFollower.code(), None);
        }
        if acks == -1 {
            if let Some(refused) = self.too_few_in_sync(topic, partition) {
                return refused;
            }
        }
        // Kafka's LogValidator for AppendOrigin.CLIENT: no control batches
        // (only the coordinator writes markers), producer ids with sequences.
        if let Err(error) = validate::client_batches(records) {
            self.metrics.record_produce(topic, 0, 0, true);
            return AppendOutcome::refused(&error);
        }
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        let batches = producer_state::producer_batches(records)
            .filter(|batches| batches.iter().any(ProducerBatch::has_producer));
        let Some(mut batches) = batches else {
            return self.append_to_log(&tp, records);
        };
        let state = self.producer_state(&tp);
        let mut state = crate::sync::lock(&state);
        if let Err(error) = self.load_producer_state(&tp, &mut state) {
            self.metrics.record_produce(topic, 0, 0, true);
            return AppendOutcome::refused(&error);
        }
        let now = now_ms();
        state.expire(now, self.producer_expiration_ms.load(Ordering::Relaxed));
        match state.check(&batches) {
            Ok(Verdict::Append) => {}
            Ok(Verdict::Duplicate(original)) => {
                // Kafka's DUPLICATE: success with the original offsets. Its
                // end is the original batch's, so acks=all still waits until
                // the ISR has that batch (the first try may have timed out
                // before it did).
                let log_start_offset = self
                    .logs
                    .offsets(&tp)
                    .map_or(-1, |offsets| offsets.log_start_offset);
                let end_offset = original.last_offset.saturating_add(1);
                return AppendOutcome {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    base_offset: original.first_offset,
                    log_append_time_ms: -1,
                    log_start_offset,
                    record_errors: Vec::new(),
                    end_offset,
                };
            }
            Err(error) => {
                self.metrics.record_produce(topic, 0, 0, true);
                return AppendOutcome::failed(error.error_code, Some(error.message));
            }
        }
        let unverified = batches.iter().find(|batch| {
            batch.transactional
                && !state
                    .producers()
                    .get(&batch.producer_id)
                    .is_some_and(|entry| {
                        entry.epoch == batch.producer_epoch && entry.txn_first_offset.is_some()
                    })
                && !in_transaction(batch.producer_id, batch.producer_epoch)
        });
        if let Some(batch) = unverified {
            self.metrics.record_produce(topic, 0, 0, true);
            return AppendOutcome::failed(
                ErrorCode::InvalidTxnState.code(),
                Some(format!(
                    "producer {} epoch {} has no ongoing transaction with {topic}-{partition}",
                    batch.producer_id, batch.producer_epoch
                )),
            );
        }
        let outcome = self.append_to_log(&tp, records);
        if outcome.error_code == ErrorCode::None.code() {
            let mut next = outcome.base_offset;
            for batch in &mut batches {
                batch.base_offset = next;
                next = next.saturating_add(i64::from(batch.last_offset_delta) + 1);
            }
            state.record(&batches);
            state.end_offset = next;
        }
        outcome
    }

    /// acks=all: appends, then waits until every ISR member has the write
    /// (the high watermark passed it) or `timeout` passes (Kafka's
    /// DelayedProduce), as an async wait that suspends only the caller. On
    /// a single node, or a leader alone in its ISR, the write is the
    /// commit and nothing waits. Other acks answer after the write.
    pub async fn append_acked(
        &self,
        topic: &str,
        partition: i32,
        records: &[u8],
        acks: i16,
        timeout: Duration,
        in_transaction: &(dyn Fn(i64, i16) -> bool + Sync),
    ) -> AppendOutcome {
        let mut outcome = self.append(topic, partition, records, acks, in_transaction);
        let Some(replication) = self.replication.get() else {
            return outcome;
        };
        if acks != -1 || outcome.error_code != ErrorCode::None.code() {
            return outcome;
        }
        let tp = TopicPartition::new(topic, partition);
        if !replication.must_wait(&tp, outcome.end_offset) {
            return outcome;
        }
        let min_isr = replication.min_insync_replicas(topic);
        let code = replication
            .await_replicated(&tp, outcome.end_offset, min_isr, timeout)
            .await;
        if code != ErrorCode::None {
            outcome.error_code = code.code();
            outcome.error_message = Some(match code {
                ErrorCode::RequestTimedOut => format!(
                    "the in-sync replicas of {tp} did not all have the write within {} ms",
                    timeout.as_millis()
                ),
                ErrorCode::NotEnoughReplicasAfterAppend => format!(
                    "the in-sync replicas of {tp} shrank below min.insync.replicas={min_isr} \
                     while the write waited for them"
                ),
                _ => format!("{tp} is no longer led here"),
            });
        }
        outcome
    }

    /// Kafka's check before an acks=all append: NOT_ENOUGH_REPLICAS when
    /// the ISR is smaller than the topic's `min.insync.replicas`.
    fn too_few_in_sync(&self, topic: &str, partition: i32) -> Option<AppendOutcome> {
        let replication = self.replication.get()?;
        let tp = TopicPartition::new(topic, partition);
        let isr = replication.isr_size(&tp)?;
        let min_isr = replication.min_insync_replicas(topic);
        (isr < min_isr).then(|| {
            self.metrics.record_produce(topic, 0, 0, true);
            AppendOutcome::failed(
                ErrorCode::NotEnoughReplicas.code(),
                Some(format!(
                    "the ISR of {tp} has {isr} replicas, fewer than min.insync.replicas={min_isr}"
                )),
            )
        })
    }

    /// The idempotent producers a partition holds state for
    /// (DescribeProducers): id, epoch, last sequence and last timestamp.
    pub fn active_producers(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ActiveProducer>, StorageError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.producer_state(&tp);
        let mut state = crate::sync::lock(&state);
        self.load_producer_state(&tp, &mut state)?;
        let mut producers: Vec<ActiveProducer> = state
            .producers()
            .iter()
            .map(|(id, entry)| ActiveProducer {
                producer_id: *id,
                producer_epoch: entry.epoch,
                last_sequence: entry.last_sequence(),
                last_timestamp: entry.last_timestamp,
                current_txn_start_offset: entry.txn_first_offset.unwrap_or(-1),
            })
            .collect();
        producers.sort_by_key(|producer| producer.producer_id);
        Ok(producers)
    }

    /// [`Self::write_marker`] as Kafka's WriteTxnMarkers appends it, with
    /// acks=all: NOT_ENOUGH_REPLICAS before the write when the ISR is below
    /// `min.insync.replicas`, and after it a wait until every ISR member
    /// has the marker, up to `timeout` (REQUEST_TIMED_OUT then, and the
    /// coordinator writes it again). A marker only the leader had would go
    /// with it, and the transaction would stay open on the partition's
    /// next leader, holding its last stable offset back for good.
    pub async fn write_marker_acked(&self, marker: MarkerWrite<'_>, timeout: Duration) -> i16 {
        let tp = TopicPartition::new(marker.topic, marker.partition);
        if let Some(replication) = self.replication.get() {
            let min_isr = replication.min_insync_replicas(marker.topic);
            if replication.isr_size(&tp).is_some_and(|isr| isr < min_isr) {
                return ErrorCode::NotEnoughReplicas.code();
            }
        }
        let end = match self.append_marker(&marker) {
            Ok(end) => end,
            Err(code) => return code,
        };
        let Some(replication) = self.replication.get() else {
            return ErrorCode::None.code();
        };
        if !replication.must_wait(&tp, end) {
            return ErrorCode::None.code();
        }
        let min_isr = replication.min_insync_replicas(marker.topic);
        replication
            .await_replicated(&tp, end, min_isr, timeout)
            .await
            .code()
    }

    /// Appends a commit or abort marker for a producer (what the
    /// coordinator does at EndTxn, and WriteTxnMarkers). A marker from an
    /// epoch older than the producer's current one is refused
    /// (INVALID_PRODUCER_EPOCH), as Kafka's `checkProducerEpoch`, and one
    /// from a coordinator older than the one that wrote the producer's
    /// last marker here (TRANSACTION_COORDINATOR_FENCED: a zombie
    /// coordinator of its transactional id), as `checkCoordinatorEpoch`.
    pub fn write_marker(&self, marker: &MarkerWrite<'_>) -> i16 {
        match self.append_marker(marker) {
            Ok(_) => ErrorCode::None.code(),
            Err(code) => code,
        }
    }

    /// The marker's write: the log end offset after it, or the error code.
    fn append_marker(&self, marker: &MarkerWrite<'_>) -> Result<i64, i16> {
        let MarkerWrite {
            topic,
            partition,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        } = *marker;
        // Only the leader writes: a marker on a follower's log would put a
        // batch there the leader never had.
        if self.not_leader(topic, partition) {
            return Err(ErrorCode::NotLeaderOrFollower.code());
        }
        let tp = TopicPartition::new(topic, partition);
        let state = self.producer_state(&tp);
        let mut state = crate::sync::lock(&state);
        if let Err(error) = self.load_producer_state(&tp, &mut state) {
            return Err(error.error_code());
        }
        if let Some(entry) = state.producers().get(&producer_id) {
            if producer_epoch < entry.epoch {
                return Err(ErrorCode::InvalidProducerEpoch.code());
            }
            if coordinator_epoch < entry.coordinator_epoch {
                tracing::info!(
                    topic,
                    partition,
                    producer_id,
                    coordinator_epoch,
                    current = entry.coordinator_epoch,
                    "refused a marker from a fenced transaction coordinator"
                );
                return Err(ErrorCode::TransactionCoordinatorFenced.code());
            }
        }
        let marker = control::end_transaction_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            now_ms(),
        );
        let outcome = self.append_to_log(&tp, &marker);
        if outcome.error_code != ErrorCode::None.code() {
            return Err(outcome.error_code);
        }
        if let Some(mut batches) = producer_state::producer_batches(&marker) {
            for batch in &mut batches {
                batch.base_offset = outcome.base_offset;
            }
            state.record(&batches);
            state.end_offset = outcome.base_offset.saturating_add(1);
        }
        Ok(outcome.end_offset)
    }

    /// The partition's last stable offset, with the high watermark it was
    /// taken against (both under the producer lock, so no transactional
    /// append slips between them).
    fn last_stable_offset(&self, tp: &TopicPartition) -> Result<i64, StorageError> {
        let state = self.producer_state(tp);
        let mut state = crate::sync::lock(&state);
        let offsets = self.load_producer_state(tp, &mut state)?;
        state.prune_aborted(offsets.log_start_offset);
        let high_watermark = self.committed_end(tp, offsets);
        Ok(state
            .first_unstable_offset()
            .map_or(high_watermark, |first| first.min(high_watermark)))
    }

    /// The aborted transactions of a partition overlapping `[from, to)`.
    fn aborted_between(&self, tp: &TopicPartition, from: i64, to: i64) -> Vec<AbortedTxn> {
        let state = self.producer_state(tp);
        let state = crate::sync::lock(&state);
        state.aborted_between(from, to)
    }

    /// The producer state of a partition (created empty, not yet loaded).
    fn producer_state(&self, tp: &TopicPartition) -> Arc<Mutex<ProducerStateMap>> {
        let mut all = crate::sync::lock(&self.producers);
        Arc::clone(all.entry(tp.clone()).or_default())
    }

    /// Rebuilds a partition's producer state from its batch headers the
    /// first time it is needed, and again if the log is shorter than the
    /// state remembers (the topic was deleted and created again). Returns
    /// the offsets it checked against, read under the producer lock.
    fn load_producer_state(
        &self,
        tp: &TopicPartition,
        state: &mut ProducerStateMap,
    ) -> Result<PartitionOffsets, StorageError> {
        let offsets = self.logs.offsets(tp)?;
        if state.loaded && offsets.high_watermark >= state.end_offset {
            return Ok(offsets);
        }
        *state = ProducerStateMap::default();
        let mut next = offsets.log_start_offset;
        while next < offsets.high_watermark {
            // Only the batch headers are read, a few MiB of log at a time.
            let read = self.logs.read_records(tp, next, 8 << 20, true)?;
            let batches = read.records.producer_batches()?;
            let Some(last) = batches.last() else {
                break;
            };
            let after = last
                .base_offset
                .saturating_add(i64::from(last.last_offset_delta) + 1);
            if after <= next {
                break;
            }
            state.record(&batches);
            next = after;
        }
        state.loaded = true;
        state.end_offset = offsets.high_watermark;
        Ok(offsets)
    }

    /// The append itself, counted into the topic metrics.
    fn append_to_log(&self, tp: &TopicPartition, records: &[u8]) -> AppendOutcome {
        let topic = tp.topic.as_str();
        match self.logs.append(tp, records, now_ms()) {
            Ok(info) => {
                self.purgatory.appended(tp);
                self.metrics
                    .record_produce(topic, info.bytes, info.record_count, false);
                AppendOutcome {
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                    base_offset: info.base_offset,
                    log_append_time_ms: info.log_append_time_ms,
                    log_start_offset: info.log_start_offset,
                    record_errors: Vec::new(),
                    end_offset: info.last_offset.saturating_add(1),
                }
            }
            Err(error) => {
                self.metrics.record_produce(topic, 0, 0, true);
                if let StorageError::Io(io) = &error {
                    warn_disk_failure(tp, io);
                }
                AppendOutcome::refused(&error)
            }
        }
    }

    /// Reads the partitions, waiting for `min_bytes` up to `max_wait`.
    pub async fn fetch(
        &self,
        partitions: &[FetchPartition],
        mut options: FetchOptions,
    ) -> Vec<FetchedPartition> {
        options.max_bytes = options.max_bytes.min(self.fetch_max_bytes);
        let deadline = Instant::now() + options.max_wait;
        // Registered before the first read so an append between a read and
        // the wait is not missed.
        let watch = self.purgatory.watch(
            partitions
                .iter()
                .map(|p| TopicPartition {
                    topic: p.topic.clone(),
                    partition: p.partition,
                })
                .collect(),
        );
        loop {
            let results = self.read_all(partitions, options);
            if Self::satisfied(&results, options) || Instant::now() >= deadline {
                return self.counted(results);
            }
            tokio::select! {
                _ = watch.appended() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return self.counted(self.read_all(partitions, options));
                }
            }
        }
    }

    /// The fetch's answer if it needs no wait: `min_bytes` are there, a
    /// partition failed, or the fetch may not wait. None when it must
    /// wait (nothing is counted then).
    pub fn fetch_now(
        &self,
        partitions: &[FetchPartition],
        mut options: FetchOptions,
    ) -> Option<Vec<FetchedPartition>> {
        options.max_bytes = options.max_bytes.min(self.fetch_max_bytes);
        let results = self.read_all(partitions, options);
        (Self::satisfied(&results, options) || options.max_wait.is_zero())
            .then(|| self.counted(results))
    }

    fn satisfied(results: &[FetchedPartition], options: FetchOptions) -> bool {
        let bytes: usize = results.iter().map(|result| result.records.len()).sum();
        bytes >= options.min_bytes
            || results.iter().any(|result| {
                result.error_code != ErrorCode::None.code() || result.diverging_epoch.is_some()
            })
    }

    /// Counts what a fetch returns into the topic metrics.
    fn counted(&self, results: Vec<FetchedPartition>) -> Vec<FetchedPartition> {
        for result in &results {
            self.metrics.record_fetch(
                &result.topic,
                result.records.len(),
                result.error_code != ErrorCode::None.code(),
            );
        }
        results
    }

    /// One pass over the partitions with Kafka's byte limits: the response
    /// stops growing at `max_bytes`, but the first batch of the response is
    /// always whole so that a consumer makes progress (KIP-74).
    /// A consumer reads up to the high watermark, read_committed up to the
    /// last stable offset; a follower reads up to the log end offset.
    fn read_all(
        &self,
        partitions: &[FetchPartition],
        options: FetchOptions,
    ) -> Vec<FetchedPartition> {
        let mut remaining = options.max_bytes;
        let mut first_data = true;
        partitions
            .iter()
            .map(|request| {
                let limit = usize::try_from(request.partition_max_bytes.max(0))
                    .unwrap_or(0)
                    .min(remaining);
                let fetched = if options.is_replica_fetch() {
                    self.read_for_replica(request, options, limit, first_data)
                } else {
                    self.read_for_consumer(request, options.read_committed, limit, first_data)
                };
                if !fetched.records.is_empty() {
                    first_data = false;
                    remaining = remaining.saturating_sub(fetched.records.len());
                }
                fetched
            })
            .collect()
    }

    fn read_for_consumer(
        &self,
        request: &FetchPartition,
        read_committed: bool,
        limit: usize,
        first_data: bool,
    ) -> FetchedPartition {
        let tp = TopicPartition::new(&request.topic, request.partition);
        let mut fetched = FetchedPartition::empty(request);
        if self.not_leader(&request.topic, request.partition) {
            fetched.error_code = ErrorCode::NotLeaderOrFollower.code();
            return fetched;
        }
        // Taken before the read: the records read may only grow past it,
        // never hide a transaction opened since.
        let stable = self.last_stable_offset(&tp);
        let read = self
            .logs
            .read_records(&tp, request.fetch_offset, limit, first_data)
            .and_then(|read| {
                self.cut_for_consumer(&tp, read, stable.as_ref().ok().copied(), read_committed)
            });
        match read {
            Ok(cut) => {
                fetched.high_watermark = cut.high_watermark;
                fetched.last_stable_offset = cut.last_stable_offset;
                fetched.log_start_offset = cut.log_start_offset;
                fetched.records = cut.records;
                if let Some(end) = cut.aborted_until {
                    fetched.aborted_transactions =
                        self.aborted_between(&tp, request.fetch_offset, end);
                }
            }
            Err(error) => {
                fetched.error_code = error.error_code();
                if let Ok(offsets) = self.logs.offsets(&tp) {
                    let high_watermark = self.committed_end(&tp, offsets);
                    fetched.high_watermark = high_watermark;
                    fetched.last_stable_offset = stable.unwrap_or(high_watermark);
                    fetched.log_start_offset = offsets.log_start_offset;
                }
            }
        }
        fetched
    }

    /// A consumer's read cut where it may see: nothing above the high
    /// watermark leaves the leader, and read_committed stops at the last
    /// stable offset (`stable`, taken before the read).
    fn cut_for_consumer(
        &self,
        tp: &TopicPartition,
        read: ReadResult<Records>,
        stable: Option<i64>,
        read_committed: bool,
    ) -> Result<ConsumerRead, StorageError> {
        let offsets = PartitionOffsets {
            log_start_offset: read.log_start_offset,
            high_watermark: read.high_watermark,
        };
        let high_watermark = self.committed_end(tp, offsets);
        let last_stable_offset = stable.unwrap_or(high_watermark).min(high_watermark);
        // One cut: the last stable offset is never above the high
        // watermark, so read_committed's cut includes the other.
        let cut_at = if read_committed {
            Some(last_stable_offset)
        } else {
            (high_watermark < read.high_watermark).then_some(high_watermark)
        };
        let mut records = read.records;
        let mut aborted_until = None;
        if let Some(end) = cut_at {
            let next = records.keep_batches_before(end)?;
            if read_committed && !records.is_empty() {
                aborted_until = Some(next);
            }
        }
        Ok(ConsumerRead {
            records,
            high_watermark,
            last_stable_offset,
            log_start_offset: read.log_start_offset,
            aborted_until,
        })
    }

    /// A follower's fetch (Kafka's `fetchRecords` with a replica id): the
    /// leader epochs are checked, a diverging epoch is answered instead of
    /// records, and otherwise the fetch offset is the follower's log end
    /// offset, recorded before the read up to the leader's log end offset
    /// (a dry run records nothing: `FetchOptions::dry_run`).
    fn read_for_replica(
        &self,
        request: &FetchPartition,
        options: FetchOptions,
        limit: usize,
        first_data: bool,
    ) -> FetchedPartition {
        let tp = TopicPartition::new(&request.topic, request.partition);
        let mut fetched = FetchedPartition::empty(request);
        let Some(replication) = self.replication.get() else {
            // A single node has no followers.
            fetched.error_code = ErrorCode::NotLeaderOrFollower.code();
            return fetched;
        };
        let Some(leader_epoch) = replication.leader_epoch(&tp) else {
            fetched.error_code = ErrorCode::NotLeaderOrFollower.code();
            return fetched;
        };
        let epoch_error = match request.current_leader_epoch {
            epoch if epoch < 0 => None,
            epoch if epoch < leader_epoch => Some(ErrorCode::FencedLeaderEpoch),
            epoch if epoch > leader_epoch => Some(ErrorCode::UnknownLeaderEpoch),
            _ => None,
        };
        let offsets = match self.logs.offsets(&tp) {
            Ok(offsets) => offsets,
            Err(error) => {
                fetched.error_code = error.error_code();
                return fetched;
            }
        };
        fetched.log_start_offset = offsets.log_start_offset;
        if let Some(error) = epoch_error {
            fetched.error_code = error.code();
            return fetched;
        }
        if let Some(diverging) = self.diverging(&tp, request, leader_epoch) {
            fetched.high_watermark = replication.high_watermark(&tp).unwrap_or(-1);
            fetched.last_stable_offset = fetched.high_watermark;
            fetched.diverging_epoch = Some(diverging);
            return fetched;
        }
        let followed = if options.dry_run {
            replication.follower_view(&tp, options.replica_id)
        } else {
            replication.follower_fetched(&tp, options.replica_id, request.fetch_offset)
        };
        match followed {
            Ok(state) => {
                fetched.high_watermark = state.high_watermark;
                fetched.last_stable_offset = state.high_watermark;
            }
            Err(error) => {
                fetched.error_code = error.code();
                return fetched;
            }
        }
        match self
            .logs
            .read_records(&tp, request.fetch_offset, limit, first_data)
        {
            Ok(read) => {
                fetched.log_start_offset = read.log_start_offset;
                fetched.records = read.records;
            }
            Err(error) => fetched.error_code = error.error_code(),
        }
        fetched
    }

    /// KIP-320/595: a follower whose last fetched epoch ends before its
    /// fetch offset in this log (or names an epoch this log never had)
    /// must truncate to that epoch's end first.
    fn diverging(
        &self,
        tp: &TopicPartition,
        request: &FetchPartition,
        leader_epoch: i32,
    ) -> Option<(i32, i64)> {
        if request.last_fetched_epoch < 0 {
            return None;
        }
        let epochs = self.epochs.get()?;
        let (epoch, end) = epochs.end_offset_for(tp, request.last_fetched_epoch)?;
        if request.last_fetched_epoch > leader_epoch {
            return Some((epoch, end));
        }
        (epoch != request.last_fetched_epoch || end < request.fetch_offset).then_some((epoch, end))
    }

    /// ListOffsets for one partition: -1 latest, -2 earliest, -3 max
    /// timestamp, -4 earliest local, -5 latest tiered, otherwise by
    /// timestamp. Latest is the last stable offset for read_committed.
    pub fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    ) -> OffsetAnswer {
        let tp = TopicPartition {
            topic: topic.to_string(),
            partition,
        };
        let answer = |offset, timestamp| OffsetAnswer {
            error_code: ErrorCode::None.code(),
            offset,
            timestamp,
        };
        if self.not_leader(topic, partition) {
            return OffsetAnswer {
                error_code: ErrorCode::NotLeaderOrFollower.code(),
                offset: -1,
                timestamp: -1,
            };
        }
        let result = match timestamp {
            -1 if read_committed => self.last_stable_offset(&tp).map(|lso| answer(lso, -1)),
            -1 => self
                .logs
                .offsets(&tp)
                .map(|o| answer(self.committed_end(&tp, o), -1)),
            -2 | -4 => self
                .logs
                .offsets(&tp)
                .map(|o| answer(o.log_start_offset, -1)),
            // Latest tiered offset: with no tiered storage there is none.
            -5 => Ok(answer(-1, -1)),
            -3 => self.logs.max_timestamp(&tp).map(|found| match found {
                Some((offset, ts)) => answer(offset, ts),
                None => answer(-1, -1),
            }),
            ts if ts >= 0 => self
                .logs
                .offset_for_timestamp(&tp, ts)
                .map(|found| match found {
                    Some((offset, ts)) => answer(offset, ts),
                    None => answer(-1, -1),
                }),
            _ => {
                return OffsetAnswer {
                    error_code: 42, // INVALID_REQUEST: an unknown special timestamp
                    offset: -1,
                    timestamp: -1,
                };
            }
        };
        result.unwrap_or_else(|error| OffsetAnswer {
            error_code: error.error_code(),
            offset: -1,
            timestamp: -1,
        })
    }
}

/// DeleteRecords' answer for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRecordsOutcome {
    pub error_code: i16,
    pub error_message: Option<String>,
    /// The new log start offset, -1 on error.
    pub low_watermark: i64,
}

/// A partition in a DescribeLogDirs answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirPartition {
    pub topic: String,
    pub partition: i32,
    pub size: i64,
}

/// A log directory in a DescribeLogDirs answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    pub path: String,
    pub error_code: i16,
    pub partitions: Vec<LogDirPartition>,
    pub total_bytes: i64,
    pub usable_bytes: i64,
}

/// Storage administration: DeleteRecords, DescribeLogDirs and
/// AlterReplicaLogDirs, as Kafka's ReplicaManager serves them.
impl ReplicaManager {
    /// Moves a partition's log start offset (DeleteRecords); `offset` -1
    /// means the high watermark. On a single node the new low watermark is
    /// final at once, so there is nothing to wait for.
    pub fn delete_records(&self, topic: &str, partition: i32, offset: i64) -> DeleteRecordsOutcome {
        if self.not_leader(topic, partition) {
            return DeleteRecordsOutcome {
                error_code: ErrorCode::NotLeaderOrFollower.code(),
                error_message: None,
                low_watermark: -1,
            };
        }
        let tp = TopicPartition::new(topic, partition);
        match self.logs.delete_records(&tp, offset) {
            Ok(low_watermark) => DeleteRecordsOutcome {
                error_code: ErrorCode::None.code(),
                error_message: None,
                low_watermark,
            },
            Err(error) => DeleteRecordsOutcome {
                error_code: error.error_code(),
                error_message: message_of(&error),
                low_watermark: -1,
            },
        }
    }

    /// Every log directory with its partitions and their sizes.
    pub fn describe_log_dirs(&self) -> Vec<LogDirDescription> {
        self.logs
            .describe_log_dirs()
            .into_iter()
            .map(|dir| LogDirDescription {
                path: dir.path,
                error_code: ErrorCode::None.code(),
                partitions: dir
                    .partitions
                    .into_iter()
                    .map(|(tp, size)| LogDirPartition {
                        topic: tp.topic,
                        partition: tp.partition,
                        size: i64::try_from(size).unwrap_or(i64::MAX),
                    })
                    .collect(),
                total_bytes: dir.total_bytes,
                usable_bytes: dir.usable_bytes,
            })
            .collect()
    }

    /// AlterReplicaLogDirs for one partition. As in Kafka the answer comes
    /// at once and the copy runs in the background (DescribeLogDirs shows
    /// the partition in its new directory when it is done); a directory
    /// that is not one of `log.dirs` is LOG_DIR_NOT_FOUND and an unknown
    /// partition UNKNOWN_TOPIC_OR_PARTITION.
    pub fn alter_log_dir(&self, topic: &str, partition: i32, log_dir: &str) -> i16 {
        let tp = TopicPartition::new(topic, partition);
        let current = match self.logs.partition_dir(&tp) {
            Ok(dir) => dir,
            Err(error) => return error.error_code(),
        };
        let known = self
            .logs
            .describe_log_dirs()
            .iter()
            .any(|dir| dir.path == log_dir);
        if !known {
            return ErrorCode::LogDirNotFound.code();
        }
        if current == log_dir {
            return ErrorCode::None.code();
        }
        let logs = Arc::clone(&self.logs);
        let target = log_dir.to_string();
        let spawned = std::thread::Builder::new()
            .name("log-dir-move".into())
            .spawn(move || {
                if let Err(error) = logs.move_partition(&tp, &target) {
                    tracing::error!(partition = %tp, to = %target, "moving the partition failed: {error}");
                }
            });
        match spawned {
            Ok(_) => ErrorCode::None.code(),
            Err(_) => ErrorCode::KafkaStorageError.code(),
        }
    }
}

impl FetchedPartition {
    /// A partition's answer before anything is read.
    fn empty(request: &FetchPartition) -> Self {
        Self {
            topic: request.topic.clone(),
            partition: request.partition,
            error_code: ErrorCode::None.code(),
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            records: Records::default(),
            aborted_transactions: Vec::new(),
            diverging_epoch: None,
        }
    }
}

impl AppendOutcome {
    fn failed(error_code: i16, error_message: Option<String>) -> Self {
        Self {
            error_code,
            error_message,
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
            end_offset: -1,
        }
    }

    /// Refused by the log: its error, message and any record errors.
    fn refused(error: &StorageError) -> Self {
        let mut outcome = Self::failed(error.error_code(), message_of(error));
        if let StorageError::RecordErrors(errors) = error {
            outcome.record_errors.clone_from(&errors.errors);
        }
        outcome
    }
}

fn message_of(error: &StorageError) -> Option<String> {
    match error {
        StorageError::UnknownTopicOrPartition | StorageError::OffsetOutOfRange => None,
        other => Some(other.to_string()),
    }
}

/// OffsetForLeaderEpoch's answer for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub error_code: i16,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

/// Leader epochs (KIP-101/279): where an epoch ends, answered by the leader.
impl ReplicaManager {
    /// OffsetForLeaderEpoch for one partition, as Kafka's
    /// `Partition.lastOffsetForLeaderEpoch`: only the leader answers; a
    /// `current_leader_epoch` (other than -1) older than the partition's
    /// is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; then the epoch
    /// cache says where `leader_epoch` ends.
    pub fn offset_for_leader_epoch(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> EpochEndOffset {
        let failed = |error: ErrorCode| EpochEndOffset {
            error_code: error.code(),
            leader_epoch: -1,
            end_offset: -1,
        };
        if self.not_leader(&tp.topic, tp.partition) {
            return failed(ErrorCode::NotLeaderOrFollower);
        }
        let answer = self.logs.leader_epoch(tp).and_then(|epoch| {
            if current_leader_epoch != -1 && current_leader_epoch < epoch {
                return Ok(Err(ErrorCode::FencedLeaderEpoch));
            }
            if current_leader_epoch > epoch {
                return Ok(Err(ErrorCode::UnknownLeaderEpoch));
            }
            self.logs
                .end_offset_for_epoch(tp, leader_epoch)
                .map(|(epoch, end)| Ok((epoch, end)))
        });
        match answer {
            Ok(Ok((leader_epoch, end_offset))) => EpochEndOffset {
                error_code: ErrorCode::None.code(),
                leader_epoch,
                end_offset,
            },
            Ok(Err(error)) => failed(error),
            Err(error) => EpochEndOffset {
                error_code: error.error_code(),
                leader_epoch: -1,
                end_offset: -1,
            },
        }
    }
}

/// A follower's side of replication (Kafka's `appendRecordsToFollower`
/// and `truncateTo` on a follower's Partition): the leader's batches kept
/// verbatim, and the producer state kept in step with them, so that it is
/// right if this replica becomes leader.
impl ReplicaManager {
    /// Appends batches fetched from the partition's leader with the
    /// leader's offsets; the idempotent and transactional producers' state
    /// records them, as the leader's did.
    pub fn append_replicated(
        &self,
        tp: &TopicPartition,
        records: &[u8],
    ) -> Result<crate::log::AppendInfo, StorageError> {
        let state = self.producer_state(tp);
        let mut state = crate::sync::lock(&state);
        self.load_producer_state(tp, &mut state)?;
        let info = self.logs.append_replicated(tp, records)?;
        if info.bytes > 0 {
            let appended = producer_state::producer_batches(records).map(|batches| {
                batches
                    .into_iter()
                    .filter(|b| {
                        b.base_offset >= info.base_offset && b.base_offset <= info.last_offset
                    })
                    .collect::<Vec<_>>()
            });
            if let Some(batches) = appended {
                state.record(&batches);
            }
            state.end_offset = info.last_offset.saturating_add(1);
        }
        Ok(info)
    }

    /// Truncates a follower's log to `offset` (a diverging tail) and
    /// forgets its producer state, rebuilt from the log when next needed.
    /// Returns the new log end offset.
    pub fn truncate_to(&self, tp: &TopicPartition, offset: i64) -> Result<i64, StorageError> {
        let state = self.producer_state(tp);
        let mut state = crate::sync::lock(&state);
        let end = self.logs.truncate_to(tp, offset)?;
        *state = ProducerStateMap::default();
        Ok(end)
    }

    /// Empties a follower's log to start it again at `offset` (it fell
    /// behind the leader's log start offset), producer state with it.
    pub fn truncate_fully_and_start_at(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<(), StorageError> {
        let state = self.producer_state(tp);
        let mut state = crate::sync::lock(&state);
        self.logs.truncate_fully_and_start_at(tp, offset)?;
        *state = ProducerStateMap::default();
        Ok(())
    }
}

/// An append the disk refused (full, read-only, failing): the producer gets
/// KAFKA_STORAGE_ERROR and retries, and the operator needs to know, so it
/// is logged, at most once a second with the count since the last line,
/// so a full disk under many producers does not flood the log.
fn warn_disk_failure(tp: &TopicPartition, error: &std::io::Error) {
    static LAST_WARNED_MS: AtomicI64 = AtomicI64::new(i64::MIN);
    static FAILED_SINCE: AtomicU64 = AtomicU64::new(0);
    FAILED_SINCE.fetch_add(1, Ordering::Relaxed);
    let now = now_ms();
    let last = LAST_WARNED_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) < 1000
        || LAST_WARNED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let failed = FAILED_SINCE.swap(0, Ordering::Relaxed);
    tracing::warn!(partition = %tp, failed_appends = failed, "the disk refused an append, answered KAFKA_STORAGE_ERROR (records already acknowledged stay readable): {error}");
}
