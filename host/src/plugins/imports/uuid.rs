//! The contract's `uuid` (two halves) to and from the host's `u128` ids.

use crate::plugins::bindings::handler::gregor::broker::types::Uuid;

impl From<Uuid> for u128 {
    fn from(id: Uuid) -> u128 {
        crate::uuid::from_halves(id.high, id.low)
    }
}

impl From<u128> for Uuid {
    fn from(id: u128) -> Uuid {
        let (high, low) = crate::uuid::halves(id);
        Uuid { high, low }
    }
}
