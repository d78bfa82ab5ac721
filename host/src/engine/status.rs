//! `tether status`: each object's state against its manifest, from the last
//! snapshot (contacting nothing) or a fresh one, and what the VCS did behind
//! tether's back:
//!
//! - `bookmark_drift`: the bookmark this checkout works on was deleted or renamed,
//!   moved (it no longer sits where the working copy is, while the working copy is
//!   still on the last dataset commit), or left (the working copy moved: `jj new
//!   REV`, `git switch`), or is conflicted (jj);
//! - `vcs_drift`: a dataset commit this checkout's op log recorded vanished from
//!   visible history (`jj undo`, `jj abandon`, `git reset`), with, per object it
//!   pinned or recorded, whether the manifests history still shows reference that
//!   pin (or state): an unreferenced one is what `gc` would release.
//!
//! Both are local: one listing of visible commit ids (under jj, one `jj log`), and
//! a walk of history's manifests only when a commit did vanish.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use super::snapshot;
use crate::model::fsutil::FileStamp;
use crate::model::{FileMode, Manifest, Origin, WorkspaceState, key, manifest};
use crate::plugin::Descriptor;
use crate::vcs::{CommitId, HeadState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotMode {
    /// `--snapshot`: fingerprint first.
    Fresh,
    /// `--no-snapshot`: never fingerprint.
    Cached,
    /// Neither: fingerprint when there is no snapshot yet or `[snapshot] auto`.
    Default,
}

/// An object's state against its manifest (`state` in `--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectState {
    New,
    Modified,
    Clean,
    Behind,
    Error,
}

/// What tether can do with an object's states (`tier` in `--json`):
/// its plugin's tier for its policy, `unknown` when no plugin serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Observed,
    Addressable,
    Pinnable,
    Forkable,
    Unknown,
}

impl Tier {
    fn as_str(self) -> &'static str {
        match self {
            Tier::Observed => "observed",
            Tier::Addressable => "addressable",
            Tier::Pinnable => "pinnable",
            Tier::Forkable => "forkable",
            Tier::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for ObjectState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ObjectState::New => "new",
            ObjectState::Modified => "modified",
            ObjectState::Clean => "clean",
            ObjectState::Behind => "behind",
            ObjectState::Error => "error",
        })
    }
}

/// A dataset commit this checkout's op log recorded that vanished from the
/// VCS, and per key it pinned whether the manifests still reference its pin.
/// (Fields in the order `--json` has always printed them.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VcsDrift {
    pub commit: String,
    pub op: String,
    pub referenced: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ObjectStatus {
    pub key: String,
    pub kind: String,
    pub tier: Tier,
    pub state: ObjectState,
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
    pub vcs_drift: Vec<VcsDrift>,
    pub objects: Vec<ObjectStatus>,
    /// `pin = "record"` objects not forked yet, as `new` warned (spec/06).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retention: Vec<String>,
    /// Kind -> path of each dev build this checkout runs (`tether plugin
    /// dev`): its objects' states come from that build, not the pin.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub dev_plugins: BTreeMap<String, String>,
}

impl StatusReport {
    pub fn has_error(&self) -> bool {
        self.objects.iter().any(|o| o.state == ObjectState::Error)
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
    // A pinned plugin this checkout refuses (untrusted, missing) fails its
    // own objects, each with the refusal and its way out; the rest show.
    let (descriptors, refused) = match repo.descriptors().await {
        Ok(d) => (d, BTreeMap::new()),
        Err(e) => {
            let resolution = repo.plugin_resolution().await?;
            if resolution.refused.is_empty() {
                return Err(e);
            }
            let loaded = resolution
                .plugins
                .iter()
                .map(|(k, p)| (k.clone(), p.descriptor().clone()))
                .collect();
            let refused: BTreeMap<String, String> = resolution
                .refused
                .iter()
                .map(|(k, e)| (k.clone(), e.to_string()))
                .collect();
            (loaded, refused)
        }
    };
    let mut objects = Vec::with_capacity(keys.len());
    for key in &keys {
        let m = &manifests[key];
        if let Some(reason) = refused.get(&m.kind) {
            let mut s = object_status(key, m, None, None, None);
            s.error = Some(reason.clone());
            objects.push(s);
            continue;
        }
        let descriptor = descriptors.get(&m.kind);
        let mut s = object_status(
            key,
            m,
            descriptor,
            snapshot::cached(&ws, key),
            snapshot::upstream(repo, &ws, key, m),
        );
        // A branch-less object on the trunk stays at its pin: its system
        // moving on is news for `pull`, not a change to commit.
        if s.state == ObjectState::Modified
            && descriptor.is_some_and(|d| snapshot::branchless_on_trunk(repo, &ws, d, m))
        {
            s.state = ObjectState::Behind;
        }
        objects.push(s);
    }
    if repo.config.verify_on_status {
        verify_marks(repo, &keys, &mut objects).await?;
    }
    let bookmark = ws.bookmark.clone();
    let stale_keys = super::fork::stale_keys(&ws, &manifests);
    let (mut bookmark_drift, vcs_drift) = drift(repo, &ws)?;
    // A `new` killed half-way leaves the VCS and workspace.toml on different
    // bookmarks: finishing it, not going back, is the way out.
    if !bookmark_drift.is_empty()
        && let Some(e) = super::new::interrupted(repo)?
    {
        bookmark_drift = vec![format!(
            "an interrupted `tether new` (operation {}) left this checkout half-way to bookmark \
             {}: {} finishes it",
            e.id,
            e.plan
                .as_ref()
                .and_then(|p| p.pointer("/context/bookmark"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("(none)"),
            crate::oplog::rerun_hint(&e)
        )];
    }
    Ok(StatusReport {
        manifest_hash: manifest::manifest_hash(&manifests),
        stale: !stale_keys.is_empty(),
        stale_keys,
        fresh: take,
        snapshot_at: ws.last_snapshot_at.clone(),
        trunk: bookmark.as_deref() == Some(repo.config.trunk.as_str()),
        bookmark,
        bookmark_drift,
        vcs_drift,
        objects,
        retention: super::new::retention_warnings(&manifests, &ws),
        dev_plugins: repo.secrets().dev_plugins.clone(),
    })
}

/// `[verify] on_status = true`: each listed object's `verify=` mark, from the
/// cheap verify (`verify` without `--deep`) of the working tree's manifests.
/// Objects verify leaves out (never committed, recorded unrecoverably) get
/// no mark.
async fn verify_marks(repo: &Repo, keys: &[String], objects: &mut [ObjectStatus]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let subjects = super::checks::subjects(repo, keys, None, false)?;
    let mut marks: BTreeMap<String, crate::plugin::VerifyStatus> = BTreeMap::new();
    for (subject, report) in super::checks::check(repo, subjects, false).await? {
        for label in subject.labels {
            marks.insert(label, report.status);
        }
    }
    for o in objects {
        if let Some(status) = marks.get(&o.key) {
            o.verify = Some(status.as_str().to_string());
        }
    }
    Ok(())
}

/// The tier of an object's capabilities, lowercased as `status` prints it.
pub fn tier(descriptor: &Descriptor, m: &Manifest) -> Tier {
    match Descriptor::tier_of(&Repo::capabilities(descriptor, m)) {
        "Forkable" => Tier::Forkable,
        "Pinnable" => Tier::Pinnable,
        "Addressable" => Tier::Addressable,
        // What the plugin can do only for some locators and policies (a
        // remote `file --file versioned` object, by its version id; spec/11)
        // shows in what the last commit recorded: a state it can read back
        // is Addressable, whatever the kind's default tier.
        _ if m.is_committed() && m.recoverable => Tier::Addressable,
        _ => Tier::Observed,
    }
}

fn object_status(
    key: &str,
    m: &Manifest,
    descriptor: Option<&Descriptor>,
    snap: Option<std::result::Result<Map<String, Value>, String>>,
    upstream: Option<&Map<String, Value>>,
) -> ObjectStatus {
    let mut s = ObjectStatus {
        key: key.to_string(),
        kind: m.kind.clone(),
        tier: descriptor.map(|d| tier(d, m)).unwrap_or(Tier::Unknown),
        state: ObjectState::Error,
        pinned: m.pin.is_some(),
        recoverable: m.is_committed().then_some(m.recoverable),
        origin: (m.origin == Origin::Created).then(|| "created".to_string()),
        verify: None,
        error: None,
    };
    let Some(descriptor) = descriptor else {
        s.state = ObjectState::Error;
        s.error = Some(format!("no installed plugin serves kind {:?}", m.kind));
        return s;
    };
    s.state = match (snap, &m.state) {
        (Some(Err(e)), _) => {
            s.error = Some(e);
            ObjectState::Error
        }
        (_, None) => ObjectState::New,
        (None, Some(_)) => ObjectState::Clean,
        (Some(Ok(now)), Some(recorded)) => {
            if content(&now, descriptor) == content(recorded, descriptor) {
                // An `--at` object at its pin, on the trunk, whose system
                // moved on: `pull` takes it, `commit` leaves it (spec/09).
                match upstream {
                    Some(head) if content(head, descriptor) != content(recorded, descriptor) => {
                        ObjectState::Behind
                    }
                    _ => ObjectState::Clean,
                }
            } else if m.kind == "file" && m.policy.file == FileMode::Immutable {
                s.error = Some(
                    TetherError::ImmutableModified {
                        key: key.to_string(),
                    }
                    .to_string(),
                );
                ObjectState::Error
            } else {
                ObjectState::Modified
            }
        }
    };
    s
}

/// The memo of [`drift`]'s expensive half under `.tether/cache/`.
const DRIFT_MEMO: &str = "drift.json";

/// What [`drift`] concluded when no dataset commit had vanished: the newest
/// dataset commit this checkout made that is still visible. It is a function
/// of the op log and of visible history, so it is kept under the op log's
/// stat key and the VCS's history key, both taken before either was read: an
/// operation, a commit or a moved branch anywhere makes the next status
/// compute it again. Without it a status read the whole op log (a few KB per
/// commit) and walked all history, every time.
#[derive(Debug, PartialEq, serde::Deserialize, Serialize)]
struct DriftMemo {
    /// The stamp of `ops.jsonl`; `None` when there is none.
    ops: Option<FileStamp>,
    history: String,
    last_commit: Option<String>,
}

/// What the VCS did behind tether's back: bookmark warnings, and the vanished
/// dataset commits as `{"op", "commit", "referenced": {key: bool}}`.
fn drift(repo: &Repo, ws: &WorkspaceState) -> Result<(Vec<String>, Vec<VcsDrift>)> {
    let memo_path = repo.layout.cache_dir().join(DRIFT_MEMO);
    let ops = FileStamp::of(&repo.layout.ops_file());
    let history = repo.vcs.history_key()?;
    let remembered = std::fs::read(&memo_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<DriftMemo>(&bytes).ok())
        .filter(|m| m.ops == ops && Some(&m.history) == history.as_ref());
    if let Some(memo) = remembered {
        tracing::debug!("drift memo replayed");
        let bookmark_drift = match &ws.bookmark {
            Some(b) => bookmark_drift(repo, b, memo.last_commit.as_deref())?,
            None => Vec::new(),
        };
        return Ok((bookmark_drift, Vec::new()));
    }
    let entries = repo.journal()?.list(usize::MAX)?;
    let recorded: Vec<(&crate::oplog::OpEntry, &str)> = entries
        .iter()
        .filter(|e| e.undone_by.is_none())
        .filter_map(|e| e.vcs_commit().map(|c| (e, c)))
        .collect();
    let visible: HashSet<String> = if recorded.is_empty() {
        HashSet::new()
    } else {
        repo.vcs
            .visible_ids()?
            .into_iter()
            .map(|c| c.as_str().to_owned())
            .collect()
    };
    // The newest recorded commit still visible: where tether left the bookmark.
    let last_commit = recorded
        .iter()
        .map(|(_, c)| *c)
        .find(|c| visible.contains(*c));
    let bookmark_drift = match &ws.bookmark {
        Some(b) => bookmark_drift(repo, b, last_commit)?,
        None => Vec::new(),
    };
    let gone: Vec<&(&crate::oplog::OpEntry, &str)> = recorded
        .iter()
        .filter(|(_, c)| !visible.contains(*c))
        .collect();
    if gone.is_empty() {
        if let Some(history) = history {
            let memo = DriftMemo {
                ops,
                history,
                last_commit: last_commit.map(str::to_owned),
            };
            // A cache: failing to write it costs the next status this work.
            let written = serde_json::to_vec(&memo)
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    crate::model::fsutil::write_atomic(&memo_path, &b).map_err(|e| e.to_string())
                });
            if let Err(e) = written {
                tracing::debug!("drift memo not written: {e}");
            }
        }
        return Ok((bookmark_drift, Vec::new()));
    }
    let references = References::collect(repo)?;
    let mut vcs_drift = Vec::new();
    for (e, commit) in gone {
        // The vanished commit's manifests, when its objects are still in the store
        // (jj keeps them); else what the op log says it pinned.
        let at_commit = repo.manifests_at(&CommitId::new(*commit)).ok();
        let mut referenced = BTreeMap::new();
        if let Some(pinned) = e.result.get("pinned").and_then(Value::as_object) {
            for (key, r) in pinned {
                let m = at_commit.as_ref().and_then(|ms| ms.get(key));
                let still = match (m, r.as_str()) {
                    (Some(m), _) => references.names(key, m),
                    (None, Some(r)) => references.pin_refs.contains(&(key.clone(), r.to_owned())),
                    (None, None) => false,
                };
                referenced.insert(key.clone(), still);
            }
        }
        vcs_drift.push(VcsDrift {
            commit: commit.to_string(),
            op: e.id.clone(),
            referenced,
        });
    }
    Ok((bookmark_drift, vcs_drift))
}

/// Every pin and recorded state the working tree's and visible history's
/// manifests name, per key.
struct References {
    pin_ids: HashSet<(String, String)>,
    pin_refs: HashSet<(String, String)>,
    states: HashSet<(String, String)>,
}

impl References {
    fn collect(repo: &Repo) -> Result<References> {
        let mut r = References {
            pin_ids: HashSet::new(),
            pin_refs: HashSet::new(),
            states: HashSet::new(),
        };
        let mut add = |key: &str, m: &Manifest| {
            if let Some(p) = &m.pin {
                r.pin_ids.insert((key.to_owned(), p.id.clone()));
                r.pin_refs.insert((key.to_owned(), p.r#ref.clone()));
            }
            if let Some(s) = &m.state {
                r.states.insert((
                    key.to_owned(),
                    crate::model::canonical::to_string(&Value::Object(s.clone())),
                ));
            }
        };
        for (k, m) in repo.manifests()? {
            add(&k, &m);
        }
        // Every side of every visible commit, each distinct set once (sets
        // many commits hold are one shared `Arc`).
        let history = super::history::history_manifests(repo)?;
        let mut seen = HashSet::new();
        for (_, set) in &history {
            if seen.insert(std::sync::Arc::as_ptr(set)) {
                for (k, m) in set.iter() {
                    add(k, m);
                }
            }
        }
        Ok(r)
    }

    /// Whether `m` (a vanished commit's manifest of `key`) is still named: its pin,
    /// or for a recorded state, that state.
    fn names(&self, key: &str, m: &Manifest) -> bool {
        match (&m.pin, &m.state) {
            (Some(p), _) => self.pin_ids.contains(&(key.to_owned(), p.id.clone())),
            (None, Some(s)) => self.states.contains(&(
                key.to_owned(),
                crate::model::canonical::to_string(&Value::Object(s.clone())),
            )),
            (None, None) => false,
        }
    }
}

/// Warnings about the bookmark `b` this checkout works on. `last_commit` is the
/// newest dataset commit this checkout made that is still visible.
fn bookmark_drift(repo: &Repo, b: &str, last_commit: Option<&str>) -> Result<Vec<String>> {
    let vcs = &repo.vcs;
    let short = |c: &str| c[..c.len().min(12)].to_owned();
    if vcs.conflicted_bookmarks()?.iter().any(|c| c == b) {
        return Ok(vec![format!(
            "bookmark {b} is conflicted in the VCS (moved concurrently): `jj bookmark set {b} -r REV` \
             resolves it before the next `tether commit`"
        )]);
    }
    let branches = vcs.branches()?;
    let here = vcs.working_bookmarks()?;
    let Some(at) = branches
        .iter()
        .find(|x| x.name == b)
        .map(|x| x.commit.clone())
    else {
        if matches!(vcs.head_state()?, HeadState::Unborn { ref branch } if branch == b) {
            return Ok(Vec::new());
        }
        // Renamed: another bookmark now sits where this one was, or the working copy
        // is on one (`git branch -m` renames the checked-out branch).
        let renamed: Vec<&str> = branches
            .iter()
            .filter(|x| last_commit == Some(x.commit.as_str()) || here.contains(&x.name))
            .map(|x| x.name.as_str())
            .collect();
        let hint = if renamed.is_empty() {
            String::new()
        } else {
            format!(" (renamed to {}?)", renamed.join(", "))
        };
        return Ok(vec![format!(
            "bookmark {b} was deleted or renamed in the VCS{hint}: `tether new NAME` to work on a bookmark; \
             `tether gc --prune-bookmarks` releases the old bookmark's branches"
        )]);
    };
    if here.iter().any(|x| x == b) {
        return Ok(Vec::new());
    }
    let head = vcs.head()?;
    let moved = last_commit.is_some() && head.as_ref().map(CommitId::as_str) == last_commit;
    Ok(vec![if moved {
        format!(
            "bookmark {b} was moved behind tether's back (to {}, while the working copy is still at {}): \
             `tether new {b}` follows it",
            short(at.as_str()),
            short(last_commit.unwrap_or_default())
        )
    } else {
        format!(
            "the working copy has left bookmark {b} (it is at {}): `tether new {b} --keep` brings it back, \
             `tether new REV` takes the bookmark there",
            head.as_ref()
                .map(|c| short(c.as_str()))
                .unwrap_or_else(|| "no commit".into())
        )
    }])
}
