//! Deadlines of the group coordinator, Kafka's heartbeat and rebalance
//! purgatories reduced to what one broker needs: a heap of (deadline, key)
//! and one background task that sleeps until the earliest deadline and
//! hands the due keys to the coordinator.
//!
//! Entries are never cancelled. A key names what to re-check (a member's
//! session, a group's rebalance round), and the coordinator ignores a key
//! whose subject has moved on, as Kafka's delayed operations re-check their
//! condition. A member keeps at most a couple of entries outstanding, so
//! the heap stays proportional to the number of members.

use crate::sync::lock;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::Notify;

/// What a deadline is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timer {
    /// A member's session (or new-member join timeout) may have expired.
    Session { group: String, member: String },
    /// A member id handed out with MEMBER_ID_REQUIRED was not used in time.
    PendingMember { group: String, member: String },
    /// The join phase of rebalance round `round` ends.
    Join { group: String, round: u64 },
    /// Members of `generation` that have not sent SyncGroup are removed.
    Sync { group: String, generation: i32 },
    /// Time to expire old offsets.
    Retention,
    /// A consumer-protocol member's session may have expired.
    ConsumerSession { group: String, member: String },
    /// A consumer-protocol member had to revoke partitions by now.
    ConsumerRevocation {
        group: String,
        member: String,
        epoch: i32,
    },
}

struct Entry {
    at: Instant,
    seq: u64,
    timer: Timer,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Heap {
    entries: BinaryHeap<Entry>,
    seq: u64,
}

#[derive(Default)]
pub struct Timers {
    heap: Mutex<Heap>,
    /// Wakes the expiry task when a new earliest deadline arrives.
    pub changed: Notify,
}

impl Timers {
    pub fn schedule(&self, at: Instant, timer: Timer) {
        let earliest = {
            let mut heap = lock(&self.heap);
            heap.seq += 1;
            let seq = heap.seq;
            let earliest = heap.entries.peek().is_none_or(|first| at < first.at);
            heap.entries.push(Entry { at, seq, timer });
            earliest
        };
        if earliest {
            self.changed.notify_one();
        }
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        lock(&self.heap).entries.peek().map(|entry| entry.at)
    }

    /// Removes and returns every timer due at `now`, earliest first.
    pub fn take_due(&self, now: Instant) -> Vec<Timer> {
        let mut heap = lock(&self.heap);
        let mut due = Vec::new();
        while heap.entries.peek().is_some_and(|entry| entry.at <= now) {
            if let Some(entry) = heap.entries.pop() {
                due.push(entry.timer);
            }
        }
        due
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        lock(&self.heap).entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn due_timers_come_out_earliest_first() {
        let timers = Timers::default();
        let now = Instant::now();
        timers.schedule(now + Duration::from_secs(3), Timer::Retention);
        let join = Timer::Join {
            group: "g".into(),
            round: 1,
        };
        timers.schedule(now + Duration::from_secs(1), join.clone());
        timers.schedule(now + Duration::from_secs(2), Timer::Retention);
        assert_eq!(timers.next_deadline(), Some(now + Duration::from_secs(1)));
        assert!(timers.take_due(now).is_empty());
        let due = timers.take_due(now + Duration::from_secs(2));
        assert_eq!(due, vec![join, Timer::Retention]);
        assert_eq!(timers.len(), 1);
    }
}
