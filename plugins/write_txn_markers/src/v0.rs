//! WriteTxnMarkers v0 (Kafka 4 removed it, KIP-896; brokers before 2.8
//! sent it): v1's fields without flexible encoding, rewritten to and from
//! v1 by the SDK ([`gregor_sdk::legacy`]).

use gregor_sdk::legacy::Ty::{Array, Bool, Int16, Int32, Int64, String, Structs};
use gregor_sdk::legacy::{all, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[all("markers", Structs(&[
    all("producer_id", Int64), all("producer_epoch", Int16), all("transaction_result", Bool),
    all("topics", Structs(&[all("name", String), all("partition_indexes", Array(&Int32))])),
    all("coordinator_epoch", Int32),
]))];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[all("markers", Structs(&[
    all("producer_id", Int64),
    all("topics", Structs(&[all("name", String), all("partitions", Structs(&[
        all("partition_index", Int32), all("error_code", Int16),
    ]))])),
]))];

/// v0 through v1.
pub const LEGACY: Legacy = Legacy::new(1, Some(REQUEST), Some(RESPONSE)).flexible();

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use gregor_sdk::kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest};
    use gregor_sdk::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    #[test]
    fn v0_is_v1_without_flexible_encoding() {
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(7))
                .with_producer_epoch(2)
                .with_transaction_result(true)
                .with_coordinator_epoch(3)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(StrBytes::from_static_str("t").into())
                    .with_partition_indexes(vec![0, 1])])]);
        let mut v1 = Vec::new();
        request.encode(&mut v1, 1).unwrap();
        let v0 = LEGACY.request_from_base(&v1, 0).unwrap();
        let mut want = vec![
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 1, 0, 0, 0, 1, 0, 1, b't',
        ];
        want.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3]);
        assert_eq!(v0, want);
        let back = LEGACY.request_to_base(&v0, 0).unwrap();
        assert_eq!(back, v1);
        let decoded = WriteTxnMarkersRequest::decode(&mut back.as_slice(), 1).unwrap();
        assert_eq!(decoded, request);
    }
}
