//! The broker's services, opened from storage in one place: what the WIT
//! imports call into, like the components Kafka hands to KafkaApis
//! (ReplicaManager, MetadataCache, AdminManager, GroupCoordinator,
//! TransactionCoordinator, the quota managers, ...).
//!
//! This layer sits below the plugin runtime and knows nothing of it: each
//! field is a narrow handle on one service, `plugins/` is given them, and
//! the registry of loaded modules and the authorizer slot stay in the
//! runtime (`plugins::PluginHost`); `broker.rs` assembles the two.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};

use crate::config::BrokerConfig;
use crate::config_admin::ConfigAdmin;
use crate::coordinator::offsets_log::TopicOffsetsLog;
use crate::coordinator::{GroupConfig, GroupCoordinator};
use crate::log::manager::{LogManager, ManagerConfig};
use crate::log::{LogStore, TopicPartition};
use crate::metadata::dynamic::DynamicConfigs;
use crate::metadata::store::MetadataStore;
use crate::metadata::topics::{Reopen, TopicManager};
use crate::metrics::Metrics;
use crate::producer_ids::ProducerIdManager;
use crate::quota::QuotaManager;
use crate::replica::ReplicaManager;
use crate::security::acl_store::AclStore;
use crate::security::credentials::{CredentialStore, ScramMechanism, MIN_ITERATIONS};
use crate::security::settings;
use crate::security::tokens::TokenManager;
use crate::telemetry::ClientMetricsManager;
use crate::transactions::{MarkerRoute, PendingOffset, TransactionStore, TxnEffects};

pub use crate::metadata::view::AdvertisedListener;
use crate::metadata::view::{Advertised, ClusterMetadata, Leadership, LocalMetadata};

pub struct Services {
    pub config: Arc<BrokerConfig>,
    pub node_id: i32,
    pub cluster_id: String,
    advertised: Arc<Advertised>,
    /// The single-node answers of the metadata seam.
    local: LocalMetadata,
    /// The cluster's, when this node runs on a metadata quorum (set once,
    /// before the listeners are bound).
    cluster: OnceLock<Arc<dyn ClusterMetadata>>,
    pub logs: Arc<dyn LogStore>,
    /// Topics and partitions (Kafka's MetadataCache and the topic half of
    /// its AdminManager).
    pub topics: Arc<TopicManager>,
    /// Appends, fetches, offsets and markers (Kafka's ReplicaManager).
    pub replica: ReplicaManager,
    /// Describe and alter configs of every config resource type.
    pub configs: ConfigAdmin,
    pub acls: Arc<AclStore>,
    /// SCRAM credentials (SASL PLAIN and SCRAM authenticate against them).
    pub credentials: Arc<CredentialStore>,
    /// Request, topic and plugin metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Consumer groups and committed offsets (Kafka's GroupCoordinator).
    pub groups: Arc<GroupCoordinator>,
    /// Dynamic broker configs and client-metrics subscriptions.
    pub dynamic: Arc<DynamicConfigs>,
    /// Client quotas (Kafka's ClientQuotaManagers).
    pub quotas: Arc<QuotaManager>,
    /// Delegation tokens.
    pub tokens: Arc<TokenManager>,
    /// Client telemetry (KIP-714).
    pub telemetry: Arc<ClientMetricsManager>,
    /// Producer ids for InitProducerId, never handed out twice.
    pub producer_ids: ProducerIdManager,
    /// Transactional ids with their producer id and epoch (Kafka's
    /// TransactionCoordinator).
    pub transactions: Arc<TransactionStore>,
    /// On a cluster node, where markers for partitions led elsewhere go.
    markers: OnceLock<Arc<dyn MarkerRoute>>,
}

impl Services {
    /// Opens (and recovers) storage under the log dir.
    pub fn open(config: Arc<BrokerConfig>) -> Result<Self> {
        let log_dir = config.log_dir();
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("creating log dir {}", log_dir.display()))?;
        let node_id = config.node_id()?;
        let cluster_id = load_or_create_cluster_id(&log_dir, node_id)?;
        let logs: Arc<dyn LogStore> = Arc::new(
            LogManager::open_with(log_manager_config(&config))
                .map_err(|error| anyhow::anyhow!("{error}"))
                .context("opening partition logs")?,
        );
        let store = MetadataStore::open(&log_dir.join("metadata"))
            .map_err(|error| anyhow::anyhow!("{error}"))
            .context("opening the metadata store")?;
        let dynamic = Arc::new(
            DynamicConfigs::open(&log_dir.join("metadata")).context("opening dynamic configs")?,
        );
        let topics = Arc::new(TopicManager::open_with(
            Arc::clone(&config),
            Arc::clone(&dynamic),
            Arc::clone(&logs),
            store,
            reopen_for(&config),
        )?);
        let quotas = Arc::new(QuotaManager::from_config(
            &config,
            &log_dir.join("metadata"),
        )?);
        let tokens = Arc::new(TokenManager::from_config(
            &config,
            &log_dir.join("security"),
        )?);
        let telemetry = Arc::new(ClientMetricsManager::from_config(
            &config,
            Arc::clone(&dynamic),
        )?);
        let metrics = Arc::new(Metrics::default().with_client_telemetry(Arc::clone(&telemetry)));
        let group_config = GroupConfig::from_broker(&config).context("group coordinator config")?;
        let groups_dir = log_dir.join("groups");
        let replica = ReplicaManager::new(
            Arc::clone(&logs),
            Arc::clone(&metrics),
            config.fetch_max_bytes()?,
        )
        .with_producer_id_expiration_ms(producer_id_expiration_ms(&config)?);
        let offsets = TopicOffsetsLog::new(
            &config,
            Arc::clone(&topics),
            Arc::clone(&logs),
            replica.purgatory(),
            node_id,
        )?;
        let transaction_state = TopicOffsetsLog::for_topic(
            crate::transactions::state_topic::INTERNAL_TOPIC,
            &config,
            Arc::clone(&topics),
            Arc::clone(&logs),
            replica.purgatory(),
            node_id,
        )?;
        let max_timeout_ms = transaction_max_timeout_ms(&config)?;
        // A cluster node coordinates the groups and transactional ids of
        // the partitions of __consumer_offsets and __transaction_state it
        // leads, loaded as it becomes their leader.
        let in_cluster = reopen_for(&config) == Reopen::Found;
        let transactions = if in_cluster {
            TransactionStore::open_in_cluster(
                Arc::new(transaction_state.in_cluster()),
                max_timeout_ms,
            )?
        } else {
            TransactionStore::open_on_topic(Arc::new(transaction_state), &log_dir, max_timeout_ms)
                .context("opening transactional ids")?
        };
        let groups = if in_cluster {
            if crate::coordinator::legacy_store_exists(&groups_dir) {
                tracing::warn!(
                    "{} is not read on a cluster node: its groups start anew in {}",
                    groups_dir.display(),
                    crate::coordinator::offsets_topic::TOPIC
                );
            }
            GroupCoordinator::open_in_cluster(Arc::new(offsets.in_cluster()), group_config)
        } else {
            GroupCoordinator::open_on_topic(Arc::new(offsets), &groups_dir, group_config)?
        };
        groups.use_group_configs(Arc::clone(&dynamic));
        groups.start()?;
        let (acls, credentials) = open_security(&config, &log_dir)?;
        credentials.attach_tokens(Arc::clone(&tokens));
        let advertised = Arc::new(Advertised::default());
        Ok(Self {
            node_id,
            local: LocalMetadata {
                node_id,
                cluster_id: cluster_id.clone(),
                topics: Arc::clone(&topics),
                advertised: Arc::clone(&advertised),
            },
            cluster: OnceLock::new(),
            cluster_id,
            advertised,
            replica,
            producer_ids: ProducerIdManager::open(&log_dir).context("opening producer ids")?,
            transactions: Arc::new(transactions),
            markers: OnceLock::new(),
            metrics,
            logs,
            configs: ConfigAdmin::new(
                node_id,
                Arc::clone(&config),
                Arc::clone(&topics),
                Arc::clone(&dynamic),
            ),
            topics,
            acls,
            credentials,
            groups,
            dynamic,
            quotas,
            tokens,
            telemetry,
            config,
        })
    }

    pub fn set_advertised(&self, listeners: Vec<AdvertisedListener>) {
        self.advertised.set(listeners);
    }

    /// The address clients of `listener` should use for this broker.
    pub fn advertised_for(&self, listener: &str) -> Option<AdvertisedListener> {
        self.advertised.for_listener(listener)
    }

    /// Topics, partitions and brokers: the cluster's view when this node
    /// runs on a quorum, else the single node's.
    pub fn metadata(&self) -> &dyn ClusterMetadata {
        match self.cluster.get() {
            Some(cluster) => cluster.as_ref(),
            None => &self.local,
        }
    }

    /// Puts this node on the cluster's metadata and makes the log path
    /// answer NOT_LEADER_OR_FOLLOWER for the partitions it does not lead.
    /// Once, at start; a second call is refused.
    pub fn join_cluster(
        &self,
        metadata: Arc<dyn ClusterMetadata>,
        leadership: Arc<dyn Leadership>,
    ) -> Result<()> {
        if self.cluster.set(metadata).is_err() {
            anyhow::bail!("the cluster metadata is already set");
        }
        self.replica.set_leadership(leadership);
        Ok(())
    }

    /// From now on markers for partitions another broker leads are sent
    /// to it (a cluster node). Once; a second call is refused.
    pub fn route_markers(&self, route: Arc<dyn MarkerRoute>) -> Result<()> {
        if self.markers.set(route).is_err() {
            anyhow::bail!("the marker route is already set");
        }
        Ok(())
    }

    /// Flushes every log and the group store (clean shutdown).
    pub fn flush(&self) -> Result<()> {
        self.groups.flush()?;
        // A clean shutdown of the logs: flush, checkpoints, and the marker
        // that spares the next start any recovery.
        self.logs
            .shutdown()
            .map_err(|error| anyhow::anyhow!("{error}"))
            .context("flushing logs")
    }
}

/// A node on a metadata quorum (`process.roles` set: `ClusterConfig::from`
/// has checked the rest before this runs) reopens only the partition logs
/// it finds; the image decides which it keeps.
fn reopen_for(config: &BrokerConfig) -> Reopen {
    match config.explicit("process.roles").map(str::trim) {
        Some(roles) if !roles.is_empty() => Reopen::Found,
        _ => Reopen::Every,
    }
}

/// The transaction coordinator's hands: markers go through the
/// ReplicaManager, committed offsets to the GroupCoordinator.
impl TxnEffects for Services {
    fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.topics
            .get(topic)
            .is_some_and(|found| (0..found.partitions).contains(&partition))
    }

    fn write_marker(
        &self,
        partition: &TopicPartition,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        if let Some(route) = self.markers.get() {
            match route.leader(partition) {
                None => return crate::error_code::ErrorCode::UnknownTopicOrPartition.code(),
                Some(leader) if leader < 0 => {
                    return crate::error_code::ErrorCode::NotLeaderOrFollower.code()
                }
                Some(leader) if leader != route.this_broker() => {
                    return route.send(
                        leader,
                        partition,
                        producer_id,
                        epoch,
                        commit,
                        coordinator_epoch,
                    )
                }
                Some(_) => {}
            }
        }
        if partition.topic == crate::coordinator::offsets_topic::TOPIC {
            return match self.groups.complete_transaction(
                partition.partition,
                producer_id,
                epoch,
                commit,
            ) {
                crate::coordinator::Pending::Ready(code) => code,
                // No runtime to wait on: written, not yet known replicated.
                crate::coordinator::Pending::Later(replicated) => {
                    crate::sync::block_on_current(replicated).unwrap_or(0)
                }
            };
        }
        let marker = crate::replica::MarkerWrite {
            topic: &partition.topic,
            partition: partition.partition,
            producer_id,
            producer_epoch: epoch,
            commit,
            coordinator_epoch,
        };
        // acks=all, as a remote leader writes it (WriteTxnMarkers).
        let acked = self
            .replica
            .write_marker_acked(marker, crate::replica::MARKER_REPLICATION_TIMEOUT);
        crate::sync::block_on_current(acked).unwrap_or_else(|| self.replica.write_marker(&marker))
    }

    fn commit_offsets(&self, group_id: &str, offsets: &[PendingOffset]) -> i16 {
        let offsets: Vec<crate::coordinator::OffsetCommit> =
            offsets.iter().map(PendingOffset::to_commit).collect();
        self.groups.commit_transactional_offsets(group_id, &offsets)
    }

    /// The marker for the group's partition of `__consumer_offsets`, to
    /// whichever broker leads it (this one included).
    fn complete_group(
        &self,
        group_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        let topic = crate::coordinator::offsets_topic::TOPIC;
        let count = match self.markers.get() {
            Some(route) => route.partitions(topic),
            None => self.topics.get(topic).map(|t| t.partitions),
        };
        let Some(count) = count else {
            // No offsets topic: no group has offsets anywhere.
            return crate::error_code::ErrorCode::None.code();
        };
        let partition = crate::coordinator::offsets_topic::partition_for(group_id, count);
        self.write_marker(
            &TopicPartition::new(topic, partition),
            producer_id,
            epoch,
            commit,
            coordinator_epoch,
        )
    }
}

impl Services {
    /// How often timed-out transactions are looked for
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    pub fn transaction_abort_interval(&self) -> Result<std::time::Duration> {
        positive_ms(
            &self.config,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            crate::transactions::DEFAULT_ABORT_INTERVAL_MS as i64,
        )
        .map(|ms| std::time::Duration::from_millis(ms.unsigned_abs()))
    }

    /// `transactional.id.expiration.ms`: how long an idle transactional id
    /// is remembered.
    pub fn transactional_id_expiration_ms(&self) -> Result<i64> {
        positive_ms(
            &self.config,
            "transactional.id.expiration.ms",
            crate::transactions::DEFAULT_ID_EXPIRATION_MS,
        )
    }
}

/// A setting that must be a positive number of milliseconds, or `default`
/// when unset.
fn positive_ms<T: std::str::FromStr + PartialOrd + Default>(
    config: &BrokerConfig,
    name: &str,
    default: T,
) -> Result<T> {
    match config.get(name) {
        None => Ok(default),
        Some(raw) => raw
            .trim()
            .parse::<T>()
            .ok()
            .filter(|ms| *ms > T::default())
            .with_context(|| format!("invalid value {raw:?} for {name}")),
    }
}

/// `transaction.max.timeout.ms` (Kafka's default: 15 minutes): the
/// longest transaction timeout a producer may ask for.
fn transaction_max_timeout_ms(config: &BrokerConfig) -> Result<i32> {
    positive_ms(
        config,
        "transaction.max.timeout.ms",
        crate::transactions::DEFAULT_MAX_TIMEOUT_MS,
    )
}

/// `producer.id.expiration.ms` (Kafka's default: one day): how long a
/// partition keeps the sequence state of an idle idempotent producer.
fn producer_id_expiration_ms(config: &BrokerConfig) -> Result<i64> {
    positive_ms(
        config,
        "producer.id.expiration.ms",
        crate::log::producer_state::DEFAULT_EXPIRATION_MS,
    )
}

/// The security state under `<log dir>/security`: ACLs and SCRAM
/// credentials, with `sasl.bootstrap.users` added for users that have no
/// credentials yet. (The authorizer choice is the plugin runtime's.)
fn open_security(
    config: &BrokerConfig,
    log_dir: &Path,
) -> Result<(Arc<AclStore>, Arc<CredentialStore>)> {
    let dir = log_dir.join("security");
    let acls = Arc::new(
        AclStore::open(&dir)
            .with_context(|| format!("opening the ACL store in {}", dir.display()))?,
    );
    let credentials = Arc::new(
        CredentialStore::open(&dir)
            .with_context(|| format!("opening the credential store in {}", dir.display()))?,
    );
    let known: Vec<String> = credentials
        .list()
        .into_iter()
        .map(|(user, _)| user)
        .collect();
    for (user, password) in settings::bootstrap_users(config)? {
        if !known.contains(&user) {
            credentials
                .set_password(&user, &password, &ScramMechanism::ALL, MIN_ITERATIONS)
                .map_err(|error| anyhow::anyhow!("{error:?}"))
                .with_context(|| format!("storing the bootstrap credentials of {user}"))?;
        }
    }
    Ok((acls, credentials))
}

/// The log manager's settings: each of `log.dirs` holds its partitions
/// under `partitions/` (beside the broker's own files in the first one),
/// and the background intervals with Kafka's names and defaults.
fn log_manager_config(config: &BrokerConfig) -> ManagerConfig {
    let dirs = config.log_dirs();
    let mut manager = ManagerConfig::new(dirs.iter().map(|d| d.join("partitions")).collect());
    manager.names = dirs
        .iter()
        .map(|d| {
            std::path::absolute(d)
                .unwrap_or_else(|_| d.clone())
                .display()
                .to_string()
        })
        .collect();
    manager.retention_check_interval = config.millis("log.retention.check.interval.ms", 300_000);
    manager.cleaner_backoff = config.millis("log.cleaner.backoff.ms", 15_000);
    manager.checkpoint_interval = config.millis("log.flush.offset.checkpoint.interval.ms", 60_000);
    manager.cleaner_enable = config.get("log.cleaner.enable") != Some("false");
    manager
}

/// Kafka keeps `cluster.id` in `meta.properties`; so do we.
fn load_or_create_cluster_id(log_dir: &Path, node_id: i32) -> Result<String> {
    let path = log_dir.join("meta.properties");
    if let Ok(text) = std::fs::read_to_string(&path) {
        if let Some(id) = text
            .lines()
            .find_map(|line| line.strip_prefix("cluster.id="))
            .map(str::trim)
            .filter(|id| !id.is_empty())
        {
            return Ok(id.to_string());
        }
    }
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| anyhow::anyhow!("no randomness: {error}"))?;
    let id = base64_url(&bytes);
    let text = format!("version=1\ncluster.id={id}\nnode.id={node_id}\n");
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(id)
}

/// A cluster node's meta.properties: the cluster id the metadata quorum
/// agreed on, marked as joined (a later start with another cluster's id
/// refuses to run, `cluster::node`).
pub fn write_cluster_id(log_dir: &Path, cluster_id: &str, node_id: i32) -> Result<()> {
    let path = log_dir.join("meta.properties");
    let text =
        format!("version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ncluster.joined=true\n");
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let id = base64_url(&[0xff; 16]);
        assert_eq!(id.len(), 22);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create_cluster_id(dir.path(), 1).unwrap();
        assert_eq!(first, load_or_create_cluster_id(dir.path(), 1).unwrap());
    }
}
