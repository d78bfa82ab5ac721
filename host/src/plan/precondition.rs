//! Preconditions: what a plan saw, typed, and how apply looks again.
//!
//! A plan records the world its actions were computed from (a manifest hash, a
//! branch head, a history digest). Apply asks a [`PreconditionChecker`] for the
//! current value of each one before the first action, and refuses with a stale
//! plan error naming every one that moved, so a stale plan does nothing at all
//! (spec 07, "What a plan checks before it applies").
//!
//! On disk a precondition has the spec's shape (09, "JSON output"):
//! `{"kind", "expected", "key", "params": {...}, "detail"}`. In Rust it is an
//! enum, so every kind's fields are typed and every check is written once, here,
//! rather than re-implemented per command. Comparison of observed and expected
//! values is also done here; the checker only reads the world.

use serde_json::{Map, Value, json};

use crate::model::canonical;

/// Every precondition kind a plan may carry (the spec's `PRECONDITION_KINDS`).
pub const PRECONDITION_KINDS: &[&str] = &[
    kind::WORKSPACE_ID,
    kind::WORKSPACE_BOOKMARK,
    kind::MANIFEST_HASH,
    kind::DATASET_VERSION,
    kind::BOOKMARK_HEAD,
    kind::VCS_HEAD,
    kind::HISTORY_DIGEST,
    kind::NO_NEW_HOLDERS,
    kind::REF_HEAD,
    kind::REF_ABSENT,
    kind::REF_PRESENT,
    kind::REF_DESCENDS,
    kind::BASE_STATE,
    kind::PIN_STATE,
    kind::STORE_EMPTY,
];

/// The `kind` strings of the wire form.
pub mod kind {
    pub const WORKSPACE_ID: &str = "workspace_id";
    pub const WORKSPACE_BOOKMARK: &str = "workspace_bookmark";
    pub const MANIFEST_HASH: &str = "manifest_hash";
    pub const DATASET_VERSION: &str = "dataset_version";
    pub const BOOKMARK_HEAD: &str = "bookmark_head";
    pub const VCS_HEAD: &str = "vcs_head";
    pub const HISTORY_DIGEST: &str = "history_digest";
    pub const NO_NEW_HOLDERS: &str = "no_new_holders";
    pub const REF_HEAD: &str = "ref_head";
    pub const REF_ABSENT: &str = "ref_absent";
    pub const REF_PRESENT: &str = "ref_present";
    pub const REF_DESCENDS: &str = "ref_descends";
    pub const BASE_STATE: &str = "base_state";
    pub const PIN_STATE: &str = "pin_state";
    pub const STORE_EMPTY: &str = "store_empty";
}

/// The store a per-object check contacts: the backend kind and the locator, as
/// the plan saw them. Recorded in the precondition (params `backend` and
/// `locator`) so the check reaches the same store even when no manifest names
/// it any more (a created store `gc --delete-stores --store` was given).
#[derive(Clone, Debug, PartialEq)]
pub struct Store {
    pub backend: String,
    pub locator: Value,
}

impl Store {
    pub fn new(backend: impl Into<String>, locator: Value) -> Self {
        Store {
            backend: backend.into(),
            locator,
        }
    }
}

/// One thing that must still hold when a plan is applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Precondition {
    /// The checkout that made the plan (its 8-hex workspace id): a plan binds to
    /// its checkout, since `workspace.toml` is per checkout.
    WorkspaceId { expected: String },
    /// The bookmark this checkout works on, as both `workspace.toml` and the VCS
    /// see it (git's `HEAD` branch; jj's bookmarks at `@`, or `@-` when `@` has
    /// edits). `None`: the plan was made on no bookmark.
    WorkspaceBookmark { expected: Option<String> },
    /// The hash of the manifests in the working tree (12 hex).
    ManifestHash { expected: String },
    /// The dataset's `tether.toml` version (what `upgrade` binds to).
    DatasetVersion { expected: u64 },
    /// The commit a VCS bookmark points at. A bookmark that is gone fails.
    BookmarkHead { bookmark: String, expected: String },
    /// The commit a VCS revision (`@`, `HEAD`) resolves to: the working copy.
    VcsHead { rev: String, expected: String },
    /// A digest over every visible commit: a commit made in another workspace
    /// may reference a pin a gc plan would release.
    HistoryDigest { expected: String },
    /// The live checkouts working on a bookmark (workspace ids). Holds while no
    /// checkout outside this set has started working on it.
    NoNewHolders {
        bookmark: String,
        expected: Vec<String>,
    },
    /// A native ref (a working branch) exists at the state the plan reviewed:
    /// the head a `fork` or `reuse` moves from.
    RefHead {
        key: String,
        store: Store,
        ref_name: String,
        expected: Value,
    },
    /// A native ref does not exist: a `fork` that creates the branch.
    RefAbsent {
        key: String,
        store: Store,
        ref_name: String,
    },
    /// An adopted branch still exists and no newer generation of it (`.2`,
    /// `.3`) has appeared. Not bound to a head: an `adopt` moves nothing.
    RefPresent {
        key: String,
        store: Store,
        ref_name: String,
    },
    /// A `--shared` adopt's branch still builds on the state (the bookmark's
    /// pin) it built on at plan time; fails when the store can no longer tell.
    RefDescends {
        key: String,
        store: Store,
        ref_name: String,
        expected: Value,
    },
    /// A promote's base branch is still at the head the plan reviewed.
    BaseState {
        key: String,
        store: Store,
        ref_name: String,
        expected: Value,
    },
    /// A pin still resolves to the state the plan reviewed (a promote whose
    /// source is a pin rather than a branch head).
    PinState {
        key: String,
        store: Store,
        pin: String,
        expected: Value,
    },
    /// A store `gc --delete-stores` would delete holds nothing but what the
    /// plan itself releases (`ignore`: refs the plan deletes first). The up-front
    /// check honours `ignore`; the engine asks again with nothing ignored
    /// right before `delete-store`, through [`PreconditionChecker::store_empty`].
    StoreEmpty {
        key: Option<String>,
        store: Store,
        ignore: Vec<String>,
    },
}

/// What the world says, as the engine reads it for a [`Precondition`]. Every
/// method has a default that fails closed ("cannot check"), so a checker only
/// implements what its command's plans carry, and a plan with a kind the engine
/// forgot is stale rather than applied unchecked. `Err(why)` means the value
/// could not be read: the precondition fails with that reason.
pub trait PreconditionChecker {
    /// This checkout's workspace id.
    fn workspace_id(&mut self) -> Result<String, String> {
        Err(cannot(kind::WORKSPACE_ID))
    }
    /// The bookmark this checkout works on, if any.
    fn workspace_bookmark(&mut self) -> Result<Option<String>, String> {
        Err(cannot(kind::WORKSPACE_BOOKMARK))
    }
    /// The working tree's manifest hash.
    fn manifest_hash(&mut self) -> Result<String, String> {
        Err(cannot(kind::MANIFEST_HASH))
    }
    /// The dataset's `tether.toml` version.
    fn dataset_version(&mut self) -> Result<u64, String> {
        Err(cannot(kind::DATASET_VERSION))
    }
    /// The commit `bookmark` points at; `None` when there is no such bookmark.
    fn bookmark_head(&mut self, _bookmark: &str) -> Result<Option<String>, String> {
        Err(cannot(kind::BOOKMARK_HEAD))
    }
    /// The commit `rev` resolves to; `None` when it resolves to nothing.
    fn vcs_head(&mut self, _rev: &str) -> Result<Option<String>, String> {
        Err(cannot(kind::VCS_HEAD))
    }
    /// The digest over every visible commit.
    fn history_digest(&mut self) -> Result<String, String> {
        Err(cannot(kind::HISTORY_DIGEST))
    }
    /// The workspace ids of the live checkouts working on `bookmark`.
    fn bookmark_holders(&mut self, _bookmark: &str) -> Result<Vec<String>, String> {
        Err(cannot(kind::NO_NEW_HOLDERS))
    }
    /// Whether two states of `store` are the same thing: by default equal
    /// canonical JSON; a checker that knows the backend compares their content
    /// (volatile keys such as a Neon LSN left out, spec's `content_state`), so
    /// a position that moved without a change does not make a plan stale.
    fn same_state(&mut self, _store: &Store, a: &Value, b: &Value) -> bool {
        same(a, b)
    }
    /// The state a native ref points at; `None` when the ref does not exist.
    /// Answers `ref_head`, `ref_absent` and, by default, `base_state`.
    fn ref_head(
        &mut self,
        _key: &str,
        _store: &Store,
        _ref: &str,
    ) -> Result<Option<Value>, String> {
        Err(cannot(kind::REF_HEAD))
    }
    /// Whether `ref` exists and is the highest generation of its name.
    fn ref_present(&mut self, _key: &str, _store: &Store, _ref: &str) -> Result<bool, String> {
        Err(cannot(kind::REF_PRESENT))
    }
    /// Whether `ref`'s head still descends from (or is) `state`.
    fn ref_descends(
        &mut self,
        _key: &str,
        _store: &Store,
        _ref: &str,
        _state: &Value,
    ) -> Result<bool, String> {
        Err(cannot(kind::REF_DESCENDS))
    }
    /// The state a base branch points at (default: [`Self::ref_head`]).
    fn base_state(
        &mut self,
        key: &str,
        store: &Store,
        r#ref: &str,
    ) -> Result<Option<Value>, String> {
        self.ref_head(key, store, r#ref)
    }
    /// The state a pin resolves to (through its live generation); `None` when
    /// the pin is gone.
    fn pin_state(
        &mut self,
        _key: &str,
        _store: &Store,
        _pin: &str,
    ) -> Result<Option<Value>, String> {
        Err(cannot(kind::PIN_STATE))
    }
    /// What remains in a store besides the refs in `ignore` (and the base
    /// branch at its initial state and the owner marker): empty means empty.
    fn store_empty(
        &mut self,
        _key: Option<&str>,
        _store: &Store,
        _ignore: &[String],
    ) -> Result<Vec<String>, String> {
        Err(cannot(kind::STORE_EMPTY))
    }
}

fn cannot(kind: &str) -> String {
    format!("this command cannot check `{kind}`")
}

/// One precondition that no longer holds, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
    pub precondition: Precondition,
    /// What the world holds now, shortened for a message; `None` when it could
    /// not be read.
    pub observed: Option<String>,
    /// The sentence a user reads.
    pub message: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Precondition {
    /// The wire `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Precondition::WorkspaceId { .. } => kind::WORKSPACE_ID,
            Precondition::WorkspaceBookmark { .. } => kind::WORKSPACE_BOOKMARK,
            Precondition::ManifestHash { .. } => kind::MANIFEST_HASH,
            Precondition::DatasetVersion { .. } => kind::DATASET_VERSION,
            Precondition::BookmarkHead { .. } => kind::BOOKMARK_HEAD,
            Precondition::VcsHead { .. } => kind::VCS_HEAD,
            Precondition::HistoryDigest { .. } => kind::HISTORY_DIGEST,
            Precondition::NoNewHolders { .. } => kind::NO_NEW_HOLDERS,
            Precondition::RefHead { .. } => kind::REF_HEAD,
            Precondition::RefAbsent { .. } => kind::REF_ABSENT,
            Precondition::RefPresent { .. } => kind::REF_PRESENT,
            Precondition::RefDescends { .. } => kind::REF_DESCENDS,
            Precondition::BaseState { .. } => kind::BASE_STATE,
            Precondition::PinState { .. } => kind::PIN_STATE,
            Precondition::StoreEmpty { .. } => kind::STORE_EMPTY,
        }
    }

    /// The object key of a per-object check.
    pub fn key(&self) -> Option<&str> {
        match self {
            Precondition::RefHead { key, .. }
            | Precondition::RefAbsent { key, .. }
            | Precondition::RefPresent { key, .. }
            | Precondition::RefDescends { key, .. }
            | Precondition::BaseState { key, .. }
            | Precondition::PinState { key, .. } => Some(key),
            Precondition::StoreEmpty { key, .. } => key.as_deref(),
            _ => None,
        }
    }

    /// What this precondition binds the plan to, in one sentence (the wire
    /// `detail`, and the line the human renderer prints).
    pub fn describe(&self) -> String {
        match self {
            Precondition::WorkspaceId { expected } => format!("made in checkout {expected}"),
            Precondition::WorkspaceBookmark { expected: Some(b) } => {
                format!("this checkout works on bookmark {b}")
            }
            Precondition::WorkspaceBookmark { expected: None } => {
                "this checkout works on no bookmark".to_string()
            }
            Precondition::ManifestHash { expected } => format!("the manifests hash to {expected}"),
            Precondition::DatasetVersion { expected } => {
                format!("tether.toml is version {expected}")
            }
            Precondition::BookmarkHead { bookmark, expected } => {
                format!("bookmark {bookmark} is at {}", short_id(expected))
            }
            Precondition::VcsHead { rev, expected } => {
                format!("{rev} is commit {}", short_id(expected))
            }
            Precondition::HistoryDigest { expected } => {
                format!("the visible VCS history digests to {}", short_id(expected))
            }
            Precondition::NoNewHolders { bookmark, expected } => {
                if expected.is_empty() {
                    format!("no live checkout works on bookmark {bookmark}")
                } else {
                    format!(
                        "only checkouts {} work on bookmark {bookmark}",
                        expected.join(", ")
                    )
                }
            }
            Precondition::RefHead {
                key,
                ref_name,
                expected,
                ..
            } => format!("{key}: {ref_name} is at {}", short_value(expected)),
            Precondition::RefAbsent { key, ref_name, .. } => {
                format!("{key}: {ref_name} does not exist")
            }
            Precondition::RefPresent { key, ref_name, .. } => {
                format!("{key}: {ref_name} exists and is its newest generation")
            }
            Precondition::RefDescends {
                key,
                ref_name,
                expected,
                ..
            } => format!("{key}: {ref_name} builds on {}", short_value(expected)),
            Precondition::BaseState {
                key,
                ref_name,
                expected,
                ..
            } => format!("{key}: base {ref_name} is at {}", short_value(expected)),
            Precondition::PinState {
                key, pin, expected, ..
            } => format!("{key}: pin {pin} resolves to {}", short_value(expected)),
            Precondition::StoreEmpty { key, store, ignore } => {
                let what = key.clone().unwrap_or_else(|| store.backend.clone());
                if ignore.is_empty() {
                    format!("{what}: the store holds nothing")
                } else {
                    format!(
                        "{what}: the store holds nothing but {} (released by this plan)",
                        ignore.join(", ")
                    )
                }
            }
        }
    }

    /// Ask `checker` whether this still holds; `Some(failure)` when it does not.
    pub fn check(&self, checker: &mut dyn PreconditionChecker) -> Option<Failed> {
        let kind = self.kind();
        let fail = |observed: Option<String>, message: String| {
            Some(Failed {
                precondition: self.clone(),
                observed,
                message,
            })
        };
        let unreadable = |why: String| {
            let message = match self.key() {
                Some(key) => format!("{key}: cannot check `{kind}` ({why})"),
                None => format!("cannot check `{kind}` ({why})"),
            };
            Some(Failed {
                precondition: self.clone(),
                observed: None,
                message,
            })
        };
        match self {
            Precondition::WorkspaceId { expected } => match checker.workspace_id() {
                Err(why) => unreadable(why),
                Ok(now) if &now == expected => None,
                Ok(now) => fail(
                    Some(now.clone()),
                    format!(
                        "the plan was made in checkout {expected}, and this is checkout {now}: \
                         apply it where it was made, or plan again here"
                    ),
                ),
            },
            Precondition::WorkspaceBookmark { expected } => match checker.workspace_bookmark() {
                Err(why) => unreadable(why),
                Ok(now) if &now == expected => None,
                Ok(now) => {
                    let show =
                        |b: &Option<String>| b.clone().unwrap_or_else(|| "no bookmark".to_string());
                    fail(
                        Some(show(&now)),
                        format!(
                            "the plan was made on bookmark {}, and this checkout is now on {}",
                            show(expected),
                            show(&now)
                        ),
                    )
                }
            },
            Precondition::ManifestHash { expected } => match checker.manifest_hash() {
                Err(why) => unreadable(why),
                Ok(now) if &now == expected => None,
                Ok(now) => fail(
                    Some(now.clone()),
                    format!("the manifests changed since the plan (were {expected}, now {now})"),
                ),
            },
            Precondition::DatasetVersion { expected } => match checker.dataset_version() {
                Err(why) => unreadable(why),
                Ok(now) if now == *expected => None,
                Ok(now) => fail(
                    Some(now.to_string()),
                    format!("tether.toml was version {expected} when planned, and is now {now}"),
                ),
            },
            Precondition::BookmarkHead { bookmark, expected } => {
                match checker.bookmark_head(bookmark) {
                    Err(why) => unreadable(why),
                    Ok(Some(now)) if &now == expected => None,
                    Ok(Some(now)) => fail(
                        Some(now.clone()),
                        format!(
                            "bookmark {bookmark} moved since the plan (was {}, now {})",
                            short_id(expected),
                            short_id(&now)
                        ),
                    ),
                    Ok(None) => fail(None, format!("bookmark {bookmark} is gone")),
                }
            }
            Precondition::VcsHead { rev, expected } => match checker.vcs_head(rev) {
                Err(why) => unreadable(why),
                Ok(Some(now)) if &now == expected => None,
                Ok(now) => fail(
                    now.clone(),
                    format!(
                        "the VCS working copy moved since the plan ({rev} was {}, now {})",
                        short_id(expected),
                        now.as_deref().map(short_id).unwrap_or("nothing")
                    ),
                ),
            },
            Precondition::HistoryDigest { expected } => match checker.history_digest() {
                Err(why) => unreadable(why),
                Ok(now) if &now == expected => None,
                Ok(now) => fail(
                    Some(now.clone()),
                    "the VCS history changed since the plan (a commit, or a bookmark \
                     moved, perhaps in another workspace)"
                        .to_string(),
                ),
            },
            Precondition::NoNewHolders { bookmark, expected } => {
                match checker.bookmark_holders(bookmark) {
                    Err(why) => unreadable(why),
                    Ok(now) => {
                        let new: Vec<&String> =
                            now.iter().filter(|w| !expected.contains(w)).collect();
                        if new.is_empty() {
                            None
                        } else {
                            let list: Vec<&str> = new.iter().map(|s| s.as_str()).collect();
                            fail(
                                Some(list.join(", ")),
                                format!(
                                    "checkout(s) {} started working on bookmark {bookmark} \
                                     since the plan",
                                    list.join(", ")
                                ),
                            )
                        }
                    }
                }
            }
            Precondition::RefHead {
                key,
                store,
                ref_name,
                expected,
            } => match checker.ref_head(key, store, ref_name) {
                Err(why) => unreadable(why),
                Ok(Some(now)) if checker.same_state(store, &now, expected) => None,
                Ok(Some(now)) => fail(
                    Some(short_value(&now)),
                    format!(
                        "{key}: {ref_name} moved since the plan (was {}, now {})",
                        short_value(expected),
                        short_value(&now)
                    ),
                ),
                Ok(None) => fail(
                    None,
                    format!(
                        "{key}: {ref_name} is gone since the plan (was {})",
                        short_value(expected)
                    ),
                ),
            },
            Precondition::RefAbsent {
                key,
                store,
                ref_name,
            } => match checker.ref_head(key, store, ref_name) {
                Err(why) => unreadable(why),
                Ok(None) => None,
                Ok(Some(now)) => fail(
                    Some(short_value(&now)),
                    format!(
                        "{key}: {ref_name} appeared since the plan (at {})",
                        short_value(&now)
                    ),
                ),
            },
            Precondition::RefPresent {
                key,
                store,
                ref_name,
            } => match checker.ref_present(key, store, ref_name) {
                Err(why) => unreadable(why),
                Ok(true) => None,
                Ok(false) => fail(
                    None,
                    format!(
                        "{key}: {ref_name} is gone, or a newer generation of it appeared, \
                         since the plan"
                    ),
                ),
            },
            Precondition::RefDescends {
                key,
                store,
                ref_name,
                expected,
            } => match checker.ref_descends(key, store, ref_name, expected) {
                Err(why) => unreadable(why),
                Ok(true) => None,
                Ok(false) => fail(
                    None,
                    format!(
                        "{key}: {ref_name} no longer builds on {}",
                        short_value(expected)
                    ),
                ),
            },
            Precondition::BaseState {
                key,
                store,
                ref_name,
                expected,
            } => match checker.base_state(key, store, ref_name) {
                Err(why) => unreadable(why),
                Ok(Some(now)) if checker.same_state(store, &now, expected) => None,
                Ok(Some(now)) => fail(
                    Some(short_value(&now)),
                    format!(
                        "{key}: base {ref_name} moved since the plan (was {}, now {})",
                        short_value(expected),
                        short_value(&now)
                    ),
                ),
                Ok(None) => fail(None, format!("{key}: base {ref_name} is gone")),
            },
            Precondition::PinState {
                key,
                store,
                pin,
                expected,
            } => match checker.pin_state(key, store, pin) {
                Err(why) => unreadable(why),
                Ok(Some(now)) if same(&now, expected) => None,
                Ok(Some(now)) => fail(
                    Some(short_value(&now)),
                    format!(
                        "{key}: pin {pin} resolves to {} now, not {}",
                        short_value(&now),
                        short_value(expected)
                    ),
                ),
                Ok(None) => fail(None, format!("{key}: pin {pin} is gone")),
            },
            Precondition::StoreEmpty { key, store, ignore } => {
                match checker.store_empty(key.as_deref(), store, ignore) {
                    Err(why) => unreadable(why),
                    Ok(left) if left.is_empty() => None,
                    Ok(left) => {
                        let what = key.clone().unwrap_or_else(|| store.backend.clone());
                        fail(
                            Some(left.join(", ")),
                            format!("{what}: the store is no longer empty ({})", left.join(", ")),
                        )
                    }
                }
            }
        }
    }

    /// The spec's wire form: `{"kind", "expected", "key", "params", "detail"}`.
    /// Every field is always present, so the digest of a plan never depends on
    /// whether an absent value was written as `null` or left out.
    pub fn to_value(&self) -> Value {
        let mut params = Map::new();
        let store_params = |params: &mut Map<String, Value>, store: &Store| {
            params.insert("backend".into(), Value::String(store.backend.clone()));
            params.insert("locator".into(), store.locator.clone());
        };
        let expected = match self {
            Precondition::WorkspaceId { expected }
            | Precondition::ManifestHash { expected }
            | Precondition::HistoryDigest { expected } => json!(expected),
            Precondition::WorkspaceBookmark { expected } => json!(expected),
            Precondition::DatasetVersion { expected } => json!(expected),
            Precondition::BookmarkHead { bookmark, expected } => {
                params.insert("bookmark".into(), json!(bookmark));
                json!(expected)
            }
            Precondition::VcsHead { rev, expected } => {
                params.insert("rev".into(), json!(rev));
                json!(expected)
            }
            Precondition::NoNewHolders { bookmark, expected } => {
                params.insert("bookmark".into(), json!(bookmark));
                json!(expected)
            }
            Precondition::RefHead {
                store,
                ref_name,
                expected,
                ..
            }
            | Precondition::RefDescends {
                store,
                ref_name,
                expected,
                ..
            }
            | Precondition::BaseState {
                store,
                ref_name,
                expected,
                ..
            } => {
                store_params(&mut params, store);
                params.insert("ref".into(), json!(ref_name));
                expected.clone()
            }
            Precondition::RefAbsent {
                store, ref_name, ..
            }
            | Precondition::RefPresent {
                store, ref_name, ..
            } => {
                store_params(&mut params, store);
                params.insert("ref".into(), json!(ref_name));
                Value::Null
            }
            Precondition::PinState {
                store,
                pin,
                expected,
                ..
            } => {
                store_params(&mut params, store);
                params.insert("pin".into(), json!(pin));
                expected.clone()
            }
            Precondition::StoreEmpty { store, ignore, .. } => {
                store_params(&mut params, store);
                params.insert("ignore".into(), json!(ignore));
                Value::Bool(true)
            }
        };
        json!({
            "kind": self.kind(),
            "expected": expected,
            "key": self.key(),
            "params": params,
            "detail": self.describe(),
        })
    }

    /// Read the wire form back. `detail` is not read: it is derived from the
    /// typed fields (and covered by the plan's digest as written).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        let obj = value
            .as_object()
            .ok_or_else(|| format!("a precondition is not an object: {}", short_value(value)))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or("a precondition has no `kind`")?;
        let expected = obj.get("expected").cloned().unwrap_or(Value::Null);
        let key = obj.get("key").and_then(Value::as_str).map(str::to_string);
        let empty = Map::new();
        let params = obj
            .get("params")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let want_str = |v: &Value, what: &str| -> Result<String, String> {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("`{kind}` precondition: `{what}` is not a string"))
        };
        let param = |name: &str| -> Result<String, String> {
            want_str(params.get(name).unwrap_or(&Value::Null), name)
        };
        let need_key = || -> Result<String, String> {
            key.clone()
                .ok_or_else(|| format!("`{kind}` precondition names no object `key`"))
        };
        let store = || -> Result<Store, String> {
            Ok(Store {
                backend: param("backend")?,
                locator: params.get("locator").cloned().unwrap_or(Value::Null),
            })
        };
        let strings = |v: &Value, what: &str| -> Result<Vec<String>, String> {
            v.as_array()
                .ok_or_else(|| format!("`{kind}` precondition: `{what}` is not a list"))?
                .iter()
                .map(|s| want_str(s, what))
                .collect()
        };
        Ok(match kind {
            kind::WORKSPACE_ID => Precondition::WorkspaceId {
                expected: want_str(&expected, "expected")?,
            },
            kind::WORKSPACE_BOOKMARK => Precondition::WorkspaceBookmark {
                expected: match &expected {
                    Value::Null => None,
                    v => Some(want_str(v, "expected")?),
                },
            },
            kind::MANIFEST_HASH => Precondition::ManifestHash {
                expected: want_str(&expected, "expected")?,
            },
            kind::DATASET_VERSION => Precondition::DatasetVersion {
                expected: expected
                    .as_u64()
                    .ok_or("`dataset_version` precondition: `expected` is not a number")?,
            },
            kind::BOOKMARK_HEAD => Precondition::BookmarkHead {
                bookmark: param("bookmark")?,
                expected: want_str(&expected, "expected")?,
            },
            kind::VCS_HEAD => Precondition::VcsHead {
                rev: param("rev")?,
                expected: want_str(&expected, "expected")?,
            },
            kind::HISTORY_DIGEST => Precondition::HistoryDigest {
                expected: want_str(&expected, "expected")?,
            },
            kind::NO_NEW_HOLDERS => Precondition::NoNewHolders {
                bookmark: param("bookmark")?,
                expected: strings(&expected, "expected")?,
            },
            kind::REF_HEAD => Precondition::RefHead {
                key: need_key()?,
                store: store()?,
                ref_name: param("ref")?,
                expected,
            },
            kind::REF_ABSENT => Precondition::RefAbsent {
                key: need_key()?,
                store: store()?,
                ref_name: param("ref")?,
            },
            kind::REF_PRESENT => Precondition::RefPresent {
                key: need_key()?,
                store: store()?,
                ref_name: param("ref")?,
            },
            kind::REF_DESCENDS => Precondition::RefDescends {
                key: need_key()?,
                store: store()?,
                ref_name: param("ref")?,
                expected,
            },
            kind::BASE_STATE => Precondition::BaseState {
                key: need_key()?,
                store: store()?,
                ref_name: param("ref")?,
                expected,
            },
            kind::PIN_STATE => Precondition::PinState {
                key: need_key()?,
                store: store()?,
                pin: param("pin")?,
                expected,
            },
            kind::STORE_EMPTY => Precondition::StoreEmpty {
                key,
                store: store()?,
                ignore: match params.get("ignore") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(v) => strings(v, "ignore")?,
                },
            },
            other => {
                return Err(format!(
                    "unknown precondition kind `{other}` (this tether knows {})",
                    PRECONDITION_KINDS.join(", ")
                ));
            }
        })
    }
}

/// States are compared in canonical form, so key order in a backend's JSON
/// never makes two equal states differ.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    a == b || canonical::to_string(a) == canonical::to_string(b)
}

/// A commit id or digest, shortened to 12 characters for messages.
fn short_id(id: &str) -> &str {
    match id.char_indices().nth(12) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}

/// A state for a message: a string as is, anything else as canonical JSON,
/// cut at 80 characters.
pub(crate) fn short_value(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Null => "nothing".to_string(),
        other => canonical::to_string(other),
    };
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
