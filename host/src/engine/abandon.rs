//! `tether abandon REV... [--gc]`: drop commits from a line you keep, then
//! plan `gc` for what only they pinned (`--gc` applies it).
//!
//! Later commits keep their manifests exactly as they were: a manifest is a
//! whole state, not a patch, so removing an earlier one must not conflict
//! with it the way a plain `git rebase` would. Under git the commits must be
//! on the current branch's line and the tree clean; a conflict outside
//! `.tether/` aborts with nothing changed. Not undoable by tether (the
//! reflog brings the commits back; then `tether repair`).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::error::{Result, TetherError};
use super::gc::{self, GcOptions, GcReport};
use super::repo::Repo;
use crate::oplog::NewOp;
use crate::plan::{Plan, verb};
use crate::vcs::CommitId;

#[derive(Debug, Clone, Default)]
pub struct AbandonOptions {
    pub revs: Vec<String>,
    pub gc: bool,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize)]
pub struct AbandonReport {
    pub abandoned: Vec<String>,
    pub gc_plan: Value,
    pub gc_applied: bool,
    /// For the CLI.
    #[serde(skip)]
    pub plan: Plan,
    #[serde(skip)]
    pub gc: Option<GcReport>,
}

pub async fn abandon(repo: &Repo, opts: &AbandonOptions) -> Result<AbandonReport> {
    if opts.revs.is_empty() {
        return Err(
            TetherError::refused("name the commits to abandon").hint("`tether abandon REV...`")
        );
    }
    let mut commits: Vec<CommitId> = Vec::new();
    for rev in &opts.revs {
        let c = repo.vcs.resolve(rev)?;
        if !commits.contains(&c) {
            commits.push(c);
        }
    }
    // Its report's gc plan is made after the VCS half, and gc refuses these:
    // refused now, before any commit is dropped (as `drop` is).
    super::gc::refuse_conflicted_bookmarks(repo, "abandon")?;
    let dirty: Vec<String> = repo
        .vcs
        .changes()?
        .into_iter()
        .filter(|c| !c.untracked)
        .map(|c| c.path)
        .collect();
    if !dirty.is_empty() {
        return Err(TetherError::refused(format!(
            "the working tree has uncommitted changes ({})",
            dirty.join(", ")
        ))
        .hint(
            "commit or stash them first, since \
             abandon rewrites the commits after the ones it drops",
        ));
    }
    // The pins only these commits name are what gc may release.
    let mut named: BTreeSet<String> = BTreeSet::new();
    for c in &commits {
        // Every side of a conflicted commit: each pinned what it records.
        for set in super::history::manifest_sets_at(repo, c)? {
            for p in set.values().filter_map(|m| m.pin.as_ref()) {
                named.insert(p.id.clone());
            }
        }
    }
    let op_id = {
        let _locks = repo.lock()?;
        let head = repo.vcs.head()?;
        let journal = repo.journal()?;
        let mut op = journal.start(NewOp::new("abandon").pre(
            "vcs",
            json!({"branch": repo.vcs.current_branch()?, "head": head.map(|h| h.to_string())}),
        ))?;
        let prefix = repo.vcs_path(&repo.layout.dot_dir());
        let rewritten = repo.vcs.drop_commits(&commits, &prefix)?;
        op.progress(json!({
            "abandoned": commits.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            "rewritten": rewritten.iter().map(|(o, n)| json!({"from": o.to_string(), "to": n.to_string()})).collect::<Vec<_>>(),
        }))?;
        let id = op.id().to_string();
        op.finish(json!({
            "summary": format!("abandoned {}", commits.iter().map(|c| c.short12().to_string()).collect::<Vec<_>>().join(", ")),
        }))?;
        id
    };

    let mut plan = gc::plan(repo, &GcOptions::default()).await?;
    plan.actions.retain(|a| {
        matches!(a.verb.as_str(), verb::UNPIN | verb::KEEP_PIN)
            && a.params
                .get("pin_id")
                .and_then(Value::as_str)
                .is_some_and(|id| named.contains(id))
    });
    let gc_report = if opts.gc {
        Some(gc::apply_as(repo, &plan, Some(&op_id)).await?)
    } else {
        None
    };
    Ok(AbandonReport {
        abandoned: commits.iter().map(|c| c.to_string()).collect(),
        gc_plan: plan.to_value(),
        gc_applied: gc_report.is_some(),
        plan,
        gc: gc_report,
    })
}
