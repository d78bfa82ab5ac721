//! The compiled-component cache.
//!
//! Compiling a component with Cranelift costs tens of milliseconds to seconds;
//! loading a compiled one costs well under a millisecond. So each component is
//! compiled once per engine configuration and kept in the user cache directory
//! at `<cache>/components/<engine-hash>/<sha256-of-wasm>.cwasm`, where
//! `<engine-hash>` digests wasmtime's `precompile_compatibility_hash` (version,
//! target, flags). Files are written atomically (a temporary file renamed into
//! place). Deserializing compiled code is unsafe with untrusted input, so only
//! files this host wrote are ever loaded: the file must sit in our cache
//! directory under our naming scheme, be a regular file (not a symlink) owned
//! by the current user and writable by no one else, inside a directory with
//! the same properties, and carry wasmtime's precompiled-component header.
//! Anything else is ignored and recompiled.

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use super::error::PluginError;

/// The user cache root: `$TETHER_CACHE_DIR`, else `<user cache dir>/tether`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TETHER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("tether")
}

pub(crate) struct ComponentCache {
    dir: PathBuf,
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loaded {
    Compiled,
    FromCache,
}

impl ComponentCache {
    pub(crate) fn new(root: &Path, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = root
            .join("components")
            .join(format!("{:016x}", hasher.finish()));
        ComponentCache { dir }
    }

    /// Where the cache keeps compiled components for this engine.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest_hex: &str,
        source_name: &str,
    ) -> Result<(Component, Loaded), PluginError> {
        let path = self.dir.join(format!("{digest_hex}.cwasm"));
        if self.trusted(&path) {
            // SAFETY: `trusted` checked that the file is one this host wrote
            // (our directory, our name, our user, no one else can write it).
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok((component, Loaded::FromCache)),
                Err(e) => {
                    tracing::debug!(path = %path.display(), "cached component unusable, recompiling: {e}")
                }
            }
        }
        let compiled = engine
            .precompile_component(wasm)
            .map_err(|e| PluginError::Invalid {
                source_name: source_name.to_string(),
                detail: format!("{e:#}"),
            })?;
        if let Err(e) = self.store(&path, &compiled) {
            // A read-only or full cache directory costs speed, not correctness.
            tracing::warn!(path = %path.display(), "could not cache the compiled component: {e}");
        }
        // SAFETY: these bytes were produced by `precompile_component` just now.
        let component = unsafe { Component::deserialize(engine, &compiled) }.map_err(|e| {
            PluginError::Invalid {
                source_name: source_name.to_string(),
                detail: format!("{e:#}"),
            }
        })?;
        Ok((component, Loaded::Compiled))
    }

    fn trusted(&self, path: &Path) -> bool {
        let uid = rustix::process::geteuid().as_raw();
        let owned_private = |p: &Path, want_dir: bool| {
            std::fs::symlink_metadata(p).is_ok_and(|m| {
                (if want_dir { m.is_dir() } else { m.is_file() })
                    && m.uid() == uid
                    && m.mode() & 0o022 == 0
            })
        };
        owned_private(&self.dir, true)
            && owned_private(path, false)
            && matches!(
                Engine::detect_precompiled_file(path),
                Ok(Some(Precompiled::Component))
            )
    }

    fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        create_private_dir_all(&self.dir)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".cwasm")
            .tempfile_in(&self.dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

fn create_private_dir_all(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

use std::os::unix::fs::DirBuilderExt as _;
