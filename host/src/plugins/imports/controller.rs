//! `controller`: the controller's request APIs reach the active controller
//! ([`ActiveController`]), which decides and proposes; this file only
//! converts between the contract's records and the controller's. A node
//! without the controller role answers NOT_CONTROLLER (its listeners do
//! not serve these APIs anyway), except DescribeQuorum and
//! UnregisterBroker received on a broker listener: those are forwarded
//! to the active controller (`cluster::membership::forward`), as Kafka's
//! brokers forward them.

use std::collections::BTreeMap;

use crate::cluster::command::{
    BrokerRegistrationRecord, Endpoint as HostEndpoint, FeatureRange as HostRange,
    LeaderRecoveryState, Refusal, Uuid as HostUuid,
};
use crate::cluster::controller::active::{ActiveController, PartitionAnswer};
use crate::cluster::controller::{AlterPartitionRequest, HeartbeatRequest};
use crate::cluster::membership::forward::{ControllerForwarder, Failure};
use crate::error_code::ErrorCode;
use crate::plugins::bindings::handler::gregor::broker::controller::{
    self, BrokerRegistration, Endpoint, Heartbeat, HeartbeatState, PartitionChange, PartitionState,
    ProducerIdBlock, QuorumState, VoterState,
};
use crate::plugins::bindings::handler::gregor::broker::types::KafkaError;
use crate::plugins::state::HandlerState;

/// Kafka's SecurityProtocol ids, in order.
const PROTOCOLS: [&str; 4] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

fn kafka_error(refusal: Refusal) -> KafkaError {
    KafkaError {
        code: refusal.code.code(),
        message: Some(refusal.message),
    }
}

fn protocol_name(id: i16) -> String {
    usize::try_from(id)
        .ok()
        .and_then(|i| PROTOCOLS.get(i))
        .map_or_else(|| id.to_string(), |name| (*name).to_string())
}

fn protocol_id(name: &str) -> i16 {
    PROTOCOLS
        .iter()
        .position(|known| *known == name)
        .and_then(|i| i16::try_from(i).ok())
        .unwrap_or(-1)
}

/// Host endpoints as the contract's.
pub(crate) fn endpoints(listeners: &[HostEndpoint]) -> Vec<Endpoint> {
    listeners
        .iter()
        .map(|e| Endpoint {
            name: e.name.clone(),
            host: e.host.clone(),
            port: e.port,
            security_protocol: protocol_id(&e.security_protocol),
        })
        .collect()
}

fn record(registration: BrokerRegistration) -> BrokerRegistrationRecord {
    BrokerRegistrationRecord {
        broker_id: registration.broker_id,
        incarnation_id: HostUuid(u128::from(registration.incarnation_id)),
        listeners: registration
            .listeners
            .into_iter()
            .map(|e| HostEndpoint {
                name: e.name,
                host: e.host,
                port: e.port,
                security_protocol: protocol_name(e.security_protocol),
            })
            .collect(),
        rack: registration.rack,
        features: registration
            .features
            .into_iter()
            .map(|f| {
                let range = HostRange {
                    min: f.min_version,
                    max: f.max_version,
                };
                (f.name, range)
            })
            .collect::<BTreeMap<_, _>>(),
    }
}

fn recovery_state(code: i8) -> LeaderRecoveryState {
    if code == 1 {
        LeaderRecoveryState::Recovering
    } else {
        LeaderRecoveryState::Recovered
    }
}

fn partition_state((refusal, partition): PartitionAnswer) -> PartitionState {
    let error = refusal.map(kafka_error);
    match partition {
        Some(p) => PartitionState {
            error,
            leader_id: p.leader,
            leader_epoch: p.leader_epoch,
            isr: p.isr,
            leader_recovery_state: i8::from(
                p.leader_recovery_state == LeaderRecoveryState::Recovering,
            ),
            partition_epoch: p.partition_epoch,
        },
        None => PartitionState {
            error,
            leader_id: -1,
            leader_epoch: -1,
            isr: Vec::new(),
            leader_recovery_state: 0,
            partition_epoch: -1,
        },
    }
}

impl HandlerState {
    /// The active controller seam, or NOT_CONTROLLER on a node without
    /// the controller role.
    fn controller(&self) -> Result<&ActiveController, KafkaError> {
        self.controller.get().map(|c| c.as_ref()).ok_or(KafkaError {
            code: ErrorCode::NotController.code(),
            message: Some("This node is not a controller.".to_string()),
        })
    }
}

impl HandlerState {
    /// The forwarder when the request came on a broker listener of a
    /// cluster node (the controller answers its own listeners itself).
    fn forwarding(&self) -> Option<&ControllerForwarder> {
        let listener = self.session.as_ref().map(|s| s.listener.as_str())?;
        let on_controller_listener = self
            .controller
            .get()
            .is_some_and(|c| c.listeners().iter().any(|name| name == listener));
        if on_controller_listener {
            return None;
        }
        self.forwarder.get().map(|f| f.as_ref())
    }
}

fn forward_failed((code, message): Failure) -> KafkaError {
    KafkaError {
        code,
        message: (!message.is_empty()).then_some(message),
    }
}

/// The active controller's DescribeQuorum answer as the contract's state.
fn forwarded_quorum(forwarder: &ControllerForwarder) -> Result<QuorumState, KafkaError> {
    let (partition, response) = forwarder.describe_quorum().map_err(forward_failed)?;
    Ok(QuorumState {
        leader_id: partition.leader_id.0,
        leader_epoch: partition.leader_epoch,
        high_watermark: partition.high_watermark,
        voters: partition
            .current_voters
            .iter()
            .map(|v| VoterState {
                replica_id: v.replica_id.0,
                log_end_offset: v.log_end_offset,
            })
            .collect(),
        nodes: response
            .nodes
            .iter()
            .map(|node| {
                let listeners = node.listeners.iter().map(|l| Endpoint {
                    name: l.name.to_string(),
                    host: l.host.to_string(),
                    port: l.port,
                    // DescribeQuorum does not carry it.
                    security_protocol: -1,
                });
                (node.node_id.0, listeners.collect())
            })
            .collect(),
    })
}

impl controller::Host for HandlerState {
    fn register_broker(&mut self, registration: BrokerRegistration) -> Result<i64, KafkaError> {
        let cluster_id = registration.cluster_id.clone();
        self.broker_work(|state| {
            state
                .controller()?
                .register(&cluster_id, record(registration))
                .map_err(kafka_error)
        })
    }

    fn broker_heartbeat(&mut self, heartbeat: Heartbeat) -> Result<HeartbeatState, KafkaError> {
        let decision = self.broker_work(|state| {
            state
                .controller()?
                .heartbeat(HeartbeatRequest {
                    broker_id: heartbeat.broker_id,
                    broker_epoch: heartbeat.broker_epoch,
                    current_metadata_offset: heartbeat.current_metadata_offset,
                    want_fence: heartbeat.want_fence,
                    want_shutdown: heartbeat.want_shut_down,
                })
                .map_err(kafka_error)
        })?;
        Ok(HeartbeatState {
            is_caught_up: decision.is_caught_up,
            is_fenced: decision.is_fenced,
            should_shut_down: decision.should_shut_down,
        })
    }

    fn unregister_broker(&mut self, broker_id: i32) -> Result<(), KafkaError> {
        self.broker_work(|state| {
            if let Some(forwarder) = state.forwarding() {
                return forwarder
                    .unregister_broker(broker_id)
                    .map_err(forward_failed);
            }
            state
                .controller()?
                .unregister(broker_id)
                .map_err(kafka_error)
        })
    }

    fn allocate_producer_ids(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<ProducerIdBlock, KafkaError> {
        let (first, size) = self.broker_work(|state| {
            state
                .controller()?
                .allocate_producer_ids(broker_id, broker_epoch)
                .map_err(kafka_error)
        })?;
        Ok(ProducerIdBlock { first, size })
    }

    fn alter_partition(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
        changes: Vec<PartitionChange>,
    ) -> Result<Vec<PartitionState>, KafkaError> {
        let requests: Vec<AlterPartitionRequest> = changes
            .into_iter()
            .map(|c| AlterPartitionRequest {
                broker_id,
                broker_epoch,
                topic_id: HostUuid(u128::from(c.topic_id)),
                partition: c.partition,
                leader_epoch: c.leader_epoch,
                partition_epoch: c.partition_epoch,
                new_isr: c.new_isr,
                leader_recovery_state: recovery_state(c.leader_recovery_state),
            })
            .collect();
        let answers = self.broker_work(|state| {
            state
                .controller()?
                .alter_partition(broker_id, broker_epoch, &requests)
                .map_err(kafka_error)
        })?;
        Ok(answers.into_iter().map(partition_state).collect())
    }

    fn describe_quorum(&mut self) -> Result<QuorumState, KafkaError> {
        if let Some(forwarded) = self.broker_work(|state| state.forwarding().map(forwarded_quorum))
        {
            return forwarded;
        }
        let (status, nodes) = self.controller()?.describe_quorum().map_err(kafka_error)?;
        let offset = |index: Option<u64>| index.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1);
        Ok(QuorumState {
            leader_id: status
                .leader
                .and_then(|id| i32::try_from(id).ok())
                .unwrap_or(-1),
            leader_epoch: i32::try_from(status.term).unwrap_or(i32::MAX),
            high_watermark: offset(Some(status.applied)),
            voters: status
                .voters
                .iter()
                .map(|(id, index)| VoterState {
                    replica_id: i32::try_from(*id).unwrap_or(-1),
                    log_end_offset: offset(*index),
                })
                .collect(),
            nodes: nodes
                .into_iter()
                .map(|(id, listeners)| (id, endpoints(&listeners)))
                .collect(),
        })
    }
}
