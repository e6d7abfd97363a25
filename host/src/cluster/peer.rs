//! One Kafka connection from this broker to another node of the cluster:
//! the shared part of the channel to the active controller
//! (`membership::wire`) and of the channels to partition leaders
//! (`replication::leader_channel`, which the replica fetchers and the
//! transaction markers use).
//!
//! A connection is opened on PLAINTEXT and, when the listener at the other
//! end is SASL_PLAINTEXT, logged in before anything else, as Kafka's
//! `SaslClientAuthenticator` does: SaslHandshake v1 naming the mechanism,
//! then SaslAuthenticate v2 carrying the client's tokens until done
//! (`security::sasl_client`: PLAIN, SCRAM-SHA-256/512). A refused login is
//! an error naming the peer and Kafka's error code; the caller drops the
//! connection and the next request opens a new one.

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::kafka_wire;
use crate::security::sasl_client::{SaslClient, SaslCredentials};

pub struct PeerConnection {
    stream: TcpStream,
    /// Who is at the other end, for messages ("controller 1", "broker 2").
    peer: String,
    client_id: String,
    /// The largest response accepted.
    max_response: usize,
    correlation_id: i32,
}

impl PeerConnection {
    /// Connects to `address` and logs in with `login` (None: PLAINTEXT).
    pub async fn open(
        address: &str,
        peer: String,
        client_id: String,
        max_response: usize,
        login: Option<SaslCredentials>,
    ) -> Result<Self, String> {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connecting to {peer} at {address}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let mut connection = Self {
            stream,
            peer,
            client_id,
            max_response,
            correlation_id: 0,
        };
        if let Some(login) = login {
            connection.authenticate(login).await?;
        }
        Ok(connection)
    }

    /// SaslHandshake v1, then SaslAuthenticate v2 until the client is done.
    async fn authenticate(&mut self, login: SaslCredentials) -> Result<(), String> {
        let mut client = SaslClient::new(login);
        let mechanism = StrBytes::from_string(client.mechanism().to_string());
        let handshake = SaslHandshakeRequest::default().with_mechanism(mechanism);
        let answer = self.send(&handshake, 1).await?;
        if answer.error_code != 0 {
            return Err(format!(
                "{} refused SASL mechanism {} (error {}; it enables {:?})",
                self.peer,
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
            let answer = self.send(&request, 2).await?;
            if answer.error_code != 0 {
                return Err(format!(
                    "{} refused the broker's SASL login as {} (error {}): {}",
                    self.peer,
                    client.username(),
                    answer.error_code,
                    answer.error_message.as_deref().unwrap_or_default()
                ));
            }
            server_token = answer.auth_bytes;
        }
        Ok(())
    }

    /// One request at `version` and its response.
    pub async fn send<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let peer = &self.peer;
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let frame = kafka_wire::encode_request(request, version, correlation_id, &self.client_id)?;
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| format!("sending to {peer}: {e}"))?;
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .await
            .map_err(|e| format!("reading from {peer}: {e}"))?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size > self.max_response {
            return Err(format!("{peer} sent a {size}-byte response"));
        }
        let mut body = vec![0u8; size];
        self.stream
            .read_exact(&mut body)
            .await
            .map_err(|e| format!("reading from {peer}: {e}"))?;
        kafka_wire::decode_response::<R>(Bytes::from(body), version, correlation_id)
    }
}

/// The login a connection to `peer`'s listener `listener`, registered as
/// `protocol`, starts with: none on PLAINTEXT, this broker's `login` for
/// that listener on SASL_PLAINTEXT (none: the broker's own
/// `listener.security.protocol.map` says otherwise). TLS is not supported
/// towards other nodes yet.
pub fn login_for(
    peer: &str,
    listener: &str,
    protocol: &str,
    login: Option<&SaslCredentials>,
) -> Result<Option<SaslCredentials>, String> {
    match protocol {
        "PLAINTEXT" => Ok(None),
        "SASL_PLAINTEXT" => login.cloned().map(Some).ok_or_else(|| {
            format!(
                "{peer}'s listener {listener} is SASL_PLAINTEXT but this broker maps it to \
                 another protocol (listener.security.protocol.map)"
            )
        }),
        other => Err(format!(
            "{peer}'s listener {listener} is {other}: brokers connect to other nodes over \
             PLAINTEXT or SASL_PLAINTEXT only for now"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registered_protocol_decides_the_login() {
        let login = SaslCredentials {
            mechanism: "PLAIN".to_string(),
            username: "broker".to_string(),
            password: "pw".to_string(),
        };
        assert_eq!(
            login_for("broker 2", "INTERNAL", "PLAINTEXT", Some(&login)),
            Ok(None)
        );
        assert_eq!(
            login_for("broker 2", "INTERNAL", "SASL_PLAINTEXT", Some(&login)),
            Ok(Some(login.clone()))
        );
        let unmapped = login_for("broker 2", "INTERNAL", "SASL_PLAINTEXT", None).unwrap_err();
        assert!(
            unmapped.contains("listener.security.protocol.map"),
            "{unmapped}"
        );
        let tls = login_for("broker 2", "INTERNAL", "SASL_SSL", Some(&login)).unwrap_err();
        assert!(
            tls.contains("broker 2's listener INTERNAL is SASL_SSL"),
            "{tls}"
        );
    }
}
