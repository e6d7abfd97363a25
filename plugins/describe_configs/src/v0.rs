//! DescribeConfigs v0 (Kafka 4 removed it, KIP-896), rewritten to and from
//! v1 by the SDK ([`gregor_sdk::legacy`]): no synonyms, and each config's
//! source is only `is_default`, true when the source is DEFAULT_CONFIG (5).
//! (Kafka 3.9 sent false for every config in v0: its brokers no longer
//! set the field; v0's clients read it as "not the default".)

use gregor_sdk::legacy::{scalar, Field, Legacy, Ty, LATEST};

/// Kafka's ConfigSource.DEFAULT_CONFIG.
const DEFAULT_CONFIG: i64 = 5;

const RESOURCE: &[Field] = &[
    Field::new("resource_type", Ty::Int8, (0, LATEST)),
    Field::new("resource_name", Ty::String, (0, LATEST)),
    Field::new("configuration_keys", Ty::Array(&Ty::String), (0, LATEST)),
];
const REQUEST: &[Field] = &[
    Field::new("resources", Ty::Structs(RESOURCE), (0, LATEST)),
    Field::new("include_synonyms", Ty::Bool, (1, LATEST)),
];

const SYNONYM: &[Field] = &[
    Field::new("name", Ty::String, (1, LATEST)),
    Field::new("value", Ty::String, (1, LATEST)),
    Field::new("source", Ty::Int8, (1, LATEST)),
];
const CONFIG: &[Field] = &[
    Field::new("name", Ty::String, (0, LATEST)),
    Field::new("value", Ty::String, (0, LATEST)),
    Field::new("read_only", Ty::Bool, (0, LATEST)),
    Field::new("config_source", Ty::Int8, (1, LATEST)).with_default(-1),
    Field::new("is_default", Ty::Bool, (0, 0)).derived(|read, out| {
        out.push(u8::from(
            scalar(read, "config_source") == Some(DEFAULT_CONFIG),
        ));
    }),
    Field::new("is_sensitive", Ty::Bool, (0, LATEST)),
    Field::new("synonyms", Ty::Structs(SYNONYM), (1, LATEST)),
];
const RESULT: &[Field] = &[
    Field::new("error_code", Ty::Int16, (0, LATEST)),
    Field::new("error_message", Ty::String, (0, LATEST)),
    Field::new("resource_type", Ty::Int8, (0, LATEST)),
    Field::new("resource_name", Ty::String, (0, LATEST)),
    Field::new("configs", Ty::Structs(CONFIG), (0, LATEST)),
];
const RESPONSE: &[Field] = &[
    Field::new("throttle_time_ms", Ty::Int32, (0, LATEST)),
    Field::new("results", Ty::Structs(RESULT), (0, LATEST)),
];

/// v0 through v1.
pub const LEGACY: Legacy = Legacy {
    base: 1,
    request: Some(REQUEST),
    response: Some(RESPONSE),
};

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use gregor_sdk::kafka_protocol::messages::DescribeConfigsResponse;
    use gregor_sdk::kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn is_default_is_the_default_source() {
        let config = |name, source| {
            DescribeConfigsResourceResult::default()
                .with_name(StrBytes::from_static_str(name))
                .with_config_source(source)
        };
        let response =
            DescribeConfigsResponse::default()
                .with_results(vec![DescribeConfigsResult::default()
                    .with_configs(vec![config("a", 5), config("b", 1)])]);
        let mut v1 = Vec::new();
        response.encode(&mut v1, 1).unwrap();
        let v0 = LEGACY.response_from_base(&v1, 0).unwrap();
        // throttle, 1 result: error 0, message "", type 0, name "", 2 configs.
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        // name, value "", read-only false, is_default, sensitive false.
        want.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 1, 0]);
        want.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 0, 0]);
        assert_eq!(v0, want);
    }
}
