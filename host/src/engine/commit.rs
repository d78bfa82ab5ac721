//! `tether commit`: pin (or record) every changed object and commit the
//! manifests.
//!
//! 1. Refuse when the working copy left its bookmark.
//! 2. Plan: fingerprint the selected objects (or take the cached snapshot),
//!    and per changed object decide `pin` (a native ref `tether.<pin_id>`),
//!    `record` (Addressable, `pin = "record"`) or `unrecoverable` (Observed;
//!    refused with `--strict`). Unchanged objects are skipped.
//! 3. Apply: re-check the plan's preconditions, journal, create the pins,
//!    write manifests and listings, and commit exactly those paths. A failure
//!    after pins releases the pins this commit created and puts the manifests
//!    back.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::checker::Checker;
use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use super::snapshot;
use crate::lock::Locks;
use crate::model::{Manifest, Pin, fsutil, ids, key, listing, manifest, time};
use crate::oplog::{NewOp, OpHandle, index};
use crate::plan::{Action, Plan, Precondition, Store, verb};
use crate::plugin::{BackendError, ObjectClient, PinRef, fan_out};

use crate::plan::verb::{UNCHANGED, UNRECOVERABLE};

#[derive(Debug, Clone, Default)]
pub struct CommitOptions {
    pub keys: Vec<String>,
    pub message: Option<String>,
    pub no_vcs: bool,
    pub strict: bool,
    pub force: bool,
    pub no_snapshot: bool,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct CommitReport {
    pub vcs_commit: Option<String>,
    /// Every changed object: its pin ref, or null when recorded.
    pub pinned: BTreeMap<String, Option<String>>,
    pub unrecoverable: Vec<String>,
    pub unchanged: Vec<String>,
}

/// Refuse a working copy that cannot commit: read-only, stale against
/// `manifests` (the working tree's, as the caller read them), or off its
/// bookmark.
pub(crate) fn check_bookmark(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
) -> Result<String> {
    let ws = repo.workspace()?;
    let Some(bookmark) = ws.bookmark.clone() else {
        return Err(
            TetherError::refused("this working copy is on no bookmark (read-only)")
                .hint("`tether new NAME` to work on one"),
        );
    };
    super::fork::refuse_if_stale(&ws, manifests)?;
    let here = repo.vcs.working_bookmarks()?;
    if here.contains(&bookmark) {
        return Ok(bookmark);
    }
    let (on, back) = match repo.vcs.kind() {
        crate::vcs::VcsKind::Git => ("it is on", format!("`git switch {bookmark}`")),
        // Under jj the bookmark must be at `@` or `@-`.
        crate::vcs::VcsKind::Jj => ("`@` and `@-` hold", format!("`jj new {bookmark}`")),
    };
    Err(TetherError::refused(format!(
        "the VCS working copy has left bookmark {bookmark:?} ({on} {})",
        if here.is_empty() {
            "no bookmark".to_string()
        } else {
            here.iter()
                .map(|b| format!("{b:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ))
    .hint(format!(
        "{back} or `tether new {bookmark} --keep` brings it back"
    )))
}

/// Decide what commit would do.
pub async fn plan(repo: &Repo, opts: &CommitOptions) -> Result<Plan> {
    // One read of the manifests serves the bookmark check and the plan.
    let manifests = repo.manifests()?;
    let bookmark = check_bookmark(repo, &manifests)?;
    let keys = key::select_keys(&opts.keys, manifests.keys().map(String::as_str))?;
    if !opts.keys.is_empty() {
        check_whole_scopes(repo, &manifests, &keys).await?;
    }
    let mut ws = repo.workspace()?;
    let (states, asked) = if opts.no_snapshot {
        let mut out = snapshot::Fingerprints::new();
        for k in &keys {
            let cached = snapshot::cached(&ws, k).unwrap_or_else(|| {
                Err(
                    "no cached snapshot: run `tether snapshot` or commit without --no-snapshot"
                        .into(),
                )
            });
            out.insert(k.clone(), cached);
        }
        (out, BTreeMap::new())
    } else {
        // Each object's identity and capabilities are asked right after its
        // fingerprint, in the same instance (`object_facts` asks again for
        // any that failed, and reports them).
        let also = |m: &Manifest, client: ObjectClient| {
            let m = m.clone();
            async move { facts_of(&client, &m).await.ok() }
        };
        let (states, asked) =
            snapshot::fingerprint_with(repo, &ws, &manifests, &keys, Some(also)).await?;
        // A changed immutable object is refused before anything is written,
        // the snapshot cache included.
        snapshot::refuse_changed_immutables(repo, &manifests, &states).await?;
        snapshot::cache(repo, &mut ws, &states)?;
        (states, asked)
    };
    let failures: Vec<(String, BackendError)> = states
        .iter()
        .filter_map(|(k, r)| {
            r.as_ref()
                .err()
                .map(|e| (k.clone(), BackendError::Other(e.clone())))
        })
        .collect();
    if !failures.is_empty() {
        return Err(crate::plugin::MultiObjectError { failures }.into());
    }
    snapshot::refuse_changed_immutables(repo, &manifests, &states).await?;

    let mut p = Plan::new("commit");
    p.set_keys(&opts.keys);
    p.context.insert("bookmark".into(), json!(bookmark));
    p.context.insert("message".into(), json!(opts.message));
    p.context.insert("no_vcs".into(), json!(opts.no_vcs));
    if opts.force {
        p.context.insert("force".into(), json!(true));
    }
    p.require(Precondition::WorkspaceId {
        expected: ws.workspace_id.clone(),
    });
    p.require(Precondition::WorkspaceBookmark {
        expected: Some(bookmark),
    });
    p.require(Precondition::ManifestHash {
        expected: manifest::manifest_hash(&manifests),
    });

    // Edits of the dataset's files that no state change carries (an undone
    // commit's manifests, a removed object, tether.toml) go into a commit of
    // everything, even when no object moved.
    if opts.keys.is_empty() && !other_dataset_edits_pending(repo)?.is_empty() {
        p.context.insert("other_edits".into(), json!(true));
    }

    let facts = object_facts_given(repo, &manifests, &keys, asked).await?;
    let plugins = repo.plugins().await?;
    for (k, (identity, caps)) in facts {
        let m = &manifests[&k];
        let descriptor = plugins[&m.kind].descriptor();
        let state = states[&k].clone().expect("failures were refused above");
        // A branch-less object sits at its pin on the trunk too: where its
        // system moved is `pull`'s to take (spec/06, "Positions").
        let behind = snapshot::branchless_on_trunk(repo, &ws, descriptor, m)
            && m.state
                .as_ref()
                .is_some_and(|s| content(s, descriptor) != content(&state, descriptor));
        let state = match (&m.state, behind) {
            (Some(recorded), true) => recorded.clone(),
            _ => state,
        };
        let has = |c: &str| caps.iter().any(|x| x == c);
        let locator = Value::Object(m.locator.clone());
        let working_ref = Repo::working_ref(&ws, &k).unwrap_or_default();
        let unchanged = m
            .state
            .as_ref()
            .is_some_and(|s| content(s, descriptor) == content(&state, descriptor))
            && (m.pin.is_some() == has("PIN"))
            && m.recoverable == (has("PIN") || has("ADDRESSABLE"));
        let action = if unchanged {
            Action {
                verb: UNCHANGED.into(),
                ..base_action(&k, m, &state, &identity)
            }
            .with_detail(if behind {
                "behind: its system moved past the pin; `tether pull` takes it"
            } else {
                "unchanged"
            })
            .with_param("listing", json!(has("DIFF")))
        } else {
            write_action(
                repo,
                &k,
                m,
                &state,
                &identity,
                &caps,
                descriptor,
                opts.strict,
            )?
        };
        if action.verb != UNCHANGED && !behind {
            // The object must still be where the plan saw it when the plan
            // applies (one precondition per object: each key comes once).
            p.require_new(Precondition::RefHead {
                key: k.clone(),
                store: Store::new(&m.kind, locator),
                ref_name: working_ref,
                expected: Value::Object(state),
            });
        }
        p.push(action);
    }
    Ok(p)
}

/// Each object's identity and effective capabilities under its policy
/// (`pin = "record"` drops PIN), asked of the stores concurrently.
pub(crate) async fn object_facts(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
) -> Result<BTreeMap<String, Facts>> {
    object_facts_given(repo, manifests, keys, BTreeMap::new()).await
}

/// An object's identity and effective capabilities.
pub(crate) type Facts = (Value, Vec<String>);

/// [`object_facts`] for the keys `known` does not already answer.
async fn object_facts_given(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
    mut known: BTreeMap<String, Facts>,
) -> Result<BTreeMap<String, Facts>> {
    let mut calls = Vec::new();
    for k in keys.iter().filter(|k| !known.contains_key(*k)) {
        let m = manifests[k].clone();
        // Both questions in one instance.
        let client = repo.client(&m).await?.resident();
        calls.push((k.clone(), async move { facts_of(&client, &m).await }));
    }
    known.extend(fan_out(calls).await.into_result()?);
    Ok(known)
}

/// One object's identity and capabilities under its policy.
async fn facts_of(client: &ObjectClient, m: &Manifest) -> std::result::Result<Facts, BackendError> {
    let policy = json!({"file": m.policy.file.as_str(), "pin": m.policy.pin.as_str()});
    let identity = client.identity().await?;
    let mut caps = client.effective_capabilities(&policy).await?;
    if m.policy.pin == crate::model::PinMode::Record {
        caps.retain(|c| c != "PIN");
    }
    Ok((identity, caps))
}

/// What every commit action of an object carries: the state, and the
/// backend, locator and identity it was read with.
fn base_action(key: &str, m: &Manifest, state: &Map<String, Value>, identity: &Value) -> Action {
    Action::new(verb::PIN, key)
        .with_kind(&m.kind)
        .with_param("state", Value::Object(state.clone()))
        .with_param("backend", json!(m.kind))
        .with_param("locator", Value::Object(m.locator.clone()))
        .with_param("identity", identity.clone())
}

/// The write that records `state` for an object with capabilities `caps`:
/// `pin` (a native ref `tether.<pin_id>`), `record` (Addressable), or
/// `unrecoverable` (Observed; refused with `strict`). `m.locator` is what the
/// manifest will hold afterwards (`commit` and `pull` write it back).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_action(
    repo: &Repo,
    key: &str,
    m: &Manifest,
    state: &Map<String, Value>,
    identity: &Value,
    caps: &[String],
    descriptor: &crate::plugin::Descriptor,
    strict: bool,
) -> Result<Action> {
    let has = |c: &str| caps.iter().any(|x| x == c);
    let base = base_action(key, m, state, identity);
    let action = if has("PIN") {
        let pin_id = ids::pin_id(
            repo.dataset_id(),
            &m.kind,
            identity,
            &Value::Object(content(state, descriptor)),
        );
        base.with_target(ids::ref_for_pin(&pin_id))
            .with_param("pin_id", json!(pin_id))
    } else if has("ADDRESSABLE") {
        Action {
            verb: verb::RECORD.into(),
            ..base
        }
        .with_detail("recorded")
    } else if strict {
        return Err(TetherError::refused(format!(
            "{key} is Observed: its state can be recorded but not read back; --strict refuses to commit it \
             unrecoverably (commit without --strict, or leave it out with KEY...)"
        )));
    } else {
        Action {
            verb: UNRECOVERABLE.into(),
            ..base
        }
        .with_detail("recorded (not recoverable)")
    };
    Ok(action.with_param("listing", json!(has("DIFF"))))
}

/// Objects in one branch scope share a pin and a working branch, so a
/// selection must name all of them or none; the refusal lists the ones to add.
pub async fn check_whole_scopes(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    selected: &[String],
) -> Result<()> {
    let mut calls = Vec::new();
    for (k, m) in manifests {
        let client = repo.client(m).await?;
        let kind = m.kind.clone();
        calls.push((k.clone(), async move {
            client.branch_scope().await.map(|scope| (kind, scope))
        }));
    }
    let scopes = fan_out(calls).await.into_result()?;
    let mut missing: Vec<&str> = Vec::new();
    for (k, scope) in &scopes {
        let shares = scopes
            .iter()
            .any(|(other, s)| other != k && s == scope && selected.contains(other));
        if shares && !selected.contains(k) {
            missing.push(k);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(TetherError::refused(format!(
        "the selection names only some objects of a branch scope (they share a pin and a working branch); \
         add {} to the keys",
        missing.join(", ")
    )))
}

/// Apply a commit plan (fresh, or loaded with `--from-plan`). `force` (or a
/// plan made with it) skips the quiescence check.
pub async fn apply(
    repo: &Repo,
    plan: &Plan,
    message: Option<&str>,
    force: bool,
) -> Result<CommitReport> {
    let no_vcs = plan
        .context
        .get("no_vcs")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let message = message.map(str::to_string).or_else(|| {
        plan.context
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if !no_vcs && message.as_deref().is_none_or(|m| m.trim().is_empty()) {
        return Err(
            TetherError::refused("a commit message is required").hint("`tether commit -m MESSAGE`")
        );
    }
    tracing::debug!(actions = plan.actions.len(), "commit: applying the plan");
    let locks = repo.lock()?;
    // Read once under the lock: the checks, the quiescence question and the
    // landing's rollback all work from these (10,000 manifests cost a
    // fifth of a second to read).
    let manifests = repo.manifests()?;
    refuse_changed_immutables(repo, plan, &manifests).await?;
    plan.check_all(
        &mut Checker { repo }
            .reading_ref_heads(plan)
            .await
            .with_manifests(&manifests),
    )?;
    tracing::debug!("commit: the plan's checks hold");

    let mut report = CommitReport::default();
    let writes: Vec<&Action> = plan
        .actions
        .iter()
        .filter(|a| a.verb != UNCHANGED)
        .collect();
    for a in plan.actions.iter().filter(|a| a.verb == UNCHANGED) {
        report.unchanged.push(a.key.clone());
    }
    let other_edits = plan
        .context
        .get("other_edits")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if writes.is_empty() && (no_vcs || !other_edits) {
        return Ok(report);
    }

    let force = force
        || plan
            .context
            .get("force")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if !force {
        check_quiescence(repo, &writes, &manifests).await?;
    }

    let journal = repo.journal()?;
    let mut op = journal.start(NewOp::new("commit").plan(plan))?;
    tracing::debug!(op = %op.id(), "commit: journaled");
    if writes.is_empty() {
        // Only edits no object's state carries: a removed object, a changed
        // tether.toml. They are committed as they are.
        let paths = other_dataset_edits_pending(repo)?;
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let bookmark = plan.context.get("bookmark").and_then(Value::as_str);
        let msg = message.as_deref().unwrap_or_default();
        let commit = match bookmark {
            Some(b) => repo.vcs.commit_on_bookmark(&refs, msg, b)?,
            None => repo.vcs.commit_paths(&refs, msg)?,
        };
        crate::fault::point("vcs.commit");
        report.vcs_commit = Some(commit.to_string());
        op.finish(json!(report))?;
        return Ok(report);
    }
    // A commit of everything also takes the dataset's other edits under
    // .tether/ and tether.toml (removed objects, a changed config).
    let landing = Landing {
        message: message.as_deref(),
        bookmark: plan.context.get("bookmark").and_then(Value::as_str),
        no_vcs,
        other_edits: plan.keys().is_none_or(|k| k.is_empty()),
    };
    match land(
        repo,
        &locks,
        &writes,
        &manifests,
        &mut op,
        &landing,
        &mut report,
    )
    .await
    {
        Ok(_) => {
            op.finish(json!(report))?;
            Ok(report)
        }
        Err(e) => {
            op.finish(failure_record(&e))?;
            Err(e)
        }
    }
}

/// Ask every store about to be pinned whose backend declares
/// `NEEDS_QUIESCENCE` (Neon) whether writers are active, and refuse while one
/// is: a pin taken mid-write is not a consistent state (spec/09, `commit`).
async fn check_quiescence(
    repo: &Repo,
    writes: &[&Action],
    manifests: &BTreeMap<String, Manifest>,
) -> Result<()> {
    let plugins = repo.plugins().await?;
    let asked: Vec<(&Action, &Manifest)> = writes
        .iter()
        .filter_map(|a| manifests.get(&a.key).map(|m| (*a, m)))
        .filter(|(_, m)| {
            plugins
                .get(&m.kind)
                .is_some_and(|p| p.descriptor().has("NEEDS_QUIESCENCE"))
        })
        .collect();
    if asked.is_empty() {
        return Ok(());
    }
    let ws = repo.workspace()?;
    let mut calls = Vec::new();
    for (a, m) in asked {
        let client = repo.client(m).await?;
        let working_ref = Repo::working_ref(&ws, &a.key);
        calls.push((a.key.clone(), async move {
            client.check_quiescence(working_ref.as_deref()).await
        }));
    }
    let results = fan_out(calls).await;
    let busy: Vec<String> = results
        .failures()
        .map(|(key, e)| format!("{key} is not quiescent: {e}"))
        .collect();
    if busy.is_empty() {
        return Ok(());
    }
    Err(TetherError::refused(busy.join("; "))
        .hint("commit once its writers are done, or `tether commit --force` to pin anyway"))
}

/// Fingerprint the plan's committed immutable objects again, under the lock:
/// a plan made before one changed (`--from-plan`, or an instrument writing
/// between plan and apply) must not record it, nor land beside it. Checked
/// before the plan's preconditions so the refusal is the spec's
/// `ImmutableObjectModified`, not a stale plan.
async fn refuse_changed_immutables(
    repo: &Repo,
    plan: &Plan,
    manifests: &BTreeMap<String, Manifest>,
) -> Result<()> {
    let keys: Vec<String> = plan
        .actions
        .iter()
        .map(|a| a.key.clone())
        .filter(|k| {
            manifests
                .get(k)
                .is_some_and(|m| snapshot::immutable_file(m) && m.state.is_some())
        })
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let ws = repo.workspace()?;
    let states = snapshot::fingerprint(repo, &ws, manifests, &keys).await?;
    snapshot::refuse_changed_immutables(repo, manifests, &states).await
}

/// The journal's result for a landing that failed and was rolled back:
/// `failed` is `{key: error}` when objects failed, else the error.
pub(crate) fn failure_record(e: &TetherError) -> Value {
    let failed = match e {
        TetherError::MultiObject(m) => json!(
            m.failures
                .iter()
                .map(|(k, e)| (k.clone(), e.to_string()))
                .collect::<BTreeMap<_, _>>()
        ),
        other => json!(other.to_string()),
    };
    json!({"failed": failed, "rolled_back": true})
}

/// How [`land`] ends: the VCS commit's message, or none (`--no-vcs`), and
/// whether the dataset's other edits (tether.toml, removed manifests) go in.
pub(crate) struct Landing<'a> {
    pub message: Option<&'a str>,
    /// The bookmark the commit moves (with the commit, in one jj operation).
    pub bookmark: Option<&'a str>,
    pub no_vcs: bool,
    pub other_edits: bool,
}

/// The write half of `commit` and `pull`, under the locks and an open
/// journal entry: create the pins of `writes` concurrently, write the
/// manifests (each action's `locator` param becomes the manifest's locator)
/// and listings, commit exactly those paths, and add the pins it created to
/// the pinned index. Returns those pins by key. On failure it releases the
/// pins it created (never one it found) and puts back the manifests of
/// `originals` (the working copy's, read under the same locks); the caller
/// closes the journal entry either way.
pub(crate) async fn land(
    repo: &Repo,
    locks: &Locks,
    writes: &[&Action],
    originals: &BTreeMap<String, Manifest>,
    op: &mut OpHandle,
    landing: &Landing<'_>,
    report: &mut CommitReport,
) -> Result<BTreeMap<String, PinRef>> {
    // What a failure puts back: the manifests this landing writes.
    let restore: BTreeMap<String, Manifest> = writes
        .iter()
        .filter_map(|a| originals.get(&a.key).map(|m| (a.key.clone(), m.clone())))
        .collect();
    // Pins first, concurrently; remember which ones this commit created.
    // Each is journaled as it lands, and the wave synced once at its end,
    // after the local stores' writes (synced once per filesystem, not per
    // put: the journal, not each pin, is what a re-run reads).
    let wave = op.wave()?;
    let store_syncs = crate::plugin::storage::defer_syncs();
    let mut calls = Vec::new();
    for a in writes.iter().filter(|a| a.verb == verb::PIN) {
        let m = originals.get(&a.key).ok_or_else(|| {
            TetherError::no_such_object(&a.key, originals.keys().map(String::as_str))
        })?;
        let client = repo.client_for_object(&a.key, m).await?.resident();
        let state = a.params["state"].clone();
        let pin_id = a.params["pin_id"].as_str().unwrap_or_default().to_string();
        // The listing `write_and_commit` writes, read in the same instance
        // as the pin when the object stays where its manifest says (`pull`
        // may move it: then it is read there, later).
        let listing = a.params.get("listing").and_then(Value::as_bool) == Some(true)
            && a.params
                .get("locator")
                .is_none_or(|l| l.as_object() == Some(&m.locator));
        let (key, wave) = (a.key.clone(), wave.clone());
        calls.push((a.key.clone(), async move {
            let pin = client.pin(&state, &pin_id).await?;
            wave.progress(json!({"pinned": key, "ref": pin.ref_name, "created": pin.created}));
            // A listing that fails here is asked again, and reported, there.
            let listed = match listing {
                true => client.listing(&state).await.ok(),
                false => None,
            };
            Ok((pin, listed))
        }));
    }
    let mut pins: BTreeMap<String, PinRef> = BTreeMap::new();
    let mut listed = BTreeMap::new();
    let mut failures = Vec::new();
    for (k, r) in fan_out(calls).await.results {
        match r {
            Ok((pin, listing)) => {
                if let Some(listing) = listing {
                    listed.insert(k.clone(), listing);
                }
                pins.insert(k, pin);
            }
            Err(e) => failures.push((k, e)),
        }
    }
    tracing::debug!(
        pins = pins.len(),
        failed = failures.len(),
        "commit: pins landed"
    );
    if let Err(e) = adopt_interrupted_pins(repo, &mut pins, &wave) {
        tracing::warn!("could not read the journal for an interrupted commit's pins: {e}");
    }
    if let Err(e) = store_syncs.sync() {
        rollback(repo, originals, &pins, &restore).await;
        return Err(TetherError::io("the stores' pins", e));
    }
    if let Err(e) = wave.end() {
        rollback(repo, originals, &pins, &restore).await;
        return Err(e.into());
    }
    if !failures.is_empty() {
        rollback(repo, originals, &pins, &restore).await;
        return Err(crate::plugin::MultiObjectError { failures }.into());
    }

    let landed = Landed {
        pins: &pins,
        listed,
    };
    if let Err(e) = write_and_commit(repo, locks, writes, landed, originals, landing, report).await
    {
        rollback(repo, originals, &pins, &restore).await;
        return Err(e);
    }
    let by_key: BTreeMap<&str, &Action> = writes.iter().map(|a| (a.key.as_str(), *a)).collect();
    let pinned_index: Vec<index::PinnedPin> = pins
        .iter()
        .filter(|(_, p)| p.created)
        .map(|(k, p)| {
            let a = by_key
                .get(k.as_str())
                .expect("pinned objects come from actions");
            index::PinnedPin {
                dataset_id: repo.dataset_id().to_string(),
                pin_id: p.id.clone(),
                kind: a.kind.clone(),
                key: k.clone(),
                identity: a.params["identity"].clone(),
                ref_name: Some(p.ref_name.clone()),
                at: time::now_timestamp(),
            }
        })
        .collect();
    if !pinned_index.is_empty() {
        index::append_pinned(repo.vcs.shared_dir(), &pinned_index)?;
    }
    Ok(pins)
}

/// A re-run finishing an interrupted commit (or pull) finds the pins that
/// run made already there, and the store says "not created". The journal
/// says otherwise: the interrupted entry recorded each pin it created as it
/// landed. Those are this commit's own, as they would have been had the
/// first run finished (the manifest's `[pin] created`, the pin index, what
/// gc may release), and are recorded again in this entry's progress, naming
/// the entry they come from. A pin whose record the kill cut off (it landed,
/// the process died before its line) stays "found", which only keeps it.
fn adopt_interrupted_pins(
    repo: &Repo,
    pins: &mut BTreeMap<String, PinRef>,
    wave: &crate::oplog::Wave,
) -> Result<()> {
    if pins.values().all(|p| p.created) {
        return Ok(());
    }
    let mut made: BTreeMap<(String, String), String> = BTreeMap::new();
    for e in repo.journal()?.incomplete()? {
        if !matches!(e.command.as_str(), "commit" | "pull") {
            continue;
        }
        for p in &e.progress {
            if p.get("created") != Some(&Value::Bool(true)) {
                continue;
            }
            if let (Some(k), Some(r)) = (
                p.get("pinned").and_then(Value::as_str),
                p.get("ref").and_then(Value::as_str),
            ) {
                made.insert((k.to_string(), r.to_string()), e.id.clone());
            }
        }
    }
    for (k, pin) in pins.iter_mut().filter(|(_, p)| !p.created) {
        if let Some(op) = made.get(&(k.clone(), pin.ref_name.clone())) {
            pin.created = true;
            wave.progress(json!({
                "pinned": k, "ref": pin.ref_name, "created": true, "made_by": op,
            }));
        }
    }
    Ok(())
}

/// What the stores said while the pins landed: the pins by key, and the
/// listings read with them (`None`: the state has none).
struct Landed<'a> {
    pins: &'a BTreeMap<String, PinRef>,
    listed: BTreeMap<String, Option<String>>,
}

async fn write_and_commit(
    repo: &Repo,
    locks: &Locks,
    writes: &[&Action],
    landed: Landed<'_>,
    originals: &BTreeMap<String, Manifest>,
    landing: &Landing<'_>,
    report: &mut CommitReport,
) -> Result<()> {
    let captured_at = time::now_timestamp();
    let mut paths: Vec<String> = Vec::new();
    let mut ws = repo.workspace()?;
    let plugins = repo.plugins().await?;
    // Every object's manifest as it will be.
    let mut written: Vec<(&Action, Manifest)> = Vec::with_capacity(writes.len());
    for a in writes {
        let mut m = originals[&a.key].clone();
        if let Some(Value::Object(locator)) = a.params.get("locator") {
            // `pull` moves an `--at` object onto its branch: `at` goes.
            m.locator = locator.clone();
        }
        m.state = Some(a.params["state"].as_object().cloned().unwrap_or_default());
        m.captured_at = Some(captured_at.clone());
        written.push((a, m));
    }
    // What only the stores can say (whether a recorded state reads back, the
    // listing of a state), asked concurrently unless read with the pins.
    let pins = landed.pins;
    let asked = ask_stores(repo, &written, landed.listed).await?;
    let mut files = fsutil::AtomicBatch::recycling(repo.layout.spare_dir());
    let mut listings = std::collections::HashSet::new();
    for (a, m) in &mut written {
        let state = m.state.clone().unwrap_or_default();
        let descriptor = plugins
            .get(&m.kind)
            .ok_or_else(|| TetherError::unknown_kind(&m.kind, plugins.keys().map(String::as_str)))?
            .descriptor();
        let (addressable, listed) = asked.get(&a.key).cloned().unwrap_or_default();
        match a.verb.as_str() {
            verb::PIN => {
                let pin = &pins[&a.key];
                m.pin = Some(Pin {
                    id: pin.id.clone(),
                    r#ref: pin.ref_name.clone(),
                    created: pin.created,
                });
                m.recoverable = true;
                report
                    .pinned
                    .insert(a.key.clone(), Some(pin.ref_name.clone()));
            }
            verb::RECORD => {
                let addressable = addressable.unwrap_or(false);
                m.pin = None;
                m.recoverable = addressable;
                report.pinned.insert(a.key.clone(), None);
                if !addressable {
                    report.unrecoverable.push(a.key.clone());
                }
            }
            _ => {
                m.pin = None;
                m.recoverable = false;
                report.pinned.insert(a.key.clone(), None);
                report.unrecoverable.push(a.key.clone());
            }
        }
        if let Some(text) = listed {
            let name = ids::listing_name(
                &m.kind,
                &a.params["identity"],
                &Value::Object(content(&state, descriptor)),
            );
            if let Some(body) = listing::stage_listing(&repo.layout.listings_dir(), &name, &text)? {
                files.stage(&body.0, body.1.as_bytes())?;
                listings.insert(body.0);
            }
            paths.push(repo.vcs_path(&listing::listing_path(&repo.layout.listings_dir(), &name)));
        }
        manifest::stage_manifest(&mut files, &repo.layout.objects_dir(), &a.key, m)?;
        paths.push(repo.vcs_path(&repo.layout.manifest_file(&a.key)));
        // Your own commits never make you stale: the working ref now stands
        // on what this commit records.
        if ws.base_states.contains_key(&a.key) || ws.working_refs.contains_key(&a.key) {
            ws.base_states.insert(a.key.clone(), state.clone());
        }
        ws.last_snapshot.insert(a.key.clone(), state);
        ws.last_snapshot_errors.remove(&a.key);
    }
    // Listings and manifests in one pass, with a constant number of syncs.
    files.commit(|path| {
        if listings.contains(path) {
            crate::fault::point("listing.write");
        } else {
            crate::fault::point("manifest.write");
        }
    })?;
    repo.save_workspace(locks, &ws)?;
    tracing::debug!(
        files = paths.len(),
        "commit: manifests and workspace written"
    );
    if landing.no_vcs {
        return Ok(());
    }
    if landing.other_edits {
        paths.extend(other_dataset_edits(repo)?);
    }
    paths.sort();
    paths.dedup();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let message = landing.message.unwrap_or_default();
    // The bookmark moves with the commit (under jj in the same operation).
    let commit = match landing.bookmark {
        Some(bookmark) => repo.vcs.commit_on_bookmark(&refs, message, bookmark)?,
        None => repo.vcs.commit_paths(&refs, message)?,
    };
    crate::fault::point("vcs.commit");
    tracing::debug!(%commit, "commit: VCS commit made");
    report.vcs_commit = Some(commit.to_string());
    Ok(())
}

/// Per object of `written` that needs one, what its store says, asked
/// concurrently: whether a recorded state is addressable (`record`), and the
/// listing of its state (objects whose plan asks for one).
async fn ask_stores(
    repo: &Repo,
    written: &[(&Action, Manifest)],
    mut listed: BTreeMap<String, Option<String>>,
) -> Result<BTreeMap<String, (Option<bool>, Option<String>)>> {
    let mut calls = Vec::new();
    let mut out = BTreeMap::new();
    for (a, m) in written {
        let record = a.verb == verb::RECORD;
        let listing = a
            .params
            .get("listing")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !record && !listing {
            continue;
        }
        if !record && let Some(known) = listed.remove(&a.key) {
            out.insert(a.key.clone(), (None, known));
            continue;
        }
        let client = repo.client(m).await?.resident();
        let state = Value::Object(m.state.clone().unwrap_or_default());
        calls.push((a.key.clone(), async move {
            let addressable = match record {
                true => Some(client.state_addressable(&state).await?),
                false => None,
            };
            let listed = match listing {
                true => client.listing(&state).await?,
                false => None,
            };
            Ok((addressable, listed))
        }));
    }
    // The first failure in key order, as the one-at-a-time loop reported it.
    for (k, r) in fan_out(calls).await.results {
        match r {
            Ok(v) => {
                out.insert(k, v);
            }
            Err(e) => return Err(TetherError::backend(&k, e)),
        }
    }
    Ok(out)
}

/// Paths of dataset files that changed since HEAD, outside any one object's
/// manifest: tether.toml, .tether/.gitignore, removed manifests.
/// The dataset's own files that differ from the last commit: tether.toml,
/// `.tether/.gitignore`, manifests (edited, removed, or left as edits by an
/// undone commit).
fn other_dataset_edits_pending(repo: &Repo) -> Result<Vec<String>> {
    let changed: std::collections::BTreeSet<String> =
        repo.vcs.changes()?.into_iter().map(|c| c.path).collect();
    Ok(other_dataset_edits(repo)?
        .into_iter()
        .filter(|p| changed.contains(p))
        .collect())
}

fn other_dataset_edits(repo: &Repo) -> Result<Vec<String>> {
    let mut maybe = vec![
        repo.vcs_path(&repo.layout.config_file()),
        repo.vcs_path(&repo.layout.gitignore_file()),
    ];
    if let Some(head) = repo.vcs.head()? {
        // Files the dataset tracked and no longer has: manifests of removed
        // objects, components no pin names any more.
        for dir in [repo.layout.objects_dir(), repo.layout.plugins_dir()] {
            let prefix = repo.vcs_path(&dir);
            for path in repo.vcs.list_files(&head, &prefix)? {
                if !repo.vcs.root().join(&path).exists() {
                    maybe.push(path);
                }
            }
        }
    }
    // The components `[plugins.<kind>]` pins, stored beside the manifests
    // (`plugin add`, `plugin pin --vendor`): a clone loads the pinned build
    // from them, so they are committed with the pin.
    for pin in repo.config.plugins.values() {
        let file = crate::plugin::registry::stored_file_name(&pin.digest);
        maybe.push(repo.vcs_path(&repo.layout.plugins_dir().join(file)));
    }
    let mut out: Vec<String> = maybe
        .into_iter()
        .filter(|p| !p.is_empty() && (repo.vcs.root().join(p).exists() || is_tracked(repo, p)))
        .collect();
    // Every manifest there is (found by name, so it exists: no check per file).
    for key in manifest::keys(&repo.layout.objects_dir())? {
        out.push(repo.vcs_path(&repo.layout.manifest_file(&key)));
    }
    Ok(out)
}

fn is_tracked(repo: &Repo, path: &str) -> bool {
    repo.vcs
        .tracked(&[path])
        .map(|t| !t.is_empty())
        .unwrap_or(false)
}

/// Undo what a failed commit did: release the pins it created (never one it
/// found, which belongs to the commit that made it) and put the manifests back.
async fn rollback(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    pins: &BTreeMap<String, PinRef>,
    originals: &BTreeMap<String, Manifest>,
) {
    for (k, pin) in pins.iter().filter(|(_, p)| p.created) {
        let Some(m) = manifests.get(k) else { continue };
        match repo.client_for_object(k, m).await {
            Ok(client) => {
                if let Err(e) = client.unpin(pin).await {
                    tracing::error!(key = %k, pin = %pin.ref_name, "could not release a pin while rolling back: {e}");
                }
            }
            Err(e) => tracing::error!(key = %k, "could not release a pin while rolling back: {e}"),
        }
    }
    let mut batch = fsutil::AtomicBatch::new();
    for (k, m) in originals {
        if let Err(e) = manifest::stage_manifest(&mut batch, &repo.layout.objects_dir(), k, m) {
            tracing::error!(key = %k, "could not restore the manifest while rolling back: {e}");
        }
    }
    if let Err(e) = batch.commit(|_| {}) {
        tracing::error!("could not restore the manifests while rolling back: {e}");
    }
}

/// For the CLI: a state as `k=v` pairs.
pub fn brief(state: &Map<String, Value>) -> String {
    state
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}
