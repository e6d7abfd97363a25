//! A member of a classic group (Kafka's `MemberMetadata`): who it is, the
//! protocols it supports, its assignment, its timeouts, and the JoinGroup
//! or SyncGroup call waiting for the rebalance to answer it.
//!
//! A waiting call is a `oneshot` sender: the host import awaits the
//! receiver, so only that guest call is suspended and the coordinator
//! completes it from whatever thread finishes the rebalance.

use std::time::Instant;

use tokio::sync::oneshot;

use super::{JoinResult, SyncResult};

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Vec<u8>)>,
    pub assignment: Vec<u8>,
    pub awaiting_join: Option<oneshot::Sender<JoinResult>>,
    pub awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    /// Joined but not yet through a completed rebalance: its expiry is the
    /// new-member join timeout, and it expires even while awaiting join.
    pub is_new: bool,
    /// When the session expires unless a heartbeat (or equivalent) comes.
    pub deadline: Instant,
    /// The earliest expiry timer outstanding for this member, if any.
    pub armed: Option<Instant>,
}

impl Member {
    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    pub fn is_awaiting_sync(&self) -> bool {
        self.awaiting_sync.is_some()
    }

    pub fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }

    /// Same protocols with the same metadata, in the same order.
    pub fn matches(&self, protocols: &[(String, Vec<u8>)]) -> bool {
        self.protocols == protocols
    }

    /// The member's metadata for `protocol` (empty if it has none).
    pub fn metadata(&self, protocol: &str) -> &[u8] {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.as_slice())
            .unwrap_or_default()
    }

    /// The member's most preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| candidates.contains(name))
    }

    /// Kafka's `hasSatisfiedHeartbeat` at expiry time: a member that has
    /// been through a rebalance and is waiting in JoinGroup or SyncGroup is
    /// alive by definition; any other member must have heartbeated.
    pub fn exempt_from_expiry(&self) -> bool {
        !self.is_new && (self.is_awaiting_join() || self.is_awaiting_sync())
    }

    /// Answers a waiting JoinGroup, if any. Returns whether one waited.
    pub fn complete_join(&mut self, result: JoinResult) -> bool {
        answer(&mut self.awaiting_join, result)
    }

    /// Answers a waiting SyncGroup, if any. Returns whether one waited.
    pub fn complete_sync(&mut self, result: SyncResult) -> bool {
        answer(&mut self.awaiting_sync, result)
    }
}

/// The topics of a consumer-protocol subscription (`ConsumerProtocolSubscription`):
/// every version starts with an int16 version and the topic array, so the
/// coordinator reads that prefix only, as Kafka does. None if the bytes do
/// not parse.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut cursor = metadata;
    let _version = take::<2>(&mut cursor)?;
    let count = i32::from_be_bytes(take::<4>(&mut cursor)?);
    if count < 0 {
        return Some(Vec::new());
    }
    let mut topics = Vec::new();
    for _ in 0..count {
        let len = i16::from_be_bytes(take::<2>(&mut cursor)?);
        let len = usize::try_from(len).ok()?;
        if cursor.len() < len {
            return None;
        }
        let (name, rest) = cursor.split_at(len);
        topics.push(String::from_utf8(name.to_vec()).ok()?);
        cursor = rest;
    }
    Some(topics)
}

fn take<const N: usize>(cursor: &mut &[u8]) -> Option<[u8; N]> {
    if cursor.len() < N {
        return None;
    }
    let (head, rest) = cursor.split_at(N);
    *cursor = rest;
    head.try_into().ok()
}

/// Answers the call waiting in `slot`, if any; whether one waited. The
/// caller may be gone (connection closed); nothing to do then.
fn answer<T>(slot: &mut Option<oneshot::Sender<T>>, result: T) -> bool {
    match slot.take() {
        Some(sender) => {
            let _ = sender.send(result);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn subscription(topics: &[&str]) -> Vec<u8> {
        let mut bytes = vec![0, 1];
        bytes.extend((topics.len() as i32).to_be_bytes());
        for topic in topics {
            bytes.extend((topic.len() as i16).to_be_bytes());
            bytes.extend(topic.as_bytes());
        }
        bytes.extend((-1i32).to_be_bytes()); // null user data
        bytes
    }

    #[test]
    fn reads_subscribed_topics() {
        assert_eq!(
            subscription_topics(&subscription(&["a", "bc"])),
            Some(vec!["a".to_string(), "bc".to_string()])
        );
        assert_eq!(subscription_topics(&[0, 1, 0, 0]), None);
        assert_eq!(subscription_topics(&[0, 1, 0, 0, 0, 1, 0, 5, b'a']), None);
        assert_eq!(subscription_topics(&[]), None);
    }
}
