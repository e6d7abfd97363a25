//! ListOffsets v0 (Kafka 4 removed it, KIP-896), rewritten to and from v1
//! by the SDK ([`gregor_sdk::legacy`]).
//!
//! v0 asks for up to `max_num_offsets` offsets of each partition and is
//! answered `old_style_offsets`: in Kafka 3.9 the base offsets of the
//! segments last modified at or before the timestamp, newest first (the log
//! end offset first for latest). Clients ask for one, the latest (-1) or
//! the earliest (-2); Gregor answers that one, the offset v1 finds, or none
//! when there is none. Several are never answered, and a timestamp is
//! looked up as v1 does (the first offset at or after it), not by file
//! modification times.

use gregor_sdk::legacy::Ty::{Array, Int16, Int32, Int64, String, Structs};
use gregor_sdk::legacy::{all, scalar, since, Field, Legacy};

#[rustfmt::skip]
const REQUEST: &[Field] = &[all("replica_id", Int32), all("topics", Structs(&[
    all("name", String), all("partitions", Structs(&[
        all("partition_index", Int32), all("timestamp", Int64),
        Field::new("max_num_offsets", Int32, (0, 0)).with_default(1),
    ])),
]))];

#[rustfmt::skip]
const RESPONSE: &[Field] = &[all("topics", Structs(&[
    all("name", String), all("partitions", Structs(&[
        all("partition_index", Int32), all("error_code", Int16),
        since(1, "timestamp", Int64).with_default(-1), since(1, "offset", Int64).with_default(-1),
        Field::new("old_style_offsets", Array(&Int64), (0, 0)).derived(old_style_offsets),
    ])),
]))];

/// v0's list: the offset found, if any.
fn old_style_offsets(read: &[(&'static str, i64)], out: &mut Vec<u8>) {
    match scalar(read, "offset").filter(|&offset| offset >= 0) {
        Some(offset) => {
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
        }
        None => out.extend_from_slice(&0i32.to_be_bytes()),
    }
}

/// v0 through v1.
pub const LEGACY: Legacy = Legacy::new(1, Some(REQUEST), Some(RESPONSE));

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use gregor_sdk::kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    use gregor_sdk::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    #[test]
    fn a_v0_request_is_a_v1_one() {
        // replica -1; topic "t": partition 2, latest, max 1.
        let mut v0 = (-1i32).to_be_bytes().to_vec();
        v0.extend_from_slice(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2]);
        v0.extend_from_slice(&(-1i64).to_be_bytes());
        v0.extend_from_slice(&1i32.to_be_bytes());
        let v1 = LEGACY.request_to_base(&v0, 0).unwrap();
        let request = ListOffsetsRequest::decode(&mut v1.as_slice(), 1).unwrap();
        let partition = &request.topics[0].partitions[0];
        assert_eq!(request.topics[0].name.as_str(), "t");
        assert_eq!((partition.partition_index, partition.timestamp), (2, -1));
    }

    #[test]
    fn the_offset_found_is_the_old_style_list() {
        let partition = |index, offset| {
            ListOffsetsPartitionResponse::default()
                .with_partition_index(index)
                .with_offset(offset)
        };
        let response =
            ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
                .with_name(StrBytes::from_static_str("t").into())
                .with_partitions(vec![partition(0, 42), partition(1, -1)])]);
        let mut v1 = Vec::new();
        response.encode(&mut v1, 1).unwrap();
        let v0 = LEGACY.response_from_base(&v1, 0).unwrap();
        let mut want = vec![0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(v0, want);
    }
}
