//! # tether-plugin-file: local files and directories
//!
//! Kind `file` (spec/11, "`file`: local paths and object stores"): a plain
//! artifact, Observed, with `CHEAP_FINGERPRINT`, `DIFF` and `CREATE` (a local
//! directory). The plugin never reads a byte of data itself: the host's `tree`
//! capability walks the directory and hashes files natively, in parallel and
//! through the dataset's hash cache. A directory's state and listing follow
//! the recipe below, which the host also applies natively (`tree::summarize`,
//! so 100,000 entries never cross the boundary); `state::DirListing` is the
//! same recipe in this crate, used for diffs.
//!
//! ## Locator
//!
//! ```json
//! {"uri": "/data/plate1"}
//! ```
//!
//! `uri` (positional; `path` is accepted as an alias) is an absolute local
//! path, a `file://` URL, or an object store object or prefix: S3
//! `s3://bucket/key`, GCS `gs://bucket/key`, Azure Blob `az://container/key`
//! or `abfs[s]://container@account.dfs.core.windows.net/key` (a trailing `/`,
//! or no key at all, means a prefix). Relative paths are resolved by the
//! engine at `add` before they reach a plugin, so one here is refused.
//! `region` is ignored for local paths (the host resolves a store's region,
//! endpoint and credentials; the plugin never sees them). Other schemes
//! (`s3a://`, `http://`, ...) are refused with a capability error. A single
//! object is read through a bucket opened at its own URI, with the empty key.
//!
//! ## `--file versioned`
//!
//! A single remote object whose policy is `file = "versioned"` is
//! Addressable: its state carries the store's version id (S3 `VersionId`,
//! GCS generation, Azure version id), `effective-capabilities` adds
//! `ADDRESSABLE` (so `commit` records it as recoverable), and `open` at a
//! recorded state hands out that version. An object the store reports no
//! version id for (a bucket without versioning) is refused there, which is
//! what `add --file versioned` and `commit` report. Local paths and prefixes
//! stay Observed whatever the policy.
//!
//! Both keys are `tree-keys` (walk, stat, hash) and `storage-keys` (the owner
//! marker `create` writes goes through `storage`), and `local-path-keys`.
//!
//! ## Identity
//!
//! `{"uri": <resolved path>}`: symlinks followed, `file://` folded, `.`,
//! `..`, doubled and trailing slashes gone, so `/p`, `/p/`, `file:///p` and a
//! path through a symlinked parent are one store (the host resolves it:
//! `tree::realpath`).
//!
//! ## States
//!
//! - a file: `{"type": "file", "size": N, "sha256": HEX}`;
//! - a directory: `{"type": "dir", "count": N, "size": N, "digest": HEX}`;
//! - a remote object: `{"type": "object", "size": N, "etag": ETAG}` (the etag
//!   without quotes), plus `"version_id": ID` where the store versions it.
//!   `version_id` is a volatile key: it addresses the bytes, the etag
//!   identifies them, so rewriting identical bytes is no change;
//! - a remote prefix: `{"type": "prefix", "count": N, "size": N, "digest": HEX}`,
//!   from one paged listing: every object under the prefix is an entry whose
//!   token is its etag (quotes removed), and `count`, `size`, `digest` follow
//!   the directory recipe below over those entries. The listing is the same
//!   JSONL, so `diff` names the keys added, removed and modified.
//!
//! A directory's entries are its files (a symlink to a file counts as a file
//! with its target's size and sha256: read through) and its symlinks that are
//! not read through (to a directory, dangling), recorded by target. Each
//! entry has a token: the sha256 for a file, `symlink:<target>` for a
//! recorded link (size 0). Directories themselves are not entries (an empty
//! directory is no content), and neither is the `.tether-owner` marker at the
//! root. Then:
//!
//! ```text
//! count  = number of entries
//! size   = sum of entry sizes
//! digest = sha256( for each entry in byte order of path: path "\0" token "\n" )
//! ```
//!
//! in lowercase hex; paths are relative, `/`-separated. An empty directory's
//! digest is the sha256 of the empty string. Timestamps never count: a
//! `touch` leaves the state equal.
//!
//! ## Listing and diff
//!
//! `listing(state)` of a directory is one canonical JSON line per entry,
//! `{"k": token, "p": path, "s": size}`, in path order, for the directory's
//! *current* content, and only when that is still `state` (a listing of
//! something else would be a lie; `None` then, and for a single file). The
//! engine stores it under `.tether/listings/` at commit.
//!
//! `diff` counts `files`: with both listings, every added, removed and
//! modified path with its size delta (`modified a.tif +4.0 KiB`); without
//! one, a summary in `note` and counts inferred from the entry counts (at
//! least one change when only the digest tells). Two single files report
//! their size and sha256 change.
//!
//! ## Create
//!
//! `create` makes the directory with a `.tether-owner` marker (`{"owner":
//! dataset}`, created only if absent, so of two racing creates one wins) and
//! refuses when anything is at the path. `is_ref_empty` is true only when the
//! directory holds nothing but the marker (files are data). `delete_store`
//! re-checks owner and emptiness, removes the marker, then the empty
//! directory (`rmdir`, which refuses anything else; the marker is put back
//! then).

mod harness;
mod state;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::kit;
use tether_sdk::storage::{Bucket, PutMode, StorageError};
use tether_sdk::tree::{self, EntryKind};
use tether_sdk::{
    Backend, Capability, Descriptor, Error, Handle, ObjectDiff, Result, Target, VerifyReport,
    VerifyStatus, cap, descriptor,
};

pub use harness::FileHarness;
pub use state::{DirListing, ListedEntry};

/// Capabilities of every local file object.
pub const CAPABILITIES: &[Capability] = &[
    cap::FINGERPRINT,
    cap::CHEAP_FINGERPRINT,
    cap::DIFF,
    cap::CREATE,
];

/// The owner marker `create` writes at a directory's root (the host's walk
/// skips it).
pub const OWNER_MARKER: &str = ".tether-owner";

/// Schemes of object stores this build reads (through the host's storage).
const SUPPORTED_SCHEMES: &[&str] = &["s3", "gs", "az", "abfs", "abfss"];

/// Schemes of object stores, refused as "not supported" rather than
/// "invalid": the locator is right, this build is not.
const OBJECT_STORE_SCHEMES: &[&str] = &["s3a", "gcs", "azure", "adl", "http", "https"];

/// The state key that holds a remote object's version id.
const VERSION_ID: &str = "version_id";

/// A file object's locator: `uri`, or its alias `path` (see the crate docs).
#[derive(Debug, Clone, Deserialize)]
pub struct Locator {
    #[serde(alias = "path")]
    uri: String,
}

#[derive(Deserialize)]
struct Marker {
    owner: String,
}

/// What a locator names.
enum Location {
    /// An absolute local path, not resolved (the host does that).
    Local(String),
    /// A remote prefix, as the storage URI to open (`s3://bucket[/prefix]`, no
    /// trailing slash) and the identity (`s3://bucket/prefix/`).
    Prefix { storage: String, identity: String },
    /// A single remote object, `s3://bucket/key`.
    Object(String),
}

fn location(locator: &Locator) -> Result<Location> {
    let raw = locator.uri.as_str();
    let Some((scheme, rest)) = SUPPORTED_SCHEMES
        .iter()
        .find_map(|s| Some((*s, raw.strip_prefix(s)?.strip_prefix("://")?)))
    else {
        return local_path(raw).map(Location::Local);
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::invalid(format!(
            "{raw}: a {scheme}:// uri needs a bucket or container ({scheme}://bucket/prefix/)"
        )));
    }
    let object = !key.is_empty() && !key.ends_with('/');
    let key = key.trim_end_matches('/');
    if key.split('/').any(|seg| seg == "." || seg == "..") || key.contains("//") {
        return Err(Error::invalid(format!(
            "{raw}: the prefix may not have empty, '.' or '..' segments"
        )));
    }
    Ok(if object {
        Location::Object(format!("{scheme}://{bucket}/{key}"))
    } else if key.is_empty() {
        Location::Prefix {
            storage: format!("{scheme}://{bucket}"),
            identity: format!("{scheme}://{bucket}/"),
        }
    } else {
        Location::Prefix {
            storage: format!("{scheme}://{bucket}/{key}"),
            identity: format!("{scheme}://{bucket}/{key}/"),
        }
    })
}

/// The entries under an S3 prefix, in key order: token the etag.
fn prefix_listing(storage: &str) -> Result<DirListing> {
    let bucket = Bucket::open(storage)?;
    let mut entries: Vec<ListedEntry> = bucket
        .list_all("")?
        .into_iter()
        .map(|m| ListedEntry {
            k: m.etag.trim_matches('"').to_owned(),
            p: m.key,
            s: m.size,
        })
        .collect();
    entries.sort_by(|a, b| a.p.cmp(&b.p));
    Ok(DirListing { entries })
}

/// `{"type": "object", "size", "etag"[, "version_id"]}` of the object at
/// `uri`: the current one, or version `version` of it.
fn object_state(uri: &str, version: Option<&str>) -> Result<Value> {
    // The bucket at the object's own URI reads it with the empty key.
    match Bucket::open(uri)?.head_version("", version)? {
        Some(m) => {
            let mut state = json!({
                "type": "object",
                "size": m.meta.size,
                "etag": m.meta.etag.trim_matches('"'),
            });
            if let Some(v) = m.version.filter(|v| !v.is_empty()) {
                state[VERSION_ID] = json!(v);
            }
            Ok(state)
        }
        None => Err(Error::not_found(match version {
            Some(v) => format!("{uri} has no version {v} (any more)"),
            None => format!("no object at {uri}"),
        })),
    }
}

/// The version id a recorded object state carries.
fn recorded_version(state: &Value) -> Option<&str> {
    state
        .get(VERSION_ID)
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

/// How a version of a remote object is named where its tools name one:
/// gsutil's `gs://b/k#GENERATION`, and the query S3 and Azure read it with.
fn versioned_address(uri: &str, version: &str) -> String {
    if uri.starts_with("gs://") {
        format!("{uri}#{version}")
    } else if uri.starts_with("s3://") {
        format!("{uri}?versionId={version}")
    } else {
        format!("{uri}?versionid={version}")
    }
}

/// The refusal of `--file versioned` for an object the store keeps no
/// versions of.
fn unversioned(uri: &str) -> Error {
    let how = if uri.starts_with("s3://") {
        "enable versioning on the bucket (`aws s3api put-bucket-versioning --bucket B \
         --versioning-configuration Status=Enabled`)"
    } else if uri.starts_with("gs://") {
        "enable object versioning on the bucket (`gcloud storage buckets update gs://B \
         --versioning`)"
    } else {
        "enable blob versioning on the storage account"
    };
    Error::Capability(format!(
        "{uri}: `--file versioned` addresses the object by the store's version id, but the \
         store reports none for it (its bucket or container keeps no versions): {how} and \
         rewrite the object, or use `--file immutable`"
    ))
}

fn prefix_state(listing: &DirListing) -> Value {
    let mut state = listing.state();
    state["type"] = json!("prefix");
    state
}

/// Refusal of what only local paths support.
fn local_only(what: &str) -> Error {
    Error::Capability(format!(
        "the file backend {what} only local directories; remote prefixes are not created or removed by tether"
    ))
}

/// The local path a locator's `uri` names: `file://` folded, absolute. Not
/// resolved: the host does that (`tree::realpath`).
fn local_path(raw: &str) -> Result<String> {
    let path = if let Some(rest) = raw.strip_prefix("file://") {
        rest.strip_prefix("localhost").unwrap_or(rest)
    } else if let Some((scheme, _)) = raw.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        if OBJECT_STORE_SCHEMES.contains(&scheme.as_str()) {
            return Err(Error::Capability(format!(
                "{raw}: {scheme}:// object stores are not supported by the file backend; it \
                 reads local paths and s3://, gs://, az:// and abfs[s]:// stores"
            )));
        }
        return Err(Error::invalid(format!(
            "{raw}: unknown scheme {scheme}://; the file backend takes a local path"
        )));
    } else {
        raw
    };
    if !path.starts_with('/') {
        return Err(Error::invalid(format!(
            "{raw:?} is not an absolute local path (file:///path or /path); relative paths \
             are resolved when the object is added"
        )));
    }
    Ok(path.to_owned())
}

/// `{"type": "dir", "count", "size", "digest"}` of a host-side summary
/// (the recipe in the crate docs; `DirListing::state` computes the same).
fn dir_state(s: &tree::ContentSummary) -> Value {
    json!({
        "type": "dir",
        "count": s.count,
        "size": s.size,
        "digest": s.digest,
    })
}

/// The file backend. Stateless: everything is on disk, read by the host.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileBackend;

impl FileBackend {
    /// The state of whatever is at `path` now.
    fn state_at(path: &str) -> Result<Value> {
        let real = tree::realpath(path)?;
        match tree::stat(&real)? {
            None => Err(Error::not_found(format!("nothing at {path}"))),
            Some(e) => match e.kind {
                EntryKind::File => Ok(json!({
                    "type": "file",
                    "size": e.size,
                    "sha256": tree::hash_file(&real)?,
                })),
                EntryKind::Dir => Ok(dir_state(&tree::summarize(&real, false)?)),
                EntryKind::Symlink => Err(Error::not_found(format!(
                    "{path} is a dangling symlink (to {})",
                    e.link_target.unwrap_or_default()
                ))),
            },
        }
    }

    fn read_owner(path: &str) -> Result<Option<String>> {
        match tree::stat(path)? {
            Some(e) if e.kind == EntryKind::Dir => {}
            _ => return Ok(None),
        }
        let bucket = Bucket::open(path)?;
        Ok(bucket
            .get_json::<Marker>(OWNER_MARKER)?
            .map(|m| m.value.owner))
    }
}

impl Backend for FileBackend {
    type Locator = Locator;

    fn describe(&self) -> Descriptor {
        let keys = || vec!["uri".to_owned(), "path".to_owned()];
        Descriptor {
            local_path_keys: keys(),
            storage_keys: keys(),
            tree_keys: keys(),
            volatile_keys: vec![VERSION_ID.to_owned()],
            ..descriptor("file", CAPABILITIES)
        }
    }

    fn validate_locator(&self, locator: &Locator) -> Result<()> {
        location(locator).map(|_| ())
    }

    fn identity(&self, locator: &Locator) -> Result<Value> {
        match location(locator)? {
            Location::Local(path) => Ok(json!({ "uri": tree::realpath(&path)? })),
            Location::Prefix { identity, .. } => Ok(json!({ "uri": identity })),
            Location::Object(uri) => Ok(json!({ "uri": uri })),
        }
    }

    fn effective_capabilities(&self, locator: &Locator, policy: &Value) -> Result<Vec<String>> {
        // Observed, but a single remote object under `file = "versioned"` is
        // Addressable by its version id; only local directories can be created.
        let mut caps = kit::policy_capabilities(self.describe().capabilities, policy);
        let place = location(locator)?;
        if !matches!(place, Location::Local(_)) {
            caps.retain(|c| c != cap::CREATE.as_str());
        }
        let versioned = policy.get("file").and_then(Value::as_str) == Some("versioned");
        if let (true, Location::Object(uri)) = (versioned, &place) {
            let state = object_state(uri, None)?;
            if recorded_version(&state).is_none() {
                return Err(unversioned(uri));
            }
            caps.push(cap::ADDRESSABLE.as_str().to_owned());
        }
        Ok(caps)
    }

    /// A file object is read where it lies: its handle is its path or URI
    /// (`FileHandle`, spec/09), always read-only. Observed, so only what is
    /// there now can be named, except a remote object recorded with a version
    /// id (`--file versioned`): that version opens, once the store confirms it
    /// still has it with the recorded etag.
    fn open(&self, locator: &Locator, target: &Target, _read_only: bool) -> Result<Handle> {
        let place = location(locator)?;
        let uri = match &place {
            Location::Local(path) => path.clone(),
            Location::Prefix { identity, .. } => identity.clone(),
            Location::Object(uri) => uri.clone(),
        };
        let version = match (target, &place) {
            (Target::Base, _) => None,
            (Target::WorkingRef(name), _) => {
                return Err(Error::Capability(format!(
                    "the file backend has no working refs (asked for {name})"
                )));
            }
            (Target::Recorded(state), Location::Object(_)) => {
                let Some(v) = recorded_version(state) else {
                    return Err(Error::Capability(format!(
                        "{uri}: the recorded state has no version id (it was recorded from a \
                         store that kept no versions), so only the object's current content \
                         opens"
                    )));
                };
                let now = object_state(&uri, Some(v))?;
                if now.get("etag") != state.get("etag") {
                    return Err(Error::backend(format!(
                        "{uri}: version {v} no longer has the recorded etag"
                    )));
                }
                Some(v.to_owned())
            }
            (Target::Pinned(_) | Target::Recorded(_), _) => {
                return Err(Error::Capability(format!(
                    "{uri} is Observed: its recorded state is a digest, not an address, so only \
                     its current content opens"
                )));
            }
        };
        Ok(Handle {
            type_name: "FileHandle".into(),
            address: match &version {
                Some(v) => versioned_address(&uri, v),
                None => uri.clone(),
            },
            read_only: true,
            fields: json!({ "uri": uri, "version_id": version }),
        })
    }

    /// A versioned remote object's recorded state is there while the store
    /// still has its version with the recorded etag; nothing else has an
    /// address to check.
    fn verify(
        &self,
        locator: &Locator,
        state: &Value,
        _pin: Option<&tether_sdk::PinRef>,
        _deep: bool,
    ) -> Result<VerifyReport> {
        let (Location::Object(uri), Some(v)) = (location(locator)?, recorded_version(state)) else {
            return Err(self.unsupported("verify"));
        };
        let report = |status, message: String| Ok(VerifyReport { status, message });
        match object_state(&uri, Some(v)) {
            Ok(now) if now.get("etag") == state.get("etag") => {
                report(VerifyStatus::Ok, format!("{uri} still has version {v}"))
            }
            Ok(_) => report(
                VerifyStatus::Drifted,
                format!("{uri}: version {v} no longer has the recorded etag"),
            ),
            Err(Error::NotFound(_)) => report(
                VerifyStatus::Missing,
                format!(
                    "{uri} no longer has version {v} (deleted, or expired by a lifecycle rule)"
                ),
            ),
            Err(e) => Err(e),
        }
    }

    fn state_addressable(&self, locator: &Locator, state: &Value) -> Result<bool> {
        let (Location::Object(uri), Some(v)) = (location(locator)?, recorded_version(state)) else {
            return Ok(false);
        };
        match object_state(&uri, Some(v)) {
            Ok(now) => Ok(now.get("etag") == state.get("etag")),
            Err(Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn fingerprint(&self, locator: &Locator, working_ref: Option<&str>) -> Result<Value> {
        if let Some(name) = working_ref {
            return Err(Error::Capability(format!(
                "the file backend has no working refs (asked for {name})"
            )));
        }
        match location(locator)? {
            Location::Local(path) => Self::state_at(&path),
            Location::Prefix { storage, .. } => Ok(prefix_state(&prefix_listing(&storage)?)),
            Location::Object(uri) => object_state(&uri, None),
        }
    }

    fn listing(&self, locator: &Locator, state: &Value) -> Result<Option<String>> {
        match location(locator)? {
            Location::Prefix { storage, .. } => {
                if state.get("type").and_then(Value::as_str) != Some("prefix") {
                    return Ok(None);
                }
                let listing = prefix_listing(&storage)?;
                // Only the current content can be listed.
                return Ok((prefix_state(&listing) == *state).then(|| listing.to_jsonl()));
            }
            Location::Object(_) => return Ok(None),
            Location::Local(_) => {}
        }
        if state.get("type").and_then(Value::as_str) != Some("dir") {
            return Ok(None);
        }
        let path = local_path(&locator.uri)?;
        let real = tree::realpath(&path)?;
        match tree::stat(&real)? {
            Some(e) if e.kind == EntryKind::Dir => {}
            _ => return Ok(None),
        }
        // The host reduces the walk by this crate's recipe (`state::DirListing`
        // is the same recipe in Rust, for diffs and tests).
        let summary = tree::summarize(&real, true)?;
        // Only the current content can be listed: say nothing about a past one.
        Ok(
            (summary.digest == state.get("digest").and_then(Value::as_str).unwrap_or(""))
                .then(|| summary.listing.unwrap_or_default()),
        )
    }

    fn diff(
        &self,
        _locator: &Locator,
        a: &Value,
        b: &Value,
        listing_a: Option<&str>,
        listing_b: Option<&str>,
    ) -> Result<ObjectDiff> {
        state::diff(a, b, listing_a, listing_b)
    }

    fn create(&self, locator: &Locator, owner: &str) -> Result<Value> {
        let Location::Local(path) = location(locator)? else {
            return Err(local_only("creates"));
        };
        let refuse = || {
            Error::backend(format!(
                "{path} already exists; create never adopts an existing directory"
            ))
        };
        if tree::stat(&path)?.is_some() {
            return Err(refuse());
        }
        // The create-only marker claims the directory (storage makes it), so of
        // two racing creates one fails here.
        let bucket = Bucket::open(&path)?;
        bucket
            .put_json(OWNER_MARKER, &json!({ "owner": owner }), PutMode::Create)
            .map_err(|e| match e {
                StorageError::AlreadyExists(_) => refuse(),
                e => e.into(),
            })?;
        Self::state_at(&path)
    }

    fn owner(&self, locator: &Locator) -> Result<Option<String>> {
        match location(locator)? {
            Location::Local(path) => Self::read_owner(&path),
            Location::Prefix { .. } | Location::Object(_) => Ok(None),
        }
    }

    fn is_ref_empty(&self, locator: &Locator, _ignoring: &[String]) -> Result<Option<bool>> {
        // No refs here: empty means no data but the marker.
        let Location::Local(path) = location(locator)? else {
            return Ok(None);
        };
        match tree::stat(&path)? {
            None => Ok(Some(true)),
            Some(e) if e.kind == EntryKind::Dir => Ok(Some(tree::is_empty(&path)?)),
            Some(_) => Ok(Some(false)),
        }
    }

    fn delete_store(&self, locator: &Locator, owner: &str) -> Result<()> {
        let Location::Local(path) = location(locator)? else {
            return Err(local_only("deletes"));
        };
        if tree::stat(&path)?.is_none() {
            return Ok(());
        }
        // Re-check right before the irreversible step: the marker, then
        // emptiness (files are data).
        kit::guard_delete(&path, Self::read_owner(&path)?.as_deref(), owner, || {
            Ok(tree::is_empty(&path)?)
        })?;
        let bucket = Bucket::open(&path)?;
        bucket.delete(OWNER_MARKER)?;
        match tree::remove_empty_dir(&path) {
            Ok(_) => Ok(()),
            Err(e) => {
                // Something arrived since the check: keep the store claimed.
                let _ = bucket.put_json(OWNER_MARKER, &json!({ "owner": owner }), PutMode::Create);
                Err(Error::backend(format!(
                    "{path} could not be removed ({e}); kept it and its owner marker"
                )))
            }
        }
    }
}

#[cfg(feature = "export")]
tether_sdk::export!(FileBackend, harness: FileHarness);
