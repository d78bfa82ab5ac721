//! Host side of the WIT `tree` capability (`wit/tree.wit`): a native walk of
//! a granted local directory, `stat`, and sha256 of files with a stat cache.
//!
//! The `file` backend's state of a local directory is a digest over the
//! sha256 of every file in it. Hashing is bulk byte work, so it never happens
//! in the sandbox: the host walks the tree, hashes what its cache cannot vouch
//! for (in parallel, on OS threads), and hands the plugin pages of entries.
//! This module is plain Rust with no wasmtime types; `host.rs` is a thin layer
//! over it, running each operation on a blocking thread.
//!
//! # Grants
//!
//! [`TreeGrants`] come from the locator keys the plugin's descriptor names as
//! `tree-keys`: absolute local paths or `file://` URLs (anything else grants
//! nothing). A request is allowed when its path, lexically normalised, *is* a
//! granted path, or when its location (its parent directory resolved through
//! symlinks, plus its own name) lies under a granted path resolved through
//! symlinks. So `..` and directory symlinks cannot lead out of a grant, while
//! the granted path itself may be a symlink (the locator names it). The last
//! component is not followed for the check: a symlink the user placed inside a
//! granted directory is part of the data, and the spec reads file symlinks
//! through (only a size and a sha256 of the target ever cross the boundary).
//!
//! # Symlinks (spec/11 `file`, Notes)
//!
//! The host applies the *filesystem* half of the rules: the walk never
//! descends into a symlinked directory, and for a symlink it reports
//! `link-target` (the `readlink` text) and, when the link resolves to a
//! regular file, the target's size, stat key and (when hashing) sha256. A
//! dangling link, or one to a directory or anything else, has size 0 and no
//! sha256. The plugin applies the *state* half: a link with a sha256 is a file
//! read through, any other link is recorded by its target.
//!
//! # Order and pages
//!
//! Entries are ordered by their *key*: the relative path, plus a trailing `/`
//! for a real directory. That is the order of a depth-first walk whose
//! siblings are sorted the same way, so a directory's contents directly follow
//! it and the order is total and stable. A page's `next` cursor is the key of
//! its last entry. The first page of a walk walks (and hashes) the whole tree
//! once and keeps it for the rest of the plugin call, so later pages are
//! slices, not walks: a 100,000-file tree is read once however many pages it
//! takes. A cursor from another call still works (the walk is redone and the
//! cursor found by binary search).
//!
//! Skipped: the `.tether-owner` marker at the walk's root (a created store
//! fingerprints as empty), `.tether-tmp-*` names anywhere (atomic writes in
//! flight, see `storage`), and anything that is not a file, directory or
//! symlink (a FIFO would block a reader). A name that is not UTF-8 cannot
//! cross the boundary as a string and fails the walk with `invalid`.
//!
//! # The hash cache
//!
//! See the `cache` module: keyed per absolute path by `(size, mtime_ns, ctime_ns,
//! inode)`, kept in the dataset's `.tether/cache/file-hashes.json` when the
//! call names one, in memory (per process) otherwise; a file modified within
//! two seconds of now is always re-read.

mod cache;
mod digested;
pub mod progress;
mod summaries;
#[cfg(test)]
mod tests;

use std::fs::Metadata;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

// The prefix of in-flight atomic writes (storage and model): the walk skips it.
use crate::model::fsutil::TEMP_PREFIX;
use cache::{CacheHandle, StatKey};
pub use cache::{HashStats, stats};
use digested::walk_digested;
use progress::HashTask;

/// The owner marker `create` writes at a store's root; the walk skips it.
pub const OWNER_MARKER: &str = ".tether-owner";

/// Most entries one page holds, whatever `limit` asks for.
pub const MAX_WALK_PAGE: u32 = 10_000;

/// Why a tree call failed; mirrors WIT `tree-error`. Messages name the path,
/// since they are all the plugin sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The path is not granted to this call.
    #[error("path access denied: {0}")]
    Denied(String),
    /// The path does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A malformed request (a relative path, a zero page size, ...) or an
    /// entry of the wrong kind.
    #[error("invalid tree request: {0}")]
    Invalid(String),
    /// The filesystem failed.
    #[error("tree I/O error: {0}")]
    Io(String),
}

fn io_error(what: &str, path: &Path, e: &io::Error) -> TreeError {
    let msg = format!("{what} {}: {e}", path.display());
    if e.kind() == io::ErrorKind::NotFound {
        TreeError::NotFound(msg)
    } else {
        TreeError::Io(msg)
    }
}

/// `root` resolved, when it is a directory: cache keys are absolute real
/// paths, so every spelling of a root shares entries.
fn real_dir(root: &Path) -> Result<PathBuf, TreeError> {
    let md = std::fs::metadata(root).map_err(|e| io_error("cannot walk", root, &e))?;
    if !md.is_dir() {
        return Err(TreeError::Invalid(format!(
            "cannot walk {}: not a directory",
            root.display()
        )));
    }
    std::fs::canonicalize(root).map_err(|e| io_error("cannot walk", root, &e))
}

/// `real` (the resolved `root`) as text, as cache keys spell it.
fn utf8_root<'a>(root: &Path, real: &'a Path) -> Result<&'a str, TreeError> {
    real.to_str().ok_or_else(|| {
        TreeError::Invalid(format!(
            "{} resolves to {:?}, which is not UTF-8",
            root.display(),
            real.as_os_str()
        ))
    })
}

/// Whether the walk of `real` hashes `e`: a file, or a symlink read through
/// to one (the walk gave it a size and stat key only then; `is_file`
/// re-checks).
fn readable(real: &Path, e: &Entry) -> bool {
    match e.kind {
        EntryKind::File => true,
        EntryKind::Symlink => e.link_target.is_some() && real.join(&e.path).is_file(),
        EntryKind::Dir => false,
    }
}

/// What an entry is. Special files are never reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

/// One walked (or stat'ed) entry; mirrors WIT `entry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the walk's root, `/`-separated; for `stat`, the path asked.
    pub path: String,
    pub kind: EntryKind,
    /// Bytes: the file's, a file symlink's target's; 0 for directories and
    /// other symlinks.
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
    /// `readlink` of a symlink.
    pub link_target: Option<String>,
    /// Lowercase hex sha256 of the content (a file symlink's target's), when
    /// hashing was asked for.
    pub sha256: Option<String>,
}

impl Entry {
    /// The sort key: the path, with `/` appended for a real directory.
    fn key(&self) -> String {
        if self.kind == EntryKind::Dir {
            format!("{}/", self.path)
        } else {
            self.path.clone()
        }
    }

    fn stat_key(&self) -> StatKey {
        StatKey {
            size: self.size,
            mtime_ns: self.mtime_ns,
            ctime_ns: self.ctime_ns,
            inode: self.inode,
        }
    }
}

/// One page of a walk; pass `next` back as the cursor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkPage {
    pub entries: Vec<Entry>,
    pub next: Option<String>,
}

/// How to walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkOptions {
    /// Fill in `sha256` of files and file symlinks.
    pub hash: bool,
    /// The `next` of the previous page; `None` for the first.
    pub cursor: Option<String>,
    /// Entries per page, at most [`MAX_WALK_PAGE`].
    pub limit: u32,
}

/// A directory's content under the `file` backend's recipe (WIT
/// `summarize`): its entries are its files (a symlink read through counts as
/// a file) with their sha256 as token, and its other symlinks with token
/// `symlink:<target>` and size 0; directories are not entries. In byte order
/// of path:
///
/// - `count`: the number of entries; `size`: the sum of their sizes;
/// - `digest`: lowercase hex sha256 of `path "\0" token "\n"` per entry;
/// - `listing` (when asked): `{"k":token,"p":path,"s":size}` per entry, one
///   canonical JSON line each (keys sorted, serde_json's string escaping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub size: u64,
    pub digest: String,
    pub listing: Option<String>,
}

/// Token prefix of a symlink recorded by its target (the `file` recipe).
const SYMLINK_TOKEN: &str = "symlink:";

impl Summary {
    /// The summary of a hashed walk's entries (in any order).
    fn of(entries: Vec<Entry>, listing: bool) -> Result<Self, TreeError> {
        let mut items: Vec<(String, String, u64)> = Vec::with_capacity(entries.len());
        for e in entries {
            match (e.kind, e.sha256) {
                (EntryKind::File | EntryKind::Symlink, Some(sha)) => {
                    items.push((e.path, sha, e.size));
                }
                (EntryKind::Symlink, None) => {
                    let target = e.link_target.unwrap_or_default();
                    items.push((e.path, format!("{SYMLINK_TOKEN}{target}"), 0));
                }
                (EntryKind::File, None) => {
                    return Err(TreeError::Io(format!(
                        "{}: no sha256 after hashing",
                        e.path
                    )));
                }
                (EntryKind::Dir, _) => {}
            }
        }
        // Key order already is path order for these; sorting keeps the recipe
        // independent of that detail (and costs one pass when sorted).
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let mut h = Sha256::new();
        let mut size = 0u64;
        for (path, token, n) in &items {
            h.update(path.as_bytes());
            h.update([0]);
            h.update(token.as_bytes());
            h.update(b"\n");
            size = size.wrapping_add(*n);
        }
        let listing = listing.then(|| {
            use std::fmt::Write as _;
            let mut out = String::with_capacity(items.len() * 120);
            for (path, token, n) in &items {
                out.push_str("{\"k\":");
                push_json_string(&mut out, token);
                out.push_str(",\"p\":");
                push_json_string(&mut out, path);
                let _ = writeln!(out, ",\"s\":{n}}}");
            }
            out
        });
        Ok(Self {
            count: items.len() as u64,
            size,
            digest: hex::encode(h.finalize()),
            listing,
        })
    }
}

/// `s` as a JSON string with serde_json's escaping (the canonical one).
fn push_json_string(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&serde_json::Value::from(s).to_string());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// A granted path: as the locator spelled it (normalised) and resolved.
#[derive(Debug, Clone)]
struct Grant {
    lexical: PathBuf,
    real: PathBuf,
}

/// The local paths one plugin call may walk, stat and hash.
#[derive(Debug, Clone, Default)]
pub struct TreeGrants {
    granted: Vec<Grant>,
}

impl TreeGrants {
    /// Grants from locator values. A value that is not an absolute local path
    /// or `file://` URL (relative, `s3://...`) grants nothing.
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        let granted = paths
            .into_iter()
            .filter_map(|p| normalise(&p).ok())
            .map(|lexical| Grant {
                real: resolve(&lexical),
                lexical,
            })
            .collect();
        Self { granted }
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.granted.is_empty()
    }

    /// Normalise `path` and check it is granted (module docs); the normalised
    /// path to operate on.
    pub fn check(&self, path: &str) -> Result<PathBuf, TreeError> {
        self.check_with(path, locate)
    }

    /// Like [`check`](Self::check), but judging the path with its last
    /// component resolved too: for a walk, which follows a symlink at its
    /// root, so a directory symlink inside a grant cannot be walked through.
    pub fn check_resolved(&self, path: &str) -> Result<PathBuf, TreeError> {
        self.check_with(path, resolve)
    }

    fn check_with(
        &self,
        path: &str,
        locate: impl Fn(&Path) -> PathBuf,
    ) -> Result<PathBuf, TreeError> {
        let lexical = normalise(path)?;
        if self.granted.iter().any(|g| g.lexical == lexical) {
            return Ok(lexical);
        }
        let located = locate(&lexical);
        if self.granted.iter().any(|g| located.starts_with(&g.real)) {
            return Ok(lexical);
        }
        let shown = if located.as_os_str() == path {
            format!("{path:?}")
        } else {
            format!("{path:?} (resolved: {:?})", located.display().to_string())
        };
        Err(TreeError::Denied(format!(
            "local path {shown} is not granted to this call: the object's locator does not name it"
        )))
    }
}

/// An absolute local path or `file://` URL with `.`, `..`, doubled and
/// trailing slashes resolved lexically (POSIX: `..` at `/` stays at `/`).
pub fn normalise(path: &str) -> Result<PathBuf, TreeError> {
    if path.contains('\0') {
        return Err(TreeError::Invalid(format!(
            "path {path:?} contains a NUL byte"
        )));
    }
    let raw = if let Some(rest) = path.strip_prefix("file://") {
        // `file:///p` and `file://localhost/p` name the local path `/p`.
        rest.strip_prefix("localhost").unwrap_or(rest)
    } else if let Some((scheme, _)) = path.split_once("://") {
        return Err(TreeError::Invalid(format!(
            "{path:?} is a {scheme}:// URI, not a local path"
        )));
    } else {
        path
    };
    if !raw.starts_with('/') {
        return Err(TreeError::Invalid(format!(
            "path {path:?} is relative; local paths must be absolute"
        )));
    }
    let mut out = PathBuf::from("/");
    for c in Path::new(raw).components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

/// `path` with every symlink resolved; a missing tail is appended as is, so a
/// path that does not exist yet still resolves (a store `create` will make).
pub fn resolve(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path.to_path_buf();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(mut real) => {
                for name in missing.iter().rev() {
                    real.push(name);
                }
                return real;
            }
            Err(_) => match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    missing.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => return path.to_path_buf(),
            },
        }
    }
}

/// Where an entry lives: its parent resolved, plus its own name unresolved.
fn locate(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolve(parent).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(unix)]
fn times(md: &Metadata) -> (i64, i64, u64) {
    use std::os::unix::fs::MetadataExt;
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    (
        ns(md.mtime(), md.mtime_nsec()),
        ns(md.ctime(), md.ctime_nsec()),
        md.ino(),
    )
}

#[cfg(not(unix))]
fn times(md: &Metadata) -> (i64, i64, u64) {
    // No ctime or inode here: the key degrades to (size, mtime).
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    (mtime, 0, 0)
}

/// Describe the entry at `abs` from its `lstat` metadata, as the walk reports
/// it (module docs, Symlinks). `None` for special files.
fn describe(abs: &Path, path: String, lmd: &Metadata) -> Result<Option<Entry>, TreeError> {
    let ft = lmd.file_type();
    let (kind, md, link_target) = if ft.is_symlink() {
        let target = std::fs::read_link(abs).map_err(|e| io_error("readlink", abs, &e))?;
        let target = target.to_str().map(str::to_string).ok_or_else(|| {
            TreeError::Invalid(format!(
                "symlink {} has a target that is not UTF-8",
                abs.display()
            ))
        })?;
        // Read through to a regular file; anything else is recorded by target.
        let followed = std::fs::metadata(abs).ok().filter(Metadata::is_file);
        (EntryKind::Symlink, followed, Some(target))
    } else if ft.is_file() {
        (EntryKind::File, Some(lmd.clone()), None)
    } else if ft.is_dir() {
        (EntryKind::Dir, None, None)
    } else {
        return Ok(None);
    };
    let entry = match md {
        Some(md) => {
            let (mtime_ns, ctime_ns, inode) = times(&md);
            Entry {
                path,
                kind,
                size: md.len(),
                mtime_ns,
                ctime_ns,
                inode,
                link_target,
                sha256: None,
            }
        }
        None => {
            let (mtime_ns, ctime_ns, inode) = times(lmd);
            Entry {
                path,
                kind,
                size: 0,
                mtime_ns,
                ctime_ns,
                inode,
                link_target,
                sha256: None,
            }
        }
    };
    Ok(Some(entry))
}

/// Every entry under `root` (a real directory), in key order.
///
/// Directories are listed level by level, each level's directories in
/// parallel on scoped threads; each child is `lstat`ed relative to its
/// directory's descriptor (no full-path lookup per file), and a
/// subdirectory is opened with `O_NOFOLLOW`, so a directory swapped for a
/// symlink mid-walk fails the walk instead of leading out of it. The levels
/// are then stitched together depth-first in key order.
#[cfg(unix)]
fn walk_all(root: &Path) -> Result<Vec<Entry>, TreeError> {
    let listed = walk_levels(root, list_dir, |children, next| {
        next.extend(
            children
                .iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| e.path.clone()),
        );
    })?;
    Ok(stitch(listed.into_iter().collect()))
}

/// Every directory under `root`, scanned by `scan` (given `root` and the
/// directory's `rel` path) level by level, each level's directories in
/// parallel; `subdirs` adds the `rel` paths a scan found to descend into.
/// Each scan comes with its directory's `rel` path, parents first.
#[cfg(unix)]
fn walk_levels<D: Send>(
    root: &Path,
    scan: impl Fn(&Path, &str) -> Result<D, TreeError> + Sync,
    subdirs: impl Fn(&D, &mut Vec<String>),
) -> Result<Vec<(String, D)>, TreeError> {
    let mut done = Vec::new();
    let mut level: Vec<String> = vec![String::new()];
    while !level.is_empty() {
        let results = parallel_map(&level, |rel| scan(root, rel));
        let mut next = Vec::new();
        for (rel, scanned) in level.into_iter().zip(results) {
            let scanned = scanned?;
            subdirs(&scanned, &mut next);
            done.push((rel, scanned));
        }
        level = next;
    }
    Ok(done)
}

/// The listings of a walk's directories (by `rel` path), joined depth-first:
/// each directory followed by its own contents.
#[cfg(unix)]
fn stitch(mut listed: std::collections::HashMap<String, Vec<Entry>>) -> Vec<Entry> {
    let mut out = Vec::with_capacity(listed.values().map(Vec::len).sum());
    // Iterative, so a very deep tree cannot overflow the stack.
    let mut stack: Vec<std::vec::IntoIter<Entry>> =
        vec![listed.remove("").unwrap_or_default().into_iter()];
    while let Some(top) = stack.last_mut() {
        let Some(entry) = top.next() else {
            stack.pop();
            continue;
        };
        let sub = (entry.kind == EntryKind::Dir).then(|| entry.path.clone());
        out.push(entry);
        if let Some(sub) = sub {
            stack.push(listed.remove(&sub).unwrap_or_default().into_iter());
        }
    }
    out
}

/// `f` over `items` on up to `available_parallelism` scoped threads; results
/// in input order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = Vec::new();
    results.resize_with(items.len(), || None);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            match worker.join() {
                Ok(done) => {
                    for (i, r) in done {
                        results[i] = Some(r);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    results.into_iter().flatten().collect()
}

/// One child of a directory, as [`scan_dir`] reads it.
#[cfg(unix)]
struct Child<'a> {
    name: &'a str,
    kind: EntryKind,
    /// A file's size and stat key, or a symlink's target's when that is a
    /// regular file (`followed`); else size 0 and the entry's own stat key.
    size: u64,
    key: (i64, i64, u64),
    link_target: Option<String>,
    followed: bool,
}

/// Each child of the directory `rel` under `root` (module docs: what the
/// walk skips, symlinks), in directory order.
#[cfg(unix)]
fn scan_dir(root: &Path, rel: &str, mut each: impl FnMut(Child<'_>)) -> Result<(), TreeError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};

    let abs = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let cannot_read = |e: rustix::io::Errno| io_error("cannot read directory", &abs, &e.into());
    let fd = rustix::fs::open(
        &abs,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(cannot_read)?;
    // The names first, in one buffer: the directory stream is read to its
    // end before anything is stat'ed.
    let mut names = String::new();
    let mut ends: Vec<usize> = Vec::new();
    for item in rustix::fs::Dir::read_from(&fd).map_err(cannot_read)? {
        let item = item.map_err(cannot_read)?;
        let raw = item.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        let name = std::str::from_utf8(raw).map_err(|_| {
            let raw = std::ffi::OsStr::from_bytes(raw);
            TreeError::Invalid(format!("{}: the name {raw:?} is not UTF-8", abs.display()))
        })?;
        if name.starts_with(TEMP_PREFIX) || (rel.is_empty() && name == OWNER_MARKER) {
            continue;
        }
        names.push_str(name);
        ends.push(names.len());
    }
    let mut start = 0;
    for end in ends {
        let name = &names[start..end];
        start = end;
        let child_abs = || abs.join(name);
        let st = match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Deleted since the listing: it is simply not there any more.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io_error("cannot stat", &child_abs(), &e.into())),
        };
        let (kind, md, link_target) = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => (EntryKind::File, Some(st), None),
            FileType::Directory => (EntryKind::Dir, None, None),
            FileType::Symlink => {
                let target = match rustix::fs::readlinkat(&fd, name, Vec::new()) {
                    Ok(t) => t,
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(e) => return Err(io_error("cannot read link", &child_abs(), &e.into())),
                };
                let target = target.into_string().map_err(|_| {
                    TreeError::Invalid(format!(
                        "symlink {} has a target that is not UTF-8",
                        child_abs().display()
                    ))
                })?;
                // Read through to a regular file; anything else is recorded by target.
                let followed = rustix::fs::statat(&fd, name, AtFlags::empty())
                    .ok()
                    .filter(|t| FileType::from_raw_mode(t.st_mode) == FileType::RegularFile);
                (EntryKind::Symlink, followed, Some(target))
            }
            // FIFOs, sockets, devices: never reported.
            _ => continue,
        };
        let followed = kind == EntryKind::Symlink && md.is_some();
        let (size, key) = match md {
            Some(md) => (stat_size(&md), stat_times(&md)),
            None => (0, stat_times(&st)),
        };
        each(Child {
            name,
            kind,
            size,
            key,
            link_target,
            followed,
        });
    }
    Ok(())
}

/// `rel/name`, or `name` at the root.
fn child_path(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        let mut path = String::with_capacity(rel.len() + 1 + name.len());
        path.push_str(rel);
        path.push('/');
        path.push_str(name);
        path
    }
}

/// The direct children of the directory `rel` under `root`, sorted by key.
#[cfg(unix)]
fn list_dir(root: &Path, rel: &str) -> Result<Vec<Entry>, TreeError> {
    let mut out = Vec::new();
    scan_dir(root, rel, |c| {
        out.push(child_entry(
            rel,
            c.name,
            c.kind,
            c.size,
            c.key,
            c.link_target,
        ));
    })?;
    sort_siblings(&mut out, rel);
    Ok(out)
}

/// The entry of the child `name` of the directory `rel`.
#[cfg(unix)]
fn child_entry(
    rel: &str,
    name: &str,
    kind: EntryKind,
    size: u64,
    (mtime_ns, ctime_ns, inode): (i64, i64, u64),
    link_target: Option<String>,
) -> Entry {
    Entry {
        path: child_path(rel, name),
        kind,
        size,
        mtime_ns,
        ctime_ns,
        inode,
        link_target,
        sha256: None,
    }
}

/// Sort the children of the directory `rel` by key: siblings by name, a
/// directory's as `name/` (module docs, Order).
fn sort_siblings(children: &mut [Entry], rel: &str) {
    // Siblings share `rel/`, so their names start at one offset.
    let skip = if rel.is_empty() { 0 } else { rel.len() + 1 };
    children.sort_unstable_by(|a, b| sibling_order(a, b, skip));
}

#[cfg(unix)]
use std::os::unix::ffi::OsStrExt as _;

#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // the field types differ between targets
fn stat_size(st: &rustix::fs::Stat) -> u64 {
    u64::try_from(st.st_size as i64).unwrap_or(0)
}

/// `(mtime_ns, ctime_ns, inode)`, as [`times`] computes them from `Metadata`.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // the field types differ between targets
fn stat_times(st: &rustix::fs::Stat) -> (i64, i64, u64) {
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    (
        ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
        ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        st.st_ino as u64,
    )
}

#[cfg(not(unix))]
fn walk_all(root: &Path) -> Result<Vec<Entry>, TreeError> {
    let mut out = Vec::new();
    walk_dir(root, "", &mut out)?;
    Ok(out)
}

#[cfg(not(unix))]
fn walk_dir(dir: &Path, rel: &str, out: &mut Vec<Entry>) -> Result<(), TreeError> {
    let reader = std::fs::read_dir(dir).map_err(|e| io_error("cannot read directory", dir, &e))?;
    let mut children: Vec<Entry> = Vec::new();
    for item in reader {
        let item = item.map_err(|e| io_error("cannot read directory", dir, &e))?;
        let name = item.file_name().into_string().map_err(|raw| {
            TreeError::Invalid(format!("{}: the name {raw:?} is not UTF-8", dir.display()))
        })?;
        if name.starts_with(TEMP_PREFIX) || (rel.is_empty() && name == OWNER_MARKER) {
            continue;
        }
        let abs = dir.join(&name);
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let lmd = match std::fs::symlink_metadata(&abs) {
            Ok(md) => md,
            // Deleted since the listing: it is simply not there any more.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error("cannot stat", &abs, &e)),
        };
        if let Some(entry) = describe(&abs, path, &lmd)? {
            children.push(entry);
        }
    }
    sort_siblings(&mut children, rel);
    for entry in children {
        let sub = (entry.kind == EntryKind::Dir).then(|| entry.path.clone());
        out.push(entry);
        if let Some(sub) = sub {
            walk_dir(&dir.join(sub.rsplit('/').next().unwrap_or(&sub)), &sub, out)?;
        }
    }
    Ok(())
}

/// Siblings sort by name, a directory's as `name/` (module docs, Order): by
/// the last component of each entry's key, which starts at byte `skip` of
/// their paths.
fn sibling_order(a: &Entry, b: &Entry, skip: usize) -> std::cmp::Ordering {
    fn key(e: &Entry, skip: usize) -> impl Iterator<Item = u8> + '_ {
        let name = e.path.as_bytes().get(skip..).unwrap_or_default();
        let slash: &[u8] = if e.kind == EntryKind::Dir { b"/" } else { b"" };
        name.iter().chain(slash).copied()
    }
    let (na, nb) = (
        a.path.as_bytes().get(skip..).unwrap_or_default(),
        b.path.as_bytes().get(skip..).unwrap_or_default(),
    );
    // Names differ before either ends in the common case: one memcmp.
    let common = na.len().min(nb.len());
    match na[..common].cmp(&nb[..common]) {
        std::cmp::Ordering::Equal => key(a, skip).cmp(key(b, skip)),
        other => other,
    }
}

/// SHA-256 of a file's content (following a final symlink), lowercase hex.
fn hash_file(path: impl AsRef<Path>, task: Option<&dyn HashTask>) -> io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
        if let Some(task) = task {
            task.advance(n as u64);
        }
    }
    Ok((hex::encode(hasher.finalize()), total))
}

/// Hash `paths` on up to `available_parallelism` scoped threads, one file per
/// thread at a time, reporting the bytes read to `task`; results in input
/// order. A panic while hashing is a bug; it fails that file as an I/O error
/// rather than the whole walk.
fn hash_parallel(paths: &[String], task: Option<&dyn HashTask>) -> Vec<io::Result<(String, u64)>> {
    parallel_map(paths, |path| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hash_file(path, task)))
            .unwrap_or_else(|_| Err(io::Error::other("hashing thread panicked")))
    })
}

/// A whole walk, kept for the rest of the call so later pages are slices.
#[derive(Debug)]
struct WalkSession {
    root: PathBuf,
    hash: bool,
    entries: Vec<Entry>,
}

/// Everything the `tree` capability can do for one plugin call: its grants,
/// its hash cache, and the walk it is paging through. Cheap to clone (each
/// operation runs on a blocking thread with a clone).
#[derive(Debug, Clone, Default)]
pub struct Tree {
    inner: Arc<TreeInner>,
}

#[derive(Debug, Default)]
struct TreeInner {
    grants: TreeGrants,
    cache: Option<PathBuf>,
    session: Mutex<Option<Arc<WalkSession>>>,
}

impl Tree {
    /// The capability for one call: `grants`, and the dataset's
    /// `.tether/cache/file-hashes.json` (`None`: the process's memory cache).
    pub fn new(grants: TreeGrants, cache: Option<PathBuf>) -> Self {
        Self {
            inner: Arc::new(TreeInner {
                grants,
                cache,
                session: Mutex::new(None),
            }),
        }
    }

    /// The granted paths, as spelled and as resolved when granted: part of
    /// what decides whether two objects may share an instance (`client.rs`).
    pub(crate) fn granted(&self) -> Vec<(PathBuf, PathBuf)> {
        self.inner
            .grants
            .granted
            .iter()
            .map(|g| (g.lexical.clone(), g.real.clone()))
            .collect()
    }

    /// The hash cache file this call uses, if any.
    pub fn cache_path(&self) -> Option<&Path> {
        self.inner.cache.as_deref()
    }

    fn cache(&self) -> Result<CacheHandle, TreeError> {
        CacheHandle::open(self.inner.cache.as_deref())
    }

    /// One page of the walk of `root` (a granted directory; a symlink to one
    /// is followed at the root only, and only when the locator names the
    /// symlink or its target is granted).
    pub fn walk(&self, root: &str, options: &WalkOptions) -> Result<WalkPage, TreeError> {
        if options.limit == 0 {
            return Err(TreeError::Invalid("walk limit must be at least 1".into()));
        }
        let root = self.inner.grants.check_resolved(root)?;
        let limit = options.limit.min(MAX_WALK_PAGE) as usize;
        let session = match (&options.cursor, self.session_for(&root, options.hash)) {
            (Some(_), Some(session)) => session,
            _ => {
                let session = Arc::new(self.walk_session(&root, options.hash)?);
                *self.inner.session.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(session.clone());
                session
            }
        };
        let entries = &session.entries;
        let start = match &options.cursor {
            None => 0,
            Some(cursor) => entries.partition_point(|e| e.key().as_str() <= cursor.as_str()),
        };
        let end = (start + limit).min(entries.len());
        let page = entries[start..end].to_vec();
        let next = (end < entries.len()).then(|| entries[end - 1].key());
        Ok(WalkPage {
            entries: page,
            next,
        })
    }

    /// The content summary of the directory at `root` (granted as for
    /// [`walk`](Self::walk)), with its listing when `listing`: the whole
    /// hashed walk, reduced natively, so no entry crosses the boundary.
    /// Without a listing, a walk that matches the one a remembered summary
    /// was made from gets that summary, and the hash cache is not read
    /// (the `summaries` module).
    pub fn summarize(&self, root: &str, listing: bool) -> Result<Summary, TreeError> {
        let root = self.inner.grants.check_resolved(root)?;
        if listing {
            let session = self.walk_session(&root, true)?;
            return Summary::of(session.entries, true);
        }
        let real = real_dir(&root)?;
        let key = utf8_root(&root, &real)?;
        let memo = summaries::Memo::beside(self.inner.cache.as_deref());
        // Taken before the walk: against an earlier `now` a file is racy
        // sooner, never later.
        let now = cache::now_ns();
        let racy_after = now.saturating_sub(cache::RACY_NS);
        let (entries, seen) = match memo.recall(key) {
            // Something is remembered, so the walk probably matches: the
            // hash cache is loaded only when it does not.
            Some(recalled) => {
                let walked = walk_digested(&real, racy_after)?;
                if walked.seen.walk == recalled.walk && !walked.seen.racy {
                    cache::record_summary_reused(self.inner.cache.as_deref(), recalled.hashed);
                    return Ok(recalled.summary);
                }
                let (entries, seen) = walked.into_parts();
                let cache = self.cache()?;
                (self.hash_walked(&root, &real, entries, &cache)?, seen)
            }
            None => self.hashed_walk(&root, &real, |real| {
                Ok(walk_digested(real, racy_after)?.into_parts())
            })?,
        };
        let hashed = entries.iter().filter(|e| e.sha256.is_some()).count() as u64;
        let summary = Summary::of(entries, false)?;
        // The walk saw every hashed file's mtime: none may be racy.
        if !seen.racy {
            memo.remember(key, seen.walk, hashed, &summary, now);
        }
        Ok(summary)
    }

    fn session_for(&self, root: &Path, hash: bool) -> Option<Arc<WalkSession>> {
        let guard = self.inner.session.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|s| s.root == root && s.hash == hash)
            .cloned()
    }

    fn walk_session(&self, root: &Path, hash: bool) -> Result<WalkSession, TreeError> {
        let real = real_dir(root)?;
        let entries = if hash {
            self.hashed_walk(root, &real, |real| Ok((walk_all(real)?, ())))?
                .0
        } else {
            walk_all(&real)?
        };
        Ok(WalkSession {
            root: root.to_path_buf(),
            hash,
            entries,
        })
    }

    /// The entries `walk` finds in `real` (the resolved `root`), with what
    /// else it returns, and every file's sha256.
    fn hashed_walk<W: Send>(
        &self,
        root: &Path,
        real: &Path,
        walk: impl FnOnce(&Path) -> Result<(Vec<Entry>, W), TreeError> + Send,
    ) -> Result<(Vec<Entry>, W), TreeError> {
        // The hash cache is read and parsed while the tree is walked: the
        // walk waits on the kernel, the parse on one core.
        let (walked, cache) = std::thread::scope(|scope| {
            let cache = scope.spawn(|| self.cache());
            let walked = walk(real);
            let cache = cache
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (walked, cache)
        });
        let ((entries, other), cache) = (walked?, cache?);
        Ok((self.hash_walked(root, real, entries, &cache)?, other))
    }

    /// Fill the sha256 of the files of `entries` (a walk of `real`) through
    /// `cache`, forget the cache's entries of files no longer there, and
    /// write it when it changed.
    fn hash_walked(
        &self,
        root: &Path,
        real: &Path,
        mut entries: Vec<Entry>,
        cache: &CacheHandle,
    ) -> Result<Vec<Entry>, TreeError> {
        let started = std::time::Instant::now();
        // Cache keys are `prefix` + each entry's path; the walk's files
        // come in that order, so the lookups are one merge pass and no
        // absolute path is built for a file the cache vouches for.
        let prefix = format!("{}/", utf8_root(root, real)?.trim_end_matches('/'));
        let readable: Vec<bool> = entries.iter().map(|e| readable(real, e)).collect();
        let present = self.fill_hashes(cache, &mut entries, &prefix, &readable)?;
        let seen = entries
            .iter()
            .zip(&readable)
            .filter(|(_, r)| **r)
            .map(|(e, _)| e.path.as_str());
        cache.prune_under(&prefix, present, seen);
        cache.flush()?;
        tracing::debug!(
            root = %real.display(),
            entries = entries.len(),
            hash_ms = started.elapsed().as_secs_f64() * 1e3,
            "tree walk hashed"
        );
        Ok(entries)
    }

    /// Fill `sha256` of each `readable` entry, whose file is `prefix` +
    /// its path: from the cache when it vouches for the stat key, else by
    /// reading (in parallel). Returns how many of them the cache held an
    /// entry for (before this call).
    fn fill_hashes(
        &self,
        cache: &CacheHandle,
        entries: &mut [Entry],
        prefix: &str,
        readable: &[bool],
    ) -> Result<usize, TreeError> {
        let now = cache::now_ns();
        let wanted: Vec<usize> = (0..entries.len()).filter(|&i| readable[i]).collect();
        let (found, present) = cache.with(|c| {
            let files = wanted
                .iter()
                .map(|&i| (entries[i].path.as_str(), entries[i].stat_key()));
            c.lookup_all(prefix, files, now)
        });
        let mut misses: Vec<usize> = Vec::new();
        for (&i, hit) in wanted.iter().zip(found) {
            match hit {
                Some(sha) => entries[i].sha256 = Some(sha),
                None => misses.push(i),
            }
        }
        if misses.is_empty() {
            return Ok(present);
        }
        let paths: Vec<String> = misses
            .iter()
            .map(|&i| format!("{prefix}{}", entries[i].path))
            .collect();
        // What is read: a directory (`prefix`), or the one file asked for.
        let what = match prefix.trim_end_matches('/') {
            "" => paths.first().map_or("", String::as_str),
            dir => dir,
        };
        let size = misses.iter().map(|&i| entries[i].size).sum();
        let task = progress::start(what, misses.len() as u64, size);
        let hashed = hash_parallel(&paths, task.as_deref());
        drop(task);
        let mut bytes = 0u64;
        for ((&i, path), result) in misses.iter().zip(&paths).zip(hashed) {
            let (sha, n) = result.map_err(|e| io_error("cannot read", Path::new(path), &e))?;
            bytes += n;
            entries[i].sha256 = Some(sha);
        }
        cache.with(|c| {
            c.record_hashed(misses.len() as u64, bytes);
            for (&i, path) in misses.iter().zip(&paths) {
                let e = &entries[i];
                c.insert(
                    path,
                    e.stat_key(),
                    e.sha256.as_deref().unwrap_or_default(),
                    now,
                );
            }
        });
        Ok(present)
    }

    /// The entry at `path` without following a final symlink; `None` when
    /// nothing is there.
    pub fn stat(&self, path: &str) -> Result<Option<Entry>, TreeError> {
        let abs = self.inner.grants.check(path)?;
        let lmd = match std::fs::symlink_metadata(&abs) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("cannot stat", &abs, &e)),
        };
        let shown = abs.to_str().unwrap_or(path).to_string();
        describe(&abs, shown, &lmd)?.map(Some).ok_or_else(|| {
            TreeError::Invalid(format!(
                "{}: not a regular file, directory or symlink",
                abs.display()
            ))
        })
    }

    /// SHA-256 of the regular file at `path` (a symlink to one is read
    /// through), through the cache.
    pub fn hash_file(&self, path: &str) -> Result<String, TreeError> {
        let abs = self.inner.grants.check(path)?;
        let md = std::fs::metadata(&abs).map_err(|e| io_error("cannot hash", &abs, &e))?;
        if !md.is_file() {
            return Err(TreeError::Invalid(format!(
                "cannot hash {}: not a regular file",
                abs.display()
            )));
        }
        let (mtime_ns, ctime_ns, inode) = times(&md);
        // The cache key is the path asked (normalised), as the entry's path
        // under an empty prefix.
        let Some(key) = abs.to_str() else {
            return Err(TreeError::Io("hash missing after hashing".into()));
        };
        let mut entries = [Entry {
            path: key.to_owned(),
            kind: EntryKind::File,
            size: md.len(),
            mtime_ns,
            ctime_ns,
            inode,
            link_target: None,
            sha256: None,
        }];
        let cache = self.cache()?;
        self.fill_hashes(&cache, &mut entries, "", &[true])?;
        cache.flush()?;
        let [entry] = entries;
        entry
            .sha256
            .ok_or_else(|| TreeError::Io("hash missing after hashing".into()))
    }

    /// `path` with every symlink resolved (a missing tail kept as is).
    pub fn realpath(&self, path: &str) -> Result<String, TreeError> {
        let abs = self.inner.grants.check(path)?;
        let real = resolve(&abs);
        real.into_os_string().into_string().map_err(|raw| {
            TreeError::Invalid(format!("{path:?} resolves to {raw:?}, which is not UTF-8"))
        })
    }

    /// `rmdir`: remove the empty directory at `path`; `false` when it was
    /// already gone. Anything in it (files are data) refuses with `invalid`.
    pub fn remove_empty_dir(&self, path: &str) -> Result<bool, TreeError> {
        let abs = self.inner.grants.check(path)?;
        match std::fs::symlink_metadata(&abs) {
            Ok(md) if md.is_dir() => {}
            Ok(_) => {
                return Err(TreeError::Invalid(format!(
                    "{} is not a directory",
                    abs.display()
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error("cannot stat", &abs, &e)),
        }
        match std::fs::remove_dir(&abs) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => Err(TreeError::Invalid(
                format!("{} is not empty; it was kept", abs.display()),
            )),
            Err(e) => Err(io_error("cannot remove directory", &abs, &e)),
        }
    }
}
