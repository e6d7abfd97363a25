//! The broker, assembled: the services opened from storage
//! (`services::Services`) and the plugin runtime's own parts (the registry
//! of loaded modules and the authorizer slot), handed together to the
//! runtime as a `PluginHost`. This is the top of the host's layering: the
//! request path (`apis`), the admin endpoint and `serve` hold a `Broker`;
//! nothing it is built from refers back to it.

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::config::BrokerConfig;
use crate::plugins::authorization::Authorization;
use crate::plugins::limits::GuestMemoryBudget;
use crate::plugins::registry::Registry;
use crate::plugins::PluginHost;
use crate::services::Services;

pub struct Broker {
    pub services: Arc<Services>,
    /// What the plugin runtime is given (the same services, the registry
    /// and the authorization slot).
    pub plugins: PluginHost,
}

impl Broker {
    /// Opens (and recovers) storage under the log dir, then reads the
    /// authorizer choice persisted beside the ACLs.
    pub fn open(config: Arc<BrokerConfig>) -> Result<Self> {
        let services = Arc::new(Services::open(config)?);
        let dir = services.config.log_dir().join("security");
        let authorization = Authorization::open(
            Arc::clone(&services.acls),
            &dir,
            services.config.authorizer(),
        )
        .context("reading the authorizer choice")?;
        Ok(Self {
            plugins: PluginHost {
                services: Arc::clone(&services),
                registry: Arc::new(Registry::default()),
                authorization: Arc::new(authorization),
                controller: Default::default(),
                forwarder: Default::default(),
                memory_budget: GuestMemoryBudget::new(
                    services.config.plugin_memory_total_max_bytes()?,
                    Arc::clone(&services.metrics.guest_memory),
                ),
            },
            services,
        })
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.plugins.registry
    }

    pub fn authorization(&self) -> &Arc<Authorization> {
        &self.plugins.authorization
    }
}
