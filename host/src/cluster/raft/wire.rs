//! The quorum's internal RPC: one JSON message per length-prefixed frame.
//!
//! A frame is `[length u32 BE][JSON]`; a connection carries requests and
//! their replies in turn. JSON (serde_json, already a dependency) is used
//! because it is self-describing: the commands and state are whatever the
//! state machine's serde derives make them (tagged enums, optional fields),
//! which non-self-describing formats cannot always read back. The metadata
//! traffic is small, so its size does not matter.
//!
//! Every request names the node it is for, so a peer reached at a wrong
//! address (a `controller.quorum.voters` mistake) refuses it instead of
//! joining two clusters.

use std::io;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::types::TypeConfig;
use crate::cluster::quorum::{NodeId, StateMachine};

/// Frames above this are refused (a snapshot chunk is at most
/// [`super::SNAPSHOT_CHUNK_BYTES`] before JSON's expansion of bytes).
const MAX_FRAME: usize = 64 << 20;

/// A request and the node it is meant for.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Envelope<S: StateMachine> {
    pub to: NodeId,
    pub request: Request<S>,
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub enum Request<S: StateMachine> {
    Vote(VoteRequest<NodeId>),
    Append(AppendEntriesRequest<TypeConfig<S>>),
    Snapshot(InstallSnapshotRequest<TypeConfig<S>>),
    /// A command proposed on a follower, for the leader to write.
    Propose(S::Command),
    /// A node that is not a voter asks the leader to replicate to it, as a
    /// learner at `addr`.
    Join {
        id: NodeId,
        addr: String,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub enum Reply<S: StateMachine> {
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Propose(Result<Proposed<S::Response>, Refused>),
    Join(Result<(), Refused>),
    /// The request was for another node: this is the one named.
    WrongNode(NodeId),
}

/// A forwarded proposal, committed and applied on the leader at `index`.
#[derive(Serialize, Deserialize)]
pub struct Proposed<R> {
    pub index: u64,
    pub response: R,
}

/// Why a leader did not take a forwarded proposal.
#[derive(Debug, Serialize, Deserialize)]
pub enum Refused {
    /// Not the leader (any more): the command was not applied.
    NotLeader(Option<NodeId>),
    /// Accepted, but the outcome is unknown.
    Indeterminate(String),
    /// The leader's engine stopped.
    Stopped(String),
}

fn invalid(error: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error.to_string())
}

pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    writer: &mut W,
    message: &T,
) -> io::Result<()> {
    let body = serde_json::to_vec(message).map_err(invalid)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|len| *len as usize <= MAX_FRAME);
    let len =
        len.ok_or_else(|| invalid(format!("quorum frame of {} bytes is too large", body.len())))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    writer.write_all(&frame).await?;
    writer.flush().await
}

/// The next message, or None at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    reader: &mut R,
) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!("quorum frame of {len} bytes is too large")));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map(Some).map_err(invalid)
}
