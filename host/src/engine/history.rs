//! Every visible commit's manifests, for the commands that read all of
//! history (`verify --all-history`, `gc`, `fork`, `undo`, `recover`),
//! remembered in `.tether/cache/history.json` between runs.
//!
//! What a commit holds never changes (its id is a hash of it), so the memo
//! keeps facts, not guesses:
//!
//! - per commit, the ids of its manifest sets (`files_id`: git's tree id of
//!   `.tether/objects/`, one per side and base of a conflicted jj commit);
//! - per manifest set, its manifests, parsed (the same id is the same bytes).
//!
//! Which commits are visible, and in what order, is reused only while the
//! VCS's [`history_key`](crate::vcs::Vcs::history_key) is the one the walk was
//! made under. git's names every ref tip, every checkout's `HEAD`, the
//! shallow boundary, grafts and replace refs, so a commit, a moved branch or
//! a new worktree anywhere makes the next read walk again; jj's names its
//! operation heads, so any jj operation does. A memo that is missing,
//! damaged, written by another tether version or for another prefix is
//! ignored and replaced; it is a cache in the checkout's own
//! `.tether/cache/`, which the VCS never tracks.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::manifest::{JsonMap, Origin, Pin};
use crate::model::{Manifest, Policy, fsutil};
use crate::vcs::{CommitId, FileMap};

/// The memo's file under `.tether/cache/`.
pub const MEMO_FILE: &str = "history.json";

/// Bumped whenever the memo's shape or meaning changes.
const FORMAT: u32 = 1;

/// One manifest set: key → manifest. Shared, not cloned: one set serves
/// every commit that holds it, and each manifest every check that reads it.
pub type ManifestSet = Arc<BTreeMap<String, Arc<Manifest>>>;

/// Every visible commit's manifests, newest first: a commit once per distinct
/// side and base of a conflict, a commit with no manifests left out.
pub(crate) fn history_manifests(repo: &Repo) -> Result<Vec<(CommitId, ManifestSet)>> {
    let prefix = repo.vcs_path(&repo.layout.objects_dir());
    let path = repo.layout.cache_dir().join(MEMO_FILE);
    let key = repo.vcs.history_key()?;
    let mut memo = Memo::read(&path, &prefix);
    let mut sets: HashMap<String, ManifestSet> =
        memo.as_mut().map(Memo::take_sets).unwrap_or_default();

    // The same key: the same commits, whose sets the memo already holds.
    if let (Some(memo), Some(key)) = (&memo, &key)
        && memo.key.as_deref() == Some(key.as_str())
        && let Some(out) = memo.replay(&sets)
    {
        tracing::debug!(commits = memo.commits.len(), "history memo replayed");
        return Ok(out);
    }

    let mut commits: Vec<(String, Vec<String>)> = Vec::new();
    let mut out = Vec::new();
    let mut parsed_any = false;
    for commit in repo.vcs.history(&prefix)? {
        let commit = commit?;
        let mut ids = Vec::new();
        for (files_id, files) in commit.all_files() {
            let set = match sets.get(files_id) {
                Some(set) => Arc::clone(set),
                None => {
                    let set = Arc::new(parse_manifest_files(&prefix, files)?);
                    sets.insert(files_id.to_owned(), Arc::clone(&set));
                    parsed_any = true;
                    set
                }
            };
            ids.push(files_id.to_owned());
            if !set.is_empty() {
                out.push((commit.id.clone(), set));
            }
        }
        commits.push((commit.id.as_str().to_owned(), ids));
    }
    tracing::debug!(commits = commits.len(), parsed_any, "history walked");
    let changed = parsed_any || memo.as_ref().is_none_or(|m| m.key != key);
    if changed {
        // Sets no visible commit holds any more are not kept.
        let keep: BTreeMap<String, &ManifestSet> = commits
            .iter()
            .flat_map(|(_, ids)| ids.iter())
            .filter_map(|id| sets.get(id).map(|s| (id.clone(), s)))
            .collect();
        let memo = Memo {
            format: FORMAT,
            tether: env!("CARGO_PKG_VERSION").to_owned(),
            prefix: prefix.clone(),
            key,
            commits,
            sets: keep
                .into_iter()
                .map(|(id, set)| {
                    let set = set
                        .iter()
                        .map(|(k, m)| (k.clone(), MemoManifest::from(&**m)))
                        .collect();
                    (id, set)
                })
                .collect(),
        };
        // A cache: failing to write it costs the next run a walk, nothing more.
        if let Err(e) = memo.write(&path) {
            tracing::debug!("history memo not written: {e}");
        }
    }
    Ok(out)
}

/// The manifest sets one commit records: its own, and each side and base of
/// a conflicted jj commit, each distinct set once.
pub(crate) fn manifest_sets_at(repo: &Repo, commit: &CommitId) -> Result<Vec<ManifestSet>> {
    let prefix = repo.vcs_path(&repo.layout.objects_dir());
    let read = repo.vcs.commit_files(commit, &prefix)?;
    read.all_files()
        .into_iter()
        .map(|(_, files)| Ok(Arc::new(parse_manifest_files(&prefix, files)?)))
        .collect()
}

/// The manifests a commit records. A conflicted jj commit whose sides
/// disagree on a manifest is refused: it names several states of one object,
/// and reading any one of them (git shows the first side) would hand back
/// data under a commit that does not settle on it. Sides that agree are one
/// answer, whatever the conflict elsewhere.
pub(crate) fn manifests_at(repo: &Repo, commit: &CommitId) -> Result<BTreeMap<String, Manifest>> {
    let prefix = repo.vcs_path(&repo.layout.objects_dir());
    let read = repo.vcs.commit_files(commit, &prefix)?;
    let conflicted = read.conflicted_paths();
    if !conflicted.is_empty() {
        return Err(TetherError::Refused(format!(
            "commit {} has a conflict in the dataset's files ({}): its sides record different \
             states, so which one the commit names is not settled; resolve it (`jj resolve`, or \
             edit the files and `tether commit`) and name the commit that resolves it",
            commit.short12(),
            conflicted.join(", ")
        )));
    }
    parse_manifests(&prefix, &read.files)
}

/// Manifests from `path → bytes` under the objects prefix, shared.
fn parse_manifest_files(prefix: &str, files: &FileMap) -> Result<BTreeMap<String, Arc<Manifest>>> {
    Ok(parse_manifests(prefix, files)?
        .into_iter()
        .map(|(k, m)| (k, Arc::new(m)))
        .collect())
}

/// Manifests from `path → bytes` under the objects prefix.
fn parse_manifests(prefix: &str, files: &FileMap) -> Result<BTreeMap<String, Manifest>> {
    let mut out = BTreeMap::new();
    for (path, bytes) in files {
        let Some(rel) = path.strip_prefix(&format!("{prefix}/")) else {
            continue;
        };
        let Some(key) = rel.strip_suffix(".toml") else {
            continue;
        };
        let text = String::from_utf8_lossy(bytes);
        let m = Manifest::parse(&text, key, Path::new(path))?;
        out.insert(key.to_string(), m);
    }
    Ok(out)
}

/// The memo file's content.
#[derive(Serialize, Deserialize)]
struct Memo {
    format: u32,
    /// The tether that wrote it: another one may parse manifests differently.
    tether: String,
    /// The VCS path of the objects directory the sets were read under.
    prefix: String,
    /// The VCS's history key when `commits` was walked.
    key: Option<String>,
    /// Visible commits in walk order, each with its manifest set ids.
    commits: Vec<(String, Vec<String>)>,
    /// Manifest set id → key → manifest.
    sets: BTreeMap<String, BTreeMap<String, MemoManifest>>,
}

/// A manifest as the memo keeps it: its fields, read back without the
/// validation [`Manifest::parse`] gave them when the VCS's bytes were parsed.
#[derive(Serialize, Deserialize)]
struct MemoManifest {
    kind: String,
    locator: JsonMap,
    policy: Policy,
    state: Option<JsonMap>,
    /// `(id, ref, created)`.
    pin: Option<(String, String, bool)>,
    recoverable: bool,
    captured_at: Option<String>,
    created: bool,
}

impl From<&Manifest> for MemoManifest {
    fn from(m: &Manifest) -> Self {
        MemoManifest {
            kind: m.kind.clone(),
            locator: m.locator.clone(),
            policy: m.policy,
            state: m.state.clone(),
            pin: m
                .pin
                .as_ref()
                .map(|p| (p.id.clone(), p.r#ref.clone(), p.created)),
            recoverable: m.recoverable,
            captured_at: m.captured_at.clone(),
            created: m.origin == Origin::Created,
        }
    }
}

impl From<MemoManifest> for Manifest {
    fn from(m: MemoManifest) -> Self {
        Manifest {
            kind: m.kind,
            locator: m.locator,
            policy: m.policy,
            state: m.state,
            pin: m.pin.map(|(id, r#ref, created)| Pin { id, r#ref, created }),
            recoverable: m.recoverable,
            captured_at: m.captured_at,
            origin: if m.created {
                Origin::Created
            } else {
                Origin::Adopted
            },
        }
    }
}

impl Memo {
    /// The memo at `path` when it is this tether's, for `prefix`, and whole.
    fn read(path: &Path, prefix: &str) -> Option<Memo> {
        let bytes = std::fs::read(path).ok()?;
        let memo: Memo = match serde_json::from_slice(&bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!("ignoring history memo {}: {e}", path.display());
                return None;
            }
        };
        (memo.format == FORMAT && memo.tether == env!("CARGO_PKG_VERSION") && memo.prefix == prefix)
            .then_some(memo)
    }

    /// The sets, as manifests (taken out of the memo).
    fn take_sets(&mut self) -> HashMap<String, ManifestSet> {
        std::mem::take(&mut self.sets)
            .into_iter()
            .map(|(id, set)| {
                let set = set
                    .into_iter()
                    .map(|(k, m)| (k, Arc::new(m.into())))
                    .collect();
                (id, Arc::new(set))
            })
            .collect()
    }

    /// The walk as remembered, `None` when a set it names is not at hand.
    fn replay(&self, sets: &HashMap<String, ManifestSet>) -> Option<Vec<(CommitId, ManifestSet)>> {
        let mut out = Vec::new();
        for (commit, ids) in &self.commits {
            for id in ids {
                let set = sets.get(id)?;
                if !set.is_empty() {
                    out.push((CommitId::new(commit.clone()), Arc::clone(set)));
                }
            }
        }
        Some(out)
    }

    fn write(&self, path: &Path) -> std::result::Result<(), String> {
        let bytes = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        fsutil::write_atomic(path, &bytes).map_err(|e| e.to_string())
    }
}
