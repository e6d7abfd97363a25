//! Which APIs a listener serves (Kafka's `ApiVersionManager` per listener
//! type): a controller listener serves only the controller's request
//! APIs, with ApiVersions and, on a SASL listener, the authentication
//! requests; every other listener serves everything but them, except that
//! on a cluster broker it serves DescribeQuorum and UnregisterBroker by
//! forwarding them to the active controller (Kafka 4's `KafkaApis`
//! forwards both, so admin clients may ask any broker). A request
//! for an API its listener does not serve is treated as an unknown ApiKey
//! (the connection is closed, as Kafka does for an API not enabled on
//! the listener), and ApiVersions advertises only what the listener serves.

/// DescribeQuorum, AlterPartition, BrokerRegistration, BrokerHeartbeat,
/// UnregisterBroker, AllocateProducerIds.
pub const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];

/// Controller APIs a cluster broker's listeners serve too, forwarded:
/// DescribeQuorum, UnregisterBroker.
pub const FORWARDED_APIS: [i16; 2] = [55, 64];

const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

/// Does a listener serve `api_key`? `controller` is whether it is one of
/// this node's controller listeners, `sasl` whether it authenticates with
/// SASL, `forwards` whether this node forwards [`FORWARDED_APIS`] (a
/// cluster node with the broker role).
pub fn serves(api_key: i16, controller: bool, sasl: bool, forwards: bool) -> bool {
    let controller_api = CONTROLLER_APIS.contains(&api_key);
    if !controller {
        return !controller_api || (forwards && FORWARDED_APIS.contains(&api_key));
    }
    controller_api
        || api_key == API_VERSIONS
        || (sasl && matches!(api_key, SASL_HANDSHAKE | SASL_AUTHENTICATE))
}

/// [`serves`] for a session's listener, given this node's controller
/// listener names (none on a single node or a broker-only one) and whether
/// it forwards.
pub fn serves_on(
    api_key: i16,
    listener: &str,
    protocol: &str,
    controllers: &[String],
    forwards: bool,
) -> bool {
    let controller = controllers.iter().any(|name| name == listener);
    serves(api_key, controller, protocol.starts_with("SASL_"), forwards)
}

/// The APIs a session's listener serves, out of what the registry holds:
/// what ApiVersions advertises there, answered by the handler or (for a
/// version we do not serve) by the host.
pub fn served_apis(
    apis: Vec<crate::plugins::bindings::ApiInfo>,
    listener: &str,
    protocol: &str,
    controllers: &[String],
    forwards: bool,
) -> Vec<crate::plugins::bindings::ApiInfo> {
    apis.into_iter()
        .filter(|api| serves_on(api.api_key, listener, protocol, controllers, forwards))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_apis_only_on_controller_listeners() {
        for key in CONTROLLER_APIS {
            assert!(serves(key, true, false, false));
            assert!(!serves(key, false, false, false));
        }
        assert!(serves(18, true, false, false) && serves(18, false, false, false));
        assert!(!serves(0, true, true, false) && serves(0, false, false, false));
        assert!(serves(36, true, true, false) && !serves(36, true, false, false));
        let controllers = ["CONTROLLER".to_string()];
        assert!(serves_on(62, "CONTROLLER", "PLAINTEXT", &controllers, true));
        assert!(!serves_on(
            62,
            "PLAINTEXT",
            "PLAINTEXT",
            &controllers,
            false
        ));
        assert!(!serves_on(62, "PLAINTEXT", "PLAINTEXT", &[], false));
    }

    #[test]
    fn a_cluster_broker_serves_the_forwarded_apis_on_its_listeners() {
        for key in CONTROLLER_APIS {
            let forwarded = FORWARDED_APIS.contains(&key);
            assert_eq!(serves(key, false, false, true), forwarded, "{key}");
            assert!(!serves(key, false, false, false), "{key} on a single node");
            assert!(
                serves(key, true, false, true),
                "{key} on a controller listener"
            );
        }
        assert!(serves_on(55, "PLAINTEXT", "PLAINTEXT", &[], true));
        assert!(!serves_on(63, "PLAINTEXT", "PLAINTEXT", &[], true));
    }
}
