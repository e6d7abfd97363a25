//! Kafka request and response frames, encoded with the `kafka-protocol`
//! crate, for the host's own client connections: the broker's channel to
//! the active controller and the command line's Kafka client. One place
//! lays out the size prefix and the headers, so both agree with what the
//! broker's listeners parse.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// A size-prefixed request frame.
pub fn encode_request<R>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> Result<Vec<u8>, String>
where
    R: Request + Encodable + HeaderVersion,
{
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .and_then(|()| request.encode(&mut body, version))
        .map_err(|e| format!("encoding api key {} v{version}: {e}", R::KEY))?;
    let size = i32::try_from(body.len()).map_err(|_| "request too large".to_string())?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.put_i32(size);
    frame.extend_from_slice(&body);
    Ok(frame)
}

pub fn decode_response<R>(
    mut body: Bytes,
    version: i16,
    correlation_id: i32,
) -> Result<R::Response, String>
where
    R: Request,
    R::Response: Decodable + HeaderVersion,
{
    let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| format!("decoding a response header: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "the peer answered correlation id {} to {correlation_id}",
            header.correlation_id
        ));
    }
    let response = R::Response::decode(&mut body, version)
        .map_err(|e| format!("decoding api key {} v{version}: {e}", R::KEY))?;
    if body.has_remaining() {
        return Err(format!("{} bytes after the response", body.remaining()));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerId};

    #[test]
    fn a_request_frame_and_its_response_round_trip() {
        let request = BrokerHeartbeatRequest::default()
            .with_broker_id(BrokerId(2))
            .with_broker_epoch(9);
        let frame = encode_request(&request, 0, 5, "broker-2").unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(usize::try_from(size).unwrap(), frame.len() - 4);
        let mut body = Bytes::copy_from_slice(&frame[4..]);
        let header = RequestHeader::decode(&mut body, 2).unwrap();
        assert_eq!((header.request_api_key, header.correlation_id), (63, 5));
        assert_eq!(
            BrokerHeartbeatRequest::decode(&mut body, 0).unwrap(),
            request
        );

        let mut answer = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(5)
            .encode(&mut answer, 1)
            .unwrap();
        let response = BrokerHeartbeatResponse::default().with_is_fenced(true);
        response.encode(&mut answer, 0).unwrap();
        let decoded =
            decode_response::<BrokerHeartbeatRequest>(answer.clone().freeze(), 0, 5).unwrap();
        assert_eq!(decoded, response);
        assert!(decode_response::<BrokerHeartbeatRequest>(answer.freeze(), 0, 6).is_err());
    }
}
