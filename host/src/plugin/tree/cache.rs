//! The sha256 cache of local files (spec/14, "Fingerprints are metadata-only,
//! except the first local one").
//!
//! A file's hash is trusted while its `(size, mtime_ns, ctime_ns, inode)`
//! stat key is unchanged: ctime too, because an overwrite that restores the
//! mtime cannot restore the ctime; the inode, because a replace-by-rename
//! makes a new one. One rule guards against timestamp granularity: a file
//! whose mtime is within [`RACY_NS`] (2 s) of now is re-read rather than
//! trusted, and such a "racy" hash is not stored either, since a second write
//! in the same timestamp granule would leave the key unchanged. Only hashes
//! taken well after the file last changed are ever vouched for.
//!
//! Caches are process-wide, one per cache file (plus one in memory for calls
//! with no dataset), so concurrent calls of one fan-out share entries instead
//! of overwriting each other's. The file is
//! `<dataset>/.tether/cache/file-hashes.json`:
//!
//! ```json
//! {"version":1,"files":{"/abs/real/path":[size,mtime_ns,ctime_ns,inode,"<sha256 hex>"]}}
//! ```
//!
//! keyed by absolute real path, so every object of a dataset shares one file.
//! It is rewritten atomically (temp file, fsync, rename) and only when an
//! entry changed, and re-read when another process rewrote it. Two processes
//! racing may drop each other's new entries: that costs a re-hash, never a
//! wrong hash. A cache file that does not parse is ignored and replaced.
//! A walk with hashing also forgets entries under its root that it no longer
//! saw, so deleted files do not accumulate.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::TreeError;

/// A file modified this recently (ns) is re-read and its hash not stored.
pub(super) const RACY_NS: i64 = 2_000_000_000;

/// What must be unchanged for a cached hash to be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatKey {
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) inode: u64,
}

/// Counters of one cache (one cache file, or the memory cache): claims like
/// "a second fingerprint re-hashes nothing" are checked with these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct HashStats {
    /// Files read and hashed.
    pub files_hashed: u64,
    /// Bytes read while hashing.
    pub bytes_hashed: u64,
    /// Hashes taken from the cache.
    pub cache_hits: u64,
    /// Times the cache file was written.
    pub writes: u64,
}

/// The counters of the cache at `cache` (`None`: the process's memory
/// cache); zeros when it was never used.
pub fn stats(cache: Option<&Path>) -> HashStats {
    let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    registry
        .get(&cache.map(Path::to_path_buf))
        .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).stats)
        .unwrap_or_default()
}

type Shared = Arc<Mutex<HashCache>>;

static REGISTRY: LazyLock<Mutex<HashMap<Option<PathBuf>, Shared>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Nanoseconds since the Unix epoch, now.
pub(super) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Identifies one version of the cache file, to notice another process's write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    mtime: Option<SystemTime>,
    inode: u64,
}

fn file_stamp(path: &Path) -> Option<FileStamp> {
    let md = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&md);
    #[cfg(not(unix))]
    let inode = 0;
    Some(FileStamp {
        len: md.len(),
        mtime: md.modified().ok(),
        inode,
    })
}

#[derive(Debug, Clone)]
struct CacheEntry {
    key: StatKey,
    sha256: String,
}

/// The on-disk form.
#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    files: BTreeMap<String, (u64, i64, i64, u64, String)>,
}

const VERSION: u32 = 1;

/// One cache's entries and counters.
#[derive(Debug, Default)]
pub(crate) struct HashCache {
    path: Option<PathBuf>,
    entries: HashMap<PathBuf, CacheEntry>,
    dirty: bool,
    /// The file as last read or written by this process.
    stamp: Option<FileStamp>,
    loaded: bool,
    stats: HashStats,
}

impl HashCache {
    /// The cached hash of `path` when `key` matches and the file is not racy.
    pub(super) fn lookup(&mut self, path: &Path, key: &StatKey, now: i64) -> Option<String> {
        if key.mtime_ns > now.saturating_sub(RACY_NS) {
            return None;
        }
        let entry = self.entries.get(path).filter(|e| e.key == *key)?;
        self.stats.cache_hits += 1;
        Some(entry.sha256.clone())
    }

    /// Remember a hash taken at `now`, unless the file was racy then.
    pub(super) fn insert(&mut self, path: &Path, key: StatKey, sha256: String, now: i64) {
        if key.mtime_ns > now.saturating_sub(RACY_NS) {
            if self.entries.remove(path).is_some() {
                self.dirty = true;
            }
            return;
        }
        let same = self
            .entries
            .get(path)
            .is_some_and(|e| e.key == key && e.sha256 == sha256);
        if !same {
            self.entries
                .insert(path.to_path_buf(), CacheEntry { key, sha256 });
            self.dirty = true;
        }
    }

    /// Forget what this process knows, as a fresh process would (tests).
    #[cfg(test)]
    pub(super) fn forget(&mut self) {
        self.entries.clear();
        self.loaded = false;
        self.stamp = None;
    }

    pub(super) fn record_hashed(&mut self, files: u64, bytes: u64) {
        self.stats.files_hashed += files;
        self.stats.bytes_hashed += bytes;
    }

    /// Load (or re-load, after another process's write) the cache file,
    /// keeping entries only this process knows.
    fn refresh(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let stamp = file_stamp(&path);
        if self.loaded && stamp == self.stamp {
            return;
        }
        self.loaded = true;
        self.stamp = stamp;
        let Ok(bytes) = std::fs::read(&path) else {
            return;
        };
        let parsed: CacheFile = match serde_json::from_slice(&bytes) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(cache = %path.display(), "ignoring an unreadable hash cache: {e}");
                return;
            }
        };
        if parsed.version != VERSION {
            tracing::debug!(cache = %path.display(), version = parsed.version, "ignoring a hash cache of another version");
            return;
        }
        let mut entries: HashMap<PathBuf, CacheEntry> = parsed
            .files
            .into_iter()
            .map(|(p, (size, mtime_ns, ctime_ns, inode, sha256))| {
                let key = StatKey {
                    size,
                    mtime_ns,
                    ctime_ns,
                    inode,
                };
                (PathBuf::from(p), CacheEntry { key, sha256 })
            })
            .collect();
        // Lookups check the key against the file anyway, so keeping either
        // side's entry is safe; the file's is the newer one.
        for (p, e) in self.entries.drain() {
            entries.entry(p).or_insert(e);
        }
        self.entries = entries;
    }

    fn write(&mut self) -> Result<(), TreeError> {
        if !self.dirty {
            return Ok(());
        }
        let Some(path) = self.path.clone() else {
            self.dirty = false;
            return Ok(());
        };
        let files = self
            .entries
            .iter()
            .filter_map(|(p, e)| {
                let k = &e.key;
                let p = p.to_str()?.to_string();
                Some((
                    p,
                    (k.size, k.mtime_ns, k.ctime_ns, k.inode, e.sha256.clone()),
                ))
            })
            .collect();
        let text = serde_json::to_vec(&CacheFile {
            version: VERSION,
            files,
        })
        .map_err(|e| TreeError::Io(format!("cannot serialise the hash cache: {e}")))?;
        write_atomic(&path, &text).map_err(|e| {
            TreeError::Io(format!(
                "cannot write the hash cache {}: {e}",
                path.display()
            ))
        })?;
        self.stamp = file_stamp(&path);
        self.dirty = false;
        self.stats.writes += 1;
        Ok(())
    }
}

/// Temp file in the same directory, fsync, rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tether-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The process-wide cache for one file (or memory), refreshed from disk.
#[derive(Debug, Clone)]
pub(crate) struct CacheHandle(Shared);

impl CacheHandle {
    pub(super) fn open(path: Option<&Path>) -> Result<Self, TreeError> {
        let key = path.map(Path::to_path_buf);
        let shared = {
            let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            registry
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(HashCache {
                        path: key,
                        ..HashCache::default()
                    }))
                })
                .clone()
        };
        let handle = Self(shared);
        handle.with(HashCache::refresh);
        Ok(handle)
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut HashCache) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Forget entries under `root` other than `seen` (files that are gone).
    pub(super) fn prune_under<'a>(&self, root: &Path, seen: impl Iterator<Item = &'a PathBuf>) {
        let seen: HashSet<&PathBuf> = seen.collect();
        self.with(|c| {
            let before = c.entries.len();
            // The common case (every entry is one this walk saw) costs a count,
            // not a scan with a path comparison per entry.
            let present = seen.iter().filter(|p| c.entries.contains_key(**p)).count();
            if present == before {
                return;
            }
            c.entries
                .retain(|p, _| !p.starts_with(root) || p == root || seen.contains(p));
            if c.entries.len() != before {
                c.dirty = true;
            }
        });
    }

    /// Write the cache file when an entry changed.
    pub(super) fn flush(&self) -> Result<(), TreeError> {
        self.with(HashCache::write)
    }
}
