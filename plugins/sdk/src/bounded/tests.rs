use bytes::BytesMut;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::catalog::{apis, Checked};
use super::*;

fn encode<R: Encodable>(request: &R, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    request.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

fn bounded<R: Request>(body: &[u8], version: i16) -> Result<R, DecodeError> {
    decode_bounded(
        body,
        version,
        R::header_version(version) >= 2,
        DECODE_BUDGET,
    )
}

/// The crate's own decoding (for bodies known to be safe to decode).
fn plain<R: Request>(body: &[u8], version: i16) -> R {
    R::decode(&mut bytes::Bytes::copy_from_slice(body), version).unwrap()
}

fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

#[test]
fn large_plain_fields_and_lengths_decode_as_they_are() {
    let partitions: Vec<FetchPartition> = (0..40)
        .map(|p| {
            FetchPartition::default()
                .with_partition(p * 1000)
                .with_partition_max_bytes(1 << 20)
                .with_fetch_offset(1 << 40)
        })
        .collect();
    let fetch = FetchRequest::default()
        .with_max_bytes(52_428_800)
        .with_max_wait_ms(500)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic("t"))
            .with_partitions(partitions)]);
    for version in [4, 11, 12, 13, 17] {
        let body = encode(&fetch, version);
        let decoded: FetchRequest = bounded(&body, version).unwrap();
        assert!(decoded == plain(&body, version), "v{version}");
        assert_eq!(decoded.max_bytes, 52_428_800);
        assert_eq!(decoded.topics[0].partitions[39].partition, 39_000);
    }
    // A records field of 100 KB: a large BYTES length, served as it is.
    let records = bytes::Bytes::from(vec![7u8; 100_000]);
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic("t"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    for version in [3, 8, 9, 12] {
        let body = encode(&produce, version);
        let decoded: ProduceRequest = bounded(&body, version).unwrap();
        assert!(decoded == produce, "v{version}");
    }
}

#[test]
fn large_arrays_that_fit_decode() {
    let topics: Vec<MetadataRequestTopic> = (0..70_000)
        .map(|i| MetadataRequestTopic::default().with_name(Some(topic(&format!("topic-{i}")))))
        .collect();
    let request = MetadataRequest::default().with_topics(Some(topics));
    for version in [0, 4, 9, 12] {
        let body = encode(&request, version);
        let decoded: MetadataRequest = bounded(&body, version).unwrap();
        assert!(decoded == request, "v{version}");
    }
}

#[test]
fn declared_counts_beyond_the_body_are_malformed() {
    // Metadata v1: topics INT32 count; v9: compact varint count.
    for count in [i32::MAX, 1 << 20, 20_000] {
        let mut body = count.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 1, b'a']);
        assert!(matches!(
            bounded::<MetadataRequest>(&body, 1),
            Err(DecodeError::Malformed(_))
        ));
    }
    for varint in [&[0xff, 0xff, 0xff, 0xff, 0x0f][..], &[0x80, 0x80, 0x04]] {
        let mut body = varint.to_vec();
        body.extend_from_slice(&[2, b'a', 0, 0, 0, 0]);
        assert!(matches!(
            bounded::<MetadataRequest>(&body, 9),
            Err(DecodeError::Malformed(_))
        ));
    }
    // A produce whose partition count is huge, inside a valid topic.
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i16).to_be_bytes()); // transactional id: null
    body.extend_from_slice(&(-1i16).to_be_bytes()); // acks
    body.extend_from_slice(&30_000i32.to_be_bytes()); // timeout
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    body.extend_from_slice(&[0, 1, b't']);
    body.extend_from_slice(&0x4000_0000i32.to_be_bytes()); // partitions
    assert!(matches!(
        bounded::<ProduceRequest>(&body, 3),
        Err(DecodeError::Malformed(_))
    ));
}

#[test]
fn a_request_too_large_to_decode_is_refused_before_it_allocates() {
    // 1.4 M empty topic names (2 bytes each on the wire, tens in memory).
    let count = 1_400_000i32;
    let mut body = count.to_be_bytes().to_vec();
    body.resize(4 + 2 * count as usize, 0);
    assert_eq!(
        bounded::<MetadataRequest>(&body, 1),
        Err(DecodeError::TooLarge)
    );
}

/// A seeded mutation run over every request type and version: no input
/// aborts the test process (a failed allocation would), and whatever the
/// bounded decode accepts, the crate decodes to the same request.
#[test]
fn seeded_mutations_of_every_request_never_trap() {
    let mut rng = SmallRng::seed_from_u64(0x6772_6567);
    let (mut inputs, mut decoded) = (0usize, 0usize);
    for api in apis() {
        for version in api.min_version..=api.max_version {
            let mut corpus = vec![api.sample(version)];
            for _ in 0..150 {
                let base = &corpus[rng.random_range(0..corpus.len())];
                let input = mutate(&mut rng, base);
                inputs += 1;
                match api.check(&input, version) {
                    Ok(Checked::Decoded) => {
                        decoded += 1;
                        if corpus.len() < 32 && input.len() > base.len() {
                            corpus.push(input);
                        }
                    }
                    Ok(_) => {}
                    Err(error) => panic!("{} v{version} {input:02x?}: {error}", api.name),
                }
            }
        }
    }
    eprintln!("bounded decode: {inputs} mutated inputs, {decoded} decoded, no trap");
    assert!(decoded > 0);
}

/// Bit flips, truncation, huge INT32/varint lengths, small counts (to grow
/// structure) and random tails.
pub(crate) fn mutate(rng: &mut SmallRng, base: &[u8]) -> Vec<u8> {
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
            2 => {
                let huge: [u8; 4] = [0x7f, 0xff, 0xff, rng.random()];
                splice(&mut out, at, &huge);
            }
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
