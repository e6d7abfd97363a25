//! Deferred completion of handler calls: Kafka's purgatory for Wasm.
//!
//! A Fetch waiting for data, a JoinGroup waiting for its rebalance and a
//! SyncGroup waiting for the leader's assignment must not keep their
//! component instance while they wait: instances are few (the pooling
//! allocator's limit), waiting requests can be many (every long-polling
//! consumer). So a waiting host call *parks* its request instead of
//! suspending the guest: it leaves behind a future that holds nothing of
//! the guest's (the wait, then the host's answer), the guest returns at
//! once (`fetch-or-park`, `join-or-park` and `sync-or-park` answer none),
//! and its instance goes back to the pool. When the wait completes, its answer is a [`Memo`]
//! and the request goes back into the request channel to be handled again
//! from the start; the same call then returns the memo at once.
//!
//! Handlers keep no state and the parking calls are the last host calls a
//! handler makes that change anything, so running the handler again is
//! safe (Kafka's DelayedFetch also reads the log again on completion). A
//! replayed request never parks again: a waiting call that finds no memo
//! for itself (the guest asked something else this time) answers with
//! what is there now, or, for the group calls, waits inside the call.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::coordinator::{JoinRequest, JoinResult, SyncRequest, SyncResult};
use crate::replica::{FetchPartition, FetchedPartition};

/// A parked call's answer, kept for the replay, with what identifies the
/// call it answers.
#[derive(Debug)]
pub enum Memo {
    Fetch {
        partitions: Vec<FetchPartition>,
        results: Vec<FetchedPartition>,
    },
    Join {
        group_id: String,
        member_id: String,
        result: JoinResult,
    },
    Sync {
        group_id: String,
        member_id: String,
        generation_id: i32,
        result: SyncResult,
    },
}

/// What a parked request waits for: its memo.
pub type Wait = Pin<Box<dyn Future<Output = Memo> + Send>>;

/// The deferral state of one handler call.
#[derive(Default)]
pub struct Deferral {
    /// Set when the request is being handled again after a wait.
    replay: bool,
    /// The answers of the calls that parked before, in call order.
    memos: VecDeque<Memo>,
    parked: Option<Wait>,
}

impl fmt::Debug for Deferral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferral")
            .field("replay", &self.replay)
            .field("memos", &self.memos.len())
            .field("parked", &self.parked.is_some())
            .finish()
    }
}

impl Deferral {
    /// A request handled again with the answers its waits produced.
    pub fn replay(memos: Vec<Memo>) -> Self {
        Self {
            replay: !memos.is_empty(),
            memos: memos.into(),
            parked: None,
        }
    }

    /// May the current call park? Only in a first call, and only once.
    pub fn may_park(&self) -> bool {
        !self.replay && self.parked.is_none()
    }

    pub fn park(&mut self, wait: Wait) {
        self.parked = Some(wait);
    }

    /// The wait a call of this handler parked, if one did.
    pub fn take_parked(&mut self) -> Option<Wait> {
        self.parked.take()
    }

    /// The replay's answer to a fetch of exactly these partitions.
    pub fn fetch_answer(&mut self, partitions: &[FetchPartition]) -> Option<Vec<FetchedPartition>> {
        match self
            .take(|memo| matches!(memo, Memo::Fetch { partitions: p, .. } if p == partitions))?
        {
            Memo::Fetch { results, .. } => Some(results),
            _ => None,
        }
    }

    /// The replay's answer to this member's JoinGroup.
    pub fn join_answer(&mut self, request: &JoinRequest) -> Option<JoinResult> {
        let matches = |memo: &Memo| {
            matches!(memo, Memo::Join { group_id, member_id, .. }
                if *group_id == request.group_id && *member_id == request.member_id)
        };
        match self.take(matches)? {
            Memo::Join { result, .. } => Some(result),
            _ => None,
        }
    }

    /// The replay's answer to this member's SyncGroup.
    pub fn sync_answer(&mut self, request: &SyncRequest) -> Option<SyncResult> {
        let matches = |memo: &Memo| {
            matches!(memo, Memo::Sync { group_id, member_id, generation_id, .. }
                if *group_id == request.group_id
                    && *member_id == request.member_id
                    && *generation_id == request.generation_id)
        };
        match self.take(matches)? {
            Memo::Sync { result, .. } => Some(result),
            _ => None,
        }
    }

    fn take(&mut self, matches: impl Fn(&Memo) -> bool) -> Option<Memo> {
        let index = self.memos.iter().position(matches)?;
        self.memos.remove(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(offset: i64) -> FetchPartition {
        FetchPartition {
            topic: "t".to_string(),
            partition: 0,
            fetch_offset: offset,
            partition_max_bytes: 1024,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        }
    }

    #[test]
    fn a_replay_answers_the_same_call_and_never_parks() {
        let mut first = Deferral::default();
        assert!(first.may_park());
        first.park(Box::pin(async {
            Memo::Fetch {
                partitions: Vec::new(),
                results: Vec::new(),
            }
        }));
        assert!(!first.may_park(), "a call parks once");
        assert!(first.take_parked().is_some());

        let memo = Memo::Fetch {
            partitions: vec![partition(5)],
            results: Vec::new(),
        };
        let mut replay = Deferral::replay(vec![memo]);
        assert!(!replay.may_park());
        assert!(
            replay.fetch_answer(&[partition(6)]).is_none(),
            "other offsets"
        );
        assert!(replay.fetch_answer(&[partition(5)]).is_some());
        assert!(replay.fetch_answer(&[partition(5)]).is_none(), "used once");
    }
}
