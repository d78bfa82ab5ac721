//! `tether snapshot` (and the snapshot step of `status` and `commit`):
//! fingerprint objects at this checkout's working refs, concurrently, and
//! cache the states (and failures) in `workspace.toml`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::{Repo, content};
use crate::model::{FileMode, Manifest, WorkspaceState, time, workspace::SnapshotError};
use crate::plugin::{BackendError, ObjectClient, fan_out};

/// One object's fresh fingerprint, or why it failed.
pub type Fingerprints = BTreeMap<String, std::result::Result<Map<String, Value>, String>>;

/// Fingerprint the given objects concurrently at their working refs.
pub async fn fingerprint(
    repo: &Repo,
    ws: &WorkspaceState,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
) -> Result<Fingerprints> {
    let (states, _) = fingerprint_with(repo, ws, manifests, keys, None::<NoMore>).await?;
    Ok(states)
}

/// What [`fingerprint_with`] asks nothing more with.
type NoMore = fn(&Manifest, ObjectClient) -> std::future::Ready<Option<()>>;

/// [`fingerprint`], and for each object fingerprinted without error, what
/// `also` asks of its store right after, with the same client: which keeps
/// its instance between the calls ([`ObjectClient::resident`]), so an object
/// costs one instantiation, not one per question. `None` from `also` (a
/// question that failed) leaves the object out of the second map, for the
/// caller to ask again and report as it would have.
pub async fn fingerprint_with<T, A, Fut>(
    repo: &Repo,
    ws: &WorkspaceState,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
    also: Option<A>,
) -> Result<(Fingerprints, BTreeMap<String, T>)>
where
    T: Send + 'static,
    A: Fn(&Manifest, ObjectClient) -> Fut,
    Fut: Future<Output = Option<T>> + Send + 'static,
{
    let mut calls = Vec::new();
    let mut out = Fingerprints::new();
    for key in keys {
        let m = &manifests[key];
        if let Some(state) = at_its_pin(repo, ws, key, m) {
            out.insert(key.clone(), Ok(state));
            continue;
        }
        match repo.client(m).await {
            Ok(client) => {
                let working_ref = Repo::working_ref(ws, key);
                let (client, more) = match &also {
                    Some(also) => {
                        let client = client.resident();
                        let more = also(m, client.clone());
                        (client, Some(more))
                    }
                    None => (client, None),
                };
                calls.push((key.clone(), async move {
                    let state = client.fingerprint(working_ref.as_deref()).await?;
                    let map = match state {
                        Value::Object(map) => map,
                        other => {
                            return Err(BackendError::Other(format!(
                                "the backend returned a state that is not an object: {other}"
                            )));
                        }
                    };
                    let more = match more {
                        Some(more) => more.await,
                        None => None,
                    };
                    Ok((map, more))
                }));
            }
            // An unknown kind fails its object, not the whole status.
            Err(e @ TetherError::UnknownKind { .. }) => {
                out.insert(key.clone(), Err(e.to_string()));
            }
            // So does a pinned plugin this checkout refuses (untrusted,
            // missing): its objects are left out of the snapshot, and
            // `status` names the refusal on each of them.
            Err(_) if refused_pin(repo, &m.kind).await => {}
            Err(e) => return Err(e),
        }
    }
    let mut more = BTreeMap::new();
    for (key, result) in fan_out(calls).await.results {
        let state = match result {
            Ok((state, Some(extra))) => {
                more.insert(key.clone(), extra);
                Ok(state)
            }
            Ok((state, None)) => Ok(state),
            Err(e) => Err(e.to_string()),
        };
        out.insert(key, state);
    }
    Ok((out, more))
}

/// Whether `kind` is pinned to a plugin this checkout refuses to run.
pub(crate) async fn refused_pin(repo: &Repo, kind: &str) -> bool {
    repo.config.plugins.contains_key(kind)
        && repo
            .plugin_resolution()
            .await
            .is_ok_and(|r| r.refused.contains_key(kind))
}

/// An object's position when it is not read from a branch: on a bookmark
/// other than the trunk, an object with no working ref of its own (a fork
/// `new` deferred, a system with no branches) sits at the state its last
/// commit recorded, and is not contacted (spec/06, "Positions").
fn at_its_pin(
    repo: &Repo,
    ws: &WorkspaceState,
    key: &str,
    m: &Manifest,
) -> Option<Map<String, Value>> {
    let bookmark = ws.bookmark.as_deref()?;
    if bookmark == repo.config.trunk || ws.working_refs.contains_key(key) {
        return None;
    }
    m.state.clone()
}

/// Fingerprint and store the results in the workspace's snapshot cache; the
/// other objects' cached states stay as they were.
///
/// The fingerprints are taken without the checkout lock (a store may be
/// slow), so the cache is written through [`Repo::update_workspace`]: under
/// the lock, into the file as it is by then, and only if this checkout still
/// stands where `ws` said (same bookmark and working refs). A `new` that
/// moved it meanwhile keeps everything it wrote, and the fingerprints of the
/// old position are not cached for the new one. `ws` gets them either way:
/// they are what this command read.
pub async fn snapshot(
    repo: &Repo,
    ws: &mut WorkspaceState,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
) -> Result<Fingerprints> {
    let states = fingerprint(repo, ws, manifests, keys).await?;
    let upstream = upstream_heads(repo, ws, manifests, keys).await?;
    record_upstream(ws, keys, &upstream);
    let read_at = position(ws);
    repo.update_workspace(|now| {
        if position(now) == read_at {
            record_upstream(now, keys, &upstream);
        }
    })?;
    cache(repo, ws, &states)?;
    Ok(states)
}

/// On the trunk, the upstream heads of the committed `--at` objects among
/// `keys`: each read without `at`, as a trunk `pull` reads it, so `status`
/// can say `behind` when the system moved past the pin (spec/09). A head
/// that cannot be read is left out: the object itself, at its pin, was read.
async fn upstream_heads(
    repo: &Repo,
    ws: &WorkspaceState,
    manifests: &BTreeMap<String, Manifest>,
    keys: &[String],
) -> Result<BTreeMap<String, Map<String, Value>>> {
    if ws.bookmark.as_deref() != Some(repo.config.trunk.as_str()) {
        return Ok(BTreeMap::new());
    }
    let heads: BTreeMap<String, Manifest> = keys
        .iter()
        .map(|k| (k, &manifests[k]))
        .filter(|(_, m)| m.is_committed() && m.locator.contains_key("at"))
        .map(|(k, m)| {
            let mut head = m.clone();
            head.locator.remove("at");
            (k.clone(), head)
        })
        .collect();
    if heads.is_empty() {
        return Ok(BTreeMap::new());
    }
    let head_keys: Vec<String> = heads.keys().cloned().collect();
    let mut reading = ws.clone();
    reading.working_refs.clear();
    Ok(fingerprint(repo, &reading, &heads, &head_keys)
        .await?
        .into_iter()
        .filter_map(|(k, r)| Some((k, r.ok()?)))
        .collect())
}

/// Put the upstream heads read for `keys` into the cache; a key with none
/// (not an `--at` object, off the trunk, unreadable) loses its old one.
fn record_upstream(
    ws: &mut WorkspaceState,
    keys: &[String],
    heads: &BTreeMap<String, Map<String, Value>>,
) {
    for k in keys {
        match heads.get(k) {
            Some(head) => ws.last_upstream.insert(k.clone(), head.clone()),
            None => ws.last_upstream.remove(k),
        };
    }
}

/// The upstream head the last snapshot on the trunk read for `key`, an
/// `--at` object: what `status` compares with its pin for `behind`.
pub fn upstream<'a>(
    repo: &Repo,
    ws: &'a WorkspaceState,
    key: &str,
    m: &Manifest,
) -> Option<&'a Map<String, Value>> {
    let trunk = ws.bookmark.as_deref() == Some(repo.config.trunk.as_str());
    (trunk && m.locator.contains_key("at"))
        .then(|| ws.last_upstream.get(key))
        .flatten()
}

/// Whether `m` sits at its pin on the trunk while its system moves on: a
/// committed object whose system has no branches (no `FORK` under its
/// policy: files, Delta, DuckLake). Its fingerprint there is the system's
/// head, which `status` shows as `behind` when it moved, `commit` leaves and
/// a trunk `pull` takes (spec/06, "Positions"; spec/09, `status`).
pub fn branchless_on_trunk(
    repo: &Repo,
    ws: &WorkspaceState,
    descriptor: &crate::plugin::Descriptor,
    m: &Manifest,
) -> bool {
    ws.bookmark.as_deref() == Some(repo.config.trunk.as_str())
        && m.is_committed()
        && !Repo::capabilities(descriptor, m)
            .iter()
            .any(|c| c == "FORK")
}

/// Store fingerprints taken at `ws`'s position in the snapshot cache, as
/// [`snapshot`] does.
pub fn cache(repo: &Repo, ws: &mut WorkspaceState, states: &Fingerprints) -> Result<()> {
    record(ws, states);
    let read_at = position(ws);
    repo.update_workspace(|now| {
        if position(now) == read_at {
            record(now, states);
        }
    })?;
    Ok(())
}

/// Where a checkout reads its objects: what a snapshot's fingerprints
/// depend on.
fn position(
    ws: &WorkspaceState,
) -> (
    &str,
    Option<&str>,
    &BTreeMap<String, String>,
    &BTreeMap<String, String>,
) {
    (
        &ws.workspace_id,
        ws.bookmark.as_deref(),
        &ws.working_refs,
        &ws.pending_forks,
    )
}

/// Put fresh fingerprints into the snapshot cache.
pub fn record(ws: &mut WorkspaceState, states: &Fingerprints) {
    for (key, result) in states {
        match result {
            Ok(state) => {
                ws.last_snapshot.insert(key.clone(), state.clone());
                ws.last_snapshot_errors.remove(key);
            }
            Err(error) => {
                ws.last_snapshot.remove(key);
                let working_ref = ws.working_refs.get(key).cloned().unwrap_or_default();
                ws.last_snapshot_errors.insert(
                    key.clone(),
                    SnapshotError {
                        r#ref: working_ref,
                        error: error.clone(),
                    },
                );
            }
        }
    }
    ws.last_snapshot_at = Some(time::now_timestamp());
}

/// Forget the cached fingerprints of objects whose working branch tether
/// itself just moved (a promote's reset onto a merge, a restore, an undo):
/// the next `status` takes a fresh snapshot instead of showing the old head.
pub fn invalidate<'a>(ws: &mut WorkspaceState, keys: impl IntoIterator<Item = &'a String>) {
    let mut any = false;
    for k in keys {
        ws.last_snapshot.remove(k);
        ws.last_snapshot_errors.remove(k);
        any = true;
    }
    if any {
        ws.last_snapshot_at = None;
    }
}

/// The cached fingerprint of `key`, as the last snapshot left it.
pub fn cached(
    ws: &WorkspaceState,
    key: &str,
) -> Option<std::result::Result<Map<String, Value>, String>> {
    if let Some(e) = ws.last_snapshot_errors.get(key) {
        return Some(Err(e.error.clone()));
    }
    ws.last_snapshot.get(key).map(|s| Ok(s.clone()))
}

/// A `file = "immutable"` object: drift is an error, never a new state.
pub(crate) fn immutable_file(m: &Manifest) -> bool {
    m.kind == "file" && m.policy.file == FileMode::Immutable
}

/// The committed `file = "immutable"` objects among `states` whose content
/// is no longer what their manifest recorded (spec/05, "Drift").
pub(crate) async fn changed_immutables(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    states: &Fingerprints,
) -> Result<Vec<String>> {
    let mut changed = Vec::new();
    for (key, state) in states {
        let Ok(now) = state else { continue };
        let Some(m) = manifests.get(key).filter(|m| immutable_file(m)) else {
            continue;
        };
        let Some(recorded) = &m.state else { continue };
        let descriptor = repo.plugins().await?[&m.kind].descriptor();
        if content(now, descriptor) != content(recorded, descriptor) {
            changed.push(key.clone());
        }
    }
    Ok(changed)
}

/// Refuse when a committed immutable object changed: recording its new state
/// would silently replace an input that must not move. The way out is
/// deliberate: `tether remove KEY`, `add` it again, commit.
pub(crate) async fn refuse_changed_immutables(
    repo: &Repo,
    manifests: &BTreeMap<String, Manifest>,
    states: &Fingerprints,
) -> Result<()> {
    match changed_immutables(repo, manifests, states).await?.first() {
        Some(key) => Err(TetherError::ImmutableModified { key: key.clone() }),
        None => Ok(()),
    }
}
