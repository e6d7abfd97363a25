//! Broker lifecycle decisions (Kafka's ClusterControlManager and
//! BrokerHeartbeatManager): registration, heartbeats, fencing, controlled
//! shutdown and unregistration.
//!
//! A broker registers fenced; its heartbeats unfence it once its metadata
//! has caught up with its own registration; missing heartbeats for the
//! session timeout fence it again. Fencing a broker and moving its
//! leaderships is one atomic command, so no image ever shows a fenced
//! leader.

use std::time::{Duration, Instant};

use super::election;
use super::heartbeats::Heartbeats;
use crate::cluster::command::{BrokerRegistrationRecord, Command, Refusal};
use crate::cluster::image::{BrokerRegistration, MetadataImage};
use crate::cluster::quorum::StateMachine;
use crate::error_code::ErrorCode;

/// BrokerRegistration: refused with DUPLICATE_BROKER_REGISTRATION while
/// another incarnation of the id holds a live session (two processes with
/// one `node.id`); a new incarnation of a broker whose session expired but
/// that is not fenced yet is fenced in the same command.
pub fn register(
    image: &MetadataImage,
    heartbeats: &Heartbeats,
    record: BrokerRegistrationRecord,
    now: Instant,
    session_timeout: Duration,
    unclean_default: bool,
) -> Result<Command, Refusal> {
    let Some(existing) = image.cluster().broker(record.broker_id) else {
        return Ok(Command::RegisterBroker(record));
    };
    if existing.incarnation_id == record.incarnation_id {
        return Ok(Command::RegisterBroker(record));
    }
    if heartbeats.has_valid_session(existing.id, existing.epoch, now, session_timeout) {
        return Err(Refusal::new(
            ErrorCode::DuplicateBrokerRegistration,
            format!(
                "Another broker is registered with that broker id ({}).",
                record.broker_id
            ),
        ));
    }
    if existing.fenced {
        return Ok(Command::RegisterBroker(record));
    }
    let mut commands = leaving(image, existing, Departure::Fenced, unclean_default);
    commands.push(Command::RegisterBroker(record));
    Ok(Command::Atomic(commands))
}

/// What BrokerHeartbeat asks for (Kafka's BrokerHeartbeatRequest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The index of the last metadata command the broker applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// The answer to a heartbeat and the command to propose, if any. The
/// flags are what holds once the command is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatDecision {
    pub command: Option<Command>,
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// BrokerHeartbeat: renews the broker's session and moves it through
/// Kafka's states (fenced → unfenced once caught up; unfenced → fenced on
/// request; → controlled shutdown, which moves its leaderships away, and
/// shuts down once it leads nothing and every other active broker has
/// applied the change, so the new leaders lead before the old one goes).
pub fn heartbeat(
    image: &MetadataImage,
    heartbeats: &mut Heartbeats,
    request: HeartbeatRequest,
    now: Instant,
    unclean_default: bool,
) -> Result<HeartbeatDecision, Refusal> {
    let broker = image
        .cluster()
        .current(request.broker_id, request.broker_epoch)?;
    heartbeats.touch(broker.id, broker.epoch, now);
    heartbeats.applied(broker.id, broker.epoch, request.current_metadata_offset);
    // Caught up once it has applied its own registration (whose index is
    // its epoch), as Kafka compares with the registration record's offset.
    let is_caught_up = request.current_metadata_offset >= broker.epoch;
    let leads_nothing = image.led_by(broker.id).is_empty();
    let mut decision = HeartbeatDecision {
        command: None,
        is_caught_up,
        is_fenced: broker.fenced,
        should_shut_down: false,
    };
    if broker.fenced {
        if request.want_shutdown {
            decision.should_shut_down = true;
        } else if !request.want_fence && is_caught_up {
            decision.command = Some(unfence(image, broker, unclean_default));
            decision.is_fenced = false;
        }
    } else if broker.in_controlled_shutdown {
        if !leads_nothing {
            // A partition created or elected on an image from before the
            // shutdown's own change can still name this broker leader:
            // move those as well (the broker's state change is not
            // repeated).
            let moves: Vec<Command> = leaving(
                image,
                broker,
                Departure::ControlledShutdown,
                unclean_default,
            )
            .into_iter()
            .filter(|command| matches!(command, Command::ChangePartition(_)))
            .collect();
            if !moves.is_empty() {
                decision.command = Some(Command::Atomic(moves));
            }
        }
        let applied = i64::try_from(image.last_applied()).unwrap_or(i64::MAX);
        let since = heartbeats.shutdown_offset(broker.id, broker.epoch, applied);
        decision.should_shut_down =
            leads_nothing && heartbeats.lowest_active_offset(image, broker.id) >= since;
    } else if request.want_fence || request.want_shutdown {
        // Fencing wins over a controlled shutdown asked for in the same beat.
        let departure = if request.want_fence {
            Departure::Fenced
        } else {
            Departure::ControlledShutdown
        };
        decision.command = Some(Command::Atomic(leaving(
            image,
            broker,
            departure,
            unclean_default,
        )));
        // Not fenced here (the first branch), so only a fence changes it.
        decision.is_fenced = request.want_fence;
    }
    Ok(decision)
}

/// Kafka's `maybeFenceOneStaleBroker`, for every expired session at once:
/// one atomic command fencing them all and moving their leaderships
/// (decided one after the other on a scratch copy of the image, so that
/// two brokers of one partition leaving together give one consistent
/// change). None when no session expired.
pub fn fence_expired(
    image: &MetadataImage,
    heartbeats: &mut Heartbeats,
    now: Instant,
    session_timeout: Duration,
    unclean_default: bool,
) -> Option<Command> {
    let expired = heartbeats.expired(image, now, session_timeout);
    if expired.is_empty() {
        return None;
    }
    let mut scratch = image.clone();
    let mut commands = Vec::new();
    for (id, epoch) in expired {
        let Some(broker) = scratch.cluster().broker(id).filter(|b| b.epoch == epoch) else {
            continue;
        };
        let batch = leaving(&scratch, broker, Departure::Fenced, unclean_default);
        let index = scratch.last_applied();
        for command in batch {
            // Decided on `scratch`, so it applies; should it not, leave it
            // out and let the next round decide again.
            if scratch.apply(index, &command).is_ok() {
                commands.push(command);
            }
        }
    }
    (!commands.is_empty()).then_some(Command::Atomic(commands))
}

/// UnregisterBroker: the broker leaves every ISR and leadership, then its
/// registration goes (its replicas stay assigned, shown offline).
pub fn unregister(
    image: &MetadataImage,
    broker_id: i32,
    unclean_default: bool,
) -> Result<Command, Refusal> {
    let broker = image.cluster().registered(broker_id)?;
    let mut commands = if broker.fenced {
        Vec::new()
    } else {
        leaving(image, broker, Departure::Fenced, unclean_default)
    };
    commands.push(Command::UnregisterBroker {
        broker_id,
        epoch: broker.epoch,
    });
    Ok(Command::Atomic(commands))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Departure {
    Fenced,
    ControlledShutdown,
}

/// The broker's state change, then the change of every partition whose
/// ISR holds it or that it leads.
fn leaving(
    image: &MetadataImage,
    broker: &BrokerRegistration,
    departure: Departure,
    unclean_default: bool,
) -> Vec<Command> {
    let (broker_id, epoch) = (broker.id, broker.epoch);
    let mut commands = vec![match departure {
        Departure::Fenced => Command::FenceBroker { broker_id, epoch },
        Departure::ControlledShutdown => Command::ControlledShutdown { broker_id, epoch },
    }];
    // Decided on the image after the broker's own change, as Kafka's
    // records apply in order within a batch.
    let mut after = image.clone();
    let _ = after.apply(image.last_applied(), &commands[0]);
    for topic in after.topics().iter() {
        let unclean = after.unclean_election_enabled(&topic.name, unclean_default);
        for (index, partition) in &topic.partitions {
            if !partition.isr.contains(&broker_id) && partition.leader != broker_id {
                continue;
            }
            let change =
                election::without_broker(&after, topic, *index, partition, broker_id, unclean);
            commands.extend(change.map(Command::ChangePartition));
        }
    }
    commands
}

/// UnfenceBrokerRecord, and a leader for each offline partition the
/// broker can lead now.
fn unfence(image: &MetadataImage, broker: &BrokerRegistration, unclean_default: bool) -> Command {
    let mut commands = vec![Command::UnfenceBroker {
        broker_id: broker.id,
        epoch: broker.epoch,
    }];
    for topic in image.topics().iter() {
        let unclean = image.unclean_election_enabled(&topic.name, unclean_default);
        for (index, partition) in &topic.partitions {
            if !partition.replicas.contains(&broker.id) {
                continue;
            }
            let change = election::with_returning_broker(
                image, topic, *index, partition, broker.id, unclean,
            );
            commands.extend(change.map(Command::ChangePartition));
        }
    }
    Command::Atomic(commands)
}
