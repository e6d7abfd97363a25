//! Broker sessions: when each broker (of which epoch) last heartbeated.
//!
//! Not replicated, on purpose (Kafka's BrokerHeartbeatManager): heartbeats
//! arrive every `broker.heartbeat.interval.ms` from every broker, far too
//! often for the log, and only the active controller acts on them. A
//! controller that becomes active knows no session yet and starts each
//! broker's at the first time it looks, so no broker is fenced for the
//! silence before the failover.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::cluster::image::MetadataImage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    epoch: i64,
    last: Instant,
}

#[derive(Debug, Clone, Default)]
pub struct Heartbeats {
    sessions: HashMap<i32, Session>,
}

impl Heartbeats {
    pub fn new() -> Self {
        Self::default()
    }

    /// A heartbeat (or a registration) of `broker` at `epoch`.
    pub fn touch(&mut self, broker: i32, epoch: i64, now: Instant) {
        self.sessions.insert(broker, Session { epoch, last: now });
    }

    /// Kafka's `hasValidSession`: `broker` at `epoch` heartbeated within
    /// `timeout`.
    pub fn has_valid_session(
        &self,
        broker: i32,
        epoch: i64,
        now: Instant,
        timeout: Duration,
    ) -> bool {
        self.sessions.get(&broker).is_some_and(|session| {
            session.epoch == epoch && now.saturating_duration_since(session.last) < timeout
        })
    }

    /// Forgets a broker (unregistered).
    pub fn remove(&mut self, broker: i32) {
        self.sessions.remove(&broker);
    }

    /// The unfenced brokers of `image` whose session expired, with their
    /// epochs. A broker without a session here (this controller just
    /// became active, or it registered before) gets one starting `now`.
    pub fn expired(
        &mut self,
        image: &MetadataImage,
        now: Instant,
        timeout: Duration,
    ) -> Vec<(i32, i64)> {
        let mut expired = Vec::new();
        for broker in image.cluster().brokers().filter(|b| !b.fenced) {
            let session = self.sessions.entry(broker.id).or_insert(Session {
                epoch: broker.epoch,
                last: now,
            });
            if session.epoch != broker.epoch {
                // Registered again since; its new session starts now.
                *session = Session {
                    epoch: broker.epoch,
                    last: now,
                };
            }
            if now.saturating_duration_since(session.last) >= timeout {
                expired.push((broker.id, broker.epoch));
            }
        }
        expired
    }
}
