//! Bounded decoding: no input makes a module trap while its request is
//! decoded.
//!
//! `kafka-protocol` 0.18 (the latest release) checks every read against
//! the bytes left, but it reserves `Vec::with_capacity(count)` for an
//! array from the declared count before decoding an element. A count of
//! two billion in a 20-byte body is a capacity overflow or a failed
//! allocation: both abort the module. Kafka's generated readers refuse a
//! count larger than the bytes remaining; this does the same without
//! knowing the schema, by reading through [`buf::GuardedBuf`] (which keeps
//! large values from the decoder until it knows what they are) and
//! watching allocations ([`watch`]). It also bounds what the decoded
//! request may take: a request within the size a client may send can
//! still expand past the module's memory (1.4 M topic names in 36 MB are
//! 1.4 M structs), and that is [`DecodeError::TooLarge`], which a handler
//! can answer instead of running out of memory.
//!
//! A request without large values decodes in one pass; large plain fields
//! (a fetch's `max_bytes`) take a second; each large array count that fits
//! one more.

mod buf;
#[doc(hidden)]
pub mod catalog;
mod watch;

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::protocol::Decodable;

use buf::{GuardedBuf, Verdict};
use watch::Watch;

pub use watch::WatchingAlloc;

/// What a decoded request may allocate: well within a module's memory
/// (`plugin.memory.max.bytes`, 256 MiB by default), leaving room for the
/// body, the answer and its encoding.
pub const DECODE_BUDGET: usize = 32 << 20;

/// Passes before a request with that many large arrays is given up on.
const MAX_PASSES: usize = 64;

/// Why a request body did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a valid request of this version (Kafka closes the connection).
    Malformed(String),
    /// Valid as far as read, but its decoded form would exceed the budget.
    TooLarge,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Malformed(why) => write!(f, "malformed: {why}"),
            DecodeError::TooLarge => write!(
                f,
                "too large: its decoded form would exceed {DECODE_BUDGET} bytes"
            ),
        }
    }
}

/// Decodes `body` as `R` at `version` (`flexible`: the version uses
/// compact types and tagged fields) within `budget` bytes of allocation.
pub fn decode_bounded<R: Decodable>(
    body: &[u8],
    version: i16,
    flexible: bool,
    budget: usize,
) -> Result<R, DecodeError> {
    let body = Bytes::copy_from_slice(body);
    let mut known = BTreeSet::new();
    for _ in 0..MAX_PASSES {
        let watch = Watch::start();
        let mut buf = GuardedBuf::new(body.clone(), flexible, budget, &mut known, &watch);
        let result = R::decode(&mut buf, version);
        let verdict = buf.finish();
        let substituted = buf.substituted();
        match (verdict, result) {
            (Some(Verdict::Restart), _) => continue,
            (Some(Verdict::TooLarge), _) => return Err(DecodeError::TooLarge),
            (Some(Verdict::Malformed(why)), _) => return Err(DecodeError::Malformed(why.into())),
            (None, _) if substituted => continue,
            (None, Err(error)) => return Err(DecodeError::Malformed(error.to_string())),
            (None, Ok(request)) => return Ok(request),
        }
    }
    Err(DecodeError::TooLarge)
}

#[cfg(test)]
pub(crate) mod tests;
