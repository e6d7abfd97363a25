//! A broker's connection to the active controller (Kafka's
//! NodeToControllerChannelManager): real Kafka requests, encoded with the
//! `kafka-protocol` crate, to the controller listener of whichever node
//! leads the metadata quorum.
//!
//! The active controller is the quorum leader; where it listens comes from
//! its controller registration in the image (KIP-919). The connection is
//! dropped on any error, on NOT_CONTROLLER, and when the leader moves, so
//! the next request goes to the new active controller.
//!
//! The listener's security protocol is the one the controller registered:
//! PLAINTEXT, or SASL_PLAINTEXT, where the broker logs in first
//! (SaslHandshake v1, then SaslAuthenticate v2 until done) with the
//! mechanism and login configured for that listener
//! (`security::sasl_client`). TLS towards controllers is not supported
//! yet: such a listener is an error naming it.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::security::sasl_client::{SaslClient, SaslCredentials};

/// How long one request may take (connect, send, answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest response accepted (the controller's are small).
const MAX_RESPONSE: usize = 1 << 20;

pub struct ControllerChannel {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    /// The controller listener names (`controller.listener.names`).
    listener_names: Vec<String>,
    /// The broker's login on each SASL controller listener, by name.
    logins: Vec<(String, SaslCredentials)>,
    client_id: String,
    /// The connection and the controller it goes to.
    connection: Option<(i32, TcpStream)>,
    correlation_id: i32,
}

impl ControllerChannel {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        listener_names: Vec<String>,
        logins: Vec<(String, SaslCredentials)>,
        node_id: i32,
    ) -> Self {
        Self {
            quorum,
            listener_names,
            logins,
            client_id: format!("broker-{node_id}-to-controller"),
            connection: None,
            correlation_id: 0,
        }
    }

    /// Forgets the connection (NOT_CONTROLLER: the next request looks
    /// for the active controller again).
    pub fn reset(&mut self) {
        self.connection = None;
    }

    /// The active controller's id, controller listener address, and the
    /// login it wants (None: PLAINTEXT).
    fn active_controller(&self) -> Result<(i32, String, Option<SaslCredentials>), String> {
        let leader = self
            .quorum
            .leader()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or("the metadata quorum has no leader")?;
        let image = self.quorum.image();
        let endpoints = image
            .cluster()
            .controller_endpoints(leader)
            .ok_or_else(|| format!("controller {leader} has not registered its listeners yet"))?;
        let endpoint = endpoints
            .iter()
            .find(|e| self.listener_names.contains(&e.name))
            .ok_or_else(|| {
                format!("controller {leader} serves none of the controller listeners")
            })?;
        let login = match endpoint.security_protocol.as_str() {
            "PLAINTEXT" => None,
            "SASL_PLAINTEXT" => Some(
                self.logins
                    .iter()
                    .find(|(name, _)| *name == endpoint.name)
                    .map(|(_, login)| login.clone())
                    .ok_or_else(|| {
                        format!(
                            "controller {leader}'s listener {} is SASL_PLAINTEXT but this \
                             broker maps it to another protocol (listener.security.protocol.map)",
                            endpoint.name
                        )
                    })?,
            ),
            other => {
                return Err(format!(
                    "controller {leader}'s listener {} is {other}: brokers reach controllers \
                     over PLAINTEXT or SASL_PLAINTEXT only for now",
                    endpoint.name
                ))
            }
        };
        Ok((
            leader,
            format!("{}:{}", endpoint.host, endpoint.port),
            login,
        ))
    }

    /// Sends `request` at `version` to the active controller; its
    /// response, or why there is none (the connection is then dropped).
    pub async fn send<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(request, version))
            .await
            .unwrap_or_else(|_| Err("the controller did not answer in time".to_string()));
        if answer.is_err() {
            self.connection = None;
        }
        answer
    }

    async fn exchange<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let (leader, address, login) = self.active_controller()?;
        if self
            .connection
            .as_ref()
            .is_some_and(|(id, _)| *id != leader)
        {
            self.connection = None;
        }
        let mut stream = match self.connection.take() {
            Some((_, stream)) => stream,
            None => {
                let mut stream = TcpStream::connect(&address)
                    .await
                    .map_err(|e| format!("connecting to controller {leader} at {address}: {e}"))?;
                let _ = stream.set_nodelay(true);
                if let Some(login) = login {
                    self.authenticate(&mut stream, leader, login).await?;
                }
                stream
            }
        };
        let response = self
            .round_trip(&mut stream, leader, request, version)
            .await?;
        self.connection = Some((leader, stream));
        Ok(response)
    }

    /// Logs in on a fresh connection: SaslHandshake v1 naming the
    /// mechanism, then SaslAuthenticate v2 carrying the client's tokens.
    async fn authenticate(
        &mut self,
        stream: &mut TcpStream,
        leader: i32,
        login: SaslCredentials,
    ) -> Result<(), String> {
        let mut client = SaslClient::new(login);
        let mechanism = StrBytes::from_string(client.mechanism().to_string());
        let handshake = SaslHandshakeRequest::default().with_mechanism(mechanism);
        let answer = self.round_trip(stream, leader, &handshake, 1).await?;
        if answer.error_code != 0 {
            return Err(format!(
                "controller {leader} refused SASL mechanism {} (error {}; it enables {:?})",
                client.mechanism(),
                answer.error_code,
                answer
                    .mechanisms
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
            ));
        }
        let mut server_token = Bytes::new();
        while let Some(token) = client.step(&server_token)? {
            let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
            let answer = self.round_trip(stream, leader, &request, 2).await?;
            if answer.error_code != 0 {
                return Err(format!(
                    "controller {leader} refused the broker's SASL login (error {}): {}",
                    answer.error_code,
                    answer.error_message.as_deref().unwrap_or_default()
                ));
            }
            server_token = answer.auth_bytes;
        }
        Ok(())
    }

    /// One request and its response on `stream`.
    async fn round_trip<R>(
        &mut self,
        stream: &mut TcpStream,
        leader: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let frame = encode(request, version, correlation_id, &self.client_id)?;
        stream
            .write_all(&frame)
            .await
            .map_err(|e| format!("sending to controller {leader}: {e}"))?;
        let mut size = [0u8; 4];
        stream
            .read_exact(&mut size)
            .await
            .map_err(|e| format!("reading from controller {leader}: {e}"))?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size > MAX_RESPONSE {
            return Err(format!("controller {leader} sent a {size}-byte response"));
        }
        let mut body = vec![0u8; size];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| format!("reading from controller {leader}: {e}"))?;
        decode::<R>(Bytes::from(body), version, correlation_id)
    }
}

/// A size-prefixed request frame.
pub(crate) fn encode<R>(
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

pub(crate) fn decode<R>(
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
            "the controller answered correlation id {} to {correlation_id}",
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
        let frame = encode(&request, 0, 5, "broker-2").unwrap();
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
        let decoded = decode::<BrokerHeartbeatRequest>(answer.clone().freeze(), 0, 5).unwrap();
        assert_eq!(decoded, response);
        assert!(decode::<BrokerHeartbeatRequest>(answer.freeze(), 0, 6).is_err());
    }
}
