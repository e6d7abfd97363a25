//! A broker on the metadata quorum: what `gregor serve` starts when
//! `process.roles` is set (and nothing of it when it is not).
//!
//! In order, each step bounded in time so a misconfigured node exits with
//! a message instead of hanging:
//! 1. the quorum node, its RPC bound on this node's voter address and its
//!    log under `<first log dir>/__cluster_metadata`;
//! 2. a leader (within `initial.broker.registration.timeout.ms`, Kafka's
//!    name for how long a broker may take to join);
//! 3. the cluster id: the first node to find none in the image proposes
//!    its own (from its meta.properties); every node then takes the
//!    image's, writes it to a fresh meta.properties, and refuses to start
//!    when its existing one names another cluster (Kafka's
//!    INCONSISTENT_CLUSTER_ID at startup);
//! 4. the metadata seam on the image ([`BrokerMetadata`]), the stores on
//!    the log (`broker_metadata::stores`), the reconciler of local topics
//!    and logs;
//! 5. on a controller, the active controller seam the controller APIs
//!    call ([`ActiveController`]);
//! 6. once the listeners are bound: a controller registers its
//!    controller listeners (so brokers find the active one) and runs the
//!    fencing clock; a broker registers and heartbeats over the wire
//!    ([`membership`]) and takes its producer ids from the blocks it asks
//!    the active controller for (AllocateProducerIds); a broker leads its
//!    partitions' replication ([`super::replication`]: follower state, the
//!    ISR's high watermark, acks=all, AlterPartition for ISR changes) and
//!    coordinates the groups of the partitions of `__consumer_offsets` it
//!    leads ([`coordinators`]).

use std::path::Path;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::cluster::broker_metadata::stores::StoreFollower;
use crate::cluster::broker_metadata::{BrokerMetadata, ImageLeadership};
use crate::cluster::command::{BrokerRegistrationRecord, Command, Endpoint, Uuid};
use crate::cluster::config::ClusterConfig;
use crate::cluster::controller::active::{ActiveController, ControllerSettings, QuorumStatus};
use crate::cluster::coordinators::{self, IsrWait};
use crate::cluster::image::MetadataImage;
use crate::cluster::membership::forward::ControllerForwarder;
use crate::cluster::membership::producer_ids::ControllerBlocks;
use crate::cluster::membership::wire::ControllerChannel;
use crate::cluster::membership::{
    self, ControlledShutdown, InitialCatchUp, Member, MembershipError,
};
use crate::cluster::quorum::Quorum;
use crate::cluster::raft::{QuorumConfig, RaftQuorum, Voter};
use crate::cluster::reconciler;
use crate::cluster::replication::alter;
use crate::cluster::replication::follower;
use crate::cluster::replication::image_source::ImagePartitions;
use crate::cluster::replication::leader::{self, LeaderReplication};
use crate::cluster::replication::leader_channel::InterBroker;
use crate::cluster::txn_markers::MarkerChannels;
use crate::config::BrokerConfig;
use crate::security::sasl_client::{self, SaslCredentials};
use crate::security::settings;
use crate::services::{AdvertisedListener, Services};

/// Kafka's `initial.broker.registration.timeout.ms`.
pub const REGISTRATION_TIMEOUT_MS: &str = "initial.broker.registration.timeout.ms";
const DEFAULT_REGISTRATION_TIMEOUT_MS: u64 = 60_000;

/// The quorum's directory under the first log dir (Kafka's metadata log
/// partition name).
pub const METADATA_DIR: &str = "__cluster_metadata";

pub struct ClusterNode {
    pub config: ClusterConfig,
    pub quorum: Arc<RaftQuorum<MetadataImage>>,
    pub cluster_id: String,
    /// The active controller seam, on a node with the controller role
    /// (the controller APIs call it).
    pub active: Option<Arc<ActiveController>>,
    timeout: Duration,
    /// The broker's controlled shutdown, asked for by [`Self::controlled_shutdown`].
    shutdown: ControlledShutdown,
    /// Done once the broker has applied the metadata log up to its own
    /// registration ([`Self::catch_up`]).
    catch_up: InitialCatchUp,
    /// Brings the stores to the image once caught up.
    stores: Arc<StoreFollower>,
    /// On a broker, where its replica fetchers and transaction markers
    /// connect, and its login there (resolved before anything starts).
    inter_broker: Option<InterBroker>,
}

impl ClusterNode {
    /// Steps 1 to 4.
    pub async fn start(
        broker_config: &BrokerConfig,
        config: ClusterConfig,
        services: &Arc<Services>,
    ) -> Result<Self> {
        let timeout =
            broker_config.millis(REGISTRATION_TIMEOUT_MS, DEFAULT_REGISTRATION_TIMEOUT_MS);
        let log_dir = broker_config.log_dir();
        let node_id = config.node_id;
        let inter_broker = config
            .inter_broker_listener_name
            .clone()
            .map(|listener| inter_broker(broker_config, listener))
            .transpose()?;
        let voters: Vec<Voter> = config
            .voters
            .iter()
            .map(|v| Voter {
                id: u64::try_from(v.id).unwrap_or_default(),
                addr: format!("{}:{}", v.host, v.port),
            })
            .collect();
        let own = config
            .own_voter()
            .map(|v| format!("{}:{}", v.host, v.port))
            .unwrap_or_default();
        let mut quorum_config = QuorumConfig::new(
            u64::try_from(node_id).context("node.id must not be negative")?,
            voters,
            log_dir.join(METADATA_DIR),
        );
        if config.own_voter().is_none() {
            quorum_config.learner_addr = Some(learner_addr(broker_config, &config)?);
        }
        let quorum = RaftQuorum::<MetadataImage>::start(quorum_config)
            .await
            .with_context(|| {
                format!(
                    "starting the metadata quorum node {node_id} on {own} (is another node with \
                     node.id={node_id} running, or the address taken?)"
                )
            })?;
        let quorum = Arc::new(quorum);
        let leader = membership::await_leader(quorum.as_ref(), timeout).await?;
        info!(node = node_id, leader, "metadata quorum has a leader");
        let cluster_id =
            agree_on_cluster_id(quorum.as_ref(), &log_dir, node_id, services, timeout).await?;
        let dyn_quorum: Arc<dyn Quorum<MetadataImage>> = quorum.clone();
        services.join_cluster(
            Arc::new(BrokerMetadata::new(
                Arc::clone(&dyn_quorum),
                node_id,
                cluster_id.clone(),
                Arc::clone(&services.topics),
                tokio::runtime::Handle::current(),
            )),
            Arc::new(ImageLeadership {
                quorum: Arc::clone(&dyn_quorum),
                node_id,
            }),
        )?;
        let stores =
            crate::cluster::broker_metadata::stores::attach(dyn_quorum.clone(), node_id, services)
                .await?;
        let active = if config.roles.is_controller() {
            let settings = ControllerSettings {
                node_id,
                listeners: config.controller_listener_names.clone(),
                session_timeout: config.session_timeout,
                unclean_default: broker_config.get("unclean.leader.election.enable")
                    == Some("true"),
            };
            let status = status_source(Arc::clone(&quorum));
            let active = ActiveController::new(Arc::clone(&dyn_quorum), settings, status);
            Some(Arc::new(active))
        } else {
            None
        };
        Ok(Self {
            config,
            quorum,
            cluster_id,
            active,
            timeout,
            shutdown: ControlledShutdown::default(),
            catch_up: InitialCatchUp::default(),
            stores,
            inter_broker,
        })
    }

    /// The reconciler and step 5; `fatal` hears of a duplicate node.id
    /// found later.
    pub async fn run(
        &self,
        broker_config: &BrokerConfig,
        services: &Arc<Services>,
        advertised: &[AdvertisedListener],
        stopped: watch::Receiver<bool>,
    ) -> Result<mpsc::Receiver<MembershipError>> {
        let quorum: Arc<dyn Quorum<MetadataImage>> = self.quorum.clone();
        let groups = Arc::clone(&services.groups);
        let record = registration(broker_config, &self.config, advertised)?;
        tokio::spawn(reconciler::run(
            Arc::clone(&quorum),
            self.config.node_id,
            record.incarnation_id,
            Arc::clone(&services.topics),
            Arc::new(move |name: &str| groups.on_topic_deleted(name)),
            stopped.clone(),
        ));
        if let Some(active) = &self.active {
            let controllers = &self.config.controller_listener_names;
            let endpoints =
                endpoints(broker_config, advertised, |name| controllers.contains(name))?;
            tokio::spawn(register_controller(
                Arc::clone(&quorum),
                self.config.node_id,
                endpoints,
                stopped.clone(),
            ));
            // Several rounds per session timeout, so a silent broker is
            // fenced soon after its session expires.
            let every = (self.config.session_timeout / 8).max(Duration::from_millis(50));
            tokio::spawn(Arc::clone(active).run_fencing(every, stopped.clone()));
        }
        let (fatal, fatal_rx) = mpsc::channel(1);
        if self.config.roles.is_broker() {
            let epoch = Arc::new(AtomicI64::new(-1));
            self.lead_replication(broker_config, services, &epoch, &stopped)?;
            let elected: Vec<Box<dyn coordinators::Elected>> = vec![
                Box::new(coordinators::Groups(Arc::clone(&services.groups))),
                Box::new(coordinators::Transactions {
                    store: Arc::clone(&services.transactions),
                    effects: Arc::clone(services) as _,
                }),
            ];
            tokio::spawn(coordinators::run(
                Arc::clone(&quorum),
                self.config.node_id,
                record.incarnation_id,
                elected,
                stopped.clone(),
            ));
            let listeners = &self.config.controller_listener_names;
            let blocks_channel = ControllerChannel::new(
                Arc::clone(&quorum),
                listeners.clone(),
                controller_logins(broker_config, listeners)?,
                self.config.node_id,
            );
            services
                .producer_ids
                .use_blocks_from(Arc::new(ControllerBlocks::new(
                    blocks_channel,
                    self.config.node_id,
                    Arc::clone(&epoch),
                )?));
            self.follow_replication(broker_config, services, &record, &epoch, &stopped);
            let member = Member {
                record,
                cluster_id: self.cluster_id.clone(),
                interval: self.config.heartbeat_interval,
                registration_timeout: self.timeout,
                epoch,
                shutdown: self.shutdown.clone(),
                catch_up: self.catch_up.clone(),
            };
            let channel = ControllerChannel::new(
                Arc::clone(&quorum),
                listeners.clone(),
                controller_logins(broker_config, listeners)?,
                self.config.node_id,
            );
            tokio::spawn(membership::run(quorum, channel, member, fatal, stopped));
        } else {
            // A controller alone has no membership: nothing is fatal, but
            // the channel stays open until shutdown.
            let mut stopped = stopped;
            tokio::spawn(async move {
                let _open = fatal;
                let _ = stopped.changed().await;
            });
        }
        Ok(fatal_rx)
    }

    /// The leader side of replication on this broker: its state on the
    /// image, the ISR-shrink clock, and the AlterPartition sender on a
    /// controller channel of its own.
    fn lead_replication(
        &self,
        broker_config: &BrokerConfig,
        services: &Arc<Services>,
        broker_epoch: &Arc<AtomicI64>,
        stopped: &watch::Receiver<bool>,
    ) -> Result<()> {
        let quorum: Arc<dyn Quorum<MetadataImage>> = self.quorum.clone();
        let lag_max = broker_config.millis(
            "replica.lag.time.max.ms",
            u64::try_from(leader::DEFAULT_LAG_TIME_MAX.as_millis()).unwrap_or(30_000),
        );
        let (alter, changes) = mpsc::unbounded_channel();
        let source = Arc::new(ImagePartitions {
            quorum: Arc::clone(&quorum),
            topics: Arc::clone(&services.topics),
        });
        let replication = Arc::new(LeaderReplication::new(
            self.config.node_id,
            source,
            Arc::clone(&services.logs),
            services.replica.purgatory(),
            lag_max,
            alter,
        ));
        services
            .replica
            .set_replication(Arc::clone(&replication) as _);
        services.groups.wait_for_replication(Arc::new(IsrWait::new(
            broker_config,
            Arc::clone(&replication),
        )?));
        services
            .transactions
            .wait_for_replication(Arc::new(IsrWait::transaction_state(
                broker_config,
                Arc::clone(&replication),
            )))?;
        tokio::spawn(Arc::clone(&replication).run(stopped.clone()));
        let listeners = &self.config.controller_listener_names;
        let channel = ControllerChannel::new(
            quorum,
            listeners.clone(),
            controller_logins(broker_config, listeners)?,
            self.config.node_id,
        );
        tokio::spawn(alter::run(
            replication,
            channel,
            self.config.node_id,
            Arc::clone(broker_epoch),
            changes,
            stopped.clone(),
        ));
        Ok(())
    }

    /// The follower side of replication: leader epochs taken on as the
    /// image names this broker leader, replica fetchers for the
    /// partitions it follows, and the epoch lookup the leader side answers
    /// followers' diverging epochs with.
    fn follow_replication(
        &self,
        broker_config: &BrokerConfig,
        services: &Arc<Services>,
        record: &BrokerRegistrationRecord,
        broker_epoch: &Arc<AtomicI64>,
        stopped: &watch::Receiver<bool>,
    ) {
        services
            .replica
            .set_epoch_ends(Arc::new(follower::LogEpochs(Arc::clone(&services.logs))));
        let Some(inter_broker) = self.inter_broker.clone() else {
            return;
        };
        let markers = MarkerChannels::new(
            self.quorum.clone(),
            self.config.node_id,
            inter_broker.clone(),
            follower::settings(broker_config).socket_timeout,
            tokio::runtime::Handle::current(),
        );
        if let Err(error) = services.route_markers(Arc::new(markers)) {
            tracing::warn!("transaction markers: {error:#}");
        }
        let replication = follower::Replication {
            quorum: self.quorum.clone(),
            node_id: self.config.node_id,
            incarnation: record.incarnation_id,
            services: Arc::clone(services),
            inter_broker,
            broker_epoch: Arc::clone(broker_epoch),
            settings: follower::settings(broker_config),
            high_watermarks: Arc::default(),
        };
        tokio::spawn(replication.run(stopped.clone()));
    }

    /// On a node with the broker role, the forwarder of the controller
    /// APIs its broker listeners serve: its own channel to the active
    /// controller, with the broker's login there.
    pub fn forwarder(&self, broker_config: &BrokerConfig) -> Result<Option<ControllerForwarder>> {
        if !self.config.roles.is_broker() {
            return Ok(None);
        }
        let listeners = &self.config.controller_listener_names;
        let quorum: Arc<dyn Quorum<MetadataImage>> = self.quorum.clone();
        let channel = ControllerChannel::new(
            quorum,
            listeners.clone(),
            controller_logins(broker_config, listeners)?,
            self.config.node_id,
        );
        Ok(Some(ControllerForwarder::new(
            channel,
            tokio::runtime::Handle::current(),
        )))
    }

    /// The listeners that serve the controller APIs: this node's
    /// controller listeners if it has the controller role, else none.
    /// Before the client listeners open, as Kafka's broker waits for its
    /// initial catch-up: the broker has applied the metadata log up to its
    /// registration and its stores (configs, ACLs, users, quotas) hold
    /// the image, so a client is never served what the broker had before
    /// it restarted. Bounded by the registration timeout; past it the
    /// broker serves anyway (logged). A controller alone has nothing to
    /// catch up.
    pub async fn catch_up(&self) {
        if self.config.roles.is_broker() && !self.catch_up.wait(self.timeout).await {
            warn!(
                timeout_ms = self.timeout.as_millis() as u64,
                "not caught up with the metadata log in time: serving clients anyway"
            );
        }
        let stores = Arc::clone(&self.stores);
        let _ = tokio::task::spawn_blocking(move || stores.sync()).await;
    }

    pub fn controller_listeners(&self) -> Vec<String> {
        if self.config.roles.is_controller() {
            self.config.controller_listener_names.clone()
        } else {
            Vec::new()
        }
    }

    /// Before a broker stops (SIGTERM): Kafka's controlled shutdown. The
    /// controller moves this broker's leaderships to other in-sync
    /// replicas while it still serves (clients and followers follow them),
    /// and allows the shutdown once it leads nothing; after
    /// `controlled.shutdown.timeout.ms` the broker stops anyway.
    pub async fn controlled_shutdown(&self) {
        let Some(timeout) = self.config.controlled_shutdown else {
            return;
        };
        if !self.config.roles.is_broker() {
            return;
        }
        info!(
            node = self.config.node_id,
            "controlled shutdown: asking the controller to move this broker's leaderships"
        );
        if self.shutdown.request(timeout).await {
            info!(
                node = self.config.node_id,
                "controlled shutdown: this broker leads nothing now"
            );
        } else {
            tracing::warn!(
                node = self.config.node_id,
                "controlled shutdown not allowed within {} ms: stopping anyway",
                timeout.as_millis()
            );
        }
    }

    pub async fn shutdown(&self) {
        self.quorum.shutdown().await;
    }
}

/// Where a broker-only node's quorum RPC listens (it follows the log as a
/// learner): the host of its inter-broker listener, any free port.
fn learner_addr(broker_config: &BrokerConfig, config: &ClusterConfig) -> Result<String> {
    let name = config.inter_broker_listener_name.as_deref().unwrap_or("");
    let listeners = broker_config.listeners()?;
    let host = listeners
        .iter()
        .find(|listener| listener.name == name)
        .or_else(|| listeners.first())
        .map(|listener| listener.host.clone())
        .unwrap_or_default();
    Ok(if host.contains(':') {
        format!("[{host}]:0")
    } else {
        format!("{host}:0")
    })
}

/// This broker's registration: a fresh incarnation with its advertised
/// listeners, less the controller ones.
fn registration(
    broker_config: &BrokerConfig,
    config: &ClusterConfig,
    advertised: &[AdvertisedListener],
) -> Result<BrokerRegistrationRecord> {
    let controllers = &config.controller_listener_names;
    let listeners = endpoints(broker_config, advertised, |name| {
        !controllers.contains(name)
    })?;
    Ok(BrokerRegistrationRecord {
        broker_id: config.node_id,
        incarnation_id: Uuid(u128::from_be_bytes(crate::uuid::random_bytes())),
        listeners,
        rack: broker_config.get("broker.rack").map(str::to_string),
        features: Default::default(),
    })
}

/// The quorum's status from openraft's metrics, for DescribeQuorum.
fn status_source(
    quorum: Arc<RaftQuorum<MetadataImage>>,
) -> crate::cluster::controller::active::StatusSource {
    Box::new(move || {
        let metrics = quorum.metrics();
        let replication = metrics.replication.as_ref();
        let voters = metrics
            .membership_config
            .membership()
            .voter_ids()
            .map(|id| {
                let matched = match replication {
                    Some(replication) => {
                        replication.get(&id).copied().flatten().map(|log| log.index)
                    }
                    None => None,
                };
                (id, matched)
            })
            .collect();
        QuorumStatus {
            leader: metrics.current_leader,
            term: metrics.current_term,
            applied: metrics.last_applied.map_or(0, |log| log.index),
            voters,
        }
    })
}

/// The advertised listeners `keep` selects, as others reach them.
fn endpoints(
    broker_config: &BrokerConfig,
    advertised: &[AdvertisedListener],
    keep: impl Fn(&String) -> bool,
) -> Result<Vec<Endpoint>> {
    let mut endpoints = Vec::new();
    for listener in advertised.iter().filter(|l| keep(&l.name)) {
        let protocol = settings::listener_protocol(broker_config, &listener.name)?;
        endpoints.push(Endpoint {
            name: listener.name.clone(),
            host: listener.host.clone(),
            port: listener.port,
            security_protocol: protocol.name().to_string(),
        });
    }
    Ok(endpoints)
}

/// Proposes this controller's registration until it is applied (Kafka's
/// ControllerRegistrationManager).
async fn register_controller(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    controller_id: i32,
    listeners: Vec<Endpoint>,
    stopped: watch::Receiver<bool>,
) {
    let command = Command::RegisterController {
        controller_id,
        listeners,
    };
    while !*stopped.borrow() {
        match quorum.propose(command.clone()).await {
            Ok(Ok(_)) => {
                info!(
                    controller = controller_id,
                    "registered the controller listeners"
                );
                return;
            }
            Ok(Err(refusal)) => tracing::warn!(%refusal, "controller registration refused"),
            Err(error) => tracing::warn!(%error, "controller registration not committed yet"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Step 3: the image's cluster id, proposed from this node's if the image
/// has none yet.
async fn agree_on_cluster_id(
    quorum: &dyn Quorum<MetadataImage>,
    log_dir: &Path,
    node_id: i32,
    services: &Services,
    timeout: Duration,
) -> Result<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let existing = existing_cluster_id(log_dir);
    let ours = existing
        .clone()
        .unwrap_or_else(|| services.cluster_id.clone());
    let agreed = loop {
        if let Some(id) = quorum.image().cluster_id() {
            break id.to_string();
        }
        let proposal = Command::SetClusterId {
            cluster_id: ours.clone(),
        };
        if let Err(error) = quorum.propose(proposal).await {
            tracing::warn!(%error, "proposing the cluster id");
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("the metadata quorum agreed on no cluster id within {timeout:?}");
        }
        if quorum.image().cluster_id().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    if let Some(existing) = existing {
        if existing != agreed {
            bail!(
                "this node's {} says cluster.id={existing}, but the metadata quorum's cluster is \
                 {agreed}: it belongs to another cluster (use a fresh log.dirs to join this one)",
                log_dir.join("meta.properties").display()
            );
        }
    }
    crate::services::write_cluster_id(log_dir, &agreed, node_id)?;
    Ok(agreed)
}

/// The cluster id a meta.properties written before this start holds
/// (Services writes a fresh one on first start: that one is only a
/// proposal).
fn existing_cluster_id(log_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log_dir.join("meta.properties")).ok()?;
    let id = text
        .lines()
        .find_map(|line| line.strip_prefix("cluster.id="))?
        .trim();
    let joined = text
        .lines()
        .any(|line| line.trim() == "cluster.joined=true");
    (joined && !id.is_empty()).then(|| id.to_string())
}

/// The broker's login on each controller listener its
/// `listener.security.protocol.map` says is SASL (checked at start, so a
/// missing mechanism or login is a message, not a broker that never joins).
fn controller_logins(
    config: &BrokerConfig,
    listeners: &[String],
) -> Result<Vec<(String, SaslCredentials)>> {
    let mut logins = Vec::new();
    for name in listeners {
        let protocol = settings::listener_protocol(config, name)?;
        if protocol.name().starts_with("SASL_") {
            let login = sasl_client::controller_credentials(config, name)?;
            logins.push((name.clone(), login));
        }
    }
    Ok(logins)
}

/// The inter-broker listener and, when `listener.security.protocol.map`
/// makes it SASL, the broker's login there (checked at start, as Kafka
/// refuses a SASL inter-broker listener without a usable login, rather
/// than a follower that never fetches). TLS is not supported between
/// brokers yet: a broker alone still serves its clients there, so it
/// starts, warned; its channels to other brokers refuse the listener.
fn inter_broker(config: &BrokerConfig, listener: String) -> Result<InterBroker> {
    let protocol = settings::listener_protocol(config, &listener)?;
    let login = match protocol.name() {
        "PLAINTEXT" => None,
        "SASL_PLAINTEXT" => Some(sasl_client::inter_broker_credentials(config, &listener)?),
        other => {
            warn!(
                listener = %listener,
                protocol = other,
                "brokers replicate over PLAINTEXT or SASL_PLAINTEXT only for now: \
                 this broker cannot fetch from or send markers to other brokers"
            );
            None
        }
    };
    Ok(InterBroker { listener, login })
}
