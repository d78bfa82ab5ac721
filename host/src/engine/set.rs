//! `tether set`: change objects' policies in place. Manifest-only; commit to
//! record it. Logged in the journal with the values it replaced.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;

use super::error::Result;
use super::repo::Repo;
use crate::model::{FileMode, PinMode, key, manifest};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FieldChange {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SetReport {
    pub changed: BTreeMap<String, BTreeMap<String, FieldChange>>,
    pub unchanged: Vec<String>,
}

/// Set `file` and/or `pin` on the selected objects (`all`: every object).
pub fn set(
    repo: &Repo,
    selectors: &[String],
    file: Option<FileMode>,
    pin: Option<PinMode>,
) -> Result<SetReport> {
    let _locks = repo.lock()?;
    let manifests = repo.manifests()?;
    let keys = key::select_keys(selectors, manifests.keys().map(String::as_str))?;
    let mut report = SetReport::default();
    let mut writes = Vec::new();
    for k in keys {
        let mut m = manifests[&k].clone();
        let mut changes = BTreeMap::new();
        if let Some(f) = file.filter(|f| *f != m.policy.file) {
            changes.insert(
                "file".to_string(),
                FieldChange {
                    from: m.policy.file.as_str().into(),
                    to: f.as_str().into(),
                },
            );
            m.policy.file = f;
        }
        if let Some(p) = pin.filter(|p| *p != m.policy.pin) {
            changes.insert(
                "pin".to_string(),
                FieldChange {
                    from: m.policy.pin.as_str().into(),
                    to: p.as_str().into(),
                },
            );
            m.policy.pin = p;
        }
        if changes.is_empty() {
            report.unchanged.push(k);
        } else {
            writes.push((k.clone(), m));
            report.changed.insert(k, changes);
        }
    }
    if writes.is_empty() {
        return Ok(report);
    }
    let journal = repo.journal()?;
    let mut op =
        journal.start(crate::oplog::NewOp::new("set").pre("changed", json!(report.changed)))?;
    for (k, m) in &writes {
        manifest::write_manifest(&repo.layout.objects_dir(), k, m)?;
        op.progress(json!({"key": k, "policy": {"file": m.policy.file.as_str(), "pin": m.policy.pin.as_str()}}))?;
    }
    op.finish(json!(report))?;
    Ok(report)
}
