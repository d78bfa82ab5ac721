//! `tether remove KEY`: delete the manifest and nothing else. A plain `gc`
//! later forgets its working ref; `gc --prune-bookmarks` judges its branch.
//! Journaled with the manifest it deleted, so `tether undo` puts it back.

use serde_json::{Map, Value, json};

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::manifest;
use crate::oplog::NewOp;

pub fn remove(repo: &Repo, key: &str) -> Result<()> {
    let _locks = repo.lock()?;
    let manifests = repo.manifests()?;
    let Some(m) = manifests.get(key) else {
        return Err(TetherError::no_such_object(
            key,
            manifests.keys().map(String::as_str),
        ));
    };
    let mut before = Map::new();
    before.insert(key.to_string(), m.to_json());
    let op = repo
        .journal()?
        .start(NewOp::new("remove").pre("manifests", Value::Object(before)))?;
    manifest::remove_manifest(&repo.layout.objects_dir(), key)?;
    op.finish(json!({
        "summary": format!("removed {key}"),
        "manifests": {key: Value::Null},
    }))?;
    Ok(())
}
