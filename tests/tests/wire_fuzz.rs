//! Seeded wire fuzzing: for every API the broker advertises, and every
//! version of it, a valid request (encoded with `kafka-protocol`) and
//! mutations of it (bit flips, truncation, huge INT32 and varint lengths,
//! small counts, random tails) go over raw TCP, each on its own
//! connection. Any answer is fine (an error answer, a closed connection,
//! a request still waiting): what counts is that the broker keeps serving
//! (a fresh client gets ApiVersions and Metadata answered after each API)
//! and that no handler module traps (`gregor_plugin_traps_total`).
//!
//! APIs that create partitions (CreateTopics, CreatePartitions,
//! AlterPartitionReassignments) run against a second broker whose
//! authorizer denies everything: their counts are bounded elsewhere, and
//! a mutated count must not make this test create a million partitions.
//!
//! Also: a Metadata request naming 1.4 M topics (36 MB) is refused as too
//! large (v13 answers INVALID_REQUEST, older versions close the
//! connection) without a trap, and the broker keeps serving.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gregor_tests::wire::{metadata_request, put_i16, put_i32, request_frame, Conn};
use gregor_tests::{scrape_metrics, start_with_admin, Broker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const SEED: u64 = 0x5EED_6E60;
/// Mutations per sample and version.
const MUTATIONS: usize = 16;
/// How long a batch (one API) may wait for its answers.
const BATCH_WAIT: Duration = Duration::from_secs(2);
const INVALID_REQUEST: i16 = 42;

/// APIs sent to the deny-all broker (see the module docs).
const CREATING: [i16; 3] = [19, 37, 45];

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn encode<R: Encodable>(request: &R, version: i16) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    request.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

macro_rules! default_body {
    ($key:expr, $version:expr, $($ty:ident),* $(,)?) => {
        match $key {
            $(k if k == <$ty as Request>::KEY => encode(&$ty::default(), $version),)*
            _ => None,
        }
    };
}

/// Valid bodies for `key` at `version`: the default request, and for the
/// common APIs one with topics and partitions in it.
fn samples(key: i16, version: i16) -> Vec<Vec<u8>> {
    let default = default_body!(
        key,
        version,
        ProduceRequest,
        FetchRequest,
        ListOffsetsRequest,
        MetadataRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        FindCoordinatorRequest,
        JoinGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        SyncGroupRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        SaslHandshakeRequest,
        ApiVersionsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DeleteRecordsRequest,
        InitProducerIdRequest,
        OffsetForLeaderEpochRequest,
        AddPartitionsToTxnRequest,
        AddOffsetsToTxnRequest,
        EndTxnRequest,
        WriteTxnMarkersRequest,
        TxnOffsetCommitRequest,
        DescribeAclsRequest,
        CreateAclsRequest,
        DeleteAclsRequest,
        DescribeConfigsRequest,
        AlterConfigsRequest,
        AlterReplicaLogDirsRequest,
        DescribeLogDirsRequest,
        SaslAuthenticateRequest,
        CreatePartitionsRequest,
        CreateDelegationTokenRequest,
        RenewDelegationTokenRequest,
        ExpireDelegationTokenRequest,
        DescribeDelegationTokenRequest,
        DeleteGroupsRequest,
        ElectLeadersRequest,
        IncrementalAlterConfigsRequest,
        AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest,
        OffsetDeleteRequest,
        DescribeClientQuotasRequest,
        AlterClientQuotasRequest,
        DescribeUserScramCredentialsRequest,
        AlterUserScramCredentialsRequest,
        DescribeProducersRequest,
        DescribeTransactionsRequest,
        ListTransactionsRequest,
        DescribeClusterRequest,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupDescribeRequest,
        GetTelemetrySubscriptionsRequest,
        PushTelemetryRequest,
        UpdateFeaturesRequest,
        DescribeTopicPartitionsRequest,
        ListConfigResourcesRequest,
    );
    let rich = match key {
        3 => encode(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(name("fuzz-a")))),
                MetadataRequestTopic::default().with_name(Some(TopicName(name("fuzz-b")))),
            ])),
            version,
        ),
        0 => encode(
            &ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(name("fuzz-a")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(bytes::Bytes::from(vec![0u8; 70])))])]),
            version,
        ),
        1 => encode(
            &FetchRequest::default()
                .with_max_wait_ms(10)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(name("fuzz-a")))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20)])]),
            version,
        ),
        2 => encode(
            &ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(name("fuzz-a")))
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])]),
            version,
        ),
        8 => encode(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(name("fuzz-group")))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(name("fuzz-a")))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default().with_committed_offset(5)
                    ])]),
            version,
        ),
        10 => encode(
            &FindCoordinatorRequest::default()
                .with_key(name("fuzz-group"))
                .with_coordinator_keys(vec![name("fuzz-group")]),
            version,
        ),
        19 => encode(
            &CreateTopicsRequest::default()
                .with_timeout_ms(1000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(name("fuzz-new")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
            version,
        ),
        _ => None,
    };
    default.into_iter().chain(rich).collect()
}

/// The samples of `version`, or for a version older than `kafka-protocol`
/// knows (one Kafka 4 removed and Gregor serves, rewritten by the SDK) the
/// next version's: bodies close to the old one's, mostly malformed for it.
fn samples_or_newer(key: i16, version: i16, max: i16) -> Vec<Vec<u8>> {
    (version..=max)
        .map(|v| samples(key, v))
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

/// Bit flips, truncation, huge INT32/varint lengths, small counts (to grow
/// structure) and random tails.
fn mutate(rng: &mut SmallRng, base: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.random_range(0..out.len())
        };
        match rng.random_range(0..7) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.random_range(0..8),
            1 => out.truncate(at),
            2 => splice(&mut out, at, &[0x7f, 0xff, 0xff, rng.random()]),
            3 => splice(&mut out, at, &[0xff, 0xff, 0xff, 0xff, 0x07]),
            4 => splice(&mut out, at, &[0, 0, 0, rng.random_range(1..4)]),
            5 => {
                let tail: Vec<u8> = (0..rng.random_range(1..24)).map(|_| rng.random()).collect();
                out.extend_from_slice(&tail);
            }
            _ => out.insert(at.min(out.len()), rng.random_range(1..4)),
        }
    }
    out
}

fn splice(out: &mut Vec<u8>, at: usize, with: &[u8]) {
    let at = at.min(out.len());
    let end = (at + with.len()).min(out.len());
    out.splice(at..end, with.iter().copied());
}

fn flexible(key: i16, version: i16) -> bool {
    ApiKey::try_from(key).is_ok_and(|api| api.request_header_version(version) >= 2)
}

#[derive(Default, Debug)]
struct Tally {
    inputs: usize,
    answered: usize,
    closed: usize,
    waiting: usize,
}

/// What became of one input's connection by the batch deadline.
fn outcome(conn: &mut Conn, deadline: Instant, tally: &mut Tally) {
    let wait = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let _ = conn.stream.set_read_timeout(Some(wait));
    match conn.read_frame() {
        Ok(_) => tally.answered += 1,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            tally.waiting += 1
        }
        Err(_) => tally.closed += 1,
    }
}

/// Sends every input for one API (each on its own connection), then
/// collects the outcomes within [`BATCH_WAIT`].
fn send_batch(broker: &Broker, key: i16, inputs: &[(i16, Vec<u8>)], tally: &mut Tally) {
    let mut conns = Vec::new();
    for (i, (version, body)) in inputs.iter().enumerate() {
        let mut conn = Conn::connect(broker.addr());
        let frame = request_frame(key, *version, i as i32, flexible(key, *version), body);
        tally.inputs += 1;
        match conn.send(&frame) {
            Ok(()) => conns.push(conn),
            Err(_) => tally.closed += 1,
        }
    }
    let deadline = Instant::now() + BATCH_WAIT;
    for conn in &mut conns {
        outcome(conn, deadline, tally);
    }
}

/// A fresh client gets ApiVersions and Metadata answered.
fn assert_serving(broker: &Broker, after: &str) {
    let mut conn = Conn::connect(broker.addr());
    conn.api_versions(7_001);
    let response = conn.round_trip(&metadata_request(1, 7_002), 7_002);
    assert!(response.len() > 4, "Metadata after {after}: no body");
}

/// Sum of a counter over all its label sets.
fn total(metrics: &str, family: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(&format!("{family}{{")))
        .filter_map(|line| line.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The per-plugin lines of a counter that are not zero.
fn nonzero(metrics: &str, family: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|line| line.starts_with(&format!("{family}{{")) && !line.ends_with(" 0"))
        .map(str::to_string)
        .collect()
}

/// Fuzzes the APIs `keep` selects on `broker`; returns the tally.
fn fuzz(broker: &Broker, rng: &mut SmallRng, keep: impl Fn(i16) -> bool) -> Tally {
    let versions = Conn::connect(broker.addr()).api_versions(1);
    let mut tally = Tally::default();
    for range in versions.apis.iter().filter(|r| keep(r.api_key)) {
        let mut inputs = Vec::new();
        for version in range.min_version..=range.max_version {
            for sample in samples_or_newer(range.api_key, version, range.max_version) {
                for _ in 0..MUTATIONS {
                    inputs.push((version, mutate(rng, &sample)));
                }
                inputs.push((version, sample));
            }
        }
        send_batch(broker, range.api_key, &inputs, &mut tally);
        assert_serving(broker, &format!("fuzzing ApiKey {}", range.api_key));
    }
    tally
}

fn report(what: &str, broker: &mut Broker, admin: &str, tally: &Tally) -> u64 {
    assert!(broker.is_running(), "the broker exited ({what})");
    let metrics = scrape_metrics(admin);
    let traps = total(&metrics, "gregor_plugin_traps_total");
    let timeouts = total(&metrics, "gregor_plugin_timeouts_total");
    eprintln!(
        "wire fuzz ({what}): {} inputs, {} answered, {} closed, {} still waiting; {traps} traps, {timeouts} timeouts",
        tally.inputs, tally.answered, tally.closed, tally.waiting
    );
    for line in nonzero(&metrics, "gregor_plugin_traps_total") {
        eprintln!("  {line}");
    }
    if traps > 0 {
        eprintln!("broker log:\n{}", broker.log_tail(60));
    }
    traps
}

#[test]
fn mutated_requests_for_every_api_never_trap() {
    let mut rng = SmallRng::seed_from_u64(SEED);

    let (mut open, admin) = start_with_admin(&[]);
    let tally = fuzz(&open, &mut rng, |key| !CREATING.contains(&key));
    let open_traps = report("open broker", &mut open, &admin, &tally);
    assert!(tally.inputs > 1000, "too few inputs: {tally:?}");

    let (mut denied, admin) =
        start_with_admin(&[("authorizer", "authorizer_acl"), ("admin.auth", "none")]);
    let tally = fuzz(&denied, &mut rng, |key| CREATING.contains(&key));
    let denied_traps = report(
        "deny-all broker, creating APIs",
        &mut denied,
        &admin,
        &tally,
    );

    assert_eq!(open_traps + denied_traps, 0, "handler modules trapped");
}

/// A Metadata body naming `count` topics of 25 bytes each (27 bytes a
/// topic in the classic versions, 43 with the topic id and tags of v10+).
fn huge_metadata_body(version: i16, count: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(8 + count * 24);
    if version >= 9 {
        let mut n = count as u32 + 1;
        while n >= 0x80 {
            body.push((n as u8) | 0x80);
            n >>= 7;
        }
        body.push(n as u8);
    } else {
        put_i32(&mut body, count as i32);
    }
    for i in 0..count {
        let topic = format!("fuzz-topic-{i:014}");
        if version >= 10 {
            body.extend_from_slice(&[0; 16]);
        }
        if version >= 9 {
            body.push(topic.len() as u8 + 1);
        } else {
            put_i16(&mut body, topic.len() as i16);
        }
        body.extend_from_slice(topic.as_bytes());
        if version >= 9 {
            body.push(0);
        }
    }
    if version >= 4 {
        body.push(0);
    }
    if (8..=10).contains(&version) {
        body.push(0);
    }
    if version >= 8 {
        body.push(0);
    }
    if version >= 9 {
        body.push(0);
    }
    body
}

#[test]
fn metadata_naming_too_many_topics_is_refused_without_a_trap() {
    let (broker, admin) = start_with_admin(&[]);
    let count = 1_400_000;

    // v1: 36 MiB, no top-level error code: the connection is closed.
    let body = huge_metadata_body(1, count);
    assert!(body.len() > 36 << 20, "{} bytes", body.len());
    let mut conn = Conn::connect(broker.addr());
    conn.send(&request_frame(3, 1, 11, false, &body))
        .expect("send the large request");
    conn.expect_closed("Metadata v1 naming 1.4 M topics");
    assert_serving(&broker, "Metadata v1 naming 1.4 M topics");

    // v13: answered with a top-level INVALID_REQUEST.
    let body = huge_metadata_body(13, count);
    let mut conn = Conn::connect(broker.addr());
    let payload = conn.round_trip(&request_frame(3, 13, 12, true, &body), 12);
    // correlation id, header tags, throttle, brokers (empty), cluster id
    // (null), controller, topics (empty), top-level error code, tags.
    let error = i16::from_be_bytes([payload[payload.len() - 3], payload[payload.len() - 2]]);
    assert_eq!(error, INVALID_REQUEST, "v13 top-level error: {payload:?}");
    assert_serving(&broker, "Metadata v13 naming 1.4 M topics");

    let traps = total(&scrape_metrics(&admin), "gregor_plugin_traps_total");
    assert_eq!(traps, 0, "the Metadata module trapped");
}
