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
//! interrupted (INCOMPLETE) operation of this checkout's log got.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::fork;
use super::repo::Repo;
use super::verify::{self, Subject};
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
    let mut subjects = match verify::subjects(repo, &opts.keys, None, false) {
        Ok(s) => s,
        Err(e) if opts.all_history && no_match(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    if opts.all_history {
        let tree_matched =
            crate::model::key::select_keys(&opts.keys, manifests.keys().map(String::as_str))
                .is_ok();
        match verify::subjects(repo, &opts.keys, None, true) {
            Ok(s) => subjects.extend(s),
            Err(e) if tree_matched && no_match(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let mut seen = BTreeSet::new();
    subjects.retain(|s| s.manifest.pin.is_some() && seen.insert(pin_identity(s)));
    let mut missing: Vec<Subject> = Vec::new();
    for (s, report) in verify::check(repo, subjects, false).await? {
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
    let reachable: BTreeMap<String, (VerifyStatus, String)> = verify::check(repo, stateless, true)
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

    for entry in repo.journal()?.incomplete()? {
        p.note(interrupted(&entry));
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

/// How far an interrupted operation got, for the plan's notes.
fn interrupted(entry: &OpEntry) -> String {
    let planned: Vec<String> = entry
        .plan
        .as_ref()
        .and_then(|p| p.get("actions"))
        .and_then(Value::as_array)
        .map(|actions| {
            actions
                .iter()
                .filter_map(|a| serde_json::from_value::<Action>(a.clone()).ok())
                .filter(Action::writes)
                .map(|a| a.render())
                .collect()
        })
        .unwrap_or_default();
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
            format!("; done: {}", done.join(", "))
        },
        if planned.is_empty() {
            String::new()
        } else {
            format!("; planned: {}", planned.join(", "))
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
    let _locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let mut report = RepairReport {
        notes: plan.notes.clone(),
        ..RepairReport::default()
    };
    report.failed = unrepairable(plan);
    if plan.is_empty() {
        return Ok(report);
    }
    let journal = repo.journal()?;
    let mut op = journal.start(NewOp::new("repair").plan(plan))?;

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
        repo.save_workspace(&ws)?;
    }

    let mut result = serde_json::to_value(&report).unwrap_or(Value::Null);
    if let Value::Object(o) = &mut result {
        let mut done: Vec<String> = report.repinned_refs.values().cloned().collect();
        done.extend(report.reforked.values().cloned());
        o.insert(
            "summary".into(),
            json!(format!("rebuilt {}", done.join(", "))),
        );
    }
    op.finish(result)?;
    Ok(report)
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

/// Load a saved plan for `--from-plan`, refusing another command's plan and
/// a `KEY...` other than the plan's own selection.
pub fn load_plan(path: &Path, keys: &[String]) -> Result<Plan> {
    let plan = Plan::load(path)?;
    if plan.command != "repair" {
        return Err(TetherError::Refused(format!(
            "{} is a plan for `tether {}`, not for repair",
            path.display(),
            plan.command
        )));
    }
    plan.check_selection(keys)?;
    Ok(plan)
}
