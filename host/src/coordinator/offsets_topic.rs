//! The group coordinator's records as Kafka writes them to the internal
//! topic `__consumer_offsets`: which partition a group lives in, and the
//! key and value bytes of each record.
//!
//! A key starts with its record type (an int16, Kafka's
//! `CoordinatorRecordType`: 1 OffsetCommit, 2 GroupMetadata, 3
//! ConsumerGroupMetadata, 4-8 a consumer group's members and assignments
//! ([`super::consumer_records`]); type 0, the old OffsetCommit key, is read
//! as 1), then the key's fields; a value starts with its own version.
//! Written:
//! - `OffsetCommitKey` (group, topic, partition) with `OffsetCommitValue`
//!   v3 (offset, leader epoch, metadata, commit timestamp), or v1 when the
//!   commit carries an explicit expiry (offset, metadata, commit and
//!   expire timestamps), as Kafka picks;
//! - `GroupMetadataKey` (group) with `GroupMetadataValue` v3 (protocol
//!   type, generation, protocol, leader, state timestamp, members with
//!   instance id, client id and host, timeouts, subscription, assignment);
//! - `ConsumerGroupMetadataKey` (group) with `ConsumerGroupMetadataValue`
//!   v0 (flexible: the epoch, then tagged fields; the group's state
//!   timestamp goes in tag 1, Kafka's creation time, which the coordinator
//!   sets when the group's epoch changes);
//! - a null value (tombstone) deletes its key; compaction (the topic is
//!   `cleanup.policy=compact`) keeps the latest record per key.
//!
//! Decoding reads every version Kafka has written of these values, so a
//! topic written by Kafka's rules reads back here.

use super::store::{GroupRecord, MemberRecord, OffsetRecord};

/// Kafka's internal topic of group state.
pub const TOPIC: &str = "__consumer_offsets";

const OFFSET_COMMIT: i16 = 1;
const LEGACY_OFFSET_COMMIT: i16 = 0;
const GROUP_METADATA: i16 = 2;
const CONSUMER_GROUP_METADATA: i16 = 3;
const CONSUMER_PARTITION_METADATA: i16 = 4;
const CONSUMER_MEMBER_METADATA: i16 = 5;
const CONSUMER_TARGET_METADATA: i16 = 6;
const CONSUMER_TARGET_MEMBER: i16 = 7;
const CONSUMER_CURRENT_ASSIGNMENT: i16 = 8;

/// The partition of `__consumer_offsets` that holds `group`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions` (Java's String.hashCode
/// over UTF-16 units; abs as Kafka's, which maps MIN_VALUE to 0).
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Utils.abs: Math.abs, except MIN_VALUE (its own negation) gives 0.
    hash.checked_abs().unwrap_or(0) % partitions.max(1)
}

/// What a record's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group(String),
    ConsumerGroup(String),
    /// Type 4: the subscribed topics' metadata.
    ConsumerTopics(String),
    /// Type 5: a member's metadata and subscription.
    ConsumerMember {
        group: String,
        member: String,
    },
    /// Type 6: the target assignment's epoch.
    ConsumerTargetEpoch(String),
    /// Type 7: a member's target assignment.
    ConsumerTarget {
        group: String,
        member: String,
    },
    /// Type 8: a member's current assignment.
    ConsumerAssignment {
        group: String,
        member: String,
    },
}

impl Key {
    pub fn group(&self) -> &str {
        match self {
            Key::Offset { group, .. }
            | Key::Group(group)
            | Key::ConsumerGroup(group)
            | Key::ConsumerTopics(group)
            | Key::ConsumerMember { group, .. }
            | Key::ConsumerTargetEpoch(group)
            | Key::ConsumerTarget { group, .. }
            | Key::ConsumerAssignment { group, .. } => group,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Key::Offset {
                group,
                topic,
                partition,
            } => {
                put_i16(&mut out, OFFSET_COMMIT);
                put_string(&mut out, group);
                put_string(&mut out, topic);
                put_i32(&mut out, *partition);
            }
            Key::Group(group) => {
                put_i16(&mut out, GROUP_METADATA);
                put_string(&mut out, group);
            }
            Key::ConsumerGroup(group) => {
                put_i16(&mut out, CONSUMER_GROUP_METADATA);
                put_string(&mut out, group);
            }
            Key::ConsumerTopics(group) => {
                put_i16(&mut out, CONSUMER_PARTITION_METADATA);
                put_string(&mut out, group);
            }
            Key::ConsumerTargetEpoch(group) => {
                put_i16(&mut out, CONSUMER_TARGET_METADATA);
                put_string(&mut out, group);
            }
            Key::ConsumerMember { group, member } => {
                put_i16(&mut out, CONSUMER_MEMBER_METADATA);
                put_string(&mut out, group);
                put_string(&mut out, member);
            }
            Key::ConsumerTarget { group, member } => {
                put_i16(&mut out, CONSUMER_TARGET_MEMBER);
                put_string(&mut out, group);
                put_string(&mut out, member);
            }
            Key::ConsumerAssignment { group, member } => {
                put_i16(&mut out, CONSUMER_CURRENT_ASSIGNMENT);
                put_string(&mut out, group);
                put_string(&mut out, member);
            }
        }
        out
    }

    /// The key, or `None` for a record type the group coordinator does
    /// not keep (share and streams groups...).
    pub fn decode(bytes: &[u8]) -> Result<Option<Key>, String> {
        let mut r = Reader(bytes);
        let kind = r.i16()?;
        let key = match kind {
            LEGACY_OFFSET_COMMIT | OFFSET_COMMIT => Key::Offset {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            },
            GROUP_METADATA => Key::Group(r.string()?),
            CONSUMER_GROUP_METADATA => Key::ConsumerGroup(r.string()?),
            CONSUMER_PARTITION_METADATA => Key::ConsumerTopics(r.string()?),
            CONSUMER_TARGET_METADATA => Key::ConsumerTargetEpoch(r.string()?),
            CONSUMER_MEMBER_METADATA => Key::ConsumerMember {
                group: r.string()?,
                member: r.string()?,
            },
            CONSUMER_TARGET_MEMBER => Key::ConsumerTarget {
                group: r.string()?,
                member: r.string()?,
            },
            CONSUMER_CURRENT_ASSIGNMENT => Key::ConsumerAssignment {
                group: r.string()?,
                member: r.string()?,
            },
            _ => return Ok(None),
        };
        Ok(Some(key))
    }
}

pub fn encode_offset(value: &OffsetRecord) -> Vec<u8> {
    let mut out = Vec::new();
    match value.expire_timestamp {
        Some(expire) => {
            put_i16(&mut out, 1);
            put_i64(&mut out, value.offset);
            put_string(&mut out, &value.metadata);
            put_i64(&mut out, value.commit_timestamp);
            put_i64(&mut out, expire);
        }
        None => {
            put_i16(&mut out, 3);
            put_i64(&mut out, value.offset);
            put_i32(&mut out, value.leader_epoch);
            put_string(&mut out, &value.metadata);
            put_i64(&mut out, value.commit_timestamp);
        }
    }
    out
}

pub fn decode_offset(bytes: &[u8]) -> Result<OffsetRecord, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("OffsetCommitValue version {version}"));
    }
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = if version >= 4 {
        r.compact_string()?.unwrap_or_default()
    } else {
        r.string()?
    };
    let commit_timestamp = r.i64()?;
    let expire_timestamp = if version == 1 {
        Some(r.i64()?).filter(|t| *t >= 0)
    } else {
        None
    };
    Ok(OffsetRecord {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

pub fn encode_group(value: &GroupRecord) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, 3);
    put_string(&mut out, value.protocol_type.as_deref().unwrap_or(""));
    put_i32(&mut out, value.generation);
    put_nullable_string(&mut out, value.protocol.as_deref());
    put_nullable_string(&mut out, value.leader.as_deref());
    put_i64(&mut out, value.state_timestamp);
    put_i32(
        &mut out,
        i32::try_from(value.members.len()).unwrap_or(i32::MAX),
    );
    for member in &value.members {
        put_string(&mut out, &member.member_id);
        put_nullable_string(&mut out, member.group_instance_id.as_deref());
        put_string(&mut out, &member.client_id);
        put_string(&mut out, &member.client_host);
        put_i32(&mut out, member.rebalance_timeout_ms);
        put_i32(&mut out, member.session_timeout_ms);
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out
}

pub fn decode_group(bytes: &[u8]) -> Result<GroupRecord, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("GroupMetadataValue version {version}"));
    }
    let flexible = version >= 4;
    let string = |r: &mut Reader| -> Result<Option<String>, String> {
        if flexible {
            r.compact_string()
        } else {
            r.nullable_string()
        }
    };
    let protocol_type = string(&mut r)?.filter(|t| !t.is_empty());
    let generation = r.i32()?;
    let protocol = string(&mut r)?;
    let leader = string(&mut r)?;
    let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = if flexible {
        r.unsigned_varint()?.saturating_sub(1) as usize
    } else {
        usize::try_from(r.i32()?).unwrap_or(0)
    };
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let member_id = string(&mut r)?.unwrap_or_default();
        let group_instance_id = if version >= 3 { string(&mut r)? } else { None };
        let client_id = string(&mut r)?.unwrap_or_default();
        let client_host = string(&mut r)?.unwrap_or_default();
        let session_first = version == 0;
        let (rebalance_timeout_ms, session_timeout_ms) = if session_first {
            let session = r.i32()?;
            (session, session)
        } else {
            (r.i32()?, r.i32()?)
        };
        let bytes = |r: &mut Reader| -> Result<Vec<u8>, String> {
            if flexible {
                r.compact_bytes()
            } else {
                r.bytes()
            }
        };
        let subscription = bytes(&mut r)?;
        let assignment = bytes(&mut r)?;
        if flexible {
            r.skip_tags()?;
        }
        members.push(MemberRecord {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupRecord {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp,
        members,
    })
}

/// ConsumerGroupMetadataValue v0: the epoch; the state timestamp in tag 1.
pub fn encode_consumer_group(epoch: i32, state_timestamp: i64) -> Vec<u8> {
    let mut out = Vec::new();
    put_i16(&mut out, 0);
    put_i32(&mut out, epoch);
    put_unsigned_varint(&mut out, 1); // one tagged field
    put_unsigned_varint(&mut out, 1); // tag 1
    put_unsigned_varint(&mut out, 8);
    put_i64(&mut out, state_timestamp);
    out
}

/// (epoch, state timestamp; -1 when not recorded).
pub fn decode_consumer_group(bytes: &[u8]) -> Result<(i32, i64), String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(format!("ConsumerGroupMetadataValue version {version}"));
    }
    let epoch = r.i32()?;
    let mut state_timestamp = -1;
    let tags = r.unsigned_varint()?;
    for _ in 0..tags {
        let tag = r.unsigned_varint()?;
        let size = r.unsigned_varint()? as usize;
        let data = r.take(size)?;
        if tag == 1 && size == 8 {
            state_timestamp = Reader(data).i64()?;
        }
    }
    Ok((epoch, state_timestamp))
}

pub(crate) fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = i16::try_from(s.len()).unwrap_or(i16::MAX);
    put_i16(out, len);
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

pub(crate) fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => put_i16(out, -1),
    }
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, i32::try_from(b.len()).unwrap_or(i32::MAX));
    out.extend_from_slice(b);
}

pub(crate) fn put_unsigned_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over a record's bytes (Kafka's big-endian, classic and
/// compact encodings), shared with the transaction log's codec.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("a record is cut short".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub(crate) fn text(&mut self, len: usize) -> Result<String, String> {
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "a string is not UTF-8".to_string())
    }

    pub(crate) fn string(&mut self) -> Result<String, String> {
        self.nullable_string().map(Option::unwrap_or_default)
    }

    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        self.text(len as usize).map(Some)
    }

    pub(crate) fn compact_string(&mut self) -> Result<Option<String>, String> {
        match self.unsigned_varint()? {
            0 => Ok(None),
            n => self.text(n as usize - 1).map(Some),
        }
    }

    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Vec::new());
        }
        self.take(len as usize).map(<[u8]>::to_vec)
    }

    pub(crate) fn compact_bytes(&mut self) -> Result<Vec<u8>, String> {
        match self.unsigned_varint()? {
            0 => Ok(Vec::new()),
            n => self.take(n as usize - 1).map(<[u8]>::to_vec),
        }
    }

    pub(crate) fn unsigned_varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint is too long".into())
    }

    pub(crate) fn skip_tags(&mut self) -> Result<(), String> {
        for _ in 0..self.unsigned_varint()? {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_map_to_partitions_as_kafka_hashes_them() {
        // Java: "".hashCode() == 0, "a" == 97, "group" == 98629247,
        // "polygenelubricants" == Integer.MIN_VALUE (abs maps it to 0).
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("group", 50), 98_629_247 % 50);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A negative hash: "zzzzzzzz" hashes to -1_910_022_912 in Java,
        // whose abs is 1_910_022_912 (not its low 31 bits, 237_460_736:
        // that is the producer partitioner's toPositive, not Utils.abs).
        assert_eq!(partition_for("zzzzzzzz", 50), 12);
    }

    #[test]
    fn keys_and_values_round_trip() {
        let key = Key::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        let bytes = key.encode();
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(Key::decode(&bytes).unwrap(), Some(key));
        assert_eq!(
            Key::decode(&Key::Group("g".into()).encode()).unwrap(),
            Some(Key::Group("g".into()))
        );
        // A KIP-848 member record (type 5): group, then member.
        assert_eq!(
            Key::decode(&[0, 5, 0, 1, b'g', 0, 1, b'm']).unwrap(),
            Some(Key::ConsumerMember {
                group: "g".into(),
                member: "m".into()
            })
        );
        // A share group's record (type 9) is not the coordinator's here.
        assert_eq!(Key::decode(&[0, 9, 0, 1, b'g']).unwrap(), None);

        let offset = OffsetRecord {
            offset: 42,
            leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: None,
        };
        let value = encode_offset(&offset);
        assert_eq!(&value[..2], &[0, 3]);
        assert_eq!(decode_offset(&value).unwrap(), offset);
        let expiring = OffsetRecord {
            expire_timestamp: Some(1_800_000_000_000),
            leader_epoch: -1,
            ..offset
        };
        assert_eq!(decode_offset(&encode_offset(&expiring)).unwrap(), expiring);

        let group = GroupRecord {
            protocol_type: Some("consumer".into()),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp: 99,
            members: vec![MemberRecord {
                member_id: "m-1".into(),
                group_instance_id: Some("i-1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![0, 1, 2],
                assignment: vec![9],
            }],
        };
        assert_eq!(decode_group(&encode_group(&group)).unwrap(), group);
        let empty = GroupRecord {
            protocol: None,
            leader: None,
            members: vec![],
            ..group
        };
        assert_eq!(decode_group(&encode_group(&empty)).unwrap(), empty);

        assert_eq!(
            decode_consumer_group(&encode_consumer_group(5, 123)).unwrap(),
            (5, 123)
        );
        // Kafka's own v0 value without tagged fields.
        assert_eq!(
            decode_consumer_group(&[0, 0, 0, 0, 0, 8, 0]).unwrap(),
            (8, -1)
        );
    }
}
