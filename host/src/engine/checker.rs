//! The engine's answers to a plan's preconditions: what the checkout, the VCS
//! and the stores hold now. Store questions are plugin calls; the plan module
//! asks synchronously, so they run to completion on the current runtime,
//! which must be tokio's multi-threaded one (as the CLI's is).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::repo::Repo;
use crate::model::{Manifest, canonical, manifest};
use crate::plan::{Plan, Precondition, PreconditionChecker, Store};
use crate::plugin::{BackendError, fan_out};

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
        // Plans name the working copy's commit `HEAD` whatever the VCS (jj calls it `@-`).
        if rev == "HEAD" {
            return self
                .repo
                .vcs
                .head()
                .map(|c| c.map(|c| c.to_string()))
                .map_err(|e| e.to_string());
        }
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

    fn same_state(&mut self, store: &Store, a: &Value, b: &Value) -> bool {
        let volatile = block(async {
            self.repo
                .plugin(&store.backend)
                .await
                .map(|p| p.descriptor().volatile_keys.clone())
        });
        match (volatile, a.as_object(), b.as_object()) {
            (Ok(volatile), Some(a), Some(b)) if !volatile.is_empty() => {
                let keys: Vec<&str> = volatile.iter().map(String::as_str).collect();
                crate::model::ids::content_state(a, &keys)
                    == crate::model::ids::content_state(b, &keys)
            }
            _ => crate::plan::same_json(a, b),
        }
    }

    fn ref_head(
        &mut self,
        _key: &str,
        store: &Store,
        r#ref: &str,
    ) -> Result<Option<Value>, String> {
        self.fingerprint(store, r#ref)
    }

    fn bookmark_holders(&mut self, bookmark: &str) -> Result<Vec<String>, String> {
        let checkouts = super::checkouts::live(self.repo).map_err(|e| e.to_string())?;
        Ok(checkouts
            .iter()
            .filter_map(|c| c.workspace.as_ref())
            .filter(|w| w.bookmark.as_deref() == Some(bookmark))
            .map(|w| w.workspace_id.clone())
            .collect())
    }

    fn store_empty(
        &mut self,
        _key: Option<&str>,
        store: &Store,
        ignore: &[String],
    ) -> Result<Vec<String>, String> {
        block(async {
            let plugin = self
                .repo
                .plugin(&store.backend)
                .await
                .map_err(|e| e.to_string())?;
            match self
                .repo
                .client_for(&plugin, &store.locator)
                .is_ref_empty(ignore)
                .await
            {
                Ok(Some(true)) => Ok(Vec::new()),
                Ok(Some(false)) => Ok(vec!["refs or data beyond what the plan releases".into()]),
                Ok(None) => Ok(vec!["the store cannot tell whether it is empty".into()]),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn ref_present(&mut self, _key: &str, store: &Store, r#ref: &str) -> Result<bool, String> {
        if self.fingerprint(store, r#ref)?.is_none() {
            return Ok(false);
        }
        // A newer generation (`.2`, `.3`) of the same name means the store
        // made a sibling since the plan: the adopted branch is not the live one.
        let refs = block(async {
            let plugin = self
                .repo
                .plugin(&store.backend)
                .await
                .map_err(|e| e.to_string())?;
            self.repo
                .client_for(&plugin, &store.locator)
                .list_working_refs()
                .await
                .map_err(|e| e.to_string())
        })?;
        let (base, mine) = split_generation(r#ref);
        Ok(!refs.iter().any(|r| {
            let (b, g) = split_generation(r);
            b == base && g > mine
        }))
    }

    fn ref_descends(
        &mut self,
        _key: &str,
        store: &Store,
        r#ref: &str,
        state: &Value,
    ) -> Result<bool, String> {
        let Some(head) = self.fingerprint(store, r#ref)? else {
            return Ok(false);
        };
        block(async {
            let plugin = self
                .repo
                .plugin(&store.backend)
                .await
                .map_err(|e| e.to_string())?;
            match self
                .repo
                .client_for(&plugin, &store.locator)
                .ancestor_of(state, &head)
                .await
            {
                Ok(Some(descends)) => Ok(descends),
                Ok(None) => Err(format!(
                    "the store can no longer tell whether {} builds on the pin",
                    r#ref
                )),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

/// Where a `ref_head` answer was read: backend, locator (canonical JSON), ref.
type RefAt = (String, String, String);

/// A [`Checker`] that answers the plan's `ref_head` preconditions from
/// fingerprints read beforehand, all at once and concurrently
/// ([`Checker::reading_ref_heads`]): a commit of thousands of objects checks
/// each store as its plan saw it, and one at a time that was a plugin call
/// after another. Read under the same locks as the check itself, so the
/// answers are as current as asking each in turn; anything else is asked
/// of the [`Checker`].
pub struct WithRefHeads<'a> {
    checker: Checker<'a>,
    heads: HashMap<RefAt, Result<Option<Value>, String>>,
    /// The working copy's manifests, when the caller read them under the
    /// same locks ([`WithRefHeads::with_manifests`]).
    manifests: Option<&'a BTreeMap<String, Manifest>>,
}

impl<'a> WithRefHeads<'a> {
    /// Answer `manifest_hash` from `manifests`, which the caller read under
    /// the locks the check runs under, instead of reading them again.
    pub fn with_manifests(self, manifests: &'a BTreeMap<String, Manifest>) -> Self {
        WithRefHeads {
            manifests: Some(manifests),
            ..self
        }
    }
}

fn ref_at(store: &Store, r#ref: &str) -> RefAt {
    (
        store.backend.clone(),
        canonical::to_string(&store.locator),
        r#ref.to_string(),
    )
}

impl<'a> Checker<'a> {
    /// This checker, with the `ref_head` of every `RefHead` precondition of
    /// `plan` read now, concurrently.
    pub async fn reading_ref_heads(self, plan: &Plan) -> WithRefHeads<'a> {
        let mut wanted: HashMap<RefAt, (Store, String)> = HashMap::new();
        for p in &plan.preconditions {
            if let Precondition::RefHead {
                store, ref_name, ..
            } = p
            {
                wanted
                    .entry(ref_at(store, ref_name))
                    .or_insert_with(|| (store.clone(), ref_name.clone()));
            }
        }
        let mut calls = Vec::new();
        let mut heads = HashMap::new();
        for (at, (store, r#ref)) in wanted {
            let plugin = match self.repo.plugin(&store.backend).await {
                Ok(p) => p,
                Err(e) => {
                    heads.insert(at, Err(e.to_string()));
                    continue;
                }
            };
            let client = self.repo.client_for(&plugin, &store.locator);
            calls.push((at, async move {
                let working_ref = (!r#ref.is_empty()).then_some(r#ref.as_str());
                match client.fingerprint(working_ref).await {
                    Ok(state) => Ok(Some(state)),
                    Err(BackendError::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            }));
        }
        for (at, r) in fan_out(calls).await.results {
            heads.insert(at, r.map_err(|e| e.to_string()));
        }
        WithRefHeads {
            checker: self,
            heads,
            manifests: None,
        }
    }
}

impl PreconditionChecker for WithRefHeads<'_> {
    fn workspace_id(&mut self) -> Result<String, String> {
        self.checker.workspace_id()
    }

    fn workspace_bookmark(&mut self) -> Result<Option<String>, String> {
        self.checker.workspace_bookmark()
    }

    fn manifest_hash(&mut self) -> Result<String, String> {
        match self.manifests {
            Some(m) => Ok(manifest::manifest_hash(m)),
            None => self.checker.manifest_hash(),
        }
    }

    fn dataset_version(&mut self) -> Result<u64, String> {
        self.checker.dataset_version()
    }

    fn bookmark_head(&mut self, bookmark: &str) -> Result<Option<String>, String> {
        self.checker.bookmark_head(bookmark)
    }

    fn vcs_head(&mut self, rev: &str) -> Result<Option<String>, String> {
        self.checker.vcs_head(rev)
    }

    fn history_digest(&mut self) -> Result<String, String> {
        self.checker.history_digest()
    }

    fn bookmark_holders(&mut self, bookmark: &str) -> Result<Vec<String>, String> {
        self.checker.bookmark_holders(bookmark)
    }

    fn same_state(&mut self, store: &Store, a: &Value, b: &Value) -> bool {
        self.checker.same_state(store, a, b)
    }

    fn ref_head(&mut self, key: &str, store: &Store, r#ref: &str) -> Result<Option<Value>, String> {
        match self.heads.get(&ref_at(store, r#ref)) {
            Some(read) => read.clone(),
            None => self.checker.ref_head(key, store, r#ref),
        }
    }

    fn ref_present(&mut self, key: &str, store: &Store, r#ref: &str) -> Result<bool, String> {
        self.checker.ref_present(key, store, r#ref)
    }

    fn ref_descends(
        &mut self,
        key: &str,
        store: &Store,
        r#ref: &str,
        state: &Value,
    ) -> Result<bool, String> {
        self.checker.ref_descends(key, store, r#ref, state)
    }

    fn pin_state(&mut self, key: &str, store: &Store, pin: &str) -> Result<Option<Value>, String> {
        self.checker.pin_state(key, store, pin)
    }

    fn store_empty(
        &mut self,
        key: Option<&str>,
        store: &Store,
        ignore: &[String],
    ) -> Result<Vec<String>, String> {
        self.checker.store_empty(key, store, ignore)
    }
}

/// A working ref's name without its generation, and the generation (1 for
/// none); a name tether does not write is its own base.
fn split_generation(name: &str) -> (String, u32) {
    match crate::model::ids::parse_working_ref(name) {
        Some(w) if w.generation() > 1 => {
            let suffix = format!(".{}", w.generation());
            (
                name.strip_suffix(&suffix).unwrap_or(name).to_string(),
                w.generation(),
            )
        }
        _ => (name.to_string(), 1),
    }
}
