//! What the console shows, read from the broker's services: the same
//! calls the Kafka APIs answer from (the metadata seam, the log store, the
//! group coordinator), so a page shows what a client would be told. Plain
//! data here; `pages.rs` renders it.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;

use crate::log::TopicPartition;
use crate::metadata::topic_config::EffectiveConfig;
use crate::metadata::view::NodeView;
use crate::services::{AdvertisedListener, Services};

/// The broker and its cluster.
pub struct Overview {
    pub cluster_id: String,
    pub node_id: i32,
    /// `process.roles` is set: this node runs on a metadata quorum.
    pub clustered: bool,
    pub controller_id: i32,
    pub brokers: Vec<NodeView>,
    pub listeners: Vec<AdvertisedListener>,
    pub topics: usize,
    pub partitions: usize,
    pub groups: usize,
}

pub fn overview(services: &Services) -> Overview {
    let listener_names: Vec<String> = services
        .config
        .listeners()
        .map(|listeners| listeners.into_iter().map(|l| l.name).collect())
        .unwrap_or_default();
    let listeners = listener_names
        .iter()
        .filter_map(|name| services.advertised_for(name))
        .collect();
    let metadata = services.metadata();
    let cluster = metadata.cluster(listener_names.first().map_or("", String::as_str));
    let topics = metadata.topics();
    Overview {
        cluster_id: services.cluster_id.clone(),
        node_id: services.node_id,
        clustered: services
            .config
            .explicit("process.roles")
            .is_some_and(|roles| !roles.trim().is_empty()),
        controller_id: cluster.controller_id,
        brokers: cluster.brokers,
        listeners,
        partitions: topics.iter().map(|t| t.partitions.len()).sum(),
        topics: topics.len(),
        groups: services.groups.list_groups(&[], &[]).len(),
    }
}

/// One partition: its replicas from the metadata, its log from this
/// node's store (None where this node holds no replica).
pub struct PartitionRow {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub log_start: Option<i64>,
    pub end: Option<i64>,
    pub size: Option<u64>,
    pub dir: Option<String>,
}

pub struct TopicRow {
    pub name: String,
    pub id: u128,
    pub partitions: Vec<PartitionRow>,
    /// Configs the topic overrides.
    pub overrides: usize,
}

impl TopicRow {
    /// Bytes in this node's logs of the topic.
    pub fn size(&self) -> u64 {
        self.partitions.iter().filter_map(|p| p.size).sum()
    }

    /// Records between log start and end, summed over the partitions.
    pub fn records(&self) -> i64 {
        self.partitions
            .iter()
            .filter_map(|p| Some(p.end? - p.log_start?))
            .sum()
    }
}

/// Every topic, by name, with its partitions.
pub fn topics(services: &Services) -> Vec<TopicRow> {
    let logs = log_sizes(services);
    let mut rows: Vec<TopicRow> = services
        .metadata()
        .topics()
        .into_iter()
        .map(|topic| topic_row(services, &logs, topic))
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// One topic with its effective configs; None if there is no such topic.
pub fn topic(services: &Services, name: &str) -> Option<(TopicRow, Vec<EffectiveConfig>)> {
    let view = services.metadata().topic(name)?;
    let row = topic_row(services, &log_sizes(services), view);
    let configs = services.topics.configs(name).unwrap_or_default();
    Some((row, configs))
}

/// Each local partition's size and log directory.
fn log_sizes(services: &Services) -> HashMap<TopicPartition, (u64, String)> {
    services
        .logs
        .describe_log_dirs()
        .into_iter()
        .flat_map(|dir| {
            let path = dir.path;
            dir.partitions
                .into_iter()
                .map(move |(tp, size)| (tp, (size, path.clone())))
        })
        .collect()
}

fn topic_row(
    services: &Services,
    logs: &HashMap<TopicPartition, (u64, String)>,
    topic: crate::metadata::view::TopicView,
) -> TopicRow {
    let partitions = topic
        .partitions
        .into_iter()
        .map(|p| {
            let tp = TopicPartition::new(topic.name.as_str(), p.partition);
            let offsets = services.logs.offsets(&tp).ok();
            let log = logs.get(&tp);
            PartitionRow {
                partition: p.partition,
                leader: p.leader,
                replicas: p.replicas,
                isr: p.isr,
                log_start: offsets.map(|o| o.log_start_offset),
                end: offsets.map(|o| o.high_watermark),
                size: log.map(|(size, _)| *size),
                dir: log.map(|(_, dir)| dir.clone()),
            }
        })
        .collect();
    TopicRow {
        overrides: services
            .topics
            .get(&topic.name)
            .map_or(0, |stored| stored.configs.len()),
        name: topic.name,
        id: topic.id,
        partitions,
    }
}

/// A member and the partitions assigned to it.
pub struct MemberRow {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub assigned: Vec<(String, Vec<i32>)>,
}

/// A committed offset and how far the log has moved past it.
pub struct OffsetRow {
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub end: Option<i64>,
}

impl OffsetRow {
    /// Records not yet consumed (Kafka's consumer-groups tool's LAG).
    pub fn lag(&self) -> Option<i64> {
        let end = self.end?;
        (self.committed >= 0).then(|| (end - self.committed).max(0))
    }
}

pub struct GroupRow {
    pub group_id: String,
    pub state: String,
    /// "classic" or "consumer" (KIP-848).
    pub group_type: String,
    pub protocol: String,
    pub members: Vec<MemberRow>,
    pub offsets: Vec<OffsetRow>,
}

impl GroupRow {
    pub fn lag(&self) -> i64 {
        self.offsets.iter().filter_map(OffsetRow::lag).sum()
    }
}

/// Every group with its members, committed offsets and lag.
pub fn groups(services: &Services) -> Vec<GroupRow> {
    let coordinator = &services.groups;
    coordinator
        .list_groups(&[], &[])
        .into_iter()
        .map(|overview| {
            let id = overview.group_id;
            let (protocol, members) = if overview.group_type == "consumer" {
                consumer_members(services, &id)
            } else {
                classic_members(services, &id)
            };
            let mut offsets: Vec<OffsetRow> = coordinator
                .fetch_offsets(&id, None, false)
                .unwrap_or_default()
                .into_iter()
                .filter(|committed| committed.error_code == 0)
                .map(|committed| {
                    let tp = TopicPartition::new(committed.topic.as_str(), committed.partition);
                    OffsetRow {
                        end: services.logs.offsets(&tp).ok().map(|o| o.high_watermark),
                        topic: committed.topic,
                        partition: committed.partition,
                        committed: committed.offset,
                    }
                })
                .collect();
            offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            GroupRow {
                group_id: id,
                state: overview.state,
                group_type: overview.group_type,
                protocol,
                members,
                offsets,
            }
        })
        .collect()
}

/// A classic group's protocol and members; assignments are decoded when
/// the group uses the consumer protocol.
fn classic_members(services: &Services, group_id: &str) -> (String, Vec<MemberRow>) {
    let Some(description) = services
        .groups
        .describe_groups(&[group_id.to_string()])
        .into_iter()
        .next()
    else {
        return (String::new(), Vec::new());
    };
    let consumer = description.protocol_type == "consumer";
    let members = description
        .members
        .into_iter()
        .map(|member| MemberRow {
            assigned: if consumer {
                decode_assignment(&member.assignment)
            } else {
                Vec::new()
            },
            member_id: member.member_id,
            instance_id: member.group_instance_id,
            client_id: member.client_id,
            client_host: member.client_host,
        })
        .collect();
    (description.protocol, members)
}

/// A consumer-protocol group's assignor and members (topic ids named).
fn consumer_members(services: &Services, group_id: &str) -> (String, Vec<MemberRow>) {
    let Some(description) = services
        .groups
        .consumer_describe(&[group_id.to_string()])
        .into_iter()
        .next()
    else {
        return (String::new(), Vec::new());
    };
    let metadata = services.metadata();
    let members = description
        .members
        .into_iter()
        .map(|member| MemberRow {
            assigned: member
                .assignment
                .into_iter()
                .map(|(id, partitions)| {
                    let name = metadata
                        .topic_by_id(id)
                        .map_or_else(|| format!("{id:032x}"), |t| t.name);
                    (name, partitions)
                })
                .collect(),
            member_id: member.member_id,
            instance_id: member.instance_id,
            client_id: member.client_id,
            client_host: member.client_host,
        })
        .collect();
    (description.assignor_name, members)
}

/// The partitions of a `ConsumerProtocolAssignment` (an int16 version,
/// then the body); empty when the bytes do not parse.
fn decode_assignment(bytes: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]).min(3);
    bytes::Buf::advance(&mut buf, 2);
    match ConsumerProtocolAssignment::decode(&mut buf, version) {
        Ok(assignment) => assignment
            .assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic.to_string(), tp.partitions))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as Assigned;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn assignments_decode_by_their_version() {
        let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            Assigned::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![0, 2]),
        ]);
        for version in [0i16, 1, 3] {
            let mut bytes = version.to_be_bytes().to_vec();
            let mut body = bytes::BytesMut::new();
            assignment.encode(&mut body, version).expect("encode");
            bytes.extend_from_slice(&body);
            assert_eq!(
                decode_assignment(&bytes),
                vec![("orders".to_string(), vec![0, 2])]
            );
        }
        assert!(decode_assignment(&[0, 1, 0xff]).is_empty());
        assert!(decode_assignment(&[]).is_empty());
    }
}
