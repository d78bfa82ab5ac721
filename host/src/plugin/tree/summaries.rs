//! The summary memo: a directory's content summary (count, size, digest),
//! remembered with a digest of what its walk saw.
//!
//! The hash cache vouches for one file at a time: its sha256 holds while its
//! stat key is unchanged and it is not racy. A summary is a function of those
//! hashes and of the walk (paths, sizes, symlink targets), so when a walk sees
//! every file with the stat key it had when the summary was made, and none of
//! them is racy, the cache would vouch for every hash and the summary would
//! come out the same. The memo applies that rule to the whole tree at once:
//! `status --snapshot` of an unchanged 100,000-file tree is one walk, without
//! loading, looking up or re-summarising 100,000 cache entries.
//!
//! The walk digest is sha256 over each file and symlink in walk order: its
//! path, kind, size, `(mtime_ns, ctime_ns, inode)` and link target.
//! Directories are left out: they are not part of a summary, and one's mtime
//! moves whenever a temporary file comes and goes inside it. A summary is
//! remembered only when no file in it was racy, so everything it rests on was
//! vouched for. Anything that does not match exactly is a miss, and the walk
//! goes through the hash cache as before: a stale or even forged memo entry
//! can only be used for the exact walk it names, which is the same trust the
//! hash cache's own entries get.
//!
//! Kept beside the hash cache, in `.tether/cache/file-summaries.json`
//! (`{"version":1,"roots":{"/abs/real/root":{...}}}`, one entry per root, at
//! most [`MAX_ROOTS`]), or in memory for calls with no dataset. It is
//! rewritten atomically, and a file that does not parse is ignored and
//! replaced. Two processes racing may drop each other's entry: that costs the
//! next run the full path, never a wrong summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache::RACY_NS;
use super::{Entry, EntryKind, Summary};

/// The memo's file name, beside the hash cache's.
const FILE_NAME: &str = "file-summaries.json";

/// Bumped whenever the walk digest or the summary recipe changes.
const VERSION: u32 = 1;

/// Roots kept; the least recently stored go first.
const MAX_ROOTS: usize = 256;

/// One root's remembered summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    /// The walk digest (module docs), lowercase hex.
    walk: String,
    /// Files hashed for it: the hashes it vouches for.
    hashed: u64,
    count: u64,
    size: u64,
    digest: String,
    /// When it was stored (ns since the epoch), for eviction.
    at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct MemoFile {
    version: u32,
    roots: BTreeMap<String, Remembered>,
}

/// The memos of calls with no dataset, per process; and one lock for every
/// file's read-modify-write, so the calls of one fan-out do not lose each
/// other's entries.
static MEMORY: Mutex<BTreeMap<String, Remembered>> = Mutex::new(BTreeMap::new());
static FILE_LOCK: Mutex<()> = Mutex::new(());

/// A remembered summary, with the walk digest it was made from and how many
/// files' hashes it rests on.
pub(super) struct Recalled {
    pub(super) walk: String,
    pub(super) hashed: u64,
    pub(super) summary: Summary,
}

/// The memo that goes with the hash cache at `cache` (`None`: memory).
#[derive(Debug, Clone)]
pub(super) struct Memo {
    file: Option<PathBuf>,
}

impl Memo {
    pub(super) fn beside(cache: Option<&Path>) -> Self {
        Self {
            file: cache.map(|c| c.with_file_name(FILE_NAME)),
        }
    }

    /// What is remembered for `root`.
    pub(super) fn recall(&self, root: &str) -> Option<Recalled> {
        self.get(root).map(|r| Recalled {
            walk: r.walk,
            hashed: r.hashed,
            summary: Summary {
                count: r.count,
                size: r.size,
                digest: r.digest,
                listing: None,
            },
        })
    }

    /// Remember `summary` as `root`'s for walk digest `walk`, made from
    /// `hashed` files' hashes. A failure to write costs the next run the full
    /// path, nothing more.
    pub(super) fn remember(
        &self,
        root: &str,
        walk: String,
        hashed: u64,
        summary: &Summary,
        now: i64,
    ) {
        let entry = Remembered {
            walk,
            hashed,
            count: summary.count,
            size: summary.size,
            digest: summary.digest.clone(),
            at: now,
        };
        let Some(file) = &self.file else {
            let mut memory = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
            memory.insert(root.to_owned(), entry);
            if memory.len() > MAX_ROOTS {
                evict_oldest(&mut memory);
            }
            return;
        };
        let _guard = FILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut memo = read(file).unwrap_or_default();
        // The same answer already there: no write (`at` aside).
        let same = |r: &Remembered| {
            Remembered {
                at: r.at,
                ..entry.clone()
            } == *r
        };
        if memo.roots.get(root).is_some_and(same) {
            return;
        }
        memo.version = VERSION;
        memo.roots.insert(root.to_owned(), entry);
        while memo.roots.len() > MAX_ROOTS {
            evict_oldest(&mut memo.roots);
        }
        let written = serde_json::to_vec(&memo)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::model::fsutil::write_atomic(file, &bytes).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::debug!("summary memo {} not written: {e}", file.display());
        }
    }

    fn get(&self, root: &str) -> Option<Remembered> {
        match &self.file {
            None => MEMORY
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(root)
                .cloned(),
            Some(file) => read(file)?.roots.remove(root),
        }
    }
}

/// The memo file, when it is one this build reads.
fn read(file: &Path) -> Option<MemoFile> {
    let bytes = std::fs::read(file).ok()?;
    match serde_json::from_slice::<MemoFile>(&bytes) {
        Ok(memo) if memo.version == VERSION => Some(memo),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!("ignoring the summary memo {}: {e}", file.display());
            None
        }
    }
}

/// Drop the least recently stored root.
fn evict_oldest(roots: &mut BTreeMap<String, Remembered>) {
    let oldest = roots
        .iter()
        .min_by_key(|(_, r)| r.at)
        .map(|(k, _)| k.clone());
    if let Some(oldest) = oldest {
        roots.remove(&oldest);
    }
}

/// Entries per chunk of the walk digest: chunks are hashed in parallel,
/// and fixed in size so the digest does not depend on the number of cores.
const DIGEST_CHUNK: usize = 4096;

/// The walk digest of `entries` (module docs), lowercase hex: sha256 over
/// the sha256 of each [`DIGEST_CHUNK`] entries.
pub(super) fn walk_digest(entries: &[Entry]) -> String {
    let chunks: Vec<&[Entry]> = entries.chunks(DIGEST_CHUNK).collect();
    let mut h = Sha256::new();
    for chunk in super::parallel_map(&chunks, |c| chunk_digest(c)) {
        h.update(chunk);
    }
    hex::encode(h.finalize())
}

fn chunk_digest(entries: &[Entry]) -> [u8; 32] {
    let mut h = Sha256::new();
    // One record per entry, hashed a buffer at a time: many small updates
    // cost more than the hashing.
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    for e in entries {
        let kind = match e.kind {
            EntryKind::Dir => continue,
            EntryKind::File => b'f',
            EntryKind::Symlink => b'l',
        };
        buf.extend_from_slice(e.path.as_bytes());
        buf.extend_from_slice(&[0, kind]);
        buf.extend_from_slice(&e.size.to_le_bytes());
        buf.extend_from_slice(&e.mtime_ns.to_le_bytes());
        buf.extend_from_slice(&e.ctime_ns.to_le_bytes());
        buf.extend_from_slice(&e.inode.to_le_bytes());
        if let Some(target) = &e.link_target {
            buf.extend_from_slice(target.as_bytes());
        }
        buf.push(0);
        if buf.len() >= 60 * 1024 {
            h.update(&buf);
            buf.clear();
        }
    }
    h.update(&buf);
    h.finalize().into()
}

/// Whether any of `entries` that `hashed` says the walk hashes (files and
/// symlinks read through: their content) changed within [`RACY_NS`] of
/// `now`, or after it: such a hash is never vouched for, so neither is a
/// summary that includes it. Other symlinks are recorded by their target,
/// which every walk reads afresh.
pub(super) fn any_racy(entries: &[Entry], now: i64, hashed: impl Fn(&Entry) -> bool) -> bool {
    let racy_after = now.saturating_sub(RACY_NS);
    entries.iter().any(|e| e.mtime_ns > racy_after && hashed(e))
}
