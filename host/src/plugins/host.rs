//! What the plugin runtime is handed by the broker that assembles it.

use std::sync::{Arc, OnceLock};

use crate::cluster::controller::active::ActiveController;

use crate::plugins::authorization::Authorization;
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
}
