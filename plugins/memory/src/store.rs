//! The memory backend's storage layout, and every read and write of it.
//!
//! All keys are relative to the bucket at the locator's `system`:
//!
//! | key | content |
//! | --- | --- |
//! | `snapshots/<id>.json` | `{"message", "parents", "payload", "when"}` |
//! | `refs/branches/<name>.json` | `{"snapshot_id": "<id>"}` |
//! | `refs/tags/<name>.json` | `{"snapshot_id": "<id>"}` |
//! | `refs/tags/<name>.json.deleted` | `{}`: a tombstone; the tag name is never created again |
//! | `tether-owner.json` | `{"owner": "<dataset id>"}` (stores `create` made) |
//!
//! A snapshot id is the first 20 hex digits of the sha256 of the canonical
//! JSON of `{"message", "parents", "payload"}` (`when` is left out, so
//! identical content on identical parents is one snapshot). Snapshots are
//! immutable and written create-only; refs move only by conditional puts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tether_sdk::kit::{self, SecondsFormat};
use tether_sdk::storage::{Bucket, PutMode, StorageError, Versioned};
use tether_sdk::{Error, Result, canonical_json};

/// The owner marker. Not under `refs/`, so no ref listing ever reports it.
pub const OWNER_KEY: &str = "tether-owner.json";
/// Appended to a ref's key to make its tombstone. A ref listing (names ending
/// `.json`) never reports one.
const TOMBSTONE_SUFFIX: &str = ".deleted";
const SNAPSHOTS: &str = "snapshots/";
const ID_LEN: usize = 20;

/// One immutable state of the system.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    pub parents: Vec<String>,
    pub payload: Map<String, Value>,
    pub message: String,
    /// When it was written (RFC 3339), informational only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

impl Snapshot {
    /// The empty root every new system starts from. It has no `when`, so every
    /// created store has the same initial snapshot id.
    pub fn initial() -> Self {
        Self {
            message: "initial snapshot".to_owned(),
            ..Self::default()
        }
    }

    /// A child of `parents` with `payload`, stamped now.
    pub fn child(parents: Vec<String>, payload: Map<String, Value>, message: &str) -> Self {
        Self {
            parents,
            payload,
            message: message.to_owned(),
            when: kit::now_rfc3339(SecondsFormat::Secs),
        }
    }

    pub fn id(&self) -> String {
        let identity =
            json!({"parents": self.parents, "payload": self.payload, "message": self.message});
        let digest = Sha256::digest(canonical_json(&identity).as_bytes());
        hex::encode(digest)[..ID_LEN].to_owned()
    }

    /// Whether this is a root with nothing in it (what `create` writes).
    pub fn is_initial(&self) -> bool {
        self.parents.is_empty() && self.payload.is_empty()
    }
}

/// Branches and tags live in separate key spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    Branch,
    Tag,
}

impl RefKind {
    fn prefix(self) -> &'static str {
        match self {
            Self::Branch => "refs/branches/",
            Self::Tag => "refs/tags/",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Branch => "branch",
            Self::Tag => "tag",
        }
    }
}

#[derive(Serialize, Deserialize)]
struct RefFile {
    snapshot_id: String,
}

#[derive(Serialize, Deserialize)]
struct OwnerFile {
    owner: String,
}

/// An opened system.
pub struct Store {
    bucket: Bucket,
    system: String,
}

impl Store {
    pub fn open(system: &str) -> Result<Self> {
        Ok(Self {
            bucket: Bucket::open(system)?,
            system: system.to_owned(),
        })
    }

    // --- snapshots ---

    pub fn snapshot(&self, id: &str) -> Result<Option<Snapshot>> {
        if !is_snapshot_id(id) {
            return Ok(None);
        }
        Ok(self.bucket.get_json(&snapshot_key(id))?.map(|v| v.value))
    }

    /// The snapshot, or a backend error saying the state is unreachable.
    pub fn require_snapshot(&self, id: &str) -> Result<Snapshot> {
        self.snapshot(id)?.ok_or_else(|| {
            Error::backend(format!("snapshot {id} does not exist in {}", self.system))
        })
    }

    /// Write a snapshot (create-only; an existing one is the same content).
    pub fn write_snapshot(&self, snapshot: &Snapshot) -> Result<String> {
        let id = snapshot.id();
        match self
            .bucket
            .put_json(&snapshot_key(&id), snapshot, PutMode::Create)
        {
            Ok(_) | Err(StorageError::AlreadyExists(_)) => Ok(id),
            Err(e) => Err(e.into()),
        }
    }

    // --- refs ---

    /// The snapshot id a ref holds, with the etag a move must match.
    pub fn read_ref(&self, kind: RefKind, name: &str) -> Result<Option<Versioned<String>>> {
        let file = self.bucket.get_json::<RefFile>(&ref_key(kind, name)?)?;
        Ok(file.map(|v| Versioned {
            value: v.value.snapshot_id,
            etag: v.etag,
        }))
    }

    /// The snapshot id a ref holds, or not-found naming it.
    pub fn head(&self, kind: RefKind, name: &str) -> Result<String> {
        match self.read_ref(kind, name)? {
            Some(r) => Ok(r.value),
            None => Err(Error::not_found(format!(
                "{} {name} does not exist in {}",
                kind.noun(),
                self.system
            ))),
        }
    }

    /// Create a ref that must not exist (`AlreadyExists` otherwise).
    pub fn create_ref(&self, kind: RefKind, name: &str, id: &str) -> Result<(), StorageError> {
        self.put_ref(kind, name, id, PutMode::Create)
    }

    /// Move a ref whose file still has `etag` (`PreconditionFailed` otherwise).
    pub fn move_ref(
        &self,
        kind: RefKind,
        name: &str,
        id: &str,
        etag: String,
    ) -> Result<(), StorageError> {
        self.put_ref(kind, name, id, PutMode::IfMatch(etag))
    }

    fn put_ref(
        &self,
        kind: RefKind,
        name: &str,
        id: &str,
        mode: PutMode,
    ) -> Result<(), StorageError> {
        let key = ref_key(kind, name).map_err(|e| StorageError::Invalid(e.to_string()))?;
        self.bucket.put_json(
            &key,
            &RefFile {
                snapshot_id: id.to_owned(),
            },
            mode,
        )?;
        Ok(())
    }

    /// Delete a ref; already gone is success, still there afterwards is an error.
    pub fn delete_ref(&self, kind: RefKind, name: &str) -> Result<()> {
        let key = ref_key(kind, name)?;
        self.bucket.delete(&key)?;
        if self.bucket.exists(&key)? {
            return Err(Error::backend(format!(
                "{} {name} is still there after deleting it",
                kind.noun()
            )));
        }
        Ok(())
    }

    /// Whether a tombstone says `name` was deleted and must never be created
    /// again (a store like Icechunk, which never reuses a deleted tag's name).
    pub fn is_tombstoned(&self, kind: RefKind, name: &str) -> Result<bool> {
        Ok(self.bucket.exists(&tombstone_key(kind, name)?)?)
    }

    /// Delete a ref and leave its tombstone. The tombstone is written first,
    /// so the name is never free in between.
    pub fn delete_ref_leaving_tombstone(&self, kind: RefKind, name: &str) -> Result<()> {
        if !self.bucket.exists(&ref_key(kind, name)?)? {
            return Ok(());
        }
        self.bucket
            .put_json(&tombstone_key(kind, name)?, &json!({}), PutMode::Overwrite)?;
        self.delete_ref(kind, name)
    }

    /// Every ref name of `kind`, in key order.
    pub fn ref_names(&self, kind: RefKind) -> Result<Vec<String>> {
        self.ref_names_starting(kind, "")
    }

    /// The ref names of `kind` that start with `start`, in key order: one
    /// listing of just those names (a pin's generations), not of every ref.
    pub fn ref_names_starting(&self, kind: RefKind, start: &str) -> Result<Vec<String>> {
        let prefix = kind.prefix();
        Ok(self
            .bucket
            .list_all(&format!("{prefix}{start}"))?
            .into_iter()
            .filter_map(|m| {
                m.key
                    .strip_prefix(prefix)?
                    .strip_suffix(".json")
                    .map(str::to_owned)
            })
            .collect())
    }

    /// Every ref of `kind` with the snapshot it holds.
    pub fn refs(&self, kind: RefKind) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for name in self.ref_names(kind)? {
            if let Some(r) = self.read_ref(kind, &name)? {
                out.push((name, r.value));
            }
        }
        Ok(out)
    }

    /// `at` or a history start: a snapshot id, a tag or a branch, in that order.
    pub fn resolve_rev(&self, rev: &str) -> Result<String> {
        if self.snapshot(rev)?.is_some() {
            return Ok(rev.to_owned());
        }
        for kind in [RefKind::Tag, RefKind::Branch] {
            if let Some(r) = self.read_ref(kind, rev)? {
                return Ok(r.value);
            }
        }
        Err(Error::not_found(format!(
            "no snapshot, tag or branch {rev} in {}",
            self.system
        )))
    }

    // --- ancestry ---

    /// `start` and all its ancestors, nearest first (breadth first).
    pub fn ancestry(&self, start: &str) -> Result<Vec<(String, Snapshot)>> {
        let mut seen = std::collections::HashSet::from([start.to_owned()]);
        let mut queue = std::collections::VecDeque::from([start.to_owned()]);
        let mut out = Vec::new();
        while let Some(id) = queue.pop_front() {
            let snapshot = self.require_snapshot(&id)?;
            for parent in &snapshot.parents {
                if seen.insert(parent.clone()) {
                    queue.push_back(parent.clone());
                }
            }
            out.push((id, snapshot));
        }
        Ok(out)
    }

    /// Whether `ancestor` is `descendant` or in its history.
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        Ok(self
            .ancestry(descendant)?
            .iter()
            .any(|(id, _)| id == ancestor))
    }

    /// The nearest snapshot in both histories (the three-way merge base).
    pub fn merge_base(&self, a: &str, b: &str) -> Result<Option<String>> {
        let of_a: std::collections::HashSet<_> =
            self.ancestry(a)?.into_iter().map(|(id, _)| id).collect();
        Ok(self
            .ancestry(b)?
            .into_iter()
            .map(|(id, _)| id)
            .find(|id| of_a.contains(id)))
    }

    // --- store lifecycle ---

    pub fn owner(&self) -> Result<Option<String>> {
        Ok(self
            .bucket
            .get_json::<OwnerFile>(OWNER_KEY)?
            .map(|v| v.value.owner))
    }

    /// Write the owner marker, create-only: the step that claims the store.
    pub fn claim(&self, owner: &str) -> Result<(), StorageError> {
        self.bucket.put_json(
            OWNER_KEY,
            &OwnerFile {
                owner: owner.to_owned(),
            },
            PutMode::Create,
        )?;
        Ok(())
    }

    /// Whether anything at all is stored.
    pub fn is_blank(&self) -> Result<bool> {
        Ok(!self.bucket.any("")?)
    }

    /// Every key, classified by the layout.
    pub fn keys(&self) -> Result<Vec<Key>> {
        Ok(self
            .bucket
            .list_all("")?
            .into_iter()
            .map(|m| Key::classify(m.key))
            .collect())
    }

    /// Delete one key the layout owns.
    pub fn delete_key(&self, key: &str) -> Result<()> {
        self.bucket.delete(key)?;
        Ok(())
    }
}

/// A stored key, as the layout sees it.
pub enum Key {
    Owner,
    Snapshot(String),
    Ref(RefKind, String),
    /// A deleted ref's tombstone (the key itself).
    Tombstone(String),
    /// Something the layout does not account for.
    Foreign,
}

impl Key {
    fn classify(key: String) -> Self {
        if key == OWNER_KEY {
            return Self::Owner;
        }
        if key.starts_with(SNAPSHOTS) {
            return Self::Snapshot(key);
        }
        for kind in [RefKind::Branch, RefKind::Tag] {
            let Some(rest) = key.strip_prefix(kind.prefix()) else {
                continue;
            };
            if let Some(name) = rest.strip_suffix(".json") {
                return Self::Ref(kind, name.to_owned());
            }
            if rest.ends_with(&format!(".json{TOMBSTONE_SUFFIX}")) {
                return Self::Tombstone(key);
            }
        }
        Self::Foreign
    }
}

fn tombstone_key(kind: RefKind, name: &str) -> Result<String> {
    Ok(format!("{}{TOMBSTONE_SUFFIX}", ref_key(kind, name)?))
}

fn snapshot_key(id: &str) -> String {
    format!("{SNAPSHOTS}{id}.json")
}

fn is_snapshot_id(s: &str) -> bool {
    s.len() == ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The key of a ref, refusing names that would escape their key space.
fn ref_key(kind: RefKind, name: &str) -> Result<String> {
    let bad = name.is_empty()
        || name.starts_with('/')
        || name.ends_with('/')
        || name.contains("//")
        || name.contains('\\')
        || name.split('/').any(|part| part == "." || part == "..")
        || name.chars().any(char::is_control);
    if bad {
        return Err(Error::invalid(format!(
            "invalid {} name {name:?}",
            kind.noun()
        )));
    }
    Ok(format!("{}{name}.json", kind.prefix()))
}
