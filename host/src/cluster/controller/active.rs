//! The active controller as the controller's request APIs reach it (Kafka's
//! QuorumController behind ControllerApis): each call checks that this
//! node leads the metadata quorum (else NOT_CONTROLLER), decides with the
//! pure functions of [`super::brokers`] and [`super::topics`] on the
//! committed image, proposes the command and answers once it is applied.
//!
//! The broker sessions ([`Heartbeats`]) live here, in memory, on the node
//! that is active: a node that becomes active starts every session afresh
//! (as Kafka's), so no broker is fenced for the silence of a failover. The
//! fencing clock ([`ActiveController::run_fencing`]) fences, in one atomic
//! command with the leadership moves, every broker whose session expired,
//! and elects a leader for any offline partition that can have one now
//! (an unclean election enabled since the partition went offline).
//!
//! The request path is synchronous (WIT imports are): a proposal blocks
//! the calling worker with `block_in_place`, as the metadata seam does.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::watch;
use tracing::{info, warn};

use super::brokers::{self, HeartbeatDecision, HeartbeatRequest};
use super::election;
use super::heartbeats::Heartbeats;
use super::topics::{self, AlterPartitionRequest};
use crate::cluster::command::{Applied, BrokerRegistrationRecord, Command, Endpoint, Refusal};
use crate::cluster::image::{MetadataImage, PartitionRegistration};
use crate::cluster::quorum::{Quorum, QuorumError};
use crate::error_code::ErrorCode;
use crate::sync::lock;

/// The quorum as its engine reports it, for DescribeQuorum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumStatus {
    pub leader: Option<u64>,
    /// The Raft term (Kafka's leader epoch).
    pub term: u64,
    /// The last applied index (the high watermark, on the leader).
    pub applied: u64,
    /// Each voter with the last index the leader knows it has.
    pub voters: Vec<(u64, Option<u64>)>,
}

/// Where the status comes from (the Raft engine's metrics).
pub type StatusSource = Box<dyn Fn() -> QuorumStatus + Send + Sync>;

/// Each voter's registered controller listeners (DescribeQuorum's nodes).
pub type ControllerNodes = Vec<(i32, Vec<Endpoint>)>;

/// What AlterPartition answers per partition: the partition as it stands
/// and the refusal, if any.
pub type PartitionAnswer = (Option<Refusal>, Option<PartitionRegistration>);

#[derive(Default)]
struct Sessions {
    heartbeats: Heartbeats,
    /// Whether this node was the active controller when last looked at.
    active: bool,
}

/// What a controller is configured with.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub node_id: i32,
    /// The controller listeners it serves on.
    pub listeners: Vec<String>,
    /// `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `unclean.leader.election.enable` of the broker config.
    pub unclean_default: bool,
}

pub struct ActiveController {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    node_id: i32,
    settings: ControllerSettings,
    status: StatusSource,
    sessions: Mutex<Sessions>,
    runtime: Handle,
}

fn not_controller(node_id: i32) -> Refusal {
    Refusal::new(
        ErrorCode::NotController,
        format!("Node {node_id} is not the active controller."),
    )
}

/// A proposal that got no answer: NOT_CONTROLLER when leadership moved
/// (the sender asks the new controller), else REQUEST_TIMED_OUT.
fn quorum_failed(node_id: i32, error: &QuorumError) -> Refusal {
    match error {
        QuorumError::NoLeader => not_controller(node_id),
        QuorumError::Indeterminate(why) | QuorumError::Stopped(why) => {
            Refusal::new(ErrorCode::RequestTimedOut, why.clone())
        }
    }
}

impl ActiveController {
    pub fn new(
        quorum: Arc<dyn Quorum<MetadataImage>>,
        settings: ControllerSettings,
        status: StatusSource,
    ) -> Self {
        Self {
            node_id: settings.node_id,
            quorum,
            settings,
            status,
            sessions: Mutex::new(Sessions::default()),
            runtime: Handle::current(),
        }
    }

    /// The controller listeners this node serves on.
    pub fn listeners(&self) -> &[String] {
        &self.settings.listeners
    }

    fn is_leader(&self) -> bool {
        u64::try_from(self.node_id).is_ok_and(|id| self.quorum.leader() == Some(id))
    }

    /// Runs `decide` on the sessions if this node is the active
    /// controller; a node that just became active starts them afresh.
    fn with_sessions<T>(&self, decide: impl FnOnce(&mut Heartbeats) -> T) -> Result<T, Refusal> {
        let leading = self.is_leader();
        let mut sessions = lock(&self.sessions);
        if leading && !sessions.active {
            info!(
                node = self.node_id,
                "became the active controller: fresh broker sessions"
            );
            sessions.heartbeats = Heartbeats::new();
        }
        sessions.active = leading;
        if !leading {
            return Err(not_controller(self.node_id));
        }
        Ok(decide(&mut sessions.heartbeats))
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        tokio::task::block_in_place(|| self.runtime.block_on(future))
    }

    fn propose(&self, command: Command) -> Result<Applied, Refusal> {
        match self.block_on(self.quorum.propose(command)) {
            Ok(answer) => answer,
            Err(error) => Err(quorum_failed(self.node_id, &error)),
        }
    }

    /// BrokerRegistration: the broker epoch.
    pub fn register(
        &self,
        cluster_id: &str,
        record: BrokerRegistrationRecord,
    ) -> Result<i64, Refusal> {
        let image = self.quorum.image();
        if image.cluster_id().is_some_and(|id| id != cluster_id) {
            return Err(Refusal::new(
                ErrorCode::InconsistentClusterId,
                format!(
                    "Expected cluster ID {}, but got cluster ID {cluster_id}.",
                    image.cluster_id().unwrap_or_default()
                ),
            ));
        }
        let id = record.broker_id;
        let command = self.with_sessions(|heartbeats| {
            brokers::register(
                &image,
                heartbeats,
                record,
                Instant::now(),
                self.settings.session_timeout,
                self.settings.unclean_default,
            )
        })??;
        let epoch = registered_epoch(&self.propose(command)?).ok_or_else(|| {
            Refusal::new(ErrorCode::UnknownServerError, "registration gave no epoch")
        })?;
        // The session starts with the registration (Kafka's `register`).
        self.with_sessions(|heartbeats| heartbeats.touch(id, epoch, Instant::now()))?;
        Ok(epoch)
    }

    /// BrokerHeartbeat: the broker's state once its change is applied.
    pub fn heartbeat(&self, request: HeartbeatRequest) -> Result<HeartbeatDecision, Refusal> {
        let image = self.quorum.image();
        let mut decision = self.with_sessions(|heartbeats| {
            brokers::heartbeat(
                &image,
                heartbeats,
                request,
                Instant::now(),
                self.settings.unclean_default,
            )
        })??;
        if let Some(command) = decision.command.take() {
            if let Err(refusal) = self.propose(command) {
                // Not applied: the broker stays as the image has it.
                warn!(broker = request.broker_id, %refusal, "heartbeat change refused");
                let current = self.quorum.image();
                let broker = current
                    .cluster()
                    .current(request.broker_id, request.broker_epoch)?;
                decision.is_fenced = broker.fenced;
            } else if !decision.is_fenced {
                info!(broker = request.broker_id, "broker unfenced");
            }
        }
        Ok(decision)
    }

    /// UnregisterBroker.
    pub fn unregister(&self, broker_id: i32) -> Result<(), Refusal> {
        let image = self.quorum.image();
        let command = self.with_sessions(|heartbeats| {
            heartbeats.remove(broker_id);
            brokers::unregister(&image, broker_id, self.settings.unclean_default)
        })??;
        self.propose(command).map(|_| ())
    }

    /// AllocateProducerIds: the first id and the size of the block.
    pub fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, i32), Refusal> {
        self.with_sessions(|_| ())?;
        match self.propose(Command::AllocateProducerIds {
            broker_id,
            broker_epoch,
        })? {
            Applied::ProducerIds { first, size } => Ok((first, size)),
            other => Err(Refusal::new(
                ErrorCode::UnknownServerError,
                format!("unexpected answer {other:?}"),
            )),
        }
    }

    /// AlterPartition: the broker's epoch is checked for the whole
    /// request; each partition is decided on the image as the previous
    /// ones left it. A change that completes a reassignment and moves the
    /// leadership away from the sender is answered NEW_LEADER_ELECTED.
    pub fn alter_partition(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        changes: &[AlterPartitionRequest],
    ) -> Result<Vec<PartitionAnswer>, Refusal> {
        self.with_sessions(|_| ())?;
        self.quorum
            .image()
            .cluster()
            .current(broker_id, broker_epoch)?;
        let mut answers = Vec::with_capacity(changes.len());
        for change in changes {
            let image = self.quorum.image();
            let mut refusal = match topics::alter_partition(&image, change) {
                Ok(None) => None,
                Ok(Some(command)) => self.propose(command).err(),
                Err(refusal) => Some(refusal),
            };
            let state = self
                .quorum
                .image()
                .topic_by_id(change.topic_id)
                .and_then(|topic| topic.partition(change.partition))
                .cloned();
            let handed_over = state.as_ref().is_some_and(|p| p.leader != change.broker_id);
            if refusal.is_none() && handed_over {
                // The change completed a reassignment that moved the
                // leadership: Kafka's NEW_LEADER_ELECTED (v2+), so the
                // sender learns it leads no more.
                refusal = Some(Refusal::new(
                    ErrorCode::NewLeaderElected,
                    "The ISR change completed a reassignment and a new leader was elected.",
                ));
            }
            answers.push((refusal, state));
        }
        Ok(answers)
    }

    /// DescribeQuorum: the status, with each voter's registered
    /// controller listeners; NOT_LEADER_OR_FOLLOWER off the leader.
    pub fn describe_quorum(&self) -> Result<(QuorumStatus, ControllerNodes), Refusal> {
        let status = (self.status)();
        if status.leader != u64::try_from(self.node_id).ok() {
            return Err(Refusal::new(
                ErrorCode::NotLeaderOrFollower,
                format!("Node {} does not lead the metadata quorum.", self.node_id),
            ));
        }
        let image = self.quorum.image();
        let nodes = status
            .voters
            .iter()
            .filter_map(|(id, _)| {
                let id = i32::try_from(*id).ok()?;
                Some((id, image.cluster().controller_endpoints(id)?.to_vec()))
            })
            .collect();
        Ok((status, nodes))
    }

    /// One round of the fencing clock: the command fencing every broker
    /// whose session expired, if this node is active and any did.
    fn expired(&self) -> Option<Command> {
        let image = self.quorum.image();
        self.with_sessions(|heartbeats| {
            brokers::fence_expired(
                &image,
                heartbeats,
                Instant::now(),
                self.settings.session_timeout,
                self.settings.unclean_default,
            )
        })
        .ok()
        .flatten()
    }

    /// One round of offline elections: the command electing a leader for
    /// every offline partition that can have one, if this node is active.
    fn offline_elections(&self) -> Option<Command> {
        self.with_sessions(|_| ()).ok()?;
        let image = self.quorum.image();
        let changes = election::offline_partitions(&image, self.settings.unclean_default);
        (!changes.is_empty())
            .then(|| Command::Atomic(changes.into_iter().map(Command::ChangePartition).collect()))
    }

    /// The fencing clock, every `interval` until `stopped` (Kafka's
    /// periodic `maybeFenceStaleBroker`, and its periodic unclean
    /// election of offline partitions).
    pub async fn run_fencing(
        self: Arc<Self>,
        interval: Duration,
        mut stopped: watch::Receiver<bool>,
    ) {
        let mut ticks = tokio::time::interval(interval);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.changed() => return,
            }
            if let Some(command) = self.expired() {
                let fenced = fenced_ids(&command);
                match self.quorum.propose(command).await {
                    Ok(Ok(_)) => info!(?fenced, "fenced brokers whose session expired"),
                    Ok(Err(refusal)) => {
                        warn!(%refusal, "fencing refused (decided again next round)");
                    }
                    Err(error) => warn!(%error, "fencing not committed"),
                }
            }
            if let Some(command) = self.offline_elections() {
                match self.quorum.propose(command).await {
                    Ok(Ok(_)) => info!("elected leaders of offline partitions"),
                    Ok(Err(refusal)) => warn!(%refusal, "offline election refused (next round)"),
                    Err(error) => warn!(%error, "offline election not committed"),
                }
            }
        }
    }
}

/// The epoch of a registration's answer (alone, or last of the batch that
/// first fences the old incarnation).
fn registered_epoch(applied: &Applied) -> Option<i64> {
    match applied {
        Applied::BrokerRegistered { epoch } => Some(*epoch),
        Applied::Batch(answers) => answers.iter().rev().find_map(registered_epoch),
        _ => None,
    }
}

fn fenced_ids(command: &Command) -> Vec<i32> {
    match command {
        Command::FenceBroker { broker_id, .. } => vec![*broker_id],
        Command::Atomic(commands) => commands.iter().flat_map(fenced_ids).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memory_quorum::MemoryQuorum;
    use crate::cluster::testing::registration;

    /// Node `id` over a memory quorum led by node 1.
    fn controller(
        id: i32,
        timeout: Duration,
    ) -> (Arc<dyn Quorum<MetadataImage>>, Arc<ActiveController>) {
        let quorum: Arc<dyn Quorum<MetadataImage>> = Arc::new(MemoryQuorum::new(1));
        let settings = ControllerSettings {
            node_id: id,
            listeners: vec!["CONTROLLER".to_string()],
            session_timeout: timeout,
            unclean_default: false,
        };
        let status = Box::new(QuorumStatus::default);
        let active = Arc::new(ActiveController::new(Arc::clone(&quorum), settings, status));
        (quorum, active)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_broker_is_fenced_and_a_heartbeat_unfences_it() {
        let (quorum, active) = controller(1, Duration::from_millis(200));
        let epoch = active.register("", registration(2, 21)).unwrap();
        let beat = HeartbeatRequest {
            broker_id: 2,
            broker_epoch: epoch,
            current_metadata_offset: epoch,
            want_fence: false,
            want_shutdown: false,
        };
        let decision = active.heartbeat(beat).unwrap();
        assert!(!decision.is_fenced && decision.is_caught_up);
        assert!(quorum.image().cluster().is_live(2));
        assert_eq!(active.expired(), None);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let fence = active.expired().expect("an expired session");
        assert_eq!(fenced_ids(&fence), vec![2]);
        quorum.propose(fence).await.unwrap().unwrap();
        assert!(!quorum.image().cluster().is_live(2));
        assert!(!active.heartbeat(beat).unwrap().is_fenced);
        assert!(quorum.image().cluster().is_live(2));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_follower_is_not_the_controller() {
        let (_, active) = controller(3, Duration::from_secs(1));
        let refused = active.register("", registration(2, 21)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotController);
        let refused = active.describe_quorum().unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotLeaderOrFollower);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn producer_id_blocks_do_not_overlap() {
        let (_, active) = controller(1, Duration::from_secs(1));
        let two = active.register("", registration(2, 21)).unwrap();
        let three = active.register("", registration(3, 31)).unwrap();
        let (a, size) = active.allocate_producer_ids(2, two).unwrap();
        let (b, _) = active.allocate_producer_ids(3, three).unwrap();
        assert!(b >= a + i64::from(size));
        let stale = active.allocate_producer_ids(2, two - 1).unwrap_err();
        assert_eq!(stale.code, ErrorCode::StaleBrokerEpoch);
    }
}
