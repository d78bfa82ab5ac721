//! `tether forget-workspace [ID]`: retire a checkout. `git worktree remove`
//! (jj: `jj workspace forget`) plus removing that checkout's `workspace.toml`
//! and `ops.jsonl`. No store branch is touched: branches belong to bookmarks,
//! which stay live for `gc` while the VCS has them. The plan binds to
//! nothing, and it is not undoable.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

use super::checkouts;
use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::ids;
use crate::oplog::NewOp;
use crate::plan::{Action, Plan, verb};

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ForgetReport {
    pub workspace: String,
    pub removed_files: Vec<String>,
    pub vcs: Option<String>,
    pub failed: std::collections::BTreeMap<String, String>,
}

/// Decide what forget-workspace would do for checkout `id` (default: this one).
pub fn plan(repo: &Repo, id: Option<&str>) -> Result<Plan> {
    let all = checkouts::live(repo)?;
    let target = match id {
        None => all.iter().find(|c| c.current),
        Some(id) => {
            let id = id.trim();
            let matches: Vec<_> = all
                .iter()
                .filter(|c| {
                    c.workspace
                        .as_ref()
                        .is_some_and(|w| !id.is_empty() && w.workspace_id.starts_with(id))
                })
                .collect();
            if matches.len() > 1 {
                return Err(
                    TetherError::refused(format!("workspace id {id:?} is ambiguous"))
                        .hint("give more of it"),
                );
            }
            matches.into_iter().next()
        }
    };
    let Some(target) = target else {
        let known: Vec<String> = all
            .iter()
            .filter_map(|c| {
                c.workspace.as_ref().map(|w| {
                    format!(
                        "{} ({})",
                        ids::workspace_short(&w.workspace_id),
                        c.root.display()
                    )
                })
            })
            .collect();
        return Err(TetherError::refused(format!(
            "no live checkout has workspace id {:?}; the live ones are: {}",
            id.unwrap_or_default(),
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        )));
    };
    let ws_id = target
        .workspace
        .as_ref()
        .map(|w| w.workspace_id.clone())
        .unwrap_or_default();
    let mut p = Plan::new("forget-workspace");
    p.context
        .insert("workspace".into(), json!(ids::workspace_short(&ws_id)));
    p.context
        .insert("root".into(), json!(target.root.display().to_string()));
    let dot = target.root.join(".tether");
    for name in ["workspace.toml", "ops.jsonl"] {
        let file = dot.join(name);
        if file.exists() {
            p.push(
                Action::new(verb::DELETE_FILE, "")
                    .with_target(file.display().to_string())
                    .with_detail("per-checkout state"),
            );
        }
    }
    let worktree = repo
        .vcs
        .worktrees()?
        .into_iter()
        .find(|w| target.root.starts_with(&w.path));
    match worktree {
        Some(w) if !w.is_main => {
            p.push(
                Action::new(verb::FORGET_VCS_WORKSPACE, "")
                    .with_target(w.path.display().to_string())
                    .with_detail(removal_command(repo.vcs.kind())),
            );
        }
        _ => p.note("the main checkout of the repository stays a checkout; only tether's state in it is forgotten"),
    }
    p.note("no store branch is touched: `tether gc --prune-bookmarks` judges them once their bookmark is gone");
    Ok(p)
}

/// What removing a second checkout is called in the dataset's VCS.
fn removal_command(kind: crate::vcs::VcsKind) -> &'static str {
    match kind {
        crate::vcs::VcsKind::Git => "git worktree remove",
        crate::vcs::VcsKind::Jj => "jj workspace forget",
    }
}

/// Apply a forget-workspace plan.
pub fn apply(repo: &Repo, plan: &Plan) -> Result<ForgetReport> {
    let mut report = ForgetReport {
        workspace: plan
            .context
            .get("workspace")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string(),
        ..ForgetReport::default()
    };
    let root = PathBuf::from(
        plan.context
            .get("root")
            .and_then(|v| v.as_str())
            .unwrap_or_default(),
    );
    let current = root == repo.root();
    // A writer like any other: its journal entry and the files it deletes.
    let _locks = repo.lock()?;
    // Journal in this checkout, unless this is the checkout being forgotten.
    let journal = (!current).then(|| repo.journal()).transpose()?;
    let mut op = match &journal {
        Some(j) => Some(j.start(NewOp::new("forget-workspace").plan(plan))?),
        None => None,
    };
    for a in &plan.actions {
        match a.verb.as_str() {
            verb::DELETE_FILE => match std::fs::remove_file(&a.target) {
                Ok(()) => report.removed_files.push(a.target.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    report.failed.insert(a.target.clone(), e.to_string());
                }
            },
            verb::FORGET_VCS_WORKSPACE => {
                match repo
                    .vcs
                    .remove_worktree(std::path::Path::new(&a.target), false)
                {
                    Ok(()) => {
                        report.vcs =
                            Some(format!("{} {}", removal_command(repo.vcs.kind()), a.target))
                    }
                    Err(e) => {
                        report.failed.insert(a.target.clone(), e.to_string());
                    }
                }
            }
            _ => {}
        }
        if let Some(op) = op.as_mut() {
            op.progress(json!({"done": a.verb, "target": a.target}))?;
        }
    }
    if let Some(op) = op {
        op.finish(
            json!({"summary": format!("forgot workspace {}", report.workspace), "report": report}),
        )?;
    }
    Ok(report)
}
