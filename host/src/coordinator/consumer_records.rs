//! A KIP-848 consumer group's members and assignments as Kafka keeps them
//! in `__consumer_offsets`, so that a coordinator that fails over or
//! restarts takes the members on where they were (their next heartbeat,
//! with their member epoch, is accepted) instead of fencing them all.
//!
//! Kafka's record types (`CoordinatorRecordType`), each keyed by the group
//! (and the member), values v0 (flexible):
//! - 5 `ConsumerGroupMemberMetadata`: the member's metadata and
//!   subscription;
//! - 4 `ConsumerGroupPartitionMetadata`: the subscribed topics' partition
//!   counts the target assignment was computed for;
//! - 7 `ConsumerGroupTargetAssignmentMember`: a member's target;
//! - 6 `ConsumerGroupTargetAssignmentMetadata`: the assignment epoch;
//! - 8 `ConsumerGroupCurrentMemberAssignment`: the member's epochs, state,
//!   partitions and partitions pending revocation.
//!
//! The coordinator keeps, per group, the [`ConsumerRecords`] last written
//! and writes only what differs from them ([`ConsumerRecords::diff`]), in
//! Kafka's order: a leaving member's tombstones (8, 7, 5), members' metadata
//! (5), partition metadata (4), the group epoch (3, the caller's), targets
//! (7), the assignment epoch (6), current assignments (8).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::offsets_topic::{put_i16, put_i32, put_unsigned_varint, Reader};

/// Partitions by topic id, as the records list them.
pub type TopicPartitions = Vec<(u128, Vec<i32>)>;

/// `ConsumerGroupMemberMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue`; `state` is Kafka's
/// `MemberState` byte (0 stable, 1 unrevoked, 2 unreleased partitions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    #[serde(with = "json_ids")]
    pub assigned: TopicPartitions,
    #[serde(with = "json_ids")]
    pub pending_revocation: TopicPartitions,
}

/// A topic of `ConsumerGroupPartitionMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribedTopic {
    #[serde(with = "json_ids::id")]
    pub id: u128,
    pub name: String,
    pub partitions: i32,
}

/// One member or assignment record of a consumer group; `None`: a
/// tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConsumerRecord {
    Member {
        member_id: String,
        value: Option<MemberMetadata>,
    },
    Topics {
        value: Option<Vec<SubscribedTopic>>,
    },
    Target {
        member_id: String,
        #[serde(with = "json_ids::optional")]
        value: Option<TopicPartitions>,
    },
    TargetEpoch {
        value: Option<i32>,
    },
    Assignment {
        member_id: String,
        value: Option<CurrentAssignment>,
    },
}

/// A consumer group's member and assignment records (what replay
/// rebuilds, and what was last written for a live group).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerRecords {
    pub members: BTreeMap<String, MemberMetadata>,
    pub topics: Option<Vec<SubscribedTopic>>,
    pub targets: BTreeMap<String, TopicPartitions>,
    pub target_epoch: Option<i32>,
    pub current: BTreeMap<String, CurrentAssignment>,
}

impl ConsumerRecords {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Replays one record (later ones win).
    pub fn apply(&mut self, record: ConsumerRecord) {
        match record {
            ConsumerRecord::Member { member_id, value } => set(&mut self.members, member_id, value),
            ConsumerRecord::Topics { value } => self.topics = value,
            ConsumerRecord::Target { member_id, value } => set(&mut self.targets, member_id, value),
            ConsumerRecord::TargetEpoch { value } => self.target_epoch = value,
            ConsumerRecord::Assignment { member_id, value } => {
                set(&mut self.current, member_id, value)
            }
        }
    }

    /// The records that rebuild `self` from nothing.
    pub fn to_records(&self) -> Vec<ConsumerRecord> {
        let (mut records, after) = Self::default().diff(self, None);
        records.extend(after);
        records
    }

    /// The records that turn `self` into `new`, in Kafka's order: those
    /// that go before the group epoch record, and those after it. With
    /// `only`, just that member's records are compared (a heartbeat that
    /// changed nothing group-wide).
    pub fn diff(
        &self,
        new: &Self,
        only: Option<&str>,
    ) -> (Vec<ConsumerRecord>, Vec<ConsumerRecord>) {
        let mut out = Vec::new();
        let wanted = |id: &str| only.is_none_or(|only| only == id);
        // A member gone: tombstones of its assignment, target, metadata.
        let old_ids = self
            .members
            .keys()
            .chain(self.targets.keys())
            .chain(self.current.keys());
        let mut gone: Vec<&String> = old_ids
            .filter(|id| wanted(id) && !new.members.contains_key(*id))
            .collect();
        gone.sort();
        gone.dedup();
        for id in gone {
            if self.current.contains_key(id) && !new.current.contains_key(id) {
                out.push(ConsumerRecord::Assignment {
                    member_id: id.clone(),
                    value: None,
                });
            }
            if self.targets.contains_key(id) && !new.targets.contains_key(id) {
                out.push(ConsumerRecord::Target {
                    member_id: id.clone(),
                    value: None,
                });
            }
            if self.members.contains_key(id) {
                out.push(ConsumerRecord::Member {
                    member_id: id.clone(),
                    value: None,
                });
            }
        }
        for (id, value) in &new.members {
            if wanted(id) && self.members.get(id) != Some(value) {
                out.push(ConsumerRecord::Member {
                    member_id: id.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        if only.is_none() && self.topics != new.topics {
            out.push(ConsumerRecord::Topics {
                value: new.topics.clone(),
            });
        }
        let before = std::mem::take(&mut out);
        for (id, value) in &new.targets {
            if wanted(id) && self.targets.get(id) != Some(value) {
                out.push(ConsumerRecord::Target {
                    member_id: id.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        // A target dropped while its member stays (not written by Kafka's
        // rules, but the records must say what is held).
        for id in self.targets.keys() {
            if wanted(id) && new.members.contains_key(id) && !new.targets.contains_key(id) {
                out.push(ConsumerRecord::Target {
                    member_id: id.clone(),
                    value: None,
                });
            }
        }
        if only.is_none() && self.target_epoch != new.target_epoch {
            out.push(ConsumerRecord::TargetEpoch {
                value: new.target_epoch,
            });
        }
        for (id, value) in &new.current {
            if wanted(id) && self.current.get(id) != Some(value) {
                out.push(ConsumerRecord::Assignment {
                    member_id: id.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        (before, out)
    }

    /// Takes `new`'s records for what [`ConsumerRecords::diff`] compared.
    pub fn update(&mut self, new: Self, only: Option<&str>) {
        let Some(id) = only else {
            *self = new;
            return;
        };
        let mut new = new;
        set(&mut self.members, id.to_string(), new.members.remove(id));
        set(&mut self.targets, id.to_string(), new.targets.remove(id));
        set(&mut self.current, id.to_string(), new.current.remove(id));
    }
}

/// Topic ids in the file store's JSON as hex strings: serde's internally
/// tagged enums cannot carry a u128.
mod json_ids {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::TopicPartitions;

    type Hex = Vec<(String, Vec<i32>)>;

    fn to_hex(partitions: &TopicPartitions) -> Hex {
        partitions
            .iter()
            .map(|(id, p)| (format!("{id:032x}"), p.clone()))
            .collect()
    }

    fn from_hex<E: Error>(hex: Hex) -> Result<TopicPartitions, E> {
        hex.into_iter()
            .map(|(id, p)| Ok((u128::from_str_radix(&id, 16).map_err(E::custom)?, p)))
            .collect()
    }

    pub fn serialize<S: Serializer>(p: &TopicPartitions, s: S) -> Result<S::Ok, S::Error> {
        to_hex(p).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TopicPartitions, D::Error> {
        from_hex(Hex::deserialize(d)?)
    }

    pub mod optional {
        use super::*;

        pub fn serialize<S: Serializer>(
            p: &Option<TopicPartitions>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            p.as_ref().map(to_hex).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<TopicPartitions>, D::Error> {
            Option::<Hex>::deserialize(d)?.map(from_hex).transpose()
        }
    }

    pub mod id {
        use super::*;

        pub fn serialize<S: Serializer>(id: &u128, s: S) -> Result<S::Ok, S::Error> {
            format!("{id:032x}").serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
            u128::from_str_radix(&String::deserialize(d)?, 16).map_err(D::Error::custom)
        }
    }
}

fn set<V>(map: &mut BTreeMap<String, V>, key: String, value: Option<V>) {
    match value {
        Some(value) => {
            map.insert(key, value);
        }
        None => {
            map.remove(&key);
        }
    }
}

// Kafka's flexible encodings (compact strings and arrays, tagged fields).

fn put_compact_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_unsigned_varint(out, 0),
        Some(s) => {
            put_unsigned_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    put_unsigned_varint(out, len as u64 + 1);
}

fn put_uuid(out: &mut Vec<u8>, id: u128) {
    out.extend_from_slice(&id.to_be_bytes());
}

fn put_partitions(out: &mut Vec<u8>, partitions: &TopicPartitions) {
    put_len(out, partitions.len());
    for (topic, ids) in partitions {
        put_uuid(out, *topic);
        put_len(out, ids.len());
        for id in ids {
            put_i32(out, *id);
        }
        put_unsigned_varint(out, 0); // no tagged fields
    }
}

fn version0(out: &mut Vec<u8>) {
    put_i16(out, 0);
}

fn no_tags(out: &mut Vec<u8>) {
    put_unsigned_varint(out, 0);
}

pub fn encode_member(value: &MemberMetadata) -> Vec<u8> {
    let mut out = Vec::new();
    version0(&mut out);
    put_compact_string(&mut out, value.instance_id.as_deref());
    put_compact_string(&mut out, value.rack_id.as_deref());
    put_compact_string(&mut out, Some(&value.client_id));
    put_compact_string(&mut out, Some(&value.client_host));
    put_len(&mut out, value.subscribed_topic_names.len());
    for name in &value.subscribed_topic_names {
        put_compact_string(&mut out, Some(name));
    }
    put_compact_string(&mut out, value.subscribed_topic_regex.as_deref());
    put_i32(&mut out, value.rebalance_timeout_ms);
    put_compact_string(&mut out, value.server_assignor.as_deref());
    no_tags(&mut out);
    out
}

pub fn encode_topics(topics: &[SubscribedTopic]) -> Vec<u8> {
    let mut out = Vec::new();
    version0(&mut out);
    put_len(&mut out, topics.len());
    for topic in topics {
        put_uuid(&mut out, topic.id);
        put_compact_string(&mut out, Some(&topic.name));
        put_i32(&mut out, topic.partitions);
        put_len(&mut out, 0); // PartitionMetadata (racks): none known
        no_tags(&mut out);
    }
    no_tags(&mut out);
    out
}

pub fn encode_target(partitions: &TopicPartitions) -> Vec<u8> {
    let mut out = Vec::new();
    version0(&mut out);
    put_partitions(&mut out, partitions);
    no_tags(&mut out);
    out
}

pub fn encode_target_epoch(epoch: i32) -> Vec<u8> {
    let mut out = Vec::new();
    version0(&mut out);
    put_i32(&mut out, epoch);
    no_tags(&mut out);
    out
}

pub fn encode_assignment(value: &CurrentAssignment) -> Vec<u8> {
    let mut out = Vec::new();
    version0(&mut out);
    put_i32(&mut out, value.member_epoch);
    put_i32(&mut out, value.previous_member_epoch);
    out.push(value.state as u8);
    put_partitions(&mut out, &value.assigned);
    put_partitions(&mut out, &value.pending_revocation);
    no_tags(&mut out);
    out
}

fn check_version(r: &mut Reader, name: &str) -> Result<(), String> {
    match r.i16()? {
        0 => Ok(()),
        version => Err(format!("{name} version {version}")),
    }
}

fn compact_len(r: &mut Reader) -> Result<usize, String> {
    let n = r.unsigned_varint()?;
    let len = usize::try_from(n.saturating_sub(1)).map_err(|_| "a length overflows")?;
    // Each element takes at least a byte: a larger count is corruption.
    if len > r.0.len() {
        return Err("an array is longer than its record".into());
    }
    Ok(len)
}

fn uuid(r: &mut Reader) -> Result<u128, String> {
    let bytes = r.take(16)?;
    let mut id = [0u8; 16];
    id.copy_from_slice(bytes);
    Ok(u128::from_be_bytes(id))
}

fn partitions(r: &mut Reader) -> Result<TopicPartitions, String> {
    let count = compact_len(r)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = uuid(r)?;
        let n = compact_len(r)?;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(r.i32()?);
        }
        r.skip_tags()?;
        out.push((topic, ids));
    }
    Ok(out)
}

pub fn decode_member(bytes: &[u8]) -> Result<MemberMetadata, String> {
    let mut r = Reader(bytes);
    check_version(&mut r, "ConsumerGroupMemberMetadataValue")?;
    let instance_id = r.compact_string()?;
    let rack_id = r.compact_string()?;
    let client_id = r.compact_string()?.unwrap_or_default();
    let client_host = r.compact_string()?.unwrap_or_default();
    let count = compact_len(&mut r)?;
    let mut subscribed_topic_names = Vec::with_capacity(count);
    for _ in 0..count {
        subscribed_topic_names.push(r.compact_string()?.unwrap_or_default());
    }
    let subscribed_topic_regex = r.compact_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.compact_string()?;
    r.skip_tags()?; // ClassicMemberMetadata (tag 0): not a classic member here
    Ok(MemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
    })
}

pub fn decode_topics(bytes: &[u8]) -> Result<Vec<SubscribedTopic>, String> {
    let mut r = Reader(bytes);
    check_version(&mut r, "ConsumerGroupPartitionMetadataValue")?;
    let count = compact_len(&mut r)?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let id = uuid(&mut r)?;
        let name = r.compact_string()?.unwrap_or_default();
        let partitions = r.i32()?;
        for _ in 0..compact_len(&mut r)? {
            r.i32()?; // partition
            for _ in 0..compact_len(&mut r)? {
                r.compact_string()?; // rack
            }
            r.skip_tags()?;
        }
        r.skip_tags()?;
        topics.push(SubscribedTopic {
            id,
            name,
            partitions,
        });
    }
    r.skip_tags()?;
    Ok(topics)
}

pub fn decode_target(bytes: &[u8]) -> Result<TopicPartitions, String> {
    let mut r = Reader(bytes);
    check_version(&mut r, "ConsumerGroupTargetAssignmentMemberValue")?;
    let out = partitions(&mut r)?;
    r.skip_tags()?;
    Ok(out)
}

pub fn decode_target_epoch(bytes: &[u8]) -> Result<i32, String> {
    let mut r = Reader(bytes);
    check_version(&mut r, "ConsumerGroupTargetAssignmentMetadataValue")?;
    let epoch = r.i32()?;
    r.skip_tags()?;
    Ok(epoch)
}

pub fn decode_assignment(bytes: &[u8]) -> Result<CurrentAssignment, String> {
    let mut r = Reader(bytes);
    check_version(&mut r, "ConsumerGroupCurrentMemberAssignmentValue")?;
    let member_epoch = r.i32()?;
    let previous_member_epoch = r.i32()?;
    let state = r.take(1)?[0] as i8;
    let assigned = partitions(&mut r)?;
    let pending_revocation = partitions(&mut r)?;
    r.skip_tags()?;
    Ok(CurrentAssignment {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member() -> MemberMetadata {
        MemberMetadata {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("uniform".into()),
        }
    }

    #[test]
    fn values_round_trip_in_kafkas_layout() {
        let m = member();
        let bytes = encode_member(&m);
        // version 0, instance "i" (compact: len+1), rack null.
        assert_eq!(&bytes[..5], &[0, 0, 2, b'i', 0]);
        assert_eq!(decode_member(&bytes).unwrap(), m);

        let topics = vec![SubscribedTopic {
            id: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            name: "t".into(),
            partitions: 3,
        }];
        let bytes = encode_topics(&topics);
        assert_eq!(&bytes[..5], &[0, 0, 2, 1, 2], "one topic, uuid first");
        assert_eq!(decode_topics(&bytes).unwrap(), topics);

        let target = vec![(7u128, vec![0, 2]), (9, vec![1])];
        assert_eq!(decode_target(&encode_target(&target)).unwrap(), target);
        assert_eq!(
            encode_target_epoch(5),
            vec![0, 0, 0, 0, 0, 5, 0],
            "version, epoch, no tags"
        );
        assert_eq!(decode_target_epoch(&encode_target_epoch(5)).unwrap(), 5);

        let current = CurrentAssignment {
            member_epoch: 4,
            previous_member_epoch: 3,
            state: 1,
            assigned: vec![(7, vec![0])],
            pending_revocation: vec![(7, vec![1, 2])],
        };
        let bytes = encode_assignment(&current);
        assert_eq!(&bytes[..11], &[0, 0, 0, 0, 0, 4, 0, 0, 0, 3, 1]);
        assert_eq!(decode_assignment(&bytes).unwrap(), current);
        // Cut short: an error, not a panic.
        assert!(decode_assignment(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode_target(&[0, 0, 0xff, 0xff, 0x0f]).is_err());
    }

    #[test]
    fn a_member_that_leaves_is_tombstoned_in_kafkas_order() {
        let mut old = ConsumerRecords::default();
        for id in ["a", "b"] {
            old.members.insert(id.into(), member());
            old.targets.insert(id.into(), vec![(7, vec![0])]);
            old.current.insert(
                id.into(),
                CurrentAssignment {
                    member_epoch: 2,
                    previous_member_epoch: 1,
                    state: 0,
                    assigned: vec![(7, vec![0])],
                    pending_revocation: vec![],
                },
            );
        }
        old.target_epoch = Some(2);
        let mut new = old.clone();
        new.members.remove("b");
        new.targets.remove("b");
        new.current.remove("b");
        new.target_epoch = Some(3);
        let (mut records, after) = old.diff(&new, None);
        records.extend(after);
        assert_eq!(
            records,
            vec![
                ConsumerRecord::Assignment {
                    member_id: "b".into(),
                    value: None
                },
                ConsumerRecord::Target {
                    member_id: "b".into(),
                    value: None
                },
                ConsumerRecord::Member {
                    member_id: "b".into(),
                    value: None
                },
                ConsumerRecord::TargetEpoch { value: Some(3) },
            ]
        );
        let mut replayed = old.clone();
        records.into_iter().for_each(|r| replayed.apply(r));
        assert_eq!(replayed, new);
        // From nothing, the records rebuild it.
        let mut rebuilt = ConsumerRecords::default();
        new.to_records().into_iter().for_each(|r| rebuilt.apply(r));
        assert_eq!(rebuilt, new);
        // One member's diff leaves the others alone.
        let mut changed = new.clone();
        changed.members.get_mut("a").unwrap().rack_id = Some("r".into());
        changed.target_epoch = Some(9);
        let (before, after) = new.diff(&changed, Some("a"));
        assert_eq!((before.len(), after.len()), (1, 0));
        let mut updated = new.clone();
        updated.update(changed.clone(), Some("a"));
        assert_eq!(updated.members["a"].rack_id.as_deref(), Some("r"));
        assert_eq!(updated.target_epoch, Some(3));
    }
}
