//! A node that follows the metadata log without voting (a broker-only
//! node): it asks the leader to add it as an openraft learner at the
//! address its quorum RPC listens on, and from then on the leader
//! replicates the log (or a snapshot) to it like to any follower.
//!
//! The request goes to any voter; a follower answers with the leader it
//! knows, which is asked next. It is repeated until the leader has it,
//! since no leader may be elected yet when the node starts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use openraft::BasicNode;

use super::network::Connection;
use super::wire::{Refused, Reply, Request};
use crate::cluster::quorum::{NodeId, StateMachine};

/// One ask's bound.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The address others reach the learner on: the configured host (loopback
/// for a wildcard) and the port actually bound.
pub fn advertised(configured: &str, bound: SocketAddr) -> String {
    let host = configured
        .rsplit_once(':')
        .map_or(configured, |(host, _)| host);
    let host = match host {
        "" | "0.0.0.0" | "::" | "[::]" => "127.0.0.1",
        other => other,
    };
    format!("{host}:{}", bound.port())
}

/// Asks the voters until the leader added learner `id` at `addr`.
pub async fn join<S: StateMachine>(
    id: NodeId,
    addr: String,
    voters: BTreeMap<NodeId, BasicNode>,
    pause: Duration,
) {
    let mut target = voters.keys().next().copied();
    let mut round = voters.keys().copied().cycle();
    loop {
        let Some(voter) = target.take().or_else(|| round.next()) else {
            return;
        };
        let Some(node) = voters.get(&voter) else {
            continue;
        };
        let mut connection = Connection::new(voter, node.addr.clone());
        let request = Request::<S>::Join {
            id,
            addr: addr.clone(),
        };
        match connection.call::<S>(request, ASK_TIMEOUT).await {
            Ok(Reply::Join(Ok(()))) => {
                tracing::info!(node = id, %addr, leader = voter, "following the metadata quorum as a learner");
                return;
            }
            Ok(Reply::Join(Err(Refused::NotLeader(Some(leader))))) if leader != voter => {
                target = Some(leader);
                continue;
            }
            Ok(Reply::Join(Err(Refused::Stopped(why)))) => {
                tracing::error!(node = id, "the metadata quorum refused this learner: {why}");
                return;
            }
            Ok(Reply::Join(Err(refused))) => {
                tracing::debug!(node = id, voter, ?refused, "learner not added yet");
            }
            Ok(_) => tracing::warn!(node = id, voter, "a voter answered Join with another reply"),
            Err(error) => tracing::debug!(node = id, voter, %error, "learner join not sent"),
        }
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_host_is_advertised_as_loopback_with_the_bound_port() {
        let bound: SocketAddr = "0.0.0.0:41234".parse().unwrap();
        assert_eq!(advertised("0.0.0.0:0", bound), "127.0.0.1:41234");
        assert_eq!(advertised("10.0.0.5:0", bound), "10.0.0.5:41234");
    }
}
