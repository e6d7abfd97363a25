//! A follower's connection to one leader broker (Kafka's
//! `BrokerBlockingSender`): Kafka requests encoded with `kafka-protocol`,
//! sent to the leader's inter-broker listener as the metadata image
//! lists it. The address is looked up again for every new connection (a
//! restarted leader may listen elsewhere), and the connection is dropped
//! on any error so the next request starts afresh.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::kafka_wire::{decode_response, encode_request};

/// The largest response accepted: a full fetch response and headroom.
const MAX_RESPONSE: usize = 256 << 20;

pub struct LeaderChannel {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    leader: i32,
    /// `inter.broker.listener.name`.
    listener: String,
    client_id: String,
    timeout: Duration,
    stream: Option<TcpStream>,
    correlation_id: i32,
}

impl LeaderChannel {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        leader: i32,
        listener: String,
        node_id: i32,
        timeout: Duration,
    ) -> Self {
        Self {
            quorum,
            leader,
            listener,
            client_id: format!("replica-fetcher-{node_id}-from-{leader}"),
            timeout,
            stream: None,
            correlation_id: 0,
        }
    }

    /// Where the leader's inter-broker listener is.
    fn address(&self) -> Result<String, String> {
        let image = self.quorum.image();
        let broker = image
            .cluster()
            .broker(self.leader)
            .ok_or_else(|| format!("broker {} is not registered", self.leader))?;
        let endpoint = broker
            .endpoint(&self.listener)
            .ok_or_else(|| format!("broker {} has no {} listener", self.leader, self.listener))?;
        if endpoint.security_protocol != "PLAINTEXT" {
            return Err(format!(
                "broker {}'s listener {} is {}: replica fetchers connect over PLAINTEXT only for now",
                self.leader, endpoint.name, endpoint.security_protocol
            ));
        }
        Ok(format!("{}:{}", endpoint.host, endpoint.port))
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
            self.stream = None;
        }
        answer
    }

    async fn exchange<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: Request + Encodable + HeaderVersion,
        R::Response: Decodable + HeaderVersion,
    {
        let leader = self.leader;
        if self.stream.is_none() {
            let address = self.address()?;
            let stream = TcpStream::connect(&address)
                .await
                .map_err(|e| format!("connecting to broker {leader} at {address}: {e}"))?;
            let _ = stream.set_nodelay(true);
            self.stream = Some(stream);
        }
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let frame = encode_request(request, version, correlation_id, &self.client_id)?;
        let stream = self.stream.as_mut().ok_or("no connection")?;
        stream
            .write_all(&frame)
            .await
            .map_err(|e| format!("sending to broker {leader}: {e}"))?;
        let mut size = [0u8; 4];
        stream
            .read_exact(&mut size)
            .await
            .map_err(|e| format!("reading from broker {leader}: {e}"))?;
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if size > MAX_RESPONSE {
            return Err(format!("broker {leader} sent a {size}-byte response"));
        }
        let mut body = vec![0u8; size];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| format!("reading from broker {leader}: {e}"))?;
        decode_response::<R>(Bytes::from(body), version, correlation_id)
    }
}
