//! `metadata`: cluster, topics, configs and the served APIs.
//!
//! The topic service bounds what one call may create (see
//! `metadata::bounds`) before it creates or describes anything, and the
//! time it spends creating or deleting partition logs is credited to the
//! host, so a legal request for thousands of partitions is not cut off by
//! the guest's call deadline.

use std::time::Instant;

use crate::metadata::topic_config::BrokerView;
use crate::metadata::topics::{NewTopic as CreateRequest, Topic};
use crate::plugins::bindings::handler::gregor::broker::metadata::{
    self, Broker as BrokerNode, Cluster, ConfigEntry, NewTopic, PartitionInfo, TopicInfo,
};
use crate::plugins::bindings::handler::gregor::broker::types::{ApiInfo, KafkaError, Uuid};
use crate::plugins::imports::configs::source_of;
use crate::plugins::state::HandlerState;

/// Kafka's internal topics, flagged `is_internal` in Metadata.
const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

fn topic_info(topic: &Topic, node_id: i32) -> TopicInfo {
    TopicInfo {
        name: topic.name.clone(),
        topic_id: Uuid::from(topic.id),
        is_internal: INTERNAL_TOPICS.contains(&topic.name.as_str()),
        partitions: (0..topic.partitions)
            .map(|partition| PartitionInfo {
                partition,
                leader_id: node_id,
                leader_epoch: 0,
                replicas: vec![node_id],
                isr: vec![node_id],
                offline_replicas: Vec::new(),
            })
            .collect(),
    }
}

impl metadata::Host for HandlerState {
    fn describe_cluster(&mut self) -> Cluster {
        let broker = &self.services;
        let listener = self
            .session
            .as_ref()
            .map(|s| s.listener.clone())
            .unwrap_or_default();
        let brokers = broker
            .advertised_for(&listener)
            .map(|advertised| BrokerNode {
                node_id: broker.node_id,
                host: advertised.host,
                port: i32::from(advertised.port),
                rack: None,
            })
            .into_iter()
            .collect();
        Cluster {
            cluster_id: broker.cluster_id.clone(),
            controller_id: broker.node_id,
            brokers,
        }
    }

    fn list_topics(&mut self) -> Vec<TopicInfo> {
        let node = self.services.node_id;
        self.services
            .topics
            .list()
            .iter()
            .map(|t| topic_info(t, node))
            .collect()
    }

    fn topic_by_name(&mut self, name: String) -> Option<TopicInfo> {
        let node = self.services.node_id;
        self.services
            .topics
            .get(&name)
            .map(|t| topic_info(&t, node))
    }

    fn topic_by_id(&mut self, id: Uuid) -> Option<TopicInfo> {
        let node = self.services.node_id;
        self.services
            .topics
            .by_id(u128::from(id))
            .map(|t| topic_info(&t, node))
    }

    fn create_topic(
        &mut self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<TopicInfo, KafkaError> {
        let request = CreateRequest {
            name: topic.name,
            num_partitions: topic.num_partitions,
            replication_factor: topic.replication_factor,
            configs: topic.configs,
        };
        let node = self.services.node_id;
        let started = Instant::now();
        let created = self.services.topics.create(&request, validate_only);
        // Creating partition logs is the broker's time, not the guest's.
        self.clock.add_host_wait(started.elapsed());
        created
            .map(|created| topic_info(&created, node))
            .map_err(|error| KafkaError {
                code: error.code,
                message: Some(error.message),
            })
    }

    fn delete_topic(&mut self, name: String) -> Result<Uuid, KafkaError> {
        let started = Instant::now();
        let deleted = self.services.topics.delete(&name);
        self.clock.add_host_wait(started.elapsed());
        deleted
            // Kafka drops the committed offsets of deleted partitions.
            .inspect(|_| self.services.groups.on_topic_deleted(&name))
            .map(Uuid::from)
            .map_err(|error| KafkaError {
                code: error.code,
                message: Some(error.message),
            })
    }

    fn topic_configs(&mut self, name: String) -> Option<Vec<ConfigEntry>> {
        self.services.topics.configs(&name).map(|entries| {
            entries
                .into_iter()
                .map(|entry| ConfigEntry {
                    name: entry.name.to_string(),
                    value: Some(entry.value),
                    source: source_of(entry.source),
                    read_only: false,
                    is_sensitive: false,
                })
                .collect()
        })
    }

    fn create_partitions(
        &mut self,
        name: String,
        total: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<TopicInfo, KafkaError> {
        let node = self.services.node_id;
        let started = Instant::now();
        let created = self.services.topics.create_partitions(
            &name,
            total,
            assignments.as_deref(),
            node,
            validate_only,
        );
        self.clock.add_host_wait(started.elapsed());
        created
            .map(|topic| topic_info(&topic, node))
            .map_err(|error| KafkaError {
                code: error.code,
                message: Some(error.message),
            })
    }

    /// The effective value: dynamic (AlterConfigs) before static.
    fn broker_config(&mut self, name: String) -> Option<String> {
        let layers = self.services.dynamic.broker_layers();
        BrokerView {
            layers: &layers,
            config: &self.services.config,
        }
        .value(&name)
        .map(|(value, _)| value)
    }

    fn supported_apis(&mut self) -> Vec<ApiInfo> {
        self.registry.supported_apis()
    }
}
