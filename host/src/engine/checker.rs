//! The engine's answers to a plan's preconditions: what the checkout, the VCS
//! and the stores hold now. Store questions are plugin calls; the plan module
//! asks synchronously, so they run to completion on the current runtime,
//! which must be tokio's multi-threaded one (as the CLI's is).

use serde_json::Value;

use super::repo::Repo;
use crate::model::manifest;
use crate::plan::{PreconditionChecker, Store};

pub struct Checker<'a> {
    pub repo: &'a Repo,
}

fn block<F: Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

impl Checker<'_> {
    fn fingerprint(&self, store: &Store, r#ref: &str) -> Result<Option<Value>, String> {
        block(async {
            let plugin = self
                .repo
                .plugin(&store.backend)
                .await
                .map_err(|e| e.to_string())?;
            let client = self.repo.client_for(&plugin, &store.locator);
            let working_ref = (!r#ref.is_empty()).then_some(r#ref);
            match client.fingerprint(working_ref).await {
                Ok(state) => Ok(Some(state)),
                Err(crate::plugin::BackendError::NotFound(_)) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

impl PreconditionChecker for Checker<'_> {
    fn workspace_id(&mut self) -> Result<String, String> {
        self.repo
            .workspace()
            .map(|w| w.workspace_id)
            .map_err(|e| e.to_string())
    }

    fn workspace_bookmark(&mut self) -> Result<Option<String>, String> {
        self.repo
            .workspace()
            .map(|w| w.bookmark)
            .map_err(|e| e.to_string())
    }

    fn manifest_hash(&mut self) -> Result<String, String> {
        self.repo
            .manifests()
            .map(|m| manifest::manifest_hash(&m))
            .map_err(|e| e.to_string())
    }

    fn history_digest(&mut self) -> Result<String, String> {
        self.repo.vcs.history_digest().map_err(|e| e.to_string())
    }

    fn vcs_head(&mut self, rev: &str) -> Result<Option<String>, String> {
        match self.repo.vcs.resolve(rev) {
            Ok(id) => Ok(Some(id.to_string())),
            Err(crate::vcs::VcsError::UnknownRevision { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn bookmark_head(&mut self, bookmark: &str) -> Result<Option<String>, String> {
        self.repo
            .vcs
            .branch_head(bookmark)
            .map(|c| c.map(|c| c.to_string()))
            .map_err(|e| e.to_string())
    }

    fn ref_head(
        &mut self,
        _key: &str,
        store: &Store,
        r#ref: &str,
    ) -> Result<Option<Value>, String> {
        self.fingerprint(store, r#ref)
    }
}
