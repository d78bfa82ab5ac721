//! The sha256 cache of local files (spec/14, "Fingerprints are metadata-only,
//! except the first local one").
//!
//! A file's hash is trusted while its `(size, mtime_ns, ctime_ns, inode)`
//! stat key is unchanged: ctime too, because an overwrite that restores the
//! mtime cannot restore the ctime; the inode, because a replace-by-rename
//! makes a new one. One rule guards against timestamp granularity: a file
//! whose mtime is within [`RACY_NS`] (2 s) of now is re-read rather than
//! trusted, and such a "racy" hash is not stored either, since a second write
//! in the same timestamp granule would leave the key unchanged (the entry the
//! file had before stays, under a key it no longer has, until a settled hash
//! replaces it). Only hashes taken well after the file last changed are ever
//! vouched for.
//!
//! Caches are process-wide, one per cache file (plus one in memory for calls
//! with no dataset), so concurrent calls of one fan-out share entries instead
//! of overwriting each other's. The file is
//! `<dataset>/.tether/cache/file-hashes.json`:
//!
//! ```json
//! {"version":3,"files":[
//! [0,"/abs/real/dir/a.bin",size,mtime_ns,ctime_ns,inode,"<sha256 hex>"],
//! [16,"b.bin",size,mtime_ns,ctime_ns,inode,"<sha256 hex>"],
//! ...
//! ]}
//! ```
//!
//! keyed by absolute real path, so every object of a dataset shares one file.
//! It is one JSON document, but laid out one entry per line, strictly sorted
//! by path, behind a fixed header line, so it is read by a strict line parser
//! instead of a general JSON one. Each path is written as the number of bytes
//! it shares with the previous line's path (0 on the first line) and the
//! rest, so the tree's root, written once, is not repeated 100,000 times.
//! Anything that does not parse exactly (a bad line, a bad hash, a shared
//! length past the previous path, paths out of order, a missing end) makes
//! the whole file ignored, never half-trusted. Version 2 (every line a whole
//! path: `["/abs/path",size,...]`) and version 1 (`"files"` an object keyed
//! by path) are still read, and replaced by version 3 at the next write.
//!
//! In memory the entries are a map ordered by path, so a walk, whose files
//! come in path order, looks them all up in one merge pass.
//! It is rewritten atomically (temp file, fsync, rename) and only when an
//! entry changed, and re-read when another process rewrote it. Two processes
//! racing may drop each other's new entries: that costs a re-hash, never a
//! wrong hash. A cache file that does not parse is ignored and replaced.
//! A walk with hashing also forgets entries under its root that it no longer
//! saw, so deleted files do not accumulate.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::TreeError;
use crate::model::fsutil::FileStamp;

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
    /// Times the cache file was read and parsed.
    pub loads: u64,
    /// Directory summaries taken from the summary memo (`summaries`), each
    /// of whose files' hashes also counts as a cache hit.
    pub summaries_reused: u64,
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

/// Count a summary the memo gave for the cache at `cache`, which vouched
/// for `files` hashes, without loading the cache.
pub(super) fn record_summary_reused(cache: Option<&Path>, files: u64) {
    CacheHandle::unloaded(cache).with(|c| {
        c.stats.summaries_reused += 1;
        c.stats.cache_hits += files;
    });
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CacheEntry {
    key: StatKey,
    /// The raw digest: no allocation per entry.
    sha256: [u8; 32],
}

impl CacheEntry {
    /// An entry from a lowercase hex digest; `None` for anything else.
    fn new(key: StatKey, sha256_hex: &[u8]) -> Option<Self> {
        /// Each byte's value as a lowercase hex digit (the one spelling
        /// this module writes); 0xff for any other byte.
        const NIBBLE: [u8; 256] = {
            let mut t = [0xffu8; 256];
            let mut i = 0;
            while i < 16 {
                t[b"0123456789abcdef"[i] as usize] = i as u8;
                i += 1;
            }
            t
        };
        let hex: &[u8; 64] = sha256_hex.try_into().ok()?;
        let mut sha256 = [0u8; 32];
        let mut bad = 0u8;
        for (out, pair) in sha256.iter_mut().zip(hex.chunks_exact(2)) {
            let (hi, lo) = (NIBBLE[usize::from(pair[0])], NIBBLE[usize::from(pair[1])]);
            bad |= hi | lo;
            *out = (hi << 4) | lo;
        }
        // A valid digit is below 16: any 0xff sets the high bits.
        (bad < 16).then_some(Self { key, sha256 })
    }

    /// The digest as lowercase hex.
    fn sha256_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(64);
        for b in self.sha256 {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 15)]));
        }
        out
    }
}

/// The version-1 on-disk form: still read, never written.
#[derive(Deserialize)]
struct CacheFileV1 {
    version: u32,
    files: BTreeMap<String, (u64, i64, i64, u64, String)>,
}

/// The first line of a version-2 cache file (whole paths): still read.
const HEADER_V2: &[u8] = b"{\"version\":2,\"files\":[\n";
/// The first line of a version-3 cache file (module docs).
const HEADER_V3: &[u8] = b"{\"version\":3,\"files\":[\n";
/// The last line of both.
const FOOTER: &[u8] = b"]}\n";

/// By absolute real path, in byte order (a `str`: `Path`'s ordering goes
/// component by component).
type Entries = BTreeMap<Box<str>, CacheEntry>;

/// The entries of a cache file; `None` (with a log line) when it is not one
/// this build reads exactly.
fn parse_cache(bytes: &[u8], path: &Path) -> Option<Entries> {
    for (header, parse) in [
        (HEADER_V3, parse_v3 as fn(&[u8]) -> Option<Entries>),
        (HEADER_V2, parse_v2),
    ] {
        if let Some(body) = bytes.strip_prefix(header) {
            let parsed = parse(body);
            if parsed.is_none() {
                tracing::warn!(cache = %path.display(), "ignoring a corrupt hash cache");
            }
            return parsed;
        }
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
    let mut entries = Entries::new();
    for (p, (size, mtime_ns, ctime_ns, inode, sha256)) in parsed.files {
        let key = StatKey {
            size,
            mtime_ns,
            ctime_ns,
            inode,
        };
        entries.insert(p.into_boxed_str(), CacheEntry::new(key, sha256.as_bytes())?);
    }
    Some(entries)
}

/// The lines of a body (after the header): one entry per line, each followed
/// by `,` but the last, then the footer. `None` when the footer is missing.
fn body_lines(body: &[u8]) -> Option<impl Iterator<Item = Option<&[u8]>>> {
    let body = body.strip_suffix(FOOTER)?;
    let empty = body.is_empty();
    let body = if empty {
        body
    } else {
        body.strip_suffix(b"\n")?
    };
    let mut lines = body.split(|&b| b == b'\n').peekable();
    if empty {
        // No entries (`split` still yields one empty piece).
        lines.next();
    }
    Some(std::iter::from_fn(move || {
        let line = lines.next()?;
        Some(if lines.peek().is_some() {
            line.strip_suffix(b",")
        } else {
            Some(line)
        })
    }))
}

/// The lines after the version-2 header: `["path",size,mtime_ns,ctime_ns,inode,"sha256"]`.
fn parse_v2(body: &[u8]) -> Option<Entries> {
    let mut entries = Entries::new();
    for line in body_lines(body)? {
        let line = line?.strip_prefix(b"[")?.strip_suffix(b"]")?;
        let (path, rest) = json_string(line)?;
        if !path.starts_with('/') {
            return None;
        }
        let entry = parse_fields(rest)?;
        if entries
            .insert(path.into_owned().into_boxed_str(), entry)
            .is_some()
        {
            return None;
        }
    }
    Some(entries)
}

/// The lines after the version-3 header:
/// `[shared,"rest of path",size,mtime_ns,ctime_ns,inode,"sha256"]`, paths
/// strictly ascending.
fn parse_v3(body: &[u8]) -> Option<Entries> {
    let mut sorted: Vec<(Box<str>, CacheEntry)> = Vec::with_capacity(body.len() / 100);
    for line in body_lines(body)? {
        let line = line?.strip_prefix(b"[")?.strip_suffix(b"]")?;
        let comma = line.iter().position(|&b| b == b',')?;
        let digits = &line[..comma];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let shared: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        let (rest_of_path, rest) = json_string(&line[comma + 1..])?;
        let prev: &str = sorted.last().map_or("", |(p, _)| p);
        let head = prev.get(..shared)?;
        let mut path = String::with_capacity(shared + rest_of_path.len());
        path.push_str(head);
        path.push_str(&rest_of_path);
        if !path.starts_with('/') || path.as_str() <= prev {
            return None;
        }
        let entry = parse_fields(rest)?;
        // Exactly sized: no reallocation.
        sorted.push((path.into_boxed_str(), entry));
    }
    // Already sorted: the map is built in one pass.
    Some(sorted.into_iter().collect())
}

/// A JSON string at the start of `line`, and what follows it.
fn json_string(line: &[u8]) -> Option<(std::borrow::Cow<'_, str>, &[u8])> {
    // The path is the only field that may hold `,` or an escape: it ends at
    // the first unescaped quote.
    if line.first() == Some(&b'"') && !line.contains(&b'\\') {
        let end = 1 + line[1..].iter().position(|&b| b == b'"')?;
        let raw = std::str::from_utf8(&line[1..end]).ok()?;
        if raw.bytes().any(|b| b < 0x20) {
            return None;
        }
        Some((raw.into(), line.get(end + 1..)?))
    } else {
        let mut de = serde_json::Deserializer::from_slice(line).into_iter::<String>();
        let s = de.next()?.ok()?;
        let used = de.byte_offset();
        Some((s.into(), &line[used..]))
    }
}

/// `,size,mtime_ns,ctime_ns,inode,"sha256"` (the end of a line).
fn parse_fields(rest: &[u8]) -> Option<CacheEntry> {
    let mut fields = rest.strip_prefix(b",")?.splitn(5, |&b| b == b',');
    let mut number = || std::str::from_utf8(fields.next()?).ok();
    let size = number()?.parse().ok()?;
    let mtime_ns = number()?.parse().ok()?;
    let ctime_ns = number()?.parse().ok()?;
    let inode = number()?.parse().ok()?;
    let sha = fields.next()?.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    let key = StatKey {
        size,
        mtime_ns,
        ctime_ns,
        inode,
    };
    CacheEntry::new(key, sha)
}

/// `s` as a JSON string (serde_json escapes exactly what JSON requires).
fn push_json_string(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&serde_json::Value::from(s).to_string());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// The version-3 file of `entries` (module docs).
fn render_cache(entries: &Entries) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(HEADER_V3.len() + entries.len() * 140);
    out.push_str(std::str::from_utf8(HEADER_V3).unwrap_or_default());
    let mut prev: &str = "";
    for (i, (path, e)) in entries.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        let mut shared = prev
            .bytes()
            .zip(path.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !(prev.is_char_boundary(shared) && path.is_char_boundary(shared)) {
            shared -= 1;
        }
        let _ = write!(out, "[{shared},");
        push_json_string(&mut out, &path[shared..]);
        let k = &e.key;
        let _ = write!(
            out,
            ",{},{},{},{},\"{}\"]",
            k.size,
            k.mtime_ns,
            k.ctime_ns,
            k.inode,
            e.sha256_hex()
        );
        prev = path;
    }
    if !entries.is_empty() {
        out.push('\n');
    }
    out.push_str(std::str::from_utf8(FOOTER).unwrap_or_default());
    out.into_bytes()
}

/// `key` against the concatenation `prefix` + `rel`, without building it.
fn cmp_joined(key: &str, prefix: &str, rel: &str) -> std::cmp::Ordering {
    let (key, prefix) = (key.as_bytes(), prefix.as_bytes());
    let n = key.len().min(prefix.len());
    match key[..n].cmp(&prefix[..n]) {
        std::cmp::Ordering::Equal if key.len() < prefix.len() => std::cmp::Ordering::Less,
        std::cmp::Ordering::Equal => key[prefix.len()..].cmp(rel.as_bytes()),
        other => other,
    }
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
    /// The cached hashes of the files `prefix` + `rel` with stat `key`, in
    /// the order given: each one's hash when the cache vouches for it (its
    /// key matches and the file is not racy); and how many of them the cache
    /// holds an entry for at all. Files in ascending path order (a walk's)
    /// are looked up in one merge pass over the ordered entries; any other
    /// order is still right, each step back costing one tree search.
    pub(super) fn lookup_all<'a>(
        &mut self,
        prefix: &str,
        files: impl Iterator<Item = (&'a str, StatKey)>,
        now: i64,
    ) -> (Vec<Option<String>>, usize) {
        use std::cmp::Ordering::{Equal, Less};
        use std::ops::Bound;
        let racy_after = now.saturating_sub(RACY_NS);
        let mut found = Vec::with_capacity(files.size_hint().0);
        let mut held = 0;
        let from = |start: &str| {
            self.entries
                .range::<str, _>((Bound::Included(start), Bound::Unbounded))
                .peekable()
        };
        let mut cursor = None;
        let mut last: Option<&str> = None;
        for (rel, key) in files {
            // The first file, or a step back: a tree search.
            if last.is_some_and(|l| rel < l) {
                cursor = None;
            }
            last = Some(rel);
            let cursor = cursor.get_or_insert_with(|| from(&format!("{prefix}{rel}")));
            while cursor
                .peek()
                .is_some_and(|(p, _)| cmp_joined(p, prefix, rel) == Less)
            {
                cursor.next();
            }
            let entry = cursor
                .peek()
                .filter(|(p, _)| cmp_joined(p, prefix, rel) == Equal)
                .map(|(_, e)| *e);
            let Some(entry) = entry else {
                found.push(None);
                continue;
            };
            held += 1;
            if key.mtime_ns > racy_after || entry.key != key {
                found.push(None);
            } else {
                found.push(Some(entry.sha256_hex()));
            }
        }
        self.stats.cache_hits += found.iter().flatten().count() as u64;
        (found, held)
    }

    /// Remember a hash taken at `now`, unless the file was racy then.
    pub(super) fn insert(&mut self, path: &str, key: StatKey, sha256: &str, now: i64) {
        if key.mtime_ns > now.saturating_sub(RACY_NS) {
            // Not stored. An entry already there stays: it was vouched for
            // under an older stat key, which the file no longer has, so it
            // can only miss until a settled hash replaces it. Removing it
            // would rewrite the whole cache after every edit for nothing.
            return;
        }
        let Some(entry) = CacheEntry::new(key, sha256.as_bytes()) else {
            return;
        };
        if self.entries.get(path) != Some(&entry) {
            self.entries.insert(path.into(), entry);
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
        let stamp = FileStamp::of(&path);
        if self.loaded && stamp == self.stamp {
            return;
        }
        self.loaded = true;
        self.stamp = stamp;
        // Never through a link: `.tether/cache/` is clone-controlled ground.
        let Ok(bytes) = crate::model::fsutil::read_nofollow(&path) else {
            return;
        };
        self.stats.loads += 1;
        let Some(mut entries) = parse_cache(&bytes, &path) else {
            return;
        };
        // Lookups check the key against the file anyway, so keeping either
        // side's entry is safe; the file's is the newer one.
        for (p, e) in std::mem::take(&mut self.entries) {
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
        crate::model::fsutil::write_atomic(&path, &text)
            .map_err(|e| TreeError::Io(format!("cannot write the hash cache: {e}")))?;
        self.stamp = FileStamp::of(&path);
        self.dirty = false;
        self.stats.writes += 1;
        Ok(())
    }
}

/// The process-wide cache for one file (or memory), refreshed from disk.
#[derive(Debug, Clone)]
pub(crate) struct CacheHandle(Shared);

impl CacheHandle {
    pub(super) fn open(path: Option<&Path>) -> Result<Self, TreeError> {
        let handle = Self::unloaded(path);
        handle.with(HashCache::refresh);
        Ok(handle)
    }

    /// The cache as this process has it, without reading the file.
    fn unloaded(path: Option<&Path>) -> Self {
        let key = path.map(Path::to_path_buf);
        let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        let shared = registry
            .entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(HashCache {
                    path: key,
                    ..HashCache::default()
                }))
            })
            .clone();
        Self(shared)
    }

    pub(super) fn with<R>(&self, f: impl FnOnce(&mut HashCache) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Forget entries under `prefix` (a directory, ending in `/`) other
    /// than `prefix` + each of `seen` (files that are gone). `present` is how
    /// many of `seen` the cache holds (counted while looking them up): when
    /// that is every entry, nothing can be stale and the common case costs
    /// no scan at all.
    pub(super) fn prune_under<'a>(
        &self,
        prefix: &str,
        present: usize,
        seen: impl Iterator<Item = &'a str>,
    ) {
        self.with(|c| {
            let before = c.entries.len();
            if present == before {
                return;
            }
            let seen: HashSet<&str> = seen.collect();
            c.entries
                .retain(|p, _| p.strip_prefix(prefix).is_none_or(|rel| seen.contains(rel)));
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
