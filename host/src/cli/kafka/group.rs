//! `gregor group list|describe|seek|delete`: Kafka's
//! `kafka-consumer-groups.sh` (`--list`, `--describe` with lag,
//! `--reset-offsets`, `--delete`), as ListGroups (asked of every broker),
//! DescribeGroups and OffsetFetch (of the group's coordinator), ListOffsets
//! (of each partition's leader), OffsetCommit and DeleteGroups.

use std::collections::{BTreeMap, HashMap};

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, Bytes};
use clap::Subcommand;
use kafka_protocol::messages::{
    consumer_protocol_assignment::ConsumerProtocolAssignment,
    offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::{json, Value};

use super::client::{topic_name, Client, TopicPartition, EARLIEST, LATEST};
use super::{error_name, failed_if_any, print, rows_text, text, Output};

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Consumer groups of every broker
    List,
    /// A group's state, members with their partitions, and lag per partition
    Describe {
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Move an inactive group's committed offsets
    Seek {
        group: String,
        /// earliest, latest, or an offset
        #[arg(long)]
        to: String,
        /// Only these topics (default: every topic the group has offsets for)
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
    },
    /// Delete inactive groups and their offsets
    Delete {
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

pub fn run(client: &mut Client, command: GroupCommand, output: Output) -> Result<()> {
    match command {
        GroupCommand::List => list(client, output),
        GroupCommand::Describe { groups } => describe(client, &groups, output),
        GroupCommand::Seek { group, to, topics } => seek(client, &group, &to, topics, output),
        GroupCommand::Delete { groups } => delete(client, &groups, output),
    }
}

fn list(client: &mut Client, output: Output) -> Result<()> {
    let metadata = client.metadata(Some(&[]))?;
    let mut groups = BTreeMap::new();
    for broker in &metadata.brokers {
        let answer = client
            .broker(broker.node_id.0)?
            .send(&ListGroupsRequest::default(), 4)?;
        if answer.error_code != 0 {
            bail!(
                "broker {} answered ListGroups with {}",
                broker.node_id.0,
                error_name(answer.error_code)
            );
        }
        for group in answer.groups {
            groups.insert(
                group.group_id.0.to_string(),
                json!({
                    "group": group.group_id.0.as_str(),
                    "state": group.group_state.as_str(),
                    "protocol_type": group.protocol_type.as_str(),
                    "coordinator": broker.node_id.0,
                }),
            );
        }
    }
    let groups: Vec<Value> = groups.into_values().collect();
    print(output, &json!({ "groups": groups }), |v| {
        rows_text(&["GROUP", "STATE", "COORDINATOR"], &v["groups"], |g| {
            vec![
                text(&g["group"]),
                text(&g["state"]),
                text(&g["coordinator"]),
            ]
        })
    });
    Ok(())
}

fn describe(client: &mut Client, groups: &[String], output: Output) -> Result<()> {
    let mut described = Vec::new();
    let mut codes = Vec::new();
    for group in groups {
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
        let answer = client.coordinator(group)?.send(&request, 5)?;
        let Some(found) = answer.groups.into_iter().next() else {
            bail!("DescribeGroups answered nothing for {group}");
        };
        codes.push(found.error_code);
        let mut owners: HashMap<TopicPartition, String> = HashMap::new();
        let members: Vec<Value> = found
            .members
            .iter()
            .map(|m| {
                let assigned = assignment(&m.member_assignment);
                for (topic, partitions) in &assigned {
                    for p in partitions {
                        owners.insert((topic.clone(), *p), m.member_id.to_string());
                    }
                }
                json!({
                    "member_id": m.member_id.as_str(),
                    "client_id": m.client_id.as_str(),
                    "host": m.client_host.as_str(),
                    "assignment": assigned
                        .iter()
                        .map(|(t, ps)| json!({ "topic": t, "partitions": ps }))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let committed = committed(client, group)?;
        let topics: Vec<String> = {
            let mut topics: Vec<String> = committed.keys().map(|(t, _)| t.clone()).collect();
            topics.sort();
            topics.dedup();
            topics
        };
        let metadata = client.metadata(Some(&topics))?;
        let ends = client.offsets(&metadata, &topics, LATEST)?;
        let mut offsets: Vec<_> = committed.into_iter().collect();
        offsets.sort();
        let offsets: Vec<Value> = offsets
            .into_iter()
            .map(|(key, offset)| {
                let end = ends.get(&key).copied();
                json!({
                    "topic": key.0,
                    "partition": key.1,
                    "committed": offset,
                    "log_end_offset": end,
                    "lag": end.map(|end| (end - offset).max(0)),
                    "member_id": owners.get(&key),
                })
            })
            .collect();
        described.push(json!({
            "group": group,
            "error": error_name(found.error_code),
            "state": found.group_state.as_str(),
            "protocol_type": found.protocol_type.as_str(),
            "protocol": found.protocol_data.as_str(),
            "members": members,
            "offsets": offsets,
        }));
    }
    print(output, &json!({ "groups": described }), |v| {
        let mut out = String::new();
        for group in v["groups"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "GROUP {}  state {}  protocol {}  members {}\n",
                text(&group["group"]),
                text(&group["state"]),
                text(&group["protocol"]),
                group["members"].as_array().map_or(0, Vec::len)
            ));
            out.push_str(&rows_text(
                &[
                    "TOPIC",
                    "PARTITION",
                    "COMMITTED",
                    "LOG-END",
                    "LAG",
                    "MEMBER",
                ],
                &group["offsets"],
                |o| {
                    vec![
                        text(&o["topic"]),
                        text(&o["partition"]),
                        text(&o["committed"]),
                        text(&o["log_end_offset"]),
                        text(&o["lag"]),
                        text(&o["member_id"]),
                    ]
                },
            ));
            out.push('\n');
        }
        out
    });
    failed_if_any(&codes)
}

/// The partitions a member was assigned (the consumer protocol's
/// assignment; nothing for other protocols or an empty assignment).
fn assignment(bytes: &Bytes) -> Vec<(String, Vec<i32>)> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3))
        .map(|a| {
            a.assigned_partitions
                .into_iter()
                .map(|tp| (tp.topic.0.to_string(), tp.partitions))
                .collect()
        })
        .unwrap_or_default()
}

/// The group's committed offsets (OffsetFetch v7 of every topic).
fn committed(client: &mut Client, group: &str) -> Result<HashMap<TopicPartition, i64>> {
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(None);
    let answer = client.coordinator(group)?.send(&request, 7)?;
    if answer.error_code != 0 {
        bail!("OffsetFetch for {group}: {}", error_name(answer.error_code));
    }
    let mut offsets = HashMap::new();
    for topic in answer.topics {
        for p in topic.partitions {
            if p.error_code == 0 && p.committed_offset >= 0 {
                offsets.insert(
                    (topic.name.0.to_string(), p.partition_index),
                    p.committed_offset,
                );
            }
        }
    }
    Ok(offsets)
}

fn seek(
    client: &mut Client,
    group: &str,
    to: &str,
    topics: Vec<String>,
    output: Output,
) -> Result<()> {
    let topics = if topics.is_empty() {
        let mut topics: Vec<String> = committed(client, group)?
            .into_keys()
            .map(|(t, _)| t)
            .collect();
        topics.sort();
        topics.dedup();
        if topics.is_empty() {
            bail!("group {group} has no committed offsets: name the topics with --topic");
        }
        topics
    } else {
        topics
    };
    let metadata = client.metadata(Some(&topics))?;
    let targets: HashMap<TopicPartition, i64> = match to {
        "earliest" => client.offsets(&metadata, &topics, EARLIEST)?,
        "latest" => client.offsets(&metadata, &topics, LATEST)?,
        offset => {
            let offset: i64 = offset
                .parse()
                .map_err(|_| anyhow!("--to takes earliest, latest or an offset, not {offset:?}"))?;
            let mut all = HashMap::new();
            for topic in &metadata.topics {
                let Some(name) = topic.name.as_ref() else {
                    continue;
                };
                for p in &topic.partitions {
                    all.insert((name.0.to_string(), p.partition_index), offset);
                }
            }
            all
        }
    };
    if targets.is_empty() {
        bail!("no partitions found for {topics:?}");
    }
    let mut by_topic: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
    for ((topic, partition), offset) in &targets {
        by_topic
            .entry(topic.clone())
            .or_default()
            .push((*partition, *offset));
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(
            by_topic
                .iter()
                .map(|(topic, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|(p, offset)| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_committed_offset(*offset)
                                        .with_committed_leader_epoch(-1)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let answer = client.coordinator(group)?.send(&request, 7)?;
    let mut codes = Vec::new();
    let mut results = Vec::new();
    for topic in answer.topics {
        for p in topic.partitions {
            codes.push(p.error_code);
            let key = (topic.name.0.to_string(), p.partition_index);
            results.push(json!({
                "topic": key.0,
                "partition": key.1,
                "offset": targets.get(&key),
                "error": error_name(p.error_code),
            }));
        }
    }
    results.sort_by_key(|r| (text(&r["topic"]), r["partition"].as_i64()));
    print(
        output,
        &json!({ "group": group, "offsets": results }),
        |v| {
            rows_text(
                &["TOPIC", "PARTITION", "NEW-OFFSET", "STATUS"],
                &v["offsets"],
                |o| {
                    vec![
                        text(&o["topic"]),
                        text(&o["partition"]),
                        text(&o["offset"]),
                        text(&o["error"]),
                    ]
                },
            )
        },
    );
    failed_if_any(&codes)
}

fn delete(client: &mut Client, groups: &[String], output: Output) -> Result<()> {
    let mut results = Vec::new();
    let mut codes = Vec::new();
    for group in groups {
        let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
        let answer = client.coordinator(group)?.send(&request, 2)?;
        for result in answer.results {
            codes.push(result.error_code);
            results.push(json!({
                "group": result.group_id.0.as_str(),
                "error": error_name(result.error_code),
            }));
        }
    }
    print(output, &json!({ "groups": results }), |v| {
        rows_text(&["GROUP", "STATUS"], &v["groups"], |g| {
            vec![text(&g["group"]), text(&g["error"])]
        })
    });
    failed_if_any(&codes)
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}
