//! Host side of the WIT `storage` capability (`wit/storage.wit`).
//!
//! A plugin never touches a store directly: for each call the host builds a
//! [`Grants`] set from the object's locator (`descriptor.storage-keys`), and the
//! plugin can only open a [`Bucket`] at a URI that set grants (the URI itself or
//! anything under it). This module is plain async Rust with no wasmtime types,
//! so the WIT bindings are a thin layer over it.
//!
//! # URIs
//!
//! * Local paths: `/abs/path` or `file:///abs/path`. `.`, `..`, doubled and
//!   trailing slashes are resolved lexically *before* the grant check, so
//!   `/granted/../elsewhere` is judged as `/elsewhere`. Relative paths are
//!   refused. `file://` URIs are taken literally (no percent-decoding).
//! * `memory://NAME[/prefix]`: process-wide in-memory buckets
//!   ([`object_store::memory::InMemory`]), the reference backend's home. A
//!   bucket opened at `memory://NAME/sub` is the `sub/` prefix of bucket `NAME`.
//! * `s3://bucket[/prefix]`: object_store's `AmazonS3` behind the same
//!   `object::ObjectBucket` the memory buckets use, rooted at the prefix. The
//!   credentials, region and endpoint are resolved by the host
//!   ([`S3Settings`], carried by the [`Grants`]); the plugin only names the
//!   URI. Conditional puts are S3's `If-None-Match: *` / `If-Match: <etag>`.
//! * `gs://bucket[/prefix]`, `az://container[/prefix]` and
//!   `abfs[s]://container@account.dfs.core.windows.net[/prefix]`: Google Cloud
//!   Storage and Azure Blob through object_store's own builders, configured
//!   by the host the same way (`cloud.rs`). Other schemes (`s3a://`,
//!   `http://`, ...) are refused as `Invalid`.
//!
//! # Local directories
//!
//! Local buckets do not use object_store's `LocalFileSystem` (it follows
//! symlinks anywhere and has no if-match put). Every path is resolved through a
//! `cap-std` [`Dir`](cap_std::fs::Dir) opened at the *granted* root, so neither a
//! symlink nor `..` can lead out of it: such an access fails with
//! [`StorageError::Denied`]. Listing shows regular files only and does not
//! follow symlinks (which also rules out cycles). A missing granted root reads
//! as empty; the first write creates it (`create_dir_all`), so reads never
//! create directories.
//!
//! Writes are atomic: the data goes to a temp file `.tether-tmp-*` in the
//! target's directory (listing skips these names, keys may not use them), is
//! fsynced (or, inside a [`DeferredSyncs`] scope, synced with its whole
//! filesystem when the scope ends: `durable`), then renamed over the key. Readers therefore see the old or the new
//! object, never a torn one, without taking any lock.
//!
//! **Etags** of local objects are the first 32 hex digits (128 bits) of the
//! SHA-256 of the content: strong, stable across processes and restarts, and
//! computed by reading the file (objects here are mostly small refs and
//! metadata). Rewriting identical bytes therefore keeps the etag, so an
//! if-match from it still succeeds afterwards (a compare-and-swap on the
//! value); a memory bucket issues a fresh etag per write. Etags are opaque either way, and the
//! outcome of every conditional operation is the same on both.
//!
//! **Locking.** Every local write (put in any mode, copy, delete) holds an
//! exclusive `flock` (via `fs4`) on a lock file in the user cache directory,
//! `<cache>/tether/locks/<sha256>.lock`, where `<cache>/tether` is
//! `$TETHER_CACHE_DIR` when set and `dirs::cache_dir()/tether` otherwise. The
//! hash covers the canonical path of the key's directory plus the key's file
//! name, so two URIs reaching the same file share a lock. With the lock held the
//! host compares (exists? etag?) and writes, which makes create-only, if-match
//! and copy-without-overwrite atomic across threads *and* OS processes. Lock
//! files never live inside the store (they would show up in it and a plugin
//! could tamper with them) and are never deleted (unlinking a lock file another
//! process is waiting on would break mutual exclusion); they are empty.
//! Plain overwrites and deletes take the lock too, so they cannot slip between
//! another writer's compare and its rename.
//!
//! Conditional semantics are identical on every bucket: `Create` on an
//! existing key fails with [`StorageError::AlreadyExists`]; `IfMatch(e)` on a
//! missing key or another etag fails with [`StorageError::PreconditionFailed`];
//! `Overwrite` always writes. Copying from a missing source is
//! `PreconditionFailed`. One difference is inherent to directories: on a local
//! bucket a key cannot be both an object and a "directory" (`a` and `a/b`).

mod aws_chain;
mod cloud;
mod durable;
mod local;
mod object;
mod s3;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

// The prefix of every atomic write's temp file: local writes rename such
// files into place, listing skips them, and keys may not use it, so a
// half-written object is never visible.
use crate::model::fsutil::TEMP_PREFIX;

pub use durable::{DeferredSyncs, defer_syncs};
pub use s3::{FIELDS as S3_FIELDS, S3Resolution, S3Settings, strip_settings};

/// Largest page [`Bucket::list`] returns, whatever `limit` asks for; callers
/// follow `next` for more.
pub const MAX_LIST_PAGE: u32 = 1000;

/// Why a storage call failed; mirrors WIT `storage-error`. Each message names
/// the URI and key concerned, since it is all the plugin gets to see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The URI (or a path a key leads to) was not granted to this call.
    #[error("storage access denied: {0}")]
    Denied(String),
    /// A create-only put (or copy without overwrite) found the key there.
    #[error("storage object already exists: {0}")]
    AlreadyExists(String),
    /// An if-match put found another etag or no object; or a copy found no source.
    #[error("storage precondition failed: {0}")]
    PreconditionFailed(String),
    /// A key or URI that is not valid (`..`, an absolute key, a relative path, ...).
    #[error("invalid storage request: {0}")]
    Invalid(String),
    /// The store itself failed.
    #[error("storage I/O error: {0}")]
    Io(String),
}

/// Metadata of one stored object; `etag` is opaque, pass it back in
/// [`PutMode::IfMatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Key relative to the bucket root.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Opaque version tag: for local buckets the first 32 hex digits of the
    /// content's SHA-256, for memory buckets the store's own counter.
    pub etag: String,
    /// Last modification, RFC 3339 (UTC), when the store knows it.
    pub last_modified: Option<String>,
}

/// An object's metadata with the store's version id (S3 `VersionId`, GCS
/// generation, Azure version id); `None` where the store keeps no versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedMeta {
    /// The metadata of the object (or of the version asked for).
    pub meta: ObjectMeta,
    /// Its version id.
    pub version: Option<String>,
}

/// A whole object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    /// The object's metadata, describing exactly these bytes.
    pub meta: ObjectMeta,
    /// The whole content.
    pub data: Bytes,
}

/// How a put treats an existing object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Always write.
    Overwrite,
    /// Fail with [`StorageError::AlreadyExists`] if the key exists.
    Create,
    /// Fail with [`StorageError::PreconditionFailed`] unless the current etag is this one.
    IfMatch(String),
}

/// One page of a listing, in key order; pass `next` back as the cursor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListPage {
    /// Objects in key order.
    pub objects: Vec<ObjectMeta>,
    /// The last key of this page when more may follow, `None` at the end.
    pub next: Option<String>,
}

/// A URI after lexical normalisation, before any grant is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ParsedUri {
    /// Absolute local path, as its segments (`/` is the empty list).
    Local(Vec<String>),
    /// `memory://name/seg/seg`.
    Memory { name: String, prefix: Vec<String> },
    /// `s3://bucket/seg/seg`.
    S3 { bucket: String, prefix: Vec<String> },
    /// `gs://bucket/seg`, `az://container/seg`, `abfs[s]://container@host/seg`.
    Cloud {
        scheme: String,
        bucket: String,
        prefix: Vec<String>,
    },
}

impl ParsedUri {
    fn parse(uri: &str) -> Result<Self, StorageError> {
        if uri.contains('\0') {
            return Err(StorageError::Invalid(format!(
                "storage URI {uri:?} contains a NUL byte"
            )));
        }
        if let Some(rest) = uri.strip_prefix("memory://") {
            let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
            if name.is_empty() || name == "." || name == ".." || name.contains('\\') {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?} has no valid memory bucket name (expected memory://NAME[/prefix])"
                )));
            }
            if path.contains('\\') || path.chars().any(|c| c.is_control()) {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?}: prefix may not contain '\\' or control characters"
                )));
            }
            let prefix = normalise_segments(path).ok_or_else(|| {
                StorageError::Invalid(format!(
                    "storage URI {uri:?}: '..' leads above the memory bucket"
                ))
            })?;
            return Ok(Self::Memory {
                name: name.to_string(),
                prefix,
            });
        }
        if let Some(rest) = uri.strip_prefix("s3://") {
            let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
            // S3 bucket names: 3-63 of lowercase letters, digits, '.', '-'.
            if bucket.len() < 3
                || bucket.len() > 63
                || !bucket
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
            {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?} has no valid S3 bucket name (expected s3://BUCKET[/prefix], \
                     the bucket 3-63 lowercase letters, digits, '.' or '-')"
                )));
            }
            if path.contains('\\') || path.chars().any(|c| c.is_control()) {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?}: prefix may not contain '\\' or control characters"
                )));
            }
            let prefix = normalise_segments(path).ok_or_else(|| {
                StorageError::Invalid(format!(
                    "storage URI {uri:?}: '..' leads above the S3 bucket"
                ))
            })?;
            return Ok(Self::S3 {
                bucket: bucket.to_string(),
                prefix,
            });
        }
        for scheme in ["gs", "az", "abfs", "abfss"] {
            let Some(rest) = uri.strip_prefix(scheme).and_then(|r| r.strip_prefix("://")) else {
                continue;
            };
            let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
            // Bucket and container names: lowercase letters, digits, '-',
            // '_' and '.'; abfs names `container@account.dfs.core.windows.net`.
            let valid = bucket.len() >= 3
                && bucket.len() <= 222
                && bucket.chars().all(|c| {
                    c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || matches!(c, '.' | '-' | '_')
                        || (c == '@' && scheme.starts_with("abfs"))
                });
            if !valid {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?} has no valid bucket or container name (expected \
                     {scheme}://NAME[/prefix], NAME of lowercase letters, digits, '.', '-' or '_')"
                )));
            }
            if path.contains('\\') || path.chars().any(|c| c.is_control()) {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?}: prefix may not contain '\\' or control characters"
                )));
            }
            let prefix = normalise_segments(path).ok_or_else(|| {
                StorageError::Invalid(format!("storage URI {uri:?}: '..' leads above the bucket"))
            })?;
            return Ok(Self::Cloud {
                scheme: scheme.to_string(),
                bucket: bucket.to_string(),
                prefix,
            });
        }
        let path = if let Some(rest) = uri.strip_prefix("file://") {
            // `file:///p` and `file://localhost/p` name the local path `/p`.
            let rest = rest.strip_prefix("localhost").unwrap_or(rest);
            if !rest.starts_with('/') {
                return Err(StorageError::Invalid(format!(
                    "storage URI {uri:?}: file:// URIs must name an absolute local path (file:///path)"
                )));
            }
            rest
        } else if let Some((scheme, _)) = uri.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            let msg = if matches!(
                scheme.as_str(),
                "s3a" | "gcs" | "azure" | "adl" | "http" | "https"
            ) {
                format!(
                    "storage URI {uri:?}: {scheme}:// object stores are not supported (s3://, \
                     gs://, az:// and abfs:// are)"
                )
            } else {
                format!("storage URI {uri:?}: unknown scheme {scheme}://")
            };
            return Err(StorageError::Invalid(msg));
        } else {
            uri
        };
        if !path.starts_with('/') {
            return Err(StorageError::Invalid(format!(
                "storage URI {uri:?} is a relative path; local paths must be absolute"
            )));
        }
        // POSIX: `..` at `/` stays at `/`.
        let mut segments: Vec<String> = Vec::new();
        for seg in path.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    segments.pop();
                }
                s => segments.push(s.to_string()),
            }
        }
        Ok(Self::Local(segments))
    }

    /// Does `self` (a grant) cover `other` (a request)? Whole segments only,
    /// so `/a/b` covers `/a/b/c` but not `/a/bc`.
    fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Local(g), Self::Local(r)) => r.starts_with(g),
            (
                Self::Memory {
                    name: gn,
                    prefix: gp,
                },
                Self::Memory {
                    name: rn,
                    prefix: rp,
                },
            ) => gn == rn && rp.starts_with(gp),
            (
                Self::S3 {
                    bucket: gb,
                    prefix: gp,
                },
                Self::S3 {
                    bucket: rb,
                    prefix: rp,
                },
            ) => gb == rb && rp.starts_with(gp),
            (
                Self::Cloud {
                    scheme: gs,
                    bucket: gb,
                    prefix: gp,
                },
                Self::Cloud {
                    scheme: rs,
                    bucket: rb,
                    prefix: rp,
                },
            ) => gs == rs && gb == rb && rp.starts_with(gp),
            _ => false,
        }
    }

    fn depth(&self) -> usize {
        match self {
            Self::Local(s) => s.len(),
            Self::Memory { prefix, .. } | Self::S3 { prefix, .. } | Self::Cloud { prefix, .. } => {
                prefix.len()
            }
        }
    }

    fn canonical(&self) -> String {
        match self {
            Self::Local(s) => format!("/{}", s.join("/")),
            Self::Memory { name, prefix } if prefix.is_empty() => format!("memory://{name}"),
            Self::Memory { name, prefix } => format!("memory://{name}/{}", prefix.join("/")),
            Self::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            Self::S3 { bucket, prefix } => format!("s3://{bucket}/{}", prefix.join("/")),
            Self::Cloud {
                scheme,
                bucket,
                prefix,
            } if prefix.is_empty() => format!("{scheme}://{bucket}"),
            Self::Cloud {
                scheme,
                bucket,
                prefix,
            } => format!("{scheme}://{bucket}/{}", prefix.join("/")),
        }
    }
}

/// Resolve `.`, `..` and empty segments of a `/`-separated relative path;
/// `None` when `..` climbs above its start.
fn normalise_segments(path: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            s => out.push(s.to_string()),
        }
    }
    Some(out)
}

/// Where a granted bucket lives. Built only by [`Grants::check`], so holding
/// one proves the grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageLocation {
    uri: String,
    target: Target,
    read_limit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// `root` is the granted directory (the sandbox); `sub` the bucket root
    /// relative to it (empty when opened at the grant itself).
    Local { root: PathBuf, sub: PathBuf },
    /// Bucket `name`, objects under `prefix` (`""` or `a/b`, no slashes at the ends).
    Memory { name: String, prefix: String },
    /// S3 bucket `bucket`, objects under `prefix`, with the host's settings.
    S3 {
        bucket: String,
        prefix: String,
        settings: S3Resolution,
    },
    /// A GCS bucket or Azure container (`root`, e.g. `gs://bucket`), objects
    /// under `prefix`, with the host's settings.
    Cloud {
        scheme: String,
        root: String,
        prefix: String,
        settings: S3Resolution,
    },
}

impl StorageLocation {
    /// The normalised URI (`/abs/path`, `memory://NAME[/prefix]`, `s3://BUCKET[/prefix]`).
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

/// The storage URIs one plugin call may open: deny by default, grant by name.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    granted: Vec<ParsedUri>,
    /// The host-resolved settings every `s3://` grant opens with; `None`
    /// reads them from the environment alone.
    s3: Option<S3Resolution>,
    /// The most bytes one read may return ([`Grants::with_read_limit`]).
    read_limit: Option<u64>,
}

impl Grants {
    /// Grants from the URIs the object's locator names. A URI that does not
    /// parse (relative, unsupported scheme, ...) grants nothing.
    pub fn new(uris: impl IntoIterator<Item = String>) -> Self {
        Self {
            granted: uris
                .into_iter()
                .filter_map(|u| ParsedUri::parse(&u).ok())
                .collect(),
            s3: None,
            read_limit: None,
        }
    }

    /// Refuse reads of more than `bytes` (a whole object, or a range) before
    /// reading them: what a plugin reads is copied into its memory, so
    /// anything larger than its memory limit could only crash it, after the
    /// host had held all of it.
    pub fn with_read_limit(mut self, bytes: u64) -> Self {
        self.read_limit = Some(bytes);
        self
    }

    /// Open `s3://` grants (and `gs://` / `az://` ones, whose settings are
    /// [`S3Settings::resolve_cloud`]'s) with `settings` (resolved by the host
    /// from secrets.toml and the environment) instead of the environment alone.
    pub fn with_s3(mut self, settings: S3Resolution) -> Self {
        self.s3 = Some(settings);
        self
    }

    /// Normalise `uri` and check it is a granted URI or lies under one.
    pub fn check(&self, uri: &str) -> Result<StorageLocation, StorageError> {
        let parsed = ParsedUri::parse(uri)?;
        // The most specific grant is the tightest sandbox.
        let grant = self
            .granted
            .iter()
            .filter(|g| g.covers(&parsed))
            .max_by_key(|g| g.depth())
            .ok_or_else(|| {
                let canonical = parsed.canonical();
                let shown = if canonical == uri {
                    format!("{uri:?}")
                } else {
                    format!("{uri:?} (normalised: {canonical:?})")
                };
                StorageError::Denied(format!(
                    "storage URI {shown} is not granted to this call: the object's locator does not name it"
                ))
            })?;
        let target = match (grant, &parsed) {
            (ParsedUri::Local(g), ParsedUri::Local(r)) => Target::Local {
                root: PathBuf::from(ParsedUri::Local(g.clone()).canonical()),
                sub: r[g.len()..].iter().collect(),
            },
            (ParsedUri::Memory { .. }, ParsedUri::Memory { name, prefix }) => Target::Memory {
                name: name.clone(),
                prefix: prefix.join("/"),
            },
            (ParsedUri::S3 { .. }, ParsedUri::S3 { bucket, prefix }) => Target::S3 {
                bucket: bucket.clone(),
                prefix: prefix.join("/"),
                settings: self.s3.clone().unwrap_or_else(S3Settings::from_env),
            },
            (
                ParsedUri::Cloud { .. },
                ParsedUri::Cloud {
                    scheme,
                    bucket,
                    prefix,
                },
            ) => Target::Cloud {
                scheme: scheme.clone(),
                root: format!("{scheme}://{bucket}"),
                prefix: prefix.join("/"),
                settings: self.s3.clone().unwrap_or_else(|| {
                    Arc::new(S3Settings::resolve_cloud(scheme, &Default::default()))
                }),
            },
            // `covers` only matches like with like.
            _ => {
                return Err(StorageError::Denied(format!(
                    "storage URI {uri:?} is not granted to this call"
                )));
            }
        };
        Ok(StorageLocation {
            uri: parsed.canonical(),
            target,
            read_limit: self.read_limit.unwrap_or(u64::MAX),
        })
    }

    /// [`check`](Self::check) then [`Bucket::open`].
    pub async fn open(&self, uri: &str) -> Result<Bucket, StorageError> {
        Bucket::open(self.check(uri)?).await
    }
}

/// An opened bucket, rooted at a granted URI; keys are relative to it and
/// cannot leave it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Bucket {
    uri: Arc<str>,
    backend: Backend,
    /// The most bytes one `get` or `get_range` returns; larger reads are
    /// refused before they are made ([`Grants::with_read_limit`]).
    read_limit: u64,
}

#[derive(Debug, Clone)]
enum Backend {
    Local(Arc<local::LocalBucket>),
    Object(Arc<object::ObjectBucket>),
}

impl Bucket {
    /// Open a granted location. No bucket does I/O here (a missing local root
    /// reads as empty and is created by the first write; an S3 client only
    /// connects on its first request), but S3 settings the host could not
    /// resolve fail here, as [`StorageError::Denied`].
    pub async fn open(location: StorageLocation) -> Result<Self, StorageError> {
        let uri: Arc<str> = location.uri.into();
        let backend = match location.target {
            Target::Local { root, sub } => {
                Backend::Local(Arc::new(local::LocalBucket::new(uri.clone(), root, sub)))
            }
            Target::Memory { name, prefix } => Backend::Object(Arc::new(
                object::ObjectBucket::memory(uri.clone(), &name, &prefix),
            )),
            Target::S3 {
                bucket,
                prefix,
                settings,
            } => Backend::Object(Arc::new(object::ObjectBucket::s3(
                uri.clone(),
                &bucket,
                &prefix,
                &settings,
            )?)),
            Target::Cloud {
                scheme,
                root,
                prefix,
                settings,
            } => Backend::Object(Arc::new(object::ObjectBucket::cloud(
                uri.clone(),
                &scheme,
                &root,
                &prefix,
                &settings,
            )?)),
        };
        Ok(Self {
            uri,
            backend,
            read_limit: location.read_limit,
        })
    }

    /// The normalised URI this bucket was opened at.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The whole object, or `None` when the key does not exist. On object
    /// stores the empty key reads the object at the bucket's URI itself
    /// (see `check_read_key`).
    pub async fn get(&self, key: &str) -> Result<Option<StoredObject>, StorageError> {
        self.check_read_key(key)?;
        match &self.backend {
            Backend::Local(b) => b.get(key, self.read_limit).await,
            Backend::Object(b) => b.get(key, self.read_limit).await,
        }
    }

    /// `length` bytes from `offset` (fewer, possibly none, at the end), or
    /// `None` when the key does not exist.
    pub async fn get_range(
        &self,
        key: &str,
        offset: u64,
        length: u64,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        self.check_read_key(key)?;
        match &self.backend {
            Backend::Local(b) => b.get_range(key, offset, length, self.read_limit).await,
            Backend::Object(b) => b.get_range(key, offset, length, self.read_limit).await,
        }
    }

    /// Metadata, or `None` when the key does not exist.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StorageError> {
        self.check_read_key(key)?;
        match &self.backend {
            Backend::Local(b) => b.head(key).await,
            Backend::Object(b) => b.head(key).await,
        }
    }

    /// Metadata with the store's version id: of the current object when
    /// `version` is `None`, else of that version (`None` when the store has
    /// no such version of the key). Local buckets keep no versions.
    pub async fn head_version(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<VersionedMeta>, StorageError> {
        self.check_read_key(key)?;
        match &self.backend {
            Backend::Local(b) => match version {
                Some(_) => Ok(None),
                None => Ok(b.head(key).await?.map(|meta| VersionedMeta {
                    meta,
                    version: None,
                })),
            },
            Backend::Object(b) => b.head_version(key, version).await,
        }
    }

    /// Write a whole object; returns its new metadata.
    pub async fn put(
        &self,
        key: &str,
        data: impl Into<Bytes>,
        mode: PutMode,
    ) -> Result<ObjectMeta, StorageError> {
        self.check_key(key)?;
        let data = data.into();
        match &self.backend {
            Backend::Local(b) => b.put(key, data, mode).await,
            Backend::Object(b) => b.put(key, data, mode).await,
        }
    }

    /// Up to `limit` (at most [`MAX_LIST_PAGE`]) objects whose keys start with
    /// `prefix` (a plain string prefix, not only whole segments) and sort after
    /// `cursor`, in key (byte) order.
    pub async fn list(
        &self,
        prefix: &str,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<ListPage, StorageError> {
        if prefix.starts_with('/') || prefix.contains('\\') || prefix.chars().any(char::is_control)
        {
            return Err(StorageError::Invalid(format!(
                "{}: list prefix {prefix:?} may not start with '/' or contain '\\' or control characters",
                self.uri
            )));
        }
        if limit == 0 {
            return Err(StorageError::Invalid(format!(
                "{}: list limit must be at least 1",
                self.uri
            )));
        }
        let limit = limit.min(MAX_LIST_PAGE) as usize;
        match &self.backend {
            Backend::Local(b) => b.list(prefix, cursor, limit).await,
            Backend::Object(b) => b.list(prefix, cursor, limit).await,
        }
    }

    /// Delete a key; `false` when it was already gone.
    pub async fn delete(&self, key: &str) -> Result<bool, StorageError> {
        self.check_key(key)?;
        match &self.backend {
            Backend::Local(b) => b.delete(key).await,
            Backend::Object(b) => b.delete(key).await,
        }
    }

    /// Copy `src` to `dst`. With `overwrite` false an existing `dst` fails with
    /// [`StorageError::AlreadyExists`]; a missing `src` is
    /// [`StorageError::PreconditionFailed`].
    pub async fn copy(
        &self,
        src: &str,
        dst: &str,
        overwrite: bool,
    ) -> Result<ObjectMeta, StorageError> {
        self.check_key(src)?;
        self.check_key(dst)?;
        match &self.backend {
            Backend::Local(b) => b.copy(src, dst, overwrite).await,
            Backend::Object(b) => b.copy(src, dst, overwrite).await,
        }
    }

    /// Keys of reads: [`validate_key`]'s, plus the empty key on an object
    /// store bucket opened below its root, which names the object at the
    /// bucket's URI itself (`s3://b/dir/file.txt`). The grant is that URI, so
    /// a single object is readable without granting its parent; nothing
    /// outside the grant becomes reachable. Local buckets refuse it (a local
    /// file is the `tree` capability's), as do writes everywhere.
    fn check_read_key(&self, key: &str) -> Result<(), StorageError> {
        if key.is_empty() {
            return match &self.backend {
                Backend::Object(b) if b.has_prefix() => Ok(()),
                Backend::Object(_) => Err(StorageError::Invalid(format!(
                    "{}: the empty key names the object at the bucket's URI, and a bucket's \
                     root is not an object",
                    self.uri
                ))),
                Backend::Local(_) => Err(StorageError::Invalid(format!(
                    "{}: the empty key (the object at the bucket's own URI) is for object \
                     stores; a local file is read through `tree`",
                    self.uri
                ))),
            };
        }
        self.check_key(key)
    }

    fn check_key(&self, key: &str) -> Result<(), StorageError> {
        validate_key(key).map_err(|why| {
            StorageError::Invalid(format!("{}: key {key:?} is not valid: {why}", self.uri))
        })
    }

    /// Tests keep their lock files in a temp dir instead of the user cache.
    #[cfg(test)]
    fn with_lock_dir(self, dir: PathBuf) -> Self {
        let backend = match self.backend {
            Backend::Local(b) => Backend::Local(Arc::new(b.as_ref().clone().with_lock_dir(dir))),
            other => other,
        };
        Self { backend, ..self }
    }
}

/// Keys are relative `/`-separated paths with no empty, `.` or `..` segment,
/// no `\`, no control characters (NUL included) and no temp-file names. The
/// rules are the same for every backend so a key valid on one is valid on all.
fn validate_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("keys may not be empty");
    }
    if key.starts_with('/') {
        return Err("keys are relative and may not start with '/'");
    }
    if key.contains('\\') {
        return Err("keys may not contain '\\'");
    }
    if key.chars().any(char::is_control) {
        return Err("keys may not contain NUL or other control characters");
    }
    for seg in key.split('/') {
        match seg {
            "" => {
                return Err("keys may not have empty segments (leading, trailing or doubled '/')");
            }
            "." | ".." => return Err("keys may not have '.' or '..' segments"),
            s if s.starts_with(TEMP_PREFIX) => {
                return Err("segments starting with '.tether-tmp-' are reserved");
            }
            _ => {}
        }
    }
    Ok(())
}

/// The refusal of a read of `size` bytes over the bucket's read limit
/// `limit`, naming the object, both sizes and what to do.
fn too_large(uri: &str, op: &str, key: &str, size: u64, limit: u64) -> StorageError {
    StorageError::Invalid(format!(
        "{uri}: {op} {key:?}: the object is {size} bytes, more than the plugin's memory limit \
         of {limit} bytes, so the host refused to read it (read it in ranges with get-range, \
         or raise the limit with TETHER_PLUGIN_MEMORY, in MiB)"
    ))
}

/// Etag of local objects: the first 32 hex digits of the content's SHA-256.
fn content_etag(data: &[u8]) -> String {
    let mut hex = hex::encode(Sha256::digest(data));
    hex.truncate(32);
    hex
}

/// RFC 3339 in UTC from seconds and nanoseconds since the Unix epoch, the
/// fraction printed only as far as it is not zero (`.5`, not `.500`).
fn rfc3339(secs: i64, nanos: u32) -> String {
    // Out of chrono's range (±262,000 years) is no mtime a store reports.
    let Some(at) = chrono::DateTime::from_timestamp(secs, nanos) else {
        return String::new();
    };
    // Written field by field: a local `get` reports its object's mtime, so
    // `verify --all-history` formats one per pin, and a strftime pattern is
    // parsed again on every call.
    use chrono::{Datelike, Timelike};
    use std::fmt::Write;
    let mut s = String::with_capacity(32);
    let year = at.year();
    let _ = if (0..=9999).contains(&year) {
        write!(s, "{year:04}")
    } else {
        write!(s, "{}", at.format("%Y"))
    };
    let _ = write!(
        s,
        "-{:02}-{:02}T{:02}:{:02}:{:02}",
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    );
    if nanos != 0 {
        // The fraction without its trailing zeros: `.5`, not `.500000000`.
        let (mut frac, mut digits) = (nanos, 9);
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        let _ = write!(s, ".{frac:0digits$}");
    }
    s.push('Z');
    s
}

fn system_time_rfc3339(t: std::time::SystemTime) -> String {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => rfc3339(d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (secs, nanos) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nanos == 0 {
                rfc3339(secs, 0)
            } else {
                rfc3339(secs - 1, 1_000_000_000 - nanos)
            }
        }
    }
}
