//! A quorum of one, in memory, for tests of what sits on the quorum: a
//! proposal is applied at once, the node is always the leader.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::cluster::quorum::{Applied, NodeId, Proposal, Quorum, StateMachine};

pub struct MemoryQuorum<S: StateMachine> {
    id: NodeId,
    state: Mutex<(u64, Arc<S>)>,
    applied: watch::Sender<Applied>,
}

impl<S: StateMachine> MemoryQuorum<S> {
    pub fn new(id: NodeId) -> Self {
        Self {
            id,
            state: Mutex::new((0, Arc::new(S::default()))),
            applied: watch::channel(Applied::default()).0,
        }
    }

    /// Applies `command` at once and tells the watchers.
    pub fn apply(&self, command: &S::Command) -> S::Response {
        let mut state = crate::sync::lock(&self.state);
        let index = state.0 + 1;
        let mut next = (*state.1).clone();
        let response = next.apply(index, command);
        *state = (index, Arc::new(next));
        drop(state);
        self.applied.send_replace(Applied { index, term: 1 });
        response
    }
}

impl<S: StateMachine> Quorum<S> for MemoryQuorum<S> {
    fn propose(&self, command: S::Command) -> Proposal<'_, S::Response> {
        let response = self.apply(&command);
        Box::pin(async move { Ok(response) })
    }

    fn image(&self) -> Arc<S> {
        Arc::clone(&crate::sync::lock(&self.state).1)
    }

    fn watch(&self) -> watch::Receiver<Applied> {
        self.applied.subscribe()
    }

    fn leader(&self) -> Option<NodeId> {
        Some(self.id)
    }
}
