//! Authorization as handlers see it: a batch of actions for the current
//! request's principal. With no authorizer configured every action is
//! allowed, as in Kafka without `authorizer.class.name`; otherwise the
//! active authorizer module answers, and any failure of it (trap,
//! timeout, wrong answer count) is a denial: it fails closed.

use std::sync::{Arc, RwLock};

use tracing::warn;

use crate::channel::Session;
use crate::plugins::authorizer::LoadedAuthorizer;
use crate::plugins::bindings::Action;

#[derive(Default)]
pub struct Authorization {
    active: RwLock<Option<Arc<LoadedAuthorizer>>>,
}

impl Authorization {
    /// Makes `authorizer` the one that decides (None: allow everything).
    pub fn set_active(&self, authorizer: Option<Arc<LoadedAuthorizer>>) {
        match self.active.write() {
            Ok(mut guard) => *guard = authorizer,
            Err(poisoned) => *poisoned.into_inner() = authorizer,
        }
    }

    pub fn active(&self) -> Option<Arc<LoadedAuthorizer>> {
        match self.active.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// One answer per action, true meaning allowed.
    pub async fn authorize(
        &self,
        session: Option<&Session>,
        client_id: Option<&str>,
        actions: Vec<Action>,
    ) -> Vec<bool> {
        let Some(authorizer) = self.active() else {
            return vec![true; actions.len()];
        };
        let Some(session) = session else {
            warn!("authorization asked outside a request: denied");
            return vec![false; actions.len()];
        };
        authorizer.authorize(session, client_id, actions).await
    }
}
