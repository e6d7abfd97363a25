//! AllocateProducerIds (ApiKey 67): a broker asks the active controller for
//! its next block of producer ids, as Kafka's
//! `ControllerApis.handleAllocateProducerIdsRequest`.
//!
//! - Version 0, on the controller listener only.
//! - CLUSTER_ACTION on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
//! - The block comes from the metadata log (`controller.allocate-producer-ids`,
//!   a quorum command), so no two brokers ever get the same ids; errors
//!   STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER.

use gregor_sdk::controller;
use gregor_sdk::kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ProducerId,
};
use gregor_sdk::{AnswerError, RequestContext};

gregor_sdk::cluster_api!(AllocateProducerIds: AllocateProducerIdsRequest, 0..=0, ClusterAction => allocate, failed);

fn allocate(
    _: &RequestContext,
    request: &AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    match controller::allocate_producer_ids(request.broker_id.0, request.broker_epoch) {
        Ok(block) => AllocateProducerIdsResponse::default()
            .with_producer_id_start(ProducerId(block.first))
            .with_producer_id_len(block.size),
        Err(error) => failed(error.error_code()),
    }
}

/// Kafka's error response: no block.
fn failed(code: i16) -> AllocateProducerIdsResponse {
    AllocateProducerIdsResponse::default()
        .with_error_code(code)
        .with_producer_id_start(ProducerId(-1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_sdk::controller::ProducerIdBlock;
    use gregor_sdk::fake::{self, FakeHost};
    use gregor_sdk::kafka_protocol::messages::BrokerId;
    use gregor_sdk::{KafkaError, ResponseError};

    fn request(broker_epoch: i64) -> AllocateProducerIdsRequest {
        let mut request = AllocateProducerIdsRequest::default();
        request.broker_id = BrokerId(2);
        request.broker_epoch = broker_epoch;
        request
    }

    gregor_sdk::served_versions_test!(
        AllocateProducerIds,
        [request(5)],
        [AllocateProducerIdsResponse::default().with_producer_id_len(1000)]
    );

    /// Broker 2 of epoch 5 gets the block 3000..4000.
    struct Controller;

    impl FakeHost for Controller {
        fn allocate_producer_ids(
            &self,
            broker_id: i32,
            broker_epoch: i64,
        ) -> Result<ProducerIdBlock, KafkaError> {
            match (broker_id, broker_epoch) {
                (2, 5) => Ok(ProducerIdBlock {
                    first: 3000,
                    size: 1000,
                }),
                _ => Err(KafkaError {
                    code: ResponseError::StaleBrokerEpoch.code(),
                    message: None,
                }),
            }
        }
    }

    #[test]
    fn a_current_broker_gets_a_block() {
        let response = fake::handle::<AllocateProducerIds>(Controller, 0, &request(5))
            .response
            .unwrap();
        assert_eq!(
            (
                response.error_code,
                response.producer_id_start.0,
                response.producer_id_len
            ),
            (0, 3000, 1000)
        );
        let stale = fake::handle::<AllocateProducerIds>(Controller, 0, &request(4))
            .response
            .unwrap();
        assert_eq!(
            (stale.error_code, stale.producer_id_start.0),
            (ResponseError::StaleBrokerEpoch.code(), -1)
        );
    }
}
