//! Local-directory buckets through `cap-std`, with atomic renames and
//! cross-process locks for conditional writes (design in the parent module).

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

use super::{
    ListPage, ObjectMeta, PutMode, StorageError, StoredObject, TEMP_PREFIX, content_etag,
    system_time_rfc3339, too_large,
};

/// Attempts at creating a temp file when a concurrent delete prunes its
/// freshly created (still empty) directory in between.
const CREATE_ATTEMPTS: usize = 8;

#[derive(Debug, Clone)]
pub(super) struct LocalBucket {
    uri: Arc<str>,
    /// The granted directory: the cap-std sandbox every path resolves in.
    root: PathBuf,
    /// The bucket root relative to `root` (empty at the grant itself).
    sub: PathBuf,
    /// Lock directory override (tests); otherwise resolved from the environment.
    lock_dir: Option<PathBuf>,
    /// The granted root as the last read opened it, for the next read; every
    /// write forgets it, so a root a write created or replaced is opened anew.
    read_root: Arc<Mutex<Option<Arc<Dir>>>>,
}

/// What an I/O failure was doing, for the message.
struct Op<'a> {
    name: &'a str,
    key: &'a str,
}

impl LocalBucket {
    pub(super) fn new(uri: Arc<str>, root: PathBuf, sub: PathBuf) -> Self {
        Self {
            uri,
            root,
            sub,
            lock_dir: None,
            read_root: Arc::default(),
        }
    }

    #[cfg(test)]
    pub(super) fn with_lock_dir(mut self, dir: PathBuf) -> Self {
        self.lock_dir = Some(dir);
        self
    }

    fn err(&self, op: &Op<'_>, e: io::Error) -> StorageError {
        let (uri, name, key) = (&self.uri, op.name, op.key);
        if e.kind() == io::ErrorKind::PermissionDenied {
            if e.to_string().contains("outside") {
                return StorageError::Denied(format!(
                    "{uri}: {name} {key:?}: the path leads outside the granted directory \
                     (through a symlink or '..'): {e}"
                ));
            }
            return StorageError::Denied(format!("{uri}: {name} {key:?}: {e}"));
        }
        StorageError::Io(format!("{uri}: {name} {key:?}: {e}"))
    }

    /// The granted root, or `None` when it does not exist (reads as empty).
    fn open_root(&self) -> io::Result<Option<Dir>> {
        match Dir::open_ambient_dir(&self.root, ambient_authority()) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The granted root for a read: the one the last read opened, when no
    /// write came since.
    fn root_for_read(&self) -> io::Result<Option<Arc<Dir>>> {
        let mut cached = self.read_root.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(root) = cached.as_ref() {
            return Ok(Some(Arc::clone(root)));
        }
        let root = self.open_root()?.map(Arc::new);
        cached.clone_from(&root);
        Ok(root)
    }

    /// Forget the root [`root_for_read`](Self::root_for_read) keeps.
    fn forget_read_root(&self) {
        *self.read_root.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The granted root, created on first write.
    fn open_root_for_write(&self) -> io::Result<Dir> {
        if let Some(d) = self.open_root()? {
            return Ok(d);
        }
        // The root itself was named by the host (the object's locator), so
        // creating it with ambient authority is within the grant.
        Dir::create_ambient_dir_all(&self.root, ambient_authority())?;
        Dir::open_ambient_dir(&self.root, ambient_authority())
    }

    /// A key's path relative to the granted root.
    fn rel(&self, key: &str) -> PathBuf {
        self.sub.join(key)
    }

    fn locks_dir(&self) -> io::Result<PathBuf> {
        if let Some(d) = &self.lock_dir {
            return Ok(d.clone());
        }
        if let Some(d) = std::env::var_os("TETHER_CACHE_DIR").filter(|d| !d.is_empty()) {
            return Ok(PathBuf::from(d).join("locks"));
        }
        dirs::cache_dir()
            .map(|d| d.join("tether").join("locks"))
            .ok_or_else(|| {
                io::Error::other("no user cache directory for lock files; set TETHER_CACHE_DIR")
            })
    }

    /// Take the cross-process lock that guards the object at `rel`: the lock
    /// of its parent directory, which must exist. Released when the returned
    /// file is dropped.
    ///
    /// One lock covers a directory of the store, not one object, and the
    /// lock file is one of [`LOCK_BUCKETS`], picked by the hash of the
    /// directory's canonical path ([`lock_file_name`]). A lock file per key
    /// ever written grew the lock directory by one file per pin, forever;
    /// one per directory still made 10,000 new files on the first commit of
    /// 10,000 stores, and creating a file costs 70-350 µs on a filesystem
    /// like this machine's, where opening one that exists costs 6. Writes
    /// that share a lock serialize for the moment each takes; no caller
    /// holds two locks at once, so a coarser lock cannot deadlock.
    ///
    /// With `wait` false, a lock another holder has fails at once with
    /// [`io::ErrorKind::WouldBlock`] instead of waiting.
    fn lock(&self, root: &Dir, rel: &Path, wait: bool) -> io::Result<std::fs::File> {
        let parent = parent_of(rel);
        // Canonical paths, so every URI reaching this file shares the lock;
        // the parent is resolved inside the sandbox.
        let canonical_root = crate::model::fsutil::canonicalize_once(&self.root)?;
        // Resolved once per process, as the root is: a commit of 10,000
        // objects takes a lock per pin.
        static PARENTS: crate::model::fsutil::PathMemo = crate::model::fsutil::PathMemo::new();
        let canonical_parent = PARENTS.get_or(&canonical_root.join(parent), || {
            root.canonicalize(dot_if_empty(parent))
        })?;
        let path = self
            .locks_dir()?
            .join(lock_file_name(&canonical_root, &canonical_parent));
        let context =
            |e: io::Error| io::Error::new(e.kind(), format!("lock file {}: {e}", path.display()));
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
        };
        // The lock directory is made on first use, not checked on every lock
        // (a 10,000-object commit takes 10,000).
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(context)?;
                }
                open()
            }
            opened => opened,
        }
        .map_err(context)?;
        // flock(2): excludes other processes and other open files of this one.
        if wait {
            fs4::FileExt::lock(&file).map_err(context)?;
        } else {
            match fs4::FileExt::try_lock(&file) {
                Ok(()) => {}
                Err(fs4::TryLockError::WouldBlock) => return Err(io::ErrorKind::WouldBlock.into()),
                Err(fs4::TryLockError::Error(e)) => return Err(context(e)),
            }
        }
        Ok(file)
    }

    fn meta(&self, key: &str, data: &[u8], md: &cap_std::fs::Metadata) -> ObjectMeta {
        ObjectMeta {
            key: key.to_string(),
            size: data.len() as u64,
            etag: content_etag(data),
            last_modified: md
                .modified()
                .ok()
                .map(|t| system_time_rfc3339(t.into_std())),
        }
    }

    /// Run a read where the caller is: a get, ranged get or head of one
    /// local object is a few syscalls, cheaper than handing it to a blocking
    /// thread and back (which `verify --all-history`, one read per pin, paid
    /// a thousand times). Reads take no lock, so they never wait on another
    /// process; writes (locks, fsync) and listings (a directory of any size)
    /// still go through [`blocking`](Self::blocking).
    fn inline<T>(
        &self,
        f: impl FnOnce(&Self) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        f(self)
    }

    /// Run blocking filesystem work off the async runtime.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Self) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        // Whatever runs here may create or remove the root: a read racing
        // it may keep the old one, so forget it after as well as before.
        self.forget_read_root();
        let this = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || f(&this))
            .await
            .map_err(|e| StorageError::Io(format!("storage worker failed: {e}")));
        self.forget_read_root();
        result?
    }

    pub(super) async fn get(
        self: &Arc<Self>,
        key: &str,
        max: u64,
    ) -> Result<Option<StoredObject>, StorageError> {
        self.inline(|b| {
            let op = Op { name: "get", key };
            let Some(root) = b.root_for_read().map_err(|e| b.err(&op, e))? else {
                return Ok(None);
            };
            let found = read_object_at_most(&root, &b.rel(key), max).map_err(|e| b.err(&op, e))?;
            let (data, md) = match found {
                None => return Ok(None),
                Some(Found::TooLarge(size)) => {
                    return Err(too_large(&b.uri, "get", key, size, max));
                }
                Some(Found::Whole(data, md)) => (data, md),
            };
            let meta = b.meta(key, &data, &md);
            Ok(Some(StoredObject {
                meta,
                data: Bytes::from(data),
            }))
        })
    }

    pub(super) async fn get_range(
        self: &Arc<Self>,
        key: &str,
        offset: u64,
        length: u64,
        max: u64,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        self.inline(|b| {
            let op = Op {
                name: "get-range",
                key,
            };
            let Some(root) = b.root_for_read().map_err(|e| b.err(&op, e))? else {
                return Ok(None);
            };
            let read = || -> io::Result<Option<Vec<u8>>> {
                let Some((mut file, md)) = open_object(&root, &b.rel(key))? else {
                    return Ok(None);
                };
                let size = md.len();
                if offset >= size || length == 0 {
                    return Ok(Some(Vec::new()));
                }
                if length.min(size - offset) > max {
                    return Err(io::Error::other(TooLargeRange(length.min(size - offset))));
                }
                file.seek(SeekFrom::Start(offset))?;
                let mut out = Vec::with_capacity(length.min(size - offset) as usize);
                file.take(length).read_to_end(&mut out)?;
                Ok(Some(out))
            };
            read().map_err(
                |e| match e.get_ref().and_then(|e| e.downcast_ref::<TooLargeRange>()) {
                    Some(TooLargeRange(n)) => too_large(&b.uri, "get-range", key, *n, max),
                    None => b.err(&op, e),
                },
            )
        })
    }

    pub(super) async fn head(
        self: &Arc<Self>,
        key: &str,
    ) -> Result<Option<ObjectMeta>, StorageError> {
        self.inline(|b| {
            let op = Op { name: "head", key };
            let Some(root) = b.root_for_read().map_err(|e| b.err(&op, e))? else {
                return Ok(None);
            };
            // The etag is a content hash, so head reads the object too, a
            // buffer at a time: an object of any size costs no more memory.
            let found = open_object(&root, &b.rel(key))
                .and_then(|o| {
                    o.map(|(file, md)| {
                        let mut hasher = Sha256::new();
                        let size = io::copy(&mut io::BufReader::new(file), &mut hasher)?;
                        let mut etag = hex::encode(hasher.finalize());
                        etag.truncate(32);
                        Ok(ObjectMeta {
                            key: key.to_string(),
                            size,
                            etag,
                            last_modified: md
                                .modified()
                                .ok()
                                .map(|t| system_time_rfc3339(t.into_std())),
                        })
                    })
                    .transpose()
                })
                .map_err(|e| b.err(&op, e))?;
            Ok(found)
        })
    }

    pub(super) async fn put(
        self: &Arc<Self>,
        key: &str,
        data: Bytes,
        mode: PutMode,
    ) -> Result<ObjectMeta, StorageError> {
        // Inside a deferred-sync scope (a commit's pins) a put is a few
        // syscalls and no fsync: run it where the caller is, as reads are,
        // rather than hand each of 10,000 to a blocking thread and back. Only
        // a lock another process holds sends it there, to wait.
        if super::durable::deferring() {
            self.forget_read_root();
            let now = self.put_locked("put", key, &data, &mode, false);
            self.forget_read_root();
            if let Some(done) = now.transpose() {
                return done;
            }
        }
        let key = key.to_string();
        self.blocking(move |b| b.put_blocking("put", &key, &data, &mode))
            .await
    }

    /// Lock, compare, write. Shared by put and copy.
    fn put_blocking(
        &self,
        op_name: &str,
        key: &str,
        data: &[u8],
        mode: &PutMode,
    ) -> Result<ObjectMeta, StorageError> {
        self.put_locked(op_name, key, data, mode, true)
            .map(|done| done.expect("a put that waits for its lock gets it"))
    }

    /// [`put_blocking`](Self::put_blocking); with `wait` false, `None` when
    /// another holder has the lock (nothing written).
    fn put_locked(
        &self,
        op_name: &str,
        key: &str,
        data: &[u8],
        mode: &PutMode,
        wait: bool,
    ) -> Result<Option<ObjectMeta>, StorageError> {
        let op = Op { name: op_name, key };
        let err = |e| self.err(&op, e);
        let root = self.open_root_for_write().map_err(err)?;
        let rel = self.rel(key);
        let parent = parent_of(&rel);
        let mut attempt = 0;
        let _lock = loop {
            attempt += 1;
            match self.lock(&root, &rel, wait) {
                Ok(lock) => break lock,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !wait => return Ok(None),
                // The key's directory is new (or a delete pruned it, still
                // empty): made, and again. Made only then, not checked on
                // every put.
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        && attempt < CREATE_ATTEMPTS
                        && !parent.as_os_str().is_empty() =>
                {
                    create_dirs(&root, parent).map_err(err)?;
                }
                Err(e) => return Err(err(e)),
            }
        };
        // Following the key through the sandbox refuses a symlink leading
        // out of it even though the rename below would only replace the link.
        let current = read_object(&root, &rel).map_err(err)?;
        let refused = match (mode, &current) {
            (PutMode::Overwrite, _) => None,
            (PutMode::Create, None) => None,
            (PutMode::Create, Some(_)) => Some(StorageError::AlreadyExists(format!(
                "{}: {op_name} {key:?}: the key already exists",
                self.uri
            ))),
            (PutMode::IfMatch(_), None) => Some(StorageError::PreconditionFailed(format!(
                "{}: {op_name} {key:?} if-match: the key does not exist",
                self.uri
            ))),
            (PutMode::IfMatch(expected), Some((bytes, _))) => {
                let actual = content_etag(bytes);
                (actual != *expected).then(|| {
                    StorageError::PreconditionFailed(format!(
                        "{}: {op_name} {key:?} if-match {expected:?}: the current etag is {actual:?}",
                        self.uri
                    ))
                })
            }
        };
        if let Some(refused) = refused {
            // Do not leave directories behind that only this put created.
            self.prune_empty(&root, parent);
            return Err(refused);
        }
        let md = write_atomic(&root, &rel, &self.root.join(&rel), data).map_err(err)?;
        Ok(Some(self.meta(key, data, &md)))
    }

    pub(super) async fn list(
        self: &Arc<Self>,
        prefix: &str,
        cursor: Option<String>,
        limit: usize,
    ) -> Result<ListPage, StorageError> {
        let prefix = prefix.to_string();
        self.blocking(move |b| {
            let op = Op {
                name: "list",
                key: &prefix,
            };
            let Some(root) = b.open_root().map_err(|e| b.err(&op, e))? else {
                return Ok(ListPage::default());
            };
            let mut walk = Walk {
                root: &root,
                prefix: &prefix,
                cursor: cursor.as_deref(),
                want: limit + 1,
                found: Vec::new(),
            };
            walk.dir(&b.sub, "").map_err(|e| b.err(&op, e))?;
            let more = walk.found.len() > limit;
            let mut objects = Vec::with_capacity(limit.min(walk.found.len()));
            for key in walk.found.into_iter().take(limit) {
                // A key deleted since the walk saw it is simply left out.
                let found = read_object(&root, &b.rel(&key)).map_err(|e| b.err(&op, e))?;
                if let Some((data, md)) = found {
                    objects.push(b.meta(&key, &data, &md));
                }
            }
            let next = if more {
                objects.last().map(|m| m.key.clone())
            } else {
                None
            };
            Ok(ListPage { objects, next })
        })
        .await
    }

    pub(super) async fn delete(self: &Arc<Self>, key: &str) -> Result<bool, StorageError> {
        let key = key.to_string();
        self.blocking(move |b| {
            let op = Op {
                name: "delete",
                key: &key,
            };
            let err = |e| b.err(&op, e);
            let Some(root) = b.open_root().map_err(err)? else {
                return Ok(false);
            };
            let rel = b.rel(&key);
            let parent = parent_of(&rel);
            let lock = match b.lock(&root, &rel, true) {
                Ok(l) => l,
                // No parent directory: no object either.
                Err(e) if is_absent(&e) => return Ok(false),
                Err(e) => return Err(err(e)),
            };
            // Refuse a key whose path leads out of the sandbox, like get does.
            if read_object(&root, &rel).map_err(err)?.is_none() {
                return Ok(false);
            }
            match root.remove_file(&rel) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => return Ok(false),
                Err(e) => return Err(err(e)),
            }
            drop(lock);
            b.prune_empty(&root, parent);
            Ok(true)
        })
        .await
    }

    pub(super) async fn copy(
        self: &Arc<Self>,
        src: &str,
        dst: &str,
        overwrite: bool,
    ) -> Result<ObjectMeta, StorageError> {
        let (src, dst) = (src.to_string(), dst.to_string());
        self.blocking(move |b| {
            let op = Op {
                name: "copy from",
                key: &src,
            };
            // The source read needs no lock: renames make it a snapshot.
            let found = match b.open_root().map_err(|e| b.err(&op, e))? {
                Some(root) => read_object(&root, &b.rel(&src)).map_err(|e| b.err(&op, e))?,
                None => None,
            };
            let Some((data, _)) = found else {
                return Err(StorageError::PreconditionFailed(format!(
                    "{}: copy {src:?} to {dst:?}: the source key does not exist",
                    b.uri
                )));
            };
            let mode = if overwrite {
                PutMode::Overwrite
            } else {
                PutMode::Create
            };
            b.put_blocking("copy to", &dst, &data, &mode)
        })
        .await
    }

    /// Remove now-empty directories from `dir` up to, not including, the
    /// bucket root. Best effort: a directory that is not empty (or anything
    /// else going wrong) stops it, and a put racing it re-creates what it needs.
    fn prune_empty(&self, root: &Dir, dir: &Path) {
        let mut dir = dir;
        while dir != self.sub && dir.starts_with(&self.sub) && !dir.as_os_str().is_empty() {
            if root.remove_dir(dir).is_err() {
                break;
            }
            dir = parent_of(dir);
        }
    }
}

/// How many lock files the local stores share, at most: the lock
/// directory never grows past this, however many directories are written.
/// Two directories in one bucket only wait for each other's write, and
/// with 64 writes in flight a write finds its bucket taken about one time
/// in 64.
pub(crate) const LOCK_BUCKETS: u16 = 4096;

/// The lock file of directory `canonical_parent` of the store at
/// `canonical_root`: `<bucket>.lock`, three hex digits of the sha256 of both
/// paths. (Before, each directory had its own file, named by the whole
/// digest; a tether of that kind racing this one on one store would not
/// see this one's lock.)
pub(super) fn lock_file_name(canonical_root: &Path, canonical_parent: &Path) -> String {
    let mut hasher = Sha256::new();
    hasher.update(canonical_root.as_os_str().as_encoded_bytes());
    hasher.update([0]);
    hasher.update(canonical_parent.as_os_str().as_encoded_bytes());
    let digest = hasher.finalize();
    let bucket = u16::from_be_bytes([digest[0], digest[1]]) % LOCK_BUCKETS;
    format!("{bucket:03x}.lock")
}

fn parent_of(rel: &Path) -> &Path {
    rel.parent().unwrap_or(Path::new(""))
}

fn dot_if_empty(p: &Path) -> &Path {
    if p.as_os_str().is_empty() {
        Path::new(".")
    } else {
        p
    }
}

/// `create_dir_all` inside the sandbox. A symlink leading out of it shows up
/// as "File exists" there; report the escape instead, which is what it is.
fn create_dirs(root: &Dir, dir: &Path) -> io::Result<()> {
    root.create_dir_all(dir)
        .map_err(|e| match root.metadata(dir) {
            Err(escape) if escape.kind() == io::ErrorKind::PermissionDenied => escape,
            _ => e,
        })
}

/// Errors that mean "no such object": missing, or a path component that is a
/// file where a directory would have to be.
fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Open a regular file inside the sandbox; `None` when there is no object
/// there (absent, or a directory).
fn open_object(
    root: &Dir,
    rel: &Path,
) -> io::Result<Option<(cap_std::fs::File, cap_std::fs::Metadata)>> {
    let file = match root.open(rel) {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let md = file.metadata()?;
    if !md.is_file() {
        return Ok(None);
    }
    Ok(Some((file, md)))
}

/// What [`read_object`] found. Matched as soon as it is returned, so the
/// metadata stays inline rather than costing an allocation per read.
#[allow(clippy::large_enum_variant)]
enum Found {
    /// The whole content, and the metadata of the file it was read from.
    Whole(Vec<u8>, cap_std::fs::Metadata),
    /// More bytes than the read limit (at least this many); nothing was read.
    TooLarge(u64),
}

/// A ranged read over the read limit, carried through `io::Error` to
/// become [`too_large`].
#[derive(Debug)]
struct TooLargeRange(u64);

impl std::fmt::Display for TooLargeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a read of {} bytes is over the limit", self.0)
    }
}

impl std::error::Error for TooLargeRange {}

/// Content and metadata of one object, read from a single open file so both
/// describe the same version even while a writer renames a new one in.
fn read_object(root: &Dir, rel: &Path) -> io::Result<Option<(Vec<u8>, cap_std::fs::Metadata)>> {
    Ok(match read_object_at_most(root, rel, u64::MAX)? {
        Some(Found::Whole(data, md)) => Some((data, md)),
        Some(Found::TooLarge(_)) | None => None,
    })
}

/// [`read_object`], except that an object over `max` bytes is not read.
fn read_object_at_most(root: &Dir, rel: &Path, max: u64) -> io::Result<Option<Found>> {
    let Some((mut file, md)) = open_object(root, rel)? else {
        return Ok(None);
    };
    if md.len() > max {
        return Ok(Some(Found::TooLarge(md.len())));
    }
    // The size the metadata gave, and no more: writers replace an object by
    // renaming a new file over it, never by growing it, so those bytes are
    // the version `md` describes, and no further read is needed to find the
    // end (`verify` reads a pin per call, a thousand for a long history).
    // Read through `Take` because `File::read_to_end` would stat and seek
    // again. A file that reports no size (procfs) is read to its end.
    let len = md.len();
    let limit = if len == 0 { max.saturating_add(1) } else { len };
    let mut data = Vec::with_capacity(len as usize);
    Read::by_ref(&mut file).take(limit).read_to_end(&mut data)?;
    if data.len() as u64 > max {
        return Ok(Some(Found::TooLarge(data.len() as u64)));
    }
    Ok(Some(Found::Whole(data, md)))
}

/// Write `data` to a temp file beside `rel`, fsync it (or leave that to an
/// open [`DeferredSyncs`](super::DeferredSyncs) scope), and rename it over
/// `rel` (`shown` names it in the sync log). Returns the new file's metadata.
fn write_atomic(
    root: &Dir,
    rel: &Path,
    shown: &Path,
    data: &[u8],
) -> io::Result<cap_std::fs::Metadata> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let parent = parent_of(rel);
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        attempt += 1;
        let tmp = parent.join(format!(
            "{TEMP_PREFIX}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        match root.open_with(&tmp, &options) {
            Ok(f) => break (tmp, f),
            // A delete pruned the directory since it was created; again.
            Err(e) if e.kind() == io::ErrorKind::NotFound && attempt < CREATE_ATTEMPTS => {
                create_dirs(root, parent)?;
            }
            // A stale temp file of an earlier process with our pid; next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < CREATE_ATTEMPTS => {}
            Err(e) => return Err(e),
        }
    };
    // Inside a deferred-sync scope the file is synced with its whole
    // filesystem when the scope ends (`durable`), not here.
    let deferred = super::durable::deferring();
    let shown = || shown.display().to_string();
    let written = (|| {
        file.write_all(data)?;
        if !deferred {
            super::durable::sync_file(&file, &shown())?;
        }
        let md = file.metadata()?;
        root.rename(&tmp, root, rel)?;
        Ok(md)
    })();
    if written.is_err() {
        drop(file);
        let _ = root.remove_file(&tmp);
        return written;
    }
    if deferred && let Some(file) = super::durable::hand_over(file.into_std(), &shown())? {
        // The scope ended while this put ran: sync it here after all.
        super::durable::sync_file(&file, &shown())?;
    }
    written
}

/// A sorted, pruned walk of the bucket collecting keys after the cursor.
struct Walk<'a> {
    root: &'a Dir,
    prefix: &'a str,
    cursor: Option<&'a str>,
    want: usize,
    found: Vec<String>,
}

impl Walk<'_> {
    /// Walk directory `rel` (relative to the sandbox) whose keys start with
    /// `key_prefix` (`""` or ending in `/`). Returns early once `want` keys
    /// are found.
    fn dir(&mut self, rel: &Path, key_prefix: &str) -> io::Result<()> {
        let entries = match self.root.read_dir(dot_if_empty(rel)) {
            Ok(e) => e,
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        // Sort by the key each entry contributes: a directory `a` as `a/`,
        // so `a-c` sorts before `a/b` exactly as whole keys compare.
        let mut children: Vec<(String, String, bool)> = Vec::new();
        for entry in entries {
            let entry = entry?;
            // Names that are not UTF-8 cannot be keys.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.starts_with(TEMP_PREFIX) {
                continue;
            }
            // Not following symlinks keeps the walk inside the tree and acyclic.
            let file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(e),
            };
            if file_type.is_dir() {
                children.push((format!("{key_prefix}{name}/"), name, true));
            } else if file_type.is_file() {
                children.push((format!("{key_prefix}{name}"), name, false));
            }
        }
        children.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, name, is_dir) in children {
            if self.found.len() >= self.want {
                return Ok(());
            }
            if is_dir {
                let relevant = key.starts_with(self.prefix) || self.prefix.starts_with(&key);
                // Every key under `key` sorts before the cursor when the cursor
                // is past `key` without starting with it.
                let passed = self
                    .cursor
                    .is_some_and(|c| c > key.as_str() && !c.starts_with(&key));
                if relevant && !passed {
                    self.dir(&rel.join(&name), &key)?;
                }
            } else if key.starts_with(self.prefix)
                && self.cursor.is_none_or(|c| key.as_str() > c)
                // A file no key could name (`a\\b`, ...) is not an object.
                && super::validate_key(&key).is_ok()
            {
                self.found.push(key);
            }
        }
        Ok(())
    }
}
