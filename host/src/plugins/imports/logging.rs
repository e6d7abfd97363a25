//! `logging`: guest log lines go to the broker's log tagged with the
//! module, at most `LINES_PER_SECOND` per instance so that a chatty or
//! hostile module cannot flood the log. The lines' `tracing` target is
//! this module's, `gregor::plugins::imports::logging`: the logger whose
//! level (BROKER_LOGGER, `runtime_loggers`) lets plugin lines through.

use std::time::Instant;

use tracing::{debug, error, info, trace, warn};

use crate::plugins::authorizer::AuthorizerState;
use crate::plugins::bindings::handler::gregor::broker::logging::{self, Level};
use crate::plugins::state::HandlerState;

const LINES_PER_SECOND: u32 = 100;
const MAX_LINE_BYTES: usize = 4096;

/// A one-second window of log lines.
#[derive(Debug, Clone, Copy)]
pub struct LogBudget {
    window_start: Instant,
    lines: u32,
    dropped: u32,
}

impl Default for LogBudget {
    fn default() -> Self {
        Self {
            window_start: Instant::now(),
            lines: 0,
            dropped: 0,
        }
    }
}

impl LogBudget {
    /// Whether one more line may be written now; reports drops once the
    /// window turns over.
    fn admit(&mut self, plugin: &str) -> bool {
        if self.window_start.elapsed().as_secs() >= 1 {
            if self.dropped > 0 {
                warn!(
                    plugin,
                    dropped = self.dropped,
                    "plugin log lines dropped by the rate limit"
                );
            }
            *self = Self::default();
        }
        if self.lines < LINES_PER_SECOND {
            self.lines += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

fn emit(plugin: &str, level: Level, message: &str) {
    let message = match message.char_indices().nth(MAX_LINE_BYTES) {
        Some((cut, _)) => &message[..cut],
        None => message,
    };
    match level {
        Level::Trace => trace!(plugin, "{message}"),
        Level::Debug => debug!(plugin, "{message}"),
        Level::Info => info!(plugin, "{message}"),
        Level::Warn => warn!(plugin, "{message}"),
        Level::Error => error!(plugin, "{message}"),
    }
}

impl logging::Host for HandlerState {
    fn log(&mut self, level: Level, message: String) {
        if self.log_budget.admit(&self.plugin) {
            emit(&self.plugin, level, &message);
        }
    }
}

impl logging::Host for AuthorizerState {
    fn log(&mut self, level: Level, message: String) {
        if self.log_budget.admit(&self.plugin) {
            emit(&self.plugin, level, &message);
        }
    }
}
