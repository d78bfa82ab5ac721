//! `tether gc [--dry-run | --no-dry-run] [--release-foreign]
//! [--prune-bookmarks [--keep-bookmark NAME]... [--force-prune]]`: release
//! what history no longer names (spec/07, "Lever 3").
//!
//! The reference set: every manifest in visible history, the working tree of
//! every live checkout, and every operation that started and never finished.
//! A plain gc
//! - releases pins of this dataset that nothing references and that this
//!   clone created (`tether-pinned.jsonl`, seeded from the op logs by the
//!   first gc); any other unreferenced pin is a `keep-pin` unless
//!   `--release-foreign`;
//! - forgets the working refs of objects `tether remove` took away (their
//!   branches stay);
//! - deletes listings no manifest names;
//! - never deletes a branch. `--prune-bookmarks` judges the `tether.ws.*`
//!   branches no live bookmark or checkout uses, by their head (the verdict
//!   table of spec/07), `--force-prune` deleting those with unpinned writes.
//!
//! Other datasets' refs are counted in the notes and never touched. The plan
//! binds to the checkout and to every visible commit (`history_digest`).
//! `drop` plans its store half through [`plan_with`], as if the commits it
//! abandons were gone, with its own rule for branches whose head a dropped
//! commit pinned.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Value, json};

use super::checker::Checker;
use super::checkouts::{self, Checkout};
use super::error::{Result, TetherError};
use super::fork::content_key;
use super::repo::Repo;
use crate::model::{Manifest, PinMode, canonical, ids, listing, time};
use crate::oplog::{NewOp, index};
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{BackendError, Descriptor, PinRef, fan_out};
use crate::vcs::CommitId;

#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    pub release_foreign: bool,
    pub prune_bookmarks: bool,
    pub keep_bookmarks: Vec<String>,
    pub force_prune: bool,
    /// `--delete-stores` (experimental): stores this dataset created.
    pub delete_stores: bool,
    /// `--store KIND=LOCATOR`: a created store to judge by its marker alone.
    pub stores: Vec<(String, String)>,
}

/// What `drop` adds to a gc plan: commits to count as gone, and the states
/// they pinned (a branch whose head is one of them is deleted by name).
#[derive(Debug, Clone, Default)]
pub struct Without {
    pub commits: BTreeSet<String>,
    /// The bookmark being dropped: its branches are judged, not kept.
    pub bookmark: Option<String>,
    /// This checkout is about to leave the bookmark: its working tree (the
    /// bookmark's manifests) is no reference in the preview.
    pub leaving: bool,
}

/// The `--json` shape after applying (spec/09).
#[derive(Debug, Clone, Serialize, Default)]
pub struct GcReport {
    pub dry_run: bool,
    pub unpinned: BTreeMap<String, Vec<String>>,
    /// Pins the plan unpins that their store no longer had (a plan applied
    /// twice): nothing was done to them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub already_released: BTreeMap<String, Vec<String>>,
    pub kept_pins: BTreeMap<String, Vec<String>>,
    pub deleted_working_refs: BTreeMap<String, Vec<String>>,
    pub kept_working_refs: BTreeMap<String, Vec<String>>,
    pub forgotten_working_refs: BTreeMap<String, Vec<String>>,
    pub deleted_listings: Vec<String>,
    pub deleted_stores: BTreeMap<String, String>,
    pub kept_stores: BTreeMap<String, String>,
    pub forgotten_stores: Vec<String>,
    pub failed: BTreeMap<String, String>,
}

impl GcReport {
    pub fn applied_anything(&self) -> bool {
        !self.unpinned.is_empty()
            || !self.deleted_working_refs.is_empty()
            || !self.forgotten_working_refs.is_empty()
            || !self.deleted_listings.is_empty()
            || !self.deleted_stores.is_empty()
    }
}

/// One store the references name: where it is and which keys name it.
struct StoreRef {
    kind: String,
    identity: Value,
    locator: Value,
    keys: BTreeSet<String>,
    /// Whether a working tree of a live checkout names it now.
    current: bool,
    /// Whether a manifest that survives (not only a dropped commit's) names it.
    named: bool,
}

/// Everything the reference set names.
struct References {
    pins: BTreeSet<String>,
    /// Content keys of states a native pin holds, per store.
    pinned_states: BTreeMap<String, BTreeSet<String>>,
    /// Content keys of `pin = "record"` states, per store.
    recorded_states: BTreeMap<String, BTreeSet<String>>,
    /// Content keys of states only the dropped commits pinned, per store.
    dropped_states: BTreeMap<String, BTreeSet<String>>,
    listings: BTreeSet<String>,
    stores: BTreeMap<String, StoreRef>,
    notes: Vec<String>,
}

fn store_id(kind: &str, identity: &Value) -> String {
    format!("{kind}|{}", canonical::to_string(identity))
}

/// Collect the reference set, resolving each distinct locator's identity once.
async fn references(
    repo: &Repo,
    checkouts: &[Checkout],
    without: &Without,
    descriptors: &BTreeMap<String, Descriptor>,
) -> Result<References> {
    // (key, manifest, in a live working tree, only in dropped commits)
    let mut sources: Vec<(String, Manifest, bool, bool)> = Vec::new();
    for (commit, manifests) in super::history::history_manifests(repo)? {
        let dropped = without.commits.contains(commit.as_str());
        for (k, m) in manifests.iter() {
            sources.push((k.clone(), Manifest::clone(m), false, dropped));
        }
    }
    // Dropped commits the history walk no longer sees (`drop` deleted the
    // bookmark first): their states still decide drop's own branch rule.
    let seen: BTreeSet<String> = sources_commits(repo)?;
    for c in &without.commits {
        if !seen.contains(c) {
            // Every side of a conflicted one: each is a state it recorded.
            for set in super::history::manifest_sets_at(repo, &CommitId::new(c.clone()))? {
                for (k, m) in set.iter() {
                    sources.push((k.clone(), Manifest::clone(m), false, true));
                }
            }
        }
    }
    for c in checkouts.iter().filter(|c| !(c.current && without.leaving)) {
        for (k, m) in &c.manifests {
            sources.push((k.clone(), m.clone(), true, false));
        }
    }
    let mut pins = BTreeSet::new();
    for c in checkouts {
        for op in &c.unfinished {
            // Only the pins it set out to create (an unfinished drop's planned
            // unpins are not references).
            for a in op.planned_actions() {
                let op = a.get("op").and_then(Value::as_str).unwrap_or_default();
                if !matches!(op, verb::PIN | verb::REPIN) {
                    continue;
                }
                if let Some(id) = a.pointer("/params/pin_id").and_then(Value::as_str) {
                    pins.insert(id.to_string());
                }
            }
        }
    }
    // Identities, once per distinct (kind, locator).
    let mut distinct: BTreeMap<String, (String, Value)> = BTreeMap::new();
    let mut notes = Vec::new();
    for (_, m, _, _) in &sources {
        let loc = Value::Object(m.locator.clone());
        distinct
            .entry(format!("{}|{}", m.kind, canonical::to_string(&loc)))
            .or_insert((m.kind.clone(), loc));
    }
    let mut calls = Vec::new();
    let mut unknown_kinds = BTreeSet::new();
    for (id, (kind, loc)) in &distinct {
        if !descriptors.contains_key(kind) {
            unknown_kinds.insert(kind.clone());
            continue;
        }
        let plugin = repo.plugin(kind).await?;
        let client = repo.client_for(&plugin, loc);
        calls.push((id.clone(), async move { client.identity().await }));
    }
    for kind in unknown_kinds {
        notes.push(format!(
            "manifests of kind {kind} (no backend in this tether) are skipped; their pins still count as references"
        ));
    }
    let identities: BTreeMap<String, Value> =
        fan_out(calls).await.into_result()?.into_iter().collect();

    let mut refs = References {
        pins,
        pinned_states: BTreeMap::new(),
        recorded_states: BTreeMap::new(),
        dropped_states: BTreeMap::new(),
        listings: BTreeSet::new(),
        stores: BTreeMap::new(),
        notes,
    };
    for (key, m, current, dropped) in sources {
        let loc = Value::Object(m.locator.clone());
        let lid = format!("{}|{}", m.kind, canonical::to_string(&loc));
        let Some(identity) = identities.get(&lid) else {
            // An unknown kind: its pins still count.
            if let Some(p) = &m.pin
                && !dropped
            {
                refs.pins.insert(p.id.clone());
            }
            continue;
        };
        let sid = store_id(&m.kind, identity);
        let entry = refs.stores.entry(sid.clone()).or_insert_with(|| StoreRef {
            kind: m.kind.clone(),
            identity: identity.clone(),
            locator: loc.clone(),
            keys: BTreeSet::new(),
            current: false,
            named: false,
        });
        entry.keys.insert(key.clone());
        if !dropped {
            entry.named = true;
        }
        if current {
            // The newest spelling of the store: a working tree's.
            entry.locator = loc.clone();
            entry.current = true;
        }
        let Some(state) = &m.state else { continue };
        let d = &descriptors[&m.kind];
        let ck = content_key(&Value::Object(state.clone()), d);
        if dropped {
            if m.pin.is_some() || m.policy.pin == PinMode::Record {
                refs.dropped_states.entry(sid).or_default().insert(ck);
            }
            continue;
        }
        if let Some(p) = &m.pin {
            refs.pins.insert(p.id.clone());
            refs.pinned_states
                .entry(sid.clone())
                .or_default()
                .insert(ck.clone());
        } else if m.policy.pin == PinMode::Record {
            refs.recorded_states
                .entry(sid.clone())
                .or_default()
                .insert(ck.clone());
        }
        refs.listings.insert(ids::listing_name(
            &m.kind,
            identity,
            &Value::Object(super::repo::content(state, d)),
        ));
    }
    Ok(refs)
}

/// The ids of every visible commit.
fn sources_commits(repo: &Repo) -> Result<BTreeSet<String>> {
    let prefix = repo.vcs_path(&repo.layout.objects_dir());
    let mut out = BTreeSet::new();
    for c in repo.vcs.history(&prefix)? {
        out.insert(c?.id.to_string());
    }
    Ok(out)
}

/// Seed `tether-pinned.jsonl` from every live checkout's op log the first
/// time gc runs: the pins each operation reported as created.
fn seed_pinned(repo: &Repo, checkouts: &[Checkout]) -> Result<()> {
    if index::pinned_seeded(repo.vcs.shared_dir()) {
        return Ok(());
    }
    let mut pins = Vec::new();
    for c in checkouts {
        let journal = crate::oplog::Journal::open(c.root.join(".tether").join("ops.jsonl"));
        for op in journal.entries()? {
            for p in &op.progress {
                if p.get("created").and_then(Value::as_bool) != Some(true) {
                    continue;
                }
                let (Some(key), Some(r)) = (
                    p.get("pinned").and_then(Value::as_str),
                    p.get("ref").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let Some(parsed) = ids::parse_pin_ref(r) else {
                    continue;
                };
                let kind = op
                    .planned_actions()
                    .iter()
                    .find(|a| a.get("key").and_then(Value::as_str) == Some(key))
                    .and_then(|a| a.get("kind").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_string();
                pins.push(index::PinnedPin {
                    dataset_id: parsed.dataset_id.clone(),
                    pin_id: parsed.pin_id(),
                    kind,
                    key: key.to_string(),
                    identity: Value::Null,
                    ref_name: Some(r.to_string()),
                    at: time::now_timestamp(),
                });
            }
        }
    }
    index::append_pinned(repo.vcs.shared_dir(), &pins)?;
    Ok(())
}

/// What one store holds of tether's.
struct Inventory {
    pins: Vec<String>,
    branches: Vec<(String, Option<Value>, Option<String>)>,
    base: Option<Value>,
}

/// Decide what gc would do.
pub async fn plan(repo: &Repo, opts: &GcOptions) -> Result<Plan> {
    plan_with(repo, opts, &Without::default()).await
}

/// Refuse while the VCS holds a conflicted bookmark (jj, after concurrent
/// moves): which commits are reachable, and so which pins are in use, is not
/// settled until the user picks the bookmark's target.
pub(crate) fn refuse_conflicted_bookmarks(repo: &Repo, command: &str) -> Result<()> {
    // A conflicted manifest no later commit resolved is several answers to
    // what the dataset references.
    let prefix = repo.vcs_path(&repo.layout.dot_dir());
    if let Some((commit, paths)) = repo.vcs.unresolved_conflicts(&prefix)?.first() {
        return Err(TetherError::refused(format!(
            "refusing to {command}: commit {} has a conflict in the dataset's files ({}) that no \
             later commit resolved, so what the dataset references is not settled",
            commit.short12(),
            paths.join(", ")
        ))
        .hint(format!(
            "resolve it first (`jj resolve`, or edit the files and `tether commit`), then run \
             `tether {command}` again"
        )));
    }
    let conflicted = repo.vcs.conflicted_bookmarks()?;
    let Some(first) = conflicted.first() else {
        return Ok(());
    };
    let (noun, is) = match conflicted.len() {
        1 => ("bookmark", "is"),
        _ => ("bookmarks", "are"),
    };
    Err(TetherError::refused(format!(
        "refusing to {command}: {noun} {} {is} conflicted in the VCS (moved concurrently), so \
         which commits stay reachable is not settled",
        conflicted.join(", ")
    ))
    .hint(format!(
        "resolve it first (`jj bookmark set {first} -r REV`), then run `tether {command}` again"
    )))
}

/// A gc plan as if `without.commits` were gone (`drop`'s preview).
pub async fn plan_with(repo: &Repo, opts: &GcOptions, without: &Without) -> Result<Plan> {
    refuse_conflicted_bookmarks(repo, "gc")?;
    let ws = repo.workspace_for_plan()?;
    let checkouts = checkouts::live(repo)?;
    seed_pinned(repo, &checkouts)?;
    let descriptors = repo.descriptors().await?;
    let refs = references(repo, &checkouts, without, &descriptors).await?;
    let dataset = repo.dataset_id().to_string();
    let ours: BTreeSet<String> = index::read_pinned(repo.vcs.shared_dir(), &dataset)?
        .into_iter()
        .map(|p| p.pin_id)
        .collect();

    let mut p = Plan::new("gc");
    p.context
        .insert("release_foreign".into(), json!(opts.release_foreign));
    p.context
        .insert("prune_bookmarks".into(), json!(opts.prune_bookmarks));
    p.context
        .insert("force_prune".into(), json!(opts.force_prune));
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::HistoryDigest {
        expected: repo.vcs.history_digest()?,
    });
    for n in &refs.notes {
        p.note(n.clone());
    }

    // Live bookmarks: the VCS's, every live checkout's, and --keep-bookmark.
    let mut live: BTreeSet<String> = repo
        .vcs
        .branches()?
        .into_iter()
        .filter(|b| !b.parking)
        .map(|b| b.name)
        .collect();
    for c in &checkouts {
        if let Some(b) = c.workspace.as_ref().and_then(|w| w.bookmark.clone()) {
            live.insert(b);
        }
    }
    live.extend(opts.keep_bookmarks.iter().cloned());
    if let Some(b) = &without.bookmark {
        live.remove(b);
    }
    let live_slugs: BTreeSet<String> = live.iter().map(|b| ids::bookmark_slug(b)).collect();
    // Branches a live checkout works through; a dropped bookmark's are judged.
    let in_use: BTreeSet<String> = checkouts
        .iter()
        .filter_map(|c| c.workspace.as_ref())
        .flat_map(|w| w.working_refs.values().chain(w.pending_forks.values()))
        .filter(|r| {
            without
                .bookmark
                .as_ref()
                .is_none_or(|b| !ids::working_ref_is_for(r, &dataset, b))
        })
        .cloned()
        .collect();

    // Stores no manifest names any more that `--delete-stores` looks at:
    // the ones this clone created or touched, and `--store KIND=LOCATOR`.
    let mut refs = refs;
    let mut candidates: BTreeMap<String, Candidate> = BTreeMap::new();
    if opts.delete_stores || !opts.stores.is_empty() {
        candidates = store_candidates(repo, opts, &descriptors).await?;
        for (sid, c) in &candidates {
            refs.stores.entry(sid.clone()).or_insert_with(|| StoreRef {
                kind: c.kind.clone(),
                identity: c.identity.clone(),
                locator: c.locator.clone(),
                keys: [c.key.clone()].into_iter().collect(),
                current: false,
                named: false,
            });
        }
    }

    // Inventory every store, concurrently.
    let prune = opts.prune_bookmarks || without.bookmark.is_some();
    let mut calls = Vec::new();
    for (sid, s) in &refs.stores {
        let d = &descriptors[&s.kind];
        let plugin = repo.plugin(&s.kind).await?;
        let client = repo.client_for(&plugin, &s.locator);
        let pins_too = d.has("PIN");
        let branches_too = (prune || candidates.contains_key(sid)) && d.has("FORK");
        calls.push((sid.clone(), async move {
            let pins = if pins_too {
                client.list_pins().await?
            } else {
                Vec::new()
            };
            let mut branches = Vec::new();
            let mut base = None;
            if branches_too {
                for r in client.list_working_refs().await? {
                    let head = super::fork::branch_head(&client, &r).await?;
                    let blocker = client.working_ref_blockers(&r).await?;
                    branches.push((r, head, blocker));
                }
                base = Some(client.fingerprint(None).await?);
            }
            Ok::<_, BackendError>(Inventory {
                pins,
                branches,
                base,
            })
        }));
    }
    let mut inventories = BTreeMap::new();
    for (sid, r) in fan_out(calls).await.results {
        match r {
            Ok(inv) => {
                inventories.insert(sid, inv);
            }
            Err(e) => {
                let s = &refs.stores[&sid];
                p.note(format!(
                    "{} [{}]: could not be listed ({e}); nothing in it is released",
                    display_key(s),
                    s.kind
                ));
            }
        }
    }

    let judge = Judge {
        dataset: &dataset,
        refs: &refs,
        ours: &ours,
        live_slugs: &live_slugs,
        in_use: &in_use,
        opts,
        without,
    };
    for (sid, inv) in &inventories {
        let s = &refs.stores[sid];
        let d = &descriptors[&s.kind];
        // A created store's branches are judged even without --prune-bookmarks:
        // they decide whether the store can go.
        let judge_branches = prune || (candidates.contains_key(sid) && !s.named);
        judge.store(&mut p, sid, s, inv, d, judge_branches);
    }
    for (sid, c) in &candidates {
        let Some(inv) = inventories.get(sid) else {
            continue;
        };
        let s = &refs.stores[sid];
        judge_candidate(repo, &mut p, sid, s, c, inv, &judge, &descriptors[&s.kind]).await?;
    }
    if prune {
        p.note(format!(
            "keeping live bookmarks: {}",
            live.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }

    // Working refs of removed objects.
    let current = repo.manifests()?;
    for (k, r) in ws.working_refs.iter().chain(ws.pending_forks.iter()) {
        if !current.contains_key(k) {
            p.push(
                Action::new(verb::FORGET_WORKING_REF, k)
                    .with_target(r)
                    .with_detail("its object was removed; the branch stays"),
            );
        }
    }
    // Listings no manifest names.
    for name in listing::list_listings(&repo.layout.listings_dir())? {
        if !refs.listings.contains(&name) {
            p.push(
                Action::new(verb::DELETE_LISTING, "")
                    .with_target(&name)
                    .with_detail("unreferenced"),
            );
        }
    }
    Ok(p)
}

/// What every per-store verdict reads.
struct Judge<'a> {
    dataset: &'a str,
    refs: &'a References,
    ours: &'a BTreeSet<String>,
    live_slugs: &'a BTreeSet<String>,
    in_use: &'a BTreeSet<String>,
    opts: &'a GcOptions,
    without: &'a Without,
}

impl Judge<'_> {
    /// The unpin / keep-pin verdicts for a store's pins, and (with
    /// `branches`) the delete-branch / keep-branch verdicts of spec/07's table
    /// for its `tether.ws.*` branches. Every action carries `params.store`.
    fn store(
        &self,
        p: &mut Plan,
        sid: &str,
        s: &StoreRef,
        inv: &Inventory,
        d: &Descriptor,
        branches: bool,
    ) {
        let key = display_key(s);
        let store = Store::new(&s.kind, s.locator.clone());
        let mut foreign = 0usize;
        for name in &inv.pins {
            let full = format!("{}{name}", ids::REF_PREFIX);
            let Some(parsed) = ids::parse_pin_ref(&full) else {
                continue;
            };
            if parsed.dataset_id != self.dataset {
                foreign += 1;
                continue;
            }
            let pin_id = parsed.pin_id();
            if self.refs.pins.contains(&pin_id) {
                continue;
            }
            let base = Action::new(verb::UNPIN, &key)
                .with_kind(&s.kind)
                .with_target(&full)
                .with_param("locator", s.locator.clone())
                .with_param("store", json!(sid))
                .with_param("pin_id", json!(pin_id));
            let why = "no manifest in history references it";
            p.push(if self.ours.contains(&pin_id) {
                base.with_detail(why)
            } else if self.opts.release_foreign {
                base.with_detail(format!("{why}; not created by this clone"))
            } else {
                Action {
                    verb: verb::KEEP_PIN.into(),
                    ..base
                }
                .with_detail(format!(
                    "{why}; not created by this clone -- another clone's commits may name it \
                     (fetch them, or --release-foreign)"
                ))
            });
        }
        for (r, head, blocker) in inv.branches.iter().filter(|_| branches) {
            let Some(parsed) = ids::parse_working_ref(r) else {
                continue;
            };
            if parsed.dataset_id() != self.dataset {
                foreign += 1;
                continue;
            }
            let gone = match &parsed {
                ids::WorkingRef::Bookmark { slug, .. } => {
                    let live_here = self.live_slugs.contains(slug) && s.current;
                    if live_here || self.in_use.contains(r) {
                        continue;
                    }
                    if self.live_slugs.contains(slug) {
                        format!("bookmark's branch that no current object uses ({slug})")
                    } else {
                        format!("bookmark {slug} (gone)")
                    }
                }
                ids::WorkingRef::Legacy { workspace, .. } => {
                    format!("legacy branch of workspace {workspace}")
                }
            };
            let Some(head) = head else { continue };
            let ck = content_key(head, d);
            let has = |set: &BTreeMap<String, BTreeSet<String>>| {
                set.get(sid).is_some_and(|states| states.contains(&ck))
            };
            let base_ck = inv.base.as_ref().map(|b| content_key(b, d));
            let verdict: std::result::Result<&str, String> = if let Some(b) = blocker {
                Err(format!("cannot be deleted: {b}"))
            } else if base_ck.as_deref() == Some(ck.as_str()) {
                Ok("nothing was ever written")
            } else if has(&self.refs.pinned_states) {
                Ok("head is pinned")
            } else if self.without.bookmark.is_some() && has(&self.refs.dropped_states) {
                Ok("head is a state a dropped commit pinned")
            } else if d.has("BRANCH_IS_STORAGE") {
                Err("branch is storage; deleting reclaims its data".into())
            } else if has(&self.refs.recorded_states) {
                Err("a --pin record state (only this branch keeps it reachable)".into())
            } else {
                Err(format!(
                    "has unpinned writes ({})",
                    super::commit::brief(head.as_object().unwrap_or(&Default::default()))
                ))
            };
            let action = Action::new(verb::DELETE_BRANCH, &key)
                .with_kind(&s.kind)
                .with_target(r)
                .with_param("locator", s.locator.clone())
                .with_param("store", json!(sid))
                .with_param("head", head.clone());
            let action = match verdict {
                Ok(why) => action.with_detail(format!("{gone}; {why}")),
                Err(why) if self.opts.force_prune && !why.starts_with("cannot") => {
                    action.with_detail(format!("{gone}; FORCED although it {why} (data lost)"))
                }
                Err(why) => Action {
                    verb: verb::KEEP_BRANCH.into(),
                    ..action
                }
                .with_detail(format!("{gone}; kept: {why} (--force-prune deletes)")),
            };
            if action.verb == verb::DELETE_BRANCH {
                p.require(Precondition::RefHead {
                    key: key.clone(),
                    store: store.clone(),
                    ref_name: r.clone(),
                    expected: head.clone(),
                });
            }
            p.push(action);
        }
        if foreign > 0 {
            p.note(format!(
                "{key}: {foreign} ref(s) of other datasets left alone"
            ));
        }
    }
}

/// A store `--delete-stores` considers: one this clone created or touched,
/// or one named with `--store`.
struct Candidate {
    kind: String,
    identity: Value,
    locator: Value,
    key: String,
    /// In `tether-created.jsonl`, with the bookmark it was made on.
    created: Option<Option<String>>,
    touched: bool,
    /// Named on the command line: a store with no marker is refused.
    named: bool,
}

async fn store_candidates(
    repo: &Repo,
    opts: &GcOptions,
    descriptors: &BTreeMap<String, Descriptor>,
) -> Result<BTreeMap<String, Candidate>> {
    let dataset = repo.dataset_id();
    let mut out: BTreeMap<String, Candidate> = BTreeMap::new();
    if opts.delete_stores {
        for c in index::read_created(repo.vcs.shared_dir(), Some(dataset))? {
            out.insert(
                store_id(&c.kind, &c.identity),
                Candidate {
                    kind: c.kind,
                    identity: c.identity,
                    locator: c.locator,
                    key: c.key,
                    created: Some(c.bookmark),
                    touched: false,
                    named: false,
                },
            );
        }
        for t in index::read_touched(repo.vcs.shared_dir(), Some(dataset))? {
            out.entry(store_id(&t.kind, &t.identity))
                .and_modify(|c| c.touched = true)
                .or_insert(Candidate {
                    kind: t.kind,
                    identity: t.identity,
                    locator: t.locator,
                    key: t.key,
                    created: None,
                    touched: true,
                    named: false,
                });
        }
    }
    for (kind, uri) in &opts.stores {
        let d = descriptors.get(kind).ok_or_else(|| {
            TetherError::unknown_kind(kind, descriptors.keys().map(String::as_str))
        })?;
        let field = d
            .storage_keys
            .first()
            .or(d.local_path_keys.first())
            .cloned()
            .unwrap_or_else(|| "uri".into());
        let locator = json!({ field: uri });
        let plugin = repo.plugin(kind).await?;
        let identity = repo
            .client_for(&plugin, &locator)
            .identity()
            .await
            .map_err(|e| TetherError::backend(uri, e))?;
        let sid = store_id(kind, &identity);
        let entry = out.entry(sid).or_insert(Candidate {
            kind: kind.clone(),
            identity,
            locator,
            key: uri.clone(),
            created: None,
            touched: false,
            named: true,
        });
        entry.named = true;
    }
    Ok(out)
}

/// spec/07's five rules for one created store: delete-store only when its
/// marker names this dataset, nothing names it, every ref of ours in it is
/// accounted for and released by this plan, and the backend says nothing
/// else remains; otherwise keep-store (or forget-store / forget-touched).
#[allow(clippy::too_many_arguments)]
async fn judge_candidate(
    repo: &Repo,
    p: &mut Plan,
    sid: &str,
    s: &StoreRef,
    c: &Candidate,
    inv: &Inventory,
    judge: &Judge<'_>,
    d: &Descriptor,
) -> Result<()> {
    let plugin = repo.plugin(&c.kind).await?;
    let client = repo.client_for(&plugin, &c.locator);
    let key = display_key(s);
    let base = |verb: &str| {
        Action::new(verb, &key)
            .with_kind(&c.kind)
            .with_target(canonical::to_string(&c.identity))
            .with_param("locator", c.locator.clone())
            .with_param("identity", c.identity.clone())
            .with_param("store", json!(sid))
    };
    // What this plan already releases in the store.
    let released: Vec<String> = p
        .actions
        .iter()
        .filter(|a| {
            a.params.get("store").and_then(Value::as_str) == Some(sid)
                && matches!(a.verb.as_str(), verb::UNPIN | verb::DELETE_BRANCH)
        })
        .map(|a| a.target.clone())
        .collect();
    let ours_left = inv.pins.iter().any(|n| {
        ids::parse_pin_ref(&format!("{}{n}", ids::REF_PREFIX))
            .is_some_and(|pr| pr.dataset_id == judge.dataset)
    }) || inv.branches.iter().any(|(r, _, _)| {
        ids::parse_working_ref(r).is_some_and(|w| w.dataset_id() == judge.dataset)
    });
    let all_released = |names: &[String]| {
        let pins_done = inv.pins.iter().all(|n| {
            let full = format!("{}{n}", ids::REF_PREFIX);
            match ids::parse_pin_ref(&full) {
                Some(pr) if pr.dataset_id == judge.dataset => names.contains(&full),
                _ => true,
            }
        });
        let branches_done = inv
            .branches
            .iter()
            .all(|(r, _, _)| match ids::parse_working_ref(r) {
                Some(w) if w.dataset_id() == judge.dataset => names.contains(r),
                _ => true,
            });
        pins_done && branches_done
    };
    if c.touched && c.created.is_none() && !c.named {
        if !ours_left || all_released(&released) {
            p.push(
                base(verb::FORGET_TOUCHED).with_detail("nothing of this dataset's is left in it"),
            );
        }
        return Ok(());
    }
    if !d.has("CREATE") {
        p.note(format!(
            "{key}: the {} backend cannot delete a store",
            c.kind
        ));
        return Ok(());
    }
    let owner = match client.owner().await {
        Ok(o) => o,
        Err(e) => {
            p.push(
                base(verb::KEEP_STORE).with_detail(format!("cannot tell its owner ({e}): kept")),
            );
            return Ok(());
        }
    };
    match owner.as_deref() {
        None if c.named => {
            p.note(format!(
                "{key}: refused: it has no owner marker, so tether did not create it"
            ));
            return Ok(());
        }
        None => {
            p.push(
                base(verb::FORGET_STORE)
                    .with_detail("no owner marker in it: only dropped from tether-created.jsonl"),
            );
            return Ok(());
        }
        Some(o) if o != judge.dataset => {
            p.note(format!(
                "{key}: its owner marker names dataset {o}; left alone"
            ));
            return Ok(());
        }
        Some(_) => {}
    }
    // Rule 2: no manifest names it.
    if s.named {
        p.push(
            base(verb::KEEP_STORE)
                .with_detail("a manifest in history or a live working tree names it"),
        );
        return Ok(());
    }
    // Rule 3: every ref of ours in it is one this clone can account for.
    if !judge.opts.force_prune {
        let created_on = c.created.clone().flatten().map(|b| ids::bookmark_slug(&b));
        let mut strangers = Vec::new();
        for n in &inv.pins {
            let full = format!("{}{n}", ids::REF_PREFIX);
            if let Some(pr) = ids::parse_pin_ref(&full)
                && pr.dataset_id == judge.dataset
                && !judge.ours.contains(&pr.pin_id())
            {
                strangers.push(full);
            }
        }
        for (r, _, _) in &inv.branches {
            if let Some(ids::WorkingRef::Bookmark {
                dataset_id, slug, ..
            }) = ids::parse_working_ref(r)
                && dataset_id == judge.dataset
                && created_on.as_deref() != Some(slug.as_str())
                && !judge.live_slugs.contains(&slug)
                && !judge.in_use.contains(r)
            {
                strangers.push(r.clone());
            }
        }
        if !strangers.is_empty() {
            p.push(base(verb::KEEP_STORE).with_detail(format!(
                "refs this clone cannot account for ({}): another clone may be at work in it \
                 (--force-prune overrides)",
                strangers.join(", ")
            )));
            return Ok(());
        }
    }
    // Rule 4: everything of ours in it goes in this plan.
    if !all_released(&released) {
        p.push(base(verb::KEEP_STORE).with_detail(
            "refs of this dataset in it stay (a kept branch or pin; --prune-bookmarks / \
             --force-prune release them)",
        ));
        return Ok(());
    }
    // Rule 5: the backend confirms nothing else remains.
    match client.is_ref_empty(&released).await {
        Ok(Some(true)) => {
            p.require(Precondition::StoreEmpty {
                key: Some(key.clone()),
                store: Store::new(&c.kind, c.locator.clone()),
                ignore: released.clone(),
            });
            p.push(
                base(verb::DELETE_STORE)
                    .with_detail("created by this dataset; nothing else remains"),
            );
        }
        Ok(_) => {
            p.push(base(verb::KEEP_STORE).with_detail(
                "something else remains in it (writes on its base branch, foreign refs, files)",
            ));
        }
        Err(e) => {
            p.push(
                base(verb::KEEP_STORE)
                    .with_detail(format!("cannot tell whether it is empty ({e})")),
            );
        }
    }
    Ok(())
}

fn display_key(s: &StoreRef) -> String {
    s.keys
        .iter()
        .next()
        .cloned()
        .unwrap_or_else(|| canonical::to_string(&s.identity))
}

/// Apply a gc plan (fresh, or loaded with `--from-plan`).
pub async fn apply(repo: &Repo, plan: &Plan) -> Result<GcReport> {
    apply_as(repo, plan, None).await
}

/// Apply a gc plan, journaled as a step of `parent` (a `drop`) when given.
pub async fn apply_as(repo: &Repo, plan: &Plan, parent: Option<&str>) -> Result<GcReport> {
    let locks = repo.lock()?;
    plan.check_all(&mut Checker { repo })?;
    let mut report = GcReport::default();
    for a in &plan.actions {
        match a.verb.as_str() {
            verb::KEEP_PIN => report
                .kept_pins
                .entry(a.kind.clone())
                .or_default()
                .push(pin_id_of(a)),
            verb::KEEP_BRANCH => report
                .kept_working_refs
                .entry(a.key.clone())
                .or_default()
                .push(a.target.clone()),
            _ => {}
        }
    }
    if plan.is_empty() {
        return Ok(report);
    }
    let mut ws = repo.workspace()?;
    let forgotten: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::FORGET_WORKING_REF)
        .collect();
    let listings: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::DELETE_LISTING)
        .collect();
    let mut saved_listings = serde_json::Map::new();
    for a in &listings {
        if let Some(text) = listing::read_listing(&repo.layout.listings_dir(), &a.target)? {
            saved_listings.insert(a.target.clone(), json!(text));
        }
    }
    let mut new_op = NewOp::new("gc")
        .plan(plan)
        .pre(
            "working_refs",
            json!(
                forgotten
                    .iter()
                    .map(|a| (
                        a.key.clone(),
                        json!({
                            "ref": a.target,
                            "pending": ws.pending_forks.get(&a.key) == Some(&a.target),
                            // What `undo gc` needs to make the ref usable again.
                            "fork_point": ws.fork_points.get(&a.key),
                            "base_state": ws.base_states.get(&a.key),
                            "pending_reset": ws.pending_resets.get(&a.key),
                        })
                    ))
                    .collect::<BTreeMap<_, _>>()
            ),
        )
        .pre("listings", Value::Object(saved_listings));
    if let Some(parent) = parent {
        new_op = new_op.parent(parent);
    }
    let journal = repo.journal()?;
    let mut op = journal.start(new_op)?;

    // Unpin, concurrently. A pin its store no longer lists (the same plan
    // applied again, a tag deleted by hand) is reported as already released,
    // not as released now.
    let listed = listed_pins(repo, plan).await;
    let mut calls = Vec::new();
    for a in plan.actions.iter().filter(|a| a.verb == verb::UNPIN) {
        let plugin = repo.plugin(&a.kind).await?;
        let locator = a.params.get("locator").unwrap_or(&Value::Null);
        if listed
            .get(&store_key(&a.kind, locator))
            .is_some_and(|pins| !pins.contains(&a.target))
        {
            report
                .already_released
                .entry(a.kind.clone())
                .or_default()
                .push(pin_id_of_ref(&a.target));
            continue;
        }
        let client = repo.client_for_key(&plugin, locator, &a.key);
        let pin = PinRef {
            id: pin_id_of(a),
            ref_name: a.target.clone(),
            created: true,
        };
        let target = a.target.clone();
        calls.push((format!("{}|{}|{target}", a.kind, a.key), async move {
            client.unpin(&pin).await
        }));
    }
    let mut released = Vec::new();
    for (id, r) in fan_out(calls).await.results {
        let mut parts = id.splitn(3, '|');
        let (kind, key, target) = (
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
        );
        let pin_id = pin_id_of_ref(&target);
        match r {
            Ok(()) => {
                op.progress(json!({"unpinned": target, "kind": kind, "key": key}))?;
                report
                    .unpinned
                    .entry(kind.clone())
                    .or_default()
                    .push(pin_id.clone());
                released.push(pin_id);
            }
            Err(e) => {
                report.failed.insert(target, e.to_string());
            }
        }
    }
    if !released.is_empty() {
        let ids: Vec<&str> = released.iter().map(String::as_str).collect();
        index::remove_pinned(repo.vcs.shared_dir(), repo.dataset_id(), &ids)?;
    }

    // Delete branches, concurrently; one that moved after the plan is kept.
    let mut calls = Vec::new();
    for a in plan
        .actions
        .iter()
        .filter(|a| a.verb == verb::DELETE_BRANCH)
    {
        let plugin = repo.plugin(&a.kind).await?;
        let client = repo.client_for(&plugin, a.params.get("locator").unwrap_or(&Value::Null));
        let target = a.target.clone();
        let expected = a.params.get("head").cloned().unwrap_or(Value::Null);
        let kind = plugin.descriptor().clone();
        calls.push((format!("{}|{target}", a.key), async move {
            match super::fork::branch_head(&client, &target).await? {
                Some(h) if content_key(&h, &kind) != content_key(&expected, &kind) => Err(
                    BackendError::RefMoved(format!("{target} moved after the plan; kept")),
                ),
                None => Ok(()),
                Some(_) => client.delete_working_ref(&target).await,
            }
        }));
    }
    for (id, r) in fan_out(calls).await.results {
        let (key, target) = id.split_once('|').unwrap_or((&id, ""));
        match r {
            Ok(()) => {
                op.progress(json!({"deleted_branch": target, "key": key}))?;
                report
                    .deleted_working_refs
                    .entry(key.to_string())
                    .or_default()
                    .push(target.to_string());
            }
            Err(BackendError::RefMoved(m)) => {
                report
                    .kept_working_refs
                    .entry(key.to_string())
                    .or_default()
                    .push(format!("{target} ({m})"));
            }
            Err(e) => {
                report.failed.insert(target.to_string(), e.to_string());
            }
        }
    }

    for a in &forgotten {
        ws.working_refs.remove(&a.key);
        ws.pending_forks.remove(&a.key);
        ws.pending_resets.remove(&a.key);
        ws.fork_points.remove(&a.key);
        ws.base_states.remove(&a.key);
        report
            .forgotten_working_refs
            .entry(a.key.clone())
            .or_default()
            .push(a.target.clone());
    }
    if !forgotten.is_empty() {
        repo.save_workspace(&locks, &ws)?;
        op.progress(json!({"forgot_working_refs": report.forgotten_working_refs}))?;
    }
    for a in &listings {
        match listing::remove_listing(&repo.layout.listings_dir(), &a.target) {
            Ok(_) => {
                crate::fault::point("listing.delete");
                report.deleted_listings.push(a.target.clone())
            }
            Err(e) => {
                report.failed.insert(a.target.clone(), e.to_string());
            }
        }
    }
    // Created stores last: each asked once more, with nothing ignored, then
    // the backend checks owner and emptiness itself.
    let shared = repo.vcs.shared_dir().to_path_buf();
    let dataset = repo.dataset_id().to_string();
    for a in &plan.actions {
        let identity = a.params.get("identity").cloned().unwrap_or(Value::Null);
        match a.verb.as_str() {
            verb::KEEP_STORE => {
                report.kept_stores.insert(a.key.clone(), a.detail.clone());
            }
            verb::FORGET_STORE => {
                index::remove_created(&shared, &dataset, &a.kind, &identity)?;
                report.forgotten_stores.push(a.key.clone());
            }
            verb::FORGET_TOUCHED => {
                index::remove_touched(&shared, &dataset, &a.kind, &identity)?;
            }
            verb::DELETE_STORE => {
                let plugin = repo.plugin(&a.kind).await?;
                let client =
                    repo.client_for(&plugin, a.params.get("locator").unwrap_or(&Value::Null));
                let outcome = match client.is_ref_empty(&[]).await {
                    Ok(Some(true)) => client.delete_store(&dataset).await,
                    Ok(_) => Err(BackendError::Other(
                        "something appeared in it since the plan; kept".into(),
                    )),
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(()) => {
                        op.progress(
                            json!({"deleted_store": a.key, "kind": a.kind, "identity": identity}),
                        )?;
                        index::remove_created(&shared, &dataset, &a.kind, &identity)?;
                        index::remove_touched(&shared, &dataset, &a.kind, &identity)?;
                        report
                            .deleted_stores
                            .insert(a.key.clone(), a.target.clone());
                    }
                    Err(e) => {
                        report.failed.insert(a.key.clone(), e.to_string());
                    }
                }
            }
            _ => {}
        }
    }

    let unpinned: usize = report.unpinned.values().map(Vec::len).sum();
    let already: usize = report.already_released.values().map(Vec::len).sum();
    let summary = format!(
        "unpinned {unpinned}{}, deleted {} branch(es), {} listing(s)",
        if already > 0 {
            format!(" ({already} already released)")
        } else {
            String::new()
        },
        report
            .deleted_working_refs
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        report.deleted_listings.len()
    );
    op.finish(json!({"summary": summary, "report": report}))?;
    Ok(report)
}

/// The pin id a pin ref names (`tether.<pin_id>`, or a later generation).
fn pin_id_of_ref(target: &str) -> String {
    target
        .strip_prefix(ids::REF_PREFIX)
        .map(|t| {
            ids::parse_pin_ref(target)
                .map(|p| p.pin_id())
                .unwrap_or(t.to_string())
        })
        .unwrap_or_default()
}

/// A store as an unpin action names it.
fn store_key(kind: &str, locator: &Value) -> String {
    format!("{kind}|{}", canonical::to_string(locator))
}

/// The pins each store a plan unpins in lists now (as pin refs,
/// `tether.<name>`), by [`store_key`]; a store that cannot say is left out
/// (its unpins run as planned).
async fn listed_pins(repo: &Repo, plan: &Plan) -> BTreeMap<String, BTreeSet<String>> {
    let mut stores: BTreeMap<String, &Action> = BTreeMap::new();
    for a in plan.actions.iter().filter(|a| a.verb == verb::UNPIN) {
        let locator = a.params.get("locator").unwrap_or(&Value::Null);
        stores.entry(store_key(&a.kind, locator)).or_insert(a);
    }
    let mut calls = Vec::new();
    for (sid, a) in stores {
        let Ok(plugin) = repo.plugin(&a.kind).await else {
            continue;
        };
        let locator = a.params.get("locator").unwrap_or(&Value::Null);
        let client = repo.client_for_key(&plugin, locator, &a.key);
        calls.push((sid, async move { client.list_pins().await }));
    }
    fan_out(calls)
        .await
        .results
        .into_iter()
        .filter_map(|(sid, r)| {
            let pins = r.ok()?;
            let refs = pins
                .into_iter()
                .map(|name| format!("{}{name}", ids::REF_PREFIX))
                .collect();
            Some((sid, refs))
        })
        .collect()
}

fn pin_id_of(a: &Action) -> String {
    a.params
        .get("pin_id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| a.target.clone())
}

/// For `drop` and `abandon`: the commit ids as strings.
pub fn commit_set(commits: &[CommitId]) -> BTreeSet<String> {
    commits.iter().map(|c| c.to_string()).collect()
}
