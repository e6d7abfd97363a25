//! `stats`: error codes a module reports for its responses, counted under
//! the API the module serves.

use crate::plugins::bindings::handler::gregor::broker::stats;
use crate::plugins::state::HandlerState;

impl stats::Host for HandlerState {
    fn count_errors(&mut self, codes: Vec<i16>) {
        self.services
            .metrics
            .record_response_errors(&self.api_label, &codes);
    }
}
