//! Waiting fetches keyed by partition, Kafka's fetch purgatory watch keys.
//!
//! A fetch that waits for `min_bytes` registers one [`Notify`] under each
//! partition it reads; an append to a partition wakes only the fetches
//! registered there. A single broker-wide notification would wake every
//! waiting fetch on every append, which with thousands of parked
//! consumers turns each produce into thousands of useless re-reads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::log::TopicPartition;

type Waiters = HashMap<TopicPartition, HashMap<u64, Arc<Notify>>>;

#[derive(Default)]
pub struct FetchPurgatory {
    waiters: Mutex<Waiters>,
    next_id: AtomicU64,
}

/// A fetch's registration; dropping it removes the fetch from every
/// partition it watched.
pub struct Watch<'a> {
    purgatory: &'a FetchPurgatory,
    id: u64,
    partitions: Vec<TopicPartition>,
    notify: Arc<Notify>,
}

impl FetchPurgatory {
    fn lock(&self) -> MutexGuard<'_, Waiters> {
        crate::sync::lock(&self.waiters)
    }

    /// Registers interest in appends to `partitions`. Register before
    /// reading, so an append between the read and the wait still wakes.
    pub fn watch(&self, partitions: Vec<TopicPartition>) -> Watch<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        {
            let mut waiters = self.lock();
            for tp in &partitions {
                waiters
                    .entry(tp.clone())
                    .or_default()
                    .insert(id, Arc::clone(&notify));
            }
        }
        Watch {
            purgatory: self,
            id,
            partitions,
            notify,
        }
    }

    /// Wakes the fetches watching `tp` (an append or a marker landed).
    pub fn appended(&self, tp: &TopicPartition) {
        let waiters = self.lock();
        if let Some(watching) = waiters.get(tp) {
            for notify in watching.values() {
                // A stored permit: a fetch between its read and its wait
                // still sees this append.
                notify.notify_one();
            }
        }
    }

    /// Fetches waiting right now (each counted once).
    #[cfg(test)]
    fn watching(&self, tp: &TopicPartition) -> usize {
        self.lock().get(tp).map_or(0, HashMap::len)
    }
}

impl Watch<'_> {
    /// Completes after an append to any watched partition (or at once if
    /// one happened since the watch began).
    pub async fn appended(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut waiters = self.purgatory.lock();
        for tp in &self.partitions {
            if let Some(watching) = waiters.get_mut(tp) {
                watching.remove(&self.id);
                if watching.is_empty() {
                    waiters.remove(tp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }

    #[tokio::test]
    async fn an_append_wakes_only_the_fetches_of_its_partition() {
        let purgatory = FetchPurgatory::default();
        let on_a = purgatory.watch(vec![tp("a", 0)]);
        let on_b = purgatory.watch(vec![tp("b", 0), tp("a", 1)]);
        purgatory.appended(&tp("a", 0));
        tokio::time::timeout(Duration::from_secs(1), on_a.appended())
            .await
            .expect("the fetch on a-0 is woken");
        let woken = tokio::time::timeout(Duration::from_millis(50), on_b.appended()).await;
        assert!(woken.is_err(), "the fetch on b-0 and a-1 sleeps on");
        purgatory.appended(&tp("a", 1));
        tokio::time::timeout(Duration::from_secs(1), on_b.appended())
            .await
            .expect("the fetch on a-1 is woken");
    }

    #[test]
    fn dropping_a_watch_unregisters_it() {
        let purgatory = FetchPurgatory::default();
        let first = purgatory.watch(vec![tp("a", 0)]);
        let second = purgatory.watch(vec![tp("a", 0)]);
        assert_eq!(purgatory.watching(&tp("a", 0)), 2);
        drop(first);
        assert_eq!(purgatory.watching(&tp("a", 0)), 1);
        drop(second);
        assert_eq!(purgatory.watching(&tp("a", 0)), 0);
        assert!(purgatory.lock().is_empty());
    }
}
