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
//! ([`PeerConnection`]) with the mechanism and login configured for that
//! listener (`security::sasl_client`). TLS towards controllers is not supported
//! yet: such a listener is an error naming it.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use crate::cluster::image::MetadataImage;
use crate::cluster::peer::{login_for, PeerConnection};
use crate::cluster::quorum::Quorum;
use crate::security::sasl_client::SaslCredentials;

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
    connection: Option<(i32, PeerConnection)>,
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
        let login = self
            .logins
            .iter()
            .find(|(name, _)| *name == endpoint.name)
            .map(|(_, login)| login);
        let peer = format!("controller {leader}");
        let login = login_for(&peer, &endpoint.name, &endpoint.security_protocol, login)?;
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
        let mut connection = match self.connection.take() {
            Some((_, connection)) => connection,
            None => {
                let peer = format!("controller {leader}");
                let client_id = self.client_id.clone();
                PeerConnection::open(&address, peer, client_id, MAX_RESPONSE, login).await?
            }
        };
        let response = connection.send(request, version).await?;
        self.connection = Some((leader, connection));
        Ok(response)
    }
}
