//! The group store: committed offsets and group metadata as records of
//! the internal topic `__consumer_offsets`, as Kafka keeps them, written
//! through the host's log and replayed from it at start.
//!
//! - A group lives in partition `hash(group) % offsets.topic.num.partitions`
//!   ([`offsets_topic::partition_for`], Kafka's); its records are Kafka's
//!   keys and values ([`offsets_topic`]): an offset commit per partition,
//!   the group's metadata (written when a rebalance completes), a
//!   consumer-protocol group's epoch, members and assignments
//!   ([`super::consumer_records`]), and tombstones for what is deleted
//!   (a deleted group tombstones each of its offsets too, as Kafka does,
//!   so compaction cannot bring them back).
//! - The topic is created on the first write (as Kafka creates it on first
//!   use), compacted (`cleanup.policy=compact`): the log cleaner keeps the
//!   latest record per key, so nothing here rewrites files.
//! - One append is one batch per partition touched, acknowledged once the
//!   log has it, with the log's durability (no fsync per commit unless the
//!   topic's `flush.messages` asks): offset commits stay as cheap as
//!   produce requests.
//! - Replay at start reads every partition from its log start to its end,
//!   in log order (later records win), into the same [`Snapshot`] the
//!   coordinator restores from.
//! - An earlier release's `groups/groups.log` is migrated at the first
//!   start: its state is appended to the topic, then the file is renamed
//!   `groups.log.migrated` ([`super::groups_log::retire`]). The appended
//!   records are as durable as any commit (in the page cache at once,
//!   fsynced by the log's flush policy and at clean shutdown); the renamed
//!   file is kept, so an operator can still recover it after a power cut.
//!   A crash before the rename migrates the same state again.
//! - On a cluster node the topic is replicated and a broker holds the
//!   state of the partitions it leads only: nothing is replayed at start;
//!   the coordinator loads a partition when the broker becomes its leader
//!   ([`load_partition`]) and forgets it when it stops. Each
//!   append leaves its partition's end offset ([`GroupStore::take_written`])
//!   for the caller to wait on until the ISR has it (acks=all), after the
//!   coordinator's lock is released. The topic is created through the
//!   controller (by FindCoordinator, as Kafka does), never here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::consumer_records::{self, ConsumerRecord, ConsumerRecords};
use super::groups_log::{self, GroupsLog};
use super::offsets_log::OffsetsLog;
use super::offsets_topic::{self, Key};
use crate::log::keyed_records::{self, Entry, KeyedRecord};

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetRecord {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Explicit expiry (OffsetCommit v2-v4 retention time), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_timestamp: Option<i64>,
}

/// A member as stored with its group's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub member_id: String,
    #[serde(default)]
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol, hex.
    #[serde(with = "hex_bytes")]
    pub subscription: Vec<u8>,
    #[serde(with = "hex_bytes")]
    pub assignment: Vec<u8>,
}

/// A group's metadata as of its last completed rebalance (Kafka's
/// `GroupMetadataValue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub protocol_type: Option<String>,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        #[serde(flatten)]
        value: OffsetRecord,
    },
    OffsetDeleted {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
        #[serde(flatten)]
        value: GroupRecord,
    },
    GroupDeleted {
        group: String,
    },
    /// A group of the consumer protocol (KIP-848): its epoch.
    ConsumerGroup {
        group: String,
        epoch: i32,
        state_timestamp: i64,
    },
    /// One of a consumer-protocol group's member or assignment records.
    Consumer {
        group: String,
        record: ConsumerRecord,
    },
}

/// Everything the log holds, after replay.
#[derive(Debug, Default, PartialEq)]
pub struct Snapshot {
    pub groups: BTreeMap<String, GroupRecord>,
    pub offsets: BTreeMap<String, BTreeMap<(String, i32), OffsetRecord>>,
    /// Consumer-protocol groups: (epoch, state timestamp).
    pub consumer_groups: BTreeMap<String, (i32, i64)>,
    /// Consumer-protocol groups' members and assignments.
    pub consumer_members: BTreeMap<String, ConsumerRecords>,
    /// Transactional offset commits whose transaction has not ended in
    /// the log, by producer id: the epoch and the offset records.
    pub pending_txn: BTreeMap<i64, (i16, Vec<Record>)>,
}

impl Snapshot {
    pub(super) fn apply(&mut self, record: Record) {
        match record {
            Record::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                self.offsets
                    .entry(group)
                    .or_default()
                    .insert((topic, partition), value);
            }
            Record::OffsetDeleted {
                group,
                topic,
                partition,
            } => {
                if let Some(offsets) = self.offsets.get_mut(&group) {
                    offsets.remove(&(topic, partition));
                    if offsets.is_empty() {
                        self.offsets.remove(&group);
                    }
                }
            }
            Record::Group { group, value } => {
                self.consumer_groups.remove(&group);
                self.consumer_members.remove(&group);
                self.groups.insert(group, value);
            }
            Record::GroupDeleted { group } => {
                self.groups.remove(&group);
                self.offsets.remove(&group);
                self.consumer_groups.remove(&group);
                self.consumer_members.remove(&group);
            }
            Record::Consumer { group, record } => {
                let records = self.consumer_members.entry(group.clone()).or_default();
                records.apply(record);
                if records.is_empty() {
                    self.consumer_members.remove(&group);
                }
            }
            Record::ConsumerGroup {
                group,
                epoch,
                state_timestamp,
            } => {
                self.groups.remove(&group);
                self.consumer_groups.insert(group, (epoch, state_timestamp));
            }
        }
    }
}

impl Snapshot {
    /// The state as records that rebuild it (the migration of a legacy
    /// store).
    pub fn to_records(&self) -> Vec<Record> {
        let mut records = Vec::new();
        for (group, (epoch, state_timestamp)) in &self.consumer_groups {
            records.push(Record::ConsumerGroup {
                group: group.clone(),
                epoch: *epoch,
                state_timestamp: *state_timestamp,
            });
        }
        for (group, members) in &self.consumer_members {
            for record in members.to_records() {
                records.push(Record::Consumer {
                    group: group.clone(),
                    record,
                });
            }
        }
        for (group, value) in &self.groups {
            records.push(Record::Group {
                group: group.clone(),
                value: value.clone(),
            });
        }
        for (group, offsets) in &self.offsets {
            for ((topic, partition), value) in offsets {
                records.push(Record::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    value: value.clone(),
                });
            }
        }
        records
    }
}

/// Where the coordinator's records go.
pub struct GroupStore(Backend);

enum Backend {
    Topic(TopicStore),
    File(GroupsLog),
}

impl GroupStore {
    /// The store in `__consumer_offsets` (a single node), migrating
    /// `legacy_dir/groups.log` if an earlier release left one.
    pub fn open_topic(log: Arc<dyn OffsetsLog>, legacy_dir: &Path) -> io::Result<(Self, Snapshot)> {
        let (store, snapshot) = TopicStore::open(log, legacy_dir)?;
        Ok((Self(Backend::Topic(store)), snapshot))
    }

    /// The store in a cluster's `__consumer_offsets`: empty until
    /// partitions are loaded.
    pub fn open_cluster(log: Arc<dyn OffsetsLog>) -> Self {
        Self(Backend::Topic(TopicStore {
            log,
            partitions: None,
            offset_keys: HashMap::new(),
            written: BTreeMap::new(),
        }))
    }

    /// The topic's log, to load a partition from off the coordinator's
    /// lock ([`load_partition`]); none for the file store.
    pub fn topic_log(&self) -> Option<Arc<dyn OffsetsLog>> {
        match &self.0 {
            Backend::Topic(topic) => Some(Arc::clone(&topic.log)),
            Backend::File(_) => None,
        }
    }

    /// Takes on a loaded partition's groups (their offset keys, so a
    /// delete tombstones them), with the topic's partition count.
    pub fn adopt(&mut self, partitions: i32, loaded: &Snapshot) {
        if let Backend::Topic(topic) = &mut self.0 {
            topic.partitions = Some(partitions);
            for (group, offsets) in &loaded.offsets {
                topic
                    .offset_keys
                    .insert(group.clone(), offsets.keys().cloned().collect());
            }
        }
    }

    /// Forgets the offset keys of groups no longer coordinated here.
    pub fn forget(&mut self, groups: &[String]) {
        if let Backend::Topic(topic) = &mut self.0 {
            for group in groups {
                topic.offset_keys.remove(group);
            }
        }
    }

    /// The end offset of each partition appended to since the last call.
    pub fn take_written(&mut self) -> Vec<(i32, i64)> {
        match &mut self.0 {
            Backend::Topic(topic) => std::mem::take(&mut topic.written).into_iter().collect(),
            Backend::File(_) => Vec::new(),
        }
    }

    /// The store in `dir/groups.log` (what earlier releases kept).
    pub fn open_file(dir: &Path) -> io::Result<(Self, Snapshot)> {
        let (file, snapshot) = GroupsLog::open(dir)?;
        Ok((Self(Backend::File(file)), snapshot))
    }

    pub fn append(&mut self, records: &[Record]) -> io::Result<()> {
        match &mut self.0 {
            Backend::Topic(topic) => topic.append(records),
            Backend::File(file) => file.append(records),
        }
    }

    /// A cluster node's TxnOffsetCommit: `records` (offsets of `group`)
    /// in a transactional batch of `producer` (id, epoch).
    pub fn append_transactional(
        &mut self,
        group: &str,
        producer: (i64, i16),
        records: &[Record],
    ) -> io::Result<()> {
        match &mut self.0 {
            Backend::Topic(topic) => topic.append_transactional(group, producer, records),
            Backend::File(_) => Err(io::Error::other("transactional offsets need the topic")),
        }
    }

    /// The marker ending `producer`'s transaction in `partition`.
    pub fn append_marker(
        &mut self,
        partition: i32,
        producer: (i64, i16),
        commit: bool,
    ) -> io::Result<()> {
        match &mut self.0 {
            Backend::Topic(topic) => topic.append_marker(partition, producer, commit),
            Backend::File(_) => Err(io::Error::other("transaction markers need the topic")),
        }
    }

    /// Whether the file has grown enough that a rewrite pays off (the
    /// topic is compacted by the log cleaner: never).
    pub fn wants_compaction(&self) -> bool {
        match &self.0 {
            Backend::Topic(_) => false,
            Backend::File(file) => file.wants_compaction(),
        }
    }

    /// Replaces the file with `live`, the complete current state.
    pub fn rewrite(&mut self, live: &[Record]) -> io::Result<()> {
        match &mut self.0 {
            Backend::Topic(_) => Ok(()),
            Backend::File(file) => file.rewrite(live),
        }
    }

    /// fsync on clean shutdown (the topic: the log's shutdown does it).
    pub fn flush(&self) -> io::Result<()> {
        match &self.0 {
            Backend::Topic(_) => Ok(()),
            Backend::File(file) => file.flush(),
        }
    }

    /// The file's size (0 for the topic).
    pub fn len(&self) -> u64 {
        match &self.0 {
            Backend::Topic(_) => 0,
            Backend::File(file) => file.len(),
        }
    }
}

/// A record's key and value (`None`: a tombstone).
type KeyValue = (Vec<u8>, Option<Vec<u8>>);

struct TopicStore {
    log: Arc<dyn OffsetsLog>,
    /// `None` until the topic exists.
    partitions: Option<i32>,
    /// Each group's committed offset keys, so deleting the group can
    /// tombstone them.
    offset_keys: HashMap<String, BTreeSet<(String, i32)>>,
    /// The end offset of each partition written since `take_written`.
    written: BTreeMap<i32, i64>,
}

impl TopicStore {
    /// Replays the topic, then migrates `legacy_dir/groups.log` if an
    /// earlier release left one.
    fn open(log: Arc<dyn OffsetsLog>, legacy_dir: &Path) -> io::Result<(Self, Snapshot)> {
        let partitions = log.partitions(false)?;
        let mut store = Self {
            log,
            partitions,
            offset_keys: HashMap::new(),
            written: BTreeMap::new(),
        };
        let mut snapshot = store.replay()?;
        if groups_log::exists(legacy_dir) {
            let (_, legacy) = GroupsLog::open(legacy_dir)?;
            let records = legacy.to_records();
            let count = records.len();
            store.append(&records)?;
            for record in records {
                snapshot.apply(record);
            }
            groups_log::retire(legacy_dir)?;
            info!(
                records = count,
                groups = legacy.groups.len() + legacy.consumer_groups.len(),
                "migrated groups.log into {}",
                offsets_topic::TOPIC
            );
        }
        store.offset_keys = snapshot
            .offsets
            .iter()
            .map(|(group, offsets)| (group.clone(), offsets.keys().cloned().collect()))
            .collect();
        Ok((store, snapshot))
    }

    fn replay(&self) -> io::Result<Snapshot> {
        let mut snapshot = Snapshot::default();
        let Some(partitions) = self.partitions else {
            return Ok(snapshot);
        };
        // Records in a partition other than their group's (written by a
        // build that hashed negative group hashes to their low 31 bits,
        // not Kafka's abs) are older than those in the group's own: they
        // are applied first, so the later ones win.
        let mut count = 0usize;
        let mut home = Vec::new();
        let mut pending_txn = BTreeMap::new();
        for partition in 0..partitions {
            let mut apply = |record: Record| {
                if offsets_topic::partition_for(record_group(&record), partitions) == partition {
                    home.push(record);
                } else {
                    snapshot.apply(record);
                }
            };
            count += read_partition(self.log.as_ref(), partition, &mut apply, &mut pending_txn)?;
        }
        snapshot.pending_txn = pending_txn;
        for record in home {
            snapshot.apply(record);
        }
        info!(
            records = count,
            partitions,
            "replayed {}",
            offsets_topic::TOPIC
        );
        Ok(snapshot)
    }

    /// Appends records, one batch per partition touched, in order within
    /// each group (a group's records all go to its partition).
    fn append(&mut self, records: &[Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let partitions = match self.partitions {
            Some(partitions) => partitions,
            None => {
                let created = self.log.partitions(true)?.ok_or_else(|| {
                    io::Error::other(format!("{} could not be created", offsets_topic::TOPIC))
                })?;
                self.partitions = Some(created);
                created
            }
        };
        let mut batches: BTreeMap<i32, Vec<KeyValue>> = BTreeMap::new();
        for record in records {
            let group = record_group(record);
            let batch = batches
                .entry(offsets_topic::partition_for(group, partitions))
                .or_default();
            self.encode(record, batch);
        }
        let now = crate::clock::now_ms();
        for (partition, records) in batches {
            let batch = keyed_records::encode(&records, now);
            let end = self.log.append(partition, &batch)?;
            self.written.insert(partition, end);
        }
        Ok(())
    }

    /// TxnOffsetCommit's records (offsets of `group`) as a transactional
    /// batch of `producer` in the group's partition, as Kafka writes them:
    /// they count once the transaction's marker commits them.
    fn append_transactional(
        &mut self,
        group: &str,
        producer: (i64, i16),
        records: &[Record],
    ) -> io::Result<()> {
        let partitions = self
            .partitions
            .ok_or_else(|| io::Error::other(format!("{} is not loaded", offsets_topic::TOPIC)))?;
        let partition = offsets_topic::partition_for(group, partitions);
        let mut pairs = Vec::with_capacity(records.len());
        for record in records {
            self.encode(record, &mut pairs);
        }
        let batch = keyed_records::encode_transactional(&pairs, crate::clock::now_ms(), producer);
        let end = self.log.append(partition, &batch)?;
        self.written.insert(partition, end);
        Ok(())
    }

    /// A transaction marker in `partition`: `producer`'s transactional
    /// offsets there are committed or aborted (what a replay reads).
    fn append_marker(
        &mut self,
        partition: i32,
        producer: (i64, i16),
        commit: bool,
    ) -> io::Result<()> {
        let (producer_id, producer_epoch) = producer;
        let marker = crate::log::control::end_transaction_marker(
            producer_id,
            producer_epoch,
            commit,
            0,
            crate::clock::now_ms(),
        );
        let end = self.log.append(partition, &marker)?;
        self.written.insert(partition, end);
        Ok(())
    }

    /// `record` as key/value pairs, tracking the group's offset keys.
    fn encode(&mut self, record: &Record, out: &mut Vec<KeyValue>) {
        match record {
            Record::Offset {
                group,
                topic,
                partition,
                value,
            } => {
                self.offset_keys
                    .entry(group.clone())
                    .or_default()
                    .insert((topic.clone(), *partition));
                let key = Key::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                out.push((key.encode(), Some(offsets_topic::encode_offset(value))));
            }
            Record::OffsetDeleted {
                group,
                topic,
                partition,
            } => {
                if let Some(keys) = self.offset_keys.get_mut(group) {
                    keys.remove(&(topic.clone(), *partition));
                }
                let key = Key::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                out.push((key.encode(), None));
            }
            Record::Group { group, value } => {
                let key = Key::Group(group.clone());
                out.push((key.encode(), Some(offsets_topic::encode_group(value))));
            }
            Record::ConsumerGroup {
                group,
                epoch,
                state_timestamp,
            } => {
                let key = Key::ConsumerGroup(group.clone());
                let value = offsets_topic::encode_consumer_group(*epoch, *state_timestamp);
                out.push((key.encode(), Some(value)));
            }
            Record::Consumer { group, record } => out.push(consumer_key_value(group, record)),
            Record::GroupDeleted { group } => {
                for (topic, partition) in self.offset_keys.remove(group).unwrap_or_default() {
                    let key = Key::Offset {
                        group: group.clone(),
                        topic,
                        partition,
                    };
                    out.push((key.encode(), None));
                }
                // Kafka's order for a consumer group: the assignment epoch,
                // the partition metadata, then the group epoch (its members
                // were tombstoned as they left).
                out.push((Key::ConsumerTargetEpoch(group.clone()).encode(), None));
                out.push((Key::ConsumerTopics(group.clone()).encode(), None));
                out.push((Key::ConsumerGroup(group.clone()).encode(), None));
                out.push((Key::Group(group.clone()).encode(), None));
            }
        }
    }
}

/// A consumer group's member or assignment record as its key and value.
fn consumer_key_value(group: &str, record: &ConsumerRecord) -> KeyValue {
    let group = group.to_string();
    match record {
        ConsumerRecord::Member { member_id, value } => (
            Key::ConsumerMember {
                group,
                member: member_id.clone(),
            }
            .encode(),
            value.as_ref().map(consumer_records::encode_member),
        ),
        ConsumerRecord::Topics { value } => (
            Key::ConsumerTopics(group).encode(),
            value.as_deref().map(consumer_records::encode_topics),
        ),
        ConsumerRecord::Target { member_id, value } => (
            Key::ConsumerTarget {
                group,
                member: member_id.clone(),
            }
            .encode(),
            value.as_ref().map(consumer_records::encode_target),
        ),
        ConsumerRecord::TargetEpoch { value } => (
            Key::ConsumerTargetEpoch(group).encode(),
            value.map(consumer_records::encode_target_epoch),
        ),
        ConsumerRecord::Assignment { member_id, value } => (
            Key::ConsumerAssignment {
                group,
                member: member_id.clone(),
            }
            .encode(),
            value.as_ref().map(consumer_records::encode_assignment),
        ),
    }
}

/// A consumer group's member or assignment key and value as its record.
fn consumer_record_of(key: Key, value: Option<&[u8]>) -> Result<Record, String> {
    use consumer_records as c;
    let (group, record) = match key {
        Key::ConsumerMember { group, member } => {
            let value = value.map(c::decode_member).transpose()?;
            let record = ConsumerRecord::Member {
                member_id: member,
                value,
            };
            (group, record)
        }
        Key::ConsumerTopics(group) => {
            let value = value.map(c::decode_topics).transpose()?;
            (group, ConsumerRecord::Topics { value })
        }
        Key::ConsumerTarget { group, member } => {
            let value = value.map(c::decode_target).transpose()?;
            let record = ConsumerRecord::Target {
                member_id: member,
                value,
            };
            (group, record)
        }
        Key::ConsumerTargetEpoch(group) => {
            let value = value.map(c::decode_target_epoch).transpose()?;
            (group, ConsumerRecord::TargetEpoch { value })
        }
        Key::ConsumerAssignment { group, member } => {
            let value = value.map(c::decode_assignment).transpose()?;
            let record = ConsumerRecord::Assignment {
                member_id: member,
                value,
            };
            (group, record)
        }
        other => return Err(format!("not a consumer member key: {other:?}")),
    };
    Ok(Record::Consumer { group, record })
}

/// One partition's state, replayed from `log` (the broker leads it).
pub fn load_partition(log: &dyn OffsetsLog, partition: i32) -> io::Result<Snapshot> {
    let mut snapshot = Snapshot::default();
    let mut pending_txn = BTreeMap::new();
    let count = read_partition(
        log,
        partition,
        &mut |record| snapshot.apply(record),
        &mut pending_txn,
    )?;
    snapshot.pending_txn = pending_txn;
    info!(
        records = count,
        "replayed {}-{partition}",
        offsets_topic::TOPIC
    );
    Ok(snapshot)
}

/// Hands each group record of `partition`, in log order, to `apply`; the
/// number of entries read. A transactional offset commit waits in
/// `pending_txn` for its producer's marker: a commit hands it to `apply`
/// then, an abort drops it, and what no marker ended yet stays there (the
/// transaction is still open). A newer epoch of the producer replaces
/// what an older one left.
fn read_partition(
    log: &dyn OffsetsLog,
    partition: i32,
    apply: &mut dyn FnMut(Record),
    pending_txn: &mut BTreeMap<i64, (i16, Vec<Record>)>,
) -> io::Result<usize> {
    super::offsets_log::read_records(log, offsets_topic::TOPIC, partition, &mut |entry| {
        match entry {
            Entry::Record(keyed) => {
                let Some(record) = record_of(keyed) else {
                    return;
                };
                match keyed.transaction {
                    None => apply(record),
                    Some((producer_id, epoch)) => {
                        let (held_epoch, held) = pending_txn.entry(producer_id).or_default();
                        if epoch < *held_epoch && !held.is_empty() {
                            return; // a fenced instance's
                        }
                        if epoch > *held_epoch {
                            held.clear();
                        }
                        *held_epoch = epoch;
                        held.push(record);
                    }
                }
            }
            Entry::TxnEnd {
                producer_id,
                producer_epoch,
                commit,
                ..
            } => {
                // A marker of an older epoch leaves a newer instance's.
                if pending_txn
                    .get(producer_id)
                    .is_some_and(|(held, _)| producer_epoch >= held)
                {
                    let records = pending_txn.remove(producer_id).unwrap_or_default().1;
                    if *commit {
                        records.into_iter().for_each(&mut *apply);
                    }
                }
            }
        }
    })
}

fn record_group(record: &Record) -> &str {
    match record {
        Record::Offset { group, .. }
        | Record::OffsetDeleted { group, .. }
        | Record::Group { group, .. }
        | Record::GroupDeleted { group }
        | Record::ConsumerGroup { group, .. }
        | Record::Consumer { group, .. } => group,
    }
}

/// A topic record as the coordinator's [`Record`] (`None`: not one the
/// coordinator keeps, or one that does not decode, which is logged).
fn record_of(record: &KeyedRecord) -> Option<Record> {
    let key = match Key::decode(record.key.as_deref().unwrap_or_default()) {
        Ok(Some(key)) => key,
        Ok(None) => return None,
        Err(why) => {
            warn!(
                offset = record.offset,
                "{}: a key that does not decode: {why}",
                offsets_topic::TOPIC
            );
            return None;
        }
    };
    let decoded = match (key, record.value.as_deref()) {
        (
            Key::Offset {
                group,
                topic,
                partition,
            },
            None,
        ) => Ok(Record::OffsetDeleted {
            group,
            topic,
            partition,
        }),
        (
            Key::Offset {
                group,
                topic,
                partition,
            },
            Some(value),
        ) => offsets_topic::decode_offset(value).map(|value| Record::Offset {
            group,
            topic,
            partition,
            value,
        }),
        (Key::Group(group) | Key::ConsumerGroup(group), None) => Ok(Record::GroupDeleted { group }),
        (Key::Group(group), Some(value)) => {
            offsets_topic::decode_group(value).map(|value| Record::Group { group, value })
        }
        (Key::ConsumerGroup(group), Some(value)) => offsets_topic::decode_consumer_group(value)
            .map(|(epoch, state_timestamp)| Record::ConsumerGroup {
                group,
                epoch,
                state_timestamp,
            }),
        (
            key @ (Key::ConsumerTopics(_)
            | Key::ConsumerMember { .. }
            | Key::ConsumerTargetEpoch(_)
            | Key::ConsumerTarget { .. }
            | Key::ConsumerAssignment { .. }),
            value,
        ) => consumer_record_of(key, value),
    };
    decoded
        .map_err(|why| {
            warn!(
                offset = record.offset,
                "{}: a value that does not decode: {why}",
                offsets_topic::TOPIC
            )
        })
        .ok()
}

/// Serde for bytes as lowercase hex.
mod hex_bytes {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        hex::decode(text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::log::LogStore;

    pub(crate) use crate::coordinator::offsets_log::testing::{Logs, PARTITIONS};

    /// The topic on `dir`'s logs, its partitions created.
    pub(crate) fn created_topic(dir: &Path) -> Arc<Logs> {
        let logs = Arc::new(Logs::open(dir, offsets_topic::TOPIC));
        logs.partitions(true).unwrap();
        logs
    }

    /// The store on `dir`'s logs (reopened: the partitions exist if any
    /// were written).
    fn open(dir: &Path) -> (GroupStore, Snapshot, Arc<Logs>) {
        let logs = Arc::new(Logs::open(dir, offsets_topic::TOPIC));
        let (store, snapshot) = GroupStore::open_topic(logs.clone(), &dir.join("groups")).unwrap();
        (store, snapshot, logs)
    }

    fn offset(group: &str, partition: i32, offset: i64) -> Record {
        Record::Offset {
            group: group.into(),
            topic: "t".into(),
            partition,
            value: OffsetRecord {
                offset,
                leader_epoch: 2,
                metadata: "m".into(),
                commit_timestamp: 7,
                expire_timestamp: None,
            },
        }
    }

    fn group(generation: i32) -> GroupRecord {
        GroupRecord {
            protocol_type: Some("consumer".into()),
            generation,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp: 5,
            members: vec![MemberRecord {
                member_id: "m-1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: vec![0, 1, 2],
                assignment: vec![9],
            }],
        }
    }

    #[test]
    fn records_land_in_the_group_partition_and_replay_after_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, snapshot, logs) = open(dir.path());
            assert_eq!(snapshot, Snapshot::default());
            // Nothing written: no topic.
            assert!(logs.logs.partitions().is_empty());
            store
                .append(&[offset("g", 0, 1), offset("g", 1, 2)])
                .unwrap();
            store
                .append(&[
                    offset("g", 0, 3),
                    Record::Group {
                        group: "g".into(),
                        value: group(2),
                    },
                ])
                .unwrap();
            store
                .append(&[Record::OffsetDeleted {
                    group: "g".into(),
                    topic: "t".into(),
                    partition: 1,
                }])
                .unwrap();
            store
                .append(&[offset("h", 0, 4), offset("h", 1, 5)])
                .unwrap();
            store
                .append(&[Record::GroupDeleted { group: "h".into() }])
                .unwrap();
            store
                .append(&[Record::ConsumerGroup {
                    group: "k".into(),
                    epoch: 3,
                    state_timestamp: 11,
                }])
                .unwrap();
            // All of g's records in g's partition, none elsewhere.
            let home = offsets_topic::partition_for("g", PARTITIONS);
            let (_, end) = logs.bounds(home).unwrap();
            assert!(end >= 5, "{end}");
        }
        let (_, snapshot, logs) = open(dir.path());
        assert_eq!(snapshot.groups["g"], group(2));
        let offsets = &snapshot.offsets["g"];
        assert_eq!(offsets.len(), 1);
        assert_eq!(offsets[&("t".to_string(), 0)].offset, 3);
        assert_eq!(offsets[&("t".to_string(), 0)].leader_epoch, 2);
        assert!(!snapshot.offsets.contains_key("h"));
        assert_eq!(snapshot.consumer_groups["k"], (3, 11));
        // h's deletion tombstoned each of its offsets, so compaction
        // cannot bring them back: the tombstones are in h's partition.
        let home = offsets_topic::partition_for("h", PARTITIONS);
        let bytes = logs.read(home, 0).unwrap();
        let (entries, _) = keyed_records::decode(&bytes).unwrap();
        let tombstones = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Record(record) => Some(record),
                Entry::TxnEnd { .. } => None,
            })
            .filter(|r| r.value.is_none())
            .filter_map(|r| Key::decode(r.key.as_deref().unwrap()).unwrap())
            .filter(|k| k.group() == "h")
            .count();
        assert_eq!(
            tombstones, 6,
            "two offsets, the assignment epoch, the partition metadata, the consumer group, the group"
        );
    }

    #[test]
    fn records_in_a_partition_an_older_hash_chose_do_not_win_over_newer_ones() {
        let dir = tempfile::tempdir().unwrap();
        // "tttttttt" hashes to -689538560: Kafka's abs puts it in
        // partition 0 of 5; its low 31 bits put it in partition 3.
        assert_eq!(offsets_topic::partition_for("tttttttt", PARTITIONS), 0);
        {
            let (mut store, _, logs) = open(dir.path());
            store.append(&[offset("other", 0, 0)]).unwrap();
            let key = Key::Offset {
                group: "tttttttt".into(),
                topic: "t".into(),
                partition: 0,
            };
            let Record::Offset { value, .. } = offset("tttttttt", 0, 1) else {
                unreachable!()
            };
            let stale = (key.encode(), Some(offsets_topic::encode_offset(&value)));
            logs.append(3, &keyed_records::encode(&[stale], 1)).unwrap();
            store.append(&[offset("tttttttt", 0, 2)]).unwrap();
        }
        let (_, snapshot, _) = open(dir.path());
        assert_eq!(
            snapshot.offsets["tttttttt"][&("t".to_string(), 0)].offset,
            2
        );
    }

    #[test]
    fn a_legacy_groups_log_is_migrated_once_with_nothing_lost() {
        let dir = tempfile::tempdir().unwrap();
        let groups = dir.path().join("groups");
        {
            let (mut legacy, _) = GroupsLog::open(&groups).unwrap();
            legacy
                .append(&[
                    offset("g", 0, 10),
                    offset("g", 1, 20),
                    Record::Group {
                        group: "g".into(),
                        value: group(4),
                    },
                    offset("old", 0, 1),
                    Record::GroupDeleted {
                        group: "old".into(),
                    },
                ])
                .unwrap();
        }
        let (mut store, snapshot, _) = open(dir.path());
        assert!(!groups.join(groups_log::FILE_NAME).exists());
        assert!(groups.join(groups_log::RETIRED_NAME).exists());
        assert_eq!(snapshot.offsets["g"].len(), 2);
        assert_eq!(snapshot.groups["g"].generation, 4);
        assert!(!snapshot.offsets.contains_key("old"));
        store.append(&[offset("g", 0, 11)]).unwrap();
        drop(store);
        // From the topic alone now.
        let (_, snapshot, _) = open(dir.path());
        assert_eq!(snapshot.offsets["g"][&("t".to_string(), 0)].offset, 11);
        assert_eq!(snapshot.offsets["g"][&("t".to_string(), 1)].offset, 20);
        assert_eq!(snapshot.groups["g"].members[0].assignment, vec![9]);
    }
}
