//! `tether backends`: every kind this tether can run, from the plugins
//! themselves (`describe`) — the host keeps no table of kinds. Inside a
//! dataset, each kind is the plugin the dataset runs: the pinned component
//! where `[plugins.<kind>]` pins one, else the built-in; or the dev build
//! this checkout runs for it (`tether plugin dev`), shown as `dev: PATH`.

use std::sync::Arc;

use serde::Serialize;

use super::error::Result;
use super::repo::Repo;
use crate::plugin::{Plugin, PluginError, PluginMeta, Runtime, builtin};

/// One row of `tether backends` (spec/09 "JSON output", plus `source` and
/// `digest` of the component that serves the kind).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BackendInfo {
    pub kind: String,
    pub installed: bool,
    pub maturity: Option<String>,
    pub tier: Option<String>,
    /// Capability names in lowercase (`conditional_ref`), as the spec prints them.
    pub capabilities: Vec<String>,
    pub note: Option<String>,
    /// `built-in`, the path of the component file, or `dev: PATH` for a
    /// kind this checkout serves from a dev build (`tether plugin dev`).
    pub source: String,
    /// `sha256:<hex>` of the component (the wanted one when it was refused).
    pub digest: String,
    /// Whether the dataset pins this kind (`[plugins.<kind>]`); always false
    /// outside a dataset.
    pub pinned: bool,
    /// The host capabilities the component imports: `storage`, `tree`,
    /// `sql`, `wasi:http`, `filesystem` (`Plugin::host_imports`).
    pub imports: Vec<String>,
    /// What the plugin says about itself (`describe-meta`, since 0.1.5):
    /// name, version, authors, ...; `null` for a plugin without it or one
    /// not loaded.
    pub meta: Option<PluginMeta>,
}

/// What `add` and `backends` say about an experimental plugin: where what it
/// was tested against is written (a built-in's guide page; a third-party
/// plugin's author), since that differs per backend (real libraries, a
/// stand-in server, a fake API).
pub fn experimental_note(p: &Plugin) -> Option<String> {
    let d = p.descriptor();
    (d.maturity == "experimental").then(|| match p.source() {
        crate::plugin::PluginSource::BuiltIn => format!(
            "experimental: what it was tested against is in the user guide, docs/guide/backends/{}.md",
            d.kind
        ),
        crate::plugin::PluginSource::Path(_) => {
            "experimental: its author marks it not ready for production data".to_string()
        }
    })
}

fn row(p: &Plugin, pinned: bool) -> BackendInfo {
    let d = p.descriptor();
    BackendInfo {
        kind: d.kind.clone(),
        installed: true,
        maturity: Some(d.maturity.clone()),
        tier: Some(d.tier().to_string()),
        capabilities: d
            .capabilities
            .iter()
            .map(|c| c.to_ascii_lowercase())
            .collect(),
        note: experimental_note(p),
        source: p.source().to_string(),
        digest: p.digest().to_string(),
        pinned,
        imports: p.host_imports().iter().map(|s| s.to_string()).collect(),
        meta: p.meta().cloned(),
    }
}

/// Describe every built-in plugin, sorted by kind.
pub async fn list(runtime: &Runtime) -> Result<Vec<BackendInfo>, PluginError> {
    let mut rows: Vec<BackendInfo> = builtin::load_all(runtime)
        .await?
        .iter()
        .map(|p| row(p, false))
        .collect();
    rows.sort_by(|a, b| a.kind.cmp(&b.kind));
    Ok(rows)
}

/// Describe the plugins a dataset runs, sorted by kind. A pinned kind that
/// cannot be served is listed as not installed, its note saying why.
pub async fn list_for(repo: &Repo) -> Result<Vec<BackendInfo>> {
    let resolution = repo.plugin_resolution().await?;
    let mut rows: Vec<BackendInfo> = resolution
        .plugins
        .iter()
        .map(|(kind, p): (&String, &Arc<Plugin>)| {
            let mut r = row(p, repo.config.plugins.contains_key(kind));
            if let Some(path) = repo.secrets().dev_plugins.get(kind) {
                r.source = format!("dev: {path}");
            }
            r
        })
        .collect();
    for (kind, why) in &resolution.refused {
        rows.push(BackendInfo {
            kind: kind.clone(),
            installed: false,
            maturity: None,
            tier: None,
            capabilities: Vec::new(),
            note: Some(why.to_string()),
            source: "refused".to_string(),
            digest: repo.config.plugins[kind].digest.clone(),
            pinned: true,
            imports: Vec::new(),
            meta: None,
        });
    }
    rows.sort_by(|a, b| a.kind.cmp(&b.kind));
    Ok(rows)
}
