//! # tether-plugin-icechunk: Icechunk repositories
//!
//! Kind `icechunk` (spec/11, "`icechunk`: Icechunk repositories"): a
//! Forkable backend over an Icechunk repository of **spec version 2** (what
//! icechunk 2.x writes), read and written directly in Icechunk's own storage
//! layout through the host's `storage` capability. There is no Icechunk
//! library inside: the layout, byte formats and update protocol are those of
//! research/icechunk.md, checked against icechunk 2.3 (and verified by the
//! interop tests, which drive the real Python `icechunk` against what this
//! plugin writes).
//!
//! ## Locator and state
//!
//! ```json
//! {"uri": "/data/cube.icechunk", "branch": "main", "region": "eu-west-1", "at": "<snapshot id, tag or branch>"}
//! ```
//!
//! `uri` is a local path or `s3://bucket/prefix` (a storage key, and for
//! local paths a tree key so the identity resolves symlinks); `branch` is the
//! upstream branch (default `main`); `region` is for S3 and does not name the
//! store. The identity is `{"uri": <resolved uri>}`. A state is
//! `{"snapshot_id": "<20 base32 chars>"}`, the branch head.
//!
//! ## Refs
//!
//! - Pins are tags `tether.<pin_id>`. Icechunk never lets a deleted tag's name
//!   be used again (`Repo.deleted_tags`), so when `tether.<pin_id>` has been
//!   deleted the pin moves to the next free generation `tether.<pin_id>.2`,
//!   `.3`, ... up to `.1000`. A pin resolves through its live generation
//!   (the one tag of the id that exists), and `verify` says which.
//! - Working refs are branches `tether.ws.*`, created at the source snapshot
//!   or reset onto it; promote resets the base branch after checking that
//!   its head is an ancestor of the source (a fast-forward).
//!
//! Every ref change rewrites the `repo` object by the update protocol
//! ([`repo::Store::update`]): backup of the old object under `overwritten/`,
//! an ops-log entry with a strictly increasing timestamp, and a put
//! conditional on the etag read, retried from a fresh read when another
//! writer got there first. On object stores that makes ref moves atomic
//! (`CONDITIONAL_REF`); Icechunk's own local-filesystem writer does not do
//! conditional puts, so local repositories lack `CONDITIONAL_REF`.
//!
//! ## What is refused
//!
//! Spec version 1 repositories (no `repo` object, `refs/` JSON files) and
//! any file declaring a spec version above 2, with a clear error; ref writes
//! on a repository whose status is not online; tag writes when Icechunk's
//! `create_tag`/`delete_tag` feature flags are disabled.

mod fb;
mod format;
mod harness;
mod repo;
mod snapshot;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit::{self, PinCheck, PinSlot, SecondsFormat};
use tether_sdk::storage::StorageError;
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyItem, VerifyReport, VerifyStatus, cap, check_expected,
    descriptor, tree,
};

use format::Id12;
pub use harness::IcechunkHarness;
use repo::{Edit, Field, Repo, Store, update};
use snapshot::{Changes, NodeKind};

/// Capabilities of every icechunk object. `CONDITIONAL_REF` is added per
/// object for object stores (see [`IcechunkBackend::effective_capabilities`]).
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::CHEAP_FINGERPRINT,
    cap::ATOMIC_REF,
    cap::DIFF,
    cap::HISTORY,
    cap::PROMOTE,
    cap::CREATE,
];

/// The repository metadata key holding the dataset that created the store.
pub const OWNER_KEY: &str = "tether.owner";

/// Icechunk's own top-level names: all `delete_store` may remove.
const ICECHUNK_NAMES: &[&str] = &[
    "repo",
    "snapshots/",
    "transactions/",
    "manifests/",
    "chunks/",
    "overwritten/",
];

/// An icechunk object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    uri: String,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // S3's region: the host resolves access, not the plugin.
    region: Option<String>,
}

fn default_branch() -> String {
    "main".to_owned()
}

impl Locator {
    /// The storage URI: `file://` folded, trailing slashes gone.
    fn storage_uri(&self) -> String {
        kit::storage_uri(&self.uri)
    }

    fn is_local(&self) -> bool {
        self.storage_uri().starts_with('/')
    }
}

#[derive(Deserialize)]
struct State {
    snapshot_id: String,
}

fn state_json(id: Id12) -> Value {
    json!({ "snapshot_id": id.to_string() })
}

fn snapshot_id(state: &Value) -> Result<Id12> {
    let text = tether_sdk::state::<State>(state)?.snapshot_id;
    Id12::parse(&text).ok_or_else(|| {
        Error::invalid(format!(
            "{text:?} is not an Icechunk snapshot id (20 base32 characters)"
        ))
    })
}

fn open(loc: &Locator) -> Result<Store> {
    Store::open(&loc.storage_uri())
}

/// The tag a pin resolves through: the one it was given if it still
/// exists, else the live generation of its id.
fn live_pin_tag(repo: &Repo, pin: &PinRef) -> Option<(String, Id12)> {
    kit::live_tag(&repo.tags, pin)
}

/// A revision as the locator's `at` and `history --at` accept it: a
/// snapshot id, a tag or a branch.
fn resolve_rev(repo: &Repo, rev: &str) -> Result<Id12> {
    if let Some(id) = Id12::parse(rev).filter(|id| repo.snapshots.contains_key(id)) {
        return Ok(id);
    }
    if let Some(id) = repo.tags.get(rev).or_else(|| repo.branches.get(rev)) {
        return Ok(*id);
    }
    Err(Error::not_found(format!(
        "{rev:?} is no snapshot id, tag or branch of this Icechunk repository"
    )))
}

fn branch_head(repo: &Repo, name: &str) -> Result<Id12> {
    repo.branches
        .get(name)
        .copied()
        .ok_or_else(|| Error::not_found(format!("branch {name} does not exist")))
}

/// The base head: the locator's `at` when set, else its branch.
fn base_head(repo: &Repo, loc: &Locator) -> Result<Id12> {
    kit::base_head(repo, loc.at.as_deref(), &loc.branch)
}

/// A repository's snapshots as [`kit::resolve_target`] finds them.
impl kit::Heads for Repo {
    type Head = Id12;

    fn rev(&self, rev: &str) -> Result<Id12> {
        resolve_rev(self, rev)
    }

    fn branch(&self, name: &str) -> Result<Id12> {
        branch_head(self, name)
    }

    fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, Id12)>> {
        Ok(live_pin_tag(self, pin))
    }

    fn recorded(&self, state: &Value) -> Result<Id12> {
        snapshot_id(state)
    }
}

/// The snapshot a target names.
fn resolve(repo: &Repo, loc: &Locator, target: &Target) -> Result<Id12> {
    let id = kit::resolve_target(repo, loc.at.as_deref(), &loc.branch, target)?;
    if !repo.snapshots.contains_key(&id) {
        return Err(Error::not_found(format!(
            "snapshot {id} is not in this Icechunk repository (expired?)"
        )));
    }
    Ok(id)
}

fn name_field(name: &str) -> Field {
    Field::Str(name.to_owned())
}

/// The icechunk backend. Stateless: everything is in the repository.
#[derive(Debug, Default, Clone, Copy)]
pub struct IcechunkBackend;

impl IcechunkBackend {
    /// `verify`'s answer for `state` given the pin's live tag.
    fn report(
        store: &Store,
        repo: &Repo,
        state: &Value,
        pin: Option<&PinRef>,
        live: Option<(String, Id12)>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let id = snapshot_id(state)?;
        let live_tag = live.as_ref().map(|(tag, _)| tag.clone());
        let check = PinCheck {
            pin,
            state: id,
            noun: "snapshot",
            deep,
        };
        let mut report = check.report(live, |id| {
            Ok(repo.snapshots.contains_key(id)
                && store.bucket.exists(&snapshot::snapshot_key(*id))?)
        })?;
        match (pin, report.status, live_tag) {
            // Icechunk's report names the tag holding the pin, whichever
            // generation it is.
            (Some(_), VerifyStatus::Ok, Some(tag)) => report.message = format!("pinned as {tag}"),
            (Some(pin), VerifyStatus::Missing, _) if repo.deleted_tags.contains(&pin.ref_) => {
                report
                    .message
                    .push_str(" (deleted; `tether repair` pins it again as the next generation)");
            }
            _ => {}
        }
        Ok(report)
    }

    /// Move branch `name` onto what `next` decides from its current head,
    /// checked against `expected` on every attempt of the update protocol.
    fn move_branch(
        store: &Store,
        name: &str,
        expected: &Expected,
        mut next: impl FnMut(&Repo, Option<Id12>) -> Result<Option<Id12>>,
    ) -> Result<Id12> {
        store.update(|repo| {
            let head = repo.branches.get(name).copied();
            check_expected(
                &format!("branch {name}"),
                head.map(state_json).as_ref(),
                expected,
                &[],
            )?;
            let target = match next(repo, head)? {
                Some(target) if Some(target) != head => target,
                _ => {
                    return head
                        .map(Edit::Keep)
                        .ok_or_else(|| Error::not_found(format!("branch {name} does not exist")));
                }
            };
            repo.branches.insert(name.to_owned(), target);
            Ok(match head {
                None => Edit::Write(target, update::BRANCH_CREATED, vec![name_field(name)]),
                Some(previous) => Edit::Write(
                    target,
                    update::BRANCH_RESET,
                    vec![name_field(name), Field::Id(previous)],
                ),
            })
        })
    }

    fn refuse_base(loc: &Locator, name: &str, what: &str) -> Result<()> {
        kit::refuse_base(&loc.branch, name, what)?;
        kit::refuse_base("main", name, what)
    }

    /// Whether the store is only what `create` made, ignoring `ignoring`.
    fn ref_empty(loc: &Locator, repo: &Repo, ignoring: &[String]) -> bool {
        let stray_branch = repo
            .branches
            .keys()
            .any(|b| *b != loc.branch && b != "main" && !ignoring.contains(b));
        let stray_tag = repo.tags.keys().any(|t| !ignoring.contains(t));
        let base_initial = repo.branches.get(&loc.branch) == Some(&Id12::INITIAL)
            && repo.branches.get("main") == Some(&Id12::INITIAL);
        !stray_branch && !stray_tag && base_initial
    }
}

impl Backend for IcechunkBackend {
    /// What `tether backends` says it was tested against (the guide page's
    /// "tested against" section, in a line).
    fn meta(&self, package: tether_sdk::Meta) -> tether_sdk::Meta {
        package.tested_against("icechunk 2.3.0 with zarr, local and S3 (moto) repositories")
    }

    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["uri".into()],
            tree_keys: vec!["uri".into()],
            local_path_keys: vec!["uri".into()],
            promote_hint: "The base branch has moved since the fork, and Icechunk cannot merge \
                           branches: fork again from the new base and redo the writes there."
                .into(),
            ..descriptor("icechunk", CAPABILITIES)
        }
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        kit::check_bucket_uri("icechunk", &loc.uri)?;
        if loc.branch.is_empty() {
            return Err(Error::invalid("locator `branch` must not be empty"));
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        kit::uri_identity(&loc.uri)
    }

    fn effective_capabilities(&self, loc: &Locator, policy: &Value) -> Result<Vec<String>> {
        let mut caps = kit::policy_capabilities(self.describe().capabilities, policy);
        // Icechunk's local-filesystem writer puts `repo` unconditionally, so
        // only object stores make a reviewed ref move atomic.
        if !loc.is_local() {
            caps.push(cap::CONDITIONAL_REF.as_str().to_owned());
        }
        Ok(caps)
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let id = match working_ref {
            Some(name) => branch_head(&repo, name)?,
            None => base_head(&repo, loc)?,
        };
        Ok(state_json(id))
    }

    fn pin(&self, loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let store = open(loc)?;
        let id = snapshot_id(state)?;
        let slot = store.update(|repo| {
            if !repo.snapshots.contains_key(&id) {
                return Err(Error::not_found(format!(
                    "snapshot {id} is not in this Icechunk repository; cannot pin it"
                )));
            }
            // The first generation whose name Icechunk has not tombstoned.
            let slot = kit::pin_slot(
                pin_id,
                &id,
                |tag| Ok(repo.deleted_tags.contains(tag)),
                |tag| Ok(repo.tags.get(tag).copied()),
            )?;
            let PinSlot::Create(tag) = &slot else {
                return Ok(Edit::Keep(slot));
            };
            if repo.flag_disabled(repo::FLAG_CREATE_TAG) {
                return Err(Error::backend(
                    "this Icechunk repository has tag creation disabled \
                     (feature flag create_tag)",
                ));
            }
            repo.tags.insert(tag.clone(), id);
            let field = name_field(tag);
            Ok(Edit::Write(slot, update::TAG_CREATED, vec![field]))
        })?;
        Ok(slot.pin_ref(pin_id))
    }

    fn unpin(&self, loc: &Locator, pin: &PinRef) -> Result<()> {
        let store = open(loc)?;
        // One tag per write (one ops-log entry each); normally there is one.
        loop {
            let deleted = store.update(|repo| {
                let Some((tag, previous)) = live_pin_tag(repo, pin) else {
                    return Ok(Edit::Keep(false));
                };
                if repo.flag_disabled(repo::FLAG_DELETE_TAG) {
                    return Err(Error::backend(
                        "this Icechunk repository has tag deletion disabled \
                         (feature flag delete_tag)",
                    ));
                }
                repo.tags.remove(&tag);
                repo.deleted_tags.insert(tag.clone());
                Ok(Edit::Write(
                    true,
                    update::TAG_DELETED,
                    vec![Field::Str(tag), Field::Id(previous)],
                ))
            })?;
            if !deleted {
                return Ok(());
            }
        }
    }

    fn list_pins(&self, loc: &Locator) -> Result<Vec<String>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let ids: BTreeSet<&str> = repo
            .tags
            .keys()
            .filter_map(|t| kit::pin_id_of_ref(t))
            .collect();
        Ok(ids.into_iter().map(str::to_owned).collect())
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let live = pin.and_then(|pin| live_pin_tag(&repo, pin));
        Self::report(&store, &repo, state, pin, live, deep)
    }

    /// `verify` of each item with the repository loaded once and its tags
    /// indexed once (`verify` loads it and passes over every tag per pin).
    fn verify_many(
        &self,
        loc: &Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let tags = kit::PinTags::new(repo.tags.keys().map(String::as_str));
        Ok(items
            .iter()
            .map(|item| {
                let pin = item.pin.as_ref();
                let live = pin
                    .and_then(|pin| tags.live(pin))
                    .map(|tag| (tag.to_owned(), repo.tags[tag]));
                Self::report(&store, &repo, &item.state, pin, live, deep)
            })
            .collect())
    }

    fn fork(
        &self,
        loc: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        let store = open(loc)?;
        Self::refuse_base(loc, name, "fork")?;
        Self::move_branch(&store, name, expected, |repo, _| {
            resolve(repo, loc, source).map(Some)
        })?;
        Ok(name.to_owned())
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        let store = open(loc)?;
        Self::refuse_base(loc, working_ref, "delete_working_ref")?;
        store.update(|repo| {
            let Some(previous) = repo.branches.remove(working_ref) else {
                return Ok(Edit::Keep(()));
            };
            Ok(Edit::Write(
                (),
                update::BRANCH_DELETED,
                vec![name_field(working_ref), Field::Id(previous)],
            ))
        })
    }

    fn list_working_refs(&self, loc: &Locator) -> Result<Vec<String>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        Ok(repo
            .branches
            .keys()
            .filter(|b| b.starts_with(tether_sdk::WORKING_REF_PREFIX))
            .cloned()
            .collect())
    }

    fn promote(&self, loc: &Locator, source: &Target, expected: &Expected) -> Result<Value> {
        let store = open(loc)?;
        let hint = self.describe().promote_hint;
        let head = Self::move_branch(&store, &loc.branch, expected, |repo, head| {
            let source = resolve(repo, loc, source)?;
            let head = head
                .ok_or_else(|| Error::not_found(format!("branch {} does not exist", loc.branch)))?;
            if head == source {
                Ok(None)
            } else if repo.is_ancestor(head, source) {
                Ok(Some(source))
            } else {
                Err(Error::backend(format!(
                    "{} (at {head}) is not an ancestor of snapshot {source}. {hint}",
                    loc.branch
                )))
            }
        })?;
        Ok(state_json(head))
    }

    fn ancestor_of(
        &self,
        loc: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let (a, d) = (snapshot_id(ancestor)?, snapshot_id(descendant)?);
        if !repo.snapshots.contains_key(&a) || !repo.snapshots.contains_key(&d) {
            return Ok(None);
        }
        Ok(Some(repo.is_ancestor(a, d)))
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let id = resolve(&repo, loc, target)?;
        // (branch, tag): only a branch opens writable.
        let (branch, tag) = match target {
            Target::Base => match &loc.at {
                None => (Some(loc.branch.clone()), None),
                Some(at) if repo.tags.contains_key(at) => (None, Some(at.clone())),
                Some(_) => (None, None),
            },
            Target::WorkingRef(name) => (Some(name.clone()), None),
            Target::Pinned(pin) => (None, live_pin_tag(&repo, pin).map(|(t, _)| t)),
            Target::Recorded(_) => (None, None),
        };
        let fragment = branch.clone().or(tag.clone()).unwrap_or(id.to_string());
        Ok(Handle {
            type_name: "IcechunkHandle".into(),
            address: format!("{}#{fragment}", loc.storage_uri()),
            read_only: read_only || branch.is_none(),
            fields: json!({
                "uri": loc.storage_uri(),
                "branch": branch,
                "tag": tag,
                "snapshot_id": id.to_string(),
            }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let start = match from_ref {
            Some(rev) => resolve_rev(&repo, rev)?,
            None => base_head(&repo, loc)?,
        };
        let mut refs: BTreeMap<Id12, Vec<String>> = BTreeMap::new();
        for (name, id) in repo.branches.iter().chain(&repo.tags) {
            refs.entry(*id).or_default().push(name.clone());
        }
        Ok(repo
            .ancestry(start)
            .into_iter()
            .take(limit as usize)
            .map(|(id, info)| HistoryEntry {
                id: id.to_string(),
                when: Some(kit::rfc3339(
                    (info.flushed_at / 1_000_000) as i64,
                    (info.flushed_at % 1_000_000) as u32 * 1000,
                    SecondsFormat::Micros,
                )),
                message: info.message.clone(),
                refs: refs.remove(&id).unwrap_or_default(),
            })
            .collect())
    }

    fn diff(
        &self,
        loc: &Locator,
        a: &Value,
        b: &Value,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<ObjectDiff> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        let (a, b) = (snapshot_id(a)?, snapshot_id(b)?);
        let mut diff = ObjectDiff::new("nodes");
        if a == b {
            return Ok(diff);
        }
        let old = snapshot::nodes(&store.bucket, a)?;
        let new = snapshot::nodes(&store.bucket, b)?;
        let old_by_id: BTreeMap<_, _> = old.iter().map(|n| (n.id, n)).collect();
        let new_by_id: BTreeMap<_, _> = new.iter().map(|n| (n.id, n)).collect();
        // Chunk coordinates come from the transaction logs, which only say
        // what happened along a line of descent: with `a` an ancestor of `b`
        // (what `tether diff` between two commits of one branch is), their
        // union over (a, b] is Icechunk's own diff.
        let mut changes = Changes::default();
        let mut logs_complete = false;
        if repo.is_ancestor(a, b) {
            logs_complete = true;
            let chain: Vec<_> = repo
                .ancestry(b)
                .into_iter()
                .take_while(|(id, _)| *id != a)
                .collect();
            for (id, info) in chain.iter().rev() {
                for pruned in info.pruned_ancestor_tx_logs.iter().flatten() {
                    snapshot::read_transactions(&store.bucket, *pruned, &mut changes)?;
                }
                logs_complete &= snapshot::read_transactions(&store.bucket, *id, &mut changes)?;
            }
        }
        let kind = |n: &snapshot::Node| match n.kind {
            NodeKind::Group => "group",
            NodeKind::Array { .. } => "array",
        };
        // Entries in path order, as Icechunk lists nodes.
        let mut entries: BTreeMap<&str, (Change, String)> = BTreeMap::new();
        for n in &new {
            if !old_by_id.contains_key(&n.id) {
                entries.insert(&n.path, (Change::Added, kind(n).to_owned()));
            }
        }
        for n in &old {
            if !new_by_id.contains_key(&n.id) {
                entries.insert(&n.path, (Change::Removed, kind(n).to_owned()));
            }
        }
        for n in &new {
            let Some(o) = old_by_id.get(&n.id) else {
                continue;
            };
            let mut what = Vec::new();
            if o.path != n.path {
                what.push(format!("moved from {}", o.path));
            }
            if o.user_data != n.user_data {
                what.push("metadata".to_owned());
            }
            match changes.updated_chunks.get(&n.id) {
                Some(chunks) if logs_complete => {
                    let count = chunks.len();
                    what.push(format!(
                        "{count} chunk{}",
                        if count == 1 { "" } else { "s" }
                    ));
                }
                _ if !logs_complete && o.kind != n.kind => what.push("chunks".to_owned()),
                _ => {}
            }
            if !what.is_empty() {
                entries.insert(&n.path, (Change::Modified, what.join(", ")));
            }
        }
        for (path, (change, detail)) in entries {
            diff.add(path, change, detail);
        }
        if !logs_complete {
            diff.note(
                "compared from snapshot metadata: chunk changes are shown without counts \
                 (the states are not on one line of descent, or a transaction log is gone)",
            );
        }
        Ok(diff)
    }

    fn create(&self, loc: &Locator, owner: &str) -> Result<Value> {
        let store = open(loc)?;
        let refuse = || {
            Error::backend(format!(
                "{} is not empty; create never adopts an existing store \
                 (`tether add` it instead)",
                store.uri
            ))
        };
        if store.bucket.any("")? {
            return Err(refuse());
        }
        let now = format::now_micros();
        snapshot::write_initial(&store.bucket, now).map_err(|e| match e {
            StorageError::AlreadyExists(_) => refuse(),
            e => e.into(),
        })?;
        let mut branches = vec!["main"];
        if loc.branch != "main" {
            branches.push(&loc.branch);
        }
        let metadata = BTreeMap::from([(
            OWNER_KEY.to_owned(),
            format::flex_value(&Value::String(owner.to_owned())),
        )]);
        let repo = Repo::initial(now, &branches, metadata);
        // `repo` last, create-only: it is the commit point.
        store
            .bucket
            .put(
                repo::REPO_KEY,
                &format::encode(format::FileType::RepoInfo, &repo.encode()),
                tether_sdk::storage::PutMode::Create,
            )
            .map_err(|e| match e {
                StorageError::AlreadyExists(_) => refuse(),
                e => e.into(),
            })?;
        Ok(state_json(Id12::INITIAL))
    }

    fn owner(&self, loc: &Locator) -> Result<Option<String>> {
        let store = open(loc)?;
        let Some(loaded) = store.try_load()? else {
            return Ok(None);
        };
        Ok(loaded
            .repo
            .metadata
            .get(OWNER_KEY)
            .and_then(|v| format::flex_as_string(v)))
    }

    fn is_ref_empty(&self, loc: &Locator, ignoring: &[String]) -> Result<Option<bool>> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        Ok(Some(Self::ref_empty(loc, &repo, ignoring)))
    }

    fn delete_store(&self, loc: &Locator, owner: &str) -> Result<()> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        // Re-check right before the irreversible step: owner, emptiness, and
        // that nothing but Icechunk's own names is there.
        let marker = repo
            .metadata
            .get(OWNER_KEY)
            .and_then(|v| format::flex_as_string(v));
        kit::guard_delete(&store.uri, marker.as_deref(), owner, || {
            Ok(Self::ref_empty(loc, &repo, &[]))
        })?;
        let keys = store.bucket.list_all("")?;
        let foreign: Vec<&str> = keys
            .iter()
            .map(|m| m.key.as_str())
            .filter(|k| {
                !ICECHUNK_NAMES
                    .iter()
                    .any(|n| *k == *n || (n.ends_with('/') && k.starts_with(n)))
            })
            .collect();
        if !foreign.is_empty() {
            return Err(Error::backend(format!(
                "{} holds objects that are not Icechunk's ({}); not deleting anything",
                store.uri,
                foreign.join(", ")
            )));
        }
        // Everything else first, `repo` (the owner marker) last, so a failure
        // part way leaves a store that is still recognisably ours.
        for meta in keys.iter().filter(|m| m.key != repo::REPO_KEY) {
            store.bucket.delete(&meta.key)?;
        }
        store.bucket.delete(repo::REPO_KEY)?;
        if loc.is_local() {
            let root = loc.storage_uri();
            for name in ICECHUNK_NAMES.iter().filter_map(|n| n.strip_suffix('/')) {
                tree::remove_empty_dir(&format!("{root}/{name}"))?;
            }
            tree::remove_empty_dir(&root)?;
        }
        Ok(())
    }

    fn branch_scope(&self, loc: &Locator) -> Result<String> {
        Ok(tether_sdk::canonical_json(&self.identity(loc)?))
    }

    fn state_addressable(&self, loc: &Locator, state: &Value) -> Result<bool> {
        let store = open(loc)?;
        let repo = store.load()?.repo;
        Ok(repo.snapshots.contains_key(&snapshot_id(state)?))
    }
}

/// Nothing may be committed in `[backends.icechunk]`: credentials and
/// endpoints belong in `.tether/secrets.toml`.
impl tether_sdk::DescribeExt for IcechunkBackend {
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(IcechunkBackend, harness: IcechunkHarness, [describe_ext]);
