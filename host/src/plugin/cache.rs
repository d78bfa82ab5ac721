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
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use super::error::PluginError;
use crate::model::fsutil::{replace_file, temp_file_in};

/// The user cache root: `$TETHER_CACHE_DIR`, else `<user cache dir>/tether`.
pub fn default_cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("TETHER_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("tether")
}

/// Where "compiling plugin X" goes besides the log: the CLI prints it on a
/// terminal ([`on_compile`]); a library user hears nothing unless it asks.
static COMPILE_NOTICE: std::sync::OnceLock<fn(&str, &Path)> = std::sync::OnceLock::new();

/// Have `tell(plugin, cache_dir)` called each time a component is compiled
/// because the cache has no compiled form of it (once per process; later
/// calls are ignored).
pub fn on_compile(tell: fn(&str, &Path)) {
    let _ = COMPILE_NOTICE.set(tell);
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

    /// The compiled form of `wasm`: from the cache, else compiled now (and
    /// said so: `label` names the plugin in the notice, see [`on_compile`]).
    pub(crate) fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        digest_hex: &str,
        source_name: &str,
        label: &str,
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
        // Seconds of Cranelift per component on a first run: never silent.
        tracing::info!(plugin = label, cache = %self.dir.display(), "compiling plugin");
        if let Some(tell) = COMPILE_NOTICE.get() {
            tell(label, &self.dir);
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
        owned_private(&self.dir, true)
            && owned_private(path, false)
            && matches!(
                Engine::detect_precompiled_file(path),
                Ok(Some(Precompiled::Component))
            )
    }

    fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        create_private_dir_all(&self.dir)?;
        replace_file(path, ".tmp-", bytes)
    }
}

/// Descriptors by component digest: `describe` is a pure function of the
/// component, so a command that needs only kinds, tiers and capabilities
/// (`status` from its cached snapshot) reads them here instead of loading and
/// instantiating every plugin. Same trust rule as the compiled components:
/// only files this host wrote, in a directory only this user can write.
pub(crate) fn descriptor_path(root: &Path, digest_hex: &str) -> PathBuf {
    root.join("descriptors").join(format!("{digest_hex}.json"))
}

pub(crate) fn read_descriptor(root: &Path, digest_hex: &str) -> Option<super::types::Descriptor> {
    read_json(&descriptor_path(root, digest_hex))
}

pub(crate) fn write_descriptor(
    root: &Path,
    digest_hex: &str,
    d: &super::types::Descriptor,
) -> std::io::Result<()> {
    write_json(&descriptor_path(root, digest_hex), d)
}

/// Plugin metadata (`describe-meta`) by component digest, kept like the
/// descriptors and for the same reason: a pure function of the component.
fn meta_path(root: &Path, digest_hex: &str) -> PathBuf {
    root.join("meta").join(format!("{digest_hex}.json"))
}

pub(crate) fn read_meta(root: &Path, digest_hex: &str) -> Option<super::meta::PluginMeta> {
    read_json(&meta_path(root, digest_hex))
}

pub(crate) fn write_meta(
    root: &Path,
    digest_hex: &str,
    m: &super::meta::PluginMeta,
) -> std::io::Result<()> {
    write_json(&meta_path(root, digest_hex), m)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let dir = path.parent()?;
    if !(owned_private(dir, true) && owned_private(path, false)) {
        return None;
    }
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let dir = path.parent().expect("a cache path has a parent");
    create_private_dir_all(dir)?;
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let tmp = temp_file_in(dir, ".tmp-", &bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A regular file (or, with `want_dir`, a directory), not a symlink, owned
/// by the current user and writable by no one else.
fn owned_private(p: &Path, want_dir: bool) -> bool {
    let uid = rustix::process::geteuid().as_raw();
    std::fs::symlink_metadata(p).is_ok_and(|m| {
        (if want_dir { m.is_dir() } else { m.is_file() }) && m.uid() == uid && m.mode() & 0o022 == 0
    })
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::plugin::types::Descriptor;

    fn descriptor() -> Descriptor {
        Descriptor {
            kind: "k".into(),
            maturity: "stable".into(),
            capabilities: vec!["FINGERPRINT".into()],
            volatile_keys: vec![],
            local_path_keys: vec![],
            local_path_prefixes: vec![],
            storage_keys: vec![],
            tree_keys: vec![],
            promote_hint: String::new(),
            abi: "0.1.0".into(),
        }
    }

    #[test]
    fn a_descriptor_round_trips_and_a_writable_one_is_ignored() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read_descriptor(root.path(), "ab"), None);
        write_descriptor(root.path(), "ab", &descriptor()).unwrap();
        assert_eq!(read_descriptor(root.path(), "ab"), Some(descriptor()));
        let path = descriptor_path(root.path(), "ab");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            read_descriptor(root.path(), "ab"),
            None,
            "someone else could have written it"
        );
    }
}
