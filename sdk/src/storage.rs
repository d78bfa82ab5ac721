//! A convenience wrapper around the host's `storage` capability.
//!
//! [`Bucket`] opens a granted URI and adds what backends keep writing by hand:
//! JSON objects read with their etag and written canonically with a
//! [`PutMode`], and listings that follow every page. Errors become
//! [`StorageError`], which keeps the conditional-write outcomes
//! (`AlreadyExists`, `PreconditionFailed`) distinguishable and converts into
//! [`Error`] with `?`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::tether::backend::storage as wit;
use crate::error::Error;
use crate::json::canonical_json;

pub use wit::{ObjectMeta, PutMode, VersionedMeta};

/// How many keys one listing page asks for.
const PAGE: u32 = 1000;

/// Why a storage call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The URI was not granted to this call.
    #[error("storage access denied: {0}")]
    Denied(String),
    /// A create-only put found the key already there.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// An if-match put found another etag (or no object).
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// A key or URI that is not valid.
    #[error("invalid storage key or URI: {0}")]
    Invalid(String),
    /// The store failed.
    #[error("storage I/O error: {0}")]
    Io(String),
    /// An object that should hold JSON of a known shape does not.
    #[error("corrupt object {key}: {message}")]
    Corrupt { key: String, message: String },
}

impl From<wit::StorageError> for StorageError {
    fn from(e: wit::StorageError) -> Self {
        match e {
            wit::StorageError::Denied(m) => Self::Denied(m),
            wit::StorageError::AlreadyExists(m) => Self::AlreadyExists(m),
            wit::StorageError::PreconditionFailed(m) => Self::PreconditionFailed(m),
            wit::StorageError::Invalid(m) => Self::Invalid(m),
            wit::StorageError::Io(m) => Self::Io(m),
        }
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Denied(_) => Self::Denied(e.to_string()),
            StorageError::Invalid(_) => Self::Invalid(e.to_string()),
            other => Self::Backend(other.to_string()),
        }
    }
}

/// A JSON object read from storage, with the etag to pass to a conditional put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<T> {
    pub value: T,
    pub etag: String,
}

/// An opened bucket: keys are relative to the granted URI and cannot leave it.
/// Cheap to clone: clones share one host handle.
#[derive(Debug, Clone)]
pub struct Bucket {
    inner: Rc<wit::Bucket>,
}

thread_local! {
    // The buckets this instance has opened, by URI. An instance serves one
    // object, and a batch (`verify --all-history`: every pin the object ever
    // had) makes many calls on it: each opening its store anew cost a host
    // call, a grant check and, on S3, a client, per call.
    static OPENED: RefCell<HashMap<String, Rc<wit::Bucket>>> = RefCell::default();
}

impl Bucket {
    /// Open a URI the host granted (one named by a `storage-keys` locator key,
    /// or anything under it). Opening a URI this instance already opened
    /// hands back the same handle.
    pub fn open(uri: &str) -> Result<Self, StorageError> {
        if let Some(inner) = OPENED.with(|o| o.borrow().get(uri).cloned()) {
            return Ok(Self { inner });
        }
        let inner = Rc::new(wit::Bucket::open(uri)?);
        OPENED.with(|o| o.borrow_mut().insert(uri.to_owned(), Rc::clone(&inner)));
        Ok(Self { inner })
    }

    /// The URI the bucket was opened at.
    pub fn uri(&self) -> String {
        self.inner.uri()
    }

    /// The raw imported resource, for calls this wrapper does not cover.
    pub fn raw(&self) -> &wit::Bucket {
        &self.inner
    }

    /// The bytes and etag of `key`, or `None` when absent.
    pub fn get(&self, key: &str) -> Result<Option<Versioned<Vec<u8>>>, StorageError> {
        Ok(self.inner.get(key)?.map(|o| Versioned {
            value: o.data,
            etag: o.meta.etag,
        }))
    }

    /// Metadata of `key`, or `None` when absent.
    pub fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StorageError> {
        Ok(self.inner.head(key)?)
    }

    /// Metadata of `key` with the store's version id (S3 `VersionId`, GCS
    /// generation, Azure version id): of the current object when `version` is
    /// `None`, else of that version; `None` when absent. Needs a 0.1.4 host.
    pub fn head_version(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<VersionedMeta>, StorageError> {
        Ok(self.inner.head_version(key, version)?)
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &str) -> Result<bool, StorageError> {
        Ok(self.head(key)?.is_some())
    }

    /// `key` parsed as JSON into `T`, with its etag; `None` when absent.
    pub fn get_json<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<Versioned<T>>, StorageError> {
        let Some(object) = self.get(key)? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&object.value).map_err(|e| StorageError::Corrupt {
            key: key.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Some(Versioned {
            value,
            etag: object.etag,
        }))
    }

    /// Write raw bytes.
    pub fn put(&self, key: &str, data: &[u8], mode: PutMode) -> Result<ObjectMeta, StorageError> {
        Ok(self.inner.put(key, data, &mode)?)
    }

    /// Write `value` as canonical JSON, so equal values are equal bytes.
    pub fn put_json<T: Serialize + ?Sized>(
        &self,
        key: &str,
        value: &T,
        mode: PutMode,
    ) -> Result<ObjectMeta, StorageError> {
        let value = serde_json::to_value(value).map_err(|e| StorageError::Corrupt {
            key: key.to_owned(),
            message: format!("cannot serialise: {e}"),
        })?;
        self.put(key, canonical_json(&value).as_bytes(), mode)
    }

    /// Delete `key`; `false` when it was already gone.
    pub fn delete(&self, key: &str) -> Result<bool, StorageError> {
        Ok(self.inner.delete(key)?)
    }

    /// Copy `src` to `dst` (refusing an existing `dst` unless `overwrite`).
    pub fn copy(&self, src: &str, dst: &str, overwrite: bool) -> Result<ObjectMeta, StorageError> {
        Ok(self.inner.copy(src, dst, overwrite)?)
    }

    /// Every object whose key starts with `prefix`, in key order, across pages.
    pub fn list_all(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StorageError> {
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let page = self.inner.list(prefix, cursor.as_deref(), PAGE)?;
            all.extend(page.objects);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// Whether any object starts with `prefix` (one small listing call).
    pub fn any(&self, prefix: &str) -> Result<bool, StorageError> {
        Ok(!self.inner.list(prefix, None, 1)?.objects.is_empty())
    }
}
