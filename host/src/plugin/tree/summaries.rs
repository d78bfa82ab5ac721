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
//! The walk digest covers each file and symlink: its path, kind, size,
//! `(mtime_ns, ctime_ns, inode)` and link target. Each directory's part is
//! hashed by the walk thread that lists it ([`DirRecords`]), and the parts
//! are combined in path order ([`combine`]). Directories have no record:
//! they are not part of a summary, and one's mtime moves whenever a
//! temporary file comes and goes inside it. The walk also says whether any
//! file it would hash (a file, a symlink read through) was modified within
//! [`RACY_NS`](super::cache::RACY_NS) of now: then its summary is neither
//! taken from the memo nor remembered, so everything a remembered summary
//! rests on was vouched for. Anything that does not match exactly is a miss,
//! and the walk goes through the hash cache as before: a stale or even forged
//! memo entry can only be used for the exact walk it names, which is the same
//! trust the hash cache's own entries get.
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

use super::{EntryKind, Summary};

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
    let bytes = crate::model::fsutil::read_nofollow(file).ok()?;
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

/// One directory's part of the walk digest: a record per file and symlink
/// child (name, kind, size, stat key, link target), hashed in byte order of
/// name. Directories have no record: they are not part of a summary. The
/// records are also the walk's compact form of those children, read back
/// with [`iter`](Self::iter) when their entries are needed after all.
#[derive(Debug, Default)]
pub(super) struct DirRecords {
    /// The records, back to back: name, `0`, kind (`f` or `l`), size,
    /// mtime, ctime and inode (8 bytes each, little-endian), link target, `0`.
    bytes: Vec<u8>,
    /// Each record's range in `bytes`, and its name's length (the record
    /// starts with the name).
    records: Vec<(usize, usize, usize)>,
}

/// One child of a [`DirRecords`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Record<'a> {
    pub(super) name: &'a str,
    pub(super) kind: EntryKind,
    pub(super) size: u64,
    /// `(mtime_ns, ctime_ns, inode)`.
    pub(super) key: (i64, i64, u64),
    pub(super) link_target: Option<&'a str>,
}

/// The bytes of a record after its name and `0`: kind, then four numbers.
const FIXED: usize = 1 + 4 * 8;

/// A name or link target of a record, which were pushed as `str`.
fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("records are pushed as str")
}

impl DirRecords {
    pub(super) fn push(
        &mut self,
        name: &str,
        kind: EntryKind,
        size: u64,
        (mtime_ns, ctime_ns, inode): (i64, i64, u64),
        link_target: Option<&str>,
    ) {
        let start = self.bytes.len();
        let b = &mut self.bytes;
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&[
            0,
            if kind == EntryKind::Symlink {
                b'l'
            } else {
                b'f'
            },
        ]);
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&mtime_ns.to_le_bytes());
        b.extend_from_slice(&ctime_ns.to_le_bytes());
        b.extend_from_slice(&inode.to_le_bytes());
        b.extend_from_slice(link_target.unwrap_or_default().as_bytes());
        b.push(0);
        self.records.push((start, b.len(), name.len()));
    }

    /// The directory's digest; `None` when it has no file or symlink. The
    /// records are kept, in byte order of name.
    pub(super) fn digest(&mut self) -> Option<[u8; 32]> {
        if self.records.is_empty() {
            return None;
        }
        let bytes = &self.bytes;
        let name = |&(start, _, len): &(usize, usize, usize)| &bytes[start..start + len];
        self.records.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        let mut h = Sha256::new();
        for &(start, end, _) in &self.records {
            h.update(&bytes[start..end]);
        }
        Some(h.finalize().into())
    }

    /// The records, as pushed (or in name order after [`digest`](Self::digest)).
    #[cfg_attr(not(unix), allow(dead_code))] // only unix walks keep records
    pub(super) fn iter(&self) -> impl Iterator<Item = Record<'_>> {
        self.records.iter().map(|&(start, end, len)| {
            let record = &self.bytes[start..end];
            let (name, rest) = record.split_at(len);
            // `rest` is `0`, kind, four numbers, link target, `0`.
            let fixed = &rest[1..1 + FIXED];
            let number = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&fixed[1 + 8 * i..9 + 8 * i]);
                b
            };
            let link = &rest[1 + FIXED..rest.len() - 1];
            let kind = if fixed[0] == b'l' {
                EntryKind::Symlink
            } else {
                EntryKind::File
            };
            Record {
                name: text(name),
                kind,
                size: u64::from_le_bytes(number(0)),
                key: (
                    i64::from_le_bytes(number(1)),
                    i64::from_le_bytes(number(2)),
                    u64::from_le_bytes(number(3)),
                ),
                link_target: (kind == EntryKind::Symlink).then(|| text(link)),
            }
        })
    }
}

/// The walk digest from each directory's part (`rel` path, digest): sha256
/// over them in byte order of path, lowercase hex.
pub(super) fn combine(mut parts: Vec<(&str, [u8; 32])>) -> String {
    parts.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    for (rel, digest) in &parts {
        h.update(rel.as_bytes());
        h.update([0]);
        h.update(digest);
    }
    hex::encode(h.finalize())
}

/// The walk digest of a walk's `entries`, as a digested walk computes it
/// (where the walk cannot digest as it goes).
#[cfg(any(not(unix), test))]
pub(super) fn digest_of_entries(entries: &[super::Entry]) -> String {
    let mut dirs: BTreeMap<&str, DirRecords> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.kind != EntryKind::Dir) {
        let (rel, name) = e.path.rsplit_once('/').unwrap_or(("", &e.path));
        dirs.entry(rel).or_default().push(
            name,
            e.kind,
            e.size,
            (e.mtime_ns, e.ctime_ns, e.inode),
            e.link_target.as_deref(),
        );
    }
    combine(
        dirs.into_iter()
            .filter_map(|(rel, mut records)| Some((rel, records.digest()?)))
            .collect(),
    )
}
