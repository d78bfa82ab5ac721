//! `tether repair [KEY...] [--all-history] [--dry-run | --plan FILE |
//! --from-plan FILE]`: rebuild what the manifests promise (spec 09, "ops,
//! undo, repair"; spec 01, `repair`).
//!
//! A manifest promises "this pin names this state", and `workspace.toml`
//! that this checkout's working branches exist. Repair plans two verbs:
//!
//! - `repin`: a pin whose native ref is gone (`verify` says `missing`) while
//!   the store still has the state (a deep check of the state alone is not
//!   `missing`). Apply calls the backend's `pin`, which is idempotent and
//!   refuses an unreachable state. A store that never reuses a deleted tag's
//!   name (Icechunk; the memory backend with `tombstones`) answers with the
//!   next generation, `tether.<pin_id>.2`, `.3`: the pin id and the manifests
//!   stay, and readers resolve the pin through its live generation.
//! - `refork`: a working branch (`working_refs`) the store lost, forked again
//!   from what the manifest records (its pin, else its recorded state; an
//!   object never committed from its `base_states` or `fork_points` entry),
//!   only while it is still absent: each carries a `ref_absent`
//!   precondition and forks with `expected = absent`.
//!
//! A pin that points elsewhere (`drifted`) is reported in the notes, never
//! overwritten; one whose state is gone too cannot be rebuilt and is
//! reported as failed. `--all-history` checks the pins of every visible
//! commit as well as the working tree's, each distinct pin once.
//! `KEY...` checks only those objects, and contacts only their stores.
//!
//! The plan requires `workspace_id` and `history_digest` (spec 07): a new
//! commit anywhere stales a saved plan. Its notes also say how far each
//! interrupted (INCOMPLETE) operation of this checkout's log got, and that
//! running the command again finishes it.
//!
//! An INCOMPLETE entry a later run of the same command finished (for
//! `commit` and `pull`, one whose selection covers it) is accounted for but
//! for the pins it created that no manifest names (its store moved on before
//! the re-run pinned the new state): the note names them, and apply *closes*
//! the entry (spec 10, "Operation log": a `closed` record), recording those
//! pins in the pin index as this clone's. `gc` keeps a pin an unfinished
//! operation names, so until then they stay; after it, `tether gc` releases
//! them like any pin no manifest names.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};

use super::checker::Checker;
use super::checks::{self, Subject};
use super::error::{Result, TetherError};
use super::fork;
use super::repo::Repo;
use crate::model::{ModelError, canonical, time};
use crate::oplog::{NewOp, OpEntry, index};
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{Expected, Target, VerifyStatus, fan_out};

#[derive(Debug, Clone, Default)]
pub struct RepairOptions {
    /// Objects to repair (exact keys or `prefix/`); every object when empty.
    pub keys: Vec<String>,
    /// Also the pins of every commit in history.
    pub all_history: bool,
}

/// The `--json` shape of spec 09: `{"repinned": {key: pin_id}, "reforked":
/// {key: ref}, "failed": {target: reason}, "notes": [str]}`. A pin only
/// history names is labelled `<rev12>:key`, as `verify --all-history` does.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RepairReport {
    pub repinned: BTreeMap<String, String>,
    pub reforked: BTreeMap<String, String>,
    pub failed: BTreeMap<String, String>,
    pub notes: Vec<String>,
    /// Interrupted operations closed, by id: why (the run that finished it).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub closed: BTreeMap<String, String>,
    /// The ref each repin created (a later generation where the store
    /// never reuses a name); for the human output.
    #[serde(skip)]
    pub repinned_refs: BTreeMap<String, String>,
}

impl RepairReport {
    /// Whether something could not be rebuilt (exit 3).
    pub fn partial(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// Whether `key` is one the selectors name (all when there are none).
fn selected(selectors: &[String], key: &str) -> bool {
    selectors.is_empty()
        || selectors.iter().any(|s| {
            if s.ends_with('/') {
                key.starts_with(s.as_str())
            } else {
                s == key
            }
        })
}

/// Decide what repair would do.
pub async fn plan(repo: &Repo, opts: &RepairOptions) -> Result<Plan> {
    let ws = repo.workspace()?;
    let mut p = Plan::new("repair");
    p.set_keys(&opts.keys);
    p.context
        .insert("all_history".into(), json!(opts.all_history));
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::HistoryDigest {
        expected: repo.vcs.history_digest()?,
    });
    let manifests = repo.manifests()?;
    let mut unrepairable: BTreeMap<String, String> = BTreeMap::new();

    // Pins: the working tree's first (labels `key`), then history's. With
    // --all-history a key may be one only history (or only the working
    // tree) has; a selector neither matches is refused.
    let no_match = |e: &TetherError| matches!(e, TetherError::Model(ModelError::NoMatch { .. }));
    let mut subjects = match checks::subjects(repo, &opts.keys, None, false) {
        Ok(s) => s,
        Err(e) if opts.all_history && no_match(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    if opts.all_history {
        let tree_matched =
            crate::model::key::select_keys(&opts.keys, manifests.keys().map(String::as_str))
                .is_ok();
        match checks::subjects(repo, &opts.keys, None, true) {
            Ok(s) => subjects.extend(s),
            Err(e) if tree_matched && no_match(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let mut seen = BTreeSet::new();
    subjects.retain(|s| s.manifest.pin.is_some() && seen.insert(pin_identity(s)));
    let mut missing: Vec<Subject> = Vec::new();
    for (s, report) in checks::check(repo, subjects, false).await? {
        let label = s.labels[0].clone();
        let pin = s.manifest.pin.as_ref().expect("only pinned subjects");
        match report.status {
            VerifyStatus::Ok => {}
            VerifyStatus::Missing => missing.push(s),
            VerifyStatus::Drifted => p.note(format!(
                "{label}: pin {} points elsewhere ({}); reported, not overwritten: put the ref back \
                 where the manifest says, or re-register the object",
                pin.r#ref, report.message
            )),
            VerifyStatus::Unknown => p.note(format!(
                "{label}: pin {} could not be checked ({})",
                pin.r#ref, report.message
            )),
        }
    }
    // A missing pin is rebuilt only while the store still has its state.
    let stateless: Vec<Subject> = missing
        .iter()
        .map(|s| {
            let mut s = s.clone();
            std::sync::Arc::make_mut(&mut s.manifest).pin = None;
            s
        })
        .collect();
    // A subject's first label is its own (no two subjects share one).
    let reachable: BTreeMap<String, (VerifyStatus, String)> = checks::check(repo, stateless, true)
        .await?
        .into_iter()
        .map(|(s, r)| (s.labels[0].clone(), (r.status, r.message)))
        .collect();
    for s in &missing {
        let label = s.labels[0].clone();
        let m = &s.manifest;
        let pin = m.pin.as_ref().expect("only pinned subjects");
        match reachable.get(&label) {
            Some((VerifyStatus::Missing, why)) => {
                unrepairable.insert(
                    label.clone(),
                    format!(
                        "pin {} is gone and so is its state ({why}): nothing to pin again",
                        pin.r#ref
                    ),
                );
            }
            _ => p.push(
                Action::new(verb::REPIN, &s.key)
                    .with_kind(&m.kind)
                    .with_target(&pin.r#ref)
                    .with_detail("native ref gone; the store still has the state")
                    .with_param("label", json!(label))
                    .with_param("pin_id", json!(pin.id))
                    .with_param("state", Value::Object(m.state.clone().unwrap_or_default()))
                    .with_param("backend", json!(m.kind))
                    .with_param("locator", Value::Object(m.locator.clone())),
            ),
        }
    }

    // Working branches this checkout expects.
    let mut probes = Vec::new();
    for (k, working_ref) in &ws.working_refs {
        if !selected(&opts.keys, k) {
            continue;
        }
        let Some(m) = manifests.get(k) else {
            p.note(format!(
                "{k}: workspace.toml names working branch {working_ref}, but no manifest names \
                 the object; `tether gc` forgets it"
            ));
            continue;
        };
        let client = repo.client(m).await?;
        let r = working_ref.clone();
        probes.push((k.clone(), async move {
            fork::branch_head(&client, &r)
                .await
                .map(|head| head.is_some())
        }));
    }
    for (k, exists) in fan_out(probes).await.results {
        let working_ref = &ws.working_refs[&k];
        let m = &manifests[&k];
        match exists {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => {
                unrepairable.insert(
                    k.clone(),
                    format!("could not read working branch {working_ref}: {e}"),
                );
                continue;
            }
        }
        let store = Store::new(&m.kind, Value::Object(m.locator.clone()));
        // What the manifest records; an object never committed, where its
        // branch started.
        let source = fork::fork_source(m).map(|(target, _)| target).or_else(|| {
            ws.base_states
                .get(&k)
                .or_else(|| ws.fork_points.get(&k))
                .map(|state| Target::Recorded(Value::Object(state.clone())))
        });
        let Some(source) = source else {
            unrepairable.insert(
                k.clone(),
                format!(
                    "working branch {working_ref} is gone and nothing records a state to fork it \
                     from: `tether new` forks the bookmark's branches again"
                ),
            );
            continue;
        };
        let detail = match &source {
            Target::Pinned(pin) => format!("forked again from pin {}", pin.ref_name),
            Target::Recorded(state) => {
                format!("forked again from {}", canonical::to_string(state))
            }
            _ => "forked again".to_string(),
        };
        p.require(Precondition::RefAbsent {
            key: k.clone(),
            store,
            ref_name: working_ref.clone(),
        });
        p.push(
            Action::new(verb::REFORK, &k)
                .with_kind(&m.kind)
                .with_target(working_ref)
                .with_detail(detail)
                .with_param("source", fork::source_param(&source))
                .with_param("backend", json!(m.kind))
                .with_param("locator", Value::Object(m.locator.clone())),
        );
    }

    let entries = repo.journal()?.entries()?;
    let mut named: Option<BTreeSet<String>> = None;
    let mut closes = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if !entry.is_incomplete() {
            continue;
        }
        let Some(later) = finished_by(entry, &entries[i + 1..]) else {
            p.note(interrupted(entry));
            continue;
        };
        let named = match &mut named {
            Some(n) => n,
            None => named.insert(named_pins(repo)?),
        };
        let left = left_pins(repo, entry, named);
        let refs: Vec<&str> = left
            .iter()
            .filter_map(|pin| pin.ref_name.as_deref())
            .collect();
        p.note(format!(
            "INCOMPLETE {} {} (started {}): finished by {}, a later `tether {}`; `tether repair` \
             closes it{}",
            entry.id,
            entry.command,
            entry.at,
            later.id,
            later.command,
            if refs.is_empty() {
                String::new()
            } else {
                format!(
                    ", then `tether gc` releases the {} pin(s) it left that no manifest names: {}",
                    refs.len(),
                    brief_list(&refs)
                )
            }
        ));
        closes.push(json!({"op": entry.id, "by": later.id, "pins": left}));
    }
    if !closes.is_empty() {
        p.context.insert("close".into(), json!(closes));
    }
    if !unrepairable.is_empty() {
        p.context.insert("unrepairable".into(), json!(unrepairable));
    }
    Ok(p)
}

/// One pin in one store: its kind, locator and id.
fn pin_identity(s: &Subject) -> String {
    canonical::to_string(&json!([
        s.manifest.kind,
        Value::Object(s.manifest.locator.clone()),
        s.manifest.pin.as_ref().map(|p| &p.id),
    ]))
}

/// The completed entry that finished `entry` by running the same command
/// again: the first among `later` (entries after it) of the same command
/// (`commit` and `pull` count as one: both pin and commit), not itself an
/// undo, whose selection covers `entry`'s. Only a planned command is judged
/// so: its plan says what it set out to do, which a re-run plans afresh.
fn finished_by<'a>(entry: &OpEntry, later: &'a [OpEntry]) -> Option<&'a OpEntry> {
    if entry.plan.is_none() || entry.undoes.is_some() {
        return None;
    }
    fn family(c: &str) -> &str {
        match c {
            "pull" => "commit",
            other => other,
        }
    }
    let keys = |e: &OpEntry| -> Option<BTreeSet<String>> {
        let keys = e.plan.as_ref()?.pointer("/context/keys")?.as_array()?;
        let keys: BTreeSet<String> = keys
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        (!keys.is_empty()).then_some(keys)
    };
    let wanted = keys(entry);
    later.iter().find(|e| {
        e.status == crate::oplog::STATUS_DONE
            && e.undoes.is_none()
            && e.parent == entry.parent
            && family(&e.command) == family(&entry.command)
            && match (keys(e), &wanted) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(theirs), Some(ours)) => ours.is_subset(&theirs),
            }
    })
}

/// The pin ids a manifest names: the working tree's and every visible
/// commit's.
fn named_pins(repo: &Repo) -> Result<BTreeSet<String>> {
    let mut named: BTreeSet<String> = repo
        .manifests()?
        .values()
        .filter_map(|m| m.pin.as_ref().map(|p| p.id.clone()))
        .collect();
    for (_, set) in super::history::history_manifests(repo)? {
        named.extend(
            set.values()
                .filter_map(|m| m.pin.as_ref().map(|p| p.id.clone())),
        );
    }
    Ok(named)
}

/// The pins `entry` created (its progress says the store reported them new)
/// that no manifest names, as pin-index records.
fn left_pins(repo: &Repo, entry: &OpEntry, named: &BTreeSet<String>) -> Vec<index::PinnedPin> {
    let actions: Vec<Action> = entry
        .planned_actions()
        .iter()
        .filter_map(|a| serde_json::from_value::<Action>(a.clone()).ok())
        .collect();
    let mut left = Vec::new();
    for detail in &entry.progress {
        if detail.get("created") != Some(&Value::Bool(true)) {
            continue;
        }
        let Some(key) = detail
            .get("pinned")
            .or_else(|| detail.get("repinned"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let Some(a) = actions.iter().find(|a| {
            matches!(a.verb.as_str(), verb::PIN | verb::REPIN)
                && (a.key == key || a.params.get("label").and_then(Value::as_str) == Some(key))
        }) else {
            continue;
        };
        let Some(pin_id) = a.params.get("pin_id").and_then(Value::as_str) else {
            continue;
        };
        if named.contains(pin_id) {
            continue;
        }
        left.push(index::PinnedPin {
            dataset_id: repo.dataset_id().to_string(),
            pin_id: pin_id.to_string(),
            kind: a.kind.clone(),
            key: a.key.clone(),
            identity: a.params.get("identity").cloned().unwrap_or(Value::Null),
            ref_name: detail
                .get("ref")
                .and_then(Value::as_str)
                .map(str::to_string),
            at: time::now_timestamp(),
        });
    }
    left
}

/// At most three items, then how many more: a note stays one short line.
fn brief_list(items: &[impl AsRef<str>]) -> String {
    const SHOWN: usize = 3;
    let mut out: Vec<&str> = items.iter().take(SHOWN).map(AsRef::as_ref).collect();
    let more = items.len().saturating_sub(SHOWN);
    let more = format!("and {more} more");
    if items.len() > SHOWN {
        out.push(&more);
    }
    out.join(", ")
}

/// How far an interrupted operation got, for the plan's notes.
fn interrupted(entry: &OpEntry) -> String {
    let planned: Vec<String> = entry
        .planned_actions()
        .iter()
        .filter_map(|a| serde_json::from_value::<Action>(a.clone()).ok())
        .filter(Action::writes)
        .map(|a| a.render())
        .collect();
    let done: Vec<String> = entry.progress.iter().map(effect).collect();
    format!(
        "INCOMPLETE {} {} (started {}): {} of {} planned effect(s) landed{}{}; {} finishes it",
        entry.id,
        entry.command,
        entry.at,
        done.len(),
        planned.len(),
        if done.is_empty() {
            String::new()
        } else {
            format!("; done: {}", brief_list(&done))
        },
        if planned.is_empty() {
            String::new()
        } else {
            format!("; planned: {}", brief_list(&planned))
        },
        crate::oplog::rerun_hint(entry),
    )
}

/// One progress record as a phrase: `pinned KEY -> REF` for the records
/// `commit`, `pull` and `repair` write, `field value` pairs for any other.
fn effect(detail: &Value) -> String {
    let Some(o) = detail.as_object() else {
        return detail.to_string();
    };
    let mut parts: Vec<String> = o
        .iter()
        .filter(|(k, _)| *k != "ref" && *k != "created")
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k} {s}"),
            other => format!("{k} {other}"),
        })
        .collect();
    if let Some(r) = o.get("ref").and_then(Value::as_str) {
        parts.push(format!("-> {r}"));
    }
    if o.get("created") == Some(&Value::Bool(false)) {
        parts.push("(found there)".into());
    }
    parts.join(" ")
}

/// Apply a repair plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<RepairReport> {
    let locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let mut report = RepairReport {
        notes: plan.notes.clone(),
        ..RepairReport::default()
    };
    report.failed = unrepairable(plan);
    let closes = closes(repo, plan)?;
    if plan.is_empty() && closes.is_empty() {
        return Ok(report);
    }
    let journal = repo.journal()?;
    let mut op = journal.start(NewOp::new("repair").plan(plan))?;
    // Leftover pins go into the index before their entry closes: killed in
    // between, the entry still keeps them and the next repair closes it.
    let pins: Vec<index::PinnedPin> = closes.iter().flat_map(|c| c.2.clone()).collect();
    if !pins.is_empty() {
        index::append_pinned(repo.vcs.shared_dir(), &pins)?;
    }
    for (id, by, pins) in &closes {
        let said = format!("INCOMPLETE {id} ");
        report.notes.retain(|n| !n.starts_with(&said));
        report.closed.insert(
            id.clone(),
            format!(
                "finished by {by}{}",
                if pins.is_empty() {
                    String::new()
                } else {
                    format!("; {} pin(s) left for `tether gc`", pins.len())
                }
            ),
        );
    }

    // Pins first: a refork may start from a pin this repair recreates.
    let mut calls = Vec::new();
    for a in plan.actions.iter().filter(|a| a.verb == verb::REPIN) {
        let label = a.params["label"].as_str().unwrap_or(&a.key).to_string();
        let client = client_for(repo, a).await?;
        let state = a.params["state"].clone();
        let pin_id = a.params["pin_id"].as_str().unwrap_or_default().to_string();
        calls.push((label, async move {
            let pin = client.pin(&state, &pin_id).await?;
            let identity = if pin.created {
                Some(client.identity().await?)
            } else {
                None
            };
            Ok((pin, identity))
        }));
    }
    let mut created = Vec::new();
    for ((label, outcome), a) in fan_out(calls)
        .await
        .results
        .into_iter()
        .zip(plan.actions.iter().filter(|a| a.verb == verb::REPIN))
    {
        match outcome {
            Ok((pin, identity)) => {
                op.progress(
                    json!({"repinned": label, "ref": pin.ref_name, "created": pin.created}),
                )?;
                if let Some(identity) = identity {
                    created.push(index::PinnedPin {
                        dataset_id: repo.dataset_id().to_string(),
                        pin_id: pin.id.clone(),
                        kind: a.kind.clone(),
                        key: a.key.clone(),
                        identity,
                        ref_name: Some(pin.ref_name.clone()),
                        at: time::now_timestamp(),
                    });
                } else {
                    report.notes.push(format!(
                        "{label}: pin {} was there again already",
                        pin.ref_name
                    ));
                }
                report.repinned.insert(label.clone(), pin.id);
                report.repinned_refs.insert(label, pin.ref_name);
            }
            Err(e) => {
                report.failed.insert(label, e.to_string());
            }
        }
    }
    if !created.is_empty() {
        index::append_pinned(repo.vcs.shared_dir(), &created)?;
    }

    let mut calls = Vec::new();
    for a in plan.actions.iter().filter(|a| a.verb == verb::REFORK) {
        let client = client_for(repo, a).await?;
        let source = fork::source_from_param(a.params.get("source"))?;
        let name = a.target.clone();
        calls.push((a.key.clone(), async move {
            client.fork(&source, &name, &Expected::Absent).await
        }));
    }
    for (k, outcome) in fan_out(calls).await.results {
        match outcome {
            Ok(r) => {
                op.progress(json!({"reforked": k, "ref": r}))?;
                report.reforked.insert(k, r);
            }
            Err(e) => {
                report.failed.insert(k, e.to_string());
            }
        }
    }
    if !report.reforked.is_empty() {
        // The snapshot cache may still hold the lost branch's error.
        let mut ws = repo.workspace()?;
        super::snapshot::invalidate(&mut ws, report.reforked.keys());
        repo.save_workspace(&locks, &ws)?;
    }

    let mut result = serde_json::to_value(&report).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut result {
        let mut done: Vec<String> = report.repinned_refs.values().cloned().collect();
        done.extend(report.reforked.values().cloned());
        let mut summary = Vec::new();
        if !done.is_empty() {
            summary.push(format!("rebuilt {}", done.join(", ")));
        }
        if !closes.is_empty() {
            let ids: Vec<&str> = closes.iter().map(|c| c.0.as_str()).collect();
            summary.push(format!("closed {}", ids.join(", ")));
        }
        o.insert("summary".into(), json!(summary.join("; ")));
    }
    let ids: Vec<String> = closes.iter().map(|c| c.0.clone()).collect();
    let by: BTreeSet<&str> = closes.iter().map(|c| c.1.as_str()).collect();
    let how = format!(
        "finished by {}; closed by repair",
        by.into_iter().collect::<Vec<_>>().join(", ")
    );
    op.finish_closing(result, &ids, &how)?;
    Ok(report)
}

/// The entries the plan closes (`context.close`) that are still INCOMPLETE
/// now, under the lock: (id, the run that finished it, its leftover pins).
fn closes(repo: &Repo, plan: &Plan) -> Result<Vec<(String, String, Vec<index::PinnedPin>)>> {
    let Some(list) = plan.context.get("close").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    let open: BTreeSet<String> = repo
        .journal()?
        .incomplete()?
        .into_iter()
        .map(|e| e.id)
        .collect();
    Ok(list
        .iter()
        .filter_map(|c| {
            let id = c.get("op")?.as_str()?.to_string();
            let by = c.get("by")?.as_str()?.to_string();
            let pins = serde_json::from_value(c.get("pins")?.clone()).ok()?;
            open.contains(&id).then_some((id, by, pins))
        })
        .collect())
}

/// A client on the store an action names (its `backend` and `locator`).
async fn client_for(repo: &Repo, a: &Action) -> Result<crate::plugin::ObjectClient> {
    let backend = a.params["backend"].as_str().unwrap_or(&a.kind);
    let plugin = repo.plugin(backend).await?;
    Ok(repo.client_for_key(&plugin, &a.params["locator"], &a.key))
}

/// What a plan found it cannot rebuild (`context.unrepairable`), by target.
pub fn unrepairable(plan: &Plan) -> BTreeMap<String, String> {
    plan.context
        .get("unrepairable")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(t, why)| (t.clone(), why.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
