//! Working branches: the one place tether decides where an object's fork comes
//! from, reads a branch's head, creates or resets a branch, and tells whether a
//! working copy has gone stale. `new`, `restore`, a writable `open`'s lazy
//! fork ([`materialize_fork`]) and `promote` all go through here, so a branch
//! is moved the same way whoever moves it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use crate::model::{Manifest, WorkspaceState};
use crate::oplog::NewOp;
use crate::plugin::{BackendError, Descriptor, Expected, ObjectClient, PinRef, Target};

/// What a fork starts from: the commit's pin, or, for a `pin = "record"`
/// object, its recorded state. `None`: the object was never committed.
pub fn fork_source(m: &Manifest) -> Option<(Target, Value)> {
    let state = Value::Object(m.state.clone()?);
    match PinRef::of(m) {
        Some(pin) => Some((Target::Pinned(pin), state)),
        None if m.recoverable => Some((Target::Recorded(state.clone()), state)),
        None => None,
    }
}

/// The head of branch `name` in the object's store; `None` when it does not exist.
pub async fn branch_head(
    client: &ObjectClient,
    name: &str,
) -> std::result::Result<Option<Value>, BackendError> {
    match client.fingerprint(Some(name)).await {
        Ok(state) => Ok(Some(state)),
        Err(BackendError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Serialises an [`Expected`] into plan params (`null` = absent).
pub fn expected_param(expected: &Option<Value>) -> Value {
    match expected {
        Some(head) => json!({"at": head}),
        None => json!({"absent": true}),
    }
}

/// Reads back [`expected_param`].
pub fn expected_from_param(param: Option<&Value>) -> Expected {
    match param.and_then(|p| p.get("at")) {
        Some(head) => Expected::At(head.clone()),
        None if param.and_then(|p| p.get("absent")).is_some() => Expected::Absent,
        None => Expected::Unconditional,
    }
}

/// Serialises a fork source into plan params.
pub fn source_param(source: &Target) -> Value {
    match source {
        Target::Pinned(pin) => json!({"pinned": pin}),
        Target::Recorded(state) => json!({"recorded": state}),
        Target::WorkingRef(r) => json!({"working_ref": r}),
        Target::Base => json!({"base": true}),
    }
}

/// Reads back [`source_param`].
pub fn source_from_param(param: Option<&Value>) -> Result<Target> {
    let bad = || TetherError::refused("a plan action has no readable fork source");
    let p = param.ok_or_else(bad)?;
    if let Some(pin) = p.get("pinned") {
        return Ok(Target::Pinned(
            serde_json::from_value(pin.clone()).map_err(|_| bad())?,
        ));
    }
    if let Some(state) = p.get("recorded") {
        return Ok(Target::Recorded(state.clone()));
    }
    if let Some(r) = p.get("working_ref").and_then(Value::as_str) {
        return Ok(Target::WorkingRef(r.to_string()));
    }
    if p.get("base").is_some() {
        return Ok(Target::Base);
    }
    Err(bad())
}

/// Keys whose committed state changed since this workspace forked: the
/// manifest no longer records the state its working ref stands on. Your own
/// commits update `base_states`, so they never make you stale.
pub fn stale_keys(ws: &WorkspaceState, manifests: &BTreeMap<String, Manifest>) -> Vec<String> {
    let trunk_or_none = ws.bookmark.is_none();
    if trunk_or_none {
        return Vec::new();
    }
    ws.base_states
        .iter()
        .filter(|(k, base)| match manifests.get(*k) {
            Some(m) => m.state.as_ref() != Some(base),
            // A removed object forks nothing; it cannot make the copy stale.
            None => false,
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Refuse a write (a writable open, a commit) from a stale working copy,
/// given the working tree's manifests (the caller's read, not another).
pub fn refuse_if_stale(ws: &WorkspaceState, manifests: &BTreeMap<String, Manifest>) -> Result<()> {
    let stale = stale_keys(ws, manifests);
    if stale.is_empty() {
        return Ok(());
    }
    Err(TetherError::refused(format!(
        "working copy is stale: the committed state of {} changed since this workspace forked",
        stale.join(", ")
    ))
    .hint("`tether new` reforks from the new state; write after that"))
}

/// The first writable open of an object whose fork `new` deferred: create the
/// branch `new` decided on from the pin (resetting an existing branch only
/// from the head `new` reviewed), and move the entry from `pending_forks` to
/// `working_refs`. Journaled like every store write, so `undo` can delete a
/// branch it created. Returns the working ref; an object with no pending
/// fork returns the working ref it already has.
pub async fn materialize_fork(repo: &Repo, key: &str) -> Result<Option<String>> {
    let locks = repo.lock()?;
    let mut ws = repo.workspace()?;
    if let Some(r) = ws.working_refs.get(key) {
        return Ok(Some(r.clone()));
    }
    let Some(mut name) = ws.pending_forks.get(key).cloned() else {
        return Ok(None);
    };
    let manifests = repo.manifests()?;
    refuse_if_stale(&ws, &manifests)?;
    let m = manifests
        .get(key)
        .ok_or_else(|| TetherError::no_such_object(key, manifests.keys().map(String::as_str)))?;
    // A sibling in the same branch scope may already have made the branch.
    let sibling_made_it = ws.working_refs.values().any(|r| r == &name) && {
        let client = repo.client(m).await?;
        let scope = client
            .branch_scope()
            .await
            .map_err(|e| TetherError::backend(key, e))?;
        let mut same = false;
        for (other, r) in &ws.working_refs {
            if r != &name {
                continue;
            }
            if let Some(om) = manifests.get(other)
                && om.kind == m.kind
            {
                let oc = repo.client(om).await?;
                if oc.branch_scope().await.ok().as_deref() == Some(scope.as_str()) {
                    same = true;
                }
            }
        }
        same
    };
    let pre = json!({
        "working_refs": {key: Value::Null},
        "pending_forks": {key: name},
        "pending_resets": {key: ws.pending_resets.get(key)},
    });
    let journal = repo.journal()?;
    let mut op = journal.start(NewOp::new("open").pre("workspace", pre))?;
    if !sibling_made_it {
        let (source, _) = fork_source(m).ok_or_else(|| {
            TetherError::refused(format!("{key} has no committed state to fork from"))
                .hint("commit it first")
        })?;
        let client = repo.client(m).await?;
        let expected = match ws.pending_resets.get(key) {
            Some(head) => Expected::At(Value::Object(head.clone())),
            None => Expected::Absent,
        };
        let created = matches!(expected, Expected::Absent);
        let forked = match client.fork(&source, &name, &expected).await {
            Err(BackendError::RefMoved(_))
                if forked_by_interrupted_open(repo, op.id(), &client, key, &name, m).await? =>
            {
                Ok(name.clone())
            }
            other => other,
        };
        // The backend may have forked a later generation (`name.2`: Lance
        // cannot reset a branch a tag references); record what it made.
        let made = forked.map_err(|e| match e {
            BackendError::RefMoved(detail) => TetherError::refused(format!(
                "{key}: branch {name} moved since `tether new` reviewed it ({detail})"
            ))
            .hint("run `tether new` again to decide with the head in view"),
            BackendError::NotFound(detail) => TetherError::refused(format!(
                "{key}: pin missing: cannot fork {name} ({detail})"
            ))
            .hint(format!(
                "`tether repair {key}` recreates the pin while the store still has the state"
            )),
            other => TetherError::backend(key, other),
        })?;
        name = made;
        op.progress(json!({
            "forked": key,
            "ref": name,
            "created": created,
            "reset_from": ws.pending_resets.get(key),
        }))?;
    }
    ws.pending_forks.remove(key);
    ws.pending_resets.remove(key);
    ws.working_refs.insert(key.to_string(), name.clone());
    repo.save_workspace(&locks, &ws)?;
    op.finish(json!({"summary": format!("forked {key}"), "working_refs": {key: &name}}))?;
    Ok(Some(name))
}

/// Whether an interrupted `open` of `key` (an INCOMPLETE entry other than
/// `running`) already forked `name`, and nothing was written on it since:
/// its head is still the state it was forked from. A killed open leaves
/// exactly that, and running `open` again adopts the branch instead of
/// refusing it as moved (spec 14, "An interrupted command").
async fn forked_by_interrupted_open(
    repo: &Repo,
    running: &str,
    client: &ObjectClient,
    key: &str,
    name: &str,
    m: &Manifest,
) -> Result<bool> {
    let interrupted = repo.journal()?.incomplete()?.iter().any(|e| {
        e.id != running
            && e.command == "open"
            && e.pre
                .get("workspace")
                .and_then(|w| w.get("pending_forks"))
                .and_then(|p| p.get(key))
                .and_then(Value::as_str)
                == Some(name)
    });
    let Some((_, state)) = fork_source(m) else {
        return Ok(false);
    };
    if !interrupted {
        return Ok(false);
    }
    let Ok(Some(head)) = branch_head(client, name).await else {
        return Ok(false);
    };
    let plugins = repo.plugins().await?;
    let Some(plugin) = plugins.get(&m.kind) else {
        return Ok(false);
    };
    let descriptor = plugin.descriptor();
    Ok(content_key(&head, descriptor) == content_key(&state, descriptor))
}

/// A state's content (volatile keys removed) as canonical text: equal for
/// the same data however the backend described it.
pub fn content_key(state: &Value, descriptor: &Descriptor) -> String {
    crate::model::canonical::to_string(&content_of(state, descriptor))
}

/// Every (key, [`content_key`]) some visible commit recorded: a branch head
/// among them holds no write that a commit does not pin.
pub fn committed_states(
    repo: &Repo,
    descriptors: &BTreeMap<String, Descriptor>,
) -> Result<BTreeSet<(String, String)>> {
    let mut out = BTreeSet::new();
    for (_, manifests) in super::history::history_manifests(repo)? {
        for (k, m) in manifests.iter() {
            if let (Some(state), Some(d)) = (&m.state, descriptors.get(&m.kind)) {
                out.insert((k.clone(), content_key(&Value::Object(state.clone()), d)));
            }
        }
    }
    Ok(out)
}

/// A state with its volatile keys removed, for comparing two states.
pub fn content_of(state: &Value, descriptor: &Descriptor) -> Value {
    match state {
        Value::Object(map) => Value::Object(content(map, descriptor)),
        other => other.clone(),
    }
}

/// Run every `fork` action of a plan concurrently, journaling a progress
/// record (`forked`, `ref`, `created`, `reset_from`) for each that landed:
/// what `undo` reads to delete a branch an operation created. Returns the
/// keys that forked with the branch each made (a backend may make a later
/// generation of the name asked for) and the failures by key; the rest
/// landed either way.
pub async fn apply_forks(
    repo: &Repo,
    plan: &crate::plan::Plan,
    manifests: &BTreeMap<String, Manifest>,
    op: &mut crate::oplog::OpHandle,
) -> Result<(BTreeMap<String, String>, Vec<(String, BackendError)>)> {
    let forks: Vec<&crate::plan::Action> = plan
        .actions
        .iter()
        .filter(|a| a.verb == crate::plan::verb::FORK)
        .collect();
    let mut calls = Vec::new();
    for a in &forks {
        let m = manifests.get(&a.key).ok_or_else(|| {
            TetherError::no_such_object(&a.key, manifests.keys().map(String::as_str))
        })?;
        let client = repo.client(m).await?;
        let source = source_from_param(a.params.get("source"))?;
        let expected = expected_from_param(a.params.get("expected"));
        let name = a.target.clone();
        calls.push((a.key.clone(), async move {
            client.fork(&source, &name, &expected).await
        }));
    }
    let mut forked = BTreeMap::new();
    let mut failures = Vec::new();
    for (k, r) in crate::plugin::fan_out(calls).await.results {
        match r {
            Ok(name) => {
                let a = forks
                    .iter()
                    .find(|a| a.key == k)
                    .expect("results come from actions");
                op.progress(json!({
                    "forked": k,
                    "ref": name,
                    "created": !a.params.contains_key("reset_from"),
                    "reset_from": a.params.get("reset_from"),
                }))?;
                forked.insert(k, name);
            }
            Err(e) => failures.push((k, e)),
        }
    }
    Ok((forked, failures))
}
