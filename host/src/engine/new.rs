//! `tether new [REV] [-b NAME] [--shared] [--keep] [--eager | --lazy]
//! [--defer-record | --no-defer-record] [--discard | --adopt]`: decide which
//! bookmark this working copy works on, then a working ref per Forkable object.
//!
//! - `-b NAME [REV]` creates bookmark NAME at REV (default: here); `new NAME`
//!   joins an existing one; `new REV` takes the bookmark at that commit (this
//!   workspace's, else the trunk, else the only one), and with none there the
//!   working copy is read-only (under git, parked on `tether/<rev12>`); `new`
//!   alone stays and decides every fork again, which clears a stale flag.
//! - On the trunk every working ref is the object's upstream branch (`trunk`).
//!   Elsewhere it is `tether.ws.<dataset>.<slug>`: created by the first
//!   writable `open` (`defer-fork`), or now (`fork`) with `--eager` and for
//!   `pin = "record"` objects unless `--defer-record`. A branch already at the
//!   pin is kept (`reuse`); one at another committed state is reset onto the
//!   pin; one holding writes no commit pins is `refuse`d, saying whose writes
//!   they are, unless `--discard` (reset) or `--shared` (adopt a peer's branch
//!   that builds on the pin). `--adopt` takes existing branches as they are.
//!   Objects of one branch scope share one branch (`share`).
//! - A bookmark another live checkout works on is refused without `--shared`.
//! - Apply moves the VCS first, then forks; a store that refuses to fork does
//!   not lose the branches already made, and a re-run finishes (the made ones
//!   are then at the pin: `reuse`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::fork::{branch_head, expected_param, fork_source, source_param};
use super::repo::Repo;
use crate::model::{Manifest, PinMode, WorkspaceState, ids, manifest};
use crate::oplog::{NewOp, OpEntry};
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{BackendError, Target, fan_out};
use crate::vcs::{CommitId, HeadState, is_parking_branch};

#[derive(Debug, Clone, Default)]
pub struct NewOptions {
    /// `REV`: a bookmark to join, or a revision.
    pub rev: Option<String>,
    /// `-b NAME`: create this bookmark.
    pub create: Option<String>,
    pub shared: bool,
    pub keep: bool,
    /// `--eager` / `--lazy`; `None`: `[new] fork`.
    pub eager: Option<bool>,
    /// `--defer-record` / `--no-defer-record`; `None`: `[new] record`.
    pub defer_record: Option<bool>,
    pub discard: bool,
    pub adopt: bool,
}

/// How `new` set up one object's working ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SetUp {
    /// A branch created now.
    Forked,
    /// An existing branch reset onto the pin.
    Reset,
    /// A branch already at the pin, kept.
    Reused,
    /// The bookmark's existing branch, taken as it is.
    Adopted,
    /// The branch of its branch scope's leader.
    Shared,
    /// Created on the first writable open.
    Deferred,
    /// On the trunk: the upstream branch.
    Trunk,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct NewReport {
    pub bookmark: Option<String>,
    pub working_refs: BTreeMap<String, String>,
    pub pending_forks: BTreeMap<String, String>,
    pub fork_points: BTreeMap<String, Value>,
    pub adopted: BTreeMap<String, String>,
    /// Forks a store refused (the rest landed; a re-run finishes).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, String>,
    /// For the CLI: how each key got its working ref.
    #[serde(skip)]
    pub how: BTreeMap<String, SetUp>,
    /// For the CLI: the parking branch of a read-only working copy.
    #[serde(skip)]
    pub parked: Option<String>,
    #[serde(skip)]
    pub trunk: bool,
    /// For the CLI: `pin = "record"` objects left unforked (`--defer-record`).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// One warning per `pin = "record"` object this checkout has not forked yet
/// (`--defer-record`, or `[new] record = "defer"`): no tether ref holds its
/// recorded state, so the store's retention alone decides how long it can be
/// read here (spec/06, "Lazy or eager"). `new` prints them and `status`
/// repeats them until the fork.
pub(crate) fn retention_warnings(
    manifests: &BTreeMap<String, Manifest>,
    ws: &WorkspaceState,
) -> Vec<String> {
    ws.pending_forks
        .keys()
        .filter(|k| !ws.working_refs.contains_key(*k))
        .filter(|k| manifests.get(*k).is_some_and(|m| m.policy.pin == PinMode::Record))
        .map(|k| {
            format!(
                "{k} has pin = \"record\" and is not forked on this bookmark yet: nothing of \
                 tether's holds its recorded state, only the store's retention keeps it; once the \
                 store expires it, reading {k} here fails (a writable `tether open {k}` forks it now)"
            )
        })
        .collect()
}

/// How the VCS working copy moves.
fn vcs_move(kind: &str, bookmark: Option<&str>, commit: Option<&CommitId>) -> Value {
    json!({"move": kind, "bookmark": bookmark, "commit": commit.map(|c| c.to_string())})
}

/// Where `new` takes the working copy: the bookmark (`None`: read-only) and
/// the commit whose manifests it forks from (`None`: nothing committed yet).
struct Destination {
    bookmark: Option<String>,
    commit: Option<CommitId>,
    vcs: Value,
    /// The interrupted `new` this one finishes (its journal entry id).
    finishes: Option<String>,
}

fn destination(repo: &Repo, ws: &WorkspaceState, opts: &NewOptions) -> Result<Destination> {
    let head = repo.vcs.head_state()?;
    let current = head.bookmark().map(str::to_string);
    if let Some(name) = &opts.create {
        if name.trim().is_empty() || name.starts_with('-') {
            return Err(
                TetherError::refused(format!("{name:?} is not a bookmark name"))
                    .hint("give a name such as `relabel`"),
            );
        }
        if let Some(at) = repo.vcs.branch_head(name)? {
            // A `new -b NAME` killed after creating the bookmark: this one
            // finishes it, from the commit it created the bookmark at.
            if let Some(entry) = interrupted(repo)?.filter(|e| {
                creates(e) == Some(name.as_str()) && planned_commit(e) == Some(at.as_str())
            }) {
                let kind = if current.as_deref() == Some(name.as_str()) {
                    "stay"
                } else {
                    "switch"
                };
                return Ok(Destination {
                    bookmark: Some(name.clone()),
                    vcs: vcs_move(kind, Some(name), Some(&at)),
                    commit: Some(at),
                    finishes: Some(entry.id),
                });
            }
            return Err(
                TetherError::refused(format!("bookmark {name:?} already exists")).hint(format!(
                    "`tether new {name}` joins it, or pick another name"
                )),
            );
        }
        let at = match &opts.rev {
            Some(rev) => repo.vcs.resolve(rev)?,
            None => head
                .commit()
                .cloned()
                .ok_or(crate::vcs::VcsError::NoCommitYet)?,
        };
        return Ok(Destination {
            bookmark: Some(name.clone()),
            vcs: vcs_move("create", Some(name), Some(&at)),
            commit: Some(at),
            finishes: None,
        });
    }
    let Some(rev) = &opts.rev else {
        // Stay: the bookmark the VCS is on.
        return match &head {
            HeadState::Unborn { branch } => Ok(Destination {
                bookmark: Some(branch.clone()),
                commit: None,
                vcs: vcs_move("stay", Some(branch), None),
                finishes: None,
            }),
            HeadState::Branch { name, commit } => Ok(Destination {
                bookmark: Some(name.clone()),
                commit: Some(commit.clone()),
                vcs: vcs_move("stay", Some(name), Some(commit)),
                finishes: None,
            }),
            HeadState::Parked { commit, .. } | HeadState::Detached { commit } => {
                Err(TetherError::refused(format!(
                    "this working copy is on no bookmark (read-only at {})",
                    commit.short12()
                ))
                .hint(
                    "`tether new NAME` joins \
                     a bookmark, `tether new -b NAME` starts one here",
                ))
            }
        };
    };
    if !is_parking_branch(rev)
        && let Some(commit) = repo.vcs.branch_head(rev)?
    {
        let kind = if current.as_deref() == Some(rev.as_str()) {
            "stay"
        } else {
            "switch"
        };
        return Ok(Destination {
            bookmark: Some(rev.clone()),
            vcs: vcs_move(kind, Some(rev), Some(&commit)),
            commit: Some(commit),
            finishes: None,
        });
    }
    let commit = repo.vcs.resolve(rev)?;
    let at_commit: Vec<String> = repo
        .vcs
        .branches()?
        .into_iter()
        .filter(|b| !b.parking && b.commit == commit)
        .map(|b| b.name)
        .collect();
    let pick = ws
        .bookmark
        .as_ref()
        .filter(|b| at_commit.contains(b))
        .cloned()
        .or_else(|| {
            at_commit
                .contains(&repo.config.trunk)
                .then(|| repo.config.trunk.clone())
        })
        .or_else(|| (at_commit.len() == 1).then(|| at_commit[0].clone()));
    match pick {
        Some(b) => {
            let kind = if current.as_deref() == Some(b.as_str()) {
                "stay"
            } else {
                "switch"
            };
            Ok(Destination {
                vcs: vcs_move(kind, Some(&b), Some(&commit)),
                bookmark: Some(b),
                commit: Some(commit),
                finishes: None,
            })
        }
        None => Ok(Destination {
            bookmark: None,
            vcs: vcs_move("park", None, Some(&commit)),
            commit: Some(commit),
            finishes: None,
        }),
    }
}

/// The newest `new` of this checkout that was interrupted (not a step of a
/// `drop`, which `drop` finishes): the one a re-run finishes.
pub(crate) fn interrupted(repo: &Repo) -> Result<Option<OpEntry>> {
    Ok(repo
        .journal()?
        .incomplete()?
        .into_iter()
        .rev()
        .find(|e| e.command == "new" && e.parent.is_none()))
}

fn planned_context<'a>(e: &'a OpEntry, field: &str) -> Option<&'a Value> {
    e.plan.as_ref()?.get("context")?.get(field)
}

/// The bookmark an interrupted `new` was taking the checkout to.
fn planned_bookmark(e: &OpEntry) -> Option<&str> {
    planned_context(e, "bookmark")?.as_str()
}

/// The bookmark an interrupted `new -b` was creating.
fn creates(e: &OpEntry) -> Option<&str> {
    let vcs = planned_context(e, "vcs")?;
    (vcs.get("move")?.as_str()? == "create").then_some(())?;
    vcs.get("bookmark")?.as_str()
}

/// The commit an interrupted `new` was moving the working copy to.
fn planned_commit(e: &OpEntry) -> Option<&str> {
    planned_context(e, "vcs")?.get("commit")?.as_str()
}

/// Finish `new`'s journal entry, closing the interrupted `new` the plan
/// finishes (`context.finishes`) in the same append.
fn finish(op: crate::oplog::OpHandle, plan: &Plan, result: Value) -> Result<()> {
    let finishes: Vec<String> = plan
        .context
        .get("finishes")
        .and_then(Value::as_str)
        .map(str::to_string)
        .into_iter()
        .collect();
    let how = format!("finished by new {}", op.id());
    op.finish_closing(result, &finishes, &how)?;
    Ok(())
}

/// What one object's store says about its bookmark branch.
struct Probe {
    scope: String,
    head: Option<Value>,
    /// Existing generations of the branch name (`name`, `name.2`, ...), highest last.
    generations: Vec<String>,
}

/// Decide what `new` would do.
pub async fn plan(repo: &Repo, opts: &NewOptions) -> Result<Plan> {
    if opts.discard && opts.adopt {
        return Err(TetherError::refused(
            "--discard resets branches and --adopt takes them as they are",
        )
        .hint("give one"));
    }
    if opts.keep && opts.adopt {
        return Err(TetherError::refused(
            "--keep leaves the working refs as they are and --adopt replaces them with the \
             bookmark's existing branches",
        )
        .hint("give one"));
    }
    let ws = repo.workspace_for_plan()?;
    let dest = destination(repo, &ws, opts)?;
    let trunk = dest.bookmark.as_deref() == Some(repo.config.trunk.as_str());
    if opts.adopt && trunk {
        return Err(TetherError::refused(
            "--adopt takes a bookmark's own branches; on the trunk every object works on its \
             upstream branch",
        )
        .hint("`tether new -b NAME --adopt` or `tether new NAME --adopt`"));
    }
    if let Some(b) = dest.bookmark.as_deref().filter(|_| !trunk) {
        let held = super::checkouts::holders(&super::checkouts::live(repo)?, b);
        if !held.is_empty() && !opts.shared {
            let (path, id) = &held[0];
            return Err(TetherError::refused(format!(
                "bookmark {b:?} is held by the checkout at {path} (workspace {})",
                ids::workspace_short(id)
            ))
            .hint(
                "two checkouts on \
                 one bookmark write the same store branches; pass --shared to do that on purpose, \
                 or pick another bookmark",
            ));
        }
    }
    let eager = opts
        .eager
        .unwrap_or(repo.config.new_fork == crate::model::config::NewFork::Eager);
    let defer_record = opts
        .defer_record
        .unwrap_or(repo.config.new_record == crate::model::config::NewRecord::Defer);

    let working = repo.manifests()?;
    let manifests = match &dest.commit {
        Some(c) => repo.manifests_at(c)?,
        None => BTreeMap::new(),
    };
    let mut p = Plan::new("new");
    p.context.insert("bookmark".into(), json!(dest.bookmark));
    p.context.insert("vcs".into(), dest.vcs.clone());
    p.context.insert("keep".into(), json!(opts.keep));
    // An interrupted `new` to the same bookmark is finished by this one.
    let finishes = match dest.finishes.clone() {
        Some(id) => Some(id),
        None => interrupted(repo)?
            .filter(|e| dest.bookmark.is_some() && planned_bookmark(e) == dest.bookmark.as_deref())
            .map(|e| e.id),
    };
    if let Some(id) = finishes {
        p.note(format!("finishes the interrupted new {id}"));
        p.context.insert("finishes".into(), json!(id));
    }
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::ManifestHash {
        expected: manifest::manifest_hash(&working),
    });
    if dest.bookmark.is_none() {
        p.note("no bookmark at this revision: the working copy is read-only");
        return Ok(p);
    }
    let bookmark = dest.bookmark.clone().expect("checked above");
    let descriptors = repo.descriptors().await?;
    let forkable: Vec<(&String, &Manifest)> = manifests
        .iter()
        .filter(|(_, m)| {
            descriptors
                .get(&m.kind)
                .is_some_and(|d| Repo::capabilities(d, m).iter().any(|c| c == "FORK"))
        })
        .collect();
    if opts.keep {
        // Keep the working refs; only the baseline is refreshed (apply).
        p.note("--keep: working refs stay as they are; their baseline becomes this commit's");
        return Ok(p);
    }
    if trunk {
        for (k, m) in &forkable {
            let upstream = m
                .locator
                .get("branch")
                .and_then(Value::as_str)
                .unwrap_or("main")
                .to_string();
            p.push(
                Action::new(verb::TRUNK, *k)
                    .with_kind(&m.kind)
                    .with_target(upstream)
                    .with_detail("works on the upstream branch"),
            );
        }
        return Ok(p);
    }

    let name = ids::working_ref(repo.dataset_id(), &bookmark);
    let mut calls = Vec::new();
    for (k, m) in &forkable {
        if m.state.is_none() {
            continue;
        }
        let client = repo.client(m).await?;
        let name = name.clone();
        let adopt = opts.adopt;
        calls.push(((*k).clone(), async move {
            let scope = client.branch_scope().await?;
            let head = branch_head(&client, &name).await?;
            let mut generations = Vec::new();
            if adopt {
                let mut found: Vec<(u32, String)> = client
                    .list_working_refs()
                    .await?
                    .into_iter()
                    .filter_map(|r| generation_of(&r, &name).map(|g| (g, r)))
                    .collect();
                found.sort();
                generations = found.into_iter().map(|(_, r)| r).collect();
            }
            Ok::<_, BackendError>(Probe {
                scope,
                head,
                generations,
            })
        }));
    }
    let probes: BTreeMap<String, Probe> = fan_out(calls).await.into_result()?.into_iter().collect();
    let mut committed: Option<BTreeSet<(String, String)>> = None;
    // (kind, scope) -> (leader key, the leader's fork-point state)
    let mut scopes: BTreeMap<(String, String), (String, Value)> = BTreeMap::new();
    for (k, m) in &forkable {
        let Some((source, source_state)) = fork_source(m) else {
            if m.state.is_some() {
                p.push(
                    Action::new(verb::REFUSE, *k)
                        .with_kind(&m.kind)
                        .with_detail("its committed state is not recoverable, so there is nothing to fork from"),
                );
            } else {
                p.note(format!(
                    "{k}: not committed yet; it is read at the upstream head until its first commit"
                ));
            }
            continue;
        };
        let probe = &probes[*k];
        let store = Store::new(&m.kind, Value::Object(m.locator.clone()));
        let base = Action::new(verb::FORK, *k)
            .with_kind(&m.kind)
            .with_target(&name)
            .with_param("fork_point", source_state.clone())
            .with_param("source", source_param(&source));
        let scope_id = (m.kind.clone(), probe.scope.clone());
        if let Some((leader, leader_state)) = scopes.get(&scope_id) {
            let descriptor = &descriptors[&m.kind];
            let same = super::fork::content_of(&source_state, descriptor)
                == super::fork::content_of(leader_state, descriptor);
            p.push(if same {
                Action {
                    verb: verb::SHARE.into(),
                    ..base
                }
                .with_param("leader", json!(leader))
                .with_detail(format!("shares {leader}'s branch"))
            } else {
                Action {
                    verb: verb::REFUSE.into(),
                    ..base
                }
                .with_detail(format!(
                    "shares a branch with {leader}, but is pinned at another state of it; \
                     commit them together so they share one pin"
                ))
            });
            continue;
        }
        scopes.insert(scope_id, ((*k).clone(), source_state.clone()));
        let record = m.policy.pin == PinMode::Record;
        let fork_now = eager || (record && !defer_record);
        if opts.adopt
            && let Some(highest) = probe.generations.last()
        {
            p.require(Precondition::RefPresent {
                key: (*k).clone(),
                store: store.clone(),
                ref_name: highest.clone(),
            });
            let gen_note = if probe.generations.len() > 1 {
                format!(" (the highest of {} generations)", probe.generations.len())
            } else {
                String::new()
            };
            p.push(
                Action {
                    verb: verb::ADOPT.into(),
                    ..base
                }
                .with_target(highest)
                .with_detail(format!("takes {highest} as it is{gen_note}")),
            );
            continue;
        }
        let descriptor = &descriptors[&m.kind];
        let action = match &probe.head {
            None => {
                if fork_now {
                    p.require(Precondition::RefAbsent {
                        key: (*k).clone(),
                        store: store.clone(),
                        ref_name: name.clone(),
                    });
                    base.with_param("expected", expected_param(&None))
                        .with_detail(format!("from {}", describe_source(&source)))
                } else {
                    Action {
                        verb: verb::DEFER_FORK.into(),
                        ..base
                    }
                    .with_detail(format!(
                        "from {} on the first writable open",
                        describe_source(&source)
                    ))
                }
            }
            Some(head)
                if super::fork::content_of(head, descriptor)
                    == super::fork::content_of(&source_state, descriptor) =>
            {
                p.require(Precondition::RefHead {
                    key: (*k).clone(),
                    store: store.clone(),
                    ref_name: name.clone(),
                    expected: head.clone(),
                });
                Action {
                    verb: verb::REUSE.into(),
                    ..base
                }
                .with_detail("already at the pin")
            }
            Some(head) => {
                if committed.is_none() {
                    committed = Some(super::fork::committed_states(repo, &descriptors)?);
                }
                let was_committed = committed.as_ref().is_some_and(|set| {
                    set.contains(&((*k).clone(), super::fork::content_key(head, descriptor)))
                }) || ws.base_states.get(*k).is_some_and(|b| {
                    super::fork::content_of(&Value::Object(b.clone()), descriptor)
                        == super::fork::content_of(head, descriptor)
                });
                let own = ws.working_refs.get(*k) == Some(&name);
                if !was_committed && opts.shared && !opts.discard {
                    let client = repo.client(m).await?;
                    let descends = client
                        .ancestor_of(&source_state, head)
                        .await
                        .map_err(|e| TetherError::backend(k, e))?;
                    if descends == Some(true) {
                        p.require(Precondition::RefPresent {
                            key: (*k).clone(),
                            store: store.clone(),
                            ref_name: name.clone(),
                        });
                        p.require(Precondition::RefDescends {
                            key: (*k).clone(),
                            store: store.clone(),
                            ref_name: name.clone(),
                            expected: source_state.clone(),
                        });
                        p.push(
                            Action {
                                verb: verb::ADOPT.into(),
                                ..base
                            }
                            .with_detail(
                                "a peer's writes on the pin: taken as they are (--shared)",
                            ),
                        );
                        continue;
                    }
                }
                if !was_committed && !opts.discard {
                    let whose = if own {
                        "this workspace's own"
                    } else {
                        "not this workspace's: a peer's on this bookmark, or an earlier checkout's"
                    };
                    p.push(
                        Action {
                            verb: verb::REFUSE.into(),
                            ..base
                        }
                        .with_param("head", head.clone())
                        .with_detail(format!(
                            "{name} has writes since this workspace last committed ({}; {whose})",
                            crate::engine::commit::brief(head.as_object().unwrap_or(&Map::new()))
                        )),
                    );
                    continue;
                }
                p.require(Precondition::RefHead {
                    key: (*k).clone(),
                    store: store.clone(),
                    ref_name: name.clone(),
                    expected: head.clone(),
                });
                let how = if was_committed {
                    "reset onto"
                } else {
                    "reset (--discard) onto"
                };
                if fork_now {
                    base.with_param("expected", expected_param(&Some(head.clone())))
                        .with_param("reset_from", head.clone())
                        .with_detail(format!("{how} {}", describe_source(&source)))
                } else {
                    Action {
                        verb: verb::DEFER_FORK.into(),
                        ..base
                    }
                    .with_param("reset_from", head.clone())
                    .with_detail(format!(
                        "{how} {} on the first writable open",
                        describe_source(&source)
                    ))
                }
            }
        };
        p.push(action);
    }
    Ok(p)
}

/// `name` → 1, `name.N` → N; anything else is not a generation of `name`.
fn generation_of(candidate: &str, name: &str) -> Option<u32> {
    if candidate == name {
        return Some(1);
    }
    candidate
        .strip_prefix(name)?
        .strip_prefix('.')?
        .parse()
        .ok()
        .filter(|n| *n >= 2)
}

fn describe_source(source: &Target) -> String {
    match source {
        Target::Pinned(pin) => format!("pin {}", pin.ref_name),
        Target::Recorded(state) => format!(
            "recorded state {}",
            crate::engine::commit::brief(state.as_object().unwrap_or(&Map::new()))
        ),
        Target::WorkingRef(r) => format!("branch {r}"),
        Target::Base => "the upstream branch".into(),
    }
}

/// Apply a `new` plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<NewReport> {
    apply_as(repo, plan, None).await
}

/// Apply a `new` plan, journaled as a step of `parent` (a `drop`) when given.
pub async fn apply_as(repo: &Repo, plan: &Plan, parent: Option<&str>) -> Result<NewReport> {
    let refusals: Vec<String> = plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::REFUSE)
        .map(|a| format!("{}: {}", a.key, a.detail))
        .collect();
    if !refusals.is_empty() {
        let writes = plan
            .actions
            .iter()
            .any(|a| a.verb == verb::REFUSE && a.params.contains_key("head"));
        let advice = if writes {
            "commit them, or pass --discard to throw them away (--shared adopts a peer's branch as it is)"
        } else {
            "see `tether new --dry-run`"
        };
        return Err(TetherError::refused(format!(
            "refusing to reset working branches with unpinned writes: {}; {advice}",
            refusals.join("; ")
        )));
    }
    let locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let old_ws = repo.workspace()?;
    let head = repo.vcs.head_state()?;
    let bookmark = plan
        .context
        .get("bookmark")
        .and_then(Value::as_str)
        .map(str::to_string);
    let vcs = plan.context.get("vcs").cloned().unwrap_or(Value::Null);
    let keep = plan
        .context
        .get("keep")
        .and_then(Value::as_bool)
        .unwrap_or(false);

    let journal = repo.journal()?;
    let mut new_op = NewOp::new("new");
    if let Some(parent) = parent {
        new_op = new_op.parent(parent);
    }
    let mut op = journal.start(new_op.plan(plan).pre("workspace", old_ws.to_json()).pre(
        "vcs",
        json!({
            "branch": head.bookmark(),
            "parked": matches!(head, HeadState::Parked { .. }),
            "commit": head.commit().map(|c| c.to_string()),
        }),
    ))?;

    // The VCS first: a refused switch (local changes) leaves the stores alone.
    let mut report = NewReport {
        bookmark: bookmark.clone(),
        trunk: bookmark.as_deref() == Some(repo.config.trunk.as_str()),
        ..NewReport::default()
    };
    let commit = vcs.get("commit").and_then(Value::as_str).map(CommitId::new);
    match vcs.get("move").and_then(Value::as_str) {
        Some("create") => {
            let b = bookmark.as_deref().expect("create names a bookmark");
            let at = commit.clone().expect("create names a commit");
            repo.vcs.create_branch(b, &at)?;
            crate::fault::point("vcs.bookmark");
            op.progress(json!({"vcs": "created", "bookmark": b, "commit": at.to_string()}))?;
            repo.vcs.switch_branch(b)?;
            crate::fault::point("vcs.switch");
            op.progress(json!({"vcs": "switched", "bookmark": b}))?;
        }
        Some("switch") => {
            let b = bookmark.as_deref().expect("switch names a bookmark");
            repo.vcs.switch_branch(b)?;
            crate::fault::point("vcs.switch");
            op.progress(json!({"vcs": "switched", "bookmark": b}))?;
        }
        Some("park") => {
            let at = commit.clone().expect("park names a commit");
            let parked = repo.vcs.park(&at)?;
            crate::fault::point("vcs.switch");
            op.progress(json!({"vcs": "parked", "branch": parked}))?;
            report.parked = Some(parked);
        }
        _ => {}
    }

    let manifests = match &commit {
        Some(c) => repo.manifests_at(c)?,
        None => BTreeMap::new(),
    };
    let mut ws = old_ws.clone();
    ws.bookmark = bookmark.clone();
    if keep {
        // Same working refs; the baseline is this commit's states.
        for k in ws
            .working_refs
            .keys()
            .chain(ws.pending_forks.keys())
            .cloned()
            .collect::<Vec<_>>()
        {
            match manifests.get(&k).and_then(|m| m.state.clone()) {
                Some(s) => {
                    ws.base_states.insert(k, s);
                }
                None => {
                    ws.base_states.remove(&k);
                }
            }
        }
        report.working_refs = ws.working_refs.clone();
        report.pending_forks = ws.pending_forks.clone();
        report.warnings = retention_warnings(&repo.manifests()?, &ws);
        repo.save_workspace(&locks, &ws)?;
        finish(
            op,
            plan,
            json!({"summary": format!("kept the working refs on {}", bookmark.as_deref().unwrap_or("no bookmark")), "report": report}),
        )?;
        return Ok(report);
    }
    // `new` decides every fork again.
    ws.working_refs.clear();
    ws.pending_forks.clear();
    ws.pending_resets.clear();
    ws.fork_points.clear();
    ws.base_states.clear();
    ws.last_snapshot.clear();
    ws.last_snapshot_errors.clear();
    ws.last_upstream.clear();
    ws.last_snapshot_at = None;

    // Forks that write now, concurrently.
    let (forked, failures) = super::fork::apply_forks(repo, plan, &manifests, &mut op).await?;
    for (k, e) in failures {
        report.failed.insert(k, e.to_string());
    }

    let trunk = report.trunk;
    for a in &plan.actions {
        let k = a.key.clone();
        let fork_point = a
            .params
            .get("fork_point")
            .and_then(Value::as_object)
            .cloned();
        let state = manifests.get(&k).and_then(|m| m.state.clone());
        let how = match a.verb.as_str() {
            verb::FORK if forked.contains_key(&k) => {
                ws.working_refs.insert(k.clone(), forked[&k].clone());
                if a.params.contains_key("reset_from") {
                    SetUp::Reset
                } else {
                    SetUp::Forked
                }
            }
            verb::FORK => continue,
            verb::REUSE => {
                ws.working_refs.insert(k.clone(), a.target.clone());
                SetUp::Reused
            }
            verb::ADOPT => {
                ws.working_refs.insert(k.clone(), a.target.clone());
                report.adopted.insert(k.clone(), a.target.clone());
                SetUp::Adopted
            }
            verb::DEFER_FORK => {
                ws.pending_forks.insert(k.clone(), a.target.clone());
                if let Some(head) = a.params.get("reset_from").and_then(Value::as_object) {
                    ws.pending_resets.insert(k.clone(), head.clone());
                }
                SetUp::Deferred
            }
            verb::SHARE => {
                // Follows its leader: made, deferred, or failed with it.
                let leader = a.params.get("leader").and_then(Value::as_str).unwrap_or("");
                if let Some(made) = ws.working_refs.get(leader).or(forked.get(leader)) {
                    ws.working_refs.insert(k.clone(), made.clone());
                } else if ws.pending_forks.contains_key(leader)
                    || plan
                        .actions
                        .iter()
                        .any(|l| l.key == leader && l.verb == verb::DEFER_FORK)
                {
                    ws.pending_forks.insert(k.clone(), a.target.clone());
                } else {
                    continue;
                }
                SetUp::Shared
            }
            verb::TRUNK => {
                report.working_refs.insert(k.clone(), a.target.clone());
                report.how.insert(k.clone(), SetUp::Trunk);
                continue;
            }
            _ => continue,
        };
        report.how.insert(k.clone(), how);
        if let Some(fp) = fork_point {
            report
                .fork_points
                .insert(k.clone(), Value::Object(fp.clone()));
            ws.fork_points.insert(k.clone(), fp);
        }
        if let Some(s) = state
            && !trunk
        {
            ws.base_states.insert(k, s);
        }
    }
    // Shares whose leader was deferred but listed after them.
    for a in plan.actions.iter().filter(|a| a.verb == verb::SHARE) {
        let leader = a.params.get("leader").and_then(Value::as_str).unwrap_or("");
        if ws.pending_forks.contains_key(leader) && !ws.working_refs.contains_key(&a.key) {
            ws.pending_forks.insert(a.key.clone(), a.target.clone());
        }
    }
    for (k, r) in &ws.working_refs {
        report.working_refs.insert(k.clone(), r.clone());
    }
    report.pending_forks = ws.pending_forks.clone();
    report.warnings = retention_warnings(&repo.manifests()?, &ws);
    repo.save_workspace(&locks, &ws)?;
    let summary = match (&bookmark, forked.is_empty()) {
        (None, _) => "read-only".to_string(),
        (Some(b), true) => format!("on {b}"),
        (Some(b), false) => format!(
            "on {b}: forked {}",
            forked.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    finish(
        op,
        plan,
        json!({"summary": summary, "report": report, "failed": report.failed}),
    )?;
    Ok(report)
}
