//! Dynamic configs (Kafka's ConfigurationsImage): topic overrides, broker
//! configs per broker and as the cluster default, GROUP configs (KIP-848)
//! and CLIENT_METRICS subscriptions (KIP-714). What a single broker keeps
//! in `topics.json` (topic configs) and `configs.json`.
//!
//! Values are stored as set: validation is the proposer's (the config
//! definitions), so replaying the log never depends on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::command::{Applied, ConfigResource, Response};

pub type Configs = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigsImage {
    topics: BTreeMap<String, Configs>,
    brokers: BTreeMap<i32, Configs>,
    broker_default: Configs,
    groups: BTreeMap<String, Configs>,
    client_metrics: BTreeMap<String, Configs>,
}

static EMPTY: Configs = Configs::new();

impl ConfigsImage {
    /// The configs set on `resource` (empty if none).
    pub fn get(&self, resource: &ConfigResource) -> &Configs {
        let found = match resource {
            ConfigResource::Topic(name) => self.topics.get(name),
            ConfigResource::Broker(id) => self.brokers.get(id),
            ConfigResource::BrokerDefault => Some(&self.broker_default),
            ConfigResource::Group(group) => self.groups.get(group),
            ConfigResource::ClientMetrics(name) => self.client_metrics.get(name),
        };
        found.unwrap_or(&EMPTY)
    }

    /// The groups with configs, sorted.
    pub fn groups(&self) -> impl Iterator<Item = (&String, &Configs)> {
        self.groups.iter()
    }

    /// The CLIENT_METRICS subscriptions, sorted by name.
    pub fn client_metrics(&self) -> impl Iterator<Item = (&String, &Configs)> {
        self.client_metrics.iter()
    }

    fn slot(&mut self, resource: &ConfigResource) -> &mut Configs {
        match resource {
            ConfigResource::Topic(name) => self.topics.entry(name.clone()).or_default(),
            ConfigResource::Broker(id) => self.brokers.entry(*id).or_default(),
            ConfigResource::BrokerDefault => &mut self.broker_default,
            ConfigResource::Group(group) => self.groups.entry(group.clone()).or_default(),
            ConfigResource::ClientMetrics(name) => {
                self.client_metrics.entry(name.clone()).or_default()
            }
        }
    }

    /// ConfigRecords of one resource; a resource left without configs is
    /// dropped.
    pub(super) fn alter(
        &mut self,
        resource: &ConfigResource,
        changes: &[(String, Option<String>)],
        replace: bool,
    ) -> Response {
        let configs = self.slot(resource);
        if replace {
            configs.clear();
        }
        for (name, value) in changes {
            match value {
                Some(value) => configs.insert(name.clone(), value.clone()),
                None => configs.remove(name),
            };
        }
        if configs.is_empty() {
            self.remove(resource);
        }
        Ok(Applied::Done)
    }

    /// Drops every config of `resource` (a deleted topic's).
    pub(super) fn remove(&mut self, resource: &ConfigResource) {
        match resource {
            ConfigResource::Topic(name) => {
                self.topics.remove(name);
            }
            ConfigResource::Broker(id) => {
                self.brokers.remove(id);
            }
            ConfigResource::BrokerDefault => self.broker_default.clear(),
            ConfigResource::Group(group) => {
                self.groups.remove(group);
            }
            ConfigResource::ClientMetrics(name) => {
                self.client_metrics.remove(name);
            }
        }
    }
}
