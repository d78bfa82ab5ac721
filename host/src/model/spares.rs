//! Spare files: the replaced versions of a big batch's files, kept to hold
//! the next batch's new versions.
//!
//! An [`AtomicBatch`](super::fsutil::AtomicBatch) of 10,000 manifests writes
//! 10,000 new files and frees the 10,000 it replaces. On some filesystems
//! both are slow in a way that grows with the count: ext4 without a journal
//! skips every recently freed inode when it allocates one (quadratic over a
//! batch that follows another within minutes), and a filesystem mounted with
//! `discard` waits for the device at every freed block. Measured on such a
//! filesystem, a second commit of 10,000 changed objects spent over 5 s
//! creating and renaming files; reusing the replaced files brought that
//! under 1 s.
//!
//! So a big batch keeps each file it replaces, hard-linked into the spare
//! directory (`.tether/cache/spare/`, per checkout), instead of letting the
//! rename free it; the next big batch claims spares for its new versions and
//! overwrites them in place. Nothing is visible before the batch's sync: a
//! spare is moved to a temporary name beside its target first, written,
//! synced with the rest, then renamed over the target, exactly as a fresh
//! temporary file would be.
//!
//! Everything in the spare directory is untrusted (a clone may have committed
//! files there): a spare is claimed by renaming it (a racing claimer finds it
//! gone), opened without following a link, and used only when it is a
//! regular file of ours with a single link. A spare that still shares its
//! inode with a manifest (a kill between the link and the rename) is dropped,
//! never written. The directory holds no more spares than the biggest batch
//! has files, and at most [`MAX_SPARES`].

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, OFlags, RenameFlags};

/// At most this many spares are kept, whatever the batches.
pub const MAX_SPARES: usize = 1 << 17;

/// The spare directory of one batch: its listing, read at the first claim.
pub(crate) struct Spares {
    path: PathBuf,
    /// The directory, opened without following a link (`None`: not yet, or
    /// missing); every spare is named relative to it.
    dir: Option<OwnedFd>,
    /// Spares not yet claimed, taken from the end; `None` until listed.
    free: Option<Vec<OsString>>,
    /// How many spares the directory holds: those listed, less those
    /// claimed, plus those kept since.
    held: usize,
    /// Off after an error that would repeat (another filesystem, say).
    off: bool,
}

impl Spares {
    pub(crate) fn new(path: PathBuf) -> Spares {
        Spares {
            path,
            dir: None,
            free: None,
            held: 0,
            off: false,
        }
    }

    /// The spares, listed once; opens the directory.
    fn listed(&mut self) -> &mut Vec<OsString> {
        if self.free.is_none() {
            self.dir = open_dir(&self.path).ok();
            let names = match &self.dir {
                Some(fd) => list(fd),
                None => Vec::new(),
            };
            self.held = names.len();
            self.free = Some(names);
        }
        self.free.get_or_insert_with(Vec::new)
    }

    /// A temporary file in `dir` holding `bytes`, made of a spare; `None`
    /// when no spare is left (the caller creates a file).
    pub(crate) fn claim(
        &mut self,
        dir: &Path,
        prefix: &str,
        bytes: &[u8],
    ) -> Option<tempfile::NamedTempFile> {
        if self.off {
            return None;
        }
        while let Some(name) = self.listed().pop() {
            // Claimed, gone or dropped: no longer in the directory.
            self.held = self.held.saturating_sub(1);
            let from = self.dir.as_ref()?;
            let made = tempfile::Builder::new()
                .prefix(prefix)
                .make_in(dir, |tmp| claim_into(from, &name, tmp, bytes));
            match made {
                Ok(tmp) => return Some(tmp),
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                    self.off = true;
                    return None;
                }
                // Gone, or not fit to write: the next one.
                Err(_) => {}
            }
        }
        None
    }

    /// Keep the file at `target`, about to be replaced, as a spare, while
    /// the directory holds fewer than `want` (the batch's size: the next
    /// batch like it finds a spare for each file).
    pub(crate) fn keep(&mut self, target: &Path, want: usize) {
        self.listed();
        if self.off || self.held >= want.min(MAX_SPARES) {
            return;
        }
        if self.dir.is_none() {
            let made = super::fsutil::create_real_dir(&self.path)
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|()| open_dir(&self.path));
            match made {
                Ok(fd) => self.dir = Some(fd),
                Err(_) => {
                    self.off = true;
                    return;
                }
            }
        }
        let Some(fd) = &self.dir else { return };
        // A random name; without one (no OS randomness) nothing is kept.
        let kept = (0..8).find_map(|_| {
            let name = super::ids::try_random_hex(12)?;
            match rustix::fs::linkat(CWD, target, fd, &name, AtFlags::empty()) {
                Err(rustix::io::Errno::EXIST) => None,
                done => Some(done),
            }
        });
        match kept {
            Some(Ok(())) => self.held += 1,
            // A new file replaces nothing.
            Some(Err(rustix::io::Errno::NOENT)) => {}
            _ => self.off = true,
        }
    }
}

/// `path`, a real directory (a link there is not followed).
fn open_dir(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in directory `fd`, at most [`MAX_SPARES`].
fn list(fd: &OwnedFd) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(mut dir) = rustix::fs::Dir::read_from(fd) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    while let Some(Ok(entry)) = dir.read() {
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
        if names.len() >= MAX_SPARES {
            break;
        }
    }
    names
}

/// Move spare `name` of directory `from` to `tmp` (never over an existing
/// file) and overwrite it with `bytes`; on a failure after the move, `tmp`
/// is removed.
fn claim_into(from: &OwnedFd, name: &OsString, tmp: &Path, bytes: &[u8]) -> std::io::Result<File> {
    rustix::fs::renameat_with(from.as_fd(), name, CWD, tmp, RenameFlags::NOREPLACE)?;
    overwrite(tmp, bytes).inspect_err(|_| {
        let _ = std::fs::remove_file(tmp);
    })
}

/// Open `path` (no link followed) and replace its content with `bytes`,
/// when it is a regular file of this user's with no other name.
fn overwrite(path: &Path, bytes: &[u8]) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    let mut file = super::fsutil::nofollow(&mut opts).open(path)?;
    let md = file.metadata()?;
    if !md.is_file() || md.nlink() != 1 || md.uid() != rustix::process::geteuid().as_raw() {
        return Err(std::io::Error::other("not a spare"));
    }
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::MetadataExt;

    use super::super::fsutil::AtomicBatch;
    use super::*;

    /// `n` files `f<i>` in `dir` written by one recycling batch, each holding
    /// `round`.
    fn batch(dir: &Path, spare: &Path, n: usize, round: usize) {
        let mut b = AtomicBatch::recycling(spare.to_path_buf());
        for i in 0..n {
            b.stage(
                &dir.join(format!("f{i}")),
                format!("round {round} file {i}").as_bytes(),
            )
            .unwrap();
        }
        b.commit(|_| {}).unwrap();
    }

    fn inodes(dir: &Path) -> BTreeSet<u64> {
        std::fs::read_dir(dir)
            .map(|rd| rd.map(|e| e.unwrap().metadata().unwrap().ino()).collect())
            .unwrap_or_default()
    }

    fn names(dir: &Path) -> usize {
        std::fs::read_dir(dir).map(|rd| rd.count()).unwrap_or(0)
    }

    #[test]
    fn a_big_batch_writes_into_the_files_the_last_one_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, spare) = (tmp.path().join("objects"), tmp.path().join("spare"));
        let n = 10;
        batch(&dir, &spare, n, 1);
        assert_eq!(names(&spare), 0, "new files replace nothing");
        batch(&dir, &spare, n, 2);
        assert_eq!(names(&spare), n, "each replaced file is kept");
        let kept = inodes(&spare);
        batch(&dir, &spare, n, 3);
        // The files past the first two were written into the spares.
        let now = inodes(&dir);
        assert_eq!(now.intersection(&kept).count(), n - 2);
        for i in 0..n {
            let text = std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap();
            assert_eq!(text, format!("round 3 file {i}"));
        }
        // No more spares than the batch has files, round after round, and
        // no temporary file left behind.
        for round in 4..7 {
            batch(&dir, &spare, n, round);
            assert_eq!(names(&spare), n);
            assert_eq!(names(&dir), n);
        }
        // A small batch neither takes nor keeps spares.
        batch(&dir, &spare, 2, 9);
        assert_eq!(names(&spare), n);
        assert_eq!(
            std::fs::read_to_string(dir.join("f1")).unwrap(),
            "round 9 file 1"
        );
    }

    #[test]
    fn a_spare_that_is_a_link_or_has_another_name_is_never_written() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, spare) = (tmp.path().join("objects"), tmp.path().join("spare"));
        std::fs::create_dir_all(&spare).unwrap();
        let precious = tmp.path().join("precious");
        std::fs::write(&precious, "keep me").unwrap();
        let other = tmp.path().join("other");
        std::fs::write(&other, "keep me too").unwrap();
        std::os::unix::fs::symlink(&precious, spare.join("link")).unwrap();
        // What a kill between keeping a spare and the rename leaves: a spare
        // that is still another file's name.
        std::fs::hard_link(&other, spare.join("shared")).unwrap();
        batch(&dir, &spare, 6, 1);
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep me too");
        assert_eq!(std::fs::metadata(&other).unwrap().nlink(), 1);
        assert!(!spare.join("link").exists() && !spare.join("shared").exists());
        for i in 0..6 {
            let text = std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap();
            assert_eq!(text, format!("round 1 file {i}"));
        }
        assert_eq!(names(&dir), 6, "no temporary file left behind");
    }

    #[test]
    fn a_linked_spare_directory_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("objects");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        for i in 0..5 {
            std::fs::write(elsewhere.join(format!("e{i}")), "someone's file").unwrap();
        }
        let spare = tmp.path().join("spare");
        std::os::unix::fs::symlink(&elsewhere, &spare).unwrap();
        batch(&dir, &spare, 5, 1);
        batch(&dir, &spare, 5, 2);
        batch(&dir, &spare, 5, 3);
        assert_eq!(names(&elsewhere), 5);
        for i in 0..5 {
            let text = std::fs::read_to_string(elsewhere.join(format!("e{i}"))).unwrap();
            assert_eq!(text, "someone's file");
            let text = std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap();
            assert_eq!(text, format!("round 3 file {i}"));
        }
    }
}
