//! The authorizer choice on the metadata log, a module above both the
//! cluster and the plugin runtime (so the cluster never reaches into the
//! runtime): `gregor authorizer use` on any node proposes `SetAuthorizer`, and every node makes the image's
//! choice its own, so one switch holds cluster-wide (authorization must
//! not depend on which broker a client reaches).
//!
//! Until a choice is made through the log, each node keeps its own
//! (`authorizer` config or its persisted file), so a cluster configured
//! with an authorizer is never switched off by an empty image. A chosen
//! module this node lacks leaves it denying everything until the module
//! is loaded (`Authorization::follow`). The plugin runtime knows only the
//! [`ChoiceLog`] seam.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use tracing::{info, warn};

use crate::cluster::command::Command;
use crate::cluster::image::MetadataImage;
use crate::cluster::quorum::Quorum;
use crate::plugins::authorization::ChoiceLog;
use crate::plugins::PluginHost;

/// Brings this node's active authorizer to the image's choice.
struct ChoiceFollower {
    quorum: Arc<dyn Quorum<MetadataImage>>,
    plugins: PluginHost,
    /// One sync at a time, each on the newest image.
    syncing: Mutex<()>,
}

impl ChoiceFollower {
    fn sync(&self) {
        let _one = crate::sync::lock(&self.syncing);
        let image = self.quorum.image();
        let Some(name) = image.authorizer_choice() else {
            return;
        };
        let module = name.and_then(|name| self.plugins.registry.authorizer(name));
        let missing = name.filter(|_| module.is_none());
        match self.plugins.authorization.follow(name, module) {
            Ok(false) => {}
            Ok(true) => match (name, missing) {
                (_, Some(name)) => warn!(
                    authorizer = %name,
                    "the cluster chose an authorizer this node has not loaded: every action is \
                     denied until it is"
                ),
                (Some(name), None) => {
                    info!(authorizer = %name, "authorizer active (cluster choice)")
                }
                (None, _) => {
                    info!("no authorizer active (cluster choice): every action is allowed")
                }
            },
            Err(error) => warn!(%error, "persisting the cluster's authorizer choice"),
        }
    }
}

/// Proposes the choice, answered once this node follows it.
struct QuorumChoiceLog {
    follower: Arc<ChoiceFollower>,
}

impl ChoiceLog for QuorumChoiceLog {
    fn choose(&self, name: Option<String>) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let answer = self
                .follower
                .quorum
                .propose(Command::SetAuthorizer { name })
                .await;
            let follower = Arc::clone(&self.follower);
            let _ = tokio::task::spawn_blocking(move || follower.sync()).await;
            match answer {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(refusal)) => Err(refusal.message),
                Err(error) => Err(format!(
                    "the metadata quorum did not take the choice: {error}"
                )),
            }
        })
    }
}

/// Puts the authorizer choice on the log: `use_authorizer` proposes from
/// now on, and this node follows the image (now, so a restarted node
/// starts with the cluster's choice, and after every applied change).
pub fn attach(quorum: Arc<dyn Quorum<MetadataImage>>, plugins: &PluginHost) {
    let follower = Arc::new(ChoiceFollower {
        quorum: Arc::clone(&quorum),
        plugins: plugins.clone(),
        syncing: Mutex::new(()),
    });
    follower.sync();
    plugins
        .authorization
        .choose_through(Arc::new(QuorumChoiceLog {
            follower: Arc::clone(&follower),
        }));
    tokio::spawn(async move {
        let mut applied = quorum.watch();
        while applied.changed().await.is_ok() {
            let follower = Arc::clone(&follower);
            let _ = tokio::task::spawn_blocking(move || follower.sync()).await;
        }
    });
}
