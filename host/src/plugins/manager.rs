//! The plugin manager: loads the plugin directory at start, watches it, and
//! serves the admin API's load/unload. Every change goes through one lock,
//! so the watcher and the admin API never race each other.
//!
//! A new or changed `.wasm` file is compiled off the request path, checked
//! (world, imports, `describe()`), and only then swapped in; a refused
//! module leaves the previous version serving and its reason is kept for
//! the admin API. A removed file unloads its handler. A refused load also
//! re-reads the grants of the version already loaded from that file, and
//! unloads it when they no longer cover what it uses. Writers should put a
//! module in place atomically (write elsewhere, then rename); a file caught
//! half-written is refused and retried when it changes again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::plugins::grants;
use crate::plugins::handler::LoadedHandler;
use crate::plugins::interception::Chains;
use crate::plugins::loader::{Loaded, Loader};
use crate::plugins::PluginHost;

/// What identifies a file version cheaply: modification time and size.
type FileStamp = (SystemTime, u64);

pub struct PluginManager {
    loader: Loader,
    host: PluginHost,
    dir: PathBuf,
    changes: tokio::sync::Mutex<()>,
    seen: Mutex<HashMap<PathBuf, FileStamp>>,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as u64)
        .unwrap_or(0)
}

impl PluginManager {
    pub fn new(loader: Loader, host: PluginHost) -> Self {
        let dir = host.services.config.plugin_dir();
        Self {
            loader,
            host,
            dir,
            changes: tokio::sync::Mutex::new(()),
            seen: Mutex::new(HashMap::new()),
        }
    }

    fn remember(&self, path: &Path) {
        if let (Some(stamp), Ok(mut seen)) = (stamp(path), self.seen.lock()) {
            seen.insert(path.to_path_buf(), stamp);
        }
    }

    /// Loads every module of the directory (compiling in parallel) and
    /// activates the configured authorizer.
    pub async fn load_all(&self) -> Result<()> {
        let _guard = self.changes.lock().await;
        self.host
            .registry
            .set_chains(Chains::from_config(&self.host.services.config)?);
        std::fs::create_dir_all(&self.dir)?;
        let files = Loader::module_files(&self.dir)?;
        let loads = files
            .iter()
            .map(|path| self.loader.load_file(path, &self.host));
        let results = futures_util::future::join_all(loads).await;
        for (path, result) in files.iter().zip(results) {
            self.remember(path);
            if let Err(reason) = result
                .map_err(|e| format!("{e:#}"))
                .and_then(|loaded| self.install(loaded))
            {
                error!(module = %path.display(), "refused module: {reason}");
                self.refuse(path, reason);
            }
        }
        if self.host.registry.handlers().is_empty() {
            bail!(
                "no handler modules could be loaded from {}",
                self.dir.display()
            );
        }
        if let Some(name) = self.host.authorization.active_name() {
            if self.host.registry.authorizer(&name).is_none() {
                bail!(
                    "authorizer {name:?} (the `authorizer` config, or the choice last made with \
                     `gregor authorizer use`, kept in the log dir's security/authorizer.json) \
                     is not among the loaded modules of {}",
                    self.dir.display()
                );
            }
        }
        Ok(())
    }

    /// Puts a loaded module into service; the text says what happened.
    fn install(&self, loaded: Loaded) -> Result<String, String> {
        let result = self.install_inner(loaded);
        if result.is_ok() {
            self.host.services.metrics.record_load(true);
        }
        result
    }

    fn install_inner(&self, loaded: Loaded) -> Result<String, String> {
        let registry = &self.host.registry;
        match loaded {
            Loaded::Handler(handler) => {
                let handler = Arc::new(handler);
                let path = handler.source().path.clone();
                let info = handler.info().clone();
                let previous = registry.install(handler)?;
                registry.clear_failure(&path);
                let verb = if previous.is_some() {
                    "replaced"
                } else {
                    "loaded"
                };
                Ok(format!(
                    "{verb} handler {} (api key {}, versions {}..={})",
                    info.name, info.api_key, info.min_version, info.max_version
                ))
            }
            Loaded::Interceptor(interceptor) => {
                let interceptor = Arc::new(interceptor);
                let path = interceptor.source().path.clone();
                let what = format!(
                    "interceptor {} (api keys {:?})",
                    interceptor.source().name,
                    interceptor.info().api_keys
                );
                let previous = registry.install_interceptor(interceptor);
                registry.clear_failure(&path);
                let verb = if previous.is_some() {
                    "replaced"
                } else {
                    "loaded"
                };
                Ok(format!("{verb} {what}"))
            }
            Loaded::Authorizer(authorizer) => {
                let authorizer = Arc::new(authorizer);
                let name = authorizer.source().name.to_string();
                let path = authorizer.source().path.clone();
                registry.install_authorizer(&name, Arc::clone(&authorizer));
                registry.clear_failure(&path);
                if self.host.authorization.active_name().as_deref() == Some(name.as_str()) {
                    self.host.authorization.set_active(Some(authorizer));
                    info!(authorizer = %name, "authorizer active");
                }
                Ok(format!("loaded authorizer {name}"))
            }
        }
    }

    async fn apply_file_locked(&self, path: &Path) -> Result<String, String> {
        let started = Instant::now();
        self.remember(path);
        let result = match self.loader.load_file(path, &self.host).await {
            Ok(loaded) => self.install(loaded),
            Err(error) => Err(format!("{error:#}")),
        };
        match &result {
            Ok(what) => info!(
                reload_ms = started.elapsed().as_millis() as u64,
                module = %path.display(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "{what}"
            ),
            Err(reason) => {
                self.refuse(path, reason.clone());
                match self.revoked(path) {
                    Some(what) => {
                        error!(module = %path.display(), "refused module: {reason}; {what}")
                    }
                    None => {
                        error!(module = %path.display(), "refused module, previous version keeps serving: {reason}")
                    }
                }
            }
        }
        result
    }

    /// After a refused load of `path`: the version loaded from it keeps
    /// serving only if its grants, read again now, still cover what it
    /// uses; otherwise it is unloaded (a revoked grant takes effect at the
    /// module's next load, whether or not that load succeeds).
    fn revoked(&self, path: &Path) -> Option<String> {
        let registry = &self.host.registry;
        let loaded = registry
            .handlers()
            .into_iter()
            .find(|handler| handler.source().path == path)?;
        let source = loaded.source();
        let layers = self.host.services.dynamic.broker_layers();
        let uncovered = match grants::resolve(&source.name, &self.host.services.config, &layers) {
            Ok(now) => grants::uncovered(&source.grants.used, &now),
            Err(error) => vec![format!("{error:#}")],
        };
        if uncovered.is_empty() {
            return None;
        }
        registry.unload_path(path)?;
        let what = format!(
            "the loaded version is unloaded: it is no longer granted {}",
            uncovered.join(", ")
        );
        warn!(module = %path.display(), "{what}");
        Some(what)
    }

    /// Records a refused module for the admin API and the metrics.
    fn refuse(&self, path: &Path, reason: String) {
        self.host.services.metrics.record_load(false);
        self.host.registry.record_failure(path, reason);
    }

    /// Unloads whatever was loaded from `path`.
    async fn remove_file_locked(&self, path: &Path) -> Option<String> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.remove(path);
        }
        self.host.registry.clear_failure(path);
        if let Some(handler) = self.host.registry.unload_path(path) {
            let what = format!(
                "unloaded handler {} (api key {})",
                handler.info().name,
                handler.info().api_key
            );
            info!(module = %path.display(), "{what}");
            return Some(what);
        }
        if let Some(name) = self.host.registry.unload_interceptor_path(path) {
            let what = format!("unloaded interceptor {name}");
            info!(module = %path.display(), "{what}");
            return Some(what);
        }
        if let Some(name) = self.host.registry.unload_authorizer_path(path) {
            if self.host.authorization.active_name().as_deref() == Some(name.as_str()) {
                warn!(authorizer = %name, "the active authorizer's file was removed; it stays active until replaced");
            }
            return Some(format!("unloaded authorizer {name}"));
        }
        None
    }

    /// Admin upload: validate first, then write the file atomically and
    /// swap the module in. A refused module changes nothing.
    pub async fn upload(&self, name: &str, bytes: Vec<u8>) -> Result<String, String> {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "invalid module name {name:?}: use letters, digits, '_' and '-'"
            ));
        }
        let _guard = self.changes.lock().await;
        let path = self.dir.join(format!("{name}.wasm"));
        let loaded = match self
            .loader
            .load_bytes(&path, bytes.clone(), &self.host)
            .await
        {
            Ok(loaded) => loaded,
            Err(error) => {
                self.host.services.metrics.record_load(false);
                let reason = format!("{error:#}");
                return Err(match self.revoked(&path) {
                    Some(what) => format!("{reason}; {what}"),
                    None => reason,
                });
            }
        };
        let tmp = self.dir.join(format!(".{name}.upload"));
        std::fs::write(&tmp, &bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        self.remember(&path);
        let what = self.install(loaded)?;
        info!(module = %path.display(), "{what} (uploaded)");
        Ok(what)
    }

    /// Loads `bytes` as a new version of the loaded handler module `name`,
    /// under that module's name, file and grants, without installing it
    /// (a canary or a shadow, `plugins::rollout`). Answers the serving
    /// version and the new one, which must serve the same ApiKey.
    pub async fn load_version(
        &self,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<(Arc<LoadedHandler>, LoadedHandler), String> {
        let _guard = self.changes.lock().await;
        let handlers = self.host.registry.handlers();
        let Some(serving) = handlers
            .iter()
            .find(|handler| handler.source().name.as_ref() == name)
            .cloned()
        else {
            let loaded: Vec<&str> = handlers.iter().map(|h| h.source().name.as_ref()).collect();
            return Err(format!(
                "no handler module named {name:?} is loaded: a new version rolls out beside \
                 the module it would replace (name it with --name; loaded: {})",
                loaded.join(", ")
            ));
        };
        let path = serving.source().path.clone();
        let loaded = self
            .loader
            .load_bytes(&path, bytes, &self.host)
            .await
            .map_err(|error| format!("{error:#}"))?;
        let Loaded::Handler(candidate) = loaded else {
            return Err("the module is not a handler".to_string());
        };
        let (want, got) = (serving.info().api_key, candidate.info().api_key);
        if want != got {
            return Err(format!(
                "the new version serves api key {got}, {name} serves api key {want}"
            ));
        }
        Ok((serving, candidate))
    }

    /// Makes `bytes` the serving version of the handler loaded from
    /// `path`: written over the module's file (aside, then renamed), then
    /// loaded and swapped in as a hot reload is (the compile cache makes
    /// the load cheap). Requests in flight finish on the version they had.
    pub async fn promote_version(&self, path: &Path, bytes: &[u8]) -> Result<String, String> {
        let _guard = self.changes.lock().await;
        let loaded = self
            .loader
            .load_bytes(path, bytes.to_vec(), &self.host)
            .await
            .map_err(|error| format!("{error:#}"))?;
        let tmp = path.with_extension("promote");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        self.remember(path);
        let what = self.install(loaded)?;
        info!(module = %path.display(), "{what} (promoted)");
        Ok(what)
    }

    /// Admin unload: remove the module's file and unload it.
    pub async fn unload(&self, name: &str) -> Result<String, String> {
        let _guard = self.changes.lock().await;
        let path = self.dir.join(format!("{name}.wasm"));
        if let Err(error) = std::fs::remove_file(&path) {
            if error.kind() != std::io::ErrorKind::NotFound {
                return Err(format!("removing {}: {error}", path.display()));
            }
        }
        self.remove_file_locked(&path)
            .await
            .ok_or_else(|| format!("no module named {name} is loaded"))
    }

    /// Makes the loaded authorizer `name` the one that decides (None: no
    /// authorizer, everything allowed), live: the next authorization asks
    /// it, and decisions cached for the previous one are dropped. The
    /// choice is persisted and wins over the `authorizer` config at the
    /// next start. On a cluster node it is proposed to the metadata log and
    /// every node switches.
    pub async fn use_authorizer(&self, name: Option<&str>) -> Result<String, String> {
        let _guard = self.changes.lock().await;
        let authorizer = match name {
            Some(name) => Some(self.host.registry.authorizer(name).ok_or_else(|| {
                let loaded = self.loaded_authorizers();
                format!(
                    "no authorizer named {name:?} is loaded (loaded: {})",
                    if loaded.is_empty() {
                        "none".to_string()
                    } else {
                        loaded.join(", ")
                    }
                )
            })?),
            None => None,
        };
        match self.host.authorization.choice_log() {
            // A cluster node: every node follows the log's choice, this
            // one included by the time the proposal is answered.
            Some(log) => log.choose(name.map(str::to_string)).await?,
            None => self
                .host
                .authorization
                .choose(name, authorizer)
                .map_err(|error| format!("persisting the authorizer choice: {error}"))?,
        }
        let what = match name {
            Some(name) => format!("authorizer {name} active"),
            None => "no authorizer active: every action is allowed".to_string(),
        };
        info!("{what}");
        Ok(what)
    }

    /// The names of the loaded authorizers.
    fn loaded_authorizers(&self) -> Vec<String> {
        self.host
            .registry
            .authorizers()
            .iter()
            .map(|a| a.source().name.to_string())
            .collect()
    }

    /// The active authorizer and the loaded ones, for the admin API.
    pub fn authorizer_status(&self) -> Value {
        use std::sync::atomic::Ordering::Relaxed;
        let authorization = &self.host.authorization;
        let loaded = self.loaded_authorizers();
        json!({
            "active": authorization.active_name(),
            "loaded": loaded,
            "cache_hits": authorization.cache_hits.load(Relaxed),
            "cache_misses": authorization.cache_misses.load(Relaxed),
        })
    }

    /// One pass of the directory watcher. It compares the directory with
    /// what it has seen under the changes lock: an upload in progress puts
    /// its file in place and remembers it before the pass looks, so the
    /// file is not loaded a second time as a replacement of itself (which
    /// started the module's counts again; seen once, a trap uncounted).
    async fn scan(&self) {
        let _guard = self.changes.lock().await;
        let Ok(files) = Loader::module_files(&self.dir) else {
            return;
        };
        let known: HashMap<PathBuf, FileStamp> = match self.seen.lock() {
            Ok(seen) => seen.clone(),
            Err(_) => return,
        };
        let mut changed = Vec::new();
        for path in &files {
            if stamp(path) != known.get(path).copied() {
                changed.push(path.clone());
            }
        }
        let removed: Vec<PathBuf> = known
            .keys()
            .filter(|path| !files.contains(path))
            .cloned()
            .collect();
        if changed.is_empty() && removed.is_empty() {
            return;
        }
        for path in removed {
            self.remove_file_locked(&path).await;
        }
        for path in changed {
            let _ = self.apply_file_locked(&path).await;
        }
    }

    /// Watches the plugin directory until shutdown: file-system events
    /// (inotify) trigger a scan at once, so a module renamed into place is
    /// compiled without waiting for a tick; the periodic scan every
    /// `interval` stays as the fallback (events can be missed, or be
    /// unavailable on some file systems).
    pub async fn watch(self: Arc<Self>, interval: Duration, mut shutdown: watch::Receiver<bool>) {
        let (changed, mut changes) = tokio::sync::mpsc::channel::<()>(1);
        let _events = watch_events(&self.dir, changed);
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => self.scan().await,
                Some(()) = changes.recv() => self.scan().await,
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Everything the admin API lists about loaded and refused modules.
    pub fn status(&self) -> Value {
        use std::sync::atomic::Ordering::Relaxed;
        let registry = &self.host.registry;
        let handlers: Vec<Value> = registry
            .handlers()
            .iter()
            .map(|handler| {
                let info = handler.info();
                let source = handler.source();
                json!({
                    "kind": "handler",
                    "name": source.name.as_ref(),
                    "file": source.path.display().to_string(),
                    "api_key": info.api_key,
                    "api": info.name,
                    "min_version": info.min_version,
                    "max_version": info.max_version,
                    "first_flexible_version": info.first_flexible_version,
                    "sha256": source.content_hash,
                    "loaded_at_ms": millis(source.loaded_at),
                    "calls": handler.stats.calls.load(Relaxed),
                    "traps": handler.stats.traps.load(Relaxed),
                    "timeouts": handler.stats.timeouts.load(Relaxed),
                    "errors": handler.stats.traps.load(Relaxed) + handler.stats.timeouts.load(Relaxed),
                    "instantiations": handler.stats.instantiations.load(Relaxed),
                    "grants": source.grants,
                    "metering": crate::plugins::metering::to_json(&handler.stats.meter.reading()),
                })
            })
            .collect();
        let active_name = self.host.authorization.active_name();
        let active = active_name.as_deref();
        let authorizers: Vec<Value> = registry
            .authorizers()
            .iter()
            .map(|authorizer| {
                let source = authorizer.source();
                json!({
                    "kind": "authorizer",
                    "name": source.name.as_ref(),
                    "file": source.path.display().to_string(),
                    "active": active == Some(source.name.as_ref()),
                    "sha256": source.content_hash,
                    "loaded_at_ms": millis(source.loaded_at),
                    "calls": authorizer.calls.load(Relaxed),
                    "errors": authorizer.failures.load(Relaxed),
                    "grants": source.grants,
                })
            })
            .collect();
        let chains = registry.chains();
        let interceptors: Vec<Value> = registry
            .interceptors()
            .iter()
            .map(|interceptor| {
                let source = interceptor.source();
                let wrapping: Vec<i16> = chains
                    .iter()
                    .filter(|(_, names)| names.iter().any(|n| n.as_ref() == source.name.as_ref()))
                    .map(|(key, _)| key)
                    .collect();
                json!({
                    "kind": "interceptor",
                    "name": source.name.as_ref(),
                    "file": source.path.display().to_string(),
                    "api_keys": interceptor.info().api_keys,
                    "wrapping": wrapping,
                    "sha256": source.content_hash,
                    "loaded_at_ms": millis(source.loaded_at),
                    "calls": interceptor.stats.calls.load(Relaxed),
                    "errors": interceptor.stats.traps.load(Relaxed) + interceptor.stats.timeouts.load(Relaxed),
                    "instantiations": interceptor.stats.instantiations.load(Relaxed),
                    "grants": source.grants,
                    "metering": crate::plugins::metering::to_json(&interceptor.stats.meter.reading()),
                })
            })
            .collect();
        let chain_list: Vec<Value> = chains
            .iter()
            .map(|(key, names)| {
                let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
                json!({ "api_key": key, "interceptors": names })
            })
            .collect();
        let refused: Vec<Value> = registry
            .failures()
            .into_iter()
            .map(|(path, failure)| {
                json!({
                    "file": path.display().to_string(),
                    "reason": failure.reason,
                    "at_ms": millis(failure.at),
                })
            })
            .collect();
        json!({
            "handlers": handlers,
            "authorizers": authorizers,
            "interceptors": interceptors,
            "chains": chain_list,
            "refused": refused,
        })
    }
}

/// Starts an inotify watch on `dir` that signals `changed` when a file is
/// closed after writing, renamed in or out, or removed (not on every write,
/// so a module being copied in is looked at once it is complete). Signals
/// coalesce: one pending scan covers any number of events. None (polling
/// only) if the watch cannot be set up.
fn watch_events(
    dir: &Path,
    changed: tokio::sync::mpsc::Sender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    use notify::{EventKind, RecursiveMode, Watcher};
    let handler = move |event: notify::Result<notify::Event>| {
        let relevant = event.is_ok_and(|event| {
            matches!(
                event.kind,
                EventKind::Access(AccessKind::Close(AccessMode::Write))
                    | EventKind::Modify(ModifyKind::Name(_))
                    | EventKind::Remove(_)
            )
        });
        if relevant {
            // Full means a scan is already pending.
            let _ = changed.try_send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(error) => {
            warn!("plugin directory events unavailable, polling only: {error}");
            return None;
        }
    };
    if let Err(error) = watcher.watch(dir, RecursiveMode::NonRecursive) {
        warn!(dir = %dir.display(), "cannot watch the plugin directory, polling only: {error}");
        return None;
    }
    Some(watcher)
}
