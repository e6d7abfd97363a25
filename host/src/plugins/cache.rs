//! Compiled components cached on disk, keyed by the module's content hash
//! and the engine's compatibility hash, so a restart (or reloading the
//! same file) deserializes in milliseconds instead of recompiling.
//! Entries are written to a temporary file and renamed into place, so a
//! crash never leaves a half-written artifact under a valid name.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Result;
use sha2::{Digest, Sha256};
use tracing::{debug, warn};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::plugins::WasmContext;

pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
}

/// Whether a component came from the cache or was compiled now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    Hit,
    Compiled,
}

/// The hex SHA-256 of a module's bytes: its identity everywhere.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl CompileCache {
    pub fn new(dir: &Path, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    fn entry_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}-{}.cwasm", self.engine_key))
    }

    /// The compiled component for these bytes, from the cache if possible.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        hash: &str,
    ) -> Result<(Component, CacheOutcome)> {
        let path = self.entry_path(hash);
        if path.exists() {
            // SAFETY: the file was written by `precompile_component` of an
            // engine with the same compatibility hash (it is in the name),
            // into a directory only this broker writes.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(error) => {
                    warn!(path = %path.display(), "discarding unreadable compile cache entry: {error:#}")
                }
            }
        }
        let compiled = engine
            .precompile_component(bytes)
            .wasm_context("compiling the component")?;
        if let Err(error) = self.store(&path, &compiled) {
            warn!(path = %path.display(), "cannot write compile cache entry: {error:#}");
        } else {
            debug!(path = %path.display(), "compile cache entry written");
        }
        // SAFETY: the bytes were produced just now by this engine.
        let component = unsafe { Component::deserialize(engine, &compiled) }
            .wasm_context("loading the freshly compiled component")?;
        Ok((component, CacheOutcome::Compiled))
    }

    fn store(&self, path: &Path, compiled: &[u8]) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, compiled)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}
