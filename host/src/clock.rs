//! Wall-clock time in Kafka's unit: milliseconds since the Unix epoch, as
//! record timestamps, offset commits and transaction states carry it. One
//! function, so every part of the broker reads the clock the same way.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
