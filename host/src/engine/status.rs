//! `tether status`: each object's state against its manifest, from the last
//! snapshot (contacting nothing) or a fresh one.

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use super::snapshot;
use crate::model::{FileMode, Manifest, Origin, key, manifest};
use crate::plugin::Descriptor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// `--snapshot`: fingerprint first.
    Fresh,
    /// `--no-snapshot`: never fingerprint.
    Cached,
    /// Neither: fingerprint when there is no snapshot yet or `[snapshot] auto`.
    Default,
}

#[derive(Debug, Clone, Serialize)]
pub struct ObjectStatus {
    pub key: String,
    pub kind: String,
    /// `observed`, `addressable`, `pinnable` or `forkable`.
    pub tier: String,
    /// `new`, `modified`, `clean`, `behind` or `error`.
    pub state: String,
    pub pinned: bool,
    pub recoverable: Option<bool>,
    pub origin: Option<String>,
    pub verify: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub manifest_hash: String,
    pub stale: bool,
    pub stale_keys: Vec<String>,
    /// False when the cached snapshot from `snapshot_at` was shown.
    pub fresh: bool,
    pub snapshot_at: Option<String>,
    pub bookmark: Option<String>,
    pub trunk: bool,
    pub bookmark_drift: Vec<String>,
    pub vcs_drift: Vec<Value>,
    pub objects: Vec<ObjectStatus>,
}

impl StatusReport {
    pub fn has_error(&self) -> bool {
        self.objects.iter().any(|o| o.state == "error")
    }
}

pub async fn status(repo: &Repo, selectors: &[String], mode: SnapshotMode) -> Result<StatusReport> {
    let manifests = repo.manifests()?;
    let keys = key::select_keys(selectors, manifests.keys().map(String::as_str))?;
    let mut ws = repo.workspace()?;
    let take = match mode {
        SnapshotMode::Fresh => true,
        SnapshotMode::Cached => false,
        SnapshotMode::Default => repo.config.snapshot_auto || ws.last_snapshot_at.is_none(),
    };
    if take {
        snapshot::snapshot(repo, &mut ws, &manifests, &keys).await?;
    }
    let descriptors = repo.descriptors().await?;
    let mut objects = Vec::with_capacity(keys.len());
    for key in &keys {
        let m = &manifests[key];
        let descriptor = descriptors.get(&m.kind);
        objects.push(object_status(
            key,
            m,
            descriptor,
            snapshot::cached(&ws, key),
        ));
    }
    let bookmark = ws.bookmark.clone();
    let stale_keys = super::fork::stale_keys(&ws, &manifests);
    Ok(StatusReport {
        manifest_hash: manifest::manifest_hash(&manifests),
        stale: !stale_keys.is_empty(),
        stale_keys,
        fresh: take,
        snapshot_at: ws.last_snapshot_at.clone(),
        trunk: bookmark.as_deref() == Some(repo.config.trunk.as_str()),
        bookmark,
        bookmark_drift: Vec::new(),
        vcs_drift: Vec::new(),
        objects,
    })
}

/// The tier of an object's capabilities, lowercased as `status` prints it.
pub fn tier(descriptor: &Descriptor, m: &Manifest) -> String {
    Descriptor::tier_of(&Repo::capabilities(descriptor, m)).to_ascii_lowercase()
}

fn object_status(
    key: &str,
    m: &Manifest,
    descriptor: Option<&Descriptor>,
    snap: Option<std::result::Result<Map<String, Value>, String>>,
) -> ObjectStatus {
    let mut s = ObjectStatus {
        key: key.to_string(),
        kind: m.kind.clone(),
        tier: descriptor
            .map(|d| tier(d, m))
            .unwrap_or_else(|| "unknown".into()),
        state: String::new(),
        pinned: m.pin.is_some(),
        recoverable: m.is_committed().then_some(m.recoverable),
        origin: (m.origin == Origin::Created).then(|| "created".to_string()),
        verify: None,
        error: None,
    };
    let Some(descriptor) = descriptor else {
        s.state = "error".into();
        s.error = Some(format!("no installed plugin serves kind {:?}", m.kind));
        return s;
    };
    s.state = match (snap, &m.state) {
        (Some(Err(e)), _) => {
            s.error = Some(e);
            "error".into()
        }
        (_, None) => "new".into(),
        (None, Some(_)) => "clean".into(),
        (Some(Ok(now)), Some(recorded)) => {
            if content(&now, descriptor) == content(recorded, descriptor) {
                "clean".into()
            } else if m.kind == "file" && m.policy.file == FileMode::Immutable {
                s.error = Some(
                    TetherError::ImmutableModified {
                        key: key.to_string(),
                    }
                    .to_string(),
                );
                "error".into()
            } else {
                "modified".into()
            }
        }
    };
    s
}
