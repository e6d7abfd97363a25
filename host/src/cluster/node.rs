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
//! 5. once the listeners are bound: registration and heartbeats
//!    ([`membership`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::sync::{mpsc, watch};
use tracing::info;

use crate::cluster::broker_metadata::{BrokerMetadata, ImageLeadership};
use crate::cluster::command::{BrokerRegistrationRecord, Command, Endpoint, Uuid};
use crate::cluster::config::ClusterConfig;
use crate::cluster::image::MetadataImage;
use crate::cluster::membership::{self, MembershipError};
use crate::cluster::quorum::Quorum;
use crate::cluster::raft::{QuorumConfig, RaftQuorum, Voter};
use crate::cluster::reconciler;
use crate::config::BrokerConfig;
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
    timeout: Duration,
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
        let quorum_config = QuorumConfig::new(
            u64::try_from(node_id).context("node.id must not be negative")?,
            voters,
            log_dir.join(METADATA_DIR),
        );
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
        crate::cluster::broker_metadata::stores::attach(dyn_quorum.clone(), node_id, services)
            .await?;
        Ok(Self {
            config,
            quorum,
            cluster_id,
            timeout,
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
        let epoch = membership::register(quorum.as_ref(), &record, self.timeout).await?;
        let (fatal, fatal_rx) = mpsc::channel(1);
        tokio::spawn(membership::heartbeat_loop(
            quorum,
            record,
            epoch,
            self.config.heartbeat_interval,
            fatal,
            stopped,
        ));
        Ok(fatal_rx)
    }

    pub async fn shutdown(&self) {
        self.quorum.shutdown().await;
    }
}

/// This broker's registration: a fresh incarnation with its advertised
/// listeners, less the controller ones.
fn registration(
    broker_config: &BrokerConfig,
    config: &ClusterConfig,
    advertised: &[AdvertisedListener],
) -> Result<BrokerRegistrationRecord> {
    let mut listeners = Vec::new();
    for listener in advertised {
        if config.controller_listener_names.contains(&listener.name) {
            continue;
        }
        let protocol = settings::listener_protocol(broker_config, &listener.name)?;
        listeners.push(Endpoint {
            name: listener.name.clone(),
            host: listener.host.clone(),
            port: listener.port,
            security_protocol: protocol.name().to_string(),
        });
    }
    Ok(BrokerRegistrationRecord {
        broker_id: config.node_id,
        incarnation_id: Uuid(u128::from_be_bytes(crate::uuid::random_bytes())),
        listeners,
        rack: broker_config.get("broker.rack").map(str::to_string),
        features: Default::default(),
    })
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
