//! `txn`: producer ids for InitProducerId, from the broker's
//! [`crate::producer_ids::ProducerIdManager`].

use crate::plugins::bindings::handler::gregor::broker::txn::{self, ProducerIdAndEpoch};
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
}
