//! `tether promote [KEY...] [-r REV] [--strategy auto|ff|merge] [-m MESSAGE]`:
//! land a bookmark's dataset commit on the trunk.
//!
//! Per Forkable object, from the fork point (`workspace.toml`) and the
//! backend's capabilities: upstream unchanged → `fast-forward` (PROMOTE);
//! moved → `merge` (MERGE) or `refuse` with the system's recipe. What lands is
//! what the bookmark's *commit* pinned, so a branch with writes since the last
//! commit is refused. Without keys one refusal holds the rest (`hold`): a
//! bookmark is planned whole or not at all, and the trunk bookmark moves only
//! when everything fast-forwarded. Objects of one branch scope are promoted
//! together (`share`).
//!
//! Apply runs merges first and fast-forwards only once every merge landed (a
//! fast-forward cannot be taken back); every move is conditional on the base
//! head the plan reviewed. After a merge the working branch is reset onto the
//! merged head: `commit` pins it and a second `promote` moves the trunk.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::fork::{branch_head, fork_source, source_from_param, source_param};
use super::repo::Repo;
use crate::model::{Manifest, key, manifest};
use crate::oplog::NewOp;
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{BackendError, Expected, Target, fan_out};
use crate::vcs::CommitId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    #[default]
    Auto,
    Ff,
    Merge,
}

impl Strategy {
    pub fn parse(s: &str) -> Result<Strategy> {
        match s {
            "auto" => Ok(Strategy::Auto),
            "ff" => Ok(Strategy::Ff),
            "merge" => Ok(Strategy::Merge),
            other => Err(TetherError::refused(format!("unknown strategy {other:?}"))
                .hint("use auto, ff or merge")),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Strategy::Auto => "auto",
            Strategy::Ff => "ff",
            Strategy::Merge => "merge",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct PromoteOptions {
    pub keys: Vec<String>,
    pub rev: Option<String>,
    pub strategy: Strategy,
    pub message: Option<String>,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PromoteReport {
    pub fast_forwarded: BTreeMap<String, Value>,
    pub merged: BTreeMap<String, Value>,
    pub skipped: Vec<String>,
    pub refused: BTreeMap<String, String>,
    pub held: BTreeMap<String, String>,
    pub conflicts: BTreeMap<String, Vec<String>>,
    pub kept_forks: BTreeMap<String, String>,
    pub trunk_moved: Option<String>,
    pub trunk_held: Option<String>,
    pub failed: BTreeMap<String, String>,
}

impl PromoteReport {
    /// Whether anything landed in a store or the VCS.
    pub fn landed(&self) -> bool {
        !self.fast_forwarded.is_empty() || !self.merged.is_empty() || self.trunk_moved.is_some()
    }
}

/// What the stores say about one object.
struct Probe {
    /// The backend's branch scope: objects in one share a branch.
    scope: String,
    base: Value,
    branch: Option<Value>,
    /// Whether the base is an ancestor of (or is) the state to land.
    base_behind: Option<bool>,
}

fn brief(state: &Value) -> String {
    super::commit::brief(state.as_object().unwrap_or(&Map::new()))
}

/// Decide what promote would do.
pub async fn plan(repo: &Repo, opts: &PromoteOptions) -> Result<Plan> {
    let ws = repo.workspace_for_plan()?;
    let Some(bookmark) = ws.bookmark.clone() else {
        return Err(
            TetherError::refused("this working copy is on no bookmark (read-only)").hint(
                "`tether new NAME` to work on one, \
             or `tether promote -r REV` to promote what a dataset commit pinned",
            ),
        );
    };
    let trunk = repo.config.trunk.clone();
    if bookmark == trunk && opts.rev.is_none() {
        return Err(TetherError::refused(format!(
            "this working copy is on the trunk bookmark {trunk}: its working refs are the upstream \
             branches already, so there is nothing to promote"
        ))
        .hint("`tether promote -r REV` lands what a dataset commit pinned"));
    }
    let source_commit = match &opts.rev {
        Some(rev) => repo.vcs.resolve(rev)?,
        None => repo.vcs.branch_head(&bookmark)?.ok_or_else(|| {
            TetherError::refused(format!("bookmark {bookmark:?} has no commit yet"))
                .hint("`tether commit` first")
        })?,
    };
    let manifests = repo.manifests_at(&source_commit)?;
    let keys = key::select_keys(&opts.keys, manifests.keys().map(String::as_str))?;
    if !opts.keys.is_empty() {
        super::commit::check_whole_scopes(repo, &manifests, &keys).await?;
    }
    let full = opts.keys.is_empty() && opts.rev.is_none();

    let mut p = Plan::new("promote");
    p.set_keys(&opts.keys);
    p.context.insert("bookmark".into(), json!(bookmark));
    p.context
        .insert("commit".into(), json!(source_commit.to_string()));
    p.context.insert("rev".into(), json!(opts.rev));
    p.context
        .insert("strategy".into(), json!(opts.strategy.as_str()));
    p.context.insert("message".into(), json!(opts.message));
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::WorkspaceBookmark {
        expected: Some(bookmark.clone()),
    });
    p.require(Precondition::BookmarkHead {
        bookmark: bookmark.clone(),
        expected: repo
            .vcs
            .branch_head(&bookmark)?
            .map(|c| c.to_string())
            .unwrap_or_default(),
    });
    p.require(Precondition::ManifestHash {
        expected: manifest::manifest_hash(&repo.manifests()?),
    });

    // The trunk moves only on a full promotion, and only forward.
    let mut trunk_refusal = None;
    let trunk_head = repo.vcs.branch_head(&trunk)?;
    if full {
        match &trunk_head {
            Some(t) if !repo.vcs.is_ancestor(t, &source_commit)? => {
                trunk_refusal = Some(format!(
                    "the trunk bookmark {trunk} has commits {bookmark} lacks ({}): bring them in \
                     first (`git merge {trunk}` on {bookmark}, then `tether commit`), or name the \
                     keys to land a subset on purpose",
                    t.short12()
                ));
            }
            Some(t) => {
                p.require(Precondition::BookmarkHead {
                    bookmark: trunk.clone(),
                    expected: t.to_string(),
                });
            }
            None => {}
        }
    }
    p.context.insert("trunk".into(), json!(trunk));
    p.context.insert(
        "trunk_from".into(),
        json!(trunk_head.as_ref().map(|c| c.to_string())),
    );

    let descriptors = repo.descriptors().await?;
    let mut calls = Vec::new();
    let mut outcomes: BTreeMap<String, Action> = BTreeMap::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    for k in &keys {
        let m = &manifests[k];
        let Some(d) = descriptors.get(&m.kind) else {
            continue;
        };
        let caps = Repo::capabilities(d, m);
        if !caps.iter().any(|c| c == "FORK") {
            p.note(format!("{k}: not forkable; nothing to promote"));
            continue;
        }
        let working_ref = ws.working_refs.get(k).cloned();
        if opts.rev.is_none() && working_ref.is_none() {
            skipped.push((
                k.clone(),
                "never opened writable on this bookmark".to_string(),
            ));
            continue;
        }
        let Some((_, landing)) = fork_source(m) else {
            skipped.push((k.clone(), "not committed on this bookmark".to_string()));
            continue;
        };
        let client = repo.client(m).await?;
        let wr = working_ref.clone();
        calls.push((k.clone(), async move {
            let scope = client.branch_scope().await?;
            let base = client.fingerprint(None).await?;
            let branch = match &wr {
                Some(r) => branch_head(&client, r).await?,
                None => None,
            };
            let base_behind = client.ancestor_of(&base, &landing).await?;
            Ok::<_, BackendError>(Probe {
                scope,
                base,
                branch,
                base_behind,
            })
        }));
    }
    let probes: BTreeMap<String, Probe> = fan_out(calls).await.into_result()?.into_iter().collect();

    // (kind, scope) -> (the member that moves the branch, what it lands)
    let mut scopes: BTreeMap<(String, String), (String, Value)> = BTreeMap::new();
    for (k, probe) in &probes {
        let m = &manifests[k];
        let d = &descriptors[&m.kind];
        let caps = Repo::capabilities(d, m);
        let has = |c: &str| caps.iter().any(|x| x == c);
        let (source, landing) = fork_source(m).expect("probed objects have a source");
        let store = Store::new(&m.kind, Value::Object(m.locator.clone()));
        let upstream = m
            .locator
            .get("branch")
            .and_then(Value::as_str)
            .unwrap_or("main")
            .to_string();
        let base_action = |verb: &str| {
            Action::new(verb, k)
                .with_kind(&m.kind)
                .with_target(&upstream)
                .with_param("source", source_param(&source))
                .with_param("state", landing.clone())
                .with_param("base", probe.base.clone())
        };
        let landing_c = super::fork::content_of(&landing, d);
        let base_c = super::fork::content_of(&probe.base, d);
        // Objects of one branch scope move one branch: the first member
        // plans the move, the others share it.
        let scope_id = (m.kind.clone(), probe.scope.clone());
        if let Some((leader, leader_c)) = scopes.get(&scope_id) {
            let action = if *leader_c == landing_c {
                base_action(verb::SHARE)
                    .with_param("leader", json!(leader))
                    .with_detail(format!("shares {leader}'s branch and moves with it"))
            } else {
                base_action(verb::REFUSE).with_detail(format!(
                    "shares a branch with {leader}, but its commit pinned another state of it; \
                     commit them together"
                ))
            };
            outcomes.insert(k.clone(), action);
            continue;
        }
        scopes.insert(scope_id, (k.clone(), landing_c.clone()));
        if let (Some(branch), Some(r)) = (&probe.branch, ws.working_refs.get(k))
            && super::fork::content_of(branch, d) != landing_c
        {
            outcomes.insert(
                k.clone(),
                base_action(verb::REFUSE).with_detail(format!(
                    "{r} has writes since the last commit ({}): `tether commit` them first",
                    brief(branch)
                )),
            );
            continue;
        }
        if base_c == landing_c {
            skipped.push((
                k.clone(),
                format!("{upstream} is already at {}", brief(&landing)),
            ));
            continue;
        }
        let fork_point = ws
            .fork_points
            .get(k)
            .map(|s| super::fork::content_of(&Value::Object(s.clone()), d));
        let unchanged = fork_point.as_ref() == Some(&base_c) || probe.base_behind == Some(true);
        let hint = if d.promote_hint.is_empty() {
            String::new()
        } else {
            format!("; {}", d.promote_hint)
        };
        let ff_detail = format!(
            "would fast-forward: {upstream} {} -> {} (base unchanged since fork)",
            brief(&probe.base),
            brief(&landing)
        );
        let action = if unchanged {
            if opts.strategy == Strategy::Merge {
                base_action(verb::REFUSE).with_detail(format!(
                    "{upstream} is unchanged since the fork, so this is a fast-forward, and \
                     --strategy merge refuses those"
                ))
            } else if has("PROMOTE") {
                base_action(verb::FAST_FORWARD).with_detail(ff_detail)
            } else {
                base_action(verb::REFUSE)
                    .with_detail(format!("the {} backend cannot move a branch{hint}", m.kind))
            }
        } else if opts.strategy == Strategy::Ff {
            base_action(verb::REFUSE).with_detail(format!(
                "{upstream} moved since the fork ({}), so this needs a merge, and --strategy ff \
                 refuses those",
                brief(&probe.base)
            ))
        } else if has("MERGE") {
            base_action(verb::MERGE).with_detail(format!(
                "would merge into {upstream} (moved since the fork to {})",
                brief(&probe.base)
            ))
        } else {
            base_action(verb::REFUSE).with_detail(format!(
                "{upstream} moved since the fork ({}), and the {} backend cannot merge{hint}",
                brief(&probe.base),
                m.kind
            ))
        };
        if matches!(action.verb.as_str(), verb::FAST_FORWARD | verb::MERGE) {
            p.require(Precondition::BaseState {
                key: k.clone(),
                store: store.clone(),
                ref_name: String::new(),
                expected: probe.base.clone(),
            });
            if let Some(r) = ws.working_refs.get(k) {
                p.require(Precondition::RefHead {
                    key: k.clone(),
                    store: store.clone(),
                    ref_name: r.clone(),
                    expected: probe.branch.clone().unwrap_or(Value::Null),
                });
            }
        }
        outcomes.insert(k.clone(), action);
    }

    for (k, why) in &skipped {
        p.note(format!("{k}: {why}; skipped"));
    }
    p.context.insert(
        "skipped".into(),
        json!(skipped.iter().map(|(k, _)| k).collect::<Vec<_>>()),
    );
    // A bookmark is planned whole or not at all.
    let refused: Vec<String> = outcomes
        .iter()
        .filter(|(_, a)| a.verb == verb::REFUSE)
        .map(|(k, _)| k.clone())
        .collect();
    let hold_all = opts.keys.is_empty() && !refused.is_empty();
    for (k, mut a) in outcomes {
        if hold_all && matches!(a.verb.as_str(), verb::FAST_FORWARD | verb::MERGE) {
            a.detail = format!(
                "{}; held because {} refused, and a bookmark is planned whole or not at all",
                a.detail,
                refused.join(", ")
            );
            a.verb = verb::HOLD.into();
        }
        let _ = &k;
        p.push(a);
    }
    if hold_all {
        p.note(format!(
            "nothing moves: {} refused; land the rest on purpose with `tether promote KEY...`, or \
             write those systems' base branches by hand on the trunk and promote again",
            refused.join(", ")
        ));
    }
    let lands = p
        .actions
        .iter()
        .any(|a| matches!(a.verb.as_str(), verb::FAST_FORWARD | verb::MERGE));
    let merges = p.actions.iter().any(|a| a.verb == verb::MERGE);
    let trunk_moves = full && !hold_all && trunk_refusal.is_none() && !merges;
    p.context.insert("move_trunk".into(), json!(trunk_moves));
    p.context.insert("full".into(), json!(full));
    if let Some(r) = &trunk_refusal {
        p.context.insert("trunk_held".into(), json!(r));
        p.note(r.clone());
    } else if full && merges {
        p.note(format!(
            "the trunk bookmark {trunk} stays: after a merge, `tether commit` pins it and a second \
             `tether promote` moves {trunk}"
        ));
    } else if !full {
        p.note(format!(
            "the trunk bookmark {trunk} does not move for a subset or a --rev"
        ));
    }
    if !lands && trunk_moves {
        p.note(format!(
            "every system is already there; only the trunk bookmark {trunk} moves"
        ));
    }
    Ok(p)
}

/// Apply a promote plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<PromoteReport> {
    let locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let mut report = PromoteReport::default();
    for a in &plan.actions {
        match a.verb.as_str() {
            verb::REFUSE => {
                report.refused.insert(a.key.clone(), a.detail.clone());
            }
            verb::HOLD => {
                report.held.insert(a.key.clone(), a.detail.clone());
            }
            _ => {}
        }
    }
    let ctx = |k: &str| plan.context.get(k).cloned().unwrap_or(Value::Null);
    report.skipped = serde_json::from_value(ctx("skipped")).unwrap_or_default();
    if let Some(r) = ctx("trunk_held").as_str() {
        report.trunk_held = Some(r.to_string());
    }
    let moves: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| matches!(a.verb.as_str(), verb::FAST_FORWARD | verb::MERGE))
        .collect();
    let move_trunk = ctx("move_trunk").as_bool().unwrap_or(false);
    if moves.is_empty() && !move_trunk {
        return Ok(report);
    }
    let commit = CommitId::new(ctx("commit").as_str().unwrap_or_default());
    let manifests = repo.manifests_at(&commit)?;
    let message = ctx("message")
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "tether promote {}",
                ctx("bookmark").as_str().unwrap_or_default()
            )
        });
    let journal = repo.journal()?;
    let mut op = journal.start(NewOp::new("promote").plan(plan).pre(
        "bases",
        json!(
                moves
                    .iter()
                    .map(|a| (a.key.clone(), a.params.get("base").cloned()))
                    .collect::<BTreeMap<_, _>>()
            ),
    ))?;
    let mut ws = repo.workspace()?;

    // Merges first: a fast-forward cannot be taken back.
    let merge_calls = calls_for(repo, &manifests, &moves, verb::MERGE, &message).await?;
    for (k, r) in fan_out(merge_calls).await.results {
        match r {
            Ok(state) => {
                op.progress(json!({"merged": k, "state": state}))?;
                report.merged.insert(k.clone(), state.clone());
                // The branch now follows the merged head: commit pins it.
                if let (Some(r), Some(m)) = (ws.working_refs.get(&k).cloned(), manifests.get(&k)) {
                    let client = repo.client(m).await?;
                    let landed = plan
                        .actions
                        .iter()
                        .find(|a| a.key == k)
                        .and_then(|a| a.params.get("state").cloned())
                        .unwrap_or(Value::Null);
                    match client
                        .fork(&Target::Recorded(state.clone()), &r, &Expected::At(landed))
                        .await
                    {
                        Ok(_) => {
                            if let Some(s) = state.as_object() {
                                ws.fork_points.insert(k.clone(), s.clone());
                            }
                            super::snapshot::invalidate(&mut ws, [&k]);
                        }
                        Err(e) => {
                            report.kept_forks.insert(
                                k.clone(),
                                format!(
                                    "{r} was not reset onto the merge ({e}); it keeps its writes"
                                ),
                            );
                        }
                    }
                }
            }
            Err(BackendError::MergeConflict(units)) => {
                report.conflicts.insert(k.clone(), units);
            }
            Err(e) => {
                report.failed.insert(k.clone(), e.to_string());
            }
        }
    }
    let merges_landed = report.conflicts.is_empty() && report.failed.is_empty();
    if merges_landed {
        let ff_calls = calls_for(repo, &manifests, &moves, verb::FAST_FORWARD, &message).await?;
        for (k, r) in fan_out(ff_calls).await.results {
            match r {
                Ok(state) => {
                    op.progress(json!({"fast_forwarded": k, "state": state}))?;
                    if let Some(s) = state.as_object() {
                        ws.fork_points.insert(k.clone(), s.clone());
                    }
                    report.fast_forwarded.insert(k, state);
                }
                Err(e) => {
                    report.failed.insert(k, e.to_string());
                }
            }
        }
    } else {
        for a in moves.iter().filter(|a| a.verb == verb::FAST_FORWARD) {
            report.held.insert(
                a.key.clone(),
                "not fast-forwarded: a merge did not land, and fast-forwards wait for every merge"
                    .into(),
            );
        }
    }
    repo.save_workspace(&locks, &ws)?;

    let all_landed = report.failed.is_empty()
        && report.conflicts.is_empty()
        && report.merged.is_empty()
        && report.fast_forwarded.len() == moves.len();
    // Members of a branch scope landed with the member that moved it.
    for a in plan.actions.iter().filter(|a| a.verb == verb::SHARE) {
        let leader = a.params.get("leader").and_then(Value::as_str).unwrap_or("");
        if let Some(state) = report.fast_forwarded.get(leader).cloned() {
            report.fast_forwarded.insert(a.key.clone(), state);
        } else if let Some(state) = report.merged.get(leader).cloned() {
            report.merged.insert(a.key.clone(), state);
        }
    }
    if move_trunk && all_landed {
        let trunk = ctx("trunk").as_str().unwrap_or_default().to_string();
        let from = ctx("trunk_from").as_str().map(CommitId::new);
        let moved = match &from {
            Some(from) => repo.vcs.move_branch(&trunk, &commit, from),
            None => repo.vcs.create_branch(&trunk, &commit),
        };
        let moved = crate::fault::on_ok("vcs.bookmark", moved);
        match moved {
            Ok(()) => {
                op.progress(json!({"trunk": trunk, "from": from.as_ref().map(|c| c.to_string()), "to": commit.to_string()}))?;
                report.trunk_moved = Some(commit.to_string());
            }
            Err(e) => report.trunk_held = Some(e.to_string()),
        }
    } else if (move_trunk || ctx("full").as_bool().unwrap_or(false)) && report.trunk_held.is_none()
    {
        report.trunk_held = Some(if report.merged.is_empty() {
            "not everything landed".into()
        } else {
            "a merge landed: `tether commit` pins it, and a second `tether promote` moves the trunk"
                .into()
        });
    }
    let landed: Vec<String> = report
        .fast_forwarded
        .keys()
        .chain(report.merged.keys())
        .cloned()
        .collect();
    let summary = if landed.is_empty() {
        "nothing landed".to_string()
    } else {
        format!("landed {}", landed.join(", "))
    };
    op.finish(json!({"summary": summary, "report": report}))?;
    Ok(report)
}

type MoveCall = (
    String,
    std::pin::Pin<Box<dyn Future<Output = std::result::Result<Value, BackendError>> + Send>>,
);

async fn calls_for(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    moves: &[&Action],
    which: &str,
    message: &str,
) -> Result<Vec<MoveCall>> {
    let mut calls: Vec<MoveCall> = Vec::new();
    for a in moves.iter().filter(|a| a.verb == which) {
        let m = manifests.get(&a.key).ok_or_else(|| {
            TetherError::no_such_object(&a.key, manifests.keys().map(String::as_str))
        })?;
        let client = repo.client(m).await?;
        let source = source_from_param(a.params.get("source"))?;
        let expected = Expected::At(a.params.get("base").cloned().unwrap_or(Value::Null));
        let message = message.to_string();
        let merge = which == verb::MERGE;
        calls.push((
            a.key.clone(),
            Box::pin(async move {
                if merge {
                    client.merge(&source, &message, &expected).await
                } else {
                    client.promote(&source, &expected).await
                }
            }),
        ));
    }
    Ok(calls)
}
