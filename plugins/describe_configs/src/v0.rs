//! DescribeConfigs v0 (Kafka 4 removed it, KIP-896), rewritten to and from
//! v1 by the SDK ([`gregor_sdk::legacy`]): no synonyms, and each config's
//! source is only `is_default`, true when the source is DEFAULT_CONFIG (5).
//! (Kafka 3.9 sent false for every config in v0: its brokers no longer
//! set the field; v0's clients read it as "not the default".)

use gregor_sdk::legacy::Ty::{Array, Bool, Int16, Int32, Int8, String, Structs};
use gregor_sdk::legacy::{all, scalar, since, Field, Legacy};

/// Kafka's ConfigSource.DEFAULT_CONFIG.
const DEFAULT_CONFIG: i64 = 5;

#[rustfmt::skip]
const REQUEST: &[Field] = &[
    all("resources", Structs(&[
        all("resource_type", Int8), all("resource_name", String),
        all("configuration_keys", Array(&String)),
    ])),
    since(1, "include_synonyms", Bool),
];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[all("throttle_time_ms", Int32), all("results", Structs(&[
    all("error_code", Int16), all("error_message", String),
    all("resource_type", Int8), all("resource_name", String),
    all("configs", Structs(&[
        all("name", String), all("value", String), all("read_only", Bool),
        since(1, "config_source", Int8).with_default(-1),
        Field::new("is_default", Bool, (0, 0)).derived(is_default),
        all("is_sensitive", Bool),
        since(1, "synonyms", Structs(&[all("name", String), all("value", String), all("source", Int8)])),
    ])),
]))];

/// v0's `is_default`: the source is DEFAULT_CONFIG.
fn is_default(read: &[(&'static str, i64)], out: &mut Vec<u8>) {
    out.push(u8::from(
        scalar(read, "config_source") == Some(DEFAULT_CONFIG),
    ));
}

/// v0 through v1.
pub const LEGACY: Legacy = Legacy::new(1, Some(REQUEST), Some(RESPONSE));

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
