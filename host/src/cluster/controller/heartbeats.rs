//! Broker sessions: when each broker (of which epoch) last heartbeated.
//!
//! Not replicated, on purpose (Kafka's BrokerHeartbeatManager): heartbeats
//! arrive every `broker.heartbeat.interval.ms` from every broker, far too
//! often for the log, and only the active controller acts on them. A
//! controller that becomes active knows no session yet and starts each
//! broker's at the first time it looks, so no broker is fenced for the
//! silence before the failover.
//!
//! A session also keeps the metadata offset its broker last reported
//! applied, and a broker in controlled shutdown the offset at which it
//! began: it may stop once every active broker has applied that far
//! (Kafka's `lowestActiveOffset`), so the new leaders know they lead
//! before the old one goes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::cluster::image::MetadataImage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    epoch: i64,
    last: Instant,
    /// The last metadata offset the broker reported applied; -1 for none.
    applied: i64,
}

impl Session {
    fn new(epoch: i64, last: Instant) -> Self {
        Self {
            epoch,
            last,
            applied: -1,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Heartbeats {
    sessions: HashMap<i32, Session>,
    /// Brokers in controlled shutdown: (epoch, the metadata offset by
    /// which the change that moved their leaderships was applied).
    shutdowns: HashMap<i32, (i64, i64)>,
}

impl Heartbeats {
    pub fn new() -> Self {
        Self::default()
    }

    /// A heartbeat (or a registration) of `broker` at `epoch`.
    pub fn touch(&mut self, broker: i32, epoch: i64, now: Instant) {
        match self.sessions.get_mut(&broker) {
            Some(session) if session.epoch == epoch => session.last = now,
            _ => {
                self.sessions.insert(broker, Session::new(epoch, now));
            }
        }
    }

    /// `broker` at `epoch` reported having applied the metadata log up
    /// to `offset` (a heartbeat's `current_metadata_offset`).
    pub fn applied(&mut self, broker: i32, epoch: i64, offset: i64) {
        if let Some(session) = self.sessions.get_mut(&broker) {
            if session.epoch == epoch {
                session.applied = session.applied.max(offset);
            }
        }
    }

    /// The metadata offset by which `broker` at `epoch` had entered
    /// controlled shutdown: `now_applied` (the image's offset) the first
    /// time it is asked for that epoch, as the change is applied by then.
    pub fn shutdown_offset(&mut self, broker: i32, epoch: i64, now_applied: i64) -> i64 {
        let entry = self.shutdowns.entry(broker).or_insert((epoch, now_applied));
        if entry.0 != epoch {
            *entry = (epoch, now_applied);
        }
        entry.1
    }

    /// Kafka's `lowestActiveOffset`: the least metadata offset reported
    /// by the active brokers of `image` other than `except` (-1 when one
    /// has reported none in its current session; `i64::MAX` with none).
    pub fn lowest_active_offset(&self, image: &MetadataImage, except: i32) -> i64 {
        image
            .cluster()
            .brokers()
            .filter(|b| b.id != except && b.is_active())
            .map(|b| {
                self.sessions
                    .get(&b.id)
                    .filter(|s| s.epoch == b.epoch)
                    .map_or(-1, |s| s.applied)
            })
            .min()
            .unwrap_or(i64::MAX)
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
        self.shutdowns.remove(&broker);
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
            let session = self
                .sessions
                .entry(broker.id)
                .or_insert(Session::new(broker.epoch, now));
            if session.epoch != broker.epoch {
                // Registered again since; its new session starts now.
                *session = Session::new(broker.epoch, now);
            }
            if now.saturating_duration_since(session.last) >= timeout {
                expired.push((broker.id, broker.epoch));
            }
        }
        expired
    }
}
