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
//! So a big batch writes each new version into a file of the spare
//! directory (`.tether/cache/spare/`, per checkout): a spare the last batch
//! left, overwritten in place, or a new file there when none is left.
//! Nothing is visible before the batch's sync. Then each one is exchanged
//! with its target (`renameat2` with `RENAME_EXCHANGE`): one atomic step
//! puts the new version in place and leaves the replaced one in the spare
//! directory, the next batch's spare. A new target (nothing to replace) is
//! a plain rename. One directory operation per file, where a temporary file
//! beside the target, a link keeping the old one and a rename were three.
//! Where the filesystem cannot exchange, the replaced file is kept by a hard
//! link before a plain rename.
//!
//! Everything in the spare directory is untrusted (a clone may have committed
//! files there): the directory is opened without following a link and
//! locked (`flock`) for the batch, so two batches never write one spare; a
//! spare is opened without following a link, and written only when it is a
//! regular file of ours with a single link (a spare that still shares its
//! inode with a manifest, as a kill between a link and its rename leaves
//! it, is dropped). The directory holds no more spares than the biggest
//! batch has files, and at most [`MAX_SPARES`].

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// At most this many spares are kept, whatever the batches.
pub const MAX_SPARES: usize = 1 << 17;

/// The spare directory of one batch: opened, locked and listed at its first
/// use.
pub(crate) struct Spares {
    path: PathBuf,
    /// The directory, opened without following a link and locked for the
    /// batch (`None`: not yet); every spare is named relative to it.
    dir: Option<OwnedFd>,
    /// The filesystem the directory is on: only targets there can take a
    /// spare.
    dev: u64,
    /// Spares not yet written, taken from the end; `None` until listed.
    free: Option<Vec<OsString>>,
    /// How many files the directory holds.
    held: usize,
    /// Whether the filesystem exchanges (until it says it does not).
    exchanges: bool,
    /// Off: a link there, another batch holding the lock, or an error that
    /// would repeat.
    off: bool,
}

impl Spares {
    pub(crate) fn new(path: PathBuf) -> Spares {
        Spares {
            path,
            dir: None,
            dev: 0,
            free: None,
            held: 0,
            exchanges: true,
            off: false,
        }
    }

    /// The directory (created, opened, locked) and its spares, once.
    fn ready(&mut self) -> Option<&OwnedFd> {
        if self.off {
            return None;
        }
        if self.free.is_none() {
            let opened = super::fsutil::create_real_dir(&self.path)
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|()| open_dir(&self.path))
                .and_then(|fd| {
                    // Another batch at work here (another command, or a
                    // clone's two tethers) keeps its spares to itself.
                    rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)?;
                    let st = rustix::fs::fstat(&fd)?;
                    Ok((fd, st.st_dev))
                });
            let Ok((fd, dev)) = opened else {
                self.off = true;
                return None;
            };
            let names = list(&fd);
            self.held = names.len();
            self.free = Some(names);
            self.dir = Some(fd);
            self.dev = dev;
        }
        self.dir.as_ref()
    }

    /// A spare holding `bytes`, the new version of a file in a directory on
    /// filesystem `dev`, to [`place`](Spares::place) later; `None` when the
    /// spares cannot hold it (the caller stages a file beside the target).
    pub(crate) fn stage(&mut self, dev: u64, bytes: &[u8]) -> Option<OsString> {
        self.ready()?;
        if self.dev != dev {
            return None;
        }
        while let Some(name) = self.free.as_mut().and_then(Vec::pop) {
            let dir = self.dir.as_ref()?;
            match overwrite(dir, &name, bytes) {
                Ok(()) => return Some(name),
                // Not fit to write (or gone): dropped from the directory.
                Err(_) => {
                    if rustix::fs::unlinkat(dir, &name, AtFlags::empty()).is_ok() {
                        self.held -= 1;
                    }
                }
            }
        }
        if self.held >= MAX_SPARES {
            return None;
        }
        let dir = self.dir.as_ref()?;
        // A random name; without one (no OS randomness) the caller stages.
        for _ in 0..8 {
            let name = OsString::from(super::ids::try_random_hex(12)?);
            match create(dir, &name, bytes) {
                Ok(()) => {
                    self.held += 1;
                    return Some(name);
                }
                Err(Errno::EXIST) => continue,
                Err(_) => {
                    let _ = rustix::fs::unlinkat(dir, &name, AtFlags::empty());
                    self.off = true;
                    return None;
                }
            }
        }
        None
    }

    /// Put spare `name` (from [`stage`](Spares::stage)) in place at
    /// `target`; the file it replaces becomes a spare.
    pub(crate) fn place(&mut self, name: &OsString, target: &Path) -> std::io::Result<()> {
        let dir = self
            .dir
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no spares"))?;
        if self.exchanges {
            match rustix::fs::renameat_with(dir, name, CWD, target, RenameFlags::EXCHANGE) {
                Ok(()) => {
                    // An exchange moves a directory as readily as a file; a
                    // rename over one fails, and so does this.
                    let moved = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                    if rustix::fs::FileType::from_raw_mode(moved.st_mode)
                        == rustix::fs::FileType::Directory
                    {
                        rustix::fs::renameat_with(dir, name, CWD, target, RenameFlags::EXCHANGE)?;
                        return Err(Errno::ISDIR.into());
                    }
                    if self.held > MAX_SPARES {
                        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
                        self.held -= 1;
                    }
                    return Ok(());
                }
                // Nothing to replace: renamed below.
                Err(Errno::NOENT) => {}
                Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => self.exchanges = false,
                Err(e) => return Err(e.into()),
            }
        }
        if !self.exchanges {
            self.keep(target, MAX_SPARES);
        }
        let dir = self
            .dir
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no spares"))?;
        rustix::fs::renameat(dir, name, CWD, target)?;
        self.held -= 1;
        Ok(())
    }

    /// Keep the file at `target`, about to be replaced by a rename, as a
    /// spare, while the directory holds fewer than `want` (the batch's size:
    /// the next batch like it finds a spare for each file).
    pub(crate) fn keep(&mut self, target: &Path, want: usize) {
        if self.ready().is_none() || self.held >= want.min(MAX_SPARES) {
            return;
        }
        let Some(fd) = &self.dir else { return };
        // A random name; without one (no OS randomness) nothing is kept.
        let kept = (0..8).find_map(|_| {
            let name = super::ids::try_random_hex(12)?;
            match rustix::fs::linkat(CWD, target, fd, &name, AtFlags::empty()) {
                Err(Errno::EXIST) => None,
                done => Some(done),
            }
        });
        match kept {
            Some(Ok(())) => self.held += 1,
            // A new file replaces nothing.
            Some(Err(Errno::NOENT)) => {}
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

/// Replace the content of spare `name` in `dir` with `bytes`, when it is a
/// regular file of this user's with no other name (opened without following
/// a link).
fn overwrite(dir: &OwnedFd, name: &OsString, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mut file = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let md = file.metadata()?;
    if !md.is_file() || md.nlink() != 1 || md.uid() != rustix::process::geteuid().as_raw() {
        return Err(std::io::Error::other("not a spare"));
    }
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)
}

/// A new file `name` in `dir` holding `bytes`.
fn create(dir: &OwnedFd, name: &OsString, bytes: &[u8]) -> Result<(), Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600))?;
    File::from(fd)
        .write_all(bytes)
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
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
    fn a_directory_where_a_file_goes_stays_and_fails_the_batch() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, spare) = (tmp.path().join("objects"), tmp.path().join("spare"));
        batch(&dir, &spare, 5, 1);
        batch(&dir, &spare, 5, 2);
        std::fs::remove_file(dir.join("f4")).unwrap();
        std::fs::create_dir(dir.join("f4")).unwrap();
        std::fs::write(dir.join("f4/inside"), "someone's").unwrap();
        let mut b = AtomicBatch::recycling(spare.clone());
        for i in 0..5 {
            b.stage(&dir.join(format!("f{i}")), b"round 3").unwrap();
        }
        let err = b.commit(|_| {}).unwrap_err().to_string();
        assert!(err.contains("f4"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("f4/inside")).unwrap(),
            "someone's"
        );
        assert!(
            std::fs::read_dir(&spare)
                .unwrap()
                .all(|e| e.unwrap().file_type().unwrap().is_file())
        );
    }

    #[test]
    fn a_batch_leaves_spares_another_batch_holds_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, spare) = (tmp.path().join("objects"), tmp.path().join("spare"));
        let n = 6;
        batch(&dir, &spare, n, 1);
        batch(&dir, &spare, n, 2);
        let kept = inodes(&spare);
        assert_eq!(kept.len(), n);
        // Another batch (another process) at work in the spare directory.
        let held = File::open(&spare).unwrap();
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
        batch(&dir, &spare, n, 3);
        assert_eq!(inodes(&spare), kept, "no spare written, none added");
        assert!(inodes(&dir).is_disjoint(&kept));
        for i in 0..n {
            let text = std::fs::read_to_string(dir.join(format!("f{i}"))).unwrap();
            assert_eq!(text, format!("round 3 file {i}"));
        }
        drop(held);
        batch(&dir, &spare, n, 4);
        assert_eq!(inodes(&dir).intersection(&kept).count(), n - 2);
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
