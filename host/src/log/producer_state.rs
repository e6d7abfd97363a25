//! Idempotent-producer and transaction state of a partition: Kafka's
//! `ProducerStateManager`.
//!
//! A producer that sets `enable.idempotence` stamps every batch with its
//! producer id, epoch and a per-partition sequence number. The broker keeps,
//! per partition and producer, the epoch and the sequence ranges and offsets
//! of the last five batches it appended, because a producer keeps at most
//! five requests in flight per connection and retries any of them. With that
//! state an append is:
//! - a **duplicate** when a batch's epoch and sequence range equal a cached
//!   batch: nothing is written and the original offsets are answered, so a
//!   retried request never writes its records twice;
//! - **out of order** (OUT_OF_ORDER_SEQUENCE_NUMBER) when its first sequence
//!   is not the last one plus one: a gap means a lost batch, and the
//!   producer must not write past it;
//! - **fenced** (INVALID_PRODUCER_EPOCH) when its epoch is older than the
//!   producer's current one: a zombie of a producer that has since
//!   re-initialized;
//! - otherwise appended, and then recorded here.
//!
//! As in Kafka since KIP-360, a producer the partition has no state for (new,
//! or expired) is accepted at any sequence, and a new epoch must start at
//! sequence 0.
//!
//! Why it lives beside the log but outside it: the state is derived entirely
//! from batch headers already in the log, so it needs no store of its own.
//! It is rebuilt by scanning the partition's batch headers the first time the
//! partition is appended to after a start (Kafka rebuilds from snapshots plus
//! a scan; a scan alone keeps this crash-safe with no extra file to get
//! wrong). Keeping it out of the storage engine keeps that engine about bytes
//! and offsets, and the check and the append are made atomic by the caller
//! ([`crate::replica::ReplicaManager`]) holding the partition's producer
//! lock across both. Producers idle for longer than
//! `producer.id.expiration.ms` are forgotten, as in Kafka (never while a
//! transaction of theirs is open).
//!
//! Transactions: a producer's first transactional batch opens its
//! transaction in the partition at that offset; the commit or abort marker
//! (a control batch the coordinator writes) closes it. The smallest open
//! first offset is the partition's first unstable offset, so the last
//! stable offset (LSO) is that or the high watermark. An aborted
//! transaction is remembered as (producer, first offset, marker offset):
//! Kafka's aborted-transaction index, which Fetch hands to read_committed
//! consumers so they drop those records. Both come from batch headers, so
//! the same scan that rebuilds sequences rebuilds them after a restart.

use crate::error_code::ErrorCode;

use std::collections::{HashMap, VecDeque};

use super::batch::BatchHeader;
use super::control::{self, ControlType};

/// Batches remembered per producer: the producer's in-flight limit.
pub const CACHED_BATCHES: usize = 5;

/// `producer.id.expiration.ms` default: one day.
pub const DEFAULT_EXPIRATION_MS: i64 = 24 * 3600 * 1000;

/// What the producer checks need from one batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    /// The batch's base offset as stored (meaningless on input).
    pub base_offset: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
    pub transactional: bool,
    pub control: bool,
    /// For a control batch: what it marks.
    pub marker: Option<ControlType>,
    /// For an end-transaction marker: the coordinator epoch it carries
    /// (-1 otherwise).
    pub coordinator_epoch: i32,
}

impl ProducerBatch {
    /// Whether the batch carries a producer id (idempotent or transactional).
    pub fn has_producer(&self) -> bool {
        self.producer_id >= 0
    }

    /// The sequence of the batch's last record, wrapping at `i32::MAX` as
    /// Kafka's `DefaultRecordBatch.incrementSequence`.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn in_sequence(last: i32, next: i32) -> bool {
    next == last.wrapping_add(1) || (next == 0 && last == i32::MAX)
}

/// Splits `bytes` (whole v2 batches as on the wire or in the log) into
/// their producer headers. `None` when the bytes are not well-formed
/// batches: the storage engine's validation reports that, not this.
pub fn producer_batches(mut bytes: &[u8]) -> Option<Vec<ProducerBatch>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let header = BatchHeader::parse(bytes).ok()?;
        let batch = bytes.get(..header.size())?;
        out.push(ProducerBatch::of(&header, batch));
        bytes = &bytes[batch.len()..];
    }
    Some(out)
}

impl ProducerBatch {
    /// From a batch's header, and its bytes for a control batch.
    pub(super) fn of(header: &BatchHeader, batch: &[u8]) -> Self {
        let control = header.is_control();
        ProducerBatch {
            base_offset: header.base_offset,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            last_offset_delta: header.last_offset_delta,
            max_timestamp: header.max_timestamp,
            transactional: header.is_transactional(),
            control,
            marker: control.then(|| control::control_type(batch)).flatten(),
            coordinator_epoch: if control {
                control::coordinator_epoch(batch).unwrap_or(-1)
            } else {
                -1
            },
        }
    }
}

/// How many bytes of `records` (whole batches) lie before `end`: the
/// batches whose base offset is below it, and the offset after the last of
/// them. A read_committed fetch keeps those (the last stable offset is
/// always a batch boundary).
pub fn batches_before(records: &[u8], end: i64) -> (usize, i64) {
    let mut position = 0;
    let mut next_offset = -1;
    while let Some(Ok(header)) = records.get(position..).map(BatchHeader::parse) {
        if header.base_offset >= end {
            break;
        }
        position += header.size();
        next_offset = header.next_offset();
    }
    (position.min(records.len()), next_offset)
}

/// One appended batch as remembered for duplicate detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

/// What the partition knows of one producer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// The last [`CACHED_BATCHES`] batches, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// Newest batch timestamp (for expiry and DescribeProducers).
    pub last_timestamp: i64,
    /// First offset of the producer's open transaction in this partition.
    pub txn_first_offset: Option<i64>,
    /// The coordinator epoch of the last marker written for the producer
    /// (-1: none): a marker from an older coordinator is refused
    /// (Kafka's `ProducerStateEntry.coordinatorEpoch`).
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    /// Sequence of the last record appended, -1 if none.
    pub fn last_sequence(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_sequence)
    }

    fn duplicate_of(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        if batch.producer_epoch != self.epoch {
            return None;
        }
        let last = batch.last_sequence();
        self.batches
            .iter()
            .find(|b| b.first_sequence == batch.base_sequence && b.last_sequence == last)
            .copied()
    }
}

/// Why an append was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceError {
    pub error_code: i16,
    pub message: String,
}

/// The verdict on an append before it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it, then [`ProducerStateMap::record`] it.
    Append,
    /// Already in the log: answer with the original batch's offsets.
    Duplicate(BatchMetadata),
}

/// A transaction aborted in this partition: its records are
/// `[first_offset, last_offset)` of `producer_id`, `last_offset` being the
/// abort marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// The producer state of one partition.
#[derive(Debug, Default)]
pub struct ProducerStateMap {
    producers: HashMap<i64, ProducerEntry>,
    /// Aborted transactions, in marker order.
    aborted: Vec<AbortedTxn>,
    /// Whether the state has been rebuilt from the log since the start.
    pub loaded: bool,
    /// The log end offset after the last append this state saw.
    pub end_offset: i64,
    /// When expired producers were last swept.
    last_expiry_ms: i64,
}

impl ProducerStateMap {
    /// The producers this partition knows.
    pub fn producers(&self) -> &HashMap<i64, ProducerEntry> {
        &self.producers
    }

    /// Checks the batches of one append against the state (and against the
    /// earlier batches of the same append), as Kafka's
    /// `UnifiedLog.analyzeAndValidateProducerState`.
    pub fn check(&self, batches: &[ProducerBatch]) -> Result<Verdict, SequenceError> {
        // Each producer's epoch and last sequence as the append goes on.
        let mut pending: HashMap<i64, (i16, i32)> = HashMap::new();
        for batch in batches.iter().filter(|b| b.has_producer() && !b.control) {
            let entry = self.producers.get(&batch.producer_id);
            if let Some(duplicate) = entry.and_then(|e| e.duplicate_of(batch)) {
                return Ok(Verdict::Duplicate(duplicate));
            }
            let current = pending
                .get(&batch.producer_id)
                .copied()
                .or_else(|| entry.map(|e| (e.epoch, e.last_sequence())));
            let next = check_batch(batch, current)?;
            pending.insert(batch.producer_id, next);
        }
        Ok(Verdict::Append)
    }

    /// Records appended batches (`batches` with their stored base offsets).
    pub fn record(&mut self, batches: &[ProducerBatch]) {
        for batch in batches.iter().filter(|b| b.has_producer()) {
            let entry = self
                .producers
                .entry(batch.producer_id)
                .or_insert_with(|| ProducerEntry {
                    epoch: batch.producer_epoch,
                    batches: VecDeque::new(),
                    last_timestamp: batch.max_timestamp,
                    txn_first_offset: None,
                    coordinator_epoch: -1,
                });
            if batch.producer_epoch != entry.epoch {
                // A new epoch starts a new sequence space.
                entry.epoch = batch.producer_epoch;
                entry.batches.clear();
            }
            entry.last_timestamp = entry.last_timestamp.max(batch.max_timestamp);
            if batch.control {
                let ended = matches!(batch.marker, Some(ControlType::Abort | ControlType::Commit));
                if ended {
                    entry.coordinator_epoch = batch.coordinator_epoch;
                }
                if let (true, Some(first_offset)) = (ended, entry.txn_first_offset) {
                    entry.txn_first_offset = None;
                    if batch.marker == Some(ControlType::Abort) {
                        self.aborted.push(AbortedTxn {
                            producer_id: batch.producer_id,
                            first_offset,
                            last_offset: batch.base_offset,
                        });
                    }
                }
                continue;
            }
            if batch.transactional && entry.txn_first_offset.is_none() {
                entry.txn_first_offset = Some(batch.base_offset);
            }
            if entry.batches.len() == CACHED_BATCHES {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchMetadata {
                first_sequence: batch.base_sequence,
                last_sequence: batch.last_sequence(),
                first_offset: batch.base_offset,
                last_offset: batch
                    .base_offset
                    .saturating_add(i64::from(batch.last_offset_delta)),
                timestamp: batch.max_timestamp,
            });
        }
    }

    /// The first offset of the oldest open transaction, if any: the last
    /// stable offset when one is open.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers
            .values()
            .filter_map(|entry| entry.txn_first_offset)
            .min()
    }

    /// The aborted transactions with records in `[from, to)`, oldest first
    /// (Kafka's `collectAbortedTransactions`).
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|txn| txn.last_offset >= from && txn.first_offset < to)
            .copied()
            .collect()
    }

    /// Forgets aborted transactions wholly below the log start offset
    /// (their records are gone).
    pub fn prune_aborted(&mut self, log_start_offset: i64) {
        self.aborted
            .retain(|txn| txn.last_offset >= log_start_offset);
    }

    /// Forgets producers whose newest batch is older than `expiration_ms`
    /// (`producer.id.expiration.ms`); swept at most once a minute.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        if now_ms.saturating_sub(self.last_expiry_ms) < 60_000.min(expiration_ms.max(0)) {
            return;
        }
        self.last_expiry_ms = now_ms;
        let cutoff = now_ms.saturating_sub(expiration_ms);
        self.producers
            .retain(|_, entry| entry.last_timestamp >= cutoff || entry.txn_first_offset.is_some());
    }
}

/// Kafka's `ProducerAppendInfo.checkProducerEpoch` and `checkSequence` for
/// a client append; returns the producer's epoch and last sequence after it.
fn check_batch(
    batch: &ProducerBatch,
    current: Option<(i16, i32)>,
) -> Result<(i16, i32), SequenceError> {
    let after = (batch.producer_epoch, batch.last_sequence());
    let Some((epoch, last_sequence)) = current else {
        return Ok(after);
    };
    if batch.producer_epoch < epoch {
        return Err(SequenceError {
            error_code: ErrorCode::InvalidProducerEpoch.code(),
            message: format!(
                "epoch {} of producer {} is older than its current epoch {epoch}",
                batch.producer_epoch, batch.producer_id
            ),
        });
    }
    let ordered = if batch.producer_epoch != epoch {
        batch.base_sequence == 0
    } else {
        in_sequence(last_sequence, batch.base_sequence)
    };
    if !ordered {
        return Err(SequenceError {
            error_code: ErrorCode::OutOfOrderSequenceNumber.code(),
            message: format!(
                "producer {} epoch {}: sequence {} where {} was expected",
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                if batch.producer_epoch != epoch {
                    0
                } else {
                    last_sequence.wrapping_add(1)
                }
            ),
        });
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, records: i32, offset: i64) -> ProducerBatch {
        ProducerBatch {
            base_offset: offset,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            last_offset_delta: records - 1,
            max_timestamp: 1_000,
            transactional: false,
            control: false,
            marker: None,
            coordinator_epoch: -1,
        }
    }

    fn transactional(pid: i64, seq: i32, records: i32, offset: i64) -> ProducerBatch {
        ProducerBatch {
            transactional: true,
            ..batch(pid, 0, seq, records, offset)
        }
    }

    fn marker(pid: i64, commit: bool, offset: i64) -> ProducerBatch {
        ProducerBatch {
            base_offset: offset,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: -1,
            last_offset_delta: 0,
            max_timestamp: 1_000,
            transactional: true,
            control: true,
            marker: Some(if commit {
                ControlType::Commit
            } else {
                ControlType::Abort
            }),
            coordinator_epoch: 0,
        }
    }

    /// The producer keeps the coordinator epoch of its last marker (what a
    /// marker from an older coordinator is checked against).
    #[test]
    fn a_marker_records_its_coordinator_epoch() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, transactional(1, 0, 1, 0));
        assert_eq!(state.producers()[&1].coordinator_epoch, -1);
        appended(
            &mut state,
            ProducerBatch {
                coordinator_epoch: 6,
                ..marker(1, true, 1)
            },
        );
        assert_eq!(state.producers()[&1].coordinator_epoch, 6);
        let bytes = control::end_transaction_marker(1, 0, false, 9, 1_000);
        let parsed = producer_batches(&bytes).unwrap();
        assert_eq!(parsed[0].coordinator_epoch, 9);
        state.record(&parsed);
        assert_eq!(state.producers()[&1].coordinator_epoch, 9);
    }

    #[test]
    fn open_transactions_hold_the_lso_and_aborts_are_indexed() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, transactional(1, 0, 5, 0));
        appended(&mut state, transactional(2, 0, 5, 5));
        appended(&mut state, transactional(1, 5, 5, 10));
        assert_eq!(state.first_unstable_offset(), Some(0));
        state.record(&[marker(1, false, 15)]);
        assert_eq!(state.first_unstable_offset(), Some(5));
        state.record(&[marker(2, true, 16)]);
        assert_eq!(state.first_unstable_offset(), None);
        let aborted = AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 15,
        };
        assert_eq!(state.aborted_between(0, 17), vec![aborted]);
        assert_eq!(state.aborted_between(15, 17), vec![aborted]);
        assert!(state.aborted_between(16, 17).is_empty());
        // A second marker with nothing open records nothing.
        state.record(&[marker(1, false, 17)]);
        assert_eq!(state.aborted_between(0, 18).len(), 1);
        state.prune_aborted(16);
        assert!(state.aborted_between(0, 18).is_empty());
    }

    #[test]
    fn marker_bytes_parse_as_markers() {
        let bytes = control::end_transaction_marker(9, 2, false, 0, 5);
        let parsed = producer_batches(&bytes).unwrap();
        assert_eq!(parsed[0].marker, Some(ControlType::Abort));
        assert!(parsed[0].control && parsed[0].transactional);
    }

    #[test]
    fn producers_with_open_transactions_do_not_expire() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, transactional(1, 0, 1, 0));
        state.expire(
            1_001 + DEFAULT_EXPIRATION_MS + 60_000,
            DEFAULT_EXPIRATION_MS,
        );
        assert_eq!(state.first_unstable_offset(), Some(0));
    }

    fn appended(state: &mut ProducerStateMap, b: ProducerBatch) {
        assert_eq!(state.check(&[b]), Ok(Verdict::Append));
        state.record(&[b]);
    }

    #[test]
    fn in_order_batches_append_and_retries_are_duplicates() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, batch(7, 0, 0, 10, 0));
        appended(&mut state, batch(7, 0, 10, 5, 10));
        match state.check(&[batch(7, 0, 0, 10, -1)]) {
            Ok(Verdict::Duplicate(meta)) => {
                assert_eq!((meta.first_offset, meta.last_offset), (0, 9))
            }
            other => panic!("expected a duplicate, got {other:?}"),
        }
        match state.check(&[batch(7, 0, 10, 5, -1)]) {
            Ok(Verdict::Duplicate(meta)) => assert_eq!(meta.first_offset, 10),
            other => panic!("expected a duplicate, got {other:?}"),
        }
    }

    #[test]
    fn gaps_are_out_of_order_and_old_epochs_fenced() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, batch(7, 3, 0, 2, 0));
        let gap = state.check(&[batch(7, 3, 5, 1, -1)]).unwrap_err();
        assert_eq!(gap.error_code, ErrorCode::OutOfOrderSequenceNumber.code());
        let old = state.check(&[batch(7, 2, 2, 1, -1)]).unwrap_err();
        assert_eq!(old.error_code, ErrorCode::InvalidProducerEpoch.code());
        // A new epoch must start at 0.
        let bumped = state.check(&[batch(7, 4, 2, 1, -1)]).unwrap_err();
        assert_eq!(
            bumped.error_code,
            ErrorCode::OutOfOrderSequenceNumber.code()
        );
        appended(&mut state, batch(7, 4, 0, 1, 2));
        assert_eq!(state.producers()[&7].epoch, 4);
    }

    #[test]
    fn unknown_producers_start_anywhere_and_only_five_batches_are_kept() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, batch(9, 0, 42, 1, 0));
        for i in 1..=6 {
            appended(&mut state, batch(9, 0, 42 + i, 1, i64::from(i)));
        }
        assert_eq!(state.producers()[&9].batches.len(), CACHED_BATCHES);
        // The oldest batches fell out of the cache: no longer a duplicate,
        // and out of order.
        let err = state.check(&[batch(9, 0, 42, 1, -1)]).unwrap_err();
        assert_eq!(err.error_code, ErrorCode::OutOfOrderSequenceNumber.code());
    }

    #[test]
    fn batches_of_one_append_are_checked_against_each_other() {
        let state = ProducerStateMap::default();
        let ok = [batch(1, 0, 0, 2, -1), batch(1, 0, 2, 2, -1)];
        assert_eq!(state.check(&ok), Ok(Verdict::Append));
        let gap = [batch(1, 0, 0, 2, -1), batch(1, 0, 3, 2, -1)];
        assert!(state.check(&gap).is_err());
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let b = batch(1, 0, i32::MAX - 1, 4, 0);
        assert_eq!(b.last_sequence(), 1);
        assert!(in_sequence(i32::MAX, 0));
    }

    #[test]
    fn idle_producers_expire() {
        let mut state = ProducerStateMap::default();
        appended(&mut state, batch(1, 0, 0, 1, 0));
        state.expire(1_000 + DEFAULT_EXPIRATION_MS, DEFAULT_EXPIRATION_MS);
        assert!(state.producers().contains_key(&1));
        state.expire(
            1_001 + DEFAULT_EXPIRATION_MS + 60_000,
            DEFAULT_EXPIRATION_MS,
        );
        assert!(state.producers().is_empty());
    }

    #[test]
    fn headers_parse_from_wire_bytes() {
        use crate::log::batch::{HEADER_SIZE, LOG_OVERHEAD};
        const LENGTH: usize = 8;
        const MAGIC: usize = 16;
        const PRODUCER_ID: usize = 43;
        const BASE_SEQUENCE: usize = 53;
        let mut b = vec![0u8; HEADER_SIZE];
        b[LENGTH..LENGTH + 4].copy_from_slice(&((HEADER_SIZE - LOG_OVERHEAD) as i32).to_be_bytes());
        b[MAGIC] = 2;
        b[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&5i64.to_be_bytes());
        b[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&12i32.to_be_bytes());
        let parsed = producer_batches(&b).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!((parsed[0].producer_id, parsed[0].base_sequence), (5, 12));
        assert!(producer_batches(&b[..20]).is_none());
    }
}
