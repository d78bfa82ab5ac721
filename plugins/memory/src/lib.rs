//! # tether-plugin-memory: the reference backend
//!
//! Kind `memory`: the executable specification of the backend protocol, and
//! the crate to copy from when writing a backend. It implements every member
//! its capabilities imply, keeping all of its state in a storage bucket that
//! the host opens for it (the `storage` capability); nothing else is touched.
//!
//! ## Locator and state
//!
//! ```json
//! {"system": "memory://demo", "branch": "main", "at": "<snapshot id, tag or branch>"}
//! ```
//!
//! `system` is a storage URI: `memory://NAME` (one process) or an absolute
//! local directory (shared across processes). It is the only storage key, and
//! the identity is `{"system": ...}`. `branch` defaults to `main`; `at`
//! (optional) reads the base at a fixed point. A state is
//! `{"snapshot_id": "<id>"}`.
//!
//! `tombstones` (optional, `true` or `"true"`; default false) makes the store
//! behave like one that never reuses a deleted tag's name (Icechunk): see
//! "Tombstones and pin generations" below. It is not part of the identity.
//!
//! ## Storage layout
//!
//! Relative to `system`:
//!
//! | key | content |
//! | --- | --- |
//! | `snapshots/<id>.json` | `{"message": str, "parents": [id], "payload": {key: value}, "when": rfc3339}` |
//! | `refs/branches/<name>.json` | `{"snapshot_id": id}` |
//! | `refs/tags/<name>.json` | `{"snapshot_id": id}` (pins are tags `tether.<pin-id>`) |
//! | `refs/tags/<name>.json.deleted` | `{}`: a tombstone (see below) |
//! | `tether-owner.json` | `{"owner": dataset_id}`, only in stores `create` made |
//!
//! `<id>` is the first 20 hex digits of sha256 over the canonical JSON
//! (sorted keys, no whitespace) of `{"message", "parents", "payload"}`; `when`
//! is optional and not hashed. So a test writes a new state on `main` with
//! plain file writes: put the snapshot file (parent = the current head), then
//! overwrite `refs/branches/main.json`. The initial snapshot is
//! `{"message": "initial snapshot", "parents": [], "payload": {}}`. In Python
//! (keep payload values to strings, integers and booleans, whose printing
//! agrees with serde_json's):
//!
//! ```text
//! snap = {"message": "m", "parents": [head], "payload": {"k": "v"}}
//! text = json.dumps(snap, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
//! sid = hashlib.sha256(text.encode()).hexdigest()[:20]
//! (root / "snapshots" / f"{sid}.json").write_text(text)
//! (root / "refs/branches/main.json").write_text(json.dumps({"snapshot_id": sid}))
//! ```
//!
//! Every ref move is a conditional put: create-only for a new ref, if-match
//! on the ref file's etag for a move. That is what makes `CONDITIONAL_REF`
//! honest: of several racing forks with one `expected`, exactly one wins.
//!
//! ## Tombstones and pin generations
//!
//! Some stores never reuse a deleted tag's name: Icechunk keeps a tombstone.
//! tether then keeps the pin id and moves the *ref* on to the next generation,
//! `tether.<pin-id>.2`, `.3`, ... `.1000` (spec 09, "ops, undo, repair").
//! This backend emulates such a store:
//!
//! - a tag name with a tombstone `refs/tags/<name>.json.deleted` is never
//!   created again, whatever the locator says;
//! - with `tombstones` in the locator, deleting a tag (`unpin`) writes the
//!   tombstone first, then deletes the tag. A test deletes a tag "with the
//!   store's own tools" the same way: write the tombstone, remove the tag file.
//!
//! So `pin(state, id)` looks at the first generation of `tether.<id>` whose
//! name is not tombstoned: it returns it when it holds `state` (idempotent),
//! refuses when it holds another state (a pin is never moved), and otherwise
//! creates it (`tether_sdk::kit::pin_slot`). Readers resolve a pin through its live
//! generation: `verify`, `open`, and every `Target::Pinned` (fork, promote,
//! merge) read the tag the pin-ref names when it exists, else the highest
//! generation of `tether.<pin.id>` that does. `verify` says `pinned as
//! tether.<id>.N` when that is not the ref it was given, and `unpin` deletes
//! every live generation.

mod harness;
mod store;

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit::{self, CasRef, PinCheck, PinSlot, Swap};
use tether_sdk::storage::{StorageError, Versioned};
use tether_sdk::{
    Backend, Capability, Change, Descriptor, Error, Expected, Handle, HistoryEntry, ObjectDiff,
    PinRef, Result, Target, VerifyItem, VerifyReport, cap, descriptor,
};

pub use harness::MemoryHarness;
use store::{Key, RefKind, Snapshot, Store};

/// Capabilities of every memory object.
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::ADDRESSABLE,
    cap::PIN,
    cap::FORK,
    cap::CHEAP_FINGERPRINT,
    cap::ATOMIC_REF,
    cap::CONDITIONAL_REF,
    cap::DIFF,
    cap::HISTORY,
    cap::PROMOTE,
    cap::MERGE,
    cap::CREATE,
];

/// A memory object's locator (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    system: String,
    #[serde(default = "default_branch")]
    branch: String,
    #[serde(default)]
    at: Option<String>,
    /// Deleting a tag leaves a tombstone (a store like Icechunk).
    #[serde(default, deserialize_with = "flag")]
    tombstones: bool,
}

fn default_branch() -> String {
    "main".to_owned()
}

/// A boolean locator field: `true`, or `"true"` as `tether add --set k=v`
/// writes it (likewise false).
fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Flag {
        Bool(bool),
        Text(String),
    }
    match Flag::deserialize(d)? {
        Flag::Bool(b) => Ok(b),
        Flag::Text(t) if t == "true" => Ok(true),
        Flag::Text(t) if t == "false" => Ok(false),
        Flag::Text(t) => Err(serde::de::Error::custom(format!(
            "expected true or false, found {t:?}"
        ))),
    }
}

/// The live generation of a pin, with the snapshot it holds: the tag the
/// pin-ref names when it exists, else the highest generation of
/// `tether.<pin.id>` that does; `None` when every one is gone.
fn live_pin(store: &Store, pin: &PinRef) -> Result<Option<(String, String)>> {
    if let Some(own) = own_tag(store, pin)? {
        return Ok(Some(own));
    }
    // Only this pin's generations: listing every tag per pin made
    // `verify --all-history` quadratic in the number of pins.
    let names = store.ref_names_starting(RefKind::Tag, &kit::pin_ref_name(&pin.id, 1))?;
    let Some(name) = kit::live_generation(pin, names.iter().map(String::as_str)) else {
        return Ok(None);
    };
    read_tag(store, name)
}

/// The tag the pin-ref names, read directly, when it is one of the pin's
/// generations and exists.
fn own_tag(store: &Store, pin: &PinRef) -> Result<Option<(String, String)>> {
    if kit::pin_generation_of(&pin.id, &pin.ref_).is_none() {
        return Ok(None);
    }
    read_tag(store, &pin.ref_)
}

fn read_tag(store: &Store, name: &str) -> Result<Option<(String, String)>> {
    Ok(store
        .read_ref(RefKind::Tag, name)?
        .map(|r| (name.to_owned(), r.value)))
}

#[derive(Deserialize)]
struct State {
    snapshot_id: String,
}

fn state_json(snapshot_id: &str) -> Value {
    json!({ "snapshot_id": snapshot_id })
}

fn snapshot_id(state: &Value) -> Result<String> {
    Ok(tether_sdk::state::<State>(state)?.snapshot_id)
}

fn open(loc: &Locator) -> Result<Store> {
    Store::open(&loc.system)
}

/// A branch as [`kit::move_ref`] moves it: an if-match put on its ref file
/// (create-only when it does not exist yet).
struct Branch<'a> {
    store: &'a Store,
    name: &'a str,
}

impl CasRef for Branch<'_> {
    type Head = String;
    type Token = Versioned<String>;

    fn name(&self) -> String {
        format!("branch {}", self.name)
    }

    fn read(&self) -> Result<Option<(String, Versioned<String>)>> {
        Ok(self
            .store
            .read_ref(RefKind::Branch, self.name)?
            .map(|r| (r.value.clone(), r)))
    }

    fn state(&self, head: &String) -> Value {
        state_json(head)
    }

    fn swap(&self, token: Option<Versioned<String>>, target: &String) -> Result<Swap> {
        let moved = match token {
            Some(r) => self
                .store
                .move_ref(RefKind::Branch, self.name, target, r.etag),
            None => self.store.create_ref(RefKind::Branch, self.name, target),
        };
        match moved {
            Ok(()) => Ok(Swap::Moved),
            Err(e @ (StorageError::AlreadyExists(_) | StorageError::PreconditionFailed(_))) => {
                Ok(Swap::Lost(e.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The memory backend. Stateless: everything is in the store.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryBackend;

/// A store's snapshots as [`kit::resolve_target`] finds them.
impl kit::Heads for Store {
    type Head = String;

    fn rev(&self, rev: &str) -> Result<String> {
        self.resolve_rev(rev)
    }

    fn branch(&self, name: &str) -> Result<String> {
        self.head(RefKind::Branch, name)
    }

    fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, String)>> {
        live_pin(self, pin)
    }

    fn recorded(&self, state: &Value) -> Result<String> {
        snapshot_id(state)
    }
}

impl MemoryBackend {
    /// `verify`'s answer for `state` given the pin's live tag.
    fn report(
        store: &Store,
        state: &Value,
        pin: Option<&PinRef>,
        live: Option<(String, String)>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let check = PinCheck {
            pin,
            state: snapshot_id(state)?,
            noun: "snapshot",
            deep,
        };
        check.report(live, |id| Ok(store.snapshot(id)?.is_some()))
    }

    /// The base head: the locator's `at` when set, else its branch.
    fn base_head(store: &Store, loc: &Locator) -> Result<String> {
        kit::base_head(store, loc.at.as_deref(), &loc.branch)
    }

    /// The snapshot a target names; a backend error when it is unreachable.
    fn resolve(store: &Store, loc: &Locator, target: &Target) -> Result<String> {
        let id = kit::resolve_target(store, loc.at.as_deref(), &loc.branch, target)?;
        store.require_snapshot(&id)?;
        Ok(id)
    }

    /// A pin's live generation and its snapshot, or not-found naming the pin.
    fn pinned(store: &Store, pin: &PinRef) -> Result<(String, String)> {
        live_pin(store, pin)?.ok_or_else(|| kit::pin_gone(pin))
    }

    /// Move branch `name` to what `next` computes from its current head
    /// ([`kit::move_ref`]); the branch's resulting head.
    fn update_branch(
        store: &Store,
        name: &str,
        expected: &Expected,
        next: impl FnMut(Option<&String>) -> Result<Option<String>>,
    ) -> Result<String> {
        kit::move_ref(&Branch { store, name }, expected, &[], next)
    }
}

impl Backend for MemoryBackend {
    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        Descriptor {
            storage_keys: vec!["system".into()],
            local_path_keys: vec!["system".into()],
            promote_hint:
                "The base branch has moved since the fork: promote with `--strategy merge`, \
                           or fork again from the new base."
                    .into(),
            ..descriptor("memory", CAPABILITIES)
        }
    }

    fn validate_locator(&self, loc: &Locator) -> Result<()> {
        if loc.system.is_empty() {
            return Err(Error::invalid("locator `system` must be a storage URI"));
        }
        if loc.branch.is_empty() {
            return Err(Error::invalid("locator `branch` must not be empty"));
        }
        Ok(())
    }

    fn identity(&self, loc: &Locator) -> Result<Value> {
        // One spelling per system: `memory://x/` and `memory://x` are one store.
        let system = loc.system.strip_suffix('/').unwrap_or(&loc.system);
        Ok(json!({ "system": system }))
    }

    fn fingerprint(&self, loc: &Locator, working_ref: Option<&str>) -> Result<Value> {
        let store = open(loc)?;
        let id = match working_ref {
            Some(name) => store.head(RefKind::Branch, name)?,
            None => Self::base_head(&store, loc)?,
        };
        Ok(state_json(&id))
    }

    fn pin(&self, loc: &Locator, state: &Value, pin_id: &str) -> Result<PinRef> {
        let store = open(loc)?;
        let id = snapshot_id(state)?;
        store.require_snapshot(&id)?;
        // A tombstoned name is never created again; a racing pin that took
        // the slot first is looked at again.
        for _ in 0..2 {
            let slot = kit::pin_slot(
                pin_id,
                &id,
                |tag| store.is_tombstoned(RefKind::Tag, tag),
                |tag| Ok(store.read_ref(RefKind::Tag, tag)?.map(|r| r.value)),
            )?;
            if let PinSlot::Create(tag) = &slot {
                match store.create_ref(RefKind::Tag, tag, &id) {
                    Ok(()) => {}
                    Err(StorageError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(slot.pin_ref(pin_id));
        }
        Err(Error::backend(format!(
            "the tags of pin {pin_id} keep changing while pinning; retry"
        )))
    }

    fn unpin(&self, loc: &Locator, pin: &PinRef) -> Result<()> {
        let store = open(loc)?;
        // Every live generation goes, and the ref named, whatever it is.
        let mut tags: Vec<String> = store
            .ref_names(RefKind::Tag)?
            .into_iter()
            .filter(|name| kit::pin_generation_of(&pin.id, name).is_some())
            .collect();
        if !tags.contains(&pin.ref_) {
            tags.push(pin.ref_.clone());
        }
        for tag in tags {
            if loc.tombstones {
                store.delete_ref_leaving_tombstone(RefKind::Tag, &tag)?;
            } else {
                store.delete_ref(RefKind::Tag, &tag)?;
            }
        }
        Ok(())
    }

    fn list_pins(&self, loc: &Locator) -> Result<Vec<String>> {
        let store = open(loc)?;
        let tags = store.ref_names(RefKind::Tag)?;
        Ok(tags
            .iter()
            .filter_map(|t| t.strip_prefix(tether_sdk::PIN_REF_PREFIX))
            .map(str::to_owned)
            .collect())
    }

    fn verify(
        &self,
        loc: &Locator,
        state: &Value,
        pin: Option<&PinRef>,
        deep: bool,
    ) -> Result<VerifyReport> {
        let store = open(loc)?;
        let live = match pin {
            Some(pin) => live_pin(&store, pin)?,
            None => None,
        };
        Self::report(&store, state, pin, live, deep)
    }

    /// `verify` of each item with the store opened once: each pin's own tag
    /// read directly, and the store's pin tags listed once (only when some
    /// pin's own tag is gone) to find those pins' later generations.
    fn verify_many(
        &self,
        loc: &Locator,
        items: &[VerifyItem],
        deep: bool,
    ) -> Result<Vec<Result<VerifyReport>>> {
        let store = open(loc)?;
        let own: Vec<Result<Option<(String, String)>>> = items
            .iter()
            .map(|item| match &item.pin {
                Some(pin) => own_tag(&store, pin),
                None => Ok(None),
            })
            .collect();
        let gone = items
            .iter()
            .zip(&own)
            .any(|(item, own)| item.pin.is_some() && matches!(own, Ok(None)));
        let listed = if gone {
            store.ref_names_starting(RefKind::Tag, tether_sdk::PIN_REF_PREFIX)
        } else {
            Ok(Vec::new())
        };
        let tags = match &listed {
            Ok(names) => kit::PinTags::new(names.iter().map(String::as_str)),
            Err(_) => kit::PinTags::default(),
        };
        let answer = |item: &VerifyItem, own: Result<Option<(String, String)>>| {
            let live = match (&item.pin, own?) {
                (None, _) => None,
                (Some(_), Some(found)) => Some(found),
                (Some(pin), None) => {
                    if let Err(e) = &listed {
                        return Err(e.clone());
                    }
                    match tags.live(pin) {
                        Some(name) => read_tag(&store, name)?,
                        None => None,
                    }
                }
            };
            Self::report(&store, &item.state, item.pin.as_ref(), live, deep)
        };
        Ok(items.iter().zip(own).map(|(i, o)| answer(i, o)).collect())
    }

    fn fork(
        &self,
        loc: &Locator,
        source: &Target,
        name: &str,
        expected: &Expected,
    ) -> Result<String> {
        let store = open(loc)?;
        kit::refuse_base(&loc.branch, name, "fork")?;
        let source = Self::resolve(&store, loc, source)?;
        // Reset contract: create, move back onto `source`, or leave alone.
        Self::update_branch(&store, name, expected, |_| Ok(Some(source.clone())))?;
        Ok(name.to_owned())
    }

    fn delete_working_ref(&self, loc: &Locator, working_ref: &str) -> Result<()> {
        let store = open(loc)?;
        kit::refuse_base(&loc.branch, working_ref, "delete_working_ref")?;
        store.delete_ref(RefKind::Branch, working_ref)
    }

    fn list_working_refs(&self, loc: &Locator) -> Result<Vec<String>> {
        let store = open(loc)?;
        let mut branches = store.ref_names(RefKind::Branch)?;
        branches.retain(|b| b.starts_with(tether_sdk::WORKING_REF_PREFIX));
        Ok(branches)
    }

    fn promote(&self, loc: &Locator, source: &Target, expected: &Expected) -> Result<Value> {
        let store = open(loc)?;
        let source = Self::resolve(&store, loc, source)?;
        let hint = self.describe().promote_hint;
        let head = Self::update_branch(&store, &loc.branch, expected, |head| {
            let head = head
                .map(String::as_str)
                .ok_or_else(|| Error::not_found(format!("branch {} does not exist", loc.branch)))?;
            if head == source {
                Ok(None)
            } else if store.is_ancestor(head, &source)? {
                Ok(Some(source.clone()))
            } else {
                Err(Error::backend(format!(
                    "{} is not an ancestor of {source}. {hint}",
                    loc.branch
                )))
            }
        })?;
        Ok(state_json(&head))
    }

    fn merge(
        &self,
        loc: &Locator,
        source: &Target,
        message: &str,
        expected: &Expected,
    ) -> Result<Value> {
        let store = open(loc)?;
        let theirs = Self::resolve(&store, loc, source)?;
        let head = Self::update_branch(&store, &loc.branch, expected, |head| {
            let ours = head
                .map(String::as_str)
                .ok_or_else(|| Error::not_found(format!("branch {} does not exist", loc.branch)))?;
            if store.is_ancestor(&theirs, ours)? {
                return Ok(None); // Already merged.
            }
            if store.is_ancestor(ours, &theirs)? {
                return Ok(Some(theirs.clone())); // Fast-forward.
            }
            let merged = three_way(&store, ours, &theirs)?;
            let commit = Snapshot::child(vec![ours.to_owned(), theirs.clone()], merged, message);
            store.write_snapshot(&commit).map(Some)
        })?;
        Ok(state_json(&head))
    }

    fn ancestor_of(
        &self,
        loc: &Locator,
        ancestor: &Value,
        descendant: &Value,
    ) -> Result<Option<bool>> {
        let store = open(loc)?;
        let (a, d) = (snapshot_id(ancestor)?, snapshot_id(descendant)?);
        if store.snapshot(&a)?.is_none() || store.snapshot(&d)?.is_none() {
            return Ok(None);
        }
        store.is_ancestor(&a, &d).map(Some)
    }

    fn open(&self, loc: &Locator, target: &Target, read_only: bool) -> Result<Handle> {
        let store = open(loc)?;
        // (ref name, whether it is a branch one may write to)
        let (name, branch) = match target {
            Target::Base if loc.at.is_none() => (Some(loc.branch.clone()), true),
            Target::Base => (loc.at.clone(), false),
            Target::WorkingRef(name) => (Some(name.clone()), true),
            Target::Pinned(pin) => (Some(Self::pinned(&store, pin)?.0), false),
            Target::Recorded(_) => (None, false),
        };
        let id = Self::resolve(&store, loc, target)?;
        Ok(Handle {
            type_name: "MemoryHandle".into(),
            address: format!("{}#{}", loc.system, name.as_deref().unwrap_or(&id)),
            // Tags and snapshots are immutable: only a branch opens writable.
            read_only: read_only || !branch,
            fields: json!({ "system": loc.system, "ref": name, "snapshot_id": id }),
        })
    }

    fn history(
        &self,
        loc: &Locator,
        from_ref: Option<&str>,
        limit: u32,
    ) -> Result<Vec<HistoryEntry>> {
        let store = open(loc)?;
        let start = match from_ref {
            Some(rev) => store.resolve_rev(rev)?,
            None => Self::base_head(&store, loc)?,
        };
        let mut refs = store.refs(RefKind::Branch)?;
        refs.extend(store.refs(RefKind::Tag)?);
        let entries = store.ancestry(&start)?.into_iter().take(limit as usize);
        Ok(entries
            .map(|(id, snapshot)| HistoryEntry {
                refs: refs
                    .iter()
                    .filter(|(_, at)| *at == id)
                    .map(|(name, _)| name.clone())
                    .collect(),
                id,
                when: snapshot.when,
                message: snapshot.message,
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
        let old = store.require_snapshot(&snapshot_id(a)?)?.payload;
        let new = store.require_snapshot(&snapshot_id(b)?)?.payload;
        let mut diff = ObjectDiff::new("keys");
        for key in old.keys().chain(new.keys()).collect::<BTreeSet<_>>() {
            match (old.get(key), new.get(key)) {
                (None, Some(_)) => diff.add(key, Change::Added, ""),
                (Some(_), None) => diff.add(key, Change::Removed, ""),
                (Some(x), Some(y)) if x != y => diff.add(key, Change::Modified, ""),
                _ => continue,
            };
        }
        Ok(diff)
    }

    fn create(&self, loc: &Locator, owner: &str) -> Result<Value> {
        let store = open(loc)?;
        let refuse = || {
            Error::backend(format!(
                "{} is not empty; create never adopts an existing store",
                loc.system
            ))
        };
        if !store.is_blank()? {
            return Err(refuse());
        }
        // The create-only marker is the step that claims the store, so of two
        // racing creates one fails here.
        store.claim(owner).map_err(|e| match e {
            StorageError::AlreadyExists(_) => refuse(),
            e => e.into(),
        })?;
        let id = store.write_snapshot(&Snapshot::initial())?;
        store
            .create_ref(RefKind::Branch, &loc.branch, &id)
            .map_err(|e| match e {
                StorageError::AlreadyExists(_) => refuse(),
                e => e.into(),
            })?;
        Ok(state_json(&id))
    }

    fn owner(&self, loc: &Locator) -> Result<Option<String>> {
        let store = open(loc)?;
        store.owner()
    }

    fn is_ref_empty(&self, loc: &Locator, ignoring: &[String]) -> Result<Option<bool>> {
        let store = open(loc)?;
        for key in store.keys()? {
            let accounted = match key {
                Key::Owner | Key::Snapshot(_) | Key::Tombstone(_) => true,
                Key::Ref(RefKind::Branch, name) if name == loc.branch => true,
                Key::Ref(_, name) => ignoring.contains(&name),
                Key::Foreign => false,
            };
            if !accounted {
                return Ok(Some(false));
            }
        }
        let Some(base) = store.read_ref(RefKind::Branch, &loc.branch)? else {
            return Ok(Some(false));
        };
        Ok(Some(store.require_snapshot(&base.value)?.is_initial()))
    }

    fn delete_store(&self, loc: &Locator, owner: &str) -> Result<()> {
        let store = open(loc)?;
        // Re-check right before the irreversible step: the marker, then emptiness.
        kit::guard_delete(&loc.system, store.owner()?.as_deref(), owner, || {
            Ok(self.is_ref_empty(loc, &[])? == Some(true))
        })?;
        // Refs and snapshots first, the marker last, so a failure part way
        // leaves a store that is still recognisably ours.
        for key in store.keys()? {
            match key {
                Key::Snapshot(key) | Key::Tombstone(key) => store.delete_key(&key)?,
                Key::Ref(kind, name) => store.delete_ref(kind, &name)?,
                Key::Owner | Key::Foreign => {}
            }
        }
        store.delete_key(store::OWNER_KEY)
    }
}

/// Three-way merge of payload keys against the merge base: a key changed on
/// one side takes that side; changed differently on both sides conflicts.
fn three_way(store: &Store, ours: &str, theirs: &str) -> Result<serde_json::Map<String, Value>> {
    let base = match store.merge_base(ours, theirs)? {
        Some(id) => store.require_snapshot(&id)?.payload,
        None => serde_json::Map::new(),
    };
    let ours = store.require_snapshot(ours)?.payload;
    let theirs = store.require_snapshot(theirs)?.payload;
    let mut merged = serde_json::Map::new();
    let mut conflicts = Vec::new();
    for key in base
        .keys()
        .chain(ours.keys())
        .chain(theirs.keys())
        .collect::<BTreeSet<_>>()
    {
        let (b, o, t) = (base.get(key), ours.get(key), theirs.get(key));
        let value = if o == t || t == b {
            o
        } else if o == b {
            t
        } else {
            conflicts.push(key.clone());
            continue;
        };
        if let Some(v) = value {
            merged.insert(key.clone(), v.clone());
        }
    }
    if !conflicts.is_empty() {
        return Err(Error::MergeConflict(conflicts));
    }
    Ok(merged)
}

/// The memory backend takes no settings at all, so none may be committed.
impl tether_sdk::DescribeExt for MemoryBackend {
    fn config_keys(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(MemoryBackend, harness: MemoryHarness, [describe_ext]);
