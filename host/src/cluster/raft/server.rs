//! The server side of the quorum RPC: accepts peers on the quorum port and
//! hands their requests to the local Raft node.
//!
//! A connection is served request by request. Forwarded proposals are
//! written here as if proposed locally; their reply says whether the
//! command was applied, refused (not the leader: safe to retry elsewhere)
//! or has an unknown outcome.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::types::Raft;
use super::wire::{self, Envelope, Proposed, Refused, Reply, Request};
use crate::cluster::quorum::{NodeId, StateMachine};

/// Serves `listener` until the returned task is aborted (which also ends
/// every connection it accepted).
pub fn spawn<S: StateMachine>(
    listener: TcpListener,
    id: NodeId,
    raft: Raft<S>,
    propose_timeout: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let raft = raft.clone();
                        connections.spawn(async move {
                            if let Err(error) = serve(stream, id, raft, propose_timeout).await {
                                tracing::debug!(%peer, %error, "quorum connection closed");
                            }
                        });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "quorum listener accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = connections.join_next() => {}
            }
        }
    })
}

async fn serve<S: StateMachine>(
    mut stream: TcpStream,
    id: NodeId,
    raft: Raft<S>,
    propose_timeout: Duration,
) -> std::io::Result<()> {
    while let Some(envelope) = wire::read_frame::<_, Envelope<S>>(&mut stream).await? {
        let reply = if envelope.to != id {
            Reply::WrongNode(id)
        } else {
            handle(&raft, envelope.request, propose_timeout).await
        };
        wire::write_frame(&mut stream, &reply).await?;
    }
    Ok(())
}

async fn handle<S: StateMachine>(
    raft: &Raft<S>,
    request: Request<S>,
    propose_timeout: Duration,
) -> Reply<S> {
    match request {
        Request::Vote(rpc) => Reply::Vote(raft.vote(rpc).await),
        Request::Append(rpc) => Reply::Append(raft.append_entries(rpc).await),
        Request::Snapshot(rpc) => Reply::Snapshot(raft.install_snapshot(rpc).await),
        Request::Propose(command) => Reply::Propose(write(raft, command, propose_timeout).await),
        Request::Join { id, addr } => {
            Reply::Join(add_learner(raft, id, addr, propose_timeout).await)
        }
    }
}

/// Adds (or moves) learner `id` at `addr`, on the leader. A voter is
/// refused: its address is configuration, never changed over the wire.
async fn add_learner<S: StateMachine>(
    raft: &Raft<S>,
    id: NodeId,
    addr: String,
    timeout: Duration,
) -> Result<(), Refused> {
    let membership = raft.metrics().borrow().membership_config.clone();
    if membership.membership().voter_ids().any(|voter| voter == id) {
        return Err(Refused::Stopped(format!(
            "node {id} is a voter of the metadata quorum, not a learner: is node.id={id} \
             configured twice?"
        )));
    }
    let known = membership
        .nodes()
        .any(|(node, at)| *node == id && at.addr == addr);
    if known {
        return Ok(());
    }
    let change = ChangeMembers::SetNodes(BTreeMap::from([(id, BasicNode::new(&addr))]));
    match tokio::time::timeout(timeout, raft.change_membership(change, true)).await {
        Err(_) => Err(Refused::Indeterminate(
            "not committed before the deadline".into(),
        )),
        Ok(Ok(_)) => {
            tracing::info!(learner = id, %addr, "metadata quorum learner added");
            Ok(())
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
            Err(Refused::NotLeader(forward.leader_id))
        }
        Ok(Err(RaftError::APIError(error))) => Err(Refused::Indeterminate(error.to_string())),
        Ok(Err(RaftError::Fatal(fatal))) => Err(Refused::Stopped(fatal.to_string())),
    }
}

/// Writes `command` on this node (the leader) and waits for its response.
pub async fn write<S: StateMachine>(
    raft: &Raft<S>,
    command: S::Command,
    timeout: Duration,
) -> Result<Proposed<S::Response>, Refused> {
    let written = match tokio::time::timeout(timeout, raft.client_write(command)).await {
        Ok(written) => written,
        Err(_) => {
            return Err(Refused::Indeterminate(
                "not committed before the deadline".into(),
            ))
        }
    };
    match written {
        Ok(written) => match written.data {
            Some(response) => Ok(Proposed {
                index: written.log_id.index,
                response,
            }),
            None => Err(Refused::Indeterminate("the entry has no response".into())),
        },
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
            Err(Refused::NotLeader(forward.leader_id))
        }
        Err(RaftError::APIError(error)) => Err(Refused::Indeterminate(error.to_string())),
        Err(RaftError::Fatal(fatal)) => Err(Refused::Stopped(fatal.to_string())),
    }
}
