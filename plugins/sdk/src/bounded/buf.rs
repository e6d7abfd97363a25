//! The buffer a bounded decode reads through.
//!
//! The decoder reads an array count, a length and a plain INT32 field the
//! same way, and it allocates for a count before reading anything else. So
//! a large value (at least [`LARGE`]) is not handed over as it is: the
//! decoder gets a small stand-in and the allocation watch is armed. What
//! the decoder does next tells what the value was:
//!
//! - it allocates: an array count (the allocation is one element). A count
//!   larger than the bytes left is malformed, as in Kafka's generated
//!   readers; one whose elements would not fit the decode budget is too
//!   large; otherwise its position is remembered and the decode restarts,
//!   this time with the real count.
//! - it asks for exactly the stand-in's number of bytes: a BYTES/STRING
//!   length (or a tagged field's size); it gets the real length, checked
//!   against the bytes left.
//! - anything else: a plain field. Its position is remembered and, since
//!   the decoded value is the stand-in, one more pass decodes it for real.
//!
//! In flexible versions counts and lengths are unsigned varints, read a
//! byte at a time; a varint of at least [`LARGE`] is replaced by a stand-in
//! of the same width, byte by byte. A large varint that is none of the
//! above is a tagged-field count or tag number no client sends: malformed.
//!
//! A plain field's value never changes which bytes the decoder reads next,
//! so the passes read the same positions in the same way; and a stand-in
//! for a length only lasts until the length is used, so nothing downstream
//! depends on it.

use std::collections::BTreeSet;

use bytes::{Buf, Bytes, TryGetError};
use kafka_protocol::protocol::buf::{ByteBuf, NotEnoughBytesError};

use super::watch::Watch;

/// Counts and lengths below this are handed to the decoder as they are:
/// an array this long reserves a few megabytes at most (and fails at its
/// first missing element); above it, timeouts and byte limits the decoder
/// reads as INT32 would each cost a second pass.
pub(crate) const LARGE: u32 = 1 << 16;

/// The stand-in for a large INT32: one element, or one byte.
const STAND_IN_I32: i32 = 1;
/// The stand-in for a large varint (`n + 1` encoding): one element, one
/// byte of a compact string, or two bytes of a tagged field.
const STAND_IN_VARINT: u32 = 2;

/// Why a pass stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A large count was checked and fits; decode again with its real value.
    Restart,
    /// The body cannot be a valid request.
    Malformed(&'static str),
    /// The decoded request would not fit the decode budget.
    TooLarge,
}

#[derive(Clone, Copy)]
enum Width {
    Int32,
    Varint,
}

/// A large value the decoder was given a stand-in for, not yet classified.
struct Pending {
    pos: usize,
    value: u32,
    width: Width,
    /// Bytes left after the value.
    after: usize,
}

/// A large varint being replaced byte by byte.
struct Plan {
    start: usize,
    len: usize,
    /// Bytes of the stand-in handed out so far.
    given: usize,
    value: u32,
}

/// What the decoder asks the buffer for next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// `try_get_bytes(n)`.
    Bytes(usize),
    /// One byte (a varint's or a BOOLEAN's).
    Byte,
    /// Any other fixed-width read.
    Other,
}

pub(crate) struct GuardedBuf<'a> {
    inner: Bytes,
    total: usize,
    flexible: bool,
    budget: usize,
    /// Positions whose large value was classified in an earlier pass (a
    /// count checked to fit, a plain field, or bytes that are no varint):
    /// read as they are.
    known: &'a mut BTreeSet<usize>,
    watch: &'a Watch,
    pending: Option<Pending>,
    plan: Option<Plan>,
    /// Bytes before this position belong to a varint already looked at.
    varint_end: usize,
    /// The decoder saw a stand-in that stayed in the decoded value.
    substituted: bool,
    verdict: Option<Verdict>,
}

impl<'a> GuardedBuf<'a> {
    pub(crate) fn new(
        body: Bytes,
        flexible: bool,
        budget: usize,
        known: &'a mut BTreeSet<usize>,
        watch: &'a Watch,
    ) -> Self {
        Self {
            total: body.len(),
            inner: body,
            flexible,
            budget,
            known,
            watch,
            pending: None,
            plan: None,
            varint_end: 0,
            substituted: false,
            verdict: None,
        }
    }

    fn pos(&self) -> usize {
        self.total - self.inner.remaining()
    }

    /// Whether a value the decoder saw was a stand-in: another pass must
    /// decode the real values.
    pub(crate) fn substituted(&self) -> bool {
        self.substituted
    }

    /// Ends the pass: classifies a value still pending; the verdict, if
    /// the pass stopped early.
    pub(crate) fn finish(&mut self) -> Option<Verdict> {
        if self.verdict.is_none() {
            if let Some(plan) = self.plan.take() {
                self.abandon(plan);
            }
            if let Some(pending) = self.pending.take() {
                let element = self.watch.disarm();
                if let Err(verdict) = self.classify(pending, element, None) {
                    self.verdict = Some(verdict);
                }
            }
        }
        self.verdict.clone()
    }

    /// Called before every read: classifies the pending value by this read
    /// and the watch. `Ok(Some(n))`: serve `n` bytes instead of the
    /// stand-in length asked for. `Err`: the pass is over, fail the read.
    fn settle(&mut self, access: Access) -> Result<Option<usize>, ()> {
        if self.verdict.is_some() {
            return Err(());
        }
        if let Some(plan) = self.plan.take() {
            if access == Access::Byte && self.pos() == plan.start + plan.given {
                self.plan = Some(plan);
            } else {
                self.abandon(plan);
            }
        }
        let outcome = match self.pending.take() {
            Some(pending) => {
                let element = self.watch.disarm();
                self.classify(pending, element, Some(access))
            }
            None => Ok(None),
        };
        let outcome = outcome.and_then(|serve| {
            if self.watch.live() > self.budget {
                Err(Verdict::TooLarge)
            } else {
                Ok(serve)
            }
        });
        outcome.map_err(|verdict| self.verdict = Some(verdict))
    }

    /// Bytes read one at a time that did not make a varint: the decoder
    /// got stand-ins for BOOLEAN/INT8 fields; the next pass reads them as
    /// they are.
    fn abandon(&mut self, plan: Plan) {
        self.known.insert(plan.start);
        self.substituted = true;
    }

    fn classify(
        &mut self,
        pending: Pending,
        element: Option<usize>,
        access: Option<Access>,
    ) -> Result<Option<usize>, Verdict> {
        let value = pending.value as usize;
        if let Some(element) = element {
            let count = match pending.width {
                Width::Int32 => value,
                Width::Varint => value - 1,
            };
            if count > pending.after {
                return Err(Verdict::Malformed(
                    "an array count larger than the bytes left",
                ));
            }
            let needed = count.saturating_mul(element);
            if needed.saturating_add(self.watch.live()) > self.budget {
                return Err(Verdict::TooLarge);
            }
            self.known.insert(pending.pos);
            return Err(Verdict::Restart);
        }
        match (pending.width, access) {
            (Width::Int32, Some(Access::Bytes(n))) if n == STAND_IN_I32 as usize => Ok(Some(value)),
            (Width::Varint, Some(Access::Bytes(n))) if n == STAND_IN_VARINT as usize - 1 => {
                Ok(Some(value - 1))
            }
            (Width::Varint, Some(Access::Bytes(n))) if n == STAND_IN_VARINT as usize => {
                Ok(Some(value))
            }
            (Width::Int32, _) => {
                self.known.insert(pending.pos);
                self.substituted = true;
                Ok(None)
            }
            (Width::Varint, _) => Err(Verdict::Malformed(
                "a tagged-field count, tag or size larger than the request",
            )),
        }
    }

    fn stopped() -> TryGetError {
        TryGetError {
            requested: 0,
            available: 0,
        }
    }

    /// The unsigned varint starting at the next byte, as the decoder reads
    /// it (at most five bytes, higher bits dropped): value and width, or
    /// None if the bytes end first.
    fn varint_ahead(&self) -> Option<(u32, usize)> {
        let mut value: u32 = 0;
        for (i, byte) in self.inner.chunk().iter().take(5).enumerate() {
            value |= ((byte & 0x7f) as u32).wrapping_shl(7 * i as u32);
            if byte & 0x80 == 0 || i == 4 {
                return Some((value, i + 1));
            }
        }
        None
    }
}

macro_rules! guarded_reads {
    ($($name:ident -> $ty:ty),* $(,)?) => {
        $(
            fn $name(&mut self) -> Result<$ty, TryGetError> {
                self.settle(Access::Other).map_err(|()| Self::stopped())?;
                self.inner.$name()
            }
        )*
    };
}

impl Buf for GuardedBuf<'_> {
    fn remaining(&self) -> usize {
        if self.verdict.is_some() {
            0
        } else {
            self.inner.remaining()
        }
    }

    fn chunk(&self) -> &[u8] {
        if self.verdict.is_some() {
            &[]
        } else {
            self.inner.chunk()
        }
    }

    fn advance(&mut self, cnt: usize) {
        self.inner.advance(cnt)
    }

    guarded_reads! {
        try_get_i8 -> i8,
        try_get_i16 -> i16,
        try_get_u16 -> u16,
        try_get_u32 -> u32,
        try_get_i64 -> i64,
        try_get_u64 -> u64,
        try_get_f64 -> f64,
    }

    fn try_copy_to_slice(&mut self, dst: &mut [u8]) -> Result<(), TryGetError> {
        self.settle(Access::Other).map_err(|()| Self::stopped())?;
        self.inner.try_copy_to_slice(dst)
    }

    fn try_get_i32(&mut self) -> Result<i32, TryGetError> {
        let pos = self.pos();
        self.settle(Access::Other).map_err(|()| Self::stopped())?;
        let value = self.inner.try_get_i32()?;
        if value < LARGE as i32 || self.known.contains(&pos) {
            return Ok(value);
        }
        self.pending = Some(Pending {
            pos,
            value: value as u32,
            width: Width::Int32,
            after: self.inner.remaining(),
        });
        self.watch.arm();
        Ok(STAND_IN_I32)
    }

    fn try_get_u8(&mut self) -> Result<u8, TryGetError> {
        let pos = self.pos();
        self.settle(Access::Byte).map_err(|()| Self::stopped())?;
        if let Some(mut plan) = self.plan.take() {
            self.inner.try_get_u8()?;
            plan.given += 1;
            if plan.given < plan.len {
                self.plan = Some(plan);
                return Ok(0x80);
            }
            self.pending = Some(Pending {
                pos: plan.start,
                value: plan.value,
                width: Width::Varint,
                after: self.inner.remaining(),
            });
            self.watch.arm();
            return Ok(0);
        }
        let ahead = self.varint_ahead();
        let byte = self.inner.try_get_u8()?;
        if !self.flexible || byte & 0x80 == 0 || pos < self.varint_end {
            return Ok(byte);
        }
        let Some((value, len)) = ahead else {
            return Ok(byte);
        };
        self.varint_end = pos + len;
        if value < LARGE || self.known.contains(&pos) {
            return Ok(byte);
        }
        self.plan = Some(Plan {
            start: pos,
            len,
            given: 1,
            value,
        });
        Ok(0x80 | STAND_IN_VARINT as u8)
    }
}

impl ByteBuf for GuardedBuf<'_> {
    fn peek_bytes(&mut self, r: std::ops::Range<usize>) -> Bytes {
        self.inner.slice(r)
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        self.inner.split_to(size)
    }

    fn try_peek_bytes(&mut self, r: std::ops::Range<usize>) -> Result<Bytes, NotEnoughBytesError> {
        self.settle(Access::Other)
            .map_err(|()| NotEnoughBytesError)?;
        self.inner.try_peek_bytes(r)
    }

    fn try_get_bytes(&mut self, size: usize) -> Result<Bytes, NotEnoughBytesError> {
        let size = match self.settle(Access::Bytes(size)) {
            Ok(served) => served.unwrap_or(size),
            Err(()) => return Err(NotEnoughBytesError),
        };
        self.inner.try_get_bytes(size)
    }
}
