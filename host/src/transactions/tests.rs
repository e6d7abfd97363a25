//! The coordinator's state machine against recorded effects (the real
//! markers and offsets are exercised end to end in tests/transactions.rs).

use crate::error_code::ErrorCode;

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Mutex;

use super::*;
use crate::coordinator::offsets_log::testing::Logs;
use crate::transactions::journal::{Journal, JOURNAL};
use crate::transactions::state_topic::TOPIC;

/// The store on `__transaction_state` in `dir`'s logs (reopened: what
/// an earlier open wrote is replayed), migrating what `dir` holds.
fn open(dir: &std::path::Path) -> TransactionStore {
    let logs = Arc::new(Logs::open(dir, TOPIC));
    TransactionStore::open_on_topic(logs, dir, DEFAULT_MAX_TIMEOUT_MS).unwrap()
}

/// A marker written: topic, partition, producer id, epoch, committed.
type Marker = (String, i32, i64, i16, bool);

/// Records markers and offsets; `failing` topics refuse markers, each of
/// `fail_once` refuses its next marker, each group of `offsets_fail_once`
/// its next offset commit.
#[derive(Default)]
struct Recorder {
    markers: Mutex<Vec<Marker>>,
    offsets: Mutex<Vec<(String, Vec<PendingOffset>)>>,
    failing: Mutex<Vec<String>>,
    fail_once: Mutex<BTreeSet<TopicPartition>>,
    offsets_fail_once: Mutex<BTreeSet<String>>,
    groups_ended: Mutex<Vec<(String, bool)>>,
}

impl TxnEffects for Recorder {
    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        topic != "missing" && partition < 4
    }

    fn write_marker(
        &self,
        p: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        _: i32,
    ) -> i16 {
        if self.failing.lock().unwrap().contains(&p.topic)
            || self.fail_once.lock().unwrap().remove(p)
        {
            return ErrorCode::KafkaStorageError.code();
        }
        self.markers.lock().unwrap().push((
            p.topic.clone(),
            p.partition,
            producer_id,
            epoch,
            commit,
        ));
        ErrorCode::None.code()
    }

    fn complete_group(&self, group_id: &str, _: i64, _: i16, commit: bool, _: i32) -> i16 {
        self.groups_ended
            .lock()
            .unwrap()
            .push((group_id.to_string(), commit));
        ErrorCode::None.code()
    }

    fn commit_offsets(&self, group_id: &str, offsets: &[PendingOffset]) -> i16 {
        if self.offsets_fail_once.lock().unwrap().remove(group_id) {
            return ErrorCode::CoordinatorLoadInProgress.code();
        }
        self.offsets
            .lock()
            .unwrap()
            .push((group_id.to_string(), offsets.to_vec()));
        ErrorCode::None.code()
    }
}

fn answer(code: i16, id: i64, epoch: i16) -> InitAnswer {
    InitAnswer {
        error_code: code,
        producer_id: id,
        producer_epoch: epoch,
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn producer(id: &str, pid: i64, epoch: i16) -> ProducerRef<'_> {
    ProducerRef {
        transactional_id: id,
        producer_id: pid,
        producer_epoch: epoch,
    }
}

fn state(store: &TransactionStore, id: &str) -> TxnState {
    store.describe(id).unwrap().state
}

#[test]
fn epochs_bump_fence_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let first = store.init_producer_id(&ids, &fx, "t", 60_000, (-1, -1));
    assert_eq!(first, answer(0, first.producer_id, 0));
    let pid = first.producer_id;
    assert_eq!(
        store.init_producer_id(&ids, &fx, "t", 60_000, (-1, -1)),
        answer(0, pid, 1)
    );
    // A zombie naming epoch 5 is fenced; a retry naming the previous
    // epoch gets the current one again; the current epoch bumps.
    assert_eq!(
        store.init_producer_id(&ids, &fx, "t", 60_000, (pid, 5)),
        InitAnswer::failed(ErrorCode::ProducerFenced.code())
    );
    assert_eq!(
        store.init_producer_id(&ids, &fx, "t", 60_000, (pid, 0)),
        answer(0, pid, 1)
    );
    assert_eq!(
        store.init_producer_id(&ids, &fx, "t", 60_000, (pid, 1)),
        answer(0, pid, 2)
    );
    assert_eq!(
        store.init_producer_id(&ids, &fx, "t", 0, (-1, -1)),
        InitAnswer::failed(ErrorCode::InvalidTransactionTimeout.code())
    );
    drop(store);
    let reopened = open(dir.path());
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    assert_eq!(
        reopened.init_producer_id(&ids, &fx, "t", 60_000, (-1, -1)),
        answer(0, pid, 3)
    );
    let other = reopened.init_producer_id(&ids, &fx, "u", 60_000, (-1, -1));
    assert!(other.producer_id > pid);
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let dir = tempfile::tempdir().unwrap();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let record = TransactionalProducer {
        producer_id: 7,
        producer_epoch: i16::MAX - 1,
        last_producer_id: -1,
        last_producer_epoch: -1,
        timeout_ms: 1,
        state: TxnState::Empty,
        partitions: BTreeSet::new(),
        groups: BTreeMap::new(),
        start_ms: -1,
        updated_ms: 0,
    };
    let next = bumped(&record, &ids).unwrap();
    assert_eq!((next.producer_epoch, next.last_producer_id), (0, 7));
    assert_ne!(next.producer_id, 7);
}

#[test]
fn commit_writes_markers_and_offsets_and_a_retry_is_answered_again() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let pid = store
        .init_producer_id(&ids, &fx, "t", 60_000, (-1, -1))
        .producer_id;
    let me = producer("t", pid, 0);
    assert_eq!(
        store.end_txn(&fx, me, true),
        ErrorCode::InvalidTxnState.code()
    );
    assert_eq!(
        store.add_partitions(&fx, me, &[tp("a", 0), tp("a", 1)], false),
        vec![0, 0]
    );
    assert_eq!(state(&store, "t"), TxnState::Ongoing);
    // Produce verification: only the added partitions, at this epoch.
    assert!(store.includes_partition(pid, 0, "a", 1));
    assert!(!store.includes_partition(pid, 0, "a", 2));
    assert!(!store.includes_partition(pid, 1, "a", 1));
    assert_eq!(store.add_offsets(me, "g"), 0);
    let offset = PendingOffset {
        topic: "in".into(),
        partition: 0,
        offset: 42,
        leader_epoch: -1,
        metadata: None,
    };
    assert_eq!(
        store.txn_offset_commit(me, "g", std::slice::from_ref(&offset)),
        0
    );
    assert_eq!(
        store.pending_offsets("g").into_iter().collect::<Vec<_>>(),
        vec![("in".to_string(), 0)]
    );
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(state(&store, "t"), TxnState::CompleteCommit);
    assert!(!store.includes_partition(pid, 0, "a", 1));
    assert_eq!(fx.markers.lock().unwrap().len(), 2);
    assert!(fx.markers.lock().unwrap().iter().all(|m| m.4 && m.2 == pid));
    assert_eq!(
        fx.offsets.lock().unwrap()[0],
        ("g".to_string(), vec![offset])
    );
    assert!(store.pending_offsets("g").is_empty());
    // A retried commit succeeds; an abort of the committed one does not.
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(
        store.end_txn(&fx, me, false),
        ErrorCode::InvalidTxnState.code()
    );
    assert_eq!(fx.markers.lock().unwrap().len(), 2);
}

#[test]
fn abort_drops_offsets_and_checks_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let pid = store
        .init_producer_id(&ids, &fx, "t", 60_000, (-1, -1))
        .producer_id;
    let me = producer("t", pid, 0);
    // Offsets for a group not added are refused.
    assert_eq!(
        store.txn_offset_commit(me, "g", &[]),
        ErrorCode::InvalidTxnState.code()
    );
    assert_eq!(
        store.add_partitions(&fx, producer("t", pid + 100, 0), &[tp("a", 0)], false),
        vec![ErrorCode::InvalidProducerIdMapping.code()]
    );
    assert_eq!(
        store.add_partitions(&fx, producer("t", pid, 3), &[tp("a", 0)], false),
        vec![ErrorCode::ProducerFenced.code()]
    );
    assert_eq!(
        store.add_partitions(&fx, producer("nobody", pid, 0), &[tp("a", 0)], false),
        vec![ErrorCode::InvalidProducerIdMapping.code()]
    );
    assert_eq!(
        store.add_partitions(&fx, me, &[tp("a", 0), tp("missing", 0)], false),
        vec![
            ErrorCode::OperationNotAttempted.code(),
            ErrorCode::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(state(&store, "t"), TxnState::Empty);
    assert_eq!(store.add_partitions(&fx, me, &[tp("a", 0)], false), vec![0]);
    assert_eq!(store.add_partitions(&fx, me, &[tp("a", 0)], true), vec![0]);
    assert_eq!(
        store.add_partitions(&fx, me, &[tp("a", 1)], true),
        vec![ErrorCode::InvalidTxnState.code()]
    );
    assert_eq!(store.add_offsets(me, "g"), 0);
    assert_eq!(
        store.txn_offset_commit(producer("t", pid, 9), "g", &[]),
        ErrorCode::InvalidProducerEpoch.code()
    );
    assert_eq!(store.end_txn(&fx, me, false), 0);
    assert_eq!(state(&store, "t"), TxnState::CompleteAbort);
    assert!(fx.offsets.lock().unwrap().is_empty());
    assert_eq!(
        *fx.markers.lock().unwrap(),
        vec![("a".into(), 0, pid, 0, false)]
    );
    let listed = store.list(&["CompleteAbort".into()], &[], -1, 0);
    assert_eq!(
        listed,
        vec![("t".to_string(), pid, TxnState::CompleteAbort)]
    );
    assert!(store.list(&["Ongoing".into()], &[], -1, 0).is_empty());
}

#[test]
fn a_new_instance_aborts_the_open_transaction_with_a_fencing_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let pid = store
        .init_producer_id(&ids, &fx, "t", 60_000, (-1, -1))
        .producer_id;
    store.add_partitions(&fx, producer("t", pid, 0), &[tp("a", 0)], false);
    let second = store.init_producer_id(&ids, &fx, "t", 60_000, (-1, -1));
    assert_eq!(second, answer(0, pid, 1));
    assert_eq!(
        *fx.markers.lock().unwrap(),
        vec![("a".into(), 0, pid, 1, false)]
    );
    assert_eq!(state(&store, "t"), TxnState::Empty);
    // The zombie is fenced everywhere.
    assert_eq!(
        store.end_txn(&fx, producer("t", pid, 0), true),
        ErrorCode::ProducerFenced.code()
    );
}

#[test]
fn timed_out_transactions_abort_and_prepared_ones_finish_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let pid = store
        .init_producer_id(&ids, &fx, "t", 1_000, (-1, -1))
        .producer_id;
    store.add_partitions(&fx, producer("t", pid, 0), &[tp("a", 0)], false);
    let started = store.describe("t").unwrap().start_ms;
    assert_eq!(
        store.abort_timed_out(&fx, started + 500, DEFAULT_ID_EXPIRATION_MS),
        0
    );
    assert_eq!(
        store.abort_timed_out(&fx, started + 1_001, DEFAULT_ID_EXPIRATION_MS),
        1
    );
    assert_eq!(state(&store, "t"), TxnState::CompleteAbort);
    assert_eq!(
        *fx.markers.lock().unwrap(),
        vec![("a".into(), 0, pid, 1, false)]
    );
    assert_eq!(
        store.end_txn(&fx, producer("t", pid, 0), true),
        ErrorCode::ProducerFenced.code()
    );

    // A commit whose markers fail stays prepared, across a restart, until
    // the markers can be written.
    let pid = store
        .init_producer_id(&ids, &fx, "u", 60_000, (-1, -1))
        .producer_id;
    let me = producer("u", pid, 0);
    store.add_partitions(&fx, me, &[tp("b", 0)], false);
    fx.failing.lock().unwrap().push("b".into());
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(state(&store, "u"), TxnState::PrepareCommit);
    assert_eq!(
        store.add_partitions(&fx, me, &[tp("b", 0)], false),
        vec![ErrorCode::ConcurrentTransactions.code()]
    );
    // The producer's retried commit is told to retry (Kafka's
    // CONCURRENT_TRANSACTIONS).
    assert_eq!(
        store.end_txn(&fx, me, true),
        ErrorCode::ConcurrentTransactions.code()
    );
    drop(store);
    let store = open(dir.path());
    assert_eq!(state(&store, "u"), TxnState::PrepareCommit);
    fx.failing.lock().unwrap().clear();
    store.finish_prepared(&fx);
    assert_eq!(state(&store, "u"), TxnState::CompleteCommit);
    assert!(fx
        .markers
        .lock()
        .unwrap()
        .contains(&("b".into(), 0, pid, 0, true)));
    // Idle ids expire.
    store.abort_timed_out(&fx, now_ms() + 10_000, 1_000);
    assert!(store.describe("u").is_err() && store.describe("t").is_err());
    drop(store);
    let store = open(dir.path());
    assert!(store.describe("u").is_err());
}

/// A data directory of an earlier release (its journal written by that
/// release's own code, with a torn last line from a crash) is migrated
/// into `__transaction_state` at the first start: nothing is lost, the
/// journal is retired, and the next start reads the topic alone.
#[test]
fn an_earlier_journal_is_migrated_into_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let ongoing = TransactionalProducer {
        producer_id: 1000,
        producer_epoch: 2,
        last_producer_id: 1000,
        last_producer_epoch: 1,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: [tp("a", 0), tp("b", 3)].into_iter().collect(),
        groups: [(
            "g".to_string(),
            vec![PendingOffset {
                topic: "in".into(),
                partition: 1,
                offset: 41,
                leader_epoch: 0,
                metadata: Some("m".into()),
            }],
        )]
        .into_iter()
        .collect(),
        start_ms: now_ms(),
        updated_ms: now_ms(),
    };
    let prepared = TransactionalProducer {
        producer_id: 1001,
        state: TxnState::PrepareCommit,
        groups: BTreeMap::new(),
        ..ongoing.clone()
    };
    {
        let (journal, records) = Journal::open(dir.path()).unwrap();
        assert!(records.is_empty());
        journal.append("t", Some(ongoing.clone()), true).unwrap();
        journal.append("u", Some(prepared.clone()), true).unwrap();
        journal.append("gone", Some(ongoing.clone()), true).unwrap();
        journal.append("gone", None, true).unwrap();
    }
    let mut torn = OpenOptions::new()
        .append(true)
        .open(dir.path().join(JOURNAL))
        .unwrap();
    torn.write_all(b"{\"id\":\"t\",\"rec").unwrap();
    drop(torn);

    let check = |store: &TransactionStore| {
        let t = store.describe("t").unwrap();
        assert_eq!(t.state, TxnState::Ongoing);
        assert_eq!((t.producer_id, t.producer_epoch), (1000, 2));
        assert_eq!(t.partitions, vec![tp("a", 0), tp("b", 3)]);
        assert_eq!(
            store.pending_offsets("g"),
            [("in".to_string(), 1)].into_iter().collect()
        );
        assert_eq!(store.describe("u").unwrap().state, TxnState::PrepareCommit);
        assert!(store.describe("gone").is_err());
    };
    let store = open(dir.path());
    check(&store);
    assert!(!dir.path().join(JOURNAL).exists());
    assert!(dir.path().join(format!("{JOURNAL}.migrated")).exists());
    drop(store);
    // The next start replays the topic (the journal is not read again).
    let store = open(dir.path());
    check(&store);
    // The retry epoch survived: the previous epoch's InitProducerId is a
    // retry of the bump to 2 only while no transaction is open, so a
    // zombie naming epoch 1 now aborts and bumps.
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let answer = store.init_producer_id(&ids, &fx, "t", 60_000, (1000, 1));
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.producer_epoch, 3);
    assert!(fx
        .markers
        .lock()
        .unwrap()
        .contains(&("b".into(), 3, 1000, 3, false)));
    // The prepared one finishes.
    store.finish_prepared(&fx);
    assert_eq!(state(&store, "u"), TxnState::CompleteCommit);
}

/// A retry writes only what failed: a partition whose marker failed once
/// gets it on the retry, the others (and the offsets, and the group's
/// end) exactly once, as Kafka's channel manager removes a partition
/// from the transaction once its marker is written.
#[test]
fn a_retry_writes_only_the_markers_and_offsets_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let fx = Recorder::default();
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let store = open(dir.path());
    let pid = store
        .init_producer_id(&ids, &fx, "t", 60_000, (-1, -1))
        .producer_id;
    let me = producer("t", pid, 0);
    let written = [tp("a", 0), tp("a", 1), tp("b", 2)];
    store.add_partitions(&fx, me, &written, false);
    assert_eq!(store.add_offsets(me, "g"), 0);
    let offset = PendingOffset {
        topic: "in".into(),
        partition: 0,
        offset: 9,
        leader_epoch: 0,
        metadata: None,
    };
    assert_eq!(
        store.txn_offset_commit(me, "g", std::slice::from_ref(&offset)),
        0
    );
    fx.fail_once.lock().unwrap().insert(tp("a", 1));
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(state(&store, "t"), TxnState::PrepareCommit);
    let sorted = |fx: &Recorder| {
        let mut markers = fx.markers.lock().unwrap().clone();
        markers.sort();
        markers
    };
    assert_eq!(
        sorted(&fx),
        vec![("a".into(), 0, pid, 0, true), ("b".into(), 2, pid, 0, true)]
    );
    // The offsets were committed by the first pass: the retry does not
    // commit them again.
    assert_eq!(fx.offsets.lock().unwrap().len(), 1);
    store.finish_prepared(&fx);
    assert_eq!(state(&store, "t"), TxnState::CompleteCommit);
    assert_eq!(
        sorted(&fx),
        vec![
            ("a".into(), 0, pid, 0, true),
            ("a".into(), 1, pid, 0, true),
            ("b".into(), 2, pid, 0, true)
        ]
    );
    assert_eq!(
        *fx.offsets.lock().unwrap(),
        vec![("g".to_string(), vec![offset.clone()])]
    );
    // Nothing is left: another retry writes nothing.
    store.finish_prepared(&fx);
    assert_eq!(sorted(&fx).len(), 3);

    // An offset commit that fails once is retried alone: the markers are
    // not written again.
    let me = producer("t", pid, 0);
    store.add_partitions(&fx, me, &[tp("a", 0)], false);
    assert_eq!(store.add_offsets(me, "g"), 0);
    assert_eq!(
        store.txn_offset_commit(me, "g", std::slice::from_ref(&offset)),
        0
    );
    fx.offsets_fail_once.lock().unwrap().insert("g".into());
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(state(&store, "t"), TxnState::PrepareCommit);
    store.finish_prepared(&fx);
    assert_eq!(state(&store, "t"), TxnState::CompleteCommit);
    assert_eq!(sorted(&fx).len(), 4);
    assert_eq!(fx.offsets.lock().unwrap().len(), 2);

    // A restart forgets what was written (memory only): the next start
    // writes every marker of a prepared transaction again, as a new
    // Kafka coordinator does.
    store.add_partitions(&fx, me, &[tp("a", 0), tp("a", 1)], false);
    fx.fail_once.lock().unwrap().insert(tp("a", 1));
    assert_eq!(store.end_txn(&fx, me, false), 0);
    assert_eq!(sorted(&fx).len(), 5);
    drop(store);
    let store = open(dir.path());
    store.finish_prepared(&fx);
    assert_eq!(state(&store, "t"), TxnState::CompleteAbort);
    let aborts: Vec<Marker> = sorted(&fx).into_iter().filter(|m| !m.4).collect();
    assert_eq!(
        aborts,
        vec![
            ("a".into(), 0, pid, 0, false),
            ("a".into(), 0, pid, 0, false),
            ("a".into(), 1, pid, 0, false)
        ]
    );
}

/// Effects that, while writing a marker, run the periodic retry as the
/// broker's clock may at that moment: it finds the transaction being
/// written and leaves it, so no marker is written twice.
struct Reentrant<'a> {
    inner: Recorder,
    store: &'a TransactionStore,
}

impl TxnEffects for Reentrant<'_> {
    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.inner.partition_exists(topic, partition)
    }

    fn write_marker(
        &self,
        p: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        self.store.finish_prepared(&self.inner);
        self.inner
            .write_marker(p, producer_id, epoch, commit, coordinator_epoch)
    }

    fn complete_group(
        &self,
        group_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        self.inner
            .complete_group(group_id, producer_id, epoch, commit, coordinator_epoch)
    }

    fn commit_offsets(&self, group_id: &str, offsets: &[PendingOffset]) -> i16 {
        self.inner.commit_offsets(group_id, offsets)
    }
}

#[test]
fn a_retry_during_the_first_completion_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let fx = Reentrant {
        inner: Recorder::default(),
        store: &store,
    };
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let pid = store
        .init_producer_id(&ids, &fx, "t", 60_000, (-1, -1))
        .producer_id;
    let me = producer("t", pid, 0);
    store.add_partitions(&fx, me, &[tp("a", 0), tp("a", 1)], false);
    assert_eq!(store.end_txn(&fx, me, true), 0);
    assert_eq!(state(&store, "t"), TxnState::CompleteCommit);
    assert_eq!(
        *fx.inner.markers.lock().unwrap(),
        vec![("a".into(), 0, pid, 0, true), ("a".into(), 1, pid, 0, true)]
    );
}

/// `Logs` whose partitions cannot be read until [`GatedLogs::open_gate`]:
/// a leader's load of `__transaction_state` held in progress.
struct GatedLogs {
    logs: Logs,
    open: Mutex<bool>,
    opened: std::sync::Condvar,
}

impl GatedLogs {
    fn open_gate(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl crate::coordinator::offsets_log::OffsetsLog for GatedLogs {
    fn partitions(&self, create: bool) -> std::io::Result<Option<i32>> {
        self.logs.partitions(create)
    }

    fn append(&self, partition: i32, batch: &[u8]) -> std::io::Result<i64> {
        self.logs.append(partition, batch)
    }

    fn bounds(&self, partition: i32) -> std::io::Result<(i64, i64)> {
        // Bounded, so a failed test does not hang its runtime's shutdown.
        let open = self.open.lock().unwrap();
        let limit = std::time::Duration::from_secs(30);
        drop(
            self.opened
                .wait_timeout_while(open, limit, |open| !*open)
                .unwrap(),
        );
        self.logs.bounds(partition)
    }

    fn read(&self, partition: i32, offset: i64) -> std::io::Result<Vec<u8>> {
        self.logs.read(partition, offset)
    }
}

/// A cluster node elected leader of a partition answers its ids
/// COORDINATOR_LOAD_IN_PROGRESS until the partition is loaded (Kafka's
/// coordinator while it loads), then serves them from what it loaded;
/// ids of partitions it does not lead, and all of them once it resigns,
/// are NOT_COORDINATOR.
#[tokio::test(flavor = "multi_thread")]
async fn a_partition_being_loaded_answers_coordinator_load_in_progress() {
    use crate::coordinator::offsets_log::testing::PARTITIONS;
    use crate::transactions::state_topic::partition_for;
    let loading = ErrorCode::CoordinatorLoadInProgress.code();
    let elsewhere = ErrorCode::NotCoordinator.code();
    let dir = tempfile::tempdir().unwrap();
    let fx = Arc::new(Recorder::default());
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    // A producer written to the topic before this broker leads it.
    let written = open(dir.path()).init_producer_id(&ids, fx.as_ref(), "t", 60_000, (-1, -1));
    assert_eq!(written.error_code, 0);
    let partition = partition_for("t", PARTITIONS);
    let other_id = (0..)
        .map(|n| format!("other-{n}"))
        .find(|id| partition_for(id, PARTITIONS) != partition)
        .unwrap();

    let logs = Arc::new(GatedLogs {
        logs: Logs::open(dir.path(), TOPIC),
        open: Mutex::new(false),
        opened: std::sync::Condvar::new(),
    });
    let store =
        Arc::new(TransactionStore::open_in_cluster(logs.clone(), DEFAULT_MAX_TIMEOUT_MS).unwrap());
    assert_eq!(store.elsewhere("t"), Some(elsewhere), "not led yet");
    store.on_elected(partition, 1, fx.clone());
    assert_eq!(store.elsewhere("t"), Some(loading));
    assert_eq!(
        store.init_producer_id(&ids, fx.as_ref(), "t", 60_000, (-1, -1)),
        InitAnswer::failed(loading)
    );
    assert_eq!(store.describe("t").map(|d| d.state), Err(loading));
    assert_eq!(
        store.add_partitions(
            fx.as_ref(),
            producer("t", written.producer_id, 0),
            &[tp("a", 0)],
            false
        ),
        vec![loading]
    );
    assert_eq!(store.elsewhere(&other_id), Some(elsewhere));
    assert_eq!(
        store.coordinated_partitions(),
        BTreeMap::from([(partition, false)])
    );

    logs.open_gate();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.elsewhere("t").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "partition {partition} not loaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        store.coordinated_partitions(),
        BTreeMap::from([(partition, true)])
    );
    let loaded = store.describe("t").unwrap();
    assert_eq!(
        (loaded.producer_id, loaded.producer_epoch),
        (written.producer_id, 0)
    );
    assert_eq!(store.elsewhere(&other_id), Some(elsewhere));

    store.on_resigned(partition);
    assert_eq!(store.elsewhere("t"), Some(elsewhere));
    assert_eq!(store.describe("t").map(|d| d.state), Err(elsewhere));
}

/// The ISR of every write, held back while the gate is shut.
struct GatedReplication {
    open: tokio::sync::watch::Sender<bool>,
}

impl crate::coordinator::ReplicationWait for GatedReplication {
    fn replicated(&self, _: i32, _: i64) -> crate::coordinator::Waiting {
        let mut open = self.open.subscribe();
        Box::pin(async move {
            match open.wait_for(|open| *open).await {
                Ok(_) => ErrorCode::None.code(),
                Err(_) => ErrorCode::RequestTimedOut.code(),
            }
        })
    }
}

/// Runs `call` on a blocking thread; if it takes more than 5 s (it waits
/// for the records' lock), opens `gate` so that the blocked calls end,
/// then fails the test.
async fn promptly<T: Send + 'static>(
    gate: &GatedReplication,
    call: impl FnOnce() -> T + Send + 'static,
) -> T {
    let running = tokio::task::spawn_blocking(call);
    match tokio::time::timeout(std::time::Duration::from_secs(5), running).await {
        Ok(done) => done.unwrap(),
        Err(_) => {
            gate.open.send_replace(true);
            panic!("the call waited for another change's replication");
        }
    }
}

/// A change waiting for the in-sync replicas holds back only its own id
/// (Kafka's pending state): that id's next change is answered
/// CONCURRENT_TRANSACTIONS, while reads, produce verification and other
/// ids go on; memory shows the change once the ISR has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_waiting_for_its_replicas_holds_back_only_its_own_id() {
    use crate::coordinator::offsets_log::testing::PARTITIONS;
    let dir = tempfile::tempdir().unwrap();
    let fx = Arc::new(Recorder::default());
    let ids = ProducerIdManager::open(dir.path()).unwrap();
    let logs = Arc::new(Logs::open(dir.path(), TOPIC));
    // The topic exists (the controller's to create in a cluster).
    let created = crate::coordinator::offsets_log::OffsetsLog::partitions(logs.as_ref(), true);
    assert_eq!(created.unwrap(), Some(PARTITIONS));
    let store = Arc::new(TransactionStore::open_in_cluster(logs, DEFAULT_MAX_TIMEOUT_MS).unwrap());
    let (open, _) = tokio::sync::watch::channel(true);
    let gate = Arc::new(GatedReplication { open });
    store.wait_for_replication(gate.clone()).unwrap();
    for partition in 0..PARTITIONS {
        store.on_elected(partition, 1, fx.clone());
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store
        .coordinated_partitions()
        .values()
        .any(|loaded| !loaded)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "partitions not loaded"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let t = store.init_producer_id(&ids, fx.as_ref(), "t", 60_000, (-1, -1));
    let u = store.init_producer_id(&ids, fx.as_ref(), "u", 60_000, (-1, -1));
    assert_eq!((t.error_code, u.error_code), (0, 0));

    gate.open.send_replace(false);
    let adding = {
        let (store, fx) = (store.clone(), fx.clone());
        tokio::task::spawn_blocking(move || {
            store.add_partitions(
                fx.as_ref(),
                producer("t", t.producer_id, 0),
                &[tp("a", 0)],
                false,
            )
        })
    };
    while !crate::sync::lock(&store.writing).contains_key("t") {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let (waiting, fx2) = (store.clone(), fx.clone());
    let (t_state, u_state, again, listed, verified) = promptly(&gate, move || {
        (
            waiting.describe("t").map(|d| d.state),
            waiting.describe("u").map(|d| d.state),
            waiting.add_partitions(
                fx2.as_ref(),
                producer("t", t.producer_id, 0),
                &[tp("a", 1)],
                false,
            ),
            waiting.list(&[], &[], -1, 0).len(),
            waiting.includes_partition(t.producer_id, 0, "a", 0),
        )
    })
    .await;
    assert_eq!(
        t_state,
        Ok(TxnState::Empty),
        "not in memory before the ISR has it"
    );
    assert_eq!(u_state, Ok(TxnState::Empty));
    assert_eq!(again, vec![ErrorCode::ConcurrentTransactions.code()]);
    assert_eq!(listed, 2);
    assert!(!verified);
    assert!(!adding.is_finished(), "answered before the ISR had it");

    gate.open.send_replace(true);
    assert_eq!(adding.await.unwrap(), vec![ErrorCode::None.code()]);
    let described = store.describe("t").unwrap();
    assert_eq!(described.state, TxnState::Ongoing);
    assert_eq!(described.partitions, vec![tp("a", 0)]);
    assert!(store.includes_partition(t.producer_id, 0, "a", 0));
    assert!(crate::sync::lock(&store.writing).is_empty());
}
