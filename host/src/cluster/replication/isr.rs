//! The leader's replica-set rules, as pure functions over what the leader
//! knows of its followers (Kafka's `Partition.updateFollowerFetchState`,
//! `maybeIncrementLeaderHW`, `getOutOfSyncReplicas` and
//! `isFollowerInSync`), so they can be tested without a cluster.
//!
//! - A follower's fetch offset is its log end offset (LEO): it asks for the
//!   first offset it does not have.
//! - A follower is *caught up* at a fetch that reaches the leader's LEO; a
//!   fetch that reaches the LEO the leader had at the follower's previous
//!   fetch proves it was caught up then. A follower not caught up within
//!   `replica.lag.time.max.ms` is out of sync and leaves the ISR.
//! - The high watermark is the lowest LEO over the ISR (the leader's own
//!   included), and only ever advances within a leader epoch. A follower
//!   whose LEO is unknown (it has not fetched from this leader) holds it.
//! - A follower outside the ISR rejoins once its LEO reaches the high
//!   watermark and the start of this leader's epoch.

use std::time::{Duration, Instant};

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follower {
    /// Its LEO from its last fetch; -1 until it fetched from this leader.
    pub log_end_offset: i64,
    /// When it was last known to be caught up (the leadership's start
    /// until it fetched).
    pub last_caught_up: Instant,
    /// Its previous fetch, and the leader's LEO then.
    pub last_fetch: Option<Instant>,
    pub leader_end_at_last_fetch: i64,
}

impl Follower {
    /// A follower as a new leader first sees it: unknown LEO, caught up
    /// as of now (so it has the full lag time to fetch).
    pub fn new(now: Instant) -> Self {
        Self {
            log_end_offset: -1,
            last_caught_up: now,
            last_fetch: None,
            leader_end_at_last_fetch: -1,
        }
    }

    /// Records a fetch at `fetch_offset` when the leader's LEO is
    /// `leader_end`.
    pub fn fetched(&mut self, fetch_offset: i64, leader_end: i64, now: Instant) {
        if fetch_offset >= leader_end {
            self.last_caught_up = self.last_caught_up.max(now);
        } else if let Some(previous) = self.last_fetch {
            if fetch_offset >= self.leader_end_at_last_fetch {
                self.last_caught_up = self.last_caught_up.max(previous);
            }
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch = Some(now);
        self.leader_end_at_last_fetch = leader_end;
    }

    /// Kafka's `isCaughtUp`: at the leader's LEO, or caught up within
    /// the lag time.
    pub fn in_sync(&self, leader_end: i64, now: Instant, lag_max: Duration) -> bool {
        self.log_end_offset == leader_end
            || now.saturating_duration_since(self.last_caught_up) <= lag_max
    }
}

/// The lowest LEO over `isr`: `leader_end` for the leader, each follower's
/// from `follower_end` (None: unknown, which holds the watermark).
pub fn lowest_end_offset(
    leader: i32,
    leader_end: i64,
    isr: &[i32],
    follower_end: impl Fn(i32) -> Option<i64>,
) -> Option<i64> {
    isr.iter().try_fold(leader_end, |lowest, id| {
        if *id == leader {
            return Some(lowest);
        }
        follower_end(*id)
            .filter(|end| *end >= 0)
            .map(|end| lowest.min(end))
    })
}

/// The high watermark after a change: the candidate if it is higher (the
/// watermark never goes back), else the current one.
pub fn advanced(current: i64, candidate: Option<i64>) -> i64 {
    candidate.map_or(current, |candidate| current.max(candidate))
}

/// The ISR members (other than the leader) that are out of sync.
pub fn out_of_sync(
    leader: i32,
    isr: &[i32],
    leader_end: i64,
    now: Instant,
    lag_max: Duration,
    follower: impl Fn(i32) -> Option<Follower>,
) -> Vec<i32> {
    isr.iter()
        .copied()
        .filter(|id| *id != leader)
        .filter(|id| follower(*id).is_none_or(|f| !f.in_sync(leader_end, now, lag_max)))
        .collect()
}

/// Whether a follower outside the ISR may join it (Kafka's
/// `isFollowerInSync`): its LEO reached the high watermark and the first
/// offset of this leader's epoch.
pub fn may_join(follower_end: i64, high_watermark: i64, epoch_start_offset: i64) -> bool {
    follower_end >= 0 && follower_end >= high_watermark && follower_end >= epoch_start_offset
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: Duration = Duration::from_millis(100);

    #[test]
    fn the_high_watermark_is_the_lowest_end_offset_over_the_isr() {
        let ends = |id: i32| match id {
            2 => Some(7),
            3 => Some(4),
            _ => None,
        };
        assert_eq!(lowest_end_offset(1, 10, &[1, 2, 3], ends), Some(4));
        assert_eq!(lowest_end_offset(1, 10, &[1, 2], ends), Some(7));
        assert_eq!(
            lowest_end_offset(1, 3, &[1, 2], ends),
            Some(3),
            "the leader's own LEO counts"
        );
        assert_eq!(
            lowest_end_offset(1, 10, &[1], ends),
            Some(10),
            "alone: its LEO"
        );
        assert_eq!(
            lowest_end_offset(1, 10, &[1, 4], ends),
            None,
            "an unknown LEO holds it"
        );
    }

    #[test]
    fn the_high_watermark_only_advances() {
        assert_eq!(advanced(5, Some(8)), 8);
        assert_eq!(
            advanced(5, Some(3)),
            5,
            "a follower behind does not move it back"
        );
        assert_eq!(advanced(5, None), 5);
    }

    #[test]
    fn a_follower_at_the_leaders_end_is_caught_up() {
        let start = Instant::now();
        let mut follower = Follower::new(start);
        follower.fetched(10, 10, start + Duration::from_millis(50));
        let later = start + Duration::from_millis(140);
        assert!(follower.in_sync(12, later, LAG), "caught up 90 ms ago");
        let much_later = start + Duration::from_millis(200);
        assert!(!follower.in_sync(12, much_later, LAG), "behind for 150 ms");
        assert!(
            follower.in_sync(10, much_later, LAG),
            "nothing new to fetch"
        );
    }

    #[test]
    fn reaching_the_previous_fetchs_leader_end_counts_from_that_fetch() {
        let start = Instant::now();
        let mut follower = Follower::new(start);
        let first = start + Duration::from_millis(10);
        follower.fetched(5, 8, first);
        assert_eq!(follower.last_caught_up, start, "behind at the first fetch");
        follower.fetched(8, 12, start + Duration::from_millis(30));
        assert_eq!(follower.last_caught_up, first, "it had reached 8 by then");
        follower.fetched(9, 15, start + Duration::from_millis(50));
        assert_eq!(follower.last_caught_up, first, "never reached 12");
    }

    #[test]
    fn a_silent_or_slow_follower_leaves_the_isr() {
        let start = Instant::now();
        let mut fast = Follower::new(start);
        let mut slow = Follower::new(start);
        let now = start + Duration::from_millis(150);
        fast.fetched(20, 20, now);
        slow.fetched(3, 20, now);
        let known = |id: i32| match id {
            2 => Some(fast),
            3 => Some(slow),
            _ => None,
        };
        assert_eq!(out_of_sync(1, &[1, 2, 3], 20, now, LAG, known), vec![3]);
        assert_eq!(
            out_of_sync(1, &[1, 2, 4], 20, now, LAG, known),
            vec![4],
            "never fetched"
        );
        assert!(out_of_sync(1, &[1], 20, now, LAG, known).is_empty());
    }

    #[test]
    fn a_follower_rejoins_at_the_high_watermark() {
        assert!(may_join(10, 10, 4));
        assert!(!may_join(9, 10, 4));
        assert!(!may_join(10, 10, 12), "not yet at this epoch's start");
        assert!(!may_join(-1, 0, 0), "unknown");
    }
}
