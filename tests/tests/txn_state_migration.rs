//! Upgrading a single node whose transaction coordinator kept its state in
//! `transactions.journal` (the releases before `__transaction_state`,
//! issue 15 item 3). `tests/fixtures/txn-journal-datadir` is a data
//! directory that release wrote with confluent-kafka (its README says
//! how); the current broker starts on a copy of it and, with real clients:
//!
//! - the committed transactions' records are read_committed, the aborted
//!   one's are not (read_uncommitted shows every record: nothing lost);
//! - the transaction left ongoing is aborted once its
//!   `transaction.timeout.ms` has passed, as Kafka's coordinator does: its
//!   epoch bumped, its markers written, every partition's last stable
//!   offset moved on to the high watermark (and a committed transaction
//!   behind it visible), the offsets it sent for a group dropped;
//! - the groups' offsets, committed ordinarily and with a transaction,
//!   are there with their metadata;
//! - every transactional id keeps its producer id and epoch: the next
//!   InitProducerId bumps the epoch, the fixture's producer is fenced, a
//!   new transactional id gets an id the old release never handed out,
//!   and a real transactional producer goes on with the id;
//! - the journal is renamed `transactions.journal.migrated`, and all of it
//!   holds after another restart, from the topic alone.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use gregor_tests::cluster::{call, script_json};
use gregor_tests::kafka::{self, Isolation, CALL_TIMEOUT};
use gregor_tests::{wait_for, workspace_root, Broker};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeTransactionsRequest, InitProducerIdRequest, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::Producer;
use serde_json::{json, Value};

const TOPIC: &str = "legacy-txn";
const PRODUCER_FENCED: i16 = 90;
const WAIT: Duration = Duration::from_secs(30);

/// A transactional id's producer as the fixture's journal holds it.
#[derive(Clone, Copy, Debug)]
struct Legacy {
    producer_id: i64,
    producer_epoch: i16,
}

/// The latest journal line of each transactional id in the fixture (the
/// journal's own rule: the last line per id wins).
fn journal_producers(fixture: &Path) -> BTreeMap<String, (Legacy, String)> {
    let text = fs::read_to_string(fixture.join("transactions.journal")).expect("the journal");
    let mut latest = BTreeMap::new();
    for line in text.lines() {
        let entry: Value = serde_json::from_str(line).expect("a journal line");
        let id = entry["id"].as_str().expect("an id").to_string();
        let record = &entry["record"];
        let legacy = Legacy {
            producer_id: record["producer_id"].as_i64().expect("a producer id"),
            producer_epoch: record["producer_epoch"].as_i64().expect("an epoch") as i16,
        };
        let state = record["state"].as_str().expect("a state").to_string();
        latest.insert(id, (legacy, state));
    }
    latest
}

fn transactional_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// DescribeTransactions v0: (state, producer id, epoch), or the error.
fn describe(broker: &Broker, id: &str) -> Result<(String, i64, i16), i16> {
    let request =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![transactional_id(id)]);
    let response = call(broker.addr(), &request, 0).expect("a DescribeTransactions answer");
    let state = response.transaction_states.first().expect("one state");
    if state.error_code != 0 {
        return Err(state.error_code);
    }
    Ok((
        state.transaction_state.to_string(),
        state.producer_id.0,
        state.producer_epoch,
    ))
}

/// InitProducerId v4 for `id`, as a new producer instance sends it:
/// (error, producer id, epoch).
fn init_producer_id(broker: &Broker, id: &str) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(transactional_id(id)))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = call(broker.addr(), &request, 4).expect("an InitProducerId answer");
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// AddPartitionsToTxn v3 (a client's) from `producer` of `id`: the error
/// of partition 0 of [`TOPIC`].
fn add_partition(broker: &Broker, id: &str, producer: Legacy) -> i16 {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(transactional_id(id))
        .with_v3_and_below_producer_id(ProducerId(producer.producer_id))
        .with_v3_and_below_producer_epoch(producer.producer_epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![0])]);
    let response = call(broker.addr(), &request, 3).expect("an AddPartitionsToTxn answer");
    response
        .results_by_topic_v3_and_below
        .first()
        .and_then(|topic| topic.results_by_partition.first())
        .expect("a partition result")
        .partition_error_code
}

/// The committed offset and metadata of partition 0 of `legacy-in` for
/// `group`, as confluent-kafka reads them.
fn committed(broker: &Broker, group: &str) -> Value {
    script_json(
        "offsets_topic.py",
        &["committed", &broker.bootstrap(), group, "legacy-in", "1"],
    )["0"]
        .clone()
}

fn values(list: &[&str]) -> Vec<String> {
    list.iter().map(|v| v.to_string()).collect()
}

/// What the fixture's partitions of [`TOPIC`] hold, in offset order, at
/// `isolation`, once the ongoing transaction is aborted.
fn expected(isolation: Isolation) -> BTreeMap<i32, Vec<String>> {
    match isolation {
        Isolation::ReadCommitted => BTreeMap::from([
            (0, values(&["c-0", "c-1", "c-2", "o-0", "late-0"])),
            (1, values(&["c-3", "late-1"])),
        ]),
        Isolation::ReadUncommitted => BTreeMap::from([
            (
                0,
                values(&["c-0", "c-1", "c-2", "a-0", "a-1", "o-0", "g-0", "late-0"]),
            ),
            (1, values(&["c-3", "a-2", "g-1", "late-1"])),
        ]),
    }
}

async fn check_records(broker: &Broker) {
    for isolation in [Isolation::ReadCommitted, Isolation::ReadUncommitted] {
        let want = expected(isolation);
        let at_least = want.values().map(Vec::len).sum();
        let got = kafka::read_values(broker, TOPIC, 2, isolation, at_least, WAIT).await;
        assert_eq!(got, want, "{TOPIC} read {}", isolation.as_str());
    }
    // Each partition: its records, one marker per transaction (the
    // ongoing one's abort marker included), nothing open.
    let high = kafka::end_offsets(broker, TOPIC, 2, Isolation::ReadUncommitted);
    assert_eq!(high, vec![8 + 5, 4 + 4], "high watermarks");
    let stable = kafka::end_offsets(broker, TOPIC, 2, Isolation::ReadCommitted);
    assert_eq!(stable, high, "last stable offsets");
}

fn check_groups(broker: &Broker) {
    assert_eq!(committed(broker, "legacy-plain"), json!([4, "plain-meta"]));
    assert_eq!(
        committed(broker, "legacy-txn-group"),
        json!([3, "txn-meta"])
    );
    // The ongoing transaction's offsets went with its abort.
    assert_eq!(
        committed(broker, "legacy-pending-group"),
        json!([-1001, null])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_data_directory_with_transactions_journal_is_migrated_with_nothing_lost() {
    let fixture = workspace_root().join("tests/fixtures/txn-journal-datadir");
    let legacy = journal_producers(&fixture);
    let state_of = |id: &str| legacy[id].1.as_str();
    assert_eq!(state_of("legacy-committed"), "CompleteCommit");
    assert_eq!(state_of("legacy-aborted"), "CompleteAbort");
    assert_eq!(state_of("legacy-offsets"), "CompleteCommit");
    assert_eq!(state_of("legacy-ongoing"), "Ongoing");
    let producer = |id: &str| legacy[id].0;

    let mut broker = Broker::start_on_copy_of(
        &fixture,
        &[
            // The ongoing transaction's timeout passed long ago: the first
            // look for timed-out transactions aborts it.
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                "500",
            ),
            // The fixture's ids and offsets are old: keep them however old
            // (Kafka's 7-day defaults would forget them as the fixture ages).
            ("transactional.id.expiration.ms", "3153600000000"),
            ("offsets.retention.minutes", "52560000"),
        ],
    );
    let data = broker.data_dir().to_path_buf();
    assert!(
        !data.join("transactions.journal").exists(),
        "journal retired"
    );
    assert!(data.join("transactions.journal.migrated").is_file());

    let ongoing = producer("legacy-ongoing");
    let aborted = wait_for("legacy-ongoing aborted by its timeout", WAIT, || {
        describe(&broker, "legacy-ongoing")
            .ok()
            .filter(|(state, _, _)| state == "CompleteAbort")
    });
    assert_eq!(
        (aborted.1, aborted.2),
        (ongoing.producer_id, ongoing.producer_epoch + 1),
        "the timeout abort bumps the epoch"
    );
    for (id, state) in [
        ("legacy-committed", "CompleteCommit"),
        ("legacy-aborted", "CompleteAbort"),
        ("legacy-offsets", "CompleteCommit"),
    ] {
        let was = producer(id);
        assert_eq!(
            describe(&broker, id),
            Ok((state.to_string(), was.producer_id, was.producer_epoch)),
            "{id}"
        );
    }
    check_records(&broker).await;
    check_groups(&broker);

    // Another restart: all of it from __transaction_state alone.
    broker.restart();
    assert!(!data.join("transactions.journal").exists());
    assert_eq!(
        describe(&broker, "legacy-ongoing"),
        Ok((
            "CompleteAbort".to_string(),
            ongoing.producer_id,
            ongoing.producer_epoch + 1
        ))
    );
    check_records(&broker).await;
    check_groups(&broker);

    // The producers go on where the old release left them: the next
    // instance bumps the epoch and fences the fixture's producer.
    for (id, bump) in [
        ("legacy-committed", 1),
        ("legacy-aborted", 1),
        ("legacy-ongoing", 2),
    ] {
        let was = producer(id);
        assert_eq!(
            init_producer_id(&broker, id),
            (0, was.producer_id, was.producer_epoch + bump),
            "InitProducerId for {id}"
        );
        assert_eq!(add_partition(&broker, id, was), PRODUCER_FENCED, "{id}");
    }
    // Ids are never handed out twice: the old release reserved up to the
    // end of its block, and a new id comes after it.
    let reserved: i64 = fs::read_to_string(fixture.join("producer-id-block"))
        .expect("the old release's producer id block")
        .trim()
        .parse()
        .expect("a producer id");
    let (error, fresh, epoch) = init_producer_id(&broker, "legacy-new");
    assert_eq!((error, epoch), (0, 0));
    assert!(
        fresh >= reserved,
        "new producer id {fresh} below {reserved}"
    );
    assert!(legacy.values().all(|(l, _)| l.producer_id != fresh));

    // A real transactional producer takes over legacy-offsets and commits.
    let real = kafka::transactional_producer(&broker, "legacy-offsets", &[]);
    tokio::task::block_in_place(|| real.init_transactions(CALL_TIMEOUT)).expect("init");
    real.begin_transaction().expect("begin");
    kafka::send_values(&real, TOPIC, 1, &values(&["after-upgrade"])).await;
    tokio::task::block_in_place(|| real.commit_transaction(CALL_TIMEOUT)).expect("commit");
    let was = producer("legacy-offsets");
    assert_eq!(
        describe(&broker, "legacy-offsets"),
        Ok((
            "CompleteCommit".to_string(),
            was.producer_id,
            was.producer_epoch + 1
        ))
    );
    let mut want = expected(Isolation::ReadCommitted);
    want.entry(0).or_default().push("after-upgrade".into());
    let got = kafka::read_values(&broker, TOPIC, 2, Isolation::ReadCommitted, 8, WAIT).await;
    assert_eq!(got, want);
}
