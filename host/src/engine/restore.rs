//! `tether restore KEY... (--from REV | --at REF) [--discard]`: reset (or
//! create) objects' working branches on this bookmark, touching nothing else.
//!
//! - `--from REV`: at what that dataset commit pinned (or recorded), the
//!   per-object `jj restore --from`. `promote` then treats the branch as
//!   forked from there.
//! - `--at REF`: at a native ref or state in each object's store (a branch,
//!   tag or state id, as `add --at` takes it). The plan resolves REF to a
//!   state and records it, so `REF` itself is never moved or written.
//!
//! Writes nobody committed are refused unless `--discard`; an unreadable
//! head is refused outright. Refused on the trunk (the working ref is the
//! upstream branch itself), for objects that cannot fork, for `--from` with
//! `--at`, and for an empty `REF`. Objects of one branch scope are named
//! together.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::fork::{branch_head, expected_param, fork_source, source_param};
use super::repo::Repo;
use crate::model::{ids, key, manifest};
use crate::oplog::NewOp;
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{BackendError, Target, fan_out};

#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    pub keys: Vec<String>,
    pub from: Option<String>,
    pub at: Option<String>,
    pub discard: bool,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RestoreReport {
    pub from: Option<String>,
    pub at: Option<String>,
    pub working_refs: BTreeMap<String, String>,
    /// For the CLI: the state each branch now holds.
    #[serde(skip)]
    pub states: BTreeMap<String, Value>,
}

/// Decide what restore would do.
pub async fn plan(repo: &Repo, opts: &RestoreOptions) -> Result<Plan> {
    match (&opts.from, &opts.at) {
        (Some(_), Some(_)) => {
            return Err(
                TetherError::refused("--from and --at name two different sources").hint("give one"),
            );
        }
        (None, None) => {
            return Err(TetherError::refused("restore needs a source").hint(
                "--from REV (what a dataset commit pinned) or --at REF \
                 (a branch, tag or state in each store)",
            ));
        }
        (_, Some(at)) if at.trim().is_empty() => {
            return Err(TetherError::refused("--at is empty").hint(
                "an empty REF would start the branch from the upstream head; name \
                 a branch, tag or state id",
            ));
        }
        _ => {}
    }
    if opts.keys.is_empty() {
        return Err(TetherError::refused("name the objects to restore")
            .hint("`tether restore KEY... --from REV`"));
    }
    let ws = repo.workspace_for_plan()?;
    let Some(bookmark) = ws.bookmark.clone() else {
        return Err(
            TetherError::refused("this working copy is on no bookmark (read-only)")
                .hint("`tether new NAME` to work on one"),
        );
    };
    if bookmark == repo.config.trunk {
        return Err(TetherError::refused(format!(
            "restore is refused on the trunk bookmark {bookmark}"
        ))
        .hint(
            "there the working ref is the \
             upstream branch itself; re-register the object with --at, or `tether pull`, or \
             `tether new -b NAME` and restore there",
        ));
    }
    let manifests = repo.manifests()?;
    let keys = key::select_keys(&opts.keys, manifests.keys().map(String::as_str))?;
    super::commit::check_whole_scopes(repo, &manifests, &keys).await?;
    let source_manifests = match &opts.from {
        Some(rev) => Some(repo.manifests_at(&repo.vcs.resolve(rev)?)?),
        None => None,
    };
    let descriptors = repo.descriptors().await?;

    let mut p = Plan::new("restore");
    p.set_keys(&opts.keys);
    p.context.insert("bookmark".into(), json!(bookmark));
    p.context.insert("from".into(), json!(opts.from));
    p.context.insert("at".into(), json!(opts.at));
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::WorkspaceBookmark {
        expected: Some(bookmark.clone()),
    });
    p.require(Precondition::ManifestHash {
        expected: manifest::manifest_hash(&manifests),
    });

    let default_ref = ids::working_ref(repo.dataset_id(), &bookmark);
    let mut calls = Vec::new();
    for k in &keys {
        let m = &manifests[k];
        let d = descriptors.get(&m.kind).ok_or_else(|| {
            TetherError::unknown_kind(&m.kind, descriptors.keys().map(String::as_str))
        })?;
        if !Repo::capabilities(d, m).iter().any(|c| c == "FORK") {
            return Err(TetherError::refused(format!(
                "{k} cannot fork (the {} backend has no branches): there is no working branch to \
                 restore",
                m.kind
            )));
        }
        let name = ws
            .working_refs
            .get(k)
            .or_else(|| ws.pending_forks.get(k))
            .cloned()
            .unwrap_or_else(|| default_ref.clone());
        let source = match (&source_manifests, &opts.at) {
            (Some(sm), _) => {
                let from = opts.from.as_deref().unwrap_or_default();
                let sm = sm.get(k).ok_or_else(|| {
                    TetherError::refused(format!("{k} is not in the dataset at {from}"))
                })?;
                let (target, state) = fork_source(sm).ok_or_else(|| {
                    TetherError::refused(format!(
                        "{k} has no recoverable state at {from}: nothing to restore from"
                    ))
                })?;
                Some((target, state))
            }
            _ => None,
        };
        let client = repo.client(m).await?;
        // `--at REF` is resolved through the locator's own `at`, as `add --at` is.
        let at_client = opts.at.as_ref().map(|at| {
            let mut locator = m.locator.clone();
            locator.insert("at".into(), json!(at));
            repo.client_for(&client.plugin().clone(), &Value::Object(locator))
        });
        calls.push((k.clone(), async move {
            let head = branch_head(&client, &name).await?;
            let source = match (source, at_client) {
                (Some(s), _) => s,
                (None, Some(at)) => {
                    let state = at.fingerprint(None).await?;
                    (Target::Recorded(state.clone()), state)
                }
                (None, None) => unreachable!("a source was required above"),
            };
            Ok::<_, BackendError>((name, head, source))
        }));
    }
    let probes: BTreeMap<String, _> = fan_out(calls).await.into_result()?.into_iter().collect();
    let mut committed: Option<BTreeSet<(String, String)>> = None;
    for (k, (name, head, (source, state))) in probes {
        let m = &manifests[&k];
        let d = &descriptors[&m.kind];
        let store = Store::new(&m.kind, Value::Object(m.locator.clone()));
        let c = |v: &Value| super::fork::content_key(v, d);
        let base = Action::new(verb::FORK, &k)
            .with_kind(&m.kind)
            .with_target(&name)
            .with_param("source", source_param(&source))
            .with_param("state", state.clone());
        let detail = format!(
            "at {}",
            super::commit::brief(state.as_object().unwrap_or(&Map::new()))
        );
        let action = match &head {
            None => {
                p.require(Precondition::RefAbsent {
                    key: k.clone(),
                    store,
                    ref_name: name.clone(),
                });
                base.with_param("expected", expected_param(&None))
                    .with_detail(format!("{detail} (creates the branch)"))
            }
            Some(h) => {
                if committed.is_none() {
                    committed = Some(super::fork::committed_states(repo, &descriptors)?);
                }
                let own_commit = ws
                    .base_states
                    .get(&k)
                    .is_some_and(|b| c(&Value::Object(b.clone())) == c(h));
                let pinned = own_commit
                    || committed
                        .as_ref()
                        .is_some_and(|set| set.contains(&(k.clone(), c(h))));
                if !pinned && !opts.discard {
                    Action {
                        verb: verb::REFUSE.into(),
                        ..base
                    }
                    .with_detail(format!(
                        "{name} holds writes no commit pins ({}); commit them, or pass --discard \
                         to throw them away",
                        super::commit::brief(h.as_object().unwrap_or(&Map::new()))
                    ))
                } else {
                    p.require(Precondition::RefHead {
                        key: k.clone(),
                        store,
                        ref_name: name.clone(),
                        expected: h.clone(),
                    });
                    base.with_param("expected", expected_param(&Some(h.clone())))
                        .with_param("reset_from", h.clone())
                        .with_detail(format!("{detail} (resets the branch)"))
                }
            }
        };
        p.push(action);
    }
    Ok(p)
}

/// Apply a restore plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<RestoreReport> {
    let refusals: Vec<String> = plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::REFUSE)
        .map(|a| format!("{}: {}", a.key, a.detail))
        .collect();
    if !refusals.is_empty() {
        return Err(TetherError::refused(format!(
            "refusing to reset working branches with unpinned writes: {}",
            refusals.join("; ")
        )));
    }
    let locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let manifests = repo.manifests()?;
    let old_ws = repo.workspace()?;
    let journal = repo.journal()?;
    let mut op = journal.start(
        NewOp::new("restore")
            .plan(plan)
            .pre("workspace", old_ws.to_json()),
    )?;
    let (forked, failures) = super::fork::apply_forks(repo, plan, &manifests, &mut op).await?;
    let mut report = RestoreReport {
        from: plan
            .context
            .get("from")
            .and_then(Value::as_str)
            .map(str::to_string),
        at: plan
            .context
            .get("at")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..RestoreReport::default()
    };
    let mut ws = old_ws.clone();
    for a in plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::FORK && forked.contains_key(&a.key))
    {
        let k = a.key.clone();
        let made = forked[&k].clone();
        ws.pending_forks.remove(&k);
        ws.pending_resets.remove(&k);
        ws.working_refs.insert(k.clone(), made.clone());
        if let Some(s) = a.params.get("state").and_then(Value::as_object) {
            ws.fork_points.insert(k.clone(), s.clone());
        }
        super::snapshot::invalidate(&mut ws, [&k]);
        report.working_refs.insert(k.clone(), made);
        report
            .states
            .insert(k, a.params.get("state").cloned().unwrap_or(Value::Null));
    }
    repo.save_workspace(&locks, &ws)?;
    let summary = format!(
        "restored {}",
        report
            .working_refs
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    op.finish(json!({"summary": summary, "report": report, "failed": failures.iter().map(|(k, e)| (k.clone(), e.to_string())).collect::<BTreeMap<_, _>>()}))?;
    if !failures.is_empty() {
        return Err(crate::plugin::MultiObjectError { failures }.into());
    }
    Ok(report)
}
