//! `txn`: producer ids for InitProducerId, from the broker's
//! [`crate::producer_ids::ProducerIdManager`], and the partitions' producer
//! state for DescribeProducers, from the ReplicaManager.

use crate::plugins::bindings::handler::gregor::broker::txn::{
    self, ActiveProducer, ProducerIdAndEpoch,
};
use crate::plugins::state::HandlerState;

/// KAFKA_STORAGE_ERROR: the reservation could not be made durable.
const KAFKA_STORAGE_ERROR: i16 = 56;

impl txn::Host for HandlerState {
    fn init_idempotent_producer(&mut self) -> ProducerIdAndEpoch {
        match self.broker.producer_ids.allocate() {
            Ok(producer_id) => ProducerIdAndEpoch {
                error_code: 0,
                producer_id,
                producer_epoch: 0,
            },
            Err(error) => {
                tracing::error!("allocating a producer id failed: {error:#}");
                ProducerIdAndEpoch {
                    error_code: KAFKA_STORAGE_ERROR,
                    producer_id: -1,
                    producer_epoch: -1,
                }
            }
        }
    }

    fn init_transactional_producer(
        &mut self,
        transactional_id: String,
        transaction_timeout_ms: i32,
        producer_id: i64,
        producer_epoch: i16,
    ) -> ProducerIdAndEpoch {
        let answer = self.broker.transactions.init_producer_id(
            &self.broker.producer_ids,
            &transactional_id,
            transaction_timeout_ms,
            (producer_id, producer_epoch),
        );
        ProducerIdAndEpoch {
            error_code: answer.error_code,
            producer_id: answer.producer_id,
            producer_epoch: answer.producer_epoch,
        }
    }

    fn describe_producers(
        &mut self,
        topic: String,
        partition: i32,
    ) -> Result<Vec<ActiveProducer>, i16> {
        let producers = self
            .broker
            .replica
            .active_producers(&topic, partition)
            .map_err(|error| error.error_code())?;
        Ok(producers
            .into_iter()
            .map(|producer| ActiveProducer {
                producer_id: producer.producer_id,
                producer_epoch: producer.producer_epoch,
                last_sequence: producer.last_sequence,
                last_timestamp: producer.last_timestamp,
                // No transactions yet: no producer has one open.
                current_txn_start_offset: -1,
            })
            .collect())
    }
}
