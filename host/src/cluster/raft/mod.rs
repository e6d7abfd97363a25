//! The [`Quorum`] on openraft: a Raft node with its log and snapshots on
//! disk and its own RPC port.
//!
//! - Engine: `openraft` 0.9 (pinned, `storage-v2`): the log
//!   ([`log_store`], over [`segments`]) and the state machine
//!   ([`state_machine`]) are ours, the protocol is openraft's.
//! - Transport: openraft leaves the network to the application. Its
//!   examples use an HTTP stack; the broker has none and adding one (and
//!   its dependency tree) for four message types is not worth it, so the
//!   RPC is a tiny length-prefixed JSON frame protocol over tokio TCP
//!   ([`wire`], [`network`], [`server`]), on the node's quorum address from
//!   `controller.quorum.voters`. It carries openraft's vote, append and
//!   snapshot-chunk messages and the forwarding of proposals made on a
//!   follower. Every call has a timeout and a failed connection is
//!   re-established on the next call.
//! - Membership: fixed voters from the configuration. The lowest id forms
//!   the cluster when its storage is pristine; everyone else (and every
//!   restart) just starts and follows. Voter changes are not offered (they
//!   are rare and where Raft engines have had their bugs). A node that is
//!   not a voter (a broker-only node, Kafka's observer) follows the log as
//!   an openraft learner: it listens on an address of its own and asks the
//!   leader to add it ([`learner`]), again at every start since its port
//!   may have changed; learners never vote, so this changes no majority.
//! - A voter whose disk is lost comes back empty and is sent a snapshot;
//!   it has forgotten its vote, though, which Raft assumes never happens
//!   (Kafka's KIP-853 adds directory ids for this): replace lost voters
//!   one at a time, with the others up.
//! - Files under the directory given (e.g. `<log.dirs>/__cluster_metadata`):
//!   `log/<first index>.log` segments, `vote.json`, `purged.json`,
//!   `snapshot.bin`.

mod learner;
mod log_store;
mod network;
mod segments;
mod server;
mod state_machine;
mod types;
mod wire;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::RaftError;
use openraft::{BasicNode, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::log_store::LogStore;
use self::network::{CallError, Connection, NetworkFactory};
use self::state_machine::{Shared, StateMachineStore};
use self::types::Raft;
use self::wire::{Refused, Reply, Request};
use crate::cluster::quorum::{Applied, NodeId, Proposal, Quorum, QuorumError, StateMachine};

/// The configuration key of [`QuorumConfig::snapshot_interval_entries`]
/// (Kafka bounds the metadata log by bytes,
/// `metadata.log.max.record.bytes.between.snapshots`; an entry count is
/// what openraft's snapshot policy offers).
pub const SNAPSHOT_INTERVAL_KEY: &str = "metadata.log.max.snapshot.interval.entries";
/// The configuration key of [`QuorumConfig::segment_bytes`] (Kafka's name).
pub const SEGMENT_BYTES_KEY: &str = "metadata.log.segment.bytes";

/// The largest snapshot piece sent in one RPC.
const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;

/// One voter of the quorum: `id@host:port` in `controller.quorum.voters`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voter {
    pub id: NodeId,
    /// The voter's quorum RPC address, `host:port`.
    pub addr: String,
}

/// How to run one node of the quorum.
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// This node (`node.id`); must be one of `voters`.
    pub node_id: NodeId,
    /// Every voter (`controller.quorum.voters`), this node included
    /// unless it is a learner.
    pub voters: Vec<Voter>,
    /// Set on a node that is not a voter: the address (`host:port`, port 0
    /// for any) its quorum RPC binds, so the leader can replicate to it.
    pub learner_addr: Option<String>,
    /// Where the log, vote and snapshot live.
    pub dir: PathBuf,
    /// Leader heartbeats.
    pub heartbeat_interval: Duration,
    /// A follower that hears no leader for a random time in this range
    /// starts an election.
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// How long a proposal may take, forwarding and commit included.
    pub propose_timeout: Duration,
    /// A snapshot is taken every this many committed entries, and the log
    /// before it is purged ([`SNAPSHOT_INTERVAL_KEY`]).
    pub snapshot_interval_entries: u64,
    /// Entries kept after a snapshot, so a follower a little behind catches
    /// up from the log rather than by a snapshot.
    pub entries_kept_after_snapshot: u64,
    /// A new log segment is started past this size ([`SEGMENT_BYTES_KEY`]).
    pub segment_bytes: u64,
}

impl QuorumConfig {
    /// The defaults: KRaft-like timings for a LAN (heartbeat 200 ms,
    /// election after 1-2 s of silence).
    pub fn new(node_id: NodeId, voters: Vec<Voter>, dir: PathBuf) -> Self {
        Self {
            node_id,
            voters,
            learner_addr: None,
            dir,
            heartbeat_interval: Duration::from_millis(200),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            propose_timeout: Duration::from_secs(10),
            snapshot_interval_entries: 20_000,
            entries_kept_after_snapshot: 1_000,
            segment_bytes: 8 << 20,
        }
    }

    /// The voters by id, checked: at least one, no id or address twice,
    /// and this node among them.
    fn members(&self) -> io::Result<BTreeMap<NodeId, BasicNode>> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        let mut members = BTreeMap::new();
        let mut addrs = BTreeSet::new();
        for voter in &self.voters {
            if !addrs.insert(voter.addr.as_str()) {
                return Err(invalid(format!(
                    "controller.quorum.voters: address {} is given twice",
                    voter.addr
                )));
            }
            let node = BasicNode::new(&voter.addr);
            if members.insert(voter.id, node).is_some() {
                return Err(invalid(format!(
                    "controller.quorum.voters: node id {} is given twice",
                    voter.id
                )));
            }
        }
        if members.contains_key(&self.node_id) && self.learner_addr.is_some() {
            return Err(invalid(format!(
                "node.id {} is a voter: it cannot also be a learner",
                self.node_id
            )));
        }
        if !members.contains_key(&self.node_id) && self.learner_addr.is_none() {
            return Err(invalid(format!(
                "node.id {} is not one of controller.quorum.voters ({})",
                self.node_id,
                members
                    .keys()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(members)
    }

    fn raft_config(&self) -> io::Result<openraft::Config> {
        let millis = |duration: Duration| duration.as_millis().try_into().unwrap_or(u64::MAX);
        openraft::Config {
            cluster_name: "gregor-metadata".to_string(),
            heartbeat_interval: millis(self.heartbeat_interval),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            install_snapshot_timeout: millis(self.propose_timeout),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_interval_entries.max(1)),
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            ..Default::default()
        }
        .validate()
        .map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("quorum configuration: {error}"),
            )
        })
    }
}

/// A running quorum node replicating `S`.
pub struct RaftQuorum<S: StateMachine> {
    id: NodeId,
    config: QuorumConfig,
    members: BTreeMap<NodeId, BasicNode>,
    raft: Raft<S>,
    shared: Arc<Shared<S>>,
    metrics: watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>>,
    local_addr: SocketAddr,
    server: JoinHandle<()>,
    /// On a learner: the task asking the leader to add it.
    join: Option<JoinHandle<()>>,
}

impl<S: StateMachine> RaftQuorum<S> {
    /// Starts the node, listening on its own voter address (or its
    /// learner address).
    pub async fn start(config: QuorumConfig) -> io::Result<Self> {
        let members = config.members()?;
        let addr = match &config.learner_addr {
            Some(addr) => addr.clone(),
            None => members
                .get(&config.node_id)
                .map(|node| node.addr.clone())
                .unwrap_or_default(),
        };
        let listener = TcpListener::bind(&addr).await.map_err(|error| {
            io::Error::new(error.kind(), format!("quorum listener {addr}: {error}"))
        })?;
        Self::start_on(config, listener).await
    }

    /// Starts the node on a listener the caller bound (e.g. on another
    /// interface than the advertised voter address, or an ephemeral port).
    ///
    /// A configuration error (duplicate ids, this node not a voter) or
    /// storage that does not check is an error here, before anything runs.
    pub async fn start_on(config: QuorumConfig, listener: TcpListener) -> io::Result<Self> {
        let members = config.members()?;
        let raft_config = Arc::new(config.raft_config()?);
        let dir = config.dir.clone();
        let segment_bytes = config.segment_bytes;
        let (log, state) = types::blocking(move || {
            crate::durable::create_dir(&dir)?;
            Ok((
                LogStore::<S>::open(&dir, segment_bytes)?,
                StateMachineStore::<S>::open(&dir)?,
            ))
        })
        .await?;
        let shared = state.shared();
        let network = NetworkFactory {
            backoff: config.election_timeout_min / 2,
            _state: PhantomData,
        };
        let id = config.node_id;
        let raft = Raft::<S>::new(id, raft_config, network, log, state)
            .await
            .map_err(|fatal| io::Error::other(format!("quorum node {id}: {fatal}")))?;
        let local_addr = listener.local_addr()?;
        let server = server::spawn(listener, id, raft.clone(), config.propose_timeout);
        let metrics = raft.metrics();
        let join = config.learner_addr.as_ref().map(|addr| {
            let advertised = learner::advertised(addr, local_addr);
            tokio::spawn(learner::join::<S>(
                id,
                advertised,
                members.clone(),
                config.heartbeat_interval,
            ))
        });
        let quorum = Self {
            id,
            members,
            raft,
            shared,
            metrics,
            local_addr,
            server,
            join,
            config,
        };
        quorum.form_cluster().await?;
        Ok(quorum)
    }

    /// The lowest voter forms the cluster when its storage is pristine;
    /// anywhere else, or with state on disk, there is nothing to do.
    async fn form_cluster(&self) -> io::Result<()> {
        if self.join.is_some() {
            return Ok(());
        }
        let lowest = self.members.keys().next().copied();
        if lowest != Some(self.id) {
            return Ok(());
        }
        let initialized = self.raft.is_initialized().await.map_err(io::Error::other)?;
        if initialized {
            return Ok(());
        }
        match self.raft.initialize(self.members.clone()).await {
            Ok(()) => {
                tracing::info!(node = self.id, voters = ?self.members.keys(), "metadata quorum formed");
                Ok(())
            }
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => Ok(()),
            Err(error) => Err(io::Error::other(format!(
                "forming the metadata quorum: {error}"
            ))),
        }
    }

    pub fn node_id(&self) -> NodeId {
        self.id
    }

    /// The address the quorum RPC listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// openraft's view of this node (role, term, log, snapshot, purge
    /// point), for DescribeQuorum and tests.
    pub fn metrics(&self) -> openraft::RaftMetrics<NodeId, BasicNode> {
        self.metrics.borrow().clone()
    }

    /// Stops the node: the engine and its RPC server.
    pub async fn shutdown(&self) {
        self.server.abort();
        if let Some(join) = &self.join {
            join.abort();
        }
        if let Err(error) = self.raft.shutdown().await {
            tracing::warn!(node = self.id, %error, "quorum node shutdown");
        }
    }

    async fn propose_command(&self, command: S::Command) -> Result<S::Response, QuorumError> {
        let deadline = Instant::now() + self.config.propose_timeout;
        let retry_pause = self.config.heartbeat_interval;
        loop {
            let leader = self.metrics.borrow().current_leader;
            let attempt = match leader {
                Some(leader) if leader == self.id => {
                    self.write_locally(command.clone(), deadline).await
                }
                Some(leader) => self.forward(leader, command.clone(), deadline).await,
                None => Err(Refused::NotLeader(None)),
            };
            match attempt {
                Ok((index, response)) => {
                    self.await_applied(index, deadline).await;
                    return Ok(response);
                }
                Err(Refused::NotLeader(_)) => {}
                Err(Refused::Indeterminate(why)) => return Err(QuorumError::Indeterminate(why)),
                Err(Refused::Stopped(why)) => return Err(QuorumError::Stopped(why)),
            }
            // No leader, or not the one we knew: give the election (or the
            // news of it) a moment.
            let pause = Instant::now() + retry_pause / 2;
            if pause >= deadline {
                return Err(QuorumError::NoLeader);
            }
            tokio::time::sleep_until(pause).await;
        }
    }

    async fn write_locally(
        &self,
        command: S::Command,
        deadline: Instant,
    ) -> Result<(u64, S::Response), Refused> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        server::write(&self.raft, command, timeout)
            .await
            .map(|proposed| (proposed.index, proposed.response))
    }

    /// Sends `command` to `leader` on a connection of its own: proposals
    /// are rare, and a fresh connection cannot fail on a stale one (which
    /// would leave the outcome unknown).
    async fn forward(
        &self,
        leader: NodeId,
        command: S::Command,
        deadline: Instant,
    ) -> Result<(u64, S::Response), Refused> {
        let Some(node) = self.members.get(&leader) else {
            return Err(Refused::NotLeader(None));
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        let mut connection = Connection::new(leader, node.addr.clone());
        match connection
            .call::<S>(Request::Propose(command), timeout)
            .await
        {
            Ok(Reply::Propose(Ok(proposed))) => Ok((proposed.index, proposed.response)),
            Ok(Reply::Propose(Err(refused))) => Err(refused),
            Ok(_) => Err(Refused::Indeterminate(
                "the leader's reply does not match".into(),
            )),
            // Not sent: try again (the leader may have moved).
            Err(CallError::Connect(_) | CallError::WrongNode(_)) => Err(Refused::NotLeader(None)),
            Err(error @ CallError::Lost(_)) => Err(Refused::Indeterminate(format!(
                "forwarding to node {leader}: {error}"
            ))),
        }
    }

    /// Waits until this node applied `index` too (a follower learns of the
    /// commit with the next heartbeat), up to `deadline`.
    async fn await_applied(&self, index: u64, deadline: Instant) {
        let mut applied = self.shared.watch();
        let caught_up =
            tokio::time::timeout_at(deadline, applied.wait_for(|applied| applied.index >= index))
                .await;
        if caught_up.is_err() {
            tracing::warn!(
                node = self.id,
                index,
                "proposal applied on the leader, not yet here"
            );
        }
    }
}

impl<S: StateMachine> Quorum<S> for RaftQuorum<S> {
    fn propose(&self, command: S::Command) -> Proposal<'_, S::Response> {
        Box::pin(self.propose_command(command))
    }

    fn image(&self) -> Arc<S> {
        self.shared.image()
    }

    fn watch(&self) -> watch::Receiver<Applied> {
        self.shared.watch()
    }

    fn leader(&self) -> Option<NodeId> {
        self.metrics.borrow().current_leader
    }
}

impl<S: StateMachine> Drop for RaftQuorum<S> {
    fn drop(&mut self) {
        self.server.abort();
        if let Some(join) = &self.join {
            join.abort();
        }
    }
}
