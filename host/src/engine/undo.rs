//! `tether undo [OP_ID] [--discard]`: reverse one journaled operation where
//! the stores still allow it (spec/09 "ops, undo, repair", spec/06 "Undo").
//!
//! [`crate::oplog::Journal::undo_target`] picks the entry (the newest one that
//! is neither an undo nor undone, or the one named) and refuses what cannot
//! be undone: an INCOMPLETE entry, a `drop` and its steps, `promote` and the
//! rest of the spec's "always refused" rows. Per command:
//!
//! - `commit`, `pull`: `git reset --soft` to the commit's parent, only while
//!   it is still the working copy's parent. The manifests become edits again
//!   and the pins stay.
//! - `new`, `restore`, a writable `open`'s lazy fork: delete the branches it
//!   *created*, only while each still stands where it was forked (or on a
//!   state a commit pinned; `--discard` deletes it anyway), report a branch it
//!   *reset* as IRREVERSIBLE with its old head, return the VCS working copy
//!   when it has not moved, delete a bookmark `-b` made, and put back the
//!   `workspace.toml` fields it changed that still hold what it left.
//! - `gc`: the working refs it forgot are remembered again (while nothing
//!   else took their place) and the listings it deleted are written back
//!   from the copies it journaled; the pins it released and the branches it
//!   deleted are IRREVERSIBLE (`repair` rebuilds what the manifests promise).
//! - `add`, `remove`, `import`: the manifests before (`pre.manifests`) come
//!   back where the file still holds what the operation left
//!   (`result.manifests`); `set`: each policy field it changed goes back while
//!   it still holds the value `set` wrote.
//!
//! Everything that can refuse is checked before the first side effect, so a
//! refused undo changes nothing. The undo is journaled itself, with the whole
//! `workspace.toml` before it as `pre.workspace`; its completion marks the
//! target undone (`undone by ID`).
//!
//! What an older operation "left" in `workspace.toml` is worked out by
//! rewinding: start from the file as it is now and lay each later entry's
//! `pre.workspace` (the file just before that entry ran) over it, newest
//! first. What remains is the file just after the target ran, as far as the
//! journal knows. A field the target changed comes back only when it still
//! holds that value; the others are listed as skipped. The snapshot cache
//! (`last_snapshot*`) is not restored: it is invalidated for the objects whose
//! working refs change, so the next `status` reads them again.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::commit::brief;
use super::error::{Result, TetherError};
use super::fork::branch_head;
use super::repo::{Repo, content};
use crate::lock::Locks;
use crate::model::workspace::State;
use crate::model::{Manifest, WorkspaceState, manifest};
use crate::oplog::{NewOp, OpEntry, OpHandle, OplogError};
use crate::plugin::{Descriptor, ObjectClient};
use crate::vcs::{CommitId, HeadState};

/// What `tether undo` was asked.
#[derive(Debug, Clone, Default)]
pub struct UndoOptions {
    /// The entry to reverse (an id or a unique prefix); `None`: the newest.
    pub op_id: Option<String>,
    /// Delete created branches even when they gained writes.
    pub discard: bool,
}

/// What an undo reversed, could not reverse, and left alone: the `--json`
/// shape of spec/09 (`failed` only appears when a step failed).
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct UndoReport {
    /// The operation that was undone.
    pub undone: String,
    /// Its command.
    pub command: String,
    /// The id of the `undo` entry appended to the log.
    pub undo_id: String,
    /// What was put back, one line each.
    pub restored: Vec<String>,
    /// What the stores no longer allow to be put back.
    pub irreversible: Vec<String>,
    /// Parts that no longer applied (a field changed since, a branch gone).
    pub skipped: Vec<String>,
    /// Steps that were attempted and failed (the rest was done).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// For the CLI's header: what the operation did, in a few words.
    #[serde(skip)]
    pub what: String,
}

impl UndoReport {
    /// Part of the work could not be reversed (exit 3).
    pub fn is_partial(&self) -> bool {
        !self.irreversible.is_empty() || !self.failed.is_empty()
    }
}

/// Reverse one operation of this checkout's log.
pub async fn undo(repo: &Repo, opts: &UndoOptions) -> Result<UndoReport> {
    let locks = repo.lock()?;
    let journal = repo.journal()?;
    let target = match journal.undo_target(opts.op_id.as_deref()) {
        Ok(t) => t,
        Err(OplogError::NotUndoable { id, command }) if command == "promote" => {
            return Err(promote_refusal(&journal.get(&id)?));
        }
        Err(e) => return Err(e.into()),
    };
    let mut report = UndoReport {
        undone: target.id.clone(),
        command: target.command.clone(),
        what: describe(&target),
        ..UndoReport::default()
    };
    match target.command.as_str() {
        "commit" | "pull" => undo_commit(repo, &target, &mut report).await?,
        "new" | "restore" | "open" => undo_forks(repo, &locks, &target, opts, &mut report).await?,
        "add" | "remove" | "import" => {
            undo_manifests(repo, &target, &mut report)?;
            if target.command == "add" {
                undo_created_store(repo, &locks, &target, &mut report).await?;
            }
        }
        "set" => undo_set(repo, &target, &mut report)?,
        "gc" => undo_gc(repo, &locks, &target, &mut report)?,
        other => {
            return Err(TetherError::refused(format!(
                "operation {} ({other}) is not one tether knows how to reverse",
                target.id
            )));
        }
    }
    Ok(report)
}

/// `promote` is never undone: tether does not move a base branch backwards.
/// The refusal prints each base's head before the move, so a person can.
fn promote_refusal(entry: &OpEntry) -> TetherError {
    let heads: Vec<String> = entry
        .pre
        .get("bases")
        .and_then(Value::as_object)
        .map(|bases| {
            bases
                .iter()
                .map(|(k, head)| match head.as_object() {
                    Some(state) => format!("{k}: {}", brief(state)),
                    None => format!("{k}: (no head recorded)"),
                })
                .collect()
        })
        .unwrap_or_default();
    let listed = if heads.is_empty() {
        String::new()
    } else {
        format!(
            "; each base branch's head before the move: {}",
            heads.join("; ")
        )
    };
    TetherError::refused(format!(
        "operation {} (promote) cannot be undone by tether: tether never moves a base branch \
         backwards{listed}. Move a base back with the store's own tools if you must",
        entry.id
    ))
}

/// What the operation did, in a few words, for the `undid ID (command: ...)`
/// header: the objects a `new` forked, else what `tether ops` says of it.
fn describe(target: &OpEntry) -> String {
    let forked: Vec<String> = fork_records(target).into_iter().map(|r| r.key).collect();
    if !forked.is_empty() {
        return format!("forked {}", forked.join(", "));
    }
    super::ops::describe(target)
}

/// Journal the undo: the whole `workspace.toml` before it (what a later undo
/// rewinds through) and the entry it reverses.
fn start(repo: &Repo, target: &OpEntry, report: &mut UndoReport) -> Result<OpHandle> {
    let ws = repo.workspace()?;
    let op = repo.journal()?.start(
        NewOp::new("undo")
            .undoes(&target.id)
            .pre("workspace", ws.to_json()),
    )?;
    report.undo_id = op.id().to_string();
    Ok(op)
}

/// Complete the undo entry, which marks its target undone.
fn finish(op: OpHandle, report: &UndoReport) -> Result<()> {
    op.finish(json!({
        "summary": format!("undid {} ({})", report.undone, report.command),
        "report": report,
    }))?;
    Ok(())
}

// ---------------------------------------------------------------- commit

async fn undo_commit(repo: &Repo, target: &OpEntry, report: &mut UndoReport) -> Result<()> {
    let Some(commit) = target.vcs_commit().map(CommitId::new) else {
        let why = if target.result.get("rolled_back").is_some()
            || target.result.get("failed").is_some()
        {
            "it failed and was rolled back: nothing landed"
        } else {
            "it made no VCS commit (--no-vcs): the manifests stay as they are"
        };
        report.skipped.push(format!("vcs commit: {why}"));
        let op = start(repo, target, report)?;
        return finish(op, report);
    };
    let head = repo.vcs.head()?;
    if head.as_ref() != Some(&commit) && interrupted_undo_reset(repo, target, &commit, &head)? {
        // An undo of this commit was killed after its reset: finish it.
        let op = start(repo, target, report)?;
        report.restored.push(format!(
            "uncommitted {}: the manifests are working-tree changes again (the pins stay)",
            commit.short12()
        ));
        return finish(op, report);
    }
    if head.as_ref() != Some(&commit) {
        let now = head
            .map(|h| h.short12().to_string())
            .unwrap_or_else(|| "no commit".into());
        return Err(TetherError::refused(format!(
            "cannot undo {} ({}): commit {} is no longer the working copy's parent (HEAD is {now}); \
             undo takes back only the commit the working copy stands on",
            target.id,
            target.command,
            commit.short12()
        ))
        .hint("undo the newer operations first (`tether ops` lists them), or move the VCS yourself"));
    }
    let parent = repo.vcs.resolve(&format!("{commit}^")).map_err(|_| {
        TetherError::refused(format!(
            "cannot undo {} ({}): commit {} is the repository's first commit, so there is no \
             parent to go back to",
            target.id,
            target.command,
            commit.short12()
        ))
    })?;
    let mut op = start(repo, target, report)?;
    repo.vcs.reset_soft(&parent)?;
    crate::fault::point("vcs.reset");
    op.progress(json!({"vcs": "reset", "from": commit.as_str(), "to": parent.as_str()}))?;
    report.restored.push(format!(
        "uncommitted {}: the manifests are working-tree changes again (the pins stay)",
        commit.short12()
    ));
    finish(op, report)
}

/// Whether an interrupted undo of `target` already took `commit` back: an
/// INCOMPLETE undo of it is in the log and the working copy stands on the
/// commit's parent.
fn interrupted_undo_reset(
    repo: &Repo,
    target: &OpEntry,
    commit: &CommitId,
    head: &Option<CommitId>,
) -> Result<bool> {
    let interrupted = repo
        .journal()?
        .incomplete()?
        .iter()
        .any(|e| e.undoes.as_deref() == Some(target.id.as_str()));
    if !interrupted {
        return Ok(false);
    }
    let parent = repo.vcs.resolve(&format!("{commit}^")).ok();
    Ok(parent.is_some() && head == &parent)
}

// ------------------------------------------------ new, restore, lazy fork

/// One branch an operation forked, from its progress records.
#[derive(Debug, Clone)]
struct ForkRecord {
    key: String,
    name: String,
    created: bool,
    reset_from: Option<Value>,
}

fn fork_records(target: &OpEntry) -> Vec<ForkRecord> {
    if !matches!(target.command.as_str(), "new" | "restore" | "open") {
        return Vec::new();
    }
    target
        .progress
        .iter()
        .filter_map(|p| {
            Some(ForkRecord {
                key: p.get("forked")?.as_str()?.to_string(),
                name: p.get("ref")?.as_str()?.to_string(),
                created: p.get("created").and_then(Value::as_bool).unwrap_or(false),
                reset_from: p.get("reset_from").filter(|v| !v.is_null()).cloned(),
            })
        })
        .collect()
}

/// Where a branch was forked from: the plan action's `fork_point` (`new`) or
/// `state` (`restore`), else the fork point `new` left in `workspace.toml`
/// for a lazy fork, else the manifest's state.
fn fork_point(
    target: &OpEntry,
    ws: &WorkspaceState,
    manifest: &Manifest,
    key: &str,
) -> Option<Value> {
    for a in target.planned_actions() {
        if a.get("key").and_then(Value::as_str) != Some(key) {
            continue;
        }
        let params = a.get("params");
        let fp = params
            .and_then(|p| p.get("fork_point").or_else(|| p.get("state")))
            .filter(|v| v.is_object());
        if let Some(fp) = fp {
            return Some(fp.clone());
        }
    }
    if let Some(fp) = ws.fork_points.get(key) {
        return Some(Value::Object(fp.clone()));
    }
    manifest.state.clone().map(Value::Object)
}

fn same_state(a: &Value, b: &Value, descriptor: &Descriptor) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => content(a, descriptor) == content(b, descriptor),
        _ => a == b,
    }
}

/// How a state a branch holds is kept by history: pinned by some commit,
/// recorded by one with no pin, or by none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Committed {
    Pinned,
    RecordedOnly,
    No,
}

/// The states visible commits recorded, per key, with whether a pin holds them.
struct History {
    states: Vec<(String, Map<String, Value>, bool)>,
}

impl History {
    fn read(repo: &Repo) -> Result<History> {
        let mut states = Vec::new();
        for (_, manifests) in super::history::history_manifests(repo)? {
            for (k, m) in manifests.iter() {
                if let Some(s) = &m.state {
                    states.push((k.clone(), s.clone(), m.pin.is_some()));
                }
            }
        }
        Ok(History { states })
    }

    fn committed(&self, key: &str, head: &Value, descriptor: &Descriptor) -> Committed {
        let Some(head) = head.as_object() else {
            return Committed::No;
        };
        let head = content(head, descriptor);
        let mut found = Committed::No;
        for (k, s, pinned) in &self.states {
            if k == key && content(s, descriptor) == head {
                if *pinned {
                    return Committed::Pinned;
                }
                found = Committed::RecordedOnly;
            }
        }
        found
    }
}

/// A created branch to delete, with its client.
struct Deletion {
    key: String,
    name: String,
    client: ObjectClient,
    /// It holds writes and goes only because of `--discard`.
    discarded: bool,
}

/// The manifest an object was forked under: the working tree's, else the one
/// at the commit `new` moved to.
fn manifest_for(
    repo: &Repo,
    working: &BTreeMap<String, Manifest>,
    at: &mut Option<BTreeMap<String, Manifest>>,
    commit: Option<&CommitId>,
    key: &str,
) -> Result<Option<Manifest>> {
    if let Some(m) = working.get(key) {
        return Ok(Some(m.clone()));
    }
    let Some(commit) = commit else {
        return Ok(None);
    };
    if at.is_none() {
        *at = Some(repo.manifests_at(commit)?);
    }
    Ok(at.as_ref().and_then(|m| m.get(key)).cloned())
}

/// How the VCS goes back after a `new`.
enum VcsBack {
    /// Nothing to do (the `new` stayed, or changed nothing).
    Nothing,
    /// The working copy moved since: left alone.
    Moved(String),
    /// Check this out again.
    Return(Return),
}

enum Return {
    Branch(String),
    Park(CommitId),
    Detached(CommitId),
}

/// Where `new` left the working copy and whether it is still there; refuses
/// when the checkout still works on the new bookmark but moved on since.
fn plan_vcs(repo: &Repo, target: &OpEntry) -> Result<VcsBack> {
    if target.command != "new" {
        return Ok(VcsBack::Nothing);
    }
    let ctx = target
        .plan
        .as_ref()
        .and_then(|p| p.get("context"))
        .and_then(|c| c.get("vcs"))
        .cloned()
        .unwrap_or(Value::Null);
    let moved_how = ctx.get("move").and_then(Value::as_str).unwrap_or("stay");
    let bookmark = ctx.get("bookmark").and_then(Value::as_str);
    let commit = ctx.get("commit").and_then(Value::as_str).map(CommitId::new);
    let moved_vcs = target
        .progress
        .iter()
        .any(|p| p.get("vcs").and_then(Value::as_str).is_some());
    if moved_how == "stay" || !moved_vcs {
        return Ok(VcsBack::Nothing);
    }
    let parked = target
        .progress
        .iter()
        .find(|p| p.get("vcs").and_then(Value::as_str) == Some("parked"))
        .and_then(|p| p.get("branch"))
        .and_then(Value::as_str);
    let now = repo.vcs.head_state()?;
    let still_there = match (&now, moved_how) {
        (HeadState::Branch { name, commit: c }, "create" | "switch") => {
            Some(name.as_str()) == bookmark && Some(c) == commit.as_ref()
        }
        (HeadState::Parked { branch, commit: c }, "park") => {
            Some(branch.as_str()) == parked && Some(c) == commit.as_ref()
        }
        _ => false,
    };
    if !still_there {
        let where_now = describe_head(&now);
        let same_place = match moved_how {
            "park" => {
                matches!(&now, HeadState::Parked { branch, .. } if Some(branch.as_str()) == parked)
            }
            _ => now.bookmark().is_some() && now.bookmark() == bookmark,
        };
        if same_place {
            return Err(TetherError::refused(format!(
                "cannot undo {} (new): this checkout still works on {} and its working copy moved \
                 on since ({where_now}); undoing the new would leave those commits behind",
                target.id,
                bookmark.or(parked).unwrap_or("its bookmark"),
            ))
            .hint("undo the newer operations first (`tether ops` lists them)"));
        }
        return Ok(VcsBack::Moved(where_now));
    }
    let pre = target.pre.get("vcs").cloned().unwrap_or(Value::Null);
    let pre_commit = pre.get("commit").and_then(Value::as_str).map(CommitId::new);
    let back = if pre.get("parked").and_then(Value::as_bool) == Some(true) {
        pre_commit.map(Return::Park)
    } else if let Some(b) = pre.get("branch").and_then(Value::as_str) {
        Some(Return::Branch(b.to_string()))
    } else {
        pre_commit.map(Return::Detached)
    };
    Ok(back.map(VcsBack::Return).unwrap_or(VcsBack::Nothing))
}

fn describe_head(head: &HeadState) -> String {
    match head {
        HeadState::Unborn { branch } => format!("on {branch}, no commit yet"),
        HeadState::Branch { name, commit } => format!("on {name} at {}", commit.short12()),
        HeadState::Parked { branch, commit } => {
            format!("read-only at {} on {branch}", commit.short12())
        }
        HeadState::Detached { commit } => format!("detached at {}", commit.short12()),
    }
}

async fn undo_forks(
    repo: &Repo,
    locks: &Locks,
    target: &OpEntry,
    opts: &UndoOptions,
    report: &mut UndoReport,
) -> Result<()> {
    let ws = repo.workspace()?;
    let working = repo.manifests()?;
    let dest_commit = target
        .plan
        .as_ref()
        .and_then(|p| p.pointer("/context/vcs/commit"))
        .and_then(Value::as_str)
        .map(CommitId::new);
    let mut at_commit = None;
    let mut history: Option<History> = None;
    let mut deletions = Vec::new();
    let mut blocked = Vec::new();
    for r in fork_records(target) {
        if !r.created {
            let was = r
                .reset_from
                .as_ref()
                .and_then(Value::as_object)
                .map(brief)
                .unwrap_or_else(|| "not recorded".into());
            report.irreversible.push(format!(
                "{}: {} was reset and stays where it is; its head before was {was} \
                 (`tether restore` or `tether new --discard` puts it where you want)",
                r.key, r.name
            ));
            continue;
        }
        let Some(m) = manifest_for(repo, &working, &mut at_commit, dest_commit.as_ref(), &r.key)?
        else {
            report.skipped.push(format!(
                "{}: no manifest names it any more, so its store is unknown; {} is left as it is",
                r.key, r.name
            ));
            continue;
        };
        let plugin = repo.plugin(&m.kind).await?;
        let descriptor = plugin.descriptor().clone();
        let client = repo.client(&m).await?;
        let head = branch_head(&client, &r.name)
            .await
            .map_err(|e| TetherError::backend(&r.key, e))?;
        let Some(head) = head else {
            report
                .skipped
                .push(format!("{}: {} is already gone", r.key, r.name));
            continue;
        };
        let fp = fork_point(target, &ws, &m, &r.key);
        let untouched = fp
            .as_ref()
            .is_some_and(|fp| same_state(fp, &head, &descriptor));
        let mut discarded = false;
        if !untouched {
            if history.is_none() {
                history = Some(History::read(repo)?);
            }
            let kept = history
                .as_ref()
                .expect("read above")
                .committed(&r.key, &head, &descriptor);
            let head_text = head.as_object().map(brief).unwrap_or_default();
            match kept {
                Committed::Pinned => {}
                _ if opts.discard => discarded = true,
                Committed::RecordedOnly => blocked.push(format!(
                    "{}: {} holds a recorded state no pin keeps ({head_text})",
                    r.key, r.name
                )),
                Committed::No => blocked.push(format!(
                    "{}: {} gained writes since it was forked ({head_text})",
                    r.key, r.name
                )),
            }
        }
        deletions.push(Deletion {
            key: r.key,
            name: r.name,
            client,
            discarded,
        });
    }
    if !blocked.is_empty() {
        return Err(TetherError::refused(format!(
            "cannot undo {} ({}): {}; deleting would lose them. Nothing was changed",
            target.id,
            target.command,
            blocked.join("; ")
        ))
        .hint("commit them first, or pass --discard to delete the branches with their writes"));
    }
    let vcs_back = plan_vcs(repo, target)?;

    let mut op = start(repo, target, report)?;
    for d in deletions {
        match d.client.delete_working_ref(&d.name).await {
            Ok(()) => {
                op.progress(json!({"deleted": d.key, "ref": d.name}))?;
                let note = if d.discarded {
                    " (its writes discarded)"
                } else {
                    ""
                };
                report
                    .restored
                    .push(format!("{}: deleted {}{note}", d.key, d.name));
            }
            Err(e) => report.failed.push(format!(
                "{}: deleting {} failed ({e}); `tether gc --prune-bookmarks` judges it later",
                d.key, d.name
            )),
        }
    }

    match vcs_back {
        VcsBack::Nothing => {}
        VcsBack::Moved(now) => {
            report.skipped.push(format!(
                "working copy: moved since ({now}); left where it is"
            ));
        }
        VcsBack::Return(back) => {
            let done = match &back {
                Return::Branch(b) => repo
                    .vcs
                    .switch_branch(b)
                    .map(|()| format!("working copy: back on {b}")),
                Return::Park(c) => repo
                    .vcs
                    .park(c)
                    .map(|p| format!("working copy: back at {} (read-only, on {p})", c.short12())),
                Return::Detached(c) => repo
                    .vcs
                    .checkout_detached(c)
                    .map(|()| format!("working copy: back at {} (detached)", c.short12())),
            };
            let done = crate::fault::on_ok("vcs.switch", done);
            match done {
                Ok(line) => {
                    op.progress(json!({"vcs": "returned", "to": line}))?;
                    report.restored.push(line);
                }
                Err(e) => {
                    report
                        .failed
                        .push(format!("working copy: could not go back ({e})"));
                }
            }
        }
    }
    // A bookmark `-b` made goes, once nothing stands on it.
    let created_bookmark = target
        .progress
        .iter()
        .find(|p| p.get("vcs").and_then(Value::as_str) == Some("created"))
        .and_then(|p| {
            Some((
                p.get("bookmark")?.as_str()?.to_string(),
                CommitId::new(p.get("commit")?.as_str()?),
            ))
        });
    if let Some((b, at)) = created_bookmark {
        if repo.vcs.branch_head(&b)?.is_none() {
            report.skipped.push(format!("bookmark {b}: already gone"));
        } else if repo.vcs.current_branch()?.as_deref() == Some(b.as_str()) {
            report
                .skipped
                .push(format!("bookmark {b}: this checkout is on it; kept"));
        } else {
            match crate::fault::on_ok("vcs.bookmark", repo.vcs.delete_branch(&b, &at)) {
                Ok(()) => {
                    op.progress(json!({"vcs": "deleted", "bookmark": b}))?;
                    report.restored.push(format!("bookmark {b} deleted"));
                }
                Err(crate::vcs::VcsError::BranchMoved { .. }) => report.skipped.push(format!(
                    "bookmark {b}: it moved on since (commits were made on it); kept"
                )),
                Err(e) => report.skipped.push(format!("bookmark {b}: kept ({e})")),
            }
        }
    }

    restore_workspace(repo, locks, target, report)?;
    finish(op, report)
}

// ------------------------------------------------------- workspace.toml

/// The undoable parts of `workspace.toml`: the bookmark and each entry of
/// the maps `new`, `restore` and lazy forks write, as (field, key) → value.
type Items = BTreeMap<(String, String), Value>;

const ITEM_MAPS: &[&str] = &[
    "working_refs",
    "pending_forks",
    "pending_resets",
    "base_states",
    "fork_points",
];

/// A `pre.workspace`: the whole file (it has a `workspace_id`), or only the
/// entries a lazy fork touched (`null`: absent).
struct PreWorkspace {
    whole: bool,
    items: BTreeMap<(String, String), Option<Value>>,
}

fn parse_pre(pre: &Value) -> Option<PreWorkspace> {
    let obj = pre.as_object()?;
    let whole = obj.contains_key("workspace_id");
    let mut items = BTreeMap::new();
    if whole || obj.contains_key("bookmark") {
        items.insert(
            ("bookmark".to_string(), String::new()),
            obj.get("bookmark").filter(|v| !v.is_null()).cloned(),
        );
    }
    for field in ITEM_MAPS {
        if let Some(Value::Object(map)) = obj.get(*field) {
            for (k, v) in map {
                items.insert(
                    (field.to_string(), k.clone()),
                    Some(v.clone()).filter(|v| !v.is_null()),
                );
            }
        }
    }
    Some(PreWorkspace { whole, items })
}

fn items_of(ws: &WorkspaceState) -> Items {
    let Some(PreWorkspace { items, .. }) = parse_pre(&ws.to_json()) else {
        return Items::new();
    };
    items
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

fn overlay(view: &mut Items, pre: &PreWorkspace) {
    if pre.whole {
        view.clear();
    }
    for (item, value) in &pre.items {
        match value {
            Some(v) => {
                view.insert(item.clone(), v.clone());
            }
            None => {
                view.remove(item);
            }
        }
    }
}

fn set_item(ws: &mut WorkspaceState, (field, key): &(String, String), value: Option<&Value>) {
    let state = || value.and_then(Value::as_object).cloned();
    let text = || value.and_then(Value::as_str).map(str::to_string);
    match field.as_str() {
        "bookmark" => ws.bookmark = text(),
        "working_refs" => put(&mut ws.working_refs, key, text()),
        "pending_forks" => put(&mut ws.pending_forks, key, text()),
        "pending_resets" => put(&mut ws.pending_resets, key, state()),
        "base_states" => put(&mut ws.base_states, key, state()),
        "fork_points" => put(&mut ws.fork_points, key, state()),
        _ => {}
    }
}

fn put<V>(map: &mut BTreeMap<String, V>, key: &str, value: Option<V>) {
    match value {
        Some(v) => {
            map.insert(key.to_string(), v);
        }
        None => {
            map.remove(key);
        }
    }
}

fn item_name((field, key): &(String, String)) -> String {
    if key.is_empty() {
        field.clone()
    } else {
        format!("{field}.{key}")
    }
}

/// Put back the `workspace.toml` entries the target changed that still hold
/// what it left; list the others as skipped.
fn restore_workspace(
    repo: &Repo,
    locks: &Locks,
    target: &OpEntry,
    report: &mut UndoReport,
) -> Result<()> {
    let Some(before) = target.pre.get("workspace").and_then(parse_pre) else {
        return Ok(());
    };
    let mut ws = repo.workspace()?;
    let current = items_of(&ws);
    // Rewind to just after the target: each later entry's `pre.workspace`
    // is the file as it was before that entry ran.
    let entries = repo.journal()?.entries()?;
    let mut left = current.clone();
    if let Some(pos) = entries.iter().position(|e| e.id == target.id) {
        for later in entries[pos + 1..].iter().rev() {
            if let Some(pre) = later.pre.get("workspace").and_then(parse_pre) {
                overlay(&mut left, &pre);
            }
        }
    }
    let scope: BTreeSet<(String, String)> = if before.whole {
        before
            .items
            .keys()
            .cloned()
            .chain(left.keys().cloned())
            .collect()
    } else {
        before.items.keys().cloned().collect()
    };
    let mut restored = Vec::new();
    let mut skipped = Vec::new();
    let mut touched_keys = BTreeSet::new();
    for item in scope {
        let was = before.items.get(&item).cloned().flatten();
        let after = left.get(&item);
        if was.as_ref() == after {
            continue;
        }
        if current.get(&item) == after {
            set_item(&mut ws, &item, was.as_ref());
            if matches!(item.0.as_str(), "working_refs" | "pending_forks") {
                touched_keys.insert(item.1.clone());
            }
            restored.push(item_name(&item));
        } else {
            skipped.push(item_name(&item));
        }
    }
    if restored.is_empty() && skipped.is_empty() {
        return Ok(());
    }
    if !restored.is_empty() {
        // The cached snapshot read other branches for these objects.
        super::snapshot::invalidate(&mut ws, &touched_keys);
        repo.save_workspace(locks, &ws)?;
    }
    if skipped.is_empty() {
        report.restored.push("workspace.toml restored".into());
    } else {
        if !restored.is_empty() {
            report
                .restored
                .push(format!("workspace.toml: {}", restored.join(", ")));
        }
        for s in skipped {
            report.skipped.push(format!(
                "workspace.toml {s}: changed since by a later operation; left as it is"
            ));
        }
    }
    Ok(())
}

// ------------------------------------------------------------ manifests

fn current_manifest(repo: &Repo, key: &str) -> Result<Option<Value>> {
    let path = repo.layout.manifest_file(key);
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(
        manifest::read_manifest(&repo.layout.objects_dir(), key)?.to_json(),
    ))
}

fn manifest_from(value: &Value, key: &str) -> Result<Manifest> {
    let map = value.as_object().cloned().unwrap_or_default();
    Manifest::from_json(&map).map_err(|m| {
        TetherError::refused(format!(
            "the operation log's copy of {key:?}'s manifest is not readable ({m})"
        ))
    })
}

/// `add`, `remove`, `import`: each manifest goes back to what it was before
/// (`pre.manifests`; `null`: absent) while the file still holds what the
/// operation left (`result.manifests`).
fn undo_manifests(repo: &Repo, target: &OpEntry, report: &mut UndoReport) -> Result<()> {
    let empty = Map::new();
    let before = target
        .pre
        .get("manifests")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let left = target
        .result
        .get("manifests")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let keys: BTreeSet<&String> = before.keys().chain(left.keys()).collect();
    let mut writes = Vec::new();
    for key in keys {
        let was = before.get(key).filter(|v| !v.is_null());
        let after = left.get(key).filter(|v| !v.is_null());
        let now = current_manifest(repo, key)?;
        if now.as_ref() == was {
            report
                .skipped
                .push(format!("{key}: its manifest is already as it was before"));
        } else if now.as_ref() == after {
            let m = was.map(|v| manifest_from(v, key)).transpose()?;
            writes.push((key.clone(), m));
        } else {
            report.skipped.push(format!(
                "{key}: its manifest changed since {} {}; left as it is",
                target.command, target.id
            ));
        }
    }
    let mut op = start(repo, target, report)?;
    for (key, m) in writes {
        match &m {
            Some(m) => {
                manifest::write_manifest(&repo.layout.objects_dir(), &key, m)?;
                crate::fault::point("manifest.write");
                report.restored.push(format!("{key}: manifest restored"));
            }
            None => {
                manifest::remove_manifest(&repo.layout.objects_dir(), &key)?;
                crate::fault::point("manifest.write");
                report.restored.push(format!("{key}: manifest removed"));
            }
        }
        op.progress(json!({"manifest": key, "restored": m.is_some()}))?;
    }
    finish(op, report)
}

/// `undo add` of `add --create`: the store goes again while it is still
/// empty (its base branch at the initial state, the marker, and the working
/// branch the add forked); one that holds anything now is kept and said so.
async fn undo_created_store(
    repo: &Repo,
    locks: &Locks,
    target: &OpEntry,
    report: &mut UndoReport,
) -> Result<()> {
    let Some(created) = target
        .progress
        .iter()
        .find(|p| p.get("created_store").is_some())
    else {
        return Ok(());
    };
    let key = created["created_store"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = created["kind"].as_str().unwrap_or_default().to_string();
    let locator = created.get("locator").cloned().unwrap_or(Value::Null);
    let plugin = repo.plugin(&kind).await?;
    let client = repo.client_for(&plugin, &locator);
    let forked: Vec<String> = target
        .progress
        .iter()
        .filter_map(|p| p.get("ref").and_then(Value::as_str).map(str::to_string))
        .collect();
    match client.is_ref_empty(&forked).await {
        Ok(Some(true)) => {}
        Ok(_) => {
            report.irreversible.push(format!(
                "{key}: the store add --create made holds data now; kept (`tether gc --delete-stores` judges it)"
            ));
            return Ok(());
        }
        Err(e) => {
            report.irreversible.push(format!(
                "{key}: cannot tell whether the store is empty ({e}); kept"
            ));
            return Ok(());
        }
    }
    let identity = client
        .identity()
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    for r in &forked {
        client
            .delete_working_ref(r)
            .await
            .map_err(|e| TetherError::backend(&key, e))?;
    }
    client
        .delete_store(repo.dataset_id())
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    let shared = repo.vcs.shared_dir();
    crate::oplog::index::remove_created(shared, repo.dataset_id(), &kind, &identity)?;
    crate::oplog::index::remove_touched(shared, repo.dataset_id(), &kind, &identity)?;
    let mut ws = repo.workspace()?;
    if ws.working_refs.remove(&key).is_some() {
        ws.fork_points.remove(&key);
        repo.save_workspace(locks, &ws)?;
    }
    report.restored.push(format!(
        "{key}: deleted the still-empty store add --create made"
    ));
    Ok(())
}

/// `set`: each policy field goes back to its old value while it still holds
/// the one `set` wrote (`pre.changed`: key → field → {from, to}).
fn undo_set(repo: &Repo, target: &OpEntry, report: &mut UndoReport) -> Result<()> {
    let empty = Map::new();
    let changed = target
        .pre
        .get("changed")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let manifests = repo.manifests()?;
    let mut writes = Vec::new();
    for (key, fields) in changed {
        let Some(mut m) = manifests.get(key).cloned() else {
            report
                .skipped
                .push(format!("{key}: no manifest any more; nothing to set back"));
            continue;
        };
        let mut lines = Vec::new();
        for (field, change) in fields.as_object().into_iter().flatten() {
            let from = change.get("from").and_then(Value::as_str).unwrap_or("");
            let to = change.get("to").and_then(Value::as_str).unwrap_or("");
            let now = match field.as_str() {
                "file" => m.policy.file.as_str(),
                "pin" => m.policy.pin.as_str(),
                _ => continue,
            };
            if now != to {
                report.skipped.push(format!(
                    "{key}: {field} is {now} now, not {to} as set left it; left as it is"
                ));
                continue;
            }
            let parsed = match field.as_str() {
                "file" => from.parse().map(|f| m.policy.file = f),
                _ => from.parse().map(|p| m.policy.pin = p),
            };
            parsed.map_err(|e: String| {
                TetherError::refused(format!(
                    "the operation log's old {field} policy of {key:?} is not readable ({e})"
                ))
            })?;
            lines.push(format!("{key}: {field} back to {from}"));
        }
        if !lines.is_empty() {
            writes.push((key.clone(), m, lines));
        }
    }
    let mut op = start(repo, target, report)?;
    for (key, m, lines) in writes {
        manifest::write_manifest(&repo.layout.objects_dir(), &key, &m)?;
        crate::fault::point("manifest.write");
        op.progress(json!({"manifest": key, "policy": {"file": m.policy.file.as_str(), "pin": m.policy.pin.as_str()}}))?;
        report.restored.extend(lines);
    }
    finish(op, report)
}

// ------------------------------------------------------------------- gc

/// A working ref `gc` forgot, as its journal entry saved it.
struct Remembered {
    key: String,
    name: String,
    pending: bool,
    fork_point: Option<State>,
    base_state: Option<State>,
    pending_reset: Option<State>,
}

/// A state `gc` saved beside a forgotten working ref (absent in entries
/// written before it saved them, which then come back without it).
fn saved_state(saved: &Value, field: &str) -> Option<State> {
    saved.get(field).and_then(Value::as_object).cloned()
}

/// `gc`: remember the working refs it forgot, with their fork points, and
/// write back the listings it deleted; its released pins and deleted
/// branches cannot come back.
fn undo_gc(repo: &Repo, locks: &Locks, target: &OpEntry, report: &mut UndoReport) -> Result<()> {
    let gc = target.result.get("report").cloned().unwrap_or(Value::Null);
    let forgotten: BTreeSet<String> = gc
        .get("forgotten_working_refs")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let pre_refs = target
        .pre
        .get("working_refs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut ws = repo.workspace()?;
    let mut remembered = Vec::new();
    for key in &forgotten {
        let Some(saved) = pre_refs.get(key) else {
            continue;
        };
        let Some(name) = saved.get("ref").and_then(Value::as_str) else {
            continue;
        };
        if ws.working_refs.contains_key(key) || ws.pending_forks.contains_key(key) {
            report.skipped.push(format!(
                "{key}: has a working ref again since; {name} is not remembered"
            ));
            continue;
        }
        let pending = saved.get("pending").and_then(Value::as_bool) == Some(true);
        remembered.push(Remembered {
            key: key.clone(),
            name: name.to_string(),
            pending,
            fork_point: saved_state(saved, "fork_point"),
            base_state: saved_state(saved, "base_state"),
            pending_reset: saved_state(saved, "pending_reset"),
        });
    }
    let saved_listings = target
        .pre
        .get("listings")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let deleted: Vec<String> = gc
        .get("deleted_listings")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut listings = Vec::new();
    for name in deleted {
        match saved_listings.get(&name).and_then(Value::as_str) {
            Some(text) => listings.push((name, text.to_string())),
            None => report.irreversible.push(format!(
                "listing {name}: deleted, and the log kept no copy of it"
            )),
        }
    }
    for p in &target.progress {
        if let Some(pin) = p.get("unpinned").and_then(Value::as_str) {
            let key = p.get("key").and_then(Value::as_str).unwrap_or("?");
            report.irreversible.push(format!(
                "{key}: pin {pin} released (`tether repair` recreates a pin a manifest still names)"
            ));
        }
        if let Some(branch) = p.get("deleted_branch").and_then(Value::as_str) {
            let key = p.get("key").and_then(Value::as_str).unwrap_or("?");
            report
                .irreversible
                .push(format!("{key}: branch {branch} deleted"));
        }
    }

    let mut op = start(repo, target, report)?;
    if !remembered.is_empty() {
        for r in &remembered {
            let key = &r.key;
            if r.pending {
                ws.pending_forks.insert(key.clone(), r.name.clone());
            } else {
                ws.working_refs.insert(key.clone(), r.name.clone());
            }
            let states = [
                (&mut ws.fork_points, &r.fork_point),
                (&mut ws.base_states, &r.base_state),
                (&mut ws.pending_resets, &r.pending_reset),
            ];
            for (map, state) in states {
                if let Some(state) = state {
                    map.insert(key.clone(), state.clone());
                }
            }
            report
                .restored
                .push(format!("{key}: working ref {} remembered again", r.name));
        }
        repo.save_workspace(locks, &ws)?;
        op.progress(json!({"remembered": remembered.iter().map(|r| (r.key.clone(), r.name.clone())).collect::<BTreeMap<_, _>>()}))?;
    }
    let dir = repo.layout.listings_dir();
    for (name, text) in listings {
        if crate::model::listing::read_listing(&dir, &name)?.is_some() {
            report.skipped.push(format!("listing {name}: exists again"));
            continue;
        }
        crate::model::listing::write_listing(&dir, &name, &text)?;
        crate::fault::point("listing.write");
        op.progress(json!({"listing": name}))?;
        report.restored.push(format!("listing {name} written back"));
    }
    finish(op, report)
}
