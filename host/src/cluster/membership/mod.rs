//! This broker's membership over the wire, as Kafka's
//! BrokerLifecycleManager: a BrokerRegistration request, then a
//! BrokerHeartbeat request every `broker.heartbeat.interval.ms`, to the
//! active controller's controller listener ([`wire`]). The controller
//! decides (it keeps the sessions and fences the silent brokers); the
//! broker follows NOT_CONTROLLER to the new active controller and
//! registers again when its epoch is no longer current.
//!
//! A duplicate `node.id` shows as a registration of our id by another
//! incarnation after ours: the image keeps one, and the broker that lost
//! refuses to go on ([`MembershipError::Duplicate`]). A registration the
//! controller keeps refusing with DUPLICATE_BROKER_REGISTRATION (another
//! process heartbeats with our id) ends the same way once
//! `initial.broker.registration.timeout.ms` has passed; until then it is
//! retried, since it is also what a broker restarted before its old
//! session expired hears.
//!
//! Controlled shutdown (KIP-631, Kafka's `beginControlledShutdown`): once
//! asked ([`ControlledShutdown`]), every heartbeat says `want_shut_down`
//! and they come faster; the controller moves this broker's leaderships
//! to other ISR members and takes it out of the ISRs, and answers
//! `should_shut_down` once it leads nothing, which the server waits for
//! (bounded) before it stops.

pub mod forward;
pub mod producer_ids;
pub mod wire;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::broker_registration_request::Listener;
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerId, BrokerRegistrationRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::cluster::command::BrokerRegistrationRecord;
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::error_code::ErrorCode;
use wire::ControllerChannel;

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

/// How often a broker catching up or in controlled shutdown heartbeats (at
/// most; the configured interval if shorter): it learns it is caught up,
/// or that its leaderships moved and it may stop, within a beat or two.
const FAST_BEAT: Duration = Duration::from_millis(100);

/// The server's side of a controlled shutdown: it asks, the membership
/// heartbeats say so, and `allowed` turns true once the controller
/// answers `should_shut_down`.
#[derive(Clone)]
pub struct ControlledShutdown {
    want: Arc<watch::Sender<bool>>,
    allowed: Arc<watch::Sender<bool>>,
}

impl Default for ControlledShutdown {
    fn default() -> Self {
        Self {
            want: Arc::new(watch::Sender::new(false)),
            allowed: Arc::new(watch::Sender::new(false)),
        }
    }
}

impl ControlledShutdown {
    /// Asks for a controlled shutdown and waits until the controller
    /// allows it, up to `timeout`: whether it did.
    pub async fn request(&self, timeout: Duration) -> bool {
        self.want.send_replace(true);
        let mut allowed = self.allowed.subscribe();
        let waited = tokio::time::timeout(timeout, allowed.wait_for(|allowed| *allowed)).await;
        matches!(waited, Ok(Ok(_)))
    }
}

/// Kafka's initial catch-up (`BrokerLifecycleManager.initialCatchUpFuture`):
/// done once a heartbeat answer says this broker has applied the metadata
/// log up to its own registration, so what a client set before the broker
/// (re)started is what the broker serves. The server opens its client
/// listeners after it ([`Self::wait`]).
#[derive(Clone)]
pub struct InitialCatchUp(Arc<watch::Sender<bool>>);

impl Default for InitialCatchUp {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }
}

impl InitialCatchUp {
    fn reached(&self) {
        self.0.send_replace(true);
    }

    fn is_done(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until caught up, up to `timeout`: whether it was.
    pub async fn wait(&self, timeout: Duration) -> bool {
        let mut caught_up = self.0.subscribe();
        let waited = tokio::time::timeout(timeout, caught_up.wait_for(|done| *done)).await;
        matches!(waited, Ok(Ok(_)))
    }
}

/// What a broker's membership runs with.
pub struct Member {
    pub record: BrokerRegistrationRecord,
    pub cluster_id: String,
    pub interval: Duration,
    /// `initial.broker.registration.timeout.ms`.
    pub registration_timeout: Duration,
    /// The current broker epoch, -1 until registered (the producer-id
    /// source asks for blocks with it).
    pub epoch: Arc<AtomicI64>,
    pub shutdown: ControlledShutdown,
    pub catch_up: InitialCatchUp,
}

/// Kafka's error codes the broker acts on.
const NOT_CONTROLLER: i16 = ErrorCode::NotController.code();
const DUPLICATE: i16 = ErrorCode::DuplicateBrokerRegistration.code();
const INCONSISTENT_CLUSTER_ID: i16 = ErrorCode::InconsistentClusterId.code();
const STALE_BROKER_EPOCH: i16 = ErrorCode::StaleBrokerEpoch.code();
const NOT_REGISTERED: i16 = ErrorCode::BrokerIdNotRegistered.code();

/// Registers, then heartbeats until `stopped`; what stops the broker (a
/// duplicate id, no controller within the registration timeout) is sent
/// on `fatal`.
pub async fn run(
    quorum: Arc<dyn Quorum<MetadataImage>>,
    mut channel: ControllerChannel,
    member: Member,
    fatal: mpsc::Sender<MembershipError>,
    mut stopped: watch::Receiver<bool>,
) {
    let id = member.record.broker_id;
    let mut epoch = match register(&mut channel, &member).await {
        Ok(epoch) => epoch,
        Err(error) => {
            let _ = fatal.send(error).await;
            return;
        }
    };
    let mut fenced = true;
    let mut ticks = tokio::time::interval(member.interval);
    let mut want = member.shutdown.want.subscribe();
    let fast_beat = member.interval.min(FAST_BEAT);
    loop {
        let shutting_down = *want.borrow_and_update();
        // Faster beats while catching up (Kafka retries at once then) and
        // while shutting down.
        let fast = shutting_down || !member.catch_up.is_done();
        tokio::select! {
            _ = ticks.tick(), if !fast => {}
            () = tokio::time::sleep(fast_beat), if fast => {}
            // Asked to shut down: the first such heartbeat goes at once.
            Ok(()) = want.changed(), if !shutting_down => {}
            _ = stopped.changed() => return,
        }
        let shutting_down = *want.borrow();
        let image = quorum.image();
        if let Err(error) = check_duplicate(&image, &member.record, epoch) {
            let _ = fatal.send(error).await;
            return;
        }
        let request = BrokerHeartbeatRequest::default()
            .with_broker_id(BrokerId(id))
            .with_broker_epoch(epoch)
            .with_current_metadata_offset(i64::try_from(image.last_applied()).unwrap_or(i64::MAX))
            .with_want_shut_down(shutting_down);
        let response = match channel.send(&request, 0).await {
            Ok(response) => response,
            Err(error) => {
                warn!(broker = id, "heartbeat not answered: {error}");
                continue;
            }
        };
        match response.error_code {
            0 => {
                if fenced != response.is_fenced {
                    info!(
                        broker = id,
                        fenced = response.is_fenced,
                        "broker state changed"
                    );
                }
                fenced = response.is_fenced;
                if response.is_caught_up {
                    member.catch_up.reached();
                }
                if shutting_down && response.should_shut_down {
                    let was = member.shutdown.allowed.send_replace(true);
                    if !was {
                        info!(
                            broker = id,
                            "the controller moved every leadership away: shutdown allowed"
                        );
                    }
                }
            }
            NOT_CONTROLLER => channel.reset(),
            STALE_BROKER_EPOCH | NOT_REGISTERED => {
                warn!(
                    broker = id,
                    epoch, "the controller no longer knows this epoch: registering again"
                );
                match register(&mut channel, &member).await {
                    Ok(next) => {
                        epoch = next;
                        fenced = true;
                    }
                    Err(error) => {
                        let _ = fatal.send(error).await;
                        return;
                    }
                }
            }
            code => warn!(broker = id, code, "heartbeat refused"),
        }
    }
}

/// BrokerRegistration until the active controller answers with an epoch.
async fn register(
    channel: &mut ControllerChannel,
    member: &Member,
) -> Result<i64, MembershipError> {
    let record = &member.record;
    let id = record.broker_id;
    let request = registration_request(record, &member.cluster_id);
    let deadline = Instant::now() + member.registration_timeout;
    let mut last;
    let mut duplicate = false;
    loop {
        match channel.send(&request, 0).await {
            Ok(response) if response.error_code == 0 => {
                let epoch = response.broker_epoch;
                member.epoch.store(epoch, Ordering::Release);
                info!(broker = id, epoch, "registered with the active controller");
                return Ok(epoch);
            }
            Ok(response) => {
                duplicate = response.error_code == DUPLICATE;
                last = format!("refused with error code {}", response.error_code);
                match response.error_code {
                    NOT_CONTROLLER => channel.reset(),
                    INCONSISTENT_CLUSTER_ID => {
                        return Err(MembershipError::NoQuorum(format!(
                            "the active controller refused broker {id}: its cluster is not {}",
                            member.cluster_id
                        )))
                    }
                    _ => {}
                }
            }
            Err(error) => last = error,
        }
        if Instant::now() >= deadline {
            if duplicate {
                return Err(MembershipError::Duplicate(format!(
                    "another broker is registered with node.id={id} and heartbeating; this one \
                     stops: every node needs its own node.id"
                )));
            }
            return Err(MembershipError::NoQuorum(format!(
                "broker {id} could not register with the active controller within {} ms ({last})",
                member.registration_timeout.as_millis()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn registration_request(
    record: &BrokerRegistrationRecord,
    cluster_id: &str,
) -> BrokerRegistrationRequest {
    let listeners = record
        .listeners
        .iter()
        .map(|e| {
            Listener::default()
                .with_name(StrBytes::from_string(e.name.clone()))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port)
                .with_security_protocol(security_protocol_id(&e.security_protocol))
        })
        .collect();
    BrokerRegistrationRequest::default()
        .with_broker_id(BrokerId(record.broker_id))
        .with_cluster_id(StrBytes::from_string(cluster_id.to_string()))
        .with_incarnation_id(uuid::Uuid::from_u128(record.incarnation_id.0))
        .with_listeners(listeners)
        .with_rack(record.rack.clone().map(StrBytes::from_string))
}

/// Kafka's SecurityProtocol id.
fn security_protocol_id(name: &str) -> i16 {
    match name {
        "SSL" => 1,
        "SASL_PLAINTEXT" => 2,
        "SASL_SSL" => 3,
        _ => 0,
    }
}

/// Another incarnation registered our id after our registration (`epoch`):
/// this broker must stop.
pub fn check_duplicate(
    image: &MetadataImage,
    record: &BrokerRegistrationRecord,
    epoch: i64,
) -> Result<(), MembershipError> {
    let id = record.broker_id;
    match image.cluster().broker(id) {
        Some(current)
            if current.incarnation_id != record.incarnation_id && current.epoch > epoch =>
        {
            Err(MembershipError::Duplicate(format!(
                "another broker registered with node.id={id} (incarnation {}); this one ({}) \
                 stops: every node needs its own node.id",
                current.incarnation_id, record.incarnation_id
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::command::{Applied, Command};
    use crate::cluster::quorum::StateMachine;
    use crate::cluster::testing::registration;

    #[test]
    fn a_later_registration_of_our_id_by_another_incarnation_stops_us() {
        let mut image = MetadataImage::default();
        let record = registration(1, 11);
        let Ok(Applied::BrokerRegistered { epoch }) =
            image.apply(1, &Command::RegisterBroker(record.clone()))
        else {
            panic!("refused");
        };
        assert_eq!(check_duplicate(&image, &record, epoch), Ok(()));
        // Our registration not applied here yet: the old incarnation is no
        // duplicate.
        assert_eq!(
            check_duplicate(&image, &registration(1, 10), epoch + 1),
            Ok(())
        );
        image
            .apply(3, &Command::RegisterBroker(registration(1, 12)))
            .unwrap();
        assert!(matches!(
            check_duplicate(&image, &record, epoch),
            Err(MembershipError::Duplicate(_))
        ));
    }

    #[test]
    fn the_registration_request_carries_the_record() {
        let request = registration_request(&registration(4, 44), "c-1");
        assert_eq!(
            (request.broker_id.0, request.cluster_id.as_str()),
            (4, "c-1")
        );
        assert_eq!(request.incarnation_id.as_u128(), 44);
    }
}
