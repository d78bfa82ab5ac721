//! `tether log KEY [--ref REF] [-n N]` and `tether log LOCATOR --kind KIND
//! [--branch B] [--set k=v]...`: an object's native history (snapshots,
//! versions, commits), newest first, with the branches, tags and pins at each
//! entry. Entry ids are valid `tether add --at` values.
//!
//! A registered object's history starts at `--ref`, else at this checkout's
//! working ref, else at its base (the locator's `at` when it has one, or its
//! branch): the backend's `history` decides what the base means.
//!
//! An unregistered object is described by its locator, built as `add` builds
//! one: the positional is the `uri` field (for a kind that reads no `uri`,
//! its first storage key, e.g. memory's `system`), `--branch` the `branch`
//! field, `--set k=v` any other; a relative local path is taken from the
//! current directory. The locator is validated before the history call.

use std::path::Path;

use serde_json::{Map, Value};

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::plugin::{Descriptor, HistoryEntry};

#[derive(Debug, Clone)]
pub enum LogTarget {
    /// A registered object.
    Key(String),
    /// An unregistered object: kind, positional locator, named fields.
    Locator {
        kind: String,
        locator: String,
        fields: Vec<(String, String)>,
    },
}

#[derive(Debug, Clone)]
pub struct LogOptions {
    pub target: LogTarget,
    pub from_ref: Option<String>,
    pub limit: u32,
    /// Where relative local paths of an unregistered locator resolve.
    pub cwd: std::path::PathBuf,
}

pub async fn log(repo: &Repo, opts: &LogOptions) -> Result<Vec<HistoryEntry>> {
    let from_ref = opts.from_ref.as_deref().filter(|r| !r.trim().is_empty());
    match &opts.target {
        LogTarget::Key(key) => {
            let m = repo.manifest(key)?;
            let client = repo.client(&m).await?;
            let start = match from_ref {
                Some(r) => Some(r.to_string()),
                None => Repo::working_ref(&repo.workspace()?, key),
            };
            client
                .history(start.as_deref(), opts.limit)
                .await
                .map_err(|e| TetherError::backend(key, e))
        }
        LogTarget::Locator {
            kind,
            locator,
            fields,
        } => {
            let plugin = repo.plugin(kind).await?;
            let loc = build_locator(plugin.descriptor(), locator, fields, &opts.cwd);
            let client = repo.client_for(&plugin, &Value::Object(loc));
            client
                .validate_locator()
                .await
                .map_err(|e| TetherError::backend(locator, e))?;
            client
                .history(from_ref, opts.limit)
                .await
                .map_err(|e| TetherError::backend(locator, e))
        }
    }
}

fn build_locator(
    descriptor: &Descriptor,
    positional: &str,
    fields: &[(String, String)],
    cwd: &Path,
) -> Map<String, Value> {
    let mut loc = Map::new();
    for (k, v) in fields {
        loc.insert(k.clone(), Value::String(v.clone()));
    }
    let reads_uri = descriptor.storage_keys.is_empty()
        || descriptor
            .storage_keys
            .iter()
            .chain(&descriptor.local_path_keys)
            .any(|k| k == "uri");
    let field = if reads_uri {
        "uri".to_string()
    } else {
        descriptor.storage_keys[0].clone()
    };
    loc.entry(field.clone())
        .or_insert_with(|| Value::String(positional.to_string()));
    // A relative local path means one from here, as `add` stores it.
    let is_local = descriptor.local_path_keys.contains(&field) || !reads_uri;
    if is_local
        && let Some(Value::String(p)) = loc.get(&field)
        && !p.contains("://")
        && !p.is_empty()
        && Path::new(p).is_relative()
    {
        let abs = cwd.join(p).display().to_string();
        loc.insert(field, Value::String(abs));
    }
    loc
}
