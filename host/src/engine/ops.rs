//! `tether ops [-n N]`: this checkout's operation log, newest first.
//!
//! The journal (`crate::oplog`) folds `.tether/ops.jsonl` into entries with
//! their undo marks, parents and completion status. What it cannot know is
//! whether the dataset commit an operation made is still in VCS history (an
//! `undo` or a `git reset` drops it): the engine checks each recorded commit
//! against one walk of visible history and sets `vcs_commit_gone`, which adds
//! the `(vcs commit gone)` flag.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::error::Result;
use super::repo::Repo;
use crate::oplog::OpEntry;

pub async fn ops(repo: &Repo, limit: usize) -> Result<Vec<OpEntry>> {
    let mut entries = repo.journal()?.list(limit)?;
    if entries.iter().any(|e| e.vcs_commit().is_some()) {
        // Ids only: nothing of the commits needs reading.
        let visible: HashSet<String> = repo
            .vcs
            .visible_ids()?
            .into_iter()
            .map(|c| c.as_str().to_owned())
            .collect();
        for e in &mut entries {
            if let Some(c) = e.vcs_commit() {
                e.vcs_commit_gone = !visible.contains(c);
            }
        }
    }
    Ok(entries)
}

/// Every operation's shortest unique id prefix in this checkout's log, keyed
/// by full id: what the CLI prints for an op id (`undo` and `get` take it back).
pub fn short_ids(repo: &Repo) -> Result<HashMap<String, String>> {
    Ok(repo.journal()?.short_ids()?)
}

/// What an entry did, in a few words: the command's own `result.summary`,
/// else a description of its result (a commit's pins and VCS commit), else
/// what an undo reversed. Empty when there is nothing to say (an INCOMPLETE
/// entry has no result).
pub fn describe(e: &OpEntry) -> String {
    if let Some(summary) = e.result.get("summary").and_then(Value::as_str) {
        return summary.to_string();
    }
    if let Some(target) = &e.undoes {
        return format!("undid {target}");
    }
    let mut parts = Vec::new();
    if let Some(pinned) = e.result.get("pinned").and_then(Value::as_object)
        && !pinned.is_empty()
    {
        // `commit` reports recorded objects with a null ref.
        let (refs, recorded): (Vec<_>, Vec<_>) = pinned.iter().partition(|(_, r)| !r.is_null());
        let names = |v: Vec<(&String, &Value)>| {
            v.into_iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !refs.is_empty() {
            parts.push(format!("pinned {}", names(refs)));
        }
        if !recorded.is_empty() {
            parts.push(format!("recorded {}", names(recorded)));
        }
    }
    if let Some(failed) = e.result.get("failed") {
        parts.push(match failed {
            Value::String(s) => format!("failed: {s}"),
            Value::Object(m) => format!(
                "failed: {}",
                m.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
            other => format!("failed: {other}"),
        });
    }
    if let Some(c) = e.vcs_commit() {
        parts.push(format!("committed {}", &c[..c.len().min(12)]));
    }
    parts.join("; ")
}
