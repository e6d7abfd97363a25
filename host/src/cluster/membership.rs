//! This broker's membership: it registers itself (a new incarnation, with
//! its advertised listeners) once the quorum has a leader, and heartbeats
//! every `broker.heartbeat.interval.ms`, which unfences it once its image
//! has caught up with its own registration (Kafka's BrokerLifecycleManager).
//!
//! This step proposes in-process: the registration and the decision of
//! each heartbeat (`controller::brokers`, on this node's image) go to the
//! quorum from the broker itself. In Kafka they are BrokerRegistration and
//! BrokerHeartbeat requests to the active controller's listener, which
//! keeps the sessions and fences the silent brokers; those handler plugins
//! come next, and with them fencing by the active controller.
//!
//! A duplicate `node.id` shows here as a registration of our id by another
//! incarnation: the image keeps one, and the broker that lost refuses to
//! go on ([`MembershipError::Duplicate`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{info, warn};

use crate::cluster::command::{Applied, BrokerRegistrationRecord, Command};
use crate::cluster::controller::brokers::{self, HeartbeatRequest};
use crate::cluster::controller::Heartbeats;
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipError {
    /// Another process registered with this node's id.
    Duplicate(String),
    /// The quorum never got a leader in time (wrong voters, peers down).
    NoQuorum(String),
}

impl std::fmt::Display for MembershipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duplicate(why) | Self::NoQuorum(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for MembershipError {}

/// Waits until the quorum has a leader, up to `timeout`.
pub async fn await_leader(
    quorum: &dyn Quorum<MetadataImage>,
    timeout: Duration,
) -> Result<u64, MembershipError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(leader) = quorum.leader() {
            return Ok(leader);
        }
        if Instant::now() >= deadline {
            return Err(MembershipError::NoQuorum(format!(
                "no metadata quorum leader was elected within {} ms: check that \
                 controller.quorum.voters is the same on every node and that a majority of the \
                 voters is running and reachable",
                timeout.as_millis()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Registers this broker; its broker epoch.
pub async fn register(
    quorum: &dyn Quorum<MetadataImage>,
    record: &BrokerRegistrationRecord,
    timeout: Duration,
) -> Result<i64, MembershipError> {
    let deadline = Instant::now() + timeout;
    loop {
        let answer = quorum
            .propose(Command::RegisterBroker(record.clone()))
            .await;
        match answer {
            Ok(Ok(Applied::BrokerRegistered { epoch })) => {
                info!(
                    broker = record.broker_id,
                    epoch, "registered with the metadata quorum"
                );
                return Ok(epoch);
            }
            Ok(Err(refusal)) if refusal.code == ErrorCode::DuplicateBrokerRegistration => {
                return Err(MembershipError::Duplicate(refusal.message));
            }
            Ok(other) => warn!(?other, "broker registration refused"),
            Err(error) => warn!(%error, "broker registration not committed yet"),
        }
        if Instant::now() >= deadline {
            return Err(MembershipError::NoQuorum(format!(
                "broker {} could not register with the metadata quorum within {} ms",
                record.broker_id,
                timeout.as_millis()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One heartbeat's decision for this broker on `image`: None while all is
/// well, the command to propose (an unfence once caught up), or the
/// duplicate-id error when the image holds another incarnation of our id.
pub fn heartbeat_decision(
    image: &MetadataImage,
    heartbeats: &mut Heartbeats,
    record: &BrokerRegistrationRecord,
    epoch: i64,
    now: std::time::Instant,
) -> Result<Option<Command>, MembershipError> {
    let id = record.broker_id;
    if let Some(current) = image.cluster().broker(id) {
        if current.incarnation_id != record.incarnation_id {
            return Err(MembershipError::Duplicate(format!(
                "another broker registered with node.id={id} (incarnation {}); this one ({}) \
                 stops: every node needs its own node.id",
                current.incarnation_id, record.incarnation_id
            )));
        }
    }
    let request = HeartbeatRequest {
        broker_id: id,
        broker_epoch: epoch,
        current_metadata_offset: i64::try_from(image.last_applied()).unwrap_or(i64::MAX),
        want_fence: false,
        want_shutdown: false,
    };
    match brokers::heartbeat(image, heartbeats, request, now, false) {
        Ok(decision) => Ok(decision.command),
        // Not in the image (yet, or unregistered): nothing to decide.
        Err(_) => Ok(None),
    }
}

/// Heartbeats until `stopped`; a duplicate id is sent on `fatal`.
pub async fn heartbeat_loop(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    record: BrokerRegistrationRecord,
    epoch: i64,
    interval: Duration,
    fatal: tokio::sync::mpsc::Sender<MembershipError>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut heartbeats = Heartbeats::new();
    let mut ticks = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.changed() => return,
        }
        let image = quorum.image();
        match heartbeat_decision(
            &image,
            &mut heartbeats,
            &record,
            epoch,
            std::time::Instant::now(),
        ) {
            Ok(None) => {}
            Ok(Some(command)) => match quorum.propose(command).await {
                Ok(Ok(_)) => info!(broker = record.broker_id, "unfenced"),
                Ok(Err(refusal)) => warn!(%refusal, "heartbeat change refused"),
                Err(error) => warn!(%error, "heartbeat change not committed"),
            },
            Err(error) => {
                let _ = fatal.send(error).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::quorum::StateMachine;
    use crate::cluster::testing::registration;

    #[test]
    fn a_registered_broker_is_unfenced_once_caught_up_and_a_duplicate_stops() {
        let mut image = MetadataImage::default();
        let record = registration(1, 11);
        let Ok(Applied::BrokerRegistered { epoch }) =
            image.apply(1, &Command::RegisterBroker(record.clone()))
        else {
            panic!("refused");
        };
        let mut heartbeats = Heartbeats::new();
        let now = std::time::Instant::now();
        let command = heartbeat_decision(&image, &mut heartbeats, &record, epoch, now)
            .unwrap()
            .expect("an unfence");
        image.apply(2, &command).unwrap();
        assert!(image.cluster().is_live(1));
        assert_eq!(
            heartbeat_decision(&image, &mut heartbeats, &record, epoch, now),
            Ok(None)
        );
        // Another process registers with the same id: this one stops.
        image
            .apply(3, &Command::RegisterBroker(registration(1, 12)))
            .unwrap();
        assert!(matches!(
            heartbeat_decision(&image, &mut heartbeats, &record, epoch, now),
            Err(MembershipError::Duplicate(_))
        ));
    }
}
