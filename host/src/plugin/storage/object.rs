//! Buckets backed by an [`object_store::ObjectStore`]: the process-wide
//! `memory://NAME` buckets and `s3://` buckets (built from host-resolved
//! settings, see `s3.rs`).
//!
//! Conditional puts map to object_store's `PutMode::Create` /
//! `PutMode::Update`, which the store itself makes atomic, and its errors map
//! to ours so the semantics match the local implementation.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutOptions,
    UpdateVersion,
};

use super::{ListPage, ObjectMeta, PutMode, StorageError, StoredObject, VersionedMeta, too_large};

/// The process-wide memory buckets, by name. They live as long as the
/// process, which is what the reference backend and the tests want.
fn memory_registry() -> &'static Mutex<HashMap<String, Arc<InMemory>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

#[derive(Debug)]
pub(super) struct ObjectBucket {
    uri: Arc<str>,
    store: Arc<dyn ObjectStore>,
    /// Prefix of every object of this bucket, `""` or `a/b` (no slashes at the ends).
    prefix: String,
    /// S3 lists in key order, so a page can stop early; and it has no
    /// copy-if-not-exists, so such a copy is a read and a create-only put.
    s3: bool,
    /// Whether the store can keep versions of an object (not the memory
    /// buckets, which would ignore a version asked for).
    versions: bool,
}

impl ObjectBucket {
    pub(super) fn memory(uri: Arc<str>, name: &str, prefix: &str) -> Self {
        // A poisoned registry still holds a valid map: nothing panics while
        // the lock is held except an allocation failure.
        let mut registry = memory_registry()
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let store: Arc<dyn ObjectStore> = registry
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(InMemory::new()))
            .clone();
        Self {
            uri,
            store,
            prefix: prefix.to_string(),
            s3: false,
            versions: false,
        }
    }

    pub(super) fn s3(
        uri: Arc<str>,
        bucket: &str,
        prefix: &str,
        settings: &super::S3Resolution,
    ) -> Result<Self, StorageError> {
        let store = super::s3::client(&uri, bucket, settings)?;
        Ok(Self {
            uri,
            store,
            prefix: prefix.to_string(),
            s3: true,
            versions: true,
        })
    }

    /// A `gs://` or `az://` bucket (`root` its bucket or container URI).
    pub(super) fn cloud(
        uri: Arc<str>,
        scheme: &str,
        root: &str,
        prefix: &str,
        settings: &super::S3Resolution,
    ) -> Result<Self, StorageError> {
        let settings = settings
            .as_ref()
            .as_ref()
            .map_err(|why| StorageError::Denied(format!("{uri}: {why}")))?;
        let family = super::cloud::Family::of_scheme(scheme).ok_or_else(|| {
            StorageError::Invalid(format!("{uri}: {scheme}:// is not a GCS or Azure scheme"))
        })?;
        let store = super::cloud::client(&uri, family, root, &settings.cloud)?;
        Ok(Self {
            uri,
            store,
            prefix: prefix.to_string(),
            s3: false,
            versions: true,
        })
    }

    /// Whether the bucket was opened below its store's root, so the empty
    /// key names an object (the one at the bucket's URI).
    pub(super) fn has_prefix(&self) -> bool {
        !self.prefix.is_empty()
    }

    fn path(&self, key: &str) -> Result<Path, StorageError> {
        let full = match (self.prefix.is_empty(), key.is_empty()) {
            (true, _) => key.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{key}", self.prefix),
        };
        Path::parse(&full).map_err(|e| {
            StorageError::Invalid(format!("{}: key {key:?} is not valid: {e}", self.uri))
        })
    }

    /// The key of a listed location, relative to this bucket.
    fn key_of<'a>(&self, location: &'a Path) -> Option<&'a str> {
        let raw: &str = location.as_ref();
        if self.prefix.is_empty() {
            Some(raw)
        } else {
            raw.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
        }
    }

    fn meta(&self, key: &str, m: &object_store::ObjectMeta) -> ObjectMeta {
        ObjectMeta {
            key: key.to_string(),
            size: m.size,
            etag: m.e_tag.clone().unwrap_or_default(),
            last_modified: Some(super::rfc3339(
                m.last_modified.timestamp(),
                m.last_modified.timestamp_subsec_nanos(),
            )),
        }
    }

    /// Errors with no special meaning for the operation at hand.
    fn err(&self, op: &str, key: &str, e: object_store::Error) -> StorageError {
        use object_store::Error as E;
        let uri = &self.uri;
        match e {
            E::AlreadyExists { .. } => {
                StorageError::AlreadyExists(format!("{uri}: {op} {key:?}: the key already exists"))
            }
            E::Precondition { .. } => StorageError::PreconditionFailed(format!(
                "{uri}: {op} {key:?}: the object is missing or its etag differs"
            )),
            E::InvalidPath { source } => {
                StorageError::Invalid(format!("{uri}: {op} {key:?}: {source}"))
            }
            // The store's own text may quote the request; what the user
            // needs is where the credentials come from.
            E::PermissionDenied { .. } | E::Unauthenticated { .. } if !uri.starts_with("s3://") => {
                StorageError::Denied(format!(
                    "{uri}: {op} {key:?}: the store refused the credentials (access denied): \
                     check the credentials for this bucket or container in .tether/secrets.toml \
                     ([uris.\"{uri}/\"] or [objects.\"KEY\"]) or the environment"
                ))
            }
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                StorageError::Denied(format!(
                    "{uri}: {op} {key:?}: the store refused the credentials (access denied): check \
                 access_key_id / secret_access_key / session_token and region for this bucket \
                 in .tether/secrets.toml ([uris.\"{uri}/\"] or [objects.\"KEY\"]) or \
                 AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment"
                ))
            }
            other => StorageError::Io(format!("{uri}: {op} {key:?}: {other}")),
        }
    }

    pub(super) async fn get(
        &self,
        key: &str,
        max: u64,
    ) -> Result<Option<StoredObject>, StorageError> {
        let path = self.path(key)?;
        let result = match self.store.get(&path).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.err("get", key, e)),
        };
        // Before the body is read: the response's metadata gives the size.
        if result.meta.size > max {
            return Err(too_large(&self.uri, "get", key, result.meta.size, max));
        }
        let meta = self.meta(key, &result.meta);
        let data = result.bytes().await.map_err(|e| self.err("get", key, e))?;
        Ok(Some(StoredObject { meta, data }))
    }

    pub(super) async fn get_range(
        &self,
        key: &str,
        offset: u64,
        length: u64,
        max: u64,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        let path = self.path(key)?;
        if length > 0 {
            let options = GetOptions {
                range: Some(GetRange::Bounded(offset..offset.saturating_add(length))),
                ..Default::default()
            };
            match self.store.get_opts(&path, options).await {
                Ok(r) => {
                    let size = r.range.end.saturating_sub(r.range.start);
                    if size > max {
                        return Err(too_large(&self.uri, "get-range", key, size, max));
                    }
                    let data = r.bytes().await.map_err(|e| self.err("get-range", key, e))?;
                    return Ok(Some(data.to_vec()));
                }
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                // Stores refuse a range starting at or past the end; that is
                // an empty read, decided by the object's size below.
                Err(_) => {}
            }
        }
        match self.head(key).await? {
            None => Ok(None),
            Some(m) if offset >= m.size || length == 0 => Ok(Some(Vec::new())),
            Some(_) => Err(StorageError::Io(format!(
                "{}: get-range {key:?}: the store refused bytes {offset}..+{length}",
                self.uri
            ))),
        }
    }

    pub(super) async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StorageError> {
        let path = self.path(key)?;
        match self.store.head(&path).await {
            Ok(m) => Ok(Some(self.meta(key, &m))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("head", key, e)),
        }
    }

    pub(super) async fn head_version(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<VersionedMeta>, StorageError> {
        let path = self.path(key)?;
        if version.is_some() && !self.versions {
            return Ok(None);
        }
        let found = match version {
            None => self.store.head(&path).await,
            Some(v) => {
                let options = GetOptions {
                    version: Some(v.to_string()),
                    head: true,
                    ..Default::default()
                };
                match self.store.get_opts(&path, options).await {
                    Ok(r) => Ok(r.meta),
                    Err(e) => Err(e),
                }
            }
        };
        match found {
            Ok(m) => Ok(Some(VersionedMeta {
                meta: self.meta(key, &m),
                version: m.version.clone().or_else(|| version.map(str::to_string)),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            // A version id the store cannot parse or does not know is a
            // version it does not have (S3 answers 400 to a malformed one).
            Err(object_store::Error::Generic { source, .. })
                if version.is_some() && is_bad_version(&source.to_string()) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.err("head", key, e)),
        }
    }

    pub(super) async fn put(
        &self,
        key: &str,
        data: Bytes,
        mode: PutMode,
    ) -> Result<ObjectMeta, StorageError> {
        let path = self.path(key)?;
        let size = data.len() as u64;
        let os_mode = match &mode {
            PutMode::Overwrite => object_store::PutMode::Overwrite,
            PutMode::Create => object_store::PutMode::Create,
            PutMode::IfMatch(etag) => object_store::PutMode::Update(UpdateVersion {
                e_tag: Some(etag.clone()),
                version: None,
            }),
        };
        let result = self
            .store
            .put_opts(&path, data.into(), PutOptions::from(os_mode))
            .await;
        let result = match (result, &mode) {
            (Ok(r), _) => r,
            // Some stores report an if-match on a missing key as NotFound.
            (Err(object_store::Error::NotFound { .. }), PutMode::IfMatch(_)) => {
                return Err(StorageError::PreconditionFailed(format!(
                    "{}: put {key:?} if-match: the key does not exist",
                    self.uri
                )));
            }
            (Err(e), _) => return Err(self.err("put", key, e)),
        };
        let etag = result.e_tag.unwrap_or_default();
        // The put result carries no timestamp; take it from a head when that
        // still shows our write (a racing writer may already have replaced it).
        let last_modified = match self.head(key).await {
            Ok(Some(m)) if m.etag == etag => m.last_modified,
            _ => None,
        };
        Ok(ObjectMeta {
            key: key.to_string(),
            size,
            etag,
            last_modified,
        })
    }

    pub(super) async fn list(
        &self,
        prefix: &str,
        cursor: Option<String>,
        limit: usize,
    ) -> Result<ListPage, StorageError> {
        // object_store lists by whole segments; list the deepest whole-segment
        // directory of the prefix and filter the rest by string.
        let dir = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let list_root = match (self.prefix.is_empty(), dir.is_empty()) {
            (true, true) => None,
            (true, false) => Some(dir.to_string()),
            (false, true) => Some(self.prefix.clone()),
            (false, false) => Some(format!("{}/{dir}", self.prefix)),
        };
        let list_root = match list_root {
            Some(p) => match Path::parse(&p) {
                Ok(p) => Some(p),
                // A prefix no valid key can have.
                Err(_) => return Ok(ListPage::default()),
            },
            None => None,
        };
        let mut stream = match (&cursor, self.s3) {
            // S3 starts after the cursor itself (`start-after`).
            (Some(c), true) => match self.path(c) {
                Ok(offset) => self.store.list_with_offset(list_root.as_ref(), &offset),
                Err(_) => self.store.list(list_root.as_ref()),
            },
            _ => self.store.list(list_root.as_ref()),
        };
        // The listing order is not guaranteed by object_store: keep the
        // `limit + 1` smallest keys after the cursor (one extra to know
        // whether another page follows).
        let mut best: BTreeMap<String, ObjectMeta> = BTreeMap::new();
        while let Some(m) = stream
            .try_next()
            .await
            .map_err(|e| self.err("list", prefix, e))?
        {
            let Some(key) = self.key_of(&m.location) else {
                continue;
            };
            if !key.starts_with(prefix) || cursor.as_deref().is_some_and(|c| key <= c) {
                continue;
            }
            if best.len() > limit
                && best
                    .keys()
                    .next_back()
                    .is_some_and(|last| key > last.as_str())
            {
                continue;
            }
            best.insert(key.to_string(), self.meta(key, &m));
            if best.len() > limit + 1 {
                best.pop_last();
            }
            // S3 lists in byte order: once one key past the page is known,
            // the rest cannot belong to it.
            if self.s3 && best.len() > limit {
                break;
            }
        }
        let more = best.len() > limit;
        let objects: Vec<ObjectMeta> = best.into_values().take(limit).collect();
        let next = if more {
            objects.last().map(|m| m.key.clone())
        } else {
            None
        };
        Ok(ListPage { objects, next })
    }

    pub(super) async fn delete(&self, key: &str) -> Result<bool, StorageError> {
        let path = self.path(key)?;
        // object_store's delete does not say whether the key existed; the
        // head-then-delete answer is racy only against concurrent deletes.
        if self.head(key).await?.is_none() {
            return Ok(false);
        }
        match self.store.delete(&path).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.err("delete", key, e)),
        }
    }

    pub(super) async fn copy(
        &self,
        src: &str,
        dst: &str,
        overwrite: bool,
    ) -> Result<ObjectMeta, StorageError> {
        let from = self.path(src)?;
        let to = self.path(dst)?;
        let options = CopyOptions {
            mode: if overwrite {
                CopyMode::Overwrite
            } else {
                CopyMode::Create
            },
            ..Default::default()
        };
        if self.s3 && !overwrite {
            return self.copy_create(src, dst).await;
        }
        match self.store.copy_opts(&from, &to, options).await {
            Ok(()) => {}
            Err(object_store::Error::NotFound { .. }) => {
                return Err(StorageError::PreconditionFailed(format!(
                    "{}: copy {src:?} to {dst:?}: the source key does not exist",
                    self.uri
                )));
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(StorageError::AlreadyExists(format!(
                    "{}: copy {src:?} to {dst:?}: the destination key already exists",
                    self.uri
                )));
            }
            Err(e) => return Err(self.err("copy to", dst, e)),
        }
        self.head(dst).await?.ok_or_else(|| {
            StorageError::Io(format!(
                "{}: copy {src:?} to {dst:?}: the destination vanished right after the copy",
                self.uri
            ))
        })
    }
}

/// Whether a store's error about a versioned read says the version id is
/// unknown or malformed (rather than the store failing). A HEAD answer has no
/// body to say which, so a 400 to a request naming a version is that too.
fn is_bad_version(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "invalid version",
        "invalidargument",
        "nosuchversion",
        "400 bad request",
    ]
    .iter()
    .any(|s| t.contains(s))
}

impl ObjectBucket {
    /// Copy without overwrite where the store has no copy-if-not-exists (S3):
    /// read the source and put it create-only, which S3 makes atomic.
    async fn copy_create(&self, src: &str, dst: &str) -> Result<ObjectMeta, StorageError> {
        let Some(obj) = self.get(src, u64::MAX).await? else {
            return Err(StorageError::PreconditionFailed(format!(
                "{}: copy {src:?} to {dst:?}: the source key does not exist",
                self.uri
            )));
        };
        match self.put(dst, obj.data, PutMode::Create).await {
            Err(StorageError::AlreadyExists(_)) => Err(StorageError::AlreadyExists(format!(
                "{}: copy {src:?} to {dst:?}: the destination key already exists",
                self.uri
            ))),
            other => other,
        }
    }
}
