//! What a library caller runs on a [`Repo`] in one call that the CLI runs as
//! commands: the facade methods. They sit with the commands, above the
//! services, so `repo.rs` imports no command module.

use serde_json::Value;

use super::error::Result;
use super::repo::Repo;

impl Repo {
    /// Create the working branch `new` deferred for `key` now, as the first
    /// writable open would (pre-creating branches for a job). Returns the
    /// working ref, or `None` when the object has none on this bookmark.
    pub async fn materialize_fork(&self, key: &str) -> Result<Option<String>> {
        super::fork::materialize_fork(self, key).await
    }

    /// `repo.create(key, kind, locator)` (experimental): `add --create` and a
    /// writable `open` in one call: the store is made empty, marked as this
    /// dataset's, registered under `key`, and its handle returned.
    pub async fn create(
        &self,
        key: &str,
        kind: &str,
        locator: serde_json::Map<String, Value>,
    ) -> Result<super::open::Opened> {
        let req = super::add::AddRequest {
            positionals: vec![key.to_string()],
            kind: kind.to_string(),
            fields: locator
                .into_iter()
                .map(|(k, v)| {
                    let v = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                    (k, v)
                })
                .collect(),
            cwd: self.root().to_path_buf(),
            create: true,
            ..Default::default()
        };
        super::add::add(self, req).await?;
        super::open::open(
            self,
            &super::open::OpenOptions {
                key: key.to_string(),
                ..Default::default()
            },
        )
        .await
    }
}
