//! `authz`: the handler's batch of actions, answered for the principal of
//! the request being handled (never one the guest names).

use std::time::Instant;

use crate::plugins::bindings::handler::gregor::broker::authz;
use crate::plugins::bindings::{Action, Operation, ResourceType};
use crate::plugins::state::HandlerState;

impl authz::Host for HandlerState {
    async fn authorize(&mut self, actions: Vec<Action>) -> Vec<bool> {
        let started = Instant::now();
        let answers = self
            .authorization
            .authorize(self.session.as_deref(), self.client_id.as_deref(), actions)
            .await;
        self.clock.add_host_wait(started.elapsed());
        answers
    }

    async fn authorize_by_resource_type(
        &mut self,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let started = Instant::now();
        let allowed = self
            .authorization
            .authorize_by_resource_type(
                self.session.as_deref(),
                self.client_id.as_deref(),
                operation,
                resource_type,
            )
            .await;
        self.clock.add_host_wait(started.elapsed());
        allowed
    }
}
