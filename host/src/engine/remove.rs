//! `tether remove KEY`: delete the manifest and nothing else. A plain `gc`
//! later forgets its working ref; `gc --prune-bookmarks` judges its branch.

use super::error::{Result, TetherError};
use super::repo::Repo;
use crate::model::manifest;

pub fn remove(repo: &Repo, key: &str) -> Result<()> {
    let _locks = repo.lock()?;
    if !repo.manifests()?.contains_key(key) {
        return Err(TetherError::NoSuchObject {
            key: key.to_string(),
        });
    }
    manifest::remove_manifest(&repo.layout.objects_dir(), key)?;
    Ok(())
}
