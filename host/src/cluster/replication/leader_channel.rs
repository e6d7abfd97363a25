//! A follower's connection to one leader broker (Kafka's
//! `BrokerBlockingSender`): Kafka requests encoded with `kafka-protocol`,
//! sent to the leader's inter-broker listener as the metadata image
//! lists it. The address is looked up again for every new connection (a
//! restarted leader may listen elsewhere), and the connection is dropped
//! on any error so the next request starts afresh.
//!
//! On a SASL_PLAINTEXT inter-broker listener every new connection logs in
//! first ([`PeerConnection`]) as the broker's inter-broker login, resolved
//! once at start (`security::sasl_client::inter_broker_credentials`); the
//! leader then authorizes the follower's Fetch and the coordinator's
//! WriteTxnMarkers as that user (CLUSTER_ACTION on the cluster). TLS
//! listeners are refused with a message naming them.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use crate::cluster::image::MetadataImage;
use crate::cluster::peer::{login_for, PeerConnection};
use crate::cluster::quorum::Quorum;
use crate::security::sasl_client::SaslCredentials;

/// The largest response accepted: a full fetch response and headroom.
const MAX_RESPONSE: usize = 256 << 20;

/// Where a broker's channels to leaders go: `inter.broker.listener.name`
/// and, when this broker maps it to SASL_PLAINTEXT, its login there.
#[derive(Debug, Clone)]
pub struct InterBroker {
    pub listener: String,
    pub login: Option<SaslCredentials>,
}

pub struct LeaderChannel {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    leader: i32,
    inter_broker: InterBroker,
    client_id: String,
    timeout: Duration,
    connection: Option<PeerConnection>,
}

impl LeaderChannel {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        leader: i32,
        inter_broker: InterBroker,
        node_id: i32,
        timeout: Duration,
    ) -> Self {
        Self {
            quorum,
            leader,
            inter_broker,
            client_id: format!("replica-fetcher-{node_id}-from-{leader}"),
            timeout,
            connection: None,
        }
    }

    /// Where the leader's inter-broker listener is, and the login it wants.
    fn address(&self) -> Result<(String, Option<SaslCredentials>), String> {
        let image = self.quorum.image();
        let listener = &self.inter_broker.listener;
        let broker = image
            .cluster()
            .broker(self.leader)
            .ok_or_else(|| format!("broker {} is not registered", self.leader))?;
        let endpoint = broker
            .endpoint(listener)
            .ok_or_else(|| format!("broker {} has no {listener} listener", self.leader))?;
        let login = login_for(
            &format!("broker {}", self.leader),
            &endpoint.name,
            &endpoint.security_protocol,
            self.inter_broker.login.as_ref(),
        )?;
        Ok((format!("{}:{}", endpoint.host, endpoint.port), login))
    }

    /// Sends `request` at `version`; the response, or why there is none
    /// (the connection is then dropped).
    pub async fn send<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let answer = tokio::time::timeout(self.timeout, self.exchange(request, version))
            .await
            .unwrap_or_else(|_| Err(format!("broker {} did not answer in time", self.leader)));
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
        let mut connection = match self.connection.take() {
            Some(connection) => connection,
            None => {
                let (address, login) = self.address()?;
                let peer = format!("broker {}", self.leader);
                let client_id = self.client_id.clone();
                PeerConnection::open(&address, peer, client_id, MAX_RESPONSE, login).await?
            }
        };
        let response = connection.send(request, version).await?;
        self.connection = Some(connection);
        Ok(response)
    }
}
