//! `tether add`: register an object. Writes its manifest and nothing else;
//! the first command to contact the store is `status`. Journaled with the
//! manifest it wrote, so `tether undo` can take it back.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::{FileMode, Manifest, PinMode, Policy, key, manifest};
use crate::oplog::NewOp;
use crate::plugin::Descriptor;

/// What `tether add` was given.
#[derive(Debug, Clone, Default)]
pub struct AddRequest {
    /// The positionals as typed: `[KEY] [LOCATOR]`.
    pub positionals: Vec<String>,
    pub kind: String,
    /// Locator fields from named options and `--set k=v`, in order.
    pub fields: Vec<(String, String)>,
    pub at: Option<String>,
    pub file: Option<FileMode>,
    pub pin: Option<PinMode>,
    /// The directory relative local paths are resolved against.
    pub cwd: PathBuf,
    /// `--create` (experimental): make an empty store there first, marked as
    /// this dataset's.
    pub create: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AddReport {
    pub key: String,
    pub kind: String,
    pub locator: Value,
    pub policy: Policy,
    /// Said once, at add: the kind is experimental.
    pub note: Option<String>,
    /// `--create`: the store's initial state, and the working branch forked
    /// at once on a bookmark.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_ref: Option<String>,
}

/// The key and locator `req` names, as `add` writes them (before any check
/// against the dataset).
fn key_and_locator(
    req: &AddRequest,
    descriptor: &Descriptor,
) -> Result<(String, Map<String, Value>)> {
    let path_kind = key::derives_key(&req.kind);
    let mut locator = Map::new();
    for (k, v) in &req.fields {
        locator.insert(k.clone(), Value::String(v.clone()));
    }
    let path_given = locator.contains_key("uri") || locator.contains_key("path");
    let (explicit_key, positional_locator) = match req.positionals.as_slice() {
        [] => (None, None),
        [one] if path_kind && !path_given => (None, Some(one.clone())),
        [one] => (Some(one.clone()), None),
        [k, l] => (Some(k.clone()), Some(l.clone())),
        more => {
            return Err(
                TetherError::refused(format!("too many arguments ({})", more.len()))
                    .hint("`tether add [KEY] [LOCATOR] --kind KIND`"),
            );
        }
    };
    if let Some(l) = positional_locator {
        locator.insert("uri".into(), Value::String(l));
    }
    if let Some(at) = &req.at {
        if at.trim().is_empty() {
            return Err(TetherError::refused("--at is empty")
                .hint("give a snapshot id, version, commit or tag (an unset variable, perhaps?)"));
        }
        locator.insert("at".into(), Value::String(at.clone()));
    }
    resolve_local_paths(&mut locator, descriptor, &req.cwd);
    let key = match explicit_key {
        Some(k) => k,
        None if path_kind => {
            let path = ["uri", "path"]
                .iter()
                .find_map(|f| locator.get(*f).and_then(Value::as_str))
                .ok_or_else(|| {
                    TetherError::refused(format!(
                        "give a LOCATOR (the path) for the {} object",
                        req.kind
                    ))
                })?;
            key::derive_key(&req.kind, path)?
        }
        None => {
            return Err(TetherError::refused("give the object a KEY").hint(format!(
                "`tether add KEY --kind {}` (only path kinds derive one)",
                req.kind
            )));
        }
    };
    Ok((key, locator))
}

/// `add --pick`: the newest `limit` entries of the history of the object
/// `req` names (its upstream branch; `at` is what is being chosen), the
/// locator validated first, as `log` reads an unregistered object.
pub async fn history(
    repo: &Repo,
    req: &AddRequest,
    limit: u32,
) -> Result<(String, Vec<crate::plugin::HistoryEntry>)> {
    let plugin = repo.plugin(&req.kind).await?;
    let req = AddRequest {
        at: None,
        ..req.clone()
    };
    let (key, locator) = key_and_locator(&req, plugin.descriptor())?;
    let client = repo.client_for_key(&plugin, &Value::Object(locator), &key);
    client
        .validate_locator()
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    let entries = client
        .history(None, limit)
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    Ok((key, entries))
}

pub async fn add(repo: &Repo, req: AddRequest) -> Result<AddReport> {
    let plugin = repo.plugin(&req.kind).await?;
    let descriptor = plugin.descriptor().clone();
    let (key, locator) = key_and_locator(&req, &descriptor)?;
    key::validate_key(&key)?;
    refuse_checkout_overlap(repo, &plugin, &locator, &key)?;
    let locks = repo.lock()?;
    // Uniqueness by path: the key names one file, so add reads no other
    // manifest (it touches what it writes, whatever the dataset's size).
    if manifest::manifest_exists(&repo.layout.objects_dir(), &key)? {
        return Err(TetherError::KeyTaken { key });
    }
    let locator_value = Value::Object(locator.clone());
    repo.client_for_key(&plugin, &locator_value, &key)
        .validate_locator()
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    let defaults = repo.config.defaults;
    let policy = Policy {
        file: req.file.unwrap_or(defaults.file),
        pin: req.pin.unwrap_or(defaults.pin),
    };
    if req.file == Some(FileMode::Versioned) {
        check_versioned(repo, &plugin, &locator_value, &key, policy).await?;
    }
    let mut m = Manifest::new(&req.kind, locator, policy);
    // Journaled like every write tether can undo: no manifest before, this
    // one after (`undo add` removes it while it is still this one).
    let mut manifests_before = Map::new();
    manifests_before.insert(key.clone(), Value::Null);
    let mut op = repo
        .journal()?
        .start(NewOp::new("add").pre("manifests", Value::Object(manifests_before)))?;
    let (created, working_ref) = if req.create {
        let (state, working_ref) =
            create_store(repo, &locks, &plugin, &key, &locator_value, &mut op).await?;
        m.origin = crate::model::Origin::Created;
        (Some(state), working_ref)
    } else {
        (None, None)
    };
    manifest::write_manifest(&repo.layout.objects_dir(), &key, &m)?;
    op.finish(json!({
        "summary": format!("added {key} [{}]", req.kind),
        "manifests": {key.as_str(): m.to_json()},
    }))?;
    let note = super::backends::experimental_note(&plugin)
        .map(|n| format!("the {} backend is {n}", req.kind));
    Ok(AddReport {
        key,
        kind: req.kind,
        locator: locator_value,
        policy,
        note,
        created,
        working_ref,
    })
}

/// `add --file versioned` on a single remote object asks for it Addressable
/// through its store's version id (spec/11, `file`): the backend's
/// `effective-capabilities` refuses a store that keeps no versions of it.
/// Local paths and prefixes stay Observed under the policy (spec/14: a
/// versioned directory is a mutable one, its drift no error), so nothing is
/// refused for them here.
async fn check_versioned(
    repo: &Repo,
    plugin: &std::sync::Arc<crate::plugin::Plugin>,
    locator: &Value,
    key: &str,
    policy: Policy,
) -> Result<()> {
    let policy = json!({"file": policy.file.as_str(), "pin": policy.pin.as_str()});
    repo.client_for_key(plugin, locator, key)
        .effective_capabilities(&policy)
        .await
        .map_err(|e| TetherError::backend(key, e))?;
    Ok(())
}

/// `add --create`: make the store (refused where anything exists), record it
/// in `tether-created.jsonl` with the bookmark it was made on, and on a
/// bookmark other than the trunk fork its working branch at once, so the
/// first writable open lands on it. Journaled, so `undo add` can take a
/// still-empty store away again.
async fn create_store(
    repo: &Repo,
    locks: &crate::lock::Locks,
    plugin: &std::sync::Arc<crate::plugin::Plugin>,
    key: &str,
    locator: &Value,
    op: &mut crate::oplog::OpHandle,
) -> Result<(Value, Option<String>)> {
    let descriptor = plugin.descriptor();
    if !descriptor.has("CREATE") {
        return Err(TetherError::refused(format!("the {} backend cannot create a store (no CREATE capability)", descriptor.kind)).hint("make it with the              system's own tools, then `tether add` it without --create"));
    }
    let client = repo.client_for_key(plugin, locator, key);
    let identity = client
        .identity()
        .await
        .map_err(|e| TetherError::backend(key, e))?;
    let mut ws = repo.workspace()?;
    let state = client
        .create(repo.dataset_id())
        .await
        .map_err(|e| TetherError::backend(key, e))?;
    op.progress(
        serde_json::json!({"created_store": key, "kind": descriptor.kind, "locator": locator}),
    )?;
    let record = crate::oplog::index::CreatedStore {
        dataset_id: repo.dataset_id().to_string(),
        kind: descriptor.kind.clone(),
        identity: identity.clone(),
        locator: locator.clone(),
        key: key.to_string(),
        bookmark: ws.bookmark.clone(),
        at: crate::model::time::now_timestamp(),
    };
    crate::oplog::index::append_created(repo.vcs.shared_dir(), &record)?;
    let mut working_ref = None;
    let on_bookmark = ws
        .bookmark
        .as_deref()
        .is_some_and(|b| b != repo.config.trunk);
    if on_bookmark && descriptor.has("FORK") {
        let bookmark = ws.bookmark.clone().expect("on a bookmark");
        let name = crate::model::ids::working_ref(repo.dataset_id(), &bookmark);
        client
            .fork(
                &crate::plugin::Target::Base,
                &name,
                &crate::plugin::Expected::Absent,
            )
            .await
            .map_err(|e| TetherError::backend(key, e))?;
        op.progress(
            serde_json::json!({"forked": key, "ref": name, "created": true, "reset_from": null}),
        )?;
        ws.working_refs.insert(key.to_string(), name.clone());
        if let Some(s) = state.as_object() {
            ws.fork_points.insert(key.to_string(), s.clone());
        }
        repo.save_workspace(locks, &ws)?;
        crate::oplog::index::append_touched(
            repo.vcs.shared_dir(),
            &crate::oplog::index::TouchedStore {
                dataset_id: repo.dataset_id().to_string(),
                kind: descriptor.kind.clone(),
                identity,
                locator: locator.clone(),
                key: key.to_string(),
                at: crate::model::time::now_timestamp(),
            },
        )?;
        working_ref = Some(name);
    }
    Ok((state, working_ref))
}

/// A directory the plugin gets as a real filesystem (its `describe-fs` keys,
/// e.g. a git object's `path`, and the directory of its `remote`) must lie
/// outside the dataset's checkout and must not contain it: the checkout's
/// files came with the clone, and the plugin writes where it is granted
/// (spec/10, "Security model").
fn refuse_checkout_overlap(
    repo: &Repo,
    plugin: &crate::plugin::Plugin,
    locator: &Map<String, Value>,
    key: &str,
) -> Result<()> {
    let checkout = repo
        .vcs
        .root()
        .canonicalize()
        .unwrap_or_else(|_| repo.vcs.root().to_path_buf());
    let locator = Value::Object(locator.clone());
    let secret = repo.secrets().object_entry(key, None);
    for (field, raw) in plugin.filesystem_dirs(&locator, &secret) {
        let path = Path::new(&raw);
        let resolved = path.canonicalize().unwrap_or_else(|_| normalize(path));
        if resolved.starts_with(&checkout) || checkout.starts_with(&resolved) {
            return Err(TetherError::refused(format!(
                "{key}: {field} = {raw} overlaps the dataset's checkout ({})",
                checkout.display()
            ))
            .hint(format!(
                "a {} object must \
                 live outside it (do not register the repository the dataset lives in; every \
                 `tether commit` would move it)",
                plugin.kind()
            )));
        }
    }
    Ok(())
}

/// A relative local path is resolved against the directory `add` ran in and
/// stored absolute, and `~` is expanded, so a committed locator means one path
/// from every directory and clone. URLs and absolute paths stay as given.
pub(crate) fn resolve_local_paths(
    locator: &mut Map<String, Value>,
    descriptor: &Descriptor,
    cwd: &Path,
) {
    for field in &descriptor.local_path_keys {
        let Some(Value::String(raw)) = locator.get(field) else {
            continue;
        };
        let (prefix, path) = descriptor
            .local_path_prefixes
            .iter()
            .find_map(|p| {
                raw.strip_prefix(p.as_str())
                    .map(|rest| (p.clone(), rest.to_string()))
            })
            .unwrap_or_else(|| (String::new(), raw.clone()));
        if path.contains("://") || path.is_empty() {
            continue;
        }
        // Where a backend names its path prefixes, a value under another
        // scheme (DuckLake's `ducklake:postgres:dbname=...`) is no path.
        if prefix.is_empty() && !descriptor.local_path_prefixes.is_empty() && has_scheme(&path) {
            continue;
        }
        let expanded = match path.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => dirs::home_dir()
                .map(|h| format!("{}{rest}", h.display()))
                .unwrap_or(path.clone()),
            _ => path.clone(),
        };
        let p = Path::new(&expanded);
        if p.is_absolute() {
            if expanded != path {
                locator.insert(field.clone(), Value::String(format!("{prefix}{expanded}")));
            }
            continue;
        }
        let joined = normalize(&cwd.join(p));
        let mut text = joined.display().to_string();
        // A trailing `/` means a prefix or directory to some backends; keep it.
        if path.ends_with('/') && !text.ends_with('/') {
            text.push('/');
        }
        locator.insert(field.clone(), Value::String(format!("{prefix}{text}")));
    }
}

/// Whether `value` starts with a URI-style scheme (`postgres:`, at least two
/// letters, so a Windows drive letter is not one).
fn has_scheme(value: &str) -> bool {
    value.split_once(':').is_some_and(|(scheme, _)| {
        scheme.len() >= 2
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// Lexical normalisation (`.` and `..`), without touching the filesystem: the
/// path may not exist yet, and identities resolve symlinks later.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
