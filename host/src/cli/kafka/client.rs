//! The command line's view of a cluster: a bootstrap connection, the
//! brokers Metadata names, and a connection to each broker the commands
//! need (a partition's leader, a group's coordinator), opened on demand.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::messages::{
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    metadata_request::MetadataRequestTopic,
    BrokerId, FindCoordinatorRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::connection::{Connection, Security};
use super::error_name;

/// The Metadata version whose fields the client fills in (topic ids, no
/// cluster-authorized-operations).
const METADATA_VERSION: i16 = 12;

pub struct Client {
    security: Security,
    bootstrap: Connection,
    /// Broker id to `host:port`, from the last Metadata.
    brokers: HashMap<i32, String>,
    connections: HashMap<i32, Connection>,
}

impl Client {
    /// Connects to the first answering address of `bootstrap`
    /// (comma-separated `host:port`s).
    pub fn connect(bootstrap: &str, security: Security) -> Result<Client> {
        let mut failures = Vec::new();
        for address in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            match Connection::open(address, &security) {
                Ok(bootstrap) => {
                    return Ok(Client {
                        security,
                        bootstrap,
                        brokers: HashMap::new(),
                        connections: HashMap::new(),
                    })
                }
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
        if failures.is_empty() {
            bail!("--bootstrap names no broker");
        }
        Err(anyhow!(
            "no bootstrap broker answered: {}",
            failures.join("; ")
        ))
    }

    /// The bootstrap connection (any broker serves admin requests).
    pub fn any(&mut self) -> &mut Connection {
        &mut self.bootstrap
    }

    /// Metadata for `topics` (None: every topic); remembers the brokers.
    pub fn metadata(&mut self, topics: Option<&[String]>) -> Result<MetadataResponse> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let answer = self.bootstrap.send(&request, METADATA_VERSION)?;
        self.brokers = answer
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        Ok(answer)
    }

    /// A connection to broker `id` (as the last Metadata named it).
    pub fn broker(&mut self, id: i32) -> Result<&mut Connection> {
        if !self.connections.contains_key(&id) {
            if self.brokers.is_empty() {
                self.metadata(Some(&[]))?;
            }
            let address = self
                .brokers
                .get(&id)
                .ok_or_else(|| anyhow!("broker {id} is not in the cluster's metadata"))?
                .clone();
            let connection = Connection::open(&address, &self.security)
                .with_context(|| format!("broker {id}"))?;
            self.connections.insert(id, connection);
        }
        self.connections
            .get_mut(&id)
            .ok_or_else(|| anyhow!("broker {id}: no connection"))
    }

    /// The coordinator of consumer group `group`.
    pub fn coordinator(&mut self, group: &str) -> Result<&mut Connection> {
        let id = self.coordinator_id(group)?;
        self.broker(id)
    }

    fn coordinator_id(&mut self, group: &str) -> Result<i32> {
        let key = StrBytes::from_string(group.to_string());
        let version = self
            .bootstrap
            .version_of::<FindCoordinatorRequest>()?
            .min(4);
        let request = if version >= 4 {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
        } else {
            FindCoordinatorRequest::default().with_key(key)
        };
        let answer = self.bootstrap.send_at(&request, version)?;
        let (error, message, node) = match answer.coordinators.first() {
            Some(c) => (c.error_code, c.error_message.clone(), c.node_id.0),
            None if version >= 4 => bail!("FindCoordinator answered no coordinator"),
            None => (answer.error_code, answer.error_message, answer.node_id.0),
        };
        if error != 0 {
            bail!(
                "no coordinator for group {group}: {} {}",
                error_name(error),
                message.as_deref().unwrap_or_default()
            );
        }
        if self.brokers.is_empty() {
            self.metadata(Some(&[]))?;
        }
        Ok(node)
    }
}

/// ListOffsets' timestamp for the log start offset.
pub const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for the high watermark.
pub const LATEST: i64 = -1;

/// A partition of a topic.
pub type TopicPartition = (String, i32);

impl Client {
    /// The offset at `timestamp` (EARLIEST, LATEST) of each partition of
    /// `topics` in `metadata`, asked of each partition's leader; a
    /// partition whose leader is unknown or answers an error is left out.
    pub fn offsets(
        &mut self,
        metadata: &MetadataResponse,
        topics: &[String],
        timestamp: i64,
    ) -> Result<HashMap<TopicPartition, i64>> {
        let mut by_leader: HashMap<i32, Vec<TopicPartition>> = HashMap::new();
        for topic in &metadata.topics {
            let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            if !topics.contains(&name) {
                continue;
            }
            for partition in &topic.partitions {
                if partition.leader_id.0 >= 0 {
                    by_leader
                        .entry(partition.leader_id.0)
                        .or_default()
                        .push((name.clone(), partition.partition_index));
                }
            }
        }
        let mut offsets = HashMap::new();
        for (leader, partitions) in by_leader {
            let mut request_topics: Vec<ListOffsetsTopic> = Vec::new();
            for (topic, partition) in &partitions {
                let entry = ListOffsetsPartition::default()
                    .with_partition_index(*partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp);
                match request_topics
                    .iter_mut()
                    .find(|t| t.name.0.as_str() == topic)
                {
                    Some(t) => t.partitions.push(entry),
                    None => request_topics.push(
                        ListOffsetsTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(vec![entry]),
                    ),
                }
            }
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(request_topics);
            let answer = self.broker(leader)?.send(&request, 7)?;
            for topic in answer.topics {
                for partition in topic.partitions {
                    if partition.error_code == 0 {
                        offsets.insert(
                            (topic.name.0.to_string(), partition.partition_index),
                            partition.offset,
                        );
                    }
                }
            }
        }
        Ok(offsets)
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}
