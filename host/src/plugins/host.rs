//! What the plugin runtime is handed by the broker that assembles it.

use std::sync::{Arc, OnceLock};

use crate::cluster::controller::active::ActiveController;
use crate::cluster::membership::forward::ControllerForwarder;

use crate::plugins::authorization::Authorization;
use crate::plugins::limits::GuestMemoryBudget;
use crate::plugins::registry::Registry;
use crate::services::Services;

/// What every module instance is given: the broker's services, the
/// registry (ApiVersions lists what it serves) and the authorization slot
/// the `authz` import asks. Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    pub services: Arc<Services>,
    pub registry: Arc<Registry>,
    pub authorization: Arc<Authorization>,
    /// The active controller seam, set at start on a node with the
    /// controller role (the `controller` import).
    pub controller: Arc<OnceLock<Arc<ActiveController>>>,
    /// Set at start on a cluster node with the broker role: forwards the
    /// controller APIs a broker listener serves (`membership::forward`).
    pub forwarder: Arc<OnceLock<Arc<ControllerForwarder>>>,
    /// Linear memory of every live instance, against
    /// `plugin.memory.total.max.bytes` (`plugins::limits`).
    pub memory_budget: Arc<GuestMemoryBudget>,
}
