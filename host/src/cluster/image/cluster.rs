//! The registered brokers (Kafka's ClusterImage): who they are, where they
//! listen, and whether they may lead and be in ISRs.
//!
//! A broker's epoch is the log index of its registration, so it is the
//! same on every node and grows with every new incarnation; commands about
//! a broker name the epoch they were decided for and are refused with
//! STALE_BROKER_EPOCH when it re-registered since.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::command::{
    Applied, BrokerRegistrationRecord, Endpoint, FeatureRange, Refusal, Response, Uuid,
};
use crate::error_code::ErrorCode;

/// Kafka's BrokerRegistration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: i32,
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub listeners: Vec<Endpoint>,
    pub rack: Option<String>,
    pub features: BTreeMap<String, FeatureRange>,
    /// Fenced brokers are not shown to clients and neither lead nor join
    /// ISRs; a new registration starts fenced.
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// Kafka's `isActive`: may be elected leader or added to an ISR.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }

    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.listeners.iter().find(|e| e.name == listener)
    }
}

/// A live broker as Metadata and DescribeCluster list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterImage {
    brokers: BTreeMap<i32, BrokerRegistration>,
    /// The controllers' controller listeners, by id (KIP-919).
    #[serde(default)]
    controllers: BTreeMap<i32, Vec<Endpoint>>,
}

impl ClusterImage {
    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&id)
    }

    /// Every registered broker, fenced or not, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values()
    }

    /// Registered and not fenced: shown to clients.
    pub fn is_live(&self, id: i32) -> bool {
        self.broker(id).is_some_and(|b| !b.fenced)
    }

    /// May lead and join ISRs (unfenced, not shutting down).
    pub fn is_active(&self, id: i32) -> bool {
        self.broker(id).is_some_and(BrokerRegistration::is_active)
    }

    /// The active brokers' ids, ascending: what placement spreads over.
    pub fn active_ids(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| b.is_active())
            .map(|b| b.id)
            .collect()
    }

    /// The live brokers with an endpoint on `listener`, by id: the broker
    /// list of Metadata and DescribeCluster on that listener.
    pub fn live_endpoints(&self, listener: &str) -> Vec<BrokerEndpoint> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| {
                let endpoint = b.endpoint(listener)?;
                Some(BrokerEndpoint {
                    id: b.id,
                    host: endpoint.host.clone(),
                    port: endpoint.port,
                    rack: b.rack.clone(),
                })
            })
            .collect()
    }

    /// BrokerRegistrationRecord. The same incarnation registering again is
    /// a retry and gets its epoch back unchanged; a new one replaces the
    /// registration, fenced, with the log index as its epoch. (Whether a
    /// new incarnation may replace a live one is the controller's call:
    /// heartbeats are not in the image.)
    pub(super) fn register(&mut self, index: u64, record: &BrokerRegistrationRecord) -> Response {
        if let Some(existing) = self.brokers.get(&record.broker_id) {
            if existing.incarnation_id == record.incarnation_id {
                return Ok(Applied::BrokerRegistered {
                    epoch: existing.epoch,
                });
            }
        }
        let epoch = i64::try_from(index).unwrap_or(i64::MAX);
        self.brokers.insert(
            record.broker_id,
            BrokerRegistration {
                id: record.broker_id,
                epoch,
                incarnation_id: record.incarnation_id,
                listeners: record.listeners.clone(),
                rack: record.rack.clone(),
                features: record.features.clone(),
                fenced: true,
                in_controlled_shutdown: false,
            },
        );
        Ok(Applied::BrokerRegistered { epoch })
    }

    /// ControllerRegistrationRecord: the latest listeners of a controller.
    pub(super) fn register_controller(&mut self, id: i32, listeners: &[Endpoint]) -> Response {
        self.controllers.insert(id, listeners.to_vec());
        Ok(Applied::Done)
    }

    /// Where controller `id` serves the controller APIs, if it registered.
    pub fn controller_endpoints(&self, id: i32) -> Option<&[Endpoint]> {
        self.controllers.get(&id).map(Vec::as_slice)
    }

    /// The registration of `id`, or BROKER_ID_NOT_REGISTERED.
    pub fn registered(&self, id: i32) -> Result<&BrokerRegistration, Refusal> {
        self.brokers.get(&id).ok_or_else(|| {
            Refusal::new(
                ErrorCode::BrokerIdNotRegistered,
                format!("Broker {id} is not registered."),
            )
        })
    }

    /// The registration of `id` if `epoch` is its current epoch, else
    /// BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH.
    pub fn current(&self, id: i32, epoch: i64) -> Result<&BrokerRegistration, Refusal> {
        let broker = self.registered(id)?;
        if broker.epoch != epoch {
            return Err(Refusal::new(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "Expected broker epoch {}, but got broker epoch {epoch}.",
                    broker.epoch
                ),
            ));
        }
        Ok(broker)
    }

    /// FenceBrokerRecord / UnfenceBrokerRecord /
    /// BrokerRegistrationChangeRecord.
    pub(super) fn change(
        &mut self,
        id: i32,
        epoch: i64,
        change: impl FnOnce(&mut BrokerRegistration),
    ) -> Response {
        self.current(id, epoch)?;
        if let Some(broker) = self.brokers.get_mut(&id) {
            change(broker);
        }
        Ok(Applied::Done)
    }

    /// UnregisterBrokerRecord.
    pub(super) fn unregister(&mut self, id: i32, epoch: i64) -> Response {
        self.current(id, epoch)?;
        self.brokers.remove(&id);
        Ok(Applied::Done)
    }
}
