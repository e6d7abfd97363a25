//! The controller APIs a broker listener serves by forwarding them to the
//! active controller, as Kafka 4's `KafkaApis` does for DescribeQuorum and
//! UnregisterBroker: the broker's module decodes and authorizes the
//! client's request against the same replicated ACLs, and its controller
//! import is answered by this forwarder, which sends the request on the
//! broker's own channel to the active controller's listener (with the
//! broker's login there) and hands back the controller's answer.
//!
//! Kafka wraps the forwarded request in an Envelope so the controller
//! authorizes the client's principal; here the receiving broker has
//! already authorized it with the image's ACLs (the same decision the
//! controller would make), and the controller authorizes the broker.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::PartitionData as QuorumPartition;
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::runtime::Handle;
use tokio::sync::Mutex;

use crate::error_code::ErrorCode;

use super::wire::ControllerChannel;

/// Kafka's metadata topic, the one partition DescribeQuorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";
const NOT_CONTROLLER: i16 = 41;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// A forwarded request's failure: Kafka's code and a message.
pub type Failure = (i16, String);

pub struct ControllerForwarder {
    channel: Mutex<ControllerChannel>,
    runtime: Handle,
}

impl ControllerForwarder {
    pub fn new(channel: ControllerChannel, runtime: Handle) -> Self {
        Self {
            channel: Mutex::new(channel),
            runtime,
        }
    }

    /// DescribeQuorum v2 of the metadata partition, from the active
    /// controller: its answer for the partition.
    pub fn describe_quorum(&self) -> Result<(QuorumPartition, DescribeQuorumResponse), Failure> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default()])]);
        let response = self.forward(
            |response: &DescribeQuorumResponse| {
                let partition = response.topics.first()?.partitions.first()?;
                Some(partition.error_code)
            },
            &request,
            2,
        )?;
        if response.error_code != 0 {
            return Err((
                response.error_code,
                "the controller refused DescribeQuorum".into(),
            ));
        }
        let partition = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .cloned()
            .ok_or((
                ErrorCode::UnknownServerError.code(),
                "the controller described no partition".to_string(),
            ))?;
        if partition.error_code != 0 {
            return Err((
                partition.error_code,
                "the controller refused DescribeQuorum".into(),
            ));
        }
        Ok((partition, response))
    }

    /// UnregisterBroker `broker_id` at the active controller.
    pub fn unregister_broker(&self, broker_id: i32) -> Result<(), Failure> {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(broker_id));
        let response = self.forward(|r| Some(r.error_code), &request, 0)?;
        match response.error_code {
            0 => Ok(()),
            code => Err((
                code,
                response
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
            )),
        }
    }

    /// Sends `request`; a controller that is no longer the active one
    /// (`code_of` the answer says NOT_CONTROLLER or NOT_LEADER_OR_FOLLOWER)
    /// is left for the new one, asked once more.
    fn forward<R>(
        &self,
        code_of: impl Fn(&R::Response) -> Option<i16>,
        request: &R,
        version: i16,
    ) -> Result<R::Response, Failure>
    where
        R: kafka_protocol::protocol::Request
            + kafka_protocol::protocol::Encodable
            + kafka_protocol::protocol::HeaderVersion,
        R::Response: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
    {
        let exchange = async {
            let mut channel = self.channel.lock().await;
            let mut last = None;
            for _ in 0..2 {
                let response = channel.send(request, version).await.map_err(|why| {
                    (
                        NOT_CONTROLLER,
                        format!("forwarding to the active controller: {why}"),
                    )
                })?;
                let moved = code_of(&response)
                    .is_some_and(|code| matches!(code, NOT_CONTROLLER | NOT_LEADER_OR_FOLLOWER));
                if !moved {
                    return Ok(response);
                }
                channel.reset();
                last = Some(response);
            }
            last.ok_or((NOT_CONTROLLER, "no active controller".to_string()))
        };
        tokio::task::block_in_place(|| self.runtime.block_on(exchange))
    }
}
