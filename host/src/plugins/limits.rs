//! Per-instance resource limits: linear memory and tables. Growth past the
//! limit fails inside the guest (an allocation failure, then a trap) and
//! never touches the broker. The peak is kept so that the pool can retire
//! an instance whose memory grew past the recycle bound.

use wasmtime::ResourceLimiter;

/// Table elements an instance may have; far above what a handler needs.
const MAX_TABLE_ELEMENTS: usize = 100_000;

#[derive(Debug, Clone)]
pub struct GuestLimits {
    memory_max: usize,
    peak_memory: usize,
}

impl GuestLimits {
    pub fn new(memory_max: usize) -> Self {
        Self {
            memory_max,
            peak_memory: 0,
        }
    }

    /// The largest linear memory this instance has asked for.
    pub fn peak_memory(&self) -> usize {
        self.peak_memory
    }
}

impl ResourceLimiter for GuestLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.memory_max && maximum.is_none_or(|max| desired <= max);
        if allowed {
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
