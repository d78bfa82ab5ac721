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
//! {"version":2,"files":[
//! ["/abs/real/path",size,mtime_ns,ctime_ns,inode,"<sha256 hex>"],
//! ...
//! ]}
//! ```
//!
//! keyed by absolute real path, so every object of a dataset shares one file.
//! It is one JSON document, but laid out one entry per line, sorted by path,
//! behind a fixed header line, so it is read by a strict line parser instead
//! of a general JSON one (a 100,000-file tree's cache loads in milliseconds).
//! Anything that does not parse exactly (a bad line, a bad hash, a missing
//! end) makes the whole file ignored, never half-trusted. A version-1 file
//! (`"files"` an object keyed by path) is still read, and replaced by a
//! version-2 one at the next write.
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

use serde::Deserialize;

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

/// The version-1 on-disk form: still read, never written.
#[derive(Deserialize)]
struct CacheFileV1 {
    version: u32,
    files: BTreeMap<String, (u64, i64, i64, u64, String)>,
}

/// The first line of a version-2 cache file (module docs).
const HEADER_V2: &[u8] = b"{\"version\":2,\"files\":[\n";
/// Its last line.
const FOOTER_V2: &[u8] = b"]}\n";

/// By absolute real path (a `str`: `Path`'s hashing and equality go
/// component by component, several times slower on 100,000 lookups).
type Entries = HashMap<Box<str>, CacheEntry>;

/// The entries of a cache file; `None` (with a log line) when it is not one
/// this build reads exactly.
fn parse_cache(bytes: &[u8], path: &Path) -> Option<Entries> {
    if let Some(body) = bytes.strip_prefix(HEADER_V2) {
        let parsed = parse_v2(body);
        if parsed.is_none() {
            tracing::warn!(cache = %path.display(), "ignoring a corrupt hash cache");
        }
        return parsed;
    }
    let parsed: CacheFileV1 = match serde_json::from_slice(bytes) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(cache = %path.display(), "ignoring an unreadable hash cache: {e}");
            return None;
        }
    };
    if parsed.version != 1 {
        tracing::debug!(cache = %path.display(), version = parsed.version, "ignoring a hash cache of another version");
        return None;
    }
    let mut entries = Entries::with_capacity(parsed.files.len());
    for (p, (size, mtime_ns, ctime_ns, inode, sha256)) in parsed.files {
        if !is_sha256_hex(sha256.as_bytes()) {
            return None;
        }
        let key = StatKey {
            size,
            mtime_ns,
            ctime_ns,
            inode,
        };
        entries.insert(p.into_boxed_str(), CacheEntry { key, sha256 });
    }
    Some(entries)
}

/// The lines after the version-2 header: one entry per line, each followed
/// by `,` but the last, then the footer.
fn parse_v2(body: &[u8]) -> Option<Entries> {
    let body = body.strip_suffix(FOOTER_V2)?;
    let mut entries = Entries::with_capacity(body.len() / 128);
    if body.is_empty() {
        return Some(entries);
    }
    let body = body.strip_suffix(b"\n")?;
    let mut lines = body.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let line = if lines.peek().is_some() {
            line.strip_suffix(b",")?
        } else {
            line
        };
        let (path, entry) = parse_line(line)?;
        if entries.insert(path, entry).is_some() {
            return None;
        }
    }
    Some(entries)
}

/// `["path",size,mtime_ns,ctime_ns,inode,"sha256"]`.
fn parse_line(line: &[u8]) -> Option<(Box<str>, CacheEntry)> {
    let line = line.strip_prefix(b"[")?.strip_suffix(b"]")?;
    // The path is the only field that may hold `,` or an escape: it ends at
    // the first unescaped quote.
    let (path, rest) = if line.first() == Some(&b'"') && !line.contains(&b'\\') {
        let end = 1 + line[1..].iter().position(|&b| b == b'"')?;
        let raw = std::str::from_utf8(&line[1..end]).ok()?;
        if raw.bytes().any(|b| b < 0x20) {
            return None;
        }
        (raw.to_owned(), line.get(end + 1..)?)
    } else {
        let mut de = serde_json::Deserializer::from_slice(line).into_iter::<String>();
        let path = de.next()?.ok()?;
        let used = de.byte_offset();
        (path, &line[used..])
    };
    if !path.starts_with('/') {
        return None;
    }
    let mut fields = rest.strip_prefix(b",")?.splitn(5, |&b| b == b',');
    let mut number = || std::str::from_utf8(fields.next()?).ok();
    let size = number()?.parse().ok()?;
    let mtime_ns = number()?.parse().ok()?;
    let ctime_ns = number()?.parse().ok()?;
    let inode = number()?.parse().ok()?;
    let sha = fields.next()?.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !is_sha256_hex(sha) {
        return None;
    }
    let key = StatKey {
        size,
        mtime_ns,
        ctime_ns,
        inode,
    };
    let sha256 = String::from_utf8(sha.to_vec()).ok()?;
    Some((path.into_boxed_str(), CacheEntry { key, sha256 }))
}

fn is_sha256_hex(s: &[u8]) -> bool {
    s.len() == 64 && s.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The version-2 file of `entries`, sorted by path.
fn render_cache(entries: &Entries) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut sorted: Vec<(&str, &CacheEntry)> = entries.iter().map(|(p, e)| (&**p, e)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = String::with_capacity(HEADER_V2.len() + sorted.len() * 160);
    out.push_str(std::str::from_utf8(HEADER_V2).unwrap_or_default());
    for (i, (path, e)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        out.push('[');
        let plain = !path.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20);
        if plain {
            out.push('"');
            out.push_str(path);
            out.push('"');
        } else {
            // serde_json escapes exactly what JSON requires.
            out.push_str(&serde_json::Value::from(*path).to_string());
        }
        let k = &e.key;
        let _ = write!(
            out,
            ",{},{},{},{},\"{}\"]",
            k.size, k.mtime_ns, k.ctime_ns, k.inode, e.sha256
        );
    }
    if !sorted.is_empty() {
        out.push('\n');
    }
    out.push_str(std::str::from_utf8(FOOTER_V2).unwrap_or_default());
    out.into_bytes()
}

/// One cache's entries and counters.
#[derive(Debug, Default)]
pub(crate) struct HashCache {
    path: Option<PathBuf>,
    entries: Entries,
    dirty: bool,
    /// The file as last read or written by this process.
    stamp: Option<FileStamp>,
    loaded: bool,
    stats: HashStats,
}

impl HashCache {
    /// The cached hash of `path` when `key` matches and the file is not
    /// racy; and whether the cache holds an entry for `path` at all.
    pub(super) fn lookup(&mut self, path: &str, key: &StatKey, now: i64) -> (Option<String>, bool) {
        let Some(entry) = self.entries.get(path) else {
            return (None, false);
        };
        if key.mtime_ns > now.saturating_sub(RACY_NS) || entry.key != *key {
            return (None, true);
        }
        self.stats.cache_hits += 1;
        (Some(entry.sha256.clone()), true)
    }

    /// Remember a hash taken at `now`, unless the file was racy then.
    pub(super) fn insert(&mut self, path: &str, key: StatKey, sha256: String, now: i64) {
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
            self.entries.insert(path.into(), CacheEntry { key, sha256 });
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
        let Some(mut entries) = parse_cache(&bytes, &path) else {
            return;
        };
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
        let text = render_cache(&self.entries);
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
    /// `present` is how many of `seen` the cache holds (counted while
    /// looking them up): when that is every entry, nothing can be stale and
    /// the common case costs no scan at all.
    pub(super) fn prune_under<'a>(
        &self,
        root: &str,
        present: usize,
        seen: impl Iterator<Item = &'a str>,
    ) {
        self.with(|c| {
            let before = c.entries.len();
            if present == before {
                return;
            }
            let seen: HashSet<&str> = seen.collect();
            let prefix = format!("{}/", root.trim_end_matches('/'));
            c.entries
                .retain(|p, _| !p.starts_with(&prefix) || seen.contains(&**p));
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
