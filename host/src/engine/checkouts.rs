//! The live checkouts of a dataset's repository (git worktrees, jj
//! workspaces) as tether sees them: each one's `workspace.toml`, working-tree
//! manifests and operation log. `new` asks which checkout holds a bookmark;
//! `gc` and `drop` count every checkout's working tree and unfinished
//! operations as references.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::error::Result;
use super::repo::Repo;
use crate::model::{Manifest, WorkspaceState, manifest};
use crate::oplog::{Journal, OpEntry};

/// One live checkout of the repository.
#[derive(Debug, Clone)]
pub struct Checkout {
    /// Its dataset root.
    pub root: PathBuf,
    /// Whether it is the checkout this command runs in.
    pub current: bool,
    /// Its `workspace.toml`, if it has one.
    pub workspace: Option<WorkspaceState>,
    /// The manifests of its working tree.
    pub manifests: BTreeMap<String, Manifest>,
    /// Its operations that started and never finished.
    pub unfinished: Vec<OpEntry>,
}

/// Every live checkout, this one first. A checkout whose files cannot be
/// read is skipped with a warning naming it (a clone's tracked copy of a
/// per-checkout file is refused the same way: spec/10, "Security model").
pub fn live(repo: &Repo) -> Result<Vec<Checkout>> {
    let rel = repo
        .root()
        .strip_prefix(repo.vcs.root())
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let mut out = vec![Checkout {
        root: repo.root().to_path_buf(),
        current: true,
        workspace: crate::model::WorkspaceState::read(&repo.layout.workspace_file())?,
        manifests: repo.manifests()?,
        unfinished: repo.journal()?.incomplete()?,
    }];
    for w in repo.vcs.worktrees()? {
        if w.is_current || !w.exists {
            continue;
        }
        let root = w.path.join(&rel);
        let dot = root.join(".tether");
        if !dot.is_dir() {
            continue;
        }
        let read = || -> Result<Checkout> {
            Ok(Checkout {
                workspace: WorkspaceState::read(&dot.join("workspace.toml"))?,
                manifests: manifest::read_all(&dot.join("objects"))?,
                unfinished: Journal::open(dot.join("ops.jsonl")).incomplete()?,
                root: root.clone(),
                current: false,
            })
        };
        match read() {
            Ok(c) => out.push(c),
            Err(e) => tracing::warn!("skipping the checkout at {}: {e}", root.display()),
        }
    }
    Ok(out)
}

/// The other live checkouts working on `bookmark`: (path, workspace id).
pub fn holders(checkouts: &[Checkout], bookmark: &str) -> Vec<(String, String)> {
    checkouts
        .iter()
        .filter(|c| !c.current)
        .filter_map(|c| {
            let ws = c.workspace.as_ref()?;
            (ws.bookmark.as_deref() == Some(bookmark))
                .then(|| (c.root.display().to_string(), ws.workspace_id.clone()))
        })
        .collect()
}
