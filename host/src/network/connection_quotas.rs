//! Connection admission, Kafka's `ConnectionQuotas`.
//!
//! - `max.connections` (broker-wide) and
//!   `listener.name.<listener>.max.connections`: when either is reached,
//!   the listener that accepted a connection waits (accepting nothing
//!   more) until a connection closes, as Kafka's acceptor blocks. Clients
//!   meanwhile see their connection established by the kernel but not
//!   answered.
//! - `max.connections.per.ip`, with `max.connections.per.ip.overrides`
//!   (`host:count,...`): a connection from an address that already has
//!   its maximum is closed at once.
//!
//! An admitted connection holds a [`ConnectionSlot`] for its life; its
//! drop frees the slot and wakes a waiting listener.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::{Context, Result};
use tokio::sync::Notify;
use tracing::debug;

use crate::config::BrokerConfig;
use crate::metrics::Metrics;

/// The limits, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaLimits {
    pub max_connections: usize,
    /// By listener name, where `listener.name.<name>.max.connections` is set.
    pub listener_max_connections: HashMap<String, usize>,
    pub max_per_ip: usize,
    pub per_ip_overrides: HashMap<IpAddr, usize>,
}

impl QuotaLimits {
    /// From the broker config; resolves the host names of the per-IP
    /// overrides now, as Kafka does, so a name that does not resolve fails
    /// the start.
    pub fn from_config(config: &BrokerConfig) -> Result<Self> {
        let mut listener_max_connections = HashMap::new();
        for listener in config.listeners()? {
            if let Some(max) = config.listener_max_connections(&listener.name)? {
                listener_max_connections.insert(listener.name.clone(), count(max));
            }
        }
        let mut per_ip_overrides = HashMap::new();
        for (host, max) in config.max_connections_per_ip_overrides()? {
            for address in resolve(&host)? {
                per_ip_overrides.insert(address, count(max));
            }
        }
        Ok(Self {
            max_connections: count(config.max_connections()?),
            listener_max_connections,
            max_per_ip: count(config.max_connections_per_ip()?),
            per_ip_overrides,
        })
    }
}

/// A configured maximum; a negative override admits nothing, as in Kafka.
fn count(max: i32) -> usize {
    usize::try_from(max).unwrap_or(0)
}

/// The addresses of an override's host: itself if it is an IP address,
/// else what the name resolves to.
fn resolve(host: &str) -> Result<Vec<IpAddr>> {
    if let Ok(address) = host.parse::<IpAddr>() {
        return Ok(vec![address.to_canonical()]);
    }
    let addresses: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .with_context(|| format!("max.connections.per.ip.overrides: cannot resolve {host:?}"))?
        .map(|address| address.ip().to_canonical())
        .collect();
    if addresses.is_empty() {
        anyhow::bail!("max.connections.per.ip.overrides: {host:?} has no address");
    }
    Ok(addresses)
}

#[derive(Default)]
struct Counts {
    total: usize,
    listeners: HashMap<String, usize>,
    addresses: HashMap<IpAddr, usize>,
}

/// Open connections against the limits.
pub struct ConnectionQuotas {
    limits: QuotaLimits,
    counts: Mutex<Counts>,
    freed: Notify,
    metrics: Arc<Metrics>,
}

/// A connection refused because its address has its maximum.
#[derive(Debug)]
pub struct TooManyConnections {
    pub address: IpAddr,
    pub max: usize,
}

impl std::fmt::Display for TooManyConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rejected connection from {}, address already has the configured maximum of {} connections",
            self.address, self.max
        )
    }
}

impl ConnectionQuotas {
    pub fn new(limits: QuotaLimits, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            limits,
            counts: Mutex::new(Counts::default()),
            freed: Notify::new(),
            metrics,
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        crate::sync::lock(&self.counts)
    }

    /// Admits a connection accepted on `listener` from `address`: waits
    /// while the broker or the listener is at its maximum, then refuses it
    /// if its address is at its own.
    pub async fn admit(
        self: &Arc<Self>,
        listener: &str,
        address: IpAddr,
    ) -> Result<ConnectionSlot, TooManyConnections> {
        let address = address.to_canonical();
        let mut blocked = false;
        loop {
            // Registered before the check, so a close between the check
            // and the wait is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(admitted) = self.try_admit(listener, address) {
                return admitted;
            }
            if !blocked {
                blocked = true;
                self.metrics
                    .connection_quotas
                    .blocked
                    .fetch_add(1, Ordering::Relaxed);
                debug!(
                    listener,
                    "max.connections reached: not accepting until a connection closes"
                );
            }
            freed.await;
        }
    }

    /// `None` while there is no slot on the broker or the listener.
    fn try_admit(
        self: &Arc<Self>,
        listener: &str,
        address: IpAddr,
    ) -> Option<Result<ConnectionSlot, TooManyConnections>> {
        let mut counts = self.counts();
        let on_listener = counts.listeners.get(listener).copied().unwrap_or(0);
        let listener_max = self
            .limits
            .listener_max_connections
            .get(listener)
            .copied()
            .unwrap_or(usize::MAX);
        if on_listener >= listener_max || counts.total >= self.limits.max_connections {
            return None;
        }
        let max = self
            .limits
            .per_ip_overrides
            .get(&address)
            .copied()
            .unwrap_or(self.limits.max_per_ip);
        let from_address = counts.addresses.get(&address).copied().unwrap_or(0);
        if from_address >= max {
            self.metrics
                .connection_quotas
                .rejected_per_ip
                .fetch_add(1, Ordering::Relaxed);
            return Some(Err(TooManyConnections { address, max }));
        }
        counts.total += 1;
        *counts.listeners.entry(listener.to_string()).or_default() += 1;
        *counts.addresses.entry(address).or_default() += 1;
        Some(Ok(ConnectionSlot {
            quotas: Arc::clone(self),
            listener: listener.to_string(),
            address,
        }))
    }

    fn release(&self, listener: &str, address: IpAddr) {
        let mut counts = self.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(count) = counts.listeners.get_mut(listener) {
            *count = count.saturating_sub(1);
        }
        if let Some(count) = counts.addresses.get_mut(&address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.addresses.remove(&address);
            }
        }
        drop(counts);
        self.freed.notify_waiters();
    }
}

/// An admitted connection's place in the counts.
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    listener: String,
    address: IpAddr,
}

impl std::fmt::Debug for ConnectionSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnectionSlot({} from {})", self.listener, self.address)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.quotas.release(&self.listener, self.address);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn quotas(settings: &[&str]) -> Arc<ConnectionQuotas> {
        let mut config = BrokerConfig::default();
        for pair in settings {
            config.set_pair(pair).unwrap();
        }
        config.validate().unwrap();
        let limits = QuotaLimits::from_config(&config).unwrap();
        ConnectionQuotas::new(limits, Arc::new(Metrics::default()))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[tokio::test]
    async fn per_ip_limit_and_overrides() {
        let quotas = quotas(&[
            "max.connections.per.ip=2",
            "max.connections.per.ip.overrides=10.0.0.1:0, 127.0.0.1:3",
        ]);
        let local = ip("127.0.0.1");
        let other = ip("10.0.0.2");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(quotas.admit("PLAINTEXT", local).await.unwrap());
        }
        let refused = quotas.admit("PLAINTEXT", local).await.unwrap_err();
        assert_eq!(refused.max, 3);
        // An IPv4-mapped IPv6 peer is the same address.
        assert!(quotas
            .admit("PLAINTEXT", ip("::ffff:127.0.0.1"))
            .await
            .is_err());
        assert!(quotas.admit("PLAINTEXT", ip("10.0.0.1")).await.is_err());
        held.push(quotas.admit("PLAINTEXT", other).await.unwrap());
        held.push(quotas.admit("PLAINTEXT", other).await.unwrap());
        assert!(quotas.admit("PLAINTEXT", other).await.is_err());
        held.remove(0);
        held.push(quotas.admit("PLAINTEXT", local).await.unwrap());
    }

    #[tokio::test]
    async fn max_connections_waits_for_a_slot() {
        let quotas = quotas(&[
            "listeners=PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            "max.connections=3",
            "listener.name.other.max.connections=1",
        ]);
        let local = ip("127.0.0.1");
        let spawn_admit = |listener: &'static str| {
            let quotas = Arc::clone(&quotas);
            tokio::spawn(async move { quotas.admit(listener, local).await })
        };
        let first = quotas.admit("OTHER", local).await.unwrap();
        let waiting_other = spawn_admit("OTHER");
        let _second = quotas.admit("PLAINTEXT", local).await.unwrap();
        let third = quotas.admit("PLAINTEXT", local).await.unwrap();
        let waiting = spawn_admit("PLAINTEXT");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "the broker has max.connections");
        assert!(!waiting_other.is_finished(), "OTHER has its maximum");
        drop(third);
        let _fourth = waiting.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting_other.is_finished(), "OTHER still has its maximum");
        drop(first);
        let _fifth = waiting_other.await.unwrap().unwrap();
        let full = spawn_admit("PLAINTEXT");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!full.is_finished(), "the broker is full again");
    }
}
