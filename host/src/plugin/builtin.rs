//! The first-party plugins, compiled to `wasm32-wasip2` by `build.rs` and
//! embedded in the binary, so one `tether` has every backend.

use std::path::Path;
use std::sync::Arc;

use super::error::PluginError;
use super::runtime::{Plugin, PluginSource, Runtime};

/// One embedded component.
#[derive(Debug)]
pub struct BuiltinPlugin {
    /// The plugin's crate in `plugins/`.
    pub crate_name: &'static str,
    /// The component bytes.
    pub wasm: &'static [u8],
    /// sha256 of `wasm`, hex, computed at build time.
    pub sha256: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));

/// Where `build.rs` built the first-party components (for tests and tools).
pub fn build_dir() -> &'static Path {
    Path::new(env!("TETHER_PLUGIN_WASM_DIR"))
}

/// The embedded component of a plugin crate (`tether-plugin-memory`).
pub fn by_crate(crate_name: &str) -> Option<&'static BuiltinPlugin> {
    BUILTIN_PLUGINS.iter().find(|p| p.crate_name == crate_name)
}

/// `sha256:<hex>` of a built-in component, as the runtime names it (from the
/// build-time digest, so no command hashes the embedded bytes again).
pub fn digest(plugin: &BuiltinPlugin) -> String {
    format!("sha256:{}", plugin.sha256)
}

/// Load every built-in plugin, in crate order.
pub async fn load_all(runtime: &Runtime) -> Result<Vec<Arc<Plugin>>, PluginError> {
    let mut plugins = Vec::with_capacity(BUILTIN_PLUGINS.len());
    for p in BUILTIN_PLUGINS {
        plugins.push(
            runtime
                .load_digested(p.wasm, p.sha256.to_string(), PluginSource::BuiltIn)
                .await?,
        );
    }
    Ok(plugins)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    #[test]
    fn build_time_digests_match_the_embedded_bytes() {
        for p in super::BUILTIN_PLUGINS {
            assert_eq!(
                hex::encode(Sha256::digest(p.wasm)),
                p.sha256,
                "{}",
                p.crate_name
            );
        }
    }
}
