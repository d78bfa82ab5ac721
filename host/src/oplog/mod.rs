//! The operation journal (`.tether/ops.jsonl`) and the repository indexes.
//!
//! The VCS records the manifests, but not which refs a `commit` created, which
//! branches `new` forked or reset, or what `gc` deleted. The journal does, per
//! checkout, so `undo` can reverse it, `repair` can finish it and `gc` can keep
//! what an unfinished operation set out to create (spec 10, "Operation log").
//!
//! It is a journal in the database sense. [`Journal::begin`] appends a
//! `started` record, holding the plan and what `undo` needs (`pre`), and syncs
//! it *before returning*, so it is on disk before the caller's first side
//! effect. [`OpHandle::progress`] appends and syncs one record per effect as it
//! lands; the effects of a fan-out go through a [`Wave`], which writes each
//! record as its effect lands and syncs them once, when the fan-out is over
//! (a kill still leaves every landed effect's record; see [`Wave`]).
//! [`OpHandle::finish`] appends the completion mark with the result. A
//! process killed in between leaves a `started` entry with no mark: it reads
//! back as INCOMPLETE, `undo` refuses it and `repair` names it. A crash loses
//! at most the line being written ([`jsonl`]).
//!
//! Lines on disk, one JSON object each, told apart by `record`:
//!
//! - `{"record": "started", "id", "at", "command", "plan", "pre", "parent", "undoes"}`
//! - `{"record": "progress", "op", "at", "detail"}`
//! - `{"record": "done", "op", "at", "result", "pre"}` (`pre`: what `undo`
//!   learnt while the op ran, merged over the started `pre`; may be absent)
//! - `{"record": "undone", "op", "by", "at"}`
//! - `{"record": "closed", "op", "by", "at", "how"}`: an INCOMPLETE entry
//!   whose effects a later operation accounted for (a re-run that finished
//!   it, a `repair` that handed its leftover pins to `gc`). It reads back
//!   with status `closed` and `result` `{"closed_by", "summary"}`; `gc` no
//!   longer keeps what it set out to create, and `undo` still refuses it.
//!
//! Reading folds them into [`OpEntry`]s, the `tether ops --json` shape of spec
//! 09. An `undo` names its target in its started record (`undoes`); completing
//! the undo marks the target undone in the same append, so there is no state
//! where the undo is done and its target still counts as undoable.
//!
//! Writers hold the checkout lock ([`crate::lock`]); the journal is not safe
//! against two concurrent writers on its own.

pub mod index;
pub mod jsonl;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::plan::Plan;

/// The journal's file name, under `.tether/`.
pub const OPS_FILENAME: &str = "ops.jsonl";

/// Commands `undo` always refuses (spec 09, "ops, undo, repair"): a `drop`'s
/// steps are refused with it.
pub const NOT_UNDOABLE: &[&str] = &[
    "promote",
    "repair",
    "upgrade",
    "abandon",
    "drop",
    "forget-workspace",
];

/// `.tether/ops.jsonl` under a dataset root.
pub fn ops_path(root: &Path) -> PathBuf {
    root.join(".tether").join(OPS_FILENAME)
}

/// Now, UTC, ISO 8601 with milliseconds.
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[derive(Debug, thiserror::Error)]
pub enum OplogError {
    #[error("operation log {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("no operation {id} in this checkout's log (`tether ops` lists them)")]
    NotFound { id: String },

    #[error("operation id {prefix} is ambiguous: it starts {}; give more of it", .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },

    #[error("nothing to undo: this checkout's log has no operation left to reverse")]
    NothingToUndo,

    #[error(
        "operation {id} ({command}) is INCOMPLETE: it was interrupted, and what it did is not \
         fully known, so it cannot be undone. `tether repair --dry-run` says how far it got; \
         {rerun} finishes it"
    )]
    Incomplete {
        id: String,
        command: String,
        /// The command line that finishes it.
        rerun: String,
    },

    #[error(
        "operation {id} ({command}) is a step of {parent}: a step is undone with its parent or \
         not at all"
    )]
    StepOf {
        id: String,
        command: String,
        parent: String,
    },

    #[error("operation {id} ({command}) cannot be undone by tether")]
    NotUndoable { id: String, command: String },

    #[error(
        "operation {id} ({command}) was interrupted, then closed by {by}: what it did is not \
         fully known, so it cannot be undone"
    )]
    Closed {
        id: String,
        command: String,
        by: String,
    },

    #[error("operation {id} was already undone by {by}")]
    AlreadyUndone { id: String, by: String },

    #[error("operation {id} is an undo (of {undoes}); tether has no redo: run the command again")]
    IsUndo { id: String, undoes: String },
}

impl OplogError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        OplogError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One operation as read back: the `tether ops --json` row (spec 09).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpEntry {
    /// 12 hex, random ([`new_op_id`]); older logs hold 8 hex of the start
    /// time then 4 random.
    pub id: String,
    /// When it started (UTC, ISO 8601).
    pub at: String,
    pub command: String,
    /// The plan it applied (`None` for direct operations: add, set, remove,
    /// abandon, undo, a lazy fork on `open`).
    pub plan: Option<Value>,
    /// What happened; `{}` until completion.
    pub result: Value,
    /// What `undo` needs: state before, VCS position, heads it replaced.
    pub pre: Value,
    /// For an `undo`, the operation it reversed.
    pub undoes: Option<String>,
    /// Set once an `undo` has reversed this operation.
    pub undone_by: Option<String>,
    /// `started` (INCOMPLETE in a log nobody is writing to) or `done`.
    pub status: String,
    /// The operation this one is a step of (a `drop`'s `new` and `gc`).
    pub parent: Option<String>,
    /// One record per effect that landed, in order.
    pub progress: Vec<Value>,
    /// Set by the engine when the dataset commit this operation made is gone
    /// from VCS history; the journal cannot know.
    #[serde(default)]
    pub vcs_commit_gone: bool,
}

pub const STATUS_STARTED: &str = "started";
pub const STATUS_DONE: &str = "done";
/// An INCOMPLETE entry closed by a later operation (a `closed` record).
pub const STATUS_CLOSED: &str = "closed";

impl OpEntry {
    /// The actions of the plan it applied, as the journal holds them
    /// (JSON); none for a direct operation or a plan without actions.
    pub fn planned_actions(&self) -> &[Value] {
        self.plan
            .as_ref()
            .and_then(|p| p.get("actions"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Started with no completion mark: interrupted (or running right now).
    pub fn is_incomplete(&self) -> bool {
        self.status == STATUS_STARTED
    }

    /// The operation that closed it, when it was interrupted and closed.
    pub fn closed_by(&self) -> Option<&str> {
        if self.status != STATUS_CLOSED {
            return None;
        }
        self.result.get("closed_by").and_then(Value::as_str)
    }

    /// The dataset commit it recorded (`result.vcs_commit`), if any.
    pub fn vcs_commit(&self) -> Option<&str> {
        self.result.get("vcs_commit").and_then(Value::as_str)
    }

    /// The flags `tether ops` prints after an entry.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(by) = &self.undone_by {
            flags.push(format!("(undone by {by})"));
        }
        if self.vcs_commit_gone {
            flags.push("(vcs commit gone)".to_string());
        }
        if let Some(parent) = &self.parent {
            flags.push(format!("(step of {parent})"));
        }
        if self.is_incomplete() {
            flags.push("INCOMPLETE".to_string());
        }
        if let Some(by) = self.closed_by() {
            flags.push(format!("(interrupted; closed by {by})"));
        }
        flags
    }

    /// One `tether ops` line: id, time, command, what it did
    /// (`result.summary` when the command recorded one; for an undo, what it
    /// undid), then the flags.
    pub fn render(&self) -> String {
        let mut parts = vec![self.id.clone(), self.at.clone(), self.command.clone()];
        if let Some(summary) = self.result.get("summary").and_then(Value::as_str) {
            parts.push(summary.to_string());
        } else if let Some(target) = &self.undoes {
            parts.push(format!("undid {target}"));
        }
        parts.extend(self.flags());
        parts.join("  ")
    }
}

/// A fresh operation id: 12 random hex. Random from the first digit, so a
/// few digits tell the operations of one log apart ([`short_ids`]); the log's
/// order is its line order, not the ids'. Ids written by earlier versions (8
/// hex of the start time, then 4 random) have the same shape and stay valid.
pub fn new_op_id() -> String {
    random_op_id().unwrap_or_else(clock_op_id)
}

/// 12 hex from the OS's entropy source, `None` when it has none.
fn random_op_id() -> Option<String> {
    let mut rnd = [0u8; 6];
    getrandom::fill(&mut rnd).ok()?;
    Some(hex::encode(rnd))
}

/// No entropy is no reason to refuse a command: the clock's nanoseconds and
/// the pid still differ between operations, and [`Journal::start`] makes
/// such an id unique within the log.
fn clock_op_id() -> String {
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64;
    let mixed = nanos.rotate_left(17) ^ u64::from(std::process::id()).wrapping_mul(0x9e37_79b9);
    hex::encode(&mixed.to_le_bytes()[..6])
}

/// The fewest leading characters an op id is shown with, even when fewer
/// would be unique (as jj and git do): a 1-digit id reads like a count.
pub const SHORT_ID_MIN: usize = 4;

/// Each id's shortest prefix that no other id in `ids` starts with (at least
/// [`SHORT_ID_MIN`] characters), keyed by the full id: what `tether ops` and
/// `undo` print, and what [`Journal::get`] takes back. Computed over the whole
/// log, since lookups are.
pub fn short_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> HashMap<String, String> {
    let mut sorted: Vec<&str> = ids.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let mut out = HashMap::with_capacity(sorted.len());
    for (i, id) in sorted.iter().enumerate() {
        // In sorted order the ids sharing the longest prefix with this one
        // are its neighbours.
        let before = i.checked_sub(1).map_or(0, |j| common(sorted[j], id));
        let after = sorted.get(i + 1).map_or(0, |next| common(next, id));
        let len = (before.max(after) + 1).max(SHORT_ID_MIN).min(id.len());
        out.insert((*id).to_string(), id[..len].to_string());
    }
    out
}

/// What [`Journal::start`] records in the `started` entry.
#[derive(Clone, Debug, Default)]
pub struct NewOp {
    pub command: String,
    pub plan: Option<Value>,
    pub pre: Map<String, Value>,
    pub parent: Option<String>,
    pub undoes: Option<String>,
}

impl NewOp {
    pub fn new(command: impl Into<String>) -> Self {
        NewOp {
            command: command.into(),
            ..NewOp::default()
        }
    }

    /// The plan being applied (recorded with its digest).
    pub fn plan(mut self, plan: &Plan) -> Self {
        self.plan = Some(plan.to_value());
        self
    }

    /// A plan already in JSON form.
    pub fn plan_json(mut self, plan: Value) -> Self {
        self.plan = Some(plan);
        self
    }

    /// What `undo` needs, known before the first effect.
    pub fn pre(mut self, name: impl Into<String>, value: Value) -> Self {
        self.pre.insert(name.into(), value);
        self
    }

    /// The operation this is a step of.
    pub fn parent(mut self, parent: impl Into<String>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    /// For an `undo`: the operation it reverses.
    pub fn undoes(mut self, target: impl Into<String>) -> Self {
        self.undoes = Some(target.into());
        self
    }
}

/// A checkout's operation log.
#[derive(Clone, Debug)]
pub struct Journal {
    path: PathBuf,
}

/// A running operation. Dropping it without [`OpHandle::finish`] leaves the
/// entry INCOMPLETE, which is what a crash leaves too: deliberate, since
/// neither knows what the effects so far amount to.
#[derive(Debug)]
pub struct OpHandle {
    path: PathBuf,
    id: String,
}

impl Journal {
    /// The journal at `path` (normally [`ops_path`]); nothing is read or
    /// created until it is used.
    pub fn open(path: impl Into<PathBuf>) -> Self {
        Journal { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start an operation: append its `started` record and sync it before
    /// returning, so it lands before the caller's first side effect.
    pub fn begin(
        &self,
        command: &str,
        plan: Option<&Plan>,
        parent: Option<&str>,
    ) -> Result<OpHandle, OplogError> {
        let mut op = NewOp::new(command);
        if let Some(plan) = plan {
            op = op.plan(plan);
        }
        if let Some(parent) = parent {
            op = op.parent(parent);
        }
        self.start(op)
    }

    /// [`Journal::begin`] with everything a `started` record can hold.
    pub fn start(&self, op: NewOp) -> Result<OpHandle, OplogError> {
        // 48 bits from the OS's entropy source are unique without a look at
        // the log: with a million entries in it, a new id repeats one with
        // odds of 1 in 280 million. The log is tens of MB after a few commits
        // of thousands of objects, and reading it cost every command as much
        // as the log is long. Only the clock's ids are checked against it.
        let id = match random_op_id() {
            Some(id) => id,
            None => match crate::model::fsutil::open_nofollow(&self.path) {
                Ok(mut file) => {
                    unique_id(&mut file, clock_op_id).map_err(|e| OplogError::io(&self.path, e))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => clock_op_id(),
                Err(e) => return Err(OplogError::io(&self.path, e)),
            },
        };
        let record = json!({
            "record": "started",
            "id": id,
            "at": now(),
            "command": op.command,
            "plan": op.plan,
            "pre": op.pre,
            "parent": op.parent,
            "undoes": op.undoes,
        });
        self.append(&record)?;
        crate::fault::point("journal.started");
        Ok(OpHandle {
            path: self.path.clone(),
            id,
        })
    }

    /// Close the INCOMPLETE entries `ids` on behalf of the running operation
    /// `by` (see the `closed` record above), `how` saying why. A closed or
    /// completed entry stays as it is.
    pub fn close(&self, ids: &[String], by: &str, how: &str) -> Result<(), OplogError> {
        let marks = close_marks(ids, by, how);
        if marks.is_empty() {
            return Ok(());
        }
        jsonl::append_all(&self.path, &marks).map_err(|e| OplogError::io(&self.path, e))
    }

    /// Record that `id` was reversed by `by` (for reversals not completed
    /// through an undo entry's own completion, e.g. a drop's steps).
    pub fn mark_undone(&self, id: &str, by: &str) -> Result<(), OplogError> {
        self.append(&json!({"record": "undone", "op": id, "by": by, "at": now()}))
    }

    fn append(&self, record: &Value) -> Result<(), OplogError> {
        if let Some(dir) = self.path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| OplogError::io(&self.path, e))?;
        }
        jsonl::append(&self.path, record).map_err(|e| OplogError::io(&self.path, e))
    }

    fn records(&self) -> Result<Vec<Value>, OplogError> {
        jsonl::read(&self.path).map_err(|e| OplogError::io(&self.path, e))
    }

    /// Every entry, oldest first (by start), with progress, completion and
    /// undo marks applied. A missing log is empty; undecodable lines are
    /// skipped.
    pub fn entries(&self) -> Result<Vec<OpEntry>, OplogError> {
        Ok(fold(self.records()?))
    }

    /// The newest `n` entries, newest first (`tether ops`).
    pub fn list(&self, n: usize) -> Result<Vec<OpEntry>, OplogError> {
        let mut entries = self.entries()?;
        entries.reverse();
        entries.truncate(n);
        Ok(entries)
    }

    /// Every entry's shortest unique id prefix ([`short_ids`]).
    pub fn short_ids(&self) -> Result<HashMap<String, String>, OplogError> {
        let entries = self.entries()?;
        Ok(short_ids(entries.iter().map(|e| e.id.as_str())))
    }

    /// The entry with this id, or the one entry whose id starts with it.
    pub fn get(&self, id: &str) -> Result<OpEntry, OplogError> {
        find(self.entries()?, id)
    }

    /// Entries started and never completed: interrupted, unless a command is
    /// running right now (it would hold the checkout lock).
    pub fn incomplete(&self) -> Result<Vec<OpEntry>, OplogError> {
        Ok(self
            .entries()?
            .into_iter()
            .filter(OpEntry::is_incomplete)
            .collect())
    }

    /// What `tether undo [ID]` would reverse, or why it refuses. Without an id:
    /// the newest entry, skipping undos and what they reversed; a newest entry
    /// that cannot be undone (a `drop` or one of its steps, an INCOMPLETE one)
    /// is refused, not skipped. With an id: that entry, refused on the same
    /// grounds. The caller reverses it, then records an undo through
    /// [`NewOp::undoes`], whose completion marks the target undone.
    pub fn undo_target(&self, id: Option<&str>) -> Result<OpEntry, OplogError> {
        let entries = self.entries()?;
        let entry = match id {
            Some(id) => {
                let entry = find(entries.clone(), id)?;
                if let Some(undoes) = &entry.undoes
                    && !entry.is_incomplete()
                {
                    return Err(OplogError::IsUndo {
                        id: entry.id,
                        undoes: undoes.clone(),
                    });
                }
                if let Some(by) = &entry.undone_by {
                    return Err(OplogError::AlreadyUndone {
                        id: entry.id,
                        by: by.clone(),
                    });
                }
                if let Some(parent) = &entry.parent {
                    return Err(OplogError::StepOf {
                        id: entry.id.clone(),
                        command: entry.command.clone(),
                        parent: parent.clone(),
                    });
                }
                entry
            }
            None => {
                let undone = |id: &str| entries.iter().any(|e| e.id == id && e.undone_by.is_some());
                let newest = entries
                    .iter()
                    .rev()
                    .find(|e| {
                        let finished_undo = e.undoes.is_some() && !e.is_incomplete();
                        // An interrupted undo whose target a later undo reversed is over.
                        let superseded = e.undoes.as_deref().is_some_and(undone);
                        !finished_undo && !superseded && e.undone_by.is_none()
                    })
                    .ok_or(OplogError::NothingToUndo)?;
                // An interrupted undo is finished by undoing its target again:
                // each step of an undo skips what is already put back.
                let newest = match &newest.undoes {
                    Some(target) if newest.is_incomplete() => {
                        entries.iter().find(|e| &e.id == target).unwrap_or(newest)
                    }
                    _ => newest,
                };
                // A step stands for its parent: half of a drop cannot come back.
                match &newest.parent {
                    Some(parent) => entries
                        .iter()
                        .find(|e| &e.id == parent)
                        .cloned()
                        .unwrap_or_else(|| newest.clone()),
                    None => newest.clone(),
                }
            }
        };
        if let Some(by) = entry.closed_by() {
            return Err(OplogError::Closed {
                by: by.to_string(),
                id: entry.id,
                command: entry.command,
            });
        }
        if entry.is_incomplete() {
            return Err(OplogError::Incomplete {
                rerun: rerun_hint(&entry),
                id: entry.id,
                command: entry.command,
            });
        }
        if NOT_UNDOABLE.contains(&entry.command.as_str()) || entry.parent.is_some() {
            return Err(OplogError::NotUndoable {
                id: entry.id,
                command: entry.command,
            });
        }
        Ok(entry)
    }
}

impl OpHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Record that one effect landed (a pin created, a branch forked), synced
    /// before returning, so a re-run or `repair` knows it happened.
    pub fn progress(&mut self, detail: Value) -> Result<(), OplogError> {
        let record = json!({"record": "progress", "op": self.id, "at": now(), "detail": detail});
        jsonl::append(&self.path, &record).map_err(|e| OplogError::io(&self.path, e))?;
        crate::fault::point("journal.progress");
        Ok(())
    }

    /// A [`Wave`] of this operation's progress: for effects that land
    /// concurrently (a fan-out's pins), each recorded as it lands and all
    /// synced once at the end, instead of one sync per effect.
    pub fn wave(&self) -> Result<Wave, OplogError> {
        let log = jsonl::Appender::open(&self.path).map_err(|e| OplogError::io(&self.path, e))?;
        Ok(Wave {
            op: self.id.clone(),
            path: self.path.clone(),
            inner: std::sync::Arc::new(std::sync::Mutex::new(WaveLog {
                log,
                error: None,
                written: 0,
            })),
        })
    }

    /// Mark the operation complete with its result. Returns its id.
    pub fn finish(self, result: Value) -> Result<String, OplogError> {
        self.finish_with_pre(result, None)
    }

    /// [`OpHandle::finish`], also recording what `undo` learnt only while the
    /// operation ran (the heads of branches it reset, say), merged over the
    /// started record's `pre`.
    pub fn finish_with_pre(self, result: Value, pre: Option<Value>) -> Result<String, OplogError> {
        let mut record = json!({"record": "done", "op": self.id, "at": now(), "result": result});
        if let Some(pre) = pre {
            record["pre"] = pre;
        }
        jsonl::append(&self.path, &record).map_err(|e| OplogError::io(&self.path, e))?;
        crate::fault::point("journal.done");
        Ok(self.id)
    }

    /// [`OpHandle::finish`], closing the INCOMPLETE entries `closes` in the
    /// same append: this operation finished what they had set out to do.
    pub fn finish_closing(
        self,
        result: Value,
        closes: &[String],
        how: &str,
    ) -> Result<String, OplogError> {
        let mut records =
            vec![json!({"record": "done", "op": self.id, "at": now(), "result": result})];
        records.extend(close_marks(closes, &self.id, how));
        jsonl::append_all(&self.path, &records).map_err(|e| OplogError::io(&self.path, e))?;
        crate::fault::point("journal.done");
        Ok(self.id)
    }
}

/// The progress of one wave of concurrent effects ([`OpHandle::wave`]),
/// cloned into each call of the fan-out. Each [`Wave::progress`] is one
/// write of one whole line as its effect lands: a process killed at any
/// point leaves exactly the records of the effects that had landed (and at
/// most the effect in flight unrecorded, as with a record per sync), since
/// a written line is in the file whether or not it was synced. Only a
/// machine crash before [`Wave::end`]'s one sync can lose the wave's
/// records, and the `started` record's plan, synced first, still names
/// every ref the wave set out to create.
#[derive(Clone, Debug)]
pub struct Wave {
    op: String,
    path: PathBuf,
    inner: std::sync::Arc<std::sync::Mutex<WaveLog>>,
}

#[derive(Debug)]
struct WaveLog {
    log: jsonl::Appender,
    /// The first failure to write: the effect landed anyway, so the call
    /// goes on, and [`Wave::end`] reports it.
    error: Option<std::io::Error>,
    written: usize,
}

impl Wave {
    /// Record that one effect landed: one unsynced write of one line.
    pub fn progress(&self, detail: Value) {
        let record = json!({"record": "progress", "op": self.op, "at": now(), "detail": detail});
        let mut w = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if w.error.is_some() {
            return;
        }
        match w.log.write(&record) {
            Ok(()) => {
                w.written += 1;
                crate::fault::point("journal.progress");
            }
            Err(e) => w.error = Some(e),
        }
    }

    /// End the wave: sync what it recorded, once. Fails with the first
    /// record that could not be written, if any.
    pub fn end(self) -> Result<usize, OplogError> {
        let mut w = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = w.error.take() {
            return Err(OplogError::io(&self.path, e));
        }
        if w.written > 0 {
            w.log.sync().map_err(|e| OplogError::io(&self.path, e))?;
        }
        Ok(w.written)
    }
}

/// How many times this process searched a log for an id ([`unique_id`]):
/// what shows that starting an operation does not read the log.
pub(crate) static LOG_SCANS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// A fresh id from `fresh` that appears nowhere in the log `log`: stricter
/// than "no `started` record has it" (an id quoted anywhere, in a progress
/// record or a torn line, is passed over too), and a byte search instead of a
/// parse of every record. The log is read from its start in chunks, each
/// searched with the last `id.len() - 1` bytes of the one before, so memory
/// stays bounded however long the log.
fn unique_id<R: std::io::Read + std::io::Seek>(
    log: &mut R,
    mut fresh: impl FnMut() -> String,
) -> std::io::Result<String> {
    LOG_SCANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let id = fresh();
        let finder = memchr::memmem::Finder::new(id.as_bytes());
        let keep = id.len().saturating_sub(1);
        log.seek(std::io::SeekFrom::Start(0))?;
        let mut filled = 0;
        let mut seen = false;
        loop {
            let n = match log.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            filled += n;
            if finder.find(&buf[..filled]).is_some() {
                seen = true;
                break;
            }
            // Carry the tail over: an id may straddle two reads.
            let tail = filled.saturating_sub(keep);
            buf.copy_within(tail..filled, 0);
            filled -= tail;
        }
        if !seen {
            return Ok(id);
        }
    }
}

fn find(entries: Vec<OpEntry>, id: &str) -> Result<OpEntry, OplogError> {
    let id = id.trim();
    if let Some(e) = entries.iter().find(|e| e.id == id) {
        return Ok(e.clone());
    }
    let matches: Vec<OpEntry> = if id.is_empty() {
        Vec::new()
    } else {
        entries
            .into_iter()
            .filter(|e| e.id.starts_with(id))
            .collect()
    };
    if matches.len() > 1 {
        return Err(OplogError::Ambiguous {
            prefix: id.into(),
            matches: matches.into_iter().map(|e| e.id).collect(),
        });
    }
    matches
        .into_iter()
        .next()
        .ok_or_else(|| OplogError::NotFound { id: id.into() })
}

fn close_marks(ids: &[String], by: &str, how: &str) -> Vec<Value> {
    ids.iter()
        .map(|id| json!({"record": "closed", "op": id, "by": by, "at": now(), "how": how}))
        .collect()
}

/// The command that finishes an interrupted operation, as a phrase
/// (running `tether commit` again, or a drop's own command).
pub fn rerun_hint(entry: &OpEntry) -> String {
    let bookmark = entry
        .plan
        .as_ref()
        .and_then(|p| p.get("context"))
        .and_then(|c| c.get("bookmark"))
        .and_then(Value::as_str);
    let vcs = entry
        .plan
        .as_ref()
        .and_then(|p| p.get("context"))
        .and_then(|c| c.get("vcs"));
    let moved = vcs.and_then(|v| v.get("move")).and_then(Value::as_str);
    match (entry.command.as_str(), bookmark) {
        ("drop", Some(b)) => format!("`tether drop {b} --no-dry-run`"),
        // The same `new` again: a bookmark it created is then joined where
        // it was made.
        ("new", Some(b)) if moved == Some("create") => format!("`tether new -b {b}`"),
        ("new", Some(b)) => format!("`tether new {b}`"),
        ("drop", None) => "running the `tether drop` again".to_string(),
        (cmd, _) => format!("running `tether {cmd}` again"),
    }
}

/// Fold the journal's records into entries, oldest first.
fn fold(records: Vec<Value>) -> Vec<OpEntry> {
    let mut entries: Vec<OpEntry> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // Marks for entries not (yet) seen are ignored: a started record lost to a
    // torn line leaves nothing to attach them to.
    for r in records {
        let str_of = |name: &str| r.get(name).and_then(Value::as_str).map(str::to_string);
        match r.get("record").and_then(Value::as_str) {
            Some("started") => {
                let Some(id) = str_of("id") else { continue };
                let entry = OpEntry {
                    id: id.clone(),
                    at: str_of("at").unwrap_or_default(),
                    command: str_of("command").unwrap_or_default(),
                    plan: r.get("plan").filter(|p| !p.is_null()).cloned(),
                    result: json!({}),
                    pre: r.get("pre").cloned().unwrap_or_else(|| json!({})),
                    undoes: str_of("undoes"),
                    undone_by: None,
                    status: STATUS_STARTED.into(),
                    parent: str_of("parent"),
                    progress: Vec::new(),
                    vcs_commit_gone: false,
                };
                // A duplicate id (a hand-merged log) keeps the first entry.
                if let std::collections::hash_map::Entry::Vacant(slot) = index.entry(id) {
                    slot.insert(entries.len());
                    entries.push(entry);
                }
            }
            Some("progress") => {
                if let Some(&i) = str_of("op").and_then(|id| index.get(&id)) {
                    entries[i]
                        .progress
                        .push(r.get("detail").cloned().unwrap_or(Value::Null));
                }
            }
            Some("done") => {
                let Some(&i) = str_of("op").and_then(|id| index.get(&id)) else {
                    continue;
                };
                let entry = &mut entries[i];
                entry.status = STATUS_DONE.into();
                entry.result = r.get("result").cloned().unwrap_or_else(|| json!({}));
                if let Some(Value::Object(more)) = r.get("pre")
                    && let Value::Object(pre) = &mut entry.pre
                {
                    for (k, v) in more {
                        pre.insert(k.clone(), v.clone());
                    }
                }
                // The undo's completion is its target's undo mark.
                if let Some(target) = entry.undoes.clone() {
                    let by = entry.id.clone();
                    if let Some(&t) = index.get(&target) {
                        entries[t].undone_by = Some(by);
                    }
                }
            }
            Some("closed") => {
                if let Some(&i) = str_of("op").and_then(|id| index.get(&id))
                    && entries[i].is_incomplete()
                {
                    entries[i].status = STATUS_CLOSED.into();
                    entries[i].result = json!({
                        "closed_by": str_of("by"),
                        "summary": str_of("how").unwrap_or_default(),
                    });
                }
            }
            Some("undone") => {
                if let (Some(&i), Some(by)) =
                    (str_of("op").and_then(|id| index.get(&id)), str_of("by"))
                {
                    entries[i].undone_by = Some(by);
                }
            }
            _ => {}
        }
    }
    entries
}

#[cfg(test)]
mod tests;
