//! ListConfigResources (ApiKey 74, ListClientMetricsResources before
//! KIP-1142): the resources that have configs, as Kafka's
//! `KafkaApis.handleListConfigResources` and
//! `ListConfigResourcesRequest.supportedResourceTypes`.
//!
//! What Kafka does:
//!
//! - DESCRIBE_CONFIGS on the Cluster is required, else
//!   CLUSTER_AUTHORIZATION_FAILED and no resources.
//! - v0 (ListClientMetricsResources, KIP-714) lists the client-metrics
//!   subscriptions. v1 (KIP-1142) takes `resource_types` and answers each
//!   resource's name and type; an empty list means every type the version
//!   supports: v0 CLIENT_METRICS (16) only; v1 TOPIC (2), BROKER (4),
//!   BROKER_LOGGER (8), CLIENT_METRICS (16) and GROUP (32). One unsupported
//!   type fails the whole request with UNSUPPORTED_VERSION and no
//!   resources.
//! - The resources, in Kafka's order: the groups that have dynamic group
//!   configs (`GroupConfigManager.groupIds`, not every group), the
//!   client-metrics subscription names, every broker (by node id) once as
//!   BROKER_LOGGER and once as BROKER, every topic.
//!
//! What Gregor does: the same checks and order, with what this node has.
//! Groups: the groups with dynamic group configs
//! (`configs.list-group-configs`), as Kafka. Subscriptions: the CLIENT_METRICS config resources
//! (`configs.list-client-metrics`). Broker loggers and brokers: this node,
//! as seen from the request's listener, once as BROKER_LOGGER (its runtime
//! log levels) and once as BROKER. Topics: every topic, by name.
//!
//! Error response (a trap or timeout): the error and no resources, as
//! Kafka's `ListConfigResourcesRequest.getErrorResponse`.

use gregor_sdk::authorize::cluster_allowed;
use gregor_sdk::authz::Operation;
use gregor_sdk::configs;
use gregor_sdk::ids::str_bytes;
use gregor_sdk::kafka_protocol::messages::list_config_resources_response::ConfigResource;
use gregor_sdk::kafka_protocol::messages::{
    ListConfigResourcesRequest, ListConfigResourcesResponse,
};
use gregor_sdk::{metadata, Handler, Reply, RequestContext, ResponseError};

/// Kafka's `ConfigResource.Type` ids.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

const MAX_VERSION: i16 = 1;

struct ListConfigResources;

impl Handler for ListConfigResources {
    gregor_sdk::api!(ListConfigResourcesRequest, 0..=MAX_VERSION);

    fn handle(
        ctx: &RequestContext,
        request: &ListConfigResourcesRequest,
    ) -> Reply<ListConfigResourcesResponse> {
        if !cluster_allowed(Operation::DescribeConfigs) {
            return refused(ResponseError::ClusterAuthorizationFailed.code()).into();
        }
        match requested_types(ctx.api_version, &request.resource_types) {
            Err(code) => refused(code),
            Ok(types) => {
                let inventory = Inventory::of(&types);
                ListConfigResourcesResponse::default()
                    .with_config_resources(resources(&types, &inventory))
            }
        }
        .into()
    }
}

/// The request answered with `error_code` and no resources.
fn refused(error_code: i16) -> ListConfigResourcesResponse {
    ListConfigResourcesResponse::default().with_error_code(error_code)
}

/// Kafka's `ListConfigResourcesRequest.supportedResourceTypes`.
fn supported_types(version: i16) -> &'static [i8] {
    if version == 0 {
        &[CLIENT_METRICS]
    } else {
        &[TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP]
    }
}

/// The types to list: the requested ones, or every supported type when
/// none is named (always so in v0, which has no field for them). A type
/// the version does not support is UNSUPPORTED_VERSION for the whole
/// request.
fn requested_types(version: i16, requested: &[i8]) -> Result<Vec<i8>, i16> {
    let supported = supported_types(version);
    if requested.is_empty() {
        return Ok(supported.to_vec());
    }
    if requested.iter().any(|kind| !supported.contains(kind)) {
        return Err(ResponseError::UnsupportedVersion.code());
    }
    Ok(requested.to_vec())
}

/// What this node has to list, fetched only for the types asked for.
#[derive(Debug, Default)]
struct Inventory {
    groups: Vec<String>,
    client_metrics: Vec<String>,
    brokers: Vec<i32>,
    topics: Vec<String>,
}

impl Inventory {
    fn of(types: &[i8]) -> Inventory {
        let mut inventory = Inventory::default();
        if types.contains(&GROUP) {
            inventory.groups = configs::list_group_configs();
        }
        if types.contains(&CLIENT_METRICS) {
            inventory.client_metrics = configs::list_client_metrics();
        }
        if types.contains(&BROKER) || types.contains(&BROKER_LOGGER) {
            inventory.brokers = metadata::describe_cluster()
                .brokers
                .iter()
                .map(|broker| broker.node_id)
                .collect();
        }
        if types.contains(&TOPIC) {
            inventory.topics = metadata::list_topics()
                .into_iter()
                .map(|topic| topic.name)
                .collect();
            inventory.topics.sort();
        }
        inventory
    }
}

/// The resources of the given types, in Kafka's order: groups with
/// configs, client-metrics subscriptions, broker loggers,
/// brokers, topics.
fn resources(types: &[i8], inventory: &Inventory) -> Vec<ConfigResource> {
    let wants = |kind: i8| types.contains(&kind);
    let mut listed = Vec::new();
    if wants(GROUP) {
        listed.extend(inventory.groups.iter().map(|name| resource(name, GROUP)));
    }
    if wants(CLIENT_METRICS) {
        listed.extend(
            inventory
                .client_metrics
                .iter()
                .map(|name| resource(name, CLIENT_METRICS)),
        );
    }
    // Every broker has a logger resource as well as its own.
    for kind in [BROKER_LOGGER, BROKER] {
        if wants(kind) {
            listed.extend(
                inventory
                    .brokers
                    .iter()
                    .map(|node| resource(&node.to_string(), kind)),
            );
        }
    }
    if wants(TOPIC) {
        listed.extend(inventory.topics.iter().map(|name| resource(name, TOPIC)));
    }
    listed
}

fn resource(name: &str, kind: i8) -> ConfigResource {
    ConfigResource::default()
        .with_resource_name(str_bytes(name))
        .with_resource_type(kind)
}

gregor_sdk::export_handler!(ListConfigResources);

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::authz::Action;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::protocol::{Decodable, Encodable};
    use gregor_sdk::metadata::TopicInfo;
    use gregor_sdk::Uuid;

    fn inventory() -> Inventory {
        Inventory {
            groups: vec!["g1".into()],
            client_metrics: vec!["all-producers".into()],
            brokers: vec![1],
            topics: vec!["a".into(), "b".into()],
        }
    }

    fn listed(types: &[i8]) -> Vec<(String, i8)> {
        resources(types, &inventory())
            .into_iter()
            .map(|r| (r.resource_name.to_string(), r.resource_type))
            .collect()
    }

    #[test]
    fn v0_lists_client_metrics_only() {
        assert_eq!(requested_types(0, &[]), Ok(vec![CLIENT_METRICS]));
        let types = requested_types(0, &[]).unwrap();
        assert_eq!(listed(&types), [("all-producers".to_string(), 16)]);
    }

    #[test]
    fn v1_without_types_lists_everything_in_kafka_order() {
        let types = requested_types(1, &[]).unwrap();
        assert_eq!(types.len(), 5);
        assert_eq!(
            listed(&types),
            [
                ("g1".to_string(), GROUP),
                ("all-producers".to_string(), CLIENT_METRICS),
                ("1".to_string(), BROKER_LOGGER),
                ("1".to_string(), BROKER),
                ("a".to_string(), TOPIC),
                ("b".to_string(), TOPIC),
            ]
        );
    }

    #[test]
    fn v1_filters_by_type() {
        assert_eq!(listed(&[TOPIC]).len(), 2);
        assert_eq!(listed(&[BROKER, BROKER]), [("1".to_string(), BROKER)]);
        assert_eq!(listed(&[GROUP]), [("g1".to_string(), GROUP)]);
        assert_eq!(
            listed(&[GROUP, BROKER_LOGGER]),
            [("g1".to_string(), GROUP), ("1".to_string(), BROKER_LOGGER)]
        );
    }

    #[test]
    fn unsupported_types_fail_the_request() {
        let unsupported = ResponseError::UnsupportedVersion.code();
        for kind in [0, 1, 3, 64, -1] {
            assert_eq!(
                requested_types(1, &[TOPIC, kind]),
                Err(unsupported),
                "{kind}"
            );
        }
        // v0 supports only client metrics (a v0 request cannot name types,
        // but the rule is the version's).
        assert_eq!(requested_types(0, &[TOPIC]), Err(unsupported));
    }

    gregor_sdk::served_versions_test!(
        ListConfigResources,
        [ListConfigResourcesRequest::default()],
        [ListConfigResourcesResponse::default()
            .with_config_resources(resources(&requested_types(1, &[]).unwrap(), &inventory()))]
    );

    #[test]
    fn v0_clients_read_client_metrics_resources() {
        for version in 0..=MAX_VERSION {
            let types = requested_types(version, &[]).unwrap();
            let response = ListConfigResourcesResponse::default()
                .with_config_resources(resources(&types, &inventory()));
            let mut encoded = Vec::new();
            assert!(response.encode(&mut encoded, version).is_ok(), "v{version}");
            let decoded =
                ListConfigResourcesResponse::decode(&mut encoded.as_slice(), version).unwrap();
            let names: Vec<String> = decoded
                .config_resources
                .iter()
                .map(|r| r.resource_name.to_string())
                .collect();
            let first = if version == 0 { "all-producers" } else { "g1" };
            assert_eq!(names.first().map(String::as_str), Some(first));
            // v0 has no type on the wire: a v0 client reads CLIENT_METRICS.
            assert!(decoded
                .config_resources
                .iter()
                .all(|r| version >= 1 || r.resource_type == CLIENT_METRICS));
        }
    }

    /// Nothing is allowed: the inventory is never asked for.
    struct Denied;

    impl FakeHost for Denied {
        fn authorize(&self, _: &Action) -> bool {
            false
        }
        fn list_topics(&self) -> Vec<TopicInfo> {
            panic!("an unauthorized request listed topics")
        }
    }

    /// Everything is allowed; two topics and no broker.
    struct TwoTopics;

    impl FakeHost for TwoTopics {
        fn list_topics(&self) -> Vec<TopicInfo> {
            ["b", "a"]
                .into_iter()
                .map(|name| TopicInfo {
                    name: name.to_string(),
                    topic_id: Uuid { high: 0, low: 1 },
                    partitions: Vec::new(),
                    is_internal: false,
                })
                .collect()
        }
    }

    #[test]
    fn the_cluster_must_allow_describe_configs() {
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let request = ListConfigResourcesRequest::default().with_resource_types(vec![TOPIC]);
        let handled = fake::handle::<ListConfigResources>(Denied, 1, &request);
        let response = handled.response.unwrap();
        assert_eq!(
            (response.error_code, response.config_resources.len()),
            (denied, 0)
        );
        assert_eq!(handled.counted_errors, [denied]);
    }

    #[test]
    fn topics_are_listed_by_name_and_unsupported_types_fail() {
        let request = ListConfigResourcesRequest::default().with_resource_types(vec![TOPIC]);
        let handled = fake::handle::<ListConfigResources>(TwoTopics, 1, &request);
        let names: Vec<String> = handled
            .response
            .unwrap()
            .config_resources
            .iter()
            .map(|r| r.resource_name.to_string())
            .collect();
        assert_eq!(names, ["a", "b"]);

        let request = ListConfigResourcesRequest::default().with_resource_types(vec![TOPIC, 64]);
        let handled = fake::handle::<ListConfigResources>(TwoTopics, 1, &request);
        let unsupported = ResponseError::UnsupportedVersion.code();
        assert_eq!(handled.response.map(|r| r.error_code), Some(unsupported));
    }
}
