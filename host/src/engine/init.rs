//! `tether init`: make a dataset of an existing git (or jj) repository.
//!
//! Writes `tether.toml` and `.tether/` (with its `.gitignore`), records the
//! trunk as this checkout's bookmark, and puts the VCS working copy on the
//! trunk branch. A given `--dataset-id` is how a lost dataset takes back its
//! stores' refs; otherwise a fresh id is generated.

use std::path::Path;

use serde::Serialize;

use super::error::{Result, TetherError};
use super::repo::prefer;
use crate::model::{Config, Layout, WorkspaceState, config, ids};
use crate::vcs::{self, HeadState};

#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    pub root: String,
    pub dataset_id: String,
}

pub fn init(path: &Path, dataset_id: Option<&str>) -> Result<InitReport> {
    let root = std::path::absolute(path)
        .map_err(|e| TetherError::io(format!("resolving {}", path.display()), e))?;
    if !root.is_dir() {
        return Err(
            TetherError::refused(format!("{} is not a directory", root.display())).hint(format!(
                "create the repository first (`git init {}`), then `tether init`",
                root.display()
            )),
        );
    }
    let layout = Layout::new(&root);
    layout.check_dot_dir()?;
    if layout.config_file().exists() {
        return Err(TetherError::refused(format!(
            "{} is already a dataset ({} exists)",
            root.display(),
            layout.config_file().display()
        )));
    }
    let dataset_id = match dataset_id {
        Some(id) => {
            ids::validate_dataset_id(id)?;
            id.to_string()
        }
        None => ids::new_dataset_id(),
    };
    let cfg = Config::new(&dataset_id)?;
    let vcs = vcs::detect(&root, prefer(&cfg))?;
    // The working copy goes on the trunk before anything is written, so a
    // refusal leaves the directory as it was.
    match vcs.head_state()? {
        HeadState::Unborn { branch } if branch != cfg.trunk => vcs.set_unborn_branch(&cfg.trunk)?,
        HeadState::Unborn { .. } => {}
        HeadState::Branch { name, .. } if name == cfg.trunk => {}
        state => {
            let head = state
                .commit()
                .cloned()
                .ok_or_else(|| TetherError::refused("no commit checked out"))?;
            if vcs.branch_head(&cfg.trunk)?.is_none() {
                vcs.create_branch(&cfg.trunk, &head)?;
            }
            vcs.switch_branch(&cfg.trunk)?;
        }
    }
    std::fs::create_dir_all(layout.objects_dir())
        .map_err(|e| TetherError::io(format!("creating {}", layout.objects_dir().display()), e))?;
    layout.ensure_gitignore()?;
    crate::model::fsutil::write_atomic(
        &layout.config_file(),
        config::default_file_text(&dataset_id)?.as_bytes(),
    )?;
    let mut ws = WorkspaceState::new();
    ws.bookmark = Some(cfg.trunk.clone());
    ws.write(&layout.workspace_file())?;
    Ok(InitReport {
        root: root.display().to_string(),
        dataset_id,
    })
}
