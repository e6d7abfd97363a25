//! The transaction coordinator's records as Kafka writes them to the
//! internal topic `__transaction_state` (Kafka's `TransactionLog`): which
//! partition a transactional id lives in, and each record's key and value.
//!
//! - The key is `TransactionLogKey` v0 behind its version (an int16 0):
//!   the transactional id as a string.
//! - The value is `TransactionLogValue` v1 (flexible) behind its version:
//!   producer id, epoch, timeout, state (Kafka's byte), the partitions by
//!   topic, last update and start timestamps, then tagged fields: Kafka's
//!   `PreviousProducerId` (tag 0) and, in a tag Kafka's reader skips as
//!   unknown ([`GREGOR_TAG`]), what Gregor keeps that Kafka keeps
//!   elsewhere: the previous producer id and epoch a retried
//!   InitProducerId may name (KIP-360; Kafka holds the epoch in memory
//!   only) and the consumer groups of the transaction with their pending
//!   offsets (Kafka writes those to `__consumer_offsets` as transactional
//!   records). v0 values, and v1 without Gregor's tag, read too.
//! - A null value (tombstone) deletes an expired id; compaction keeps the
//!   latest record per key.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::coordinator::offsets_log::InternalTopic;
use crate::coordinator::offsets_topic::{
    put_i16, put_i32, put_i64, put_string, put_unsigned_varint, Reader,
};
use crate::log::TopicPartition;

use super::{PendingOffset, TransactionalProducer, TxnState};

/// Kafka's internal topic of transaction state.
pub const TOPIC: &str = "__transaction_state";
/// Kafka's `transaction.state.log.num.partitions` (default 50).
pub const NUM_PARTITIONS: &str = "transaction.state.log.num.partitions";
/// Kafka's `transaction.state.log.replication.factor` (default 3).
pub const REPLICATION_FACTOR: &str = "transaction.state.log.replication.factor";
/// Kafka's `transaction.state.log.min.isr` (default 2).
pub const MIN_ISR: &str = "transaction.state.log.min.isr";
/// Kafka's `transaction.state.log.segment.bytes` (default 100 MiB).
pub const SEGMENT_BYTES: &str = "transaction.state.log.segment.bytes";

/// `__transaction_state` with its settings, for the host's topic log.
pub const INTERNAL_TOPIC: InternalTopic = InternalTopic {
    topic: TOPIC,
    num_partitions: NUM_PARTITIONS,
    replication_factor: REPLICATION_FACTOR,
    segment_bytes: SEGMENT_BYTES,
    min_isr: Some(MIN_ISR),
};

/// The tagged field of a value that holds what only Gregor reads.
pub const GREGOR_TAG: u64 = 1000;
const PREVIOUS_PRODUCER_ID_TAG: u64 = 0;

/// The partition of `__transaction_state` that holds `transactional_id`:
/// Kafka's `Utils.abs(transactionalId.hashCode) % partitions`, the same
/// hash the group coordinator uses.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator::offsets_topic::partition_for(transactional_id, partitions)
}

/// Kafka's byte for a state (`TransactionState.id`).
fn state_byte(state: TxnState) -> i8 {
    match state {
        TxnState::Empty => 0,
        TxnState::Ongoing => 1,
        TxnState::PrepareCommit => 2,
        TxnState::PrepareAbort => 3,
        TxnState::CompleteCommit => 4,
        TxnState::CompleteAbort => 5,
        TxnState::Dead => 6,
    }
}

fn state_of(byte: i8) -> Result<TxnState, String> {
    Ok(match byte {
        0 => TxnState::Empty,
        1 => TxnState::Ongoing,
        2 => TxnState::PrepareCommit,
        3 => TxnState::PrepareAbort,
        4 => TxnState::CompleteCommit,
        5 => TxnState::CompleteAbort,
        6 => TxnState::Dead,
        // PrepareEpochFence: Kafka's in-memory step before an abort, never
        // meant to outlive the write that follows; read as that abort.
        7 => TxnState::PrepareAbort,
        other => return Err(format!("transaction state {other}")),
    })
}

/// `TransactionLogKey` v0 for `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, 0);
    put_string(&mut out, transactional_id);
    out
}

/// The transactional id of a key (any key version Kafka reads: 0 and 1,
/// the same layout).
pub fn decode_key(bytes: &[u8]) -> Result<String, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("TransactionLogKey version {version}"));
    }
    r.string()
}

/// What Gregor's tag holds.
#[derive(Serialize, Deserialize)]
struct Extension {
    last_producer_id: i64,
    last_producer_epoch: i16,
    #[serde(default)]
    groups: BTreeMap<String, Vec<PendingOffset>>,
}

/// `TransactionLogValue` v1 of a record.
pub fn encode_value(record: &TransactionalProducer) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, 1);
    put_i64(&mut out, record.producer_id);
    put_i16(&mut out, record.producer_epoch);
    put_i32(&mut out, record.timeout_ms);
    out.push(state_byte(record.state) as u8);
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for p in &record.partitions {
        by_topic.entry(&p.topic).or_default().push(p.partition);
    }
    put_unsigned_varint(&mut out, by_topic.len() as u64 + 1);
    for (topic, partitions) in &by_topic {
        put_compact_string(&mut out, topic);
        put_unsigned_varint(&mut out, partitions.len() as u64 + 1);
        for partition in partitions {
            put_i32(&mut out, *partition);
        }
        put_unsigned_varint(&mut out, 0); // no tagged fields
    }
    put_i64(&mut out, record.updated_ms);
    put_i64(&mut out, record.start_ms);
    let extension = serde_json::to_vec(&Extension {
        last_producer_id: record.last_producer_id,
        last_producer_epoch: record.last_producer_epoch,
        groups: record.groups.clone(),
    })
    // Plain data (strings and numbers) always serializes.
    .unwrap_or_default();
    let previous = (record.last_producer_id >= 0 && record.last_producer_id != record.producer_id)
        .then_some(record.last_producer_id);
    put_unsigned_varint(&mut out, 1 + u64::from(previous.is_some()));
    if let Some(previous) = previous {
        put_unsigned_varint(&mut out, PREVIOUS_PRODUCER_ID_TAG);
        put_unsigned_varint(&mut out, 8);
        put_i64(&mut out, previous);
    }
    put_unsigned_varint(&mut out, GREGOR_TAG);
    put_unsigned_varint(&mut out, extension.len() as u64);
    out.extend_from_slice(&extension);
    out
}

/// A value of any version Kafka writes (0 and 1).
pub fn decode_value(bytes: &[u8]) -> Result<TransactionalProducer, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("TransactionLogValue version {version}"));
    }
    let flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state = state_of(r.take(1)?[0] as i8)?;
    let topics = if flexible {
        r.unsigned_varint()?.checked_sub(1)
    } else {
        u64::try_from(r.i32()?).ok()
    };
    let mut partitions = BTreeSet::new();
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            r.compact_string()?.unwrap_or_default()
        } else {
            r.string()?
        };
        let count = if flexible {
            r.unsigned_varint()?.saturating_sub(1)
        } else {
            u64::try_from(r.i32()?).unwrap_or(0)
        };
        for _ in 0..count {
            partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tags()?;
        }
    }
    let updated_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut previous_producer_id = -1;
    let mut extension: Option<Extension> = None;
    if flexible {
        for _ in 0..r.unsigned_varint()? {
            let tag = r.unsigned_varint()?;
            let size = usize::try_from(r.unsigned_varint()?).map_err(|_| "a tag too long")?;
            let data = r.take(size)?;
            match tag {
                PREVIOUS_PRODUCER_ID_TAG if size == 8 => {
                    previous_producer_id = Reader(data).i64()?;
                }
                GREGOR_TAG => {
                    extension = Some(
                        serde_json::from_slice(data)
                            .map_err(|error| format!("Gregor's tagged field: {error}"))?,
                    );
                }
                _ => {}
            }
        }
    }
    let (last_producer_id, last_producer_epoch, groups) = match extension {
        Some(e) => (e.last_producer_id, e.last_producer_epoch, e.groups),
        None => (previous_producer_id, -1, BTreeMap::new()),
    };
    Ok(TransactionalProducer {
        producer_id,
        producer_epoch,
        last_producer_id,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        groups,
        start_ms,
        updated_ms,
    })
}

fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    put_unsigned_varint(out, s.len() as u64 + 1);
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> TransactionalProducer {
        TransactionalProducer {
            producer_id: 4000,
            producer_epoch: 3,
            last_producer_id: 4000,
            last_producer_epoch: 2,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [
                TopicPartition::new("out", 0),
                TopicPartition::new("out", 2),
                TopicPartition::new("audit", 1),
            ]
            .into_iter()
            .collect(),
            groups: [(
                "g".to_string(),
                vec![PendingOffset {
                    topic: "in".into(),
                    partition: 0,
                    offset: 17,
                    leader_epoch: 1,
                    metadata: None,
                }],
            )]
            .into_iter()
            .collect(),
            start_ms: 1_700_000_000_000,
            updated_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_key("tx-1");
        assert_eq!(key, [0, 0, 0, 4, b't', b'x', b'-', b'1']);
        assert_eq!(decode_key(&key).unwrap(), "tx-1");
        let value = encode_value(&record());
        assert_eq!(&value[..2], &[0, 1]);
        assert_eq!(decode_value(&value).unwrap(), record());
        let empty = TransactionalProducer {
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            last_producer_id: -1,
            last_producer_epoch: -1,
            start_ms: -1,
            ..record()
        };
        assert_eq!(decode_value(&encode_value(&empty)).unwrap(), empty);
        assert!(decode_value(&value[..value.len() - 3]).is_err());
        assert!(decode_key(&[0, 9, 0, 0]).is_err());
    }

    /// A value as Kafka's generated code writes it (v0, and v1 without
    /// Gregor's tag) reads with Kafka's fields.
    #[test]
    fn kafkas_values_read() {
        let mut v0 = Vec::new();
        put_i16(&mut v0, 0);
        put_i64(&mut v0, 7);
        put_i16(&mut v0, 1);
        put_i32(&mut v0, 30_000);
        v0.push(1); // Ongoing
        put_i32(&mut v0, 1);
        put_string(&mut v0, "t");
        put_i32(&mut v0, 2);
        put_i32(&mut v0, 0);
        put_i32(&mut v0, 5);
        put_i64(&mut v0, 99);
        put_i64(&mut v0, 90);
        let read = decode_value(&v0).unwrap();
        assert_eq!((read.producer_id, read.producer_epoch), (7, 1));
        assert_eq!(read.state, TxnState::Ongoing);
        assert_eq!(
            read.partitions.into_iter().collect::<Vec<_>>(),
            vec![TopicPartition::new("t", 0), TopicPartition::new("t", 5)]
        );
        assert_eq!((read.updated_ms, read.start_ms), (99, 90));
        assert_eq!((read.last_producer_id, read.last_producer_epoch), (-1, -1));

        let mut v1 = Vec::new();
        put_i16(&mut v1, 1);
        put_i64(&mut v1, 8);
        put_i16(&mut v1, 0);
        put_i32(&mut v1, 30_000);
        v1.push(5); // CompleteAbort
        put_unsigned_varint(&mut v1, 0); // null partitions
        put_i64(&mut v1, 10);
        put_i64(&mut v1, -1);
        put_unsigned_varint(&mut v1, 2);
        put_unsigned_varint(&mut v1, 0); // PreviousProducerId
        put_unsigned_varint(&mut v1, 8);
        put_i64(&mut v1, 6);
        put_unsigned_varint(&mut v1, 2); // ClientTransactionVersion
        put_unsigned_varint(&mut v1, 2);
        put_i16(&mut v1, 2);
        let read = decode_value(&v1).unwrap();
        assert_eq!(read.state, TxnState::CompleteAbort);
        assert!(read.partitions.is_empty());
        assert_eq!(read.last_producer_id, 6);
    }
}
