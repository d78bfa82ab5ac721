//! `tether add`: register an object. Writes its manifest and nothing else;
//! the first command to contact the store is `status`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::{FileMode, Manifest, PinMode, Policy, key, manifest};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct AddReport {
    pub key: String,
    pub kind: String,
    pub locator: Value,
    pub policy: Policy,
    /// Said once, at add: the kind is experimental.
    pub note: Option<String>,
}

pub async fn add(repo: &Repo, req: AddRequest) -> Result<AddReport> {
    let plugin = repo.plugin(&req.kind).await?;
    let descriptor = plugin.descriptor().clone();
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
            return Err(TetherError::Refused(format!(
                "too many arguments ({}): `tether add [KEY] [LOCATOR] --kind KIND`",
                more.len()
            )));
        }
    };
    if let Some(l) = positional_locator {
        locator.insert("uri".into(), Value::String(l));
    }
    if let Some(at) = &req.at {
        if at.trim().is_empty() {
            return Err(TetherError::Refused(
                "--at is empty: give a snapshot id, version, commit or tag (an unset variable, perhaps?)".into(),
            ));
        }
        locator.insert("at".into(), Value::String(at.clone()));
    }
    resolve_local_paths(&mut locator, &descriptor, &req.cwd);
    let key = match explicit_key {
        Some(k) => k,
        None if path_kind => {
            let path = ["uri", "path"]
                .iter()
                .find_map(|f| locator.get(*f).and_then(Value::as_str))
                .ok_or_else(|| {
                    TetherError::Refused(format!(
                        "give a LOCATOR (the path) for the {} object",
                        req.kind
                    ))
                })?;
            key::derive_key(&req.kind, path)?
        }
        None => {
            return Err(TetherError::Refused(format!(
                "give the object a KEY: `tether add KEY --kind {}` (only path kinds derive one)",
                req.kind
            )));
        }
    };
    key::validate_key(&key)?;
    let _locks = repo.lock()?;
    if repo.manifests()?.contains_key(&key) {
        return Err(TetherError::KeyTaken { key });
    }
    let locator_value = Value::Object(locator.clone());
    repo.client_for(&plugin, &locator_value)
        .validate_locator()
        .await
        .map_err(|e| TetherError::backend(&key, e))?;
    let defaults = repo.config.defaults;
    let policy = Policy {
        file: req.file.unwrap_or(defaults.file),
        pin: req.pin.unwrap_or(defaults.pin),
    };
    let m = Manifest::new(&req.kind, locator, policy);
    manifest::write_manifest(&repo.layout.objects_dir(), &key, &m)?;
    let note = (descriptor.maturity == "experimental").then(|| {
        format!("the {} backend is experimental: it is tested against a fake of its service, not the service itself", req.kind)
    });
    Ok(AddReport {
        key,
        kind: req.kind,
        locator: locator_value,
        policy,
        note,
    })
}

/// A relative local path is resolved against the directory `add` ran in and
/// stored absolute, and `~` is expanded, so a committed locator means one path
/// from every directory and clone. URLs and absolute paths stay as given.
fn resolve_local_paths(locator: &mut Map<String, Value>, descriptor: &Descriptor, cwd: &Path) {
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
