//! The budget for the bytes of requests in flight, Kafka's
//! `queued.max.request.bytes` memory pool.
//!
//! Without it a few hundred connections that each declare a frame just
//! under `socket.request.max.bytes` take the broker's memory. A
//! connection reserves a frame's declared size after reading its size
//! prefix and before reading its body; while the budget is short it waits
//! without reading (Kafka mutes the channel), so the peer's bytes stay in
//! the kernel's socket buffers. The reservation goes back when the request
//! is done (its response written or dropped) and wakes the waiters.
//!
//! Unlike a fair semaphore, a reservation is granted whenever it fits,
//! whoever waited first: a 100 MiB frame waiting for room must not hold
//! back the small requests of other clients that still fit. Kafka's pool
//! is not fair either. The budget is strict (in-flight bytes never exceed
//! it); the configuration guarantees that one frame of the largest size
//! always fits into an empty pool.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::metrics::Metrics;

/// A broker-wide budget of request bytes.
pub struct MemoryPool {
    /// `None`: unbounded (`queued.max.request.bytes` <= 0, as in Kafka).
    capacity: Option<usize>,
    used: Mutex<usize>,
    released: Notify,
    metrics: Arc<Metrics>,
}

impl MemoryPool {
    pub fn new(capacity: Option<usize>, metrics: Arc<Metrics>) -> Arc<Self> {
        metrics
            .memory_pool
            .capacity
            .store(capacity.map_or(-1, saturating_i64), Ordering::Relaxed);
        Arc::new(Self {
            capacity,
            used: Mutex::new(0),
            released: Notify::new(),
            metrics,
        })
    }

    fn used(&self) -> MutexGuard<'_, usize> {
        crate::sync::lock(&self.used)
    }

    /// Reserves `bytes`, waiting while they do not fit. A request larger
    /// than the whole budget (configuration forbids it) waits for the pool
    /// to be empty and then takes all of it.
    pub async fn reserve(self: &Arc<Self>, bytes: usize) -> Reservation {
        let wanted = self.capacity.map_or(bytes, |capacity| bytes.min(capacity));
        if let Some(reservation) = self.try_reserve(wanted) {
            return reservation;
        }
        let _waiting = Waiting::new(&self.metrics);
        loop {
            // Registered before the check, so a release between the check
            // and the wait is not missed.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(reservation) = self.try_reserve(wanted) {
                return reservation;
            }
            released.await;
        }
    }

    fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        let mut used = self.used();
        let after = used.saturating_add(bytes);
        if self.capacity.is_some_and(|capacity| after > capacity) {
            return None;
        }
        *used = after;
        self.publish(after);
        Some(Reservation {
            pool: Arc::clone(self),
            bytes,
        })
    }

    fn release(&self, bytes: usize) {
        let mut used = self.used();
        *used = used.saturating_sub(bytes);
        self.publish(*used);
        drop(used);
        self.released.notify_waiters();
    }

    /// Bytes reserved now.
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        *self.used()
    }

    fn publish(&self, used: usize) {
        self.metrics
            .memory_pool
            .used
            .store(saturating_i64(used), Ordering::Relaxed);
    }
}

fn saturating_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Bytes taken from the pool; given back on drop.
pub struct Reservation {
    pool: Arc<MemoryPool>,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.release(self.bytes);
    }
}

/// Counts a connection in the waiting gauge for as long as it waits
/// (including a wait abandoned because the connection ended).
struct Waiting<'a>(&'a Metrics);

impl<'a> Waiting<'a> {
    fn new(metrics: &'a Metrics) -> Self {
        metrics.memory_pool.waiting.fetch_add(1, Ordering::Relaxed);
        Self(metrics)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.memory_pool.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pool(capacity: usize) -> Arc<MemoryPool> {
        MemoryPool::new(Some(capacity), Arc::new(Metrics::default()))
    }

    #[tokio::test]
    async fn waits_until_released_and_lets_small_requests_pass() {
        let pool = pool(100);
        let first = pool.reserve(60).await;
        let waiter = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { pool.reserve(60).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "60 + 60 does not fit into 100");
        assert_eq!(pool.metrics.memory_pool.waiting.load(Ordering::Relaxed), 1);
        // A small request fits beside the first one although the big one
        // waited first.
        let small = pool.reserve(30).await;
        assert_eq!(*pool.used(), 90);
        drop(small);
        drop(first);
        let second = waiter.await.unwrap();
        assert_eq!(*pool.used(), 60);
        assert_eq!(pool.metrics.memory_pool.waiting.load(Ordering::Relaxed), 0);
        drop(second);
        assert_eq!(*pool.used(), 0);
        assert_eq!(pool.metrics.memory_pool.used.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn oversized_and_unbounded() {
        let pool = pool(100);
        let all = pool.reserve(1000).await;
        assert_eq!(*pool.used(), 100);
        drop(all);
        let unbounded = MemoryPool::new(None, Arc::new(Metrics::default()));
        let big = unbounded.reserve(usize::MAX / 2).await;
        let more = unbounded.reserve(usize::MAX / 2).await;
        assert_eq!(*unbounded.used(), usize::MAX / 2 * 2);
        drop((big, more));
        assert_eq!(*unbounded.used(), 0);
    }
}
