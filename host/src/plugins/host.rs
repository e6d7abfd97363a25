//! What the plugin runtime is handed by the broker that assembles it.

use std::sync::Arc;

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
}
