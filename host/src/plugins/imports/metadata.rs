//! `metadata`: cluster, topics, configs and the served APIs.
//!
//! The topic service bounds what one call may create (see
//! `metadata::bounds`) before it creates or describes anything, and the
//! time it spends creating or deleting partition logs is credited to the
//! host, so a legal request for thousands of partitions is not cut off by
//! the guest's call deadline.

use crate::metadata::topic_config::BrokerView;
use crate::metadata::topics::{NewTopic as CreateRequest, TopicError};
use crate::metadata::view::TopicView;
use crate::plugins::bindings::handler::gregor::broker::metadata::{
    self, Broker as BrokerNode, Cluster, ConfigEntry, ElectionResult, NewTopic,
    OngoingReassignment, PartitionInfo, TopicInfo,
};
use crate::plugins::bindings::handler::gregor::broker::types::{ApiInfo, KafkaError, Uuid};
use crate::plugins::exposure::served_apis;
use crate::plugins::imports::configs::source_of;
use crate::plugins::state::HandlerState;

/// Kafka's internal topics, flagged `is_internal` in Metadata.
const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

fn topic_info(topic: TopicView) -> TopicInfo {
    TopicInfo {
        is_internal: INTERNAL_TOPICS.contains(&topic.name.as_str()),
        name: topic.name,
        topic_id: Uuid::from(topic.id),
        partitions: topic
            .partitions
            .into_iter()
            .map(|p| PartitionInfo {
                partition: p.partition,
                leader_id: p.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.replicas,
                isr: p.isr,
                offline_replicas: p.offline_replicas,
            })
            .collect(),
    }
}

fn kafka_error(error: TopicError) -> KafkaError {
    KafkaError {
        code: error.code,
        message: Some(error.message),
    }
}

impl metadata::Host for HandlerState {
    fn describe_cluster(&mut self) -> Cluster {
        let listener = self
            .session
            .as_ref()
            .map(|s| s.listener.clone())
            .unwrap_or_default();
        let cluster = self.services.metadata().cluster(&listener);
        Cluster {
            cluster_id: cluster.cluster_id,
            controller_id: cluster.controller_id,
            brokers: cluster
                .brokers
                .into_iter()
                .map(|node| BrokerNode {
                    node_id: node.id,
                    host: node.host,
                    port: i32::from(node.port),
                    rack: node.rack,
                })
                .collect(),
        }
    }

    fn list_topics(&mut self) -> Vec<TopicInfo> {
        let topics = self.services.metadata().topics();
        topics.into_iter().map(topic_info).collect()
    }

    fn topic_by_name(&mut self, name: String) -> Option<TopicInfo> {
        self.services.metadata().topic(&name).map(topic_info)
    }

    fn topic_by_id(&mut self, id: Uuid) -> Option<TopicInfo> {
        let id = u128::from(id);
        self.services.metadata().topic_by_id(id).map(topic_info)
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
            replica_assignment: topic.replica_assignment,
        };
        // Creating partition logs is the broker's time, not the guest's.
        self.broker_work(|state| {
            state
                .services
                .metadata()
                .create_topic(&request, validate_only)
        })
        .map(topic_info)
        .map_err(kafka_error)
    }

    fn delete_topic(&mut self, name: String) -> Result<Uuid, KafkaError> {
        self.broker_work(|state| state.services.metadata().delete_topic(&name))
            // Kafka drops the committed offsets of deleted partitions.
            .inspect(|_| self.services.groups.on_topic_deleted(&name))
            .map(Uuid::from)
            .map_err(kafka_error)
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
        self.broker_work(|state| {
            state.services.metadata().create_partitions(
                &name,
                total,
                assignments.as_deref(),
                validate_only,
            )
        })
        .map(topic_info)
        .map_err(kafka_error)
    }

    fn elect_leaders(
        &mut self,
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Vec<ElectionResult> {
        self.broker_work(|state| {
            state
                .services
                .metadata()
                .elect_leaders(unclean, partitions.as_deref())
        })
        .into_iter()
        .map(|e| ElectionResult {
            topic: e.topic,
            partition: e.partition,
            error: e.result.err().map(kafka_error),
        })
        .collect()
    }

    fn alter_partition_reassignment(
        &mut self,
        topic: String,
        partition: i32,
        replicas: Option<Vec<i32>>,
        allow_replication_factor_change: bool,
    ) -> Result<(), KafkaError> {
        self.broker_work(|state| {
            state.services.metadata().alter_partition_reassignment(
                &topic,
                partition,
                replicas.as_deref(),
                allow_replication_factor_change,
            )
        })
        .map_err(kafka_error)
    }

    fn list_partition_reassignments(
        &mut self,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Vec<OngoingReassignment> {
        self.services
            .metadata()
            .list_partition_reassignments(topics.as_deref())
            .into_iter()
            .map(|o| OngoingReassignment {
                topic: o.topic,
                partition: o.partition,
                replicas: o.replicas,
                adding_replicas: o.adding,
                removing_replicas: o.removing,
            })
            .collect()
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

    /// What the request's listener serves (`network::exposure`).
    fn supported_apis(&mut self) -> Vec<ApiInfo> {
        let controllers = self
            .controller
            .get()
            .map(|c| c.listeners().to_vec())
            .unwrap_or_default();
        let (listener, protocol) = self
            .session
            .as_ref()
            .map(|s| (s.listener.as_str(), s.security_protocol.as_str()))
            .unwrap_or_default();
        served_apis(
            self.registry.supported_apis(),
            listener,
            protocol,
            &controllers,
            self.forwarder.get().is_some(),
        )
    }
}
