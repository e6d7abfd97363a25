//! `stats`: error codes a module reports for its responses, counted under
//! the API the module serves and under the module version (rollouts
//! compare versions by them). A shadow's codes (`dry_run`) count for its
//! version only: no client saw them.

use crate::plugins::bindings::handler::gregor::broker::stats;
use crate::plugins::state::HandlerState;

impl stats::Host for HandlerState {
    fn count_errors(&mut self, codes: Vec<i16>) {
        let errors = codes.iter().filter(|&&code| code != 0).count();
        self.call_errors = self
            .call_errors
            .saturating_add(u32::try_from(errors).unwrap_or(u32::MAX));
        self.stats.count_error_codes(&codes);
        if !self.dry_run {
            self.services
                .metrics
                .record_response_errors(&self.api_label, &codes);
        }
    }
}
