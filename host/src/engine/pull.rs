//! `tether pull [BOOKMARK] [--key KEY]... [-m MESSAGE]`: the dataset's fetch
//! (spec 06, "Positions, and `tether pull`"; spec 09, `pull`).
//!
//! Pull reads the heads of the bookmark's branches and commits what moved
//! onto the bookmark, in one VCS commit. It writes with no plan (spec 09,
//! "Plans"): it decides and applies in one go, under the locks.
//!
//! 1. Refuse a working copy off its bookmark (as `commit` does), a
//!    `BOOKMARK` that is not the one this working copy is on, a selection
//!    that names only part of a branch scope, and uncommitted manifest edits
//!    (with `--key`, only the named objects' own).
//! 2. Where each object's head is:
//!    - on the trunk, every object at its upstream branch (the locator
//!      without `at`) or, for a system without branches, the object itself;
//!    - on any other bookmark, each object with a working branch
//!      (`workspace.toml` `working_refs`) at that branch. Objects whose system
//!      has no branches, and Forkable ones before their first write, sit at
//!      their pin there: skipped, with the reason;
//!    - an object with no commit yet is skipped everywhere.
//! 3. Fingerprint those heads concurrently. A head whose content equals the
//!    manifest's state is up to date, unless a trunk pull moves an `--at`
//!    object onto its branch, which drops `at` from the manifest. A changed
//!    `file = "immutable"` object refuses the whole pull
//!    (`ImmutableObjectModified`): accepting it is a re-registration.
//! 4. What moved is pinned or recorded exactly as `commit` would
//!    (`commit::write_action`), written and committed on the bookmark
//!    through `commit`'s own write half (`commit::land`): only those
//!    objects' manifests and listings, journaled as a `pull` entry, new pins
//!    added to the pinned index. Nothing moved: nothing is written.
//!
//! The default message is `pull BOOKMARK: N object(s)` (the `--help` text's
//! "pull B: N objects").

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::commit::{self, CommitReport, Landing};
use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use super::snapshot;
use crate::model::{Manifest, key};
use crate::oplog::NewOp;
use crate::plan::{Action, Plan, verb};
use crate::plugin::BackendError;

#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// The bookmark the caller means; it must be the one this working copy is on.
    pub bookmark: Option<String>,
    /// `--key` selectors (exact keys or `prefix/`); every object when empty.
    pub keys: Vec<String>,
    pub message: Option<String>,
}

/// One pulled object: the state its manifest had, and the one it has now.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Moved {
    pub from: Map<String, Value>,
    pub to: Map<String, Value>,
}

/// The `--json` shape of spec 09: `{"bookmark", "committed": {key: {"from",
/// "to"}}, "unchanged": [keys], "skipped": {key: reason}, "vcs_commit",
/// "pinned": {key: pin_id or null}}`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PullReport {
    pub bookmark: String,
    pub committed: BTreeMap<String, Moved>,
    pub unchanged: Vec<String>,
    pub skipped: BTreeMap<String, String>,
    pub vcs_commit: Option<String>,
    /// Each pulled object's pin id, or null when its state was recorded.
    pub pinned: BTreeMap<String, Option<String>>,
}

pub async fn pull(repo: &Repo, opts: &PullOptions) -> Result<PullReport> {
    // Read again under the lock below: this read only checks the working
    // copy may commit at all.
    let bookmark = commit::check_bookmark(repo, &repo.manifests()?)?;
    if let Some(named) = opts.bookmark.as_deref()
        && named != bookmark
    {
        return Err(TetherError::refused(format!(
            "this working copy is on bookmark {bookmark:?}, not {named:?}: pull fetches the heads of \
             the bookmark you work on and commits onto it"
        ))
        .hint(format!(
            "`tether new {named}` first to pull {named:?}, or `tether pull` for {bookmark:?}"
        )));
    }
    // One shot, no plan: the locks cover reading as well as writing.
    let locks = repo.lock()?;
    put_back_interrupted_pulls(repo)?;
    let manifests = repo.manifests()?;
    let keys = key::select_keys(&opts.keys, manifests.keys().map(String::as_str))?;
    let scoped = !opts.keys.is_empty();
    if scoped {
        commit::check_whole_scopes(repo, &manifests, &keys).await?;
    }
    refuse_uncommitted_edits(repo, &manifests, &keys, scoped)?;

    let mut report = PullReport {
        bookmark: bookmark.clone(),
        ..PullReport::default()
    };
    let trunk = bookmark == repo.config.trunk;
    let ws = repo.workspace()?;
    let plugins = repo.plugins().await?;
    // The manifests as pull would write them (on the trunk, `at` dropped),
    // and a workspace whose working refs are exactly the heads to read.
    let mut heads: BTreeMap<String, Manifest> = BTreeMap::new();
    let mut reading = ws.clone();
    reading.working_refs.clear();
    for k in &keys {
        let m = &manifests[k];
        let descriptor = plugins
            .get(&m.kind)
            .ok_or_else(|| TetherError::unknown_kind(&m.kind, plugins.keys().map(String::as_str)))?
            .descriptor();
        let forkable = Repo::capabilities(descriptor, m)
            .iter()
            .any(|c| c == "FORK");
        if !m.is_committed() {
            report.skipped.insert(
                k.clone(),
                "no commit yet: `tether commit` records it first".into(),
            );
        } else if trunk {
            let mut head = m.clone();
            head.locator.remove("at");
            heads.insert(k.clone(), head);
        } else if let Some(working_ref) = ws.working_refs.get(k) {
            reading.working_refs.insert(k.clone(), working_ref.clone());
            heads.insert(k.clone(), m.clone());
        } else if !forkable {
            report.skipped.insert(
                k.clone(),
                format!(
                    "its system has no branches: it stays at its pin on bookmark {bookmark} \
                     (a pull on the trunk moves it)"
                ),
            );
        } else {
            report.skipped.insert(
                k.clone(),
                format!(
                    "no branch yet on bookmark {bookmark}: it stays at its pin until the first \
                     writable open forks one"
                ),
            );
        }
    }

    let head_keys: Vec<String> = heads.keys().cloned().collect();
    let states = snapshot::fingerprint(repo, &reading, &heads, &head_keys).await?;
    let failures: Vec<(String, BackendError)> = states
        .iter()
        .filter_map(|(k, r)| {
            let e = r.as_ref().err()?;
            // A working branch the store lost: say what brings it back.
            let e = match reading.working_refs.get(k) {
                Some(branch) if e.starts_with("not found") => format!(
                    "{e} (its working branch {branch} is gone: `tether repair {k}` forks it again)"
                ),
                _ => e.clone(),
            };
            Some((k.clone(), BackendError::Other(e)))
        })
        .collect();
    if !failures.is_empty() {
        return Err(crate::plugin::MultiObjectError { failures }.into());
    }

    let mut moved: Vec<String> = Vec::new();
    for (k, state) in &states {
        let state = state.as_ref().expect("failures were refused above");
        let m = &manifests[k];
        let descriptor = plugins[&m.kind].descriptor();
        let recorded = m.state.as_ref().expect("only committed objects are read");
        let changed = content(recorded, descriptor) != content(state, descriptor);
        let onto_branch = trunk && m.locator.contains_key("at");
        if changed && snapshot::immutable_file(m) {
            return Err(TetherError::ImmutableModified { key: k.clone() });
        }
        if changed || onto_branch {
            moved.push(k.clone());
        } else {
            report.unchanged.push(k.clone());
        }
    }
    if moved.is_empty() {
        return Ok(report);
    }

    // Pin or record what moved, exactly as `commit` would.
    let facts = commit::object_facts(repo, &heads, &moved).await?;
    let mut plan = Plan::new("pull");
    plan.set_keys(&opts.keys);
    plan.context.insert("bookmark".into(), json!(bookmark));
    let message = opts
        .message
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| {
            let n = moved.len();
            format!(
                "pull {bookmark}: {n} object{}",
                if n == 1 { "" } else { "s" }
            )
        });
    plan.context.insert("message".into(), json!(message));
    for (k, (identity, caps)) in &facts {
        let head = &heads[k];
        let state = states[k].as_ref().expect("failures were refused above");
        let descriptor = plugins[&head.kind].descriptor();
        let action = commit::write_action(repo, k, head, state, identity, caps, descriptor, false)?;
        plan.push(action);
        report.committed.insert(
            k.clone(),
            Moved {
                from: manifests[k].state.clone().unwrap_or_default(),
                to: state.clone(),
            },
        );
    }
    plan.push(
        Action::new(verb::VCS_COMMIT, "")
            .with_target(&bookmark)
            .with_detail(format!("{:?}", message)),
    );

    let writes: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.verb != verb::VCS_COMMIT)
        .collect();
    let journal = repo.journal()?;
    let head_before = repo.vcs.head()?.map(|c| c.to_string());
    let mut op = journal.start(
        NewOp::new("pull")
            .plan(&plan)
            .pre("vcs_head", json!(head_before)),
    )?;
    let landing = Landing {
        message: Some(&message),
        bookmark: Some(&bookmark),
        no_vcs: false,
        other_edits: false,
    };
    let mut landed = CommitReport::default();
    let originals = repo.manifests()?;
    match commit::land(
        repo,
        &locks,
        &writes,
        &originals,
        &mut op,
        &landing,
        &mut landed,
    )
    .await
    {
        Ok(pins) => {
            for k in report.committed.keys() {
                report
                    .pinned
                    .insert(k.clone(), pins.get(k).map(|p| p.id.clone()));
            }
            report.vcs_commit = landed.vcs_commit;
            let mut result = serde_json::to_value(&report).unwrap_or(Value::Null);
            if let Value::Object(o) = &mut result {
                o.insert(
                    "summary".into(),
                    json!(format!(
                        "pulled {}",
                        report
                            .committed
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
            }
            op.finish(result)?;
            Ok(report)
        }
        Err(e) => {
            op.finish(commit::failure_record(&e))?;
            Err(e)
        }
    }
}

/// A pull killed after writing manifests and before its VCS commit leaves
/// them as working-tree edits, which the check below would refuse; running
/// `pull` again must finish it (spec 14, "An interrupted command"). So each
/// manifest whose state is the one an INCOMPLETE pull planned for its key
/// goes back to its committed version first, and this pull decides again
/// from the last commit (its pins are found again, not made twice). Anyone
/// else's edit is left alone, and refused below.
fn put_back_interrupted_pulls(repo: &Repo) -> Result<()> {
    let interrupted: Vec<_> = repo
        .journal()?
        .incomplete()?
        .into_iter()
        .filter(|e| e.command == "pull")
        .collect();
    if interrupted.is_empty() {
        return Ok(());
    }
    let Some(head) = repo.vcs.head()? else {
        return Ok(());
    };
    let committed = repo.manifests_at(&head)?;
    for (k, m) in repo.manifests()? {
        let (Some(c), Some(state)) = (committed.get(&k), m.state.as_ref()) else {
            continue;
        };
        let planned = |e: &crate::oplog::OpEntry| {
            e.planned_actions().iter().any(|a| {
                a.get("key").and_then(Value::as_str) == Some(k.as_str())
                    && a.get("params").and_then(|p| p.get("state"))
                        == Some(&Value::Object(state.clone()))
            })
        };
        if c != &m && interrupted.iter().any(planned) {
            crate::model::manifest::write_manifest(&repo.layout.objects_dir(), &k, c)?;
            crate::fault::point("manifest.write");
        }
    }
    Ok(())
}

/// Pull commits only what it fetched, so an edited manifest would be left
/// half-committed or swept into the pull: refuse it. A freshly added object
/// (no state, not committed) is not an edit here; pull skips it as not
/// committed yet. With `--key` only the selected objects count.
fn refuse_uncommitted_edits(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    selected: &[String],
    scoped: bool,
) -> Result<()> {
    let committed = match repo.vcs.head()? {
        Some(head) => repo.manifests_at(&head)?,
        None => BTreeMap::new(),
    };
    let counts = |k: &String| !scoped || selected.contains(k);
    let mut edited: Vec<String> = Vec::new();
    for (k, m) in manifests.iter().filter(|(k, _)| counts(k)) {
        match committed.get(k) {
            Some(c) if c == m => {}
            None if !m.is_committed() => {}
            _ => edited.push(k.clone()),
        }
    }
    for k in committed.keys().filter(|k| counts(k)) {
        if !manifests.contains_key(k) {
            edited.push(format!("{k} (removed)"));
        }
    }
    if edited.is_empty() {
        return Ok(());
    }
    edited.sort();
    let err = TetherError::refused(format!(
        "uncommitted manifest edits: {}; pull commits only what it fetches",
        edited.join(", "),
    ))
    .hint("commit these first (`tether commit -m MESSAGE`)")
    .hint("or restore them (`git checkout -- .tether/objects`)");
    Err(if scoped {
        err
    } else {
        err.hint("or pull other objects with --key")
    })
}

/// What changed between two states, for a `pulled KEY a -> b` line: the
/// fields that differ (every field when none does, as when `at` was
/// dropped), values shortened the way the spec prints them (a 20-character
/// snapshot id to 12, a 64-hex digest to 6 and `…`).
pub fn brief_change(from: &Map<String, Value>, to: &Map<String, Value>) -> (String, String) {
    let mut fields: Vec<&String> = from
        .keys()
        .chain(to.keys())
        .filter(|k| from.get(*k) != to.get(*k))
        .collect();
    if fields.is_empty() {
        fields = to.keys().collect();
    }
    fields.sort();
    fields.dedup();
    let side = |state: &Map<String, Value>| {
        fields
            .iter()
            .filter_map(|f| state.get(*f).map(|v| format!("{f}={}", short(v))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    (side(from), side(to))
}

fn short(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let n = text.chars().count();
    if n > 20 {
        format!("{}…", text.chars().take(6).collect::<String>())
    } else if n > 12 {
        text.chars().take(12).collect()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::brief_change;
    use serde_json::{Map, Value, json};

    fn state(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn changes_read_as_the_spec_prints_them() {
        let (a, b) = brief_change(
            &state(json!({"snapshot_id": "TYZ25DJEHXERGBR7H3P0"})),
            &state(json!({"snapshot_id": "AZ1REKMV3HETD2X7EW7G"})),
        );
        assert_eq!(
            (a.as_str(), b.as_str()),
            ("snapshot_id=TYZ25DJEHXER", "snapshot_id=AZ1REKMV3HET")
        );
        let digest = |c: char| c.to_string().repeat(64);
        let (a, b) = brief_change(
            &state(json!({"type": "dir", "count": 3, "size": 192, "digest": digest('9')})),
            &state(json!({"type": "dir", "count": 3, "size": 192, "digest": digest('0')})),
        );
        assert_eq!(
            (a.as_str(), b.as_str()),
            ("digest=999999…", "digest=000000…")
        );
        let (a, b) = brief_change(
            &state(json!({"count": 3, "digest": "ab"})),
            &state(json!({"count": 4, "digest": "cd"})),
        );
        assert_eq!(
            (a.as_str(), b.as_str()),
            ("count=3 digest=ab", "count=4 digest=cd")
        );
        // Nothing differs (an `at` dropped): the whole state.
        let s = state(json!({"snapshot_id": "x"}));
        assert_eq!(
            brief_change(&s, &s),
            ("snapshot_id=x".into(), "snapshot_id=x".into())
        );
    }
}
