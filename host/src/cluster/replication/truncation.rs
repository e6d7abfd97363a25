//! Where a follower cuts its log, given what the leader says of an epoch
//! (Kafka's `AbstractFetcherThread.getOffsetTruncationState`, KIP-279).
//!
//! The leader answers "epoch E ends at offset O" (from OffsetForLeaderEpoch
//! or a Fetch response's diverging epoch). The follower keeps what both
//! logs agree on: up to O if it knows epoch E too (and no further than
//! where its own E ends); if it does not know E, it first cuts to the end
//! of its largest epoch below E and asks again with that epoch, so that
//! several diverging epochs are unwound one at a time.

use crate::log::epoch_cache::{EpochCache, UNDEFINED_EPOCH, UNDEFINED_OFFSET};

/// The offset to truncate to, and whether that is final (else the
/// follower asks the leader again with its new latest epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub offset: i64,
    pub completed: bool,
}

/// The truncation for the leader's answer `(leader_epoch, end_offset)`,
/// given this follower's epochs, log end offset and fetch offset.
pub fn truncation(
    leader_epoch: i32,
    leader_end_offset: i64,
    local: &EpochCache,
    log_end_offset: i64,
    fetch_offset: i64,
) -> Truncation {
    let done = |offset: i64| Truncation {
        offset,
        completed: true,
    };
    if leader_end_offset == UNDEFINED_OFFSET {
        // The leader knows no such epoch: keep the fetch offset.
        return done(fetch_offset);
    }
    if leader_epoch == UNDEFINED_EPOCH {
        return done(leader_end_offset.min(log_end_offset));
    }
    let (local_epoch, local_end) = local.end_offset_for(leader_epoch, log_end_offset);
    if local_end == UNDEFINED_OFFSET {
        // This replica tracked no epoch that early: the leader's offset.
        return done(leader_end_offset.min(log_end_offset));
    }
    if local_epoch != leader_epoch {
        return Truncation {
            offset: local_end.min(log_end_offset),
            completed: false,
        };
    }
    done(local_end.min(leader_end_offset).min(log_end_offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::default();
        for &(epoch, start) in entries {
            c.assign(epoch, start);
        }
        c
    }

    #[test]
    fn a_former_leaders_tail_is_cut_where_the_shared_epoch_ends() {
        // This replica led epoch 0 to offset 15; the new leader's epoch 0
        // ended at 10 (epoch 1 started there).
        let local = cache(&[(0, 0)]);
        assert_eq!(
            truncation(0, 10, &local, 15, 15),
            Truncation {
                offset: 10,
                completed: true
            }
        );
        // A replica that is simply behind keeps everything.
        assert_eq!(
            truncation(0, 10, &local, 8, 8),
            Truncation {
                offset: 8,
                completed: true
            }
        );
    }

    #[test]
    fn unknown_epochs_are_unwound_one_at_a_time() {
        // Local epochs 0, 2 (from 10) and 3 (from 20); the leader never saw
        // epoch 2 or 3 and answers epoch 1 ending at 12.
        let local = cache(&[(0, 0), (2, 10), (3, 20)]);
        // Epoch 1 is unknown here: cut to where epoch 0 ends, ask again.
        assert_eq!(
            truncation(1, 12, &local, 30, 30),
            Truncation {
                offset: 10,
                completed: false
            }
        );
        // The leader then answers for epoch 0: ends at 9 there.
        let local = cache(&[(0, 0)]);
        assert_eq!(
            truncation(0, 9, &local, 10, 10),
            Truncation {
                offset: 9,
                completed: true
            }
        );
    }

    #[test]
    fn undefined_answers() {
        let local = cache(&[(2, 5)]);
        assert_eq!(
            truncation(-1, -1, &local, 30, 30),
            Truncation {
                offset: 30,
                completed: true
            }
        );
        assert_eq!(
            truncation(-1, 20, &local, 30, 30),
            Truncation {
                offset: 20,
                completed: true
            }
        );
        // An epoch older than any tracked here: the leader's offset.
        assert_eq!(
            truncation(1, 3, &local, 30, 30),
            Truncation {
                offset: 3,
                completed: true
            }
        );
    }
}
