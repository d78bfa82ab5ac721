//! The digested walk: the walk a summary memo lookup makes.
//!
//! It sees what [`walk_all`](super::walk_all) sees, but keeps each
//! directory's files and symlinks only as the records its part of the walk
//! digest is hashed from ([`DirRecords`](summaries::DirRecords)), one buffer
//! per directory, plus its subdirectories. When the digest matches a
//! remembered summary (the common case for an unchanged tree) that is all the
//! walk ever needs: no `Entry` is built, so 100,000 files cost a few
//! allocations per directory instead of 100,000 paths to allocate and free.
//! On a miss the records are turned into the same entries `walk_all`
//! returns, for the hash cache.

use std::path::Path;

use super::summaries;
use super::{Entry, TreeError};

/// What a digested walk saw, for the summary memo.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// The walk digest, lowercase hex.
    pub(super) walk: String,
    /// Whether any file it would hash is racy.
    pub(super) racy: bool,
}

/// A digested walk: what it saw, and its entries in compact form.
pub(super) struct DigestedWalk {
    pub(super) seen: Seen,
    /// Each directory's scan, by `rel` path.
    #[cfg(unix)]
    dirs: Vec<(String, DirScan)>,
    #[cfg(not(unix))]
    entries: Vec<Entry>,
}

/// One directory of a digested walk.
#[cfg(unix)]
struct DirScan {
    /// Its files and symlinks, in name order once digested.
    records: summaries::DirRecords,
    /// Its subdirectories: `rel` path and `(mtime_ns, ctime_ns, inode)`.
    dirs: Vec<(String, (i64, i64, u64))>,
    /// Its part of the walk digest; `None` without files and symlinks.
    part: Option<[u8; 32]>,
    /// Whether a file it would hash changed after the racy threshold.
    racy: bool,
}

/// The walk of `root` (a real directory) with its digest, and whether any
/// file it would hash (a file, a symlink read through) changed after
/// `racy_after`. Each directory's part is hashed by the thread that lists it.
#[cfg(unix)]
pub(super) fn walk_digested(root: &Path, racy_after: i64) -> Result<DigestedWalk, TreeError> {
    let dirs = super::walk_levels(
        root,
        |root, rel| scan(root, rel, racy_after),
        |scanned, next| next.extend(scanned.dirs.iter().map(|(rel, _)| rel.clone())),
    )?;
    let walk = summaries::combine(
        dirs.iter()
            .filter_map(|(rel, d)| Some((rel.as_str(), d.part?)))
            .collect(),
    );
    let racy = dirs.iter().any(|(_, d)| d.racy);
    Ok(DigestedWalk {
        seen: Seen { walk, racy },
        dirs,
    })
}

/// One directory's records, subdirectories and part of the digest.
#[cfg(unix)]
fn scan(root: &Path, rel: &str, racy_after: i64) -> Result<DirScan, TreeError> {
    use super::EntryKind;

    let mut records = summaries::DirRecords::default();
    let mut dirs = Vec::new();
    let mut racy = false;
    super::scan_dir(root, rel, |c| {
        if c.kind == EntryKind::Dir {
            dirs.push((super::child_path(rel, c.name), c.key));
        } else {
            racy |= (c.kind == EntryKind::File || c.followed) && c.key.0 > racy_after;
            records.push(c.name, c.kind, c.size, c.key, c.link_target.as_deref());
        }
    })?;
    let part = records.digest();
    Ok(DirScan {
        records,
        dirs,
        part,
        racy,
    })
}

#[cfg(not(unix))]
pub(super) fn walk_digested(root: &Path, racy_after: i64) -> Result<DigestedWalk, TreeError> {
    let entries = super::walk_all(root)?;
    let seen = Seen {
        walk: summaries::digest_of_entries(&entries),
        racy: entries
            .iter()
            .any(|e| e.mtime_ns > racy_after && super::readable(root, e)),
    };
    Ok(DigestedWalk { seen, entries })
}

impl DigestedWalk {
    /// The walk's entries, as [`walk_all`](super::walk_all) returns them, and
    /// what it saw.
    pub(super) fn into_parts(self) -> (Vec<Entry>, Seen) {
        #[cfg(unix)]
        let entries = {
            use super::EntryKind;

            let listed = self.dirs.into_iter().map(|(rel, d)| {
                let files = d.records.iter().map(|r| {
                    let link = r.link_target.map(str::to_owned);
                    super::child_entry(&rel, r.name, r.kind, r.size, r.key, link)
                });
                let subdirs = d
                    .dirs
                    .into_iter()
                    .map(|(path, (mtime_ns, ctime_ns, inode))| Entry {
                        path,
                        kind: EntryKind::Dir,
                        size: 0,
                        mtime_ns,
                        ctime_ns,
                        inode,
                        link_target: None,
                        sha256: None,
                    });
                let mut children: Vec<Entry> = files.collect();
                children.extend(subdirs);
                super::sort_siblings(&mut children, &rel);
                (rel, children)
            });
            super::stitch(listed.collect())
        };
        #[cfg(not(unix))]
        let entries = self.entries;
        (entries, self.seen)
    }
}
