//! Resource limits of module instances: linear memory and tables.
//!
//! Two bounds on memory, both enforced where wasmtime asks before it grows
//! (or first allocates) a linear memory:
//! - per instance, `plugin.memory.max.bytes`;
//! - across every live instance of every module,
//!   `plugin.memory.total.max.bytes` ([`GuestMemoryBudget`]). Without it,
//!   512 pooled instances of 256 MiB each could ask for far more than the
//!   machine has, and the kernel would end the whole broker; with it, the
//!   call that would pass the total fails (an allocation failure in the
//!   guest, then a trap: an error for that request only) and every other
//!   instance keeps what it has.
//!
//! Growth refused either way fails inside the guest and never touches the
//! broker. The peak is kept so that the pool can retire an instance whose
//! memory grew past the recycle bound.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::metrics::GuestMemoryGauges;

/// Table elements an instance may have; far above what a handler needs.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The broker-wide budget of guest linear memory. Its count lives in the
/// metrics' gauges, the one place it is kept.
#[derive(Debug)]
pub struct GuestMemoryBudget {
    gauges: Arc<GuestMemoryGauges>,
    capacity: i64,
}

impl GuestMemoryBudget {
    pub fn new(capacity: usize, gauges: Arc<GuestMemoryGauges>) -> Arc<Self> {
        let capacity = i64::try_from(capacity).unwrap_or(i64::MAX);
        gauges.capacity.store(capacity, Ordering::Relaxed);
        Arc::new(Self { gauges, capacity })
    }

    /// Takes `bytes` if the total stays within the capacity.
    fn take(&self, bytes: usize) -> bool {
        let Ok(bytes) = i64::try_from(bytes) else {
            return false;
        };
        let taken = self
            .gauges
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes)
                    .filter(|&total| total <= self.capacity)
            })
            .is_ok();
        if !taken {
            self.gauges.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    fn give_back(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.gauges.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// One instance's limits and what it holds of the broker-wide budget,
/// given back when the instance (its store) is dropped.
#[derive(Debug)]
pub struct GuestLimits {
    memory_max: usize,
    peak_memory: usize,
    budget: Arc<GuestMemoryBudget>,
    /// Bytes of linear memory taken from `budget`, over all its memories.
    held: usize,
}

impl GuestLimits {
    pub fn new(memory_max: usize, budget: Arc<GuestMemoryBudget>) -> Self {
        Self {
            memory_max,
            peak_memory: 0,
            budget,
            held: 0,
        }
    }

    /// The largest linear memory this instance has asked for.
    pub fn peak_memory(&self) -> usize {
        self.peak_memory
    }
}

impl Drop for GuestLimits {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
    }
}

impl wasmtime::ResourceLimiter for GuestLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let within = desired <= self.memory_max && maximum.is_none_or(|max| desired <= max);
        let growth = desired.saturating_sub(current);
        let allowed = within && self.budget.take(growth);
        if allowed {
            self.held += growth;
            self.peak_memory = self.peak_memory.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS && maximum.is_none_or(|max| desired <= max))
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn instances_share_the_total_and_give_it_back_when_dropped() {
        let gauges = Arc::new(GuestMemoryGauges::default());
        let budget = GuestMemoryBudget::new(10 * MIB, Arc::clone(&gauges));
        let mut first = GuestLimits::new(8 * MIB, Arc::clone(&budget));
        let mut second = GuestLimits::new(8 * MIB, Arc::clone(&budget));
        let used = || gauges.used.load(Ordering::Relaxed) as usize;
        // Initial memories, then growth: 2 + 4 MiB, then 2 MiB.
        assert!(first.memory_growing(0, 2 * MIB, None).unwrap());
        assert!(first.memory_growing(2 * MIB, 6 * MIB, None).unwrap());
        assert!(second.memory_growing(0, 2 * MIB, None).unwrap());
        assert_eq!(used(), 8 * MIB);
        // Past the total: refused, counted, nothing taken.
        assert!(!second.memory_growing(2 * MIB, 5 * MIB, None).unwrap());
        assert_eq!(gauges.refused.load(Ordering::Relaxed), 1);
        assert_eq!(used(), 8 * MIB);
        // Past the instance's own limit: refused whatever the total.
        assert!(!first.memory_growing(6 * MIB, 9 * MIB, None).unwrap());
        // The refused instance still grows within what is left.
        assert!(second.memory_growing(2 * MIB, 4 * MIB, None).unwrap());
        assert_eq!(used(), 10 * MIB);
        assert_eq!(first.peak_memory(), 6 * MIB);
        drop(first);
        assert_eq!(used(), 4 * MIB);
        drop(second);
        assert_eq!(used(), 0);
        assert_eq!(gauges.capacity.load(Ordering::Relaxed), 10 * MIB as i64);
    }
}
