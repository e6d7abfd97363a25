//! The rollout commands the admin API serves: start a canary or a shadow,
//! promote it, roll it back.

use std::sync::Arc;

use tracing::info;

use super::{short, Mode, Rollout, RolloutSettings, Selector};
use crate::config::BrokerConfig;
use crate::plugins::imports::dry_run;
use crate::plugins::manager::PluginManager;
use crate::plugins::registry::Registry;

/// Loads `bytes` as a canary of module `name`, serving what `selector`
/// picks.
pub async fn canary(
    manager: &PluginManager,
    registry: &Registry,
    config: &BrokerConfig,
    name: &str,
    bytes: Vec<u8>,
    selector: Selector,
) -> Result<String, String> {
    if selector.percent > 100 {
        return Err(format!("percent is 0 to 100, got {}", selector.percent));
    }
    let settings = RolloutSettings::from_config(config)?;
    let (serving, candidate) = manager.load_version(name, bytes.clone()).await?;
    let rollout = Rollout::new(
        Mode::Canary(selector),
        &serving,
        Arc::new(candidate),
        bytes,
        settings,
    );
    registry.rollouts.start(rollout)
}

/// Loads `bytes` as a shadow of module `name`. Refused when the module
/// uses a writing host call that has no dry-run variant.
pub async fn shadow(
    manager: &PluginManager,
    registry: &Registry,
    config: &BrokerConfig,
    name: &str,
    bytes: Vec<u8>,
) -> Result<String, String> {
    let settings = RolloutSettings::from_config(config)?;
    let (serving, candidate) = manager.load_version(name, bytes.clone()).await?;
    let unsafe_writes = dry_run::without_dry_run(&candidate.source().grants.used);
    if !unsafe_writes.is_empty() {
        return Err(format!(
            "{name} cannot run as a shadow: it uses {}, which have no dry-run variant \
             (a shadow may only write through log.append and quotas.usage, which it runs dry)",
            unsafe_writes.join(", ")
        ));
    }
    let rollout = Rollout::new(
        Mode::Shadow,
        &serving,
        Arc::new(candidate.into_dry_run()),
        bytes,
        settings,
    );
    registry.rollouts.start(rollout)
}

/// Makes the new version of `name` the serving one and ends its rollout.
pub async fn promote(
    manager: &PluginManager,
    registry: &Registry,
    name: &str,
) -> Result<String, String> {
    let rollout = registry
        .rollouts
        .active()
        .into_iter()
        .find(|rollout| rollout.module.as_ref() == name)
        .ok_or_else(|| format!("no rollout of {name} is running"))?;
    let path = rollout.candidate.source().path.clone();
    let what = manager.promote_version(&path, &rollout.bytes).await?;
    registry.rollouts.finish(name, "promoted", None)?;
    let what = format!(
        "promoted {} {} of {name}: {what}",
        rollout.mode.name(),
        short(&rollout.candidate.source().content_hash)
    );
    info!("{what}");
    Ok(what)
}

/// Ends the rollout of `name`; the serving version serves everything.
pub fn rollback(registry: &Registry, name: &str) -> Result<String, String> {
    let rollout = registry.rollouts.finish(name, "rolled back", None)?;
    let what = format!(
        "rolled back {} {} of {name}: the serving version {} serves every request",
        rollout.mode.name(),
        short(&rollout.candidate.source().content_hash),
        short(&rollout.serving_hash)
    );
    info!("{what}");
    Ok(what)
}
