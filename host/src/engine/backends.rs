//! `tether backends`: every kind this tether can run, from the plugins
//! themselves (`describe`) — the host keeps no table of kinds.

use serde::Serialize;

use crate::plugin::{PluginError, Runtime, builtin};

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
    /// `built-in`, or the path of the component file.
    pub source: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
}

/// Describe every built-in plugin, sorted by kind.
pub async fn list(runtime: &Runtime) -> Result<Vec<BackendInfo>, PluginError> {
    let mut rows: Vec<BackendInfo> = builtin::load_all(runtime)
        .await?
        .into_iter()
        .map(|p| {
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
                note: (d.maturity == "experimental").then(|| {
                    "experimental: tested against a fake of its service, not the service itself"
                        .to_string()
                }),
                source: p.source().to_string(),
                digest: p.digest().to_string(),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.kind.cmp(&b.kind));
    Ok(rows)
}
