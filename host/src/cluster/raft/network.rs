//! The client side of the quorum RPC: openraft's `RaftNetwork` over
//! [`wire`] frames on TCP, and the connection that forwards proposals.
//!
//! One connection per peer and purpose, kept while it works: any failure
//! drops it and the next call connects again, and every call is bounded
//! by a timeout (openraft's per-RPC TTL). A peer that cannot be connected
//! to is reported `Unreachable`, so openraft backs off before retrying.

use std::io;
use std::marker::PhantomData;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use tokio::net::TcpStream;

use super::types::TypeConfig;
use super::wire::{self, Envelope, Reply, Request};
use crate::cluster::quorum::{NodeId, StateMachine};

/// Why a call has no reply.
#[derive(Debug)]
pub enum CallError {
    /// No connection: the request was not sent.
    Connect(io::Error),
    /// The request may have been sent; the reply did not come.
    Lost(io::Error),
    /// The peer at the address is another node.
    WrongNode(NodeId),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(error) => write!(f, "connect: {error}"),
            CallError::Lost(error) => write!(f, "no reply: {error}"),
            CallError::WrongNode(node) => write!(f, "the peer there is node {node}"),
        }
    }
}

impl std::error::Error for CallError {}

/// A request/reply connection to one peer, reconnected as needed.
pub struct Connection {
    target: NodeId,
    addr: String,
    stream: Option<TcpStream>,
}

impl Connection {
    pub fn new(target: NodeId, addr: String) -> Self {
        Self {
            target,
            addr,
            stream: None,
        }
    }

    /// The kept stream if it is still open (a peer that restarted closed
    /// it), else a new one.
    async fn stream(&mut self, timeout: Duration) -> Result<&mut TcpStream, CallError> {
        if let Some(stream) = &self.stream {
            let mut probe = [0u8; 1];
            let open = matches!(stream.try_read(&mut probe), Err(error) if error.kind() == io::ErrorKind::WouldBlock);
            if !open {
                self.stream = None;
            }
        }
        if self.stream.is_none() {
            let connected = tokio::time::timeout(timeout, TcpStream::connect(&self.addr)).await;
            let stream = match connected {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => return Err(CallError::Connect(error)),
                Err(_) => return Err(CallError::Connect(io::ErrorKind::TimedOut.into())),
            };
            stream.set_nodelay(true).map_err(CallError::Connect)?;
            self.stream = Some(stream);
        }
        self.stream
            .as_mut()
            .ok_or_else(|| CallError::Connect(io::ErrorKind::NotConnected.into()))
    }

    /// Sends `request` and waits for its reply, within `timeout` in all.
    pub async fn call<S: StateMachine>(
        &mut self,
        request: Request<S>,
        timeout: Duration,
    ) -> Result<Reply<S>, CallError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let to = self.target;
        let stream = self.stream(timeout).await?;
        let exchange = async {
            wire::write_frame(stream, &Envelope { to, request }).await?;
            wire::read_frame::<_, Reply<S>>(stream)
                .await?
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))
        };
        let reply = match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => return Err(self.fail(CallError::Lost(error))),
            Err(_) => return Err(self.fail(CallError::Lost(io::ErrorKind::TimedOut.into()))),
        };
        match reply {
            Reply::WrongNode(node) => Err(self.fail(CallError::WrongNode(node))),
            reply => Ok(reply),
        }
    }

    fn fail(&mut self, error: CallError) -> CallError {
        self.stream = None;
        error
    }
}

/// Makes openraft's per-peer clients.
pub struct NetworkFactory<S> {
    /// How long to wait before retrying an unreachable peer.
    pub backoff: Duration,
    pub _state: PhantomData<fn() -> S>,
}

impl<S: StateMachine> RaftNetworkFactory<TypeConfig<S>> for NetworkFactory<S> {
    type Network = Network<S>;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Self::Network {
        Network {
            connection: Connection::new(target, node.addr.clone()),
            backoff: self.backoff,
            _state: PhantomData,
        }
    }
}

/// openraft's client for one peer.
pub struct Network<S> {
    connection: Connection,
    backoff: Duration,
    _state: PhantomData<fn() -> S>,
}

type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl<S: StateMachine> Network<S> {
    async fn call<E: std::error::Error>(
        &mut self,
        request: Request<S>,
        option: &RPCOption,
    ) -> Result<Reply<S>, RpcError<E>> {
        let target = self.connection.target;
        self.connection
            .call(request, option.hard_ttl())
            .await
            .map_err(|error| match error {
                CallError::Lost(error) => RPCError::Network(NetworkError::new(&error)),
                CallError::Connect(_) => RPCError::Unreachable(Unreachable::new(&error)),
                CallError::WrongNode(_) => {
                    tracing::warn!(target, %error, "quorum peer address answers as another node");
                    RPCError::Unreachable(Unreachable::new(&error))
                }
            })
    }
}

fn unexpected<E: std::error::Error>() -> RpcError<E> {
    let error = io::Error::new(
        io::ErrorKind::InvalidData,
        "reply does not match the request",
    );
    RPCError::Network(NetworkError::new(&error))
}

fn remote<T, E: std::error::Error>(
    target: NodeId,
    reply: Result<T, RaftError<NodeId, E>>,
) -> Result<T, RpcError<E>> {
    reply.map_err(|error| RPCError::RemoteError(RemoteError::new(target, error)))
}

impl<S: StateMachine> RaftNetwork<TypeConfig<S>> for Network<S> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig<S>>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        match self.call(Request::Append(rpc), &option).await? {
            Reply::Append(reply) => remote(self.connection.target, reply),
            _ => Err(unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig<S>>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        match self.call(Request::Snapshot(rpc), &option).await? {
            Reply::Snapshot(reply) => remote(self.connection.target, reply),
            _ => Err(unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        match self.call(Request::Vote(rpc), &option).await? {
            Reply::Vote(reply) => remote(self.connection.target, reply),
            _ => Err(unexpected()),
        }
    }

    fn backoff(&self) -> openraft::network::Backoff {
        openraft::network::Backoff::new(std::iter::repeat(self.backoff))
    }
}
