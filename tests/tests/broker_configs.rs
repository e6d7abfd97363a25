//! Broker configs Gregor does not act on (issue 16 item 3): Kafka 4 takes
//! AlterConfigs of any of its dynamic broker configs, stores it and
//! describes it back; Gregor does the same from its catalog of Kafka's
//! configs. confluent-kafka's AdminClient sets and describes them
//! (`tests/python/broker_catalog.py`), kafka-python names the cluster-wide
//! default, and a DescribeConfigs v4 frame (encoded with `kafka-protocol`)
//! reads the documentation librdkafka does not ask for.

use bytes::{Bytes, BytesMut};
use gregor_tests::wire::{request_frame, Conn};
use gregor_tests::Broker;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use serde_json::Value;

const RELOGIN: &str = "sasl.kerberos.min.time.before.relogin";

fn python(phase: &str, broker: &Broker) -> Value {
    let (stdout, stderr) =
        gregor_tests::run_python("broker_catalog.py", &[broker.bootstrap().as_str(), phase]);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("broker_catalog.py printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// DescribeConfigs v4 of this broker's `names` with their documentation:
/// (name, value, read-only, documentation) of each.
fn documented(broker: &Broker, names: &[&str]) -> Vec<(String, Option<String>, bool, String)> {
    let version = 4;
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(
                names
                    .iter()
                    .map(|name| StrBytes::from_string(name.to_string()))
                    .collect(),
            ))])
        .with_include_documentation(true);
    let mut body = BytesMut::new();
    request.encode(&mut body, version).unwrap();
    let frame = request_frame(DescribeConfigsRequest::KEY, version, 7, true, &body);
    let payload = Conn::connect(broker.addr()).round_trip(&frame, 7);
    let mut buf = Bytes::from(payload);
    ResponseHeader::decode(&mut buf, 1).unwrap();
    let response = DescribeConfigsResponse::decode(&mut buf, version).unwrap();
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    result
        .configs
        .iter()
        .map(|config| {
            (
                config.name.to_string(),
                config.value.as_ref().map(ToString::to_string),
                config.read_only,
                config
                    .documentation
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn kafka_broker_configs_gregor_ignores_are_stored_and_described() {
    let mut broker = Broker::start();
    let seen = python("set", &broker);
    eprintln!("broker_catalog: {seen}");
    assert_eq!(seen["set"], "ok");

    let configs = documented(&broker, &[RELOGIN, "broker.id", "log.retention.ms"]);
    let by_name = |name: &str| {
        configs
            .iter()
            .find(|config| config.0 == name)
            .unwrap_or_else(|| panic!("{name} not described: {configs:?}"))
    };
    let relogin = by_name(RELOGIN);
    assert_eq!(relogin.1.as_deref(), Some("120000"));
    assert!(!relogin.2);
    assert!(
        relogin.3.starts_with("Login thread sleep time")
            && relogin
                .3
                .ends_with("(accepted and stored; Gregor does not act on it)"),
        "{}",
        relogin.3
    );
    assert!(by_name("broker.id").2, "broker.id is read-only");
    assert!(
        !by_name("log.retention.ms")
            .3
            .contains("Gregor does not act"),
        "a config Gregor acts on carries no note"
    );

    broker.restart();
    let seen = python("restarted", &broker);
    assert_eq!(seen["restarted"], "ok");
}
