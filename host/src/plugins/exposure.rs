//! Which APIs a listener serves (Kafka's `ApiVersionManager` per listener
//! type): a controller listener serves only the controller's request
//! APIs, with ApiVersions and, on a SASL listener, the authentication
//! requests; every other listener serves everything but them. A request
//! for an API its listener does not serve is treated as an unknown ApiKey
//! (the connection is closed, as Kafka does for an API not enabled on
//! the listener), and ApiVersions advertises only what the listener serves.

/// DescribeQuorum, AlterPartition, BrokerRegistration, BrokerHeartbeat,
/// UnregisterBroker, AllocateProducerIds.
pub const CONTROLLER_APIS: [i16; 6] = [55, 56, 62, 63, 64, 67];

const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

/// Does a listener serve `api_key`? `controller` is whether it is one of
/// this node's controller listeners, `sasl` whether it authenticates with
/// SASL.
pub fn serves(api_key: i16, controller: bool, sasl: bool) -> bool {
    let controller_api = CONTROLLER_APIS.contains(&api_key);
    if !controller {
        return !controller_api;
    }
    controller_api
        || api_key == API_VERSIONS
        || (sasl && matches!(api_key, SASL_HANDSHAKE | SASL_AUTHENTICATE))
}

/// [`serves`] for a session's listener, given this node's controller
/// listener names (none on a single node or a broker-only one).
pub fn serves_on(api_key: i16, listener: &str, protocol: &str, controllers: &[String]) -> bool {
    let controller = controllers.iter().any(|name| name == listener);
    serves(api_key, controller, protocol.starts_with("SASL_"))
}

/// The APIs a session's listener serves, out of what the registry holds:
/// what ApiVersions advertises there, answered by the handler or (for a
/// version we do not serve) by the host.
pub fn served_apis(
    apis: Vec<crate::plugins::bindings::ApiInfo>,
    listener: &str,
    protocol: &str,
    controllers: &[String],
) -> Vec<crate::plugins::bindings::ApiInfo> {
    apis.into_iter()
        .filter(|api| serves_on(api.api_key, listener, protocol, controllers))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_apis_only_on_controller_listeners() {
        for key in CONTROLLER_APIS {
            assert!(serves(key, true, false));
            assert!(!serves(key, false, false));
        }
        assert!(serves(18, true, false) && serves(18, false, false));
        assert!(!serves(0, true, true) && serves(0, false, false));
        assert!(serves(36, true, true) && !serves(36, true, false));
        let controllers = ["CONTROLLER".to_string()];
        assert!(serves_on(62, "CONTROLLER", "PLAINTEXT", &controllers));
        assert!(!serves_on(62, "PLAINTEXT", "PLAINTEXT", &controllers));
        assert!(!serves_on(62, "PLAINTEXT", "PLAINTEXT", &[]));
    }
}
