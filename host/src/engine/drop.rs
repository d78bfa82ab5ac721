//! `tether drop BOOKMARK [--to BOOKMARK] [--force-prune]`: throw a line of
//! work away, the opposite of `promote`. A dry run unless told otherwise.
//!
//! The plan lists, in order: `leave-bookmark` when this checkout is on it
//! (`new` to `--to`, default the trunk); `abandon-commit` for each commit only
//! this bookmark reaches; `delete-bookmark`; then the store side, previewed
//! as if those commits were gone: gc with `--prune-bookmarks` for this
//! bookmark's branches, the pins nothing references any more, and drop's own
//! rule, that a branch whose head a dropped commit pinned is deleted (that is
//! committed work thrown away by name). Writes no commit recorded are kept,
//! and said so, unless `--force-prune`.
//!
//! Refused for the trunk and for a bookmark another live checkout works on.
//! Apply re-plans the store half after the VCS half, and journals `new` and
//! `gc` as steps of the drop. Not undoable by tether: `git branch NAME SHA`
//! from the reflog, then `tether repair --all-history`, brings it back.

use serde::Serialize;
use serde_json::{Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::gc::{self, GcOptions, GcReport, Without};
use super::new::{self, NewOptions};
use super::repo::Repo;
use crate::oplog::{NewOp, OpEntry};
use crate::plan::{Action, Plan, Precondition, verb};
use crate::vcs::CommitId;

#[derive(Debug, Clone, Default)]
pub struct DropOptions {
    pub bookmark: String,
    pub to: Option<String>,
    pub force_prune: bool,
    /// Experimental: also the stores this dataset created, by gc's five rules.
    pub delete_stores: bool,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct DropReport {
    pub bookmark: String,
    pub left_for: Option<String>,
    pub abandoned: Vec<String>,
    pub gc: Option<GcReport>,
}

/// The store half of a drop: gc's plan as if `commits` and bookmark `b`
/// were gone (`leaving` when this checkout is the one on `b`).
async fn store_half(
    repo: &Repo,
    b: &str,
    commits: &[CommitId],
    leaving: bool,
    force_prune: bool,
    delete_stores: bool,
) -> Result<Plan> {
    let options = GcOptions {
        prune_bookmarks: true,
        force_prune,
        delete_stores,
        ..GcOptions::default()
    };
    let without = Without {
        commits: gc::commit_set(commits),
        bookmark: Some(b.to_string()),
        leaving,
    };
    gc::plan_with(repo, &options, &without).await
}

/// Decide what drop would do.
pub async fn plan(repo: &Repo, opts: &DropOptions) -> Result<Plan> {
    let b = opts.bookmark.clone();
    let trunk = repo.config.trunk.clone();
    if b == trunk {
        return Err(TetherError::refused(format!(
            "{b} is the trunk bookmark: it cannot be dropped"
        )));
    }
    super::gc::refuse_conflicted_bookmarks(repo, "drop")?;
    let Some(head) = repo.vcs.branch_head(&b)? else {
        if let Some(entry) = interrupted_drop(repo, &b)? {
            return resume_plan(repo, &entry, opts).await;
        }
        return Err(
            TetherError::refused(format!("no bookmark {b:?}")).hint(format!(
                "`{}` lists them",
                match repo.vcs.kind() {
                    crate::vcs::VcsKind::Git => "git branch",
                    crate::vcs::VcsKind::Jj => "jj bookmark list",
                }
            )),
        );
    };
    let ws = repo.workspace_for_plan()?;
    let checkouts = super::checkouts::live(repo)?;
    let held = super::checkouts::holders(&checkouts, &b);
    if let Some((path, id)) = held.first() {
        return Err(TetherError::refused(format!(
            "bookmark {b:?} is held by the checkout at {path} (workspace {})",
            crate::model::ids::workspace_short(id)
        ))
        .hint(format!(
            "forget that checkout \
             first (`tether forget-workspace {}`), or move it to another bookmark",
            crate::model::ids::workspace_short(id)
        )));
    }
    let here = ws.bookmark.as_deref() == Some(b.as_str());
    let to = opts.to.clone().unwrap_or_else(|| trunk.clone());
    if here {
        if to == b {
            return Err(
                TetherError::refused("--to names the bookmark being dropped")
                    .hint("leave for another one"),
            );
        }
        if repo.vcs.branch_head(&to)?.is_none() {
            return Err(TetherError::refused(format!(
                "--to {to:?}: no such bookmark to leave for"
            )));
        }
    }
    let (commits, keepers) = repo.vcs.exclusive_commits(&b)?;

    let mut p = Plan::new("drop");
    p.context.insert("bookmark".into(), json!(b));
    p.context.insert("to".into(), json!(here.then_some(&to)));
    p.context
        .insert("force_prune".into(), json!(opts.force_prune));
    p.context
        .insert("delete_stores".into(), json!(opts.delete_stores));
    p.context.insert(
        "commits".into(),
        json!(commits.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
    );
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::WorkspaceBookmark {
        expected: ws.bookmark.clone(),
    });
    p.require(Precondition::BookmarkHead {
        bookmark: b.clone(),
        expected: head.to_string(),
    });
    p.require(Precondition::NoNewHolders {
        bookmark: b.clone(),
        expected: if here {
            vec![ws.workspace_id.clone()]
        } else {
            Vec::new()
        },
    });
    if let Some(h) = repo.vcs.head()? {
        p.require(Precondition::VcsHead {
            rev: "HEAD".into(),
            expected: h.to_string(),
        });
    }
    p.require(Precondition::HistoryDigest {
        expected: repo.vcs.history_digest()?,
    });

    if here {
        p.push(
            Action::new(verb::LEAVE_BOOKMARK, "")
                .with_target(&to)
                .with_detail(format!("`tether new {to}` first: this checkout is on {b}")),
        );
    }
    for c in &commits {
        p.push(
            Action::new(verb::ABANDON_COMMIT, "")
                .with_target(c.to_string())
                .with_detail(format!("{} only {b} reaches it", c.short12())),
        );
    }
    if !keepers.is_empty() {
        let names: Vec<&str> = keepers
            .iter()
            .map(|r| {
                r.trim_start_matches("refs/heads/")
                    .trim_start_matches("refs/tags/")
            })
            .collect();
        p.note(format!(
            "the rest of {b}'s commits stay: {} {} them",
            names.join(", "),
            if names.len() == 1 { "reaches" } else { "reach" }
        ));
    }
    p.push(
        Action::new(verb::DELETE_BOOKMARK, "")
            .with_target(&b)
            .with_detail(format!("at {}", head.short12())),
    );
    let store = store_half(
        repo,
        &b,
        &commits,
        here,
        opts.force_prune,
        opts.delete_stores,
    )
    .await?;
    p.note("the store actions are a preview, computed as if the commits were gone; apply plans them again after the VCS half");
    for n in store.notes {
        p.note(n);
    }
    for a in store.actions {
        p.push(a);
    }
    Ok(p)
}

/// The INCOMPLETE drop of bookmark `b` that got as far as deleting it, if any.
fn interrupted_drop(repo: &Repo, b: &str) -> Result<Option<OpEntry>> {
    Ok(repo.journal()?.incomplete()?.into_iter().rev().find(|e| {
        e.command == "drop"
            && e.plan
                .as_ref()
                .and_then(|p| p.get("context"))
                .and_then(|c| c.get("bookmark"))
                .and_then(Value::as_str)
                == Some(b)
    }))
}

/// The plan that finishes a drop killed after it deleted the bookmark (spec
/// 14, "An interrupted command": the same command again finishes it). Only
/// the store half is left, planned as the interrupted drop would have, as
/// if the commits it named were gone. It binds what still exists: the
/// workspace, the working copy, the history, and that nobody works on the
/// bookmark's name; apply checks that the bookmark is still gone.
async fn resume_plan(repo: &Repo, entry: &OpEntry, opts: &DropOptions) -> Result<Plan> {
    let b = opts.bookmark.clone();
    let was = entry
        .plan
        .as_ref()
        .and_then(|p| p.get("context"))
        .cloned()
        .unwrap_or(Value::Null);
    let commits: Vec<CommitId> = was
        .get("commits")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(CommitId::new)
                .collect()
        })
        .unwrap_or_default();
    let flag = |name: &str| was.get(name).and_then(Value::as_bool).unwrap_or(false);
    let force_prune = opts.force_prune || flag("force_prune");
    let delete_stores = opts.delete_stores || flag("delete_stores");
    let ws = repo.workspace_for_plan()?;
    let mut p = Plan::new("drop");
    p.context.insert("bookmark".into(), json!(b));
    p.context.insert("to".into(), Value::Null);
    p.context.insert("force_prune".into(), json!(force_prune));
    p.context
        .insert("delete_stores".into(), json!(delete_stores));
    p.context.insert(
        "commits".into(),
        json!(commits.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
    );
    p.context.insert("resumes".into(), json!(entry.id));
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::WorkspaceBookmark {
        expected: ws.bookmark.clone(),
    });
    p.require(Precondition::NoNewHolders {
        bookmark: b.clone(),
        expected: Vec::new(),
    });
    if let Some(h) = repo.vcs.head()? {
        p.require(Precondition::VcsHead {
            rev: "HEAD".into(),
            expected: h.to_string(),
        });
    }
    p.require(Precondition::HistoryDigest {
        expected: repo.vcs.history_digest()?,
    });
    p.note(format!(
        "finishes the interrupted drop {}: bookmark {b} is already deleted, the store half is left",
        entry.id
    ));
    let store = store_half(repo, &b, &commits, false, force_prune, delete_stores).await?;
    for n in store.notes {
        p.note(n);
    }
    for a in store.actions {
        p.push(a);
    }
    Ok(p)
}

/// Apply a drop plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<DropReport> {
    let ctx = |k: &str| plan.context.get(k).cloned().unwrap_or(Value::Null);
    let b = ctx("bookmark").as_str().unwrap_or_default().to_string();
    let to = ctx("to").as_str().map(str::to_string);
    let force_prune = ctx("force_prune").as_bool().unwrap_or(false);
    let delete_stores = ctx("delete_stores").as_bool().unwrap_or(false);
    let commits: Vec<CommitId> = ctx("commits")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(CommitId::new)
                .collect()
        })
        .unwrap_or_default();
    let head = repo.vcs.branch_head(&b)?;
    let journal = repo.journal()?;
    let mut op = {
        let _locks = repo.lock()?;
        // The store half is planned again below: check only the VCS half now.
        let mut vcs_half = plan.clone();
        vcs_half.actions.retain(|a| {
            matches!(
                a.verb.as_str(),
                verb::LEAVE_BOOKMARK | verb::ABANDON_COMMIT | verb::DELETE_BOOKMARK
            )
        });
        vcs_half.preconditions.retain(|pc| {
            !matches!(
                pc,
                Precondition::RefHead { .. } | Precondition::RefAbsent { .. }
            )
        });
        match ctx("resumes").as_str() {
            // Finishing an interrupted drop: its bookmark has no head to bind.
            Some(resumed) => {
                if head.is_some() || interrupted_drop(repo, &b)?.is_none_or(|e| e.id != resumed) {
                    return Err(TetherError::refused(format!(
                        "this plan finishes the interrupted drop {resumed} of {b}, which is no \
                         longer what the log and the VCS show"
                    ))
                    .hint("plan the drop again"));
                }
                vcs_half.check_listed(&mut Checker { repo })?;
            }
            None => vcs_half.check_all(&mut Checker { repo })?,
        }
        journal.start(NewOp::new("drop").plan(plan).pre(
            "bookmark",
            json!({"name": b, "head": head.as_ref().map(|h| h.to_string())}),
        ))?
    };
    let op_id = op.id().to_string();
    let mut report = DropReport {
        bookmark: b.clone(),
        left_for: to.clone(),
        ..DropReport::default()
    };
    if let Some(to) = &to {
        let step = new::plan(
            repo,
            &NewOptions {
                rev: Some(to.clone()),
                ..NewOptions::default()
            },
        )
        .await;
        // A failure here leaves the drop INCOMPLETE: `tether drop` again finishes it.
        let step = step?;
        new::apply_as(repo, &step, Some(&op_id)).await?;
    }
    if let Some(h) = &head {
        let _locks = repo.lock()?;
        repo.vcs.delete_branch(&b, h)?;
        crate::fault::point("vcs.bookmark");
        op.progress(json!({"deleted_bookmark": b, "at": h.to_string()}))?;
    }
    report.abandoned = commits.iter().map(|c| c.to_string()).collect();
    let store = store_half(repo, &b, &commits, false, force_prune, delete_stores).await?;
    let gc_report = gc::apply_as(repo, &store, Some(&op_id)).await?;
    report.gc = Some(gc_report);
    op.finish(json!({"summary": format!("dropped {b}"), "report": report}))?;
    Ok(report)
}
