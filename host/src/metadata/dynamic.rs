//! Dynamic configs that are not a topic's own (those live with the topic in
//! the topic store): the broker configs set with AlterConfigs for this
//! broker and as the cluster-wide default (KIP-226), and the CLIENT_METRICS
//! subscriptions of KIP-714 and the GROUP configs of KIP-848 (a group's
//! `consumer.session.timeout.ms` and the like). One crash-safe JSON document,
//! `<metadata dir>/configs.json`; a change is durable before it is
//! visible.
//!
//! Readers take a snapshot ([`DynamicConfigs::broker_layers`]); every
//! change bumps a version so that caches (client telemetry subscriptions)
//! know to look again.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use serde::{Deserialize, Serialize};

use crate::durable::JsonFile;

const FILE_NAME: &str = "configs.json";
const FORMAT_VERSION: u32 = 1;

type Configs = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Document {
    version: u32,
    /// Broker configs set for every broker (resource name "").
    #[serde(default)]
    cluster_default: Configs,
    /// Broker configs set for this broker (resource name = node id).
    #[serde(default)]
    broker: Configs,
    /// CLIENT_METRICS subscriptions by name.
    #[serde(default)]
    client_metrics: BTreeMap<String, Configs>,
    /// GROUP configs (KIP-848) by group id.
    #[serde(default)]
    groups: BTreeMap<String, Configs>,
}

/// The two dynamic broker layers, highest precedence first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerLayers {
    pub per_broker: Configs,
    pub cluster_default: Configs,
}

pub struct DynamicConfigs {
    file: JsonFile,
    /// Serializes writers so a read-modify-write is not lost.
    write_lock: Mutex<()>,
    state: RwLock<Document>,
    version: AtomicU64,
}

impl DynamicConfigs {
    pub fn open(dir: &Path) -> io::Result<Self> {
        let file = JsonFile::open(dir, FILE_NAME)?;
        let document = file
            .load_versioned(FORMAT_VERSION, |document: &Document| document.version)?
            .unwrap_or(Document {
                version: FORMAT_VERSION,
                ..Document::default()
            });
        Ok(Self {
            file,
            write_lock: Mutex::new(()),
            state: RwLock::new(document),
            version: AtomicU64::new(0),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Document> {
        crate::sync::read(&self.state)
    }

    /// Applies `change` to a copy of the document, stores it, then makes
    /// it visible.
    fn update(&self, change: impl FnOnce(&mut Document)) -> io::Result<()> {
        let _writer = crate::sync::lock(&self.write_lock);
        let mut next = self.read().clone();
        change(&mut next);
        self.file.store(&next)?;
        *crate::sync::write(&self.state) = next;
        self.version.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Increases on every change.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn broker_layers(&self) -> BrokerLayers {
        let state = self.read();
        BrokerLayers {
            per_broker: state.broker.clone(),
            cluster_default: state.cluster_default.clone(),
        }
    }

    /// Replaces the dynamic broker configs of this broker (`per_broker`) or
    /// the cluster-wide default.
    pub fn set_broker(&self, per_broker: bool, configs: Configs) -> io::Result<()> {
        self.update(|document| {
            if per_broker {
                document.broker = configs;
            } else {
                document.cluster_default = configs;
            }
        })
    }

    pub fn client_metrics(&self) -> BTreeMap<String, Configs> {
        self.read().client_metrics.clone()
    }

    /// The subscription names, sorted.
    pub fn client_metrics_names(&self) -> Vec<String> {
        self.read().client_metrics.keys().cloned().collect()
    }

    pub fn client_metrics_of(&self, name: &str) -> Configs {
        self.read()
            .client_metrics
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Replaces a subscription's configs; an empty set removes it.
    pub fn set_client_metrics(&self, name: &str, configs: Configs) -> io::Result<()> {
        self.update(|document| set_or_remove(&mut document.client_metrics, name, configs))
    }

    /// The groups with dynamic configs, sorted.
    pub fn group_config_names(&self) -> Vec<String> {
        self.read().groups.keys().cloned().collect()
    }

    pub fn group_configs_of(&self, group: &str) -> Configs {
        self.read().groups.get(group).cloned().unwrap_or_default()
    }

    /// One config of a group, if the group overrides it.
    pub fn group_config(&self, group: &str, name: &str) -> Option<String> {
        self.read().groups.get(group)?.get(name).cloned()
    }

    /// Replaces a group's configs; an empty set removes the group.
    pub fn set_group_configs(&self, group: &str, configs: Configs) -> io::Result<()> {
        self.update(|document| set_or_remove(&mut document.groups, group, configs))
    }
}

/// Stores `configs` as `name`'s, or forgets `name` when they are empty.
fn set_or_remove(map: &mut BTreeMap<String, Configs>, name: &str, configs: Configs) {
    if configs.is_empty() {
        map.remove(name);
    } else {
        map.insert(name.to_string(), configs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let configs = DynamicConfigs::open(dir.path()).unwrap();
        assert_eq!(configs.broker_layers(), BrokerLayers::default());
        let before = configs.version();
        configs
            .set_broker(
                false,
                BTreeMap::from([("log.retention.ms".into(), "1000".into())]),
            )
            .unwrap();
        configs
            .set_broker(
                true,
                BTreeMap::from([("log.retention.ms".into(), "5".into())]),
            )
            .unwrap();
        configs
            .set_client_metrics(
                "sub",
                BTreeMap::from([("metrics".into(), "org.apache.kafka.".into())]),
            )
            .unwrap();
        assert!(configs.version() > before);
        assert_eq!(configs.broker_layers().per_broker["log.retention.ms"], "5");
        drop(configs);

        let configs = DynamicConfigs::open(dir.path()).unwrap();
        let layers = configs.broker_layers();
        assert_eq!(layers.cluster_default["log.retention.ms"], "1000");
        assert_eq!(configs.client_metrics_of("sub").len(), 1);
        assert_eq!(configs.client_metrics_names(), ["sub"]);
        configs.set_client_metrics("sub", BTreeMap::new()).unwrap();
        assert!(configs.client_metrics().is_empty());
        configs
            .set_group_configs(
                "g",
                BTreeMap::from([("consumer.heartbeat.interval.ms".into(), "7000".into())]),
            )
            .unwrap();
        drop(configs);

        let configs = DynamicConfigs::open(dir.path()).unwrap();
        assert_eq!(configs.group_config_names(), ["g"]);
        assert_eq!(
            configs
                .group_config("g", "consumer.heartbeat.interval.ms")
                .as_deref(),
            Some("7000")
        );
        configs.set_group_configs("g", BTreeMap::new()).unwrap();
        assert!(configs.group_config_names().is_empty());
    }
}
