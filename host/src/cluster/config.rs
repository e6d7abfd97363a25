//! The cluster's configuration, with KRaft's property names.
//!
//! A node is part of a cluster when `process.roles` or
//! `controller.quorum.voters` is set; with neither it is the single-node
//! broker of before, untouched ([`ClusterConfig::from`] answers `None`).
//! Everything is checked once, at start, with the offending key in the
//! message: a node that would join the wrong quorum, or none, must refuse
//! to start rather than hang or split the cluster. The rules are Kafka's
//! (`KafkaConfig`'s KRaft validation):
//!
//! - `process.roles`: `broker`, `controller` or both (combined mode);
//! - `controller.quorum.voters`: `id@host:port,...`, ids unique; a node
//!   with the controller role is a voter, a broker-only node is not;
//! - `controller.listener.names`: the listeners the controller serves on;
//!   a controller lists them in `listeners`, a broker-only node must not;
//! - `inter.broker.listener.name`: the listener brokers reach each other
//!   on (replica fetches), one of `listeners` and not a controller one;
//! - `broker.session.timeout.ms` (9000) and `broker.heartbeat.interval.ms`
//!   (2000): a broker that has not heartbeated for the session timeout is
//!   fenced.
//! - `controlled.shutdown.enable` (true): on SIGTERM a broker first asks
//!   the controller to move its leaderships away (KIP-631), waiting up
//!   to `controlled.shutdown.timeout.ms` (30000, Gregor's bound on
//!   Kafka's wait) before it stops anyway.
//!
//! The defaults live here, not in `BrokerConfig`'s table, so that a
//! single-node broker describes exactly the configs it did before.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::config::BrokerConfig;

pub const PROCESS_ROLES: &str = "process.roles";
pub const NODE_ID: &str = "node.id";
pub const QUORUM_VOTERS: &str = "controller.quorum.voters";
pub const CONTROLLER_LISTENER_NAMES: &str = "controller.listener.names";
pub const INTER_BROKER_LISTENER_NAME: &str = "inter.broker.listener.name";
pub const SESSION_TIMEOUT_MS: &str = "broker.session.timeout.ms";
pub const HEARTBEAT_INTERVAL_MS: &str = "broker.heartbeat.interval.ms";

pub const CONTROLLED_SHUTDOWN_ENABLE: &str = "controlled.shutdown.enable";
pub const CONTROLLED_SHUTDOWN_TIMEOUT_MS: &str = "controlled.shutdown.timeout.ms";
const DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_MS: u64 = 30_000;

/// Kafka's default `broker.session.timeout.ms`.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 9000;
/// Kafka's default `broker.heartbeat.interval.ms`.
pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 2000;

/// What a node does in the cluster (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRoles {
    Broker,
    Controller,
    /// `broker,controller`: both in one process (small clusters, tests).
    Combined,
}

impl ProcessRoles {
    pub fn is_broker(self) -> bool {
        matches!(self, Self::Broker | Self::Combined)
    }

    pub fn is_controller(self) -> bool {
        matches!(self, Self::Controller | Self::Combined)
    }
}

/// One entry of `controller.quorum.voters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub node_id: i32,
    pub roles: ProcessRoles,
    /// In the order configured.
    pub voters: Vec<Voter>,
    pub controller_listener_names: Vec<String>,
    /// Set for nodes with the broker role.
    pub inter_broker_listener_name: Option<String>,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// How long a broker waits on SIGTERM for the controller to move its
    /// leaderships away; None: `controlled.shutdown.enable=false`.
    pub controlled_shutdown: Option<Duration>,
}

impl ClusterConfig {
    /// The cluster settings of `config`: `None` when no quorum is
    /// configured (a single-node broker), an error naming the key when
    /// they are inconsistent.
    pub fn from(config: &BrokerConfig) -> Result<Option<Self>> {
        let roles_raw = explicit(config, PROCESS_ROLES);
        let voters_raw = explicit(config, QUORUM_VOTERS);
        let (roles_raw, voters_raw) = match (roles_raw, voters_raw) {
            (None, None) => return Ok(None),
            (None, Some(_)) => bail!(
                "{QUORUM_VOTERS} is set but {PROCESS_ROLES} is not: set {PROCESS_ROLES} to \
                 broker, controller or broker,controller"
            ),
            (Some(_), None) => bail!(
                "{PROCESS_ROLES} is set but {QUORUM_VOTERS} is not: list the controllers as \
                 id@host:port,..."
            ),
            (Some(roles), Some(voters)) => (roles, voters),
        };
        let roles = parse_roles(roles_raw)?;
        let voters = parse_voters(voters_raw)?;
        let node_id = node_id(config)?;
        let is_voter = voters.iter().any(|voter| voter.id == node_id);
        if roles.is_controller() && !is_voter {
            bail!(
                "{NODE_ID}={node_id} has the controller role ({PROCESS_ROLES}={roles_raw}) but is \
                 not among {QUORUM_VOTERS}={voters_raw}"
            );
        }
        if !roles.is_controller() && is_voter {
            bail!(
                "{NODE_ID}={node_id} is among {QUORUM_VOTERS}={voters_raw} but has only the broker \
                 role ({PROCESS_ROLES}={roles_raw}): a voter must have the controller role"
            );
        }

        let listeners: Vec<String> = config
            .listeners()
            .context("listeners")?
            .into_iter()
            .map(|listener| listener.name)
            .collect();
        let controller_listener_names = names(config.get(CONTROLLER_LISTENER_NAMES));
        if controller_listener_names.is_empty() {
            bail!("{CONTROLLER_LISTENER_NAMES} must be set in a cluster (e.g. CONTROLLER)");
        }
        for name in &controller_listener_names {
            let listed = listeners.contains(name);
            if roles.is_controller() && !listed {
                bail!(
                    "{CONTROLLER_LISTENER_NAMES} names {name}, which is not among listeners \
                     ({}): a controller serves on its controller listeners",
                    listeners.join(",")
                );
            }
            if !roles.is_controller() && listed {
                bail!(
                    "{CONTROLLER_LISTENER_NAMES} names {name}, which is among listeners: a node \
                     with only the broker role must not listen as a controller"
                );
            }
        }
        let inter_broker_listener_name = if roles.is_broker() {
            Some(inter_broker_listener(
                config,
                &listeners,
                &controller_listener_names,
            )?)
        } else {
            None
        };

        let session_timeout = millis(config, SESSION_TIMEOUT_MS, DEFAULT_SESSION_TIMEOUT_MS)?;
        let heartbeat_interval =
            millis(config, HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_INTERVAL_MS)?;
        if heartbeat_interval >= session_timeout {
            bail!(
                "{HEARTBEAT_INTERVAL_MS} ({}) must be less than {SESSION_TIMEOUT_MS} ({}), or \
                 every broker would be fenced between two heartbeats",
                heartbeat_interval.as_millis(),
                session_timeout.as_millis()
            );
        }
        let controlled_shutdown = match explicit(config, CONTROLLED_SHUTDOWN_ENABLE) {
            None | Some("true") => Some(millis(
                config,
                CONTROLLED_SHUTDOWN_TIMEOUT_MS,
                DEFAULT_CONTROLLED_SHUTDOWN_TIMEOUT_MS,
            )?),
            Some("false") => None,
            Some(raw) => bail!("{CONTROLLED_SHUTDOWN_ENABLE}={raw} must be true or false"),
        };
        Ok(Some(Self {
            node_id,
            roles,
            voters,
            controller_listener_names,
            inter_broker_listener_name,
            session_timeout,
            heartbeat_interval,
            controlled_shutdown,
        }))
    }

    /// This node's entry among the voters, if it is one.
    pub fn own_voter(&self) -> Option<&Voter> {
        self.voters.iter().find(|voter| voter.id == self.node_id)
    }
}

/// A value set explicitly and not blank.
fn explicit<'a>(config: &'a BrokerConfig, name: &str) -> Option<&'a str> {
    config
        .explicit(name)
        .map(str::trim)
        .filter(|value| !value.is_empty())
}

fn names(raw: Option<&str>) -> Vec<String> {
    raw.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_roles(raw: &str) -> Result<ProcessRoles> {
    let (mut broker, mut controller) = (false, false);
    for role in raw.split(',').map(str::trim) {
        let seen = match role {
            "broker" => std::mem::replace(&mut broker, true),
            "controller" => std::mem::replace(&mut controller, true),
            other => bail!(
                "{PROCESS_ROLES}={raw}: unknown role {other:?} (expected broker, controller or \
                 broker,controller)"
            ),
        };
        if seen {
            bail!("{PROCESS_ROLES}={raw}: the role {role} appears twice");
        }
    }
    Ok(match (broker, controller) {
        (true, true) => ProcessRoles::Combined,
        (true, false) => ProcessRoles::Broker,
        _ => ProcessRoles::Controller,
    })
}

/// `id@host:port,...`, Kafka's `QuorumConfig.parseVoterConnections`; an
/// IPv6 host is written in brackets.
pub fn parse_voters(raw: &str) -> Result<Vec<Voter>> {
    let mut voters: Vec<Voter> = Vec::new();
    for entry in raw.split(',').map(str::trim) {
        let voter = parse_voter(entry)
            .with_context(|| format!("{QUORUM_VOTERS}={raw}: {entry:?} is not id@host:port"))?;
        if voters.iter().any(|known| known.id == voter.id) {
            bail!(
                "{QUORUM_VOTERS}={raw}: the voter id {} appears more than once",
                voter.id
            );
        }
        voters.push(voter);
    }
    Ok(voters)
}

fn parse_voter(entry: &str) -> Result<Voter> {
    let Some((id, address)) = entry.split_once('@') else {
        bail!("no '@'");
    };
    let id: i32 = id.trim().parse().context("the id is not a number")?;
    if id < 0 {
        bail!("the id is negative");
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        bail!("no port");
    };
    let port: u16 = port.parse().context("the port is not a number")?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.contains(['@', ',', ' ']) {
        bail!("the host is empty or malformed");
    }
    Ok(Voter {
        id,
        host: host.to_string(),
        port,
    })
}

/// In a cluster the node id must be given (Kafka has no default for it in
/// KRaft mode): two nodes both falling back to 1 would fight over it.
fn node_id(config: &BrokerConfig) -> Result<i32> {
    let Some(raw) = explicit(config, NODE_ID) else {
        bail!("{NODE_ID} must be set in a cluster ({PROCESS_ROLES} is set)");
    };
    let id: i32 = raw
        .parse()
        .map_err(|_| anyhow::anyhow!("{NODE_ID}={raw} is not a number"))?;
    if id < 0 {
        bail!("{NODE_ID}={id} must be at least 0");
    }
    Ok(id)
}

/// `inter.broker.listener.name`, else Kafka's default (the listener named
/// after `security.inter.broker.protocol`, PLAINTEXT), else the first
/// listener that is not a controller's.
fn inter_broker_listener(
    config: &BrokerConfig,
    listeners: &[String],
    controller_names: &[String],
) -> Result<String> {
    let name = match explicit(config, INTER_BROKER_LISTENER_NAME) {
        Some(name) => name.to_string(),
        None if listeners.iter().any(|l| l == "PLAINTEXT") => "PLAINTEXT".to_string(),
        None => match listeners.iter().find(|l| !controller_names.contains(l)) {
            Some(first) => first.clone(),
            None => bail!(
                "no listener for brokers: every one of listeners is a controller listener \
                 ({CONTROLLER_LISTENER_NAMES}); add one or set {INTER_BROKER_LISTENER_NAME}"
            ),
        },
    };
    if !listeners.contains(&name) {
        bail!(
            "{INTER_BROKER_LISTENER_NAME}={name} is not among listeners ({})",
            listeners.join(",")
        );
    }
    if controller_names.contains(&name) {
        bail!(
            "{INTER_BROKER_LISTENER_NAME}={name} is a controller listener \
             ({CONTROLLER_LISTENER_NAMES}): brokers must not replicate over it"
        );
    }
    Ok(name)
}

fn millis(config: &BrokerConfig, name: &str, default: u64) -> Result<Duration> {
    let ms = match explicit(config, name) {
        None => default,
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms > 0)
            .with_context(|| format!("{name}={raw} must be a positive number of milliseconds"))?,
    };
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMBINED: &[&str] = &[
        "node.id=2",
        "process.roles=broker,controller",
        "controller.quorum.voters=1@127.0.0.1:19092,2@127.0.0.1:19093,3@[::1]:19094",
        "controller.listener.names=CONTROLLER",
        "listeners=PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:19093",
    ];

    fn config(pairs: &[&str]) -> BrokerConfig {
        BrokerConfig::from_pairs(pairs)
    }

    /// The combined config with `changes` applied after it.
    fn combined(changes: &[&str]) -> Result<Option<ClusterConfig>> {
        let all: Vec<&str> = COMBINED.iter().chain(changes).copied().collect();
        ClusterConfig::from(&config(&all))
    }

    /// The error message, which must name `key`.
    fn error_naming(result: Result<Option<ClusterConfig>>, key: &str) -> String {
        let message = format!("{:#}", result.unwrap_err());
        assert!(message.contains(key), "{message:?} does not name {key}");
        message
    }

    /// The error message for the combined node with one `change`, which must name `key`.
    fn refused(change: &str, key: &str) -> String {
        error_naming(combined(&[change]), key)
    }

    #[test]
    fn no_quorum_is_the_single_node_broker() {
        assert_eq!(ClusterConfig::from(&BrokerConfig::default()).unwrap(), None);
        let plain = config(&["node.id=7", "listeners=PLAINTEXT://127.0.0.1:9092"]);
        assert_eq!(ClusterConfig::from(&plain).unwrap(), None);
        // Blank values count as unset.
        let blank = config(&["process.roles=", "controller.quorum.voters= "]);
        assert_eq!(ClusterConfig::from(&blank).unwrap(), None);
    }

    #[test]
    fn combined_mode_parses_with_kafkas_defaults() {
        let cluster = combined(&[]).unwrap().unwrap();
        assert_eq!(cluster.node_id, 2);
        assert_eq!(cluster.roles, ProcessRoles::Combined);
        assert!(cluster.roles.is_broker() && cluster.roles.is_controller());
        assert_eq!(cluster.voters.len(), 3);
        assert_eq!(
            cluster.voters[2],
            Voter {
                id: 3,
                host: "::1".into(),
                port: 19094
            }
        );
        assert_eq!(cluster.own_voter().map(|v| v.port), Some(19093));
        assert_eq!(cluster.controller_listener_names, ["CONTROLLER"]);
        assert_eq!(
            cluster.inter_broker_listener_name.as_deref(),
            Some("PLAINTEXT")
        );
        assert_eq!(cluster.session_timeout, Duration::from_millis(9000));
        assert_eq!(cluster.heartbeat_interval, Duration::from_millis(2000));

        let tuned = combined(&[
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "listeners=INTERNAL://127.0.0.1:9093,CONTROLLER://127.0.0.1:19093",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(tuned.session_timeout, Duration::from_millis(3000));
        assert_eq!(tuned.heartbeat_interval, Duration::from_millis(500));
        assert_eq!(
            tuned.inter_broker_listener_name.as_deref(),
            Some("INTERNAL"),
            "no PLAINTEXT listener: the first non-controller one"
        );
    }

    #[test]
    fn broker_only_and_controller_only_nodes() {
        let broker = combined(&[
            "node.id=4",
            "process.roles=broker",
            "listeners=PLAINTEXT://127.0.0.1:9095",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(broker.roles, ProcessRoles::Broker);
        assert_eq!(broker.own_voter(), None);
        let controller = combined(&[
            "process.roles=controller",
            "listeners=CONTROLLER://127.0.0.1:19093",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(controller.roles, ProcessRoles::Controller);
        assert_eq!(controller.inter_broker_listener_name, None);
    }

    #[test]
    fn roles_without_voters_and_voters_without_roles() {
        let roles_only = ClusterConfig::from(&config(&["node.id=1", "process.roles=broker"]));
        error_naming(roles_only, QUORUM_VOTERS);
        let voters_only = ClusterConfig::from(&config(&[
            "node.id=1",
            "controller.quorum.voters=1@127.0.0.1:19092",
        ]));
        error_naming(voters_only, PROCESS_ROLES);
    }

    #[test]
    fn bad_roles() {
        error_naming(combined(&["process.roles=broker,leader"]), PROCESS_ROLES);
        error_naming(combined(&["process.roles=broker,broker"]), PROCESS_ROLES);
    }

    #[test]
    fn a_controller_must_be_a_voter_and_a_broker_must_not() {
        let message = error_naming(combined(&["node.id=9"]), QUORUM_VOTERS);
        assert!(message.contains(NODE_ID), "{message}");
        let broker_voter = combined(&[
            "process.roles=broker",
            "listeners=PLAINTEXT://127.0.0.1:9093",
        ]);
        error_naming(broker_voter, QUORUM_VOTERS);
    }

    #[test]
    fn node_id_must_be_explicit_in_a_cluster() {
        let pairs: Vec<&str> = COMBINED[1..].to_vec();
        error_naming(ClusterConfig::from(&config(&pairs)), NODE_ID);
        error_naming(combined(&["node.id=x"]), NODE_ID);
        error_naming(combined(&["node.id=-1"]), NODE_ID);
    }

    #[test]
    fn duplicate_voter_ids() {
        let message = error_naming(
            combined(&["controller.quorum.voters=1@127.0.0.1:19092,2@h:1,1@127.0.0.1:19093"]),
            QUORUM_VOTERS,
        );
        assert!(message.contains("more than once"), "{message}");
    }

    #[test]
    fn unparseable_voters() {
        for bad in [
            "1@127.0.0.1",
            "1:127.0.0.1:19092",
            "x@127.0.0.1:19092",
            "-1@127.0.0.1:19092",
            "1@127.0.0.1:99999",
            "1@:19092",
            "1@127.0.0.1:19092,,2@127.0.0.1:19093",
        ] {
            refused(&format!("controller.quorum.voters={bad}"), QUORUM_VOTERS);
        }
    }

    #[test]
    fn controller_listener_names() {
        refused("controller.listener.names=", CONTROLLER_LISTENER_NAMES);
        let message = refused("controller.listener.names=RAFT", CONTROLLER_LISTENER_NAMES);
        assert!(message.contains("RAFT"), "{message}");
        // A broker-only node must not listen as a controller.
        let broker_listening = combined(&["node.id=4", "process.roles=broker"]);
        error_naming(broker_listening, CONTROLLER_LISTENER_NAMES);
    }

    #[test]
    fn inter_broker_listener() {
        for change in [
            "inter.broker.listener.name=REPLICATION",
            "inter.broker.listener.name=CONTROLLER",
            "listeners=CONTROLLER://127.0.0.1:19093",
        ] {
            refused(change, INTER_BROKER_LISTENER_NAME);
        }
    }

    #[test]
    fn timeouts() {
        refused("broker.session.timeout.ms=soon", SESSION_TIMEOUT_MS);
        refused("broker.heartbeat.interval.ms=0", HEARTBEAT_INTERVAL_MS);
        refused("broker.heartbeat.interval.ms=9000", HEARTBEAT_INTERVAL_MS);
    }
}
