//! Atomic file writes, and reads that never follow a symbolic link.
//!
//! Every file tether writes under `.tether/` and `tether.toml` is replaced
//! whole: written to a temporary file in the same directory, synced, then
//! renamed over the target. A crash leaves either the old file or the new one,
//! never a torn one. Temporary names start with [`TEMP_PREFIX`], which the
//! `.tether/.gitignore` ignores, so a leftover never shows as untracked.
//!
//! Everything under `.tether/` came with the clone, so tether's own files are
//! opened with `O_NOFOLLOW` ([`open_nofollow`], [`read_nofollow`],
//! [`read_optional`]): a link committed where tether keeps a file is an error,
//! never a way to read or write elsewhere. (`Repo::find` refuses any link
//! under `.tether/` before a command starts, see `Layout::check_dot_dir`;
//! these are the second line.) An atomic write replaces a link at its target
//! rather than writing through it, and refuses a linked parent directory.
//!
//! [`FileStamp`] tells whether a file was rewritten since it was last read,
//! for caches derived from one (the hash cache, status's drift memo).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::error::{ModelError, Result};

/// Prefix of the temporary files atomic writes create next to their target.
pub const TEMP_PREFIX: &str = ".tether-tmp-";

/// Write `bytes` to `path` atomically, creating parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    create_real_dir(parent_dir(path))?;
    replace_file(path, TEMP_PREFIX, bytes).map_err(|e| ModelError::io(path, e))
}

/// Replace `path` whole with `bytes`, its directory already there: a
/// temporary file beside it named `prefix` and a random tail
/// ([`temp_file_in`]), synced, renamed over `path`, and the directory synced
/// for the rename. A crash leaves the old file or the new one; every sync is
/// logged as [`sync_file`] says. Errors are the system's own.
pub fn replace_file(path: &Path, prefix: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent_dir(path);
    let tmp = temp_file_in(dir, prefix, bytes)?;
    sync_file(tmp.as_file(), path, true)?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// The directory `path` is in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Create `dir` where missing, and refuse it when it is a link.
pub(crate) fn create_real_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(linked(dir));
    }
    Ok(())
}

/// The filesystem `dir` is on (0 where that is not known).
fn device_of(dir: &Path) -> std::io::Result<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(std::fs::symlink_metadata(dir)?.dev())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(0)
    }
}

/// A temporary file in `dir` (prepared) holding `bytes`, the new version of
/// `path`.
fn stage_in(dir: &Path, path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile> {
    temp_file_in(dir, TEMP_PREFIX, bytes).map_err(|e| ModelError::io(path, e))
}

/// A new file in `dir` named `prefix` and a random tail, readable and
/// writable by its owner only, holding `bytes` (not synced): removed when
/// dropped unless persisted over its target. Every file tether replaces
/// whole starts here.
///
/// Its errors are the system's own. tempfile's `tempfile_in` and its
/// `Write` add `at path "<the temporary file>"` to each, a name the user
/// never chose and cannot act on, after the target the caller names.
pub fn temp_file_in(
    dir: &Path,
    prefix: &str,
    bytes: &[u8],
) -> std::io::Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::Builder::new()
        .prefix(prefix)
        .make_in(dir, |path| {
            let mut opts = OpenOptions::new();
            opts.read(true).write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            opts.open(path)
        })?;
    tmp.as_file_mut().write_all(bytes)?;
    Ok(tmp)
}

/// Sync `file` (`path` names it): its data, and with `all` its metadata.
/// Every sync tether makes of its own files goes through here or
/// [`sync_dir`] / [`AtomicBatch`], each logged at debug level under the
/// target `tether::sync` naming the file: how tests count a command's
/// syncs (`RUST_LOG=tether::sync=debug`) without timing it.
pub fn sync_file(file: &File, path: &Path, all: bool) -> std::io::Result<()> {
    tracing::debug!(target: "tether::sync", path = %path.display(), "sync");
    if all {
        file.sync_all()
    } else {
        file.sync_data()
    }
}

/// Make the entries of directory `dir` durable (a rename or a new file in
/// it); best effort, as not every platform lets a directory be synced.
pub fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = sync_file(&d, dir, true);
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Many files replaced atomically, each as [`write_atomic`] would, with a
/// number of syncs that does not grow with the number of files: every new
/// version is written beside its target first ([`AtomicBatch::stage`]),
/// then [`AtomicBatch::commit`] makes them all durable with one sync of the
/// filesystem, renames each over its target (each rename atomic on its own:
/// a crash leaves every file old or new, never torn), and syncs the
/// filesystem once more for the renames. A batch of a few files syncs each
/// file instead, which is cheaper than a filesystem's worth of others'
/// dirty data; a batch dropped uncommitted leaves its targets untouched.
///
/// A batch made [`recycling`](AtomicBatch::recycling) keeps the files a big
/// batch replaces and writes the next one's new versions into them
/// (`super::spares`): same guarantees, no file created or freed per file.
#[derive(Default)]
pub struct AtomicBatch {
    staged: Vec<(PathBuf, Staged)>,
    /// Directories already created and checked for this batch, and the
    /// filesystem each is on: 10,000 manifests in one directory ask once,
    /// not 10,000 times.
    prepared: std::collections::HashMap<PathBuf, u64>,
    #[cfg(target_os = "linux")]
    spares: Option<super::spares::Spares>,
}

/// A new version written beside its target. Only the first few stay open:
/// a batch of 10,000 manifests holding a descriptor each would pass the
/// usual limit of 1,024 open files, and a big batch syncs the filesystem
/// through its first file instead of each file through its own.
enum Staged {
    Open(tempfile::NamedTempFile),
    Closed(tempfile::TempPath),
    /// Written into a spare, by its name in the spare directory.
    #[cfg(target_os = "linux")]
    Spare(std::ffi::OsString),
}

/// Up to this many files, [`AtomicBatch`] syncs each one as `write_atomic` does.
const BATCH_SYNC_EACH: usize = 2;

impl AtomicBatch {
    pub fn new() -> AtomicBatch {
        AtomicBatch::default()
    }

    /// A batch that, when big, takes its new versions from the spare files
    /// in `spare_dir` and keeps the files it replaces there (see
    /// `super::spares`). `spare_dir` must be on the targets' filesystem to
    /// help; elsewhere the batch works as [`new`](AtomicBatch::new)'s.
    pub fn recycling(spare_dir: PathBuf) -> AtomicBatch {
        #[cfg(target_os = "linux")]
        return AtomicBatch {
            spares: Some(super::spares::Spares::new(spare_dir)),
            ..AtomicBatch::default()
        };
        #[cfg(not(target_os = "linux"))]
        {
            let _ = spare_dir;
            AtomicBatch::default()
        }
    }

    /// The new version of `path` (in `dir`, on filesystem `dev`): past the
    /// first few files of a recycling batch, in the spare directory; else
    /// in a temporary file beside it.
    fn temp_for(&mut self, dir: &Path, dev: u64, path: &Path, bytes: &[u8]) -> Result<Staged> {
        #[cfg(target_os = "linux")]
        if self.staged.len() >= BATCH_SYNC_EACH
            && let Some(spares) = &mut self.spares
            && let Some(name) = spares.stage(dev, bytes)
        {
            return Ok(Staged::Spare(name));
        }
        let _ = dev;
        let tmp = stage_in(dir, path, bytes)?;
        Ok(
            if self.staged.len() < BATCH_SYNC_EACH || !cfg!(target_os = "linux") {
                Staged::Open(tmp)
            } else {
                Staged::Closed(tmp.into_temp_path())
            },
        )
    }

    /// Write the new version of `path` beside it, or in a spare of a
    /// recycling batch (not yet in place).
    pub fn stage(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = parent_dir(path);
        let dev = match self.prepared.get(dir) {
            Some(dev) => *dev,
            None => {
                create_real_dir(dir)?;
                let dev = device_of(dir).map_err(|e| ModelError::io(dir, e))?;
                self.prepared.insert(dir.to_path_buf(), dev);
                dev
            }
        };
        let staged = self.temp_for(dir, dev, path, bytes)?;
        self.staged.push((path.to_path_buf(), staged));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }

    /// Put every staged file in place, durably; `placed` runs after each
    /// rename, with the target's path.
    pub fn commit(mut self, mut placed: impl FnMut(&Path)) -> Result<()> {
        let few = self.staged.len() <= BATCH_SYNC_EACH || !cfg!(target_os = "linux");
        for (path, staged) in &self.staged {
            if let Staged::Open(tmp) = staged {
                if few {
                    sync_file(tmp.as_file(), path, true).map_err(|e| ModelError::io(path, e))?;
                } else {
                    sync_filesystem(tmp.as_file(), path).map_err(|e| ModelError::io(path, e))?;
                    break;
                }
            }
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        // The first file, kept open to sync the filesystem again.
        let mut first: Option<(File, PathBuf)> = None;
        #[cfg(target_os = "linux")]
        let (mut spares, size) = (self.spares.take().filter(|_| !few), self.staged.len());
        for (path, staged) in self.staged {
            // The replaced file stays a spare rather than being freed.
            #[cfg(target_os = "linux")]
            if let Some(spares) = &mut spares
                && !matches!(staged, Staged::Spare(_))
            {
                spares.keep(&path, size);
            }
            let file = match staged {
                #[cfg(target_os = "linux")]
                Staged::Spare(name) => {
                    let spares = spares.as_mut().expect("a spare was staged from the spares");
                    spares
                        .place(&name, &path)
                        .map_err(|e| ModelError::io(&path, e))?;
                    None
                }
                Staged::Open(tmp) => Some(
                    tmp.persist(&path)
                        .map_err(|e| ModelError::io(&path, e.error))?,
                ),
                Staged::Closed(tmp) => {
                    tmp.persist(&path)
                        .map_err(|e| ModelError::io(&path, e.error))?;
                    None
                }
            };
            placed(&path);
            if let Some(dir) = path.parent()
                && !dirs.iter().any(|d| d == dir)
            {
                dirs.push(dir.to_path_buf());
            }
            if first.is_none() {
                first = file.map(|f| (f, path));
            }
        }
        match first {
            Some((file, path)) if !few => {
                sync_filesystem(&file, &path).map_err(|e| ModelError::io(&path, e))?
            }
            _ => dirs.iter().for_each(|d| sync_dir(d)),
        }
        Ok(())
    }
}

/// Sync the whole filesystem `file` is on (Linux `syncfs`; a batch syncs
/// each file elsewhere).
fn sync_filesystem(file: &File, path: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        tracing::debug!(target: "tether::sync", path = %path.display(), "syncfs");
        rustix::fs::syncfs(file).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    sync_file(file, path, true)
}

/// `std::fs::canonicalize(path)`, remembered for the rest of the process
/// once it succeeds: a store's directory is resolved once per command rather
/// than once per plugin call (each resolution costs a `readlink` per path
/// component, and a 10,000-object commit made three calls per object). A
/// link changed during the command is seen by the next one.
pub fn canonicalize_once(path: &Path) -> std::io::Result<PathBuf> {
    static RESOLVED: PathMemo = PathMemo::new();
    RESOLVED.get_or(path, || std::fs::canonicalize(path))
}

/// Paths resolved once per process: a `static` memo from a path to what it
/// resolved to, forgotten whole past 65,536 entries so it stays small. For
/// resolutions that cost a `readlink` per component and are asked once per
/// object of a big command (see [`canonicalize_once`]).
pub struct PathMemo(std::sync::Mutex<Option<std::collections::HashMap<PathBuf, PathBuf>>>);

impl Default for PathMemo {
    fn default() -> PathMemo {
        PathMemo::new()
    }
}

impl PathMemo {
    pub const fn new() -> PathMemo {
        PathMemo(std::sync::Mutex::new(None))
    }

    /// What `key` resolved to, from the memo or by `resolve` (remembered
    /// once it succeeds).
    pub fn get_or(
        &self,
        key: &Path,
        resolve: impl FnOnce() -> std::io::Result<PathBuf>,
    ) -> std::io::Result<PathBuf> {
        const MAX: usize = 1 << 16;
        let memo = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = memo().as_ref().and_then(|m| m.get(key)) {
            return Ok(found.clone());
        }
        let resolved = resolve()?;
        let mut memo = memo();
        let map = memo.get_or_insert_with(Default::default);
        if map.len() >= MAX {
            map.clear();
        }
        map.insert(key.to_path_buf(), resolved.clone());
        Ok(resolved)
    }
}

/// Files parsed once per process for each text they hold: a `static` memo
/// from a path to its last text and what that parsed to. A command that
/// reads the same file again (`workspace.toml`, and 10,000 manifests in a
/// commit's plan and again under its lock) pays for the read but not the
/// parse. The whole text is compared, so a changed file is always parsed
/// again: no stamp or clock can make it answer stale. Forgotten whole past
/// `max` entries.
pub struct ParseMemo<T> {
    entries: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, (String, T)>>>,
    max: usize,
}

impl<T: Clone> ParseMemo<T> {
    pub const fn new(max: usize) -> ParseMemo<T> {
        ParseMemo {
            entries: std::sync::Mutex::new(None),
            max,
        }
    }

    fn entries(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<std::collections::HashMap<PathBuf, (String, T)>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `text` (read from `path`) parses to: remembered when `path` last
    /// held this same text, else `parse`d (and remembered when it parses).
    pub fn parse<E>(
        &self,
        path: &Path,
        text: String,
        parse: impl FnOnce(&str) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        if let Some((_, value)) = self
            .entries()
            .as_ref()
            .and_then(|m| m.get(path))
            .filter(|(known, _)| *known == text)
        {
            return Ok(value.clone());
        }
        let value = parse(&text)?;
        let mut entries = self.entries();
        let map = entries.get_or_insert_with(Default::default);
        if map.len() >= self.max && !map.contains_key(path) {
            map.clear();
        }
        map.insert(path.to_path_buf(), (text, value.clone()));
        Ok(value)
    }
}

/// Identifies one version of a file: its size, modification time and inode.
/// An append, a rewrite in place or a rename over it changes the stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    len: u64,
    mtime: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    /// The stamp of the file at `path`, `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<FileStamp> {
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
}

/// `opts` set not to follow a symbolic link at the last component of the
/// path it opens (`O_NOFOLLOW`): opening a link fails with `ELOOP`
/// ([`is_link_error`]).
pub fn nofollow(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK: opening a FIFO for reading must not wait for a writer;
        // it changes nothing for a regular file.
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        opts.custom_flags(flags.bits() as i32);
    }
    opts
}

/// Open `path` for reading without following a link, and refuse anything but
/// a regular file (a FIFO or device a clone planted).
pub fn open_nofollow(path: &Path) -> std::io::Result<File> {
    open_sized(path).map(|(file, _)| file)
}

/// [`open_nofollow`], and the file's size then.
fn open_sized(path: &Path) -> std::io::Result<(File, u64)> {
    let file = nofollow(OpenOptions::new().read(true)).open(path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, md.len()))
}

/// The bytes of `path`, read without following a link ([`open_nofollow`]).
pub fn read_nofollow(path: &Path) -> std::io::Result<Vec<u8>> {
    read_nofollow_bounded(path, u64::MAX - 1)
}

/// The bytes of `path` as [`read_nofollow`] reads them, refused with
/// `InvalidData` when there are more than `max` (a clone chooses how big
/// the files under `.tether/` are).
pub fn read_nofollow_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let (file, len) = open_sized(path)?;
    // Room for the whole file and the read that finds its end: `take`
    // hides the size, and without it the read starts small and doubles (a
    // syscall per step, six for a manifest).
    let room = usize::try_from(len.min(max).saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(room.min(MAX_PREALLOCATED));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}

/// The most [`read_nofollow_bounded`] reserves up front from a file's size
/// (a bigger file grows the buffer as it is read).
const MAX_PREALLOCATED: usize = 64 << 20;

/// `bytes` as text, or the error naming `path` when they are not UTF-8.
pub fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        ModelError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        )
    })
}

/// Whether `e` is what opening a symbolic link with `O_NOFOLLOW` fails with.
pub fn is_link_error(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// A path for a message: as it is, or with control characters escaped when
/// it holds any (a clone chooses these names, and they reach a terminal).
pub fn shown(path: &Path) -> PathBuf {
    let text = path.to_string_lossy();
    if text.chars().any(char::is_control) {
        PathBuf::from(text.escape_debug().to_string())
    } else {
        path.to_path_buf()
    }
}

/// The refusal for a symbolic link where tether keeps its own file or
/// directory.
pub fn linked(path: &Path) -> ModelError {
    ModelError::invalid(
        shown(path),
        "is a symbolic link; tether never opens its own files under .tether/ through a link, \
         since a clone could point one anywhere. Remove the link (and untrack it if the VCS \
         tracks it), then run tether again",
    )
}

/// An I/O error on one of tether's own files, a link named as such.
pub fn io_error(path: &Path, e: std::io::Error) -> ModelError {
    if is_link_error(&e) {
        linked(path)
    } else {
        ModelError::io(path, e)
    }
}

/// Read a file as UTF-8 text, `None` when it does not exist. A symbolic link
/// or a special file is refused, never followed.
pub fn read_optional(path: &Path) -> Result<Option<String>> {
    match read_nofollow(path) {
        Ok(bytes) => utf8(path, bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_parsed_once_and_a_changed_one_again() {
        let memo: ParseMemo<usize> = ParseMemo::new(2);
        let parses = std::cell::Cell::new(0);
        let parse = |t: &str| -> std::result::Result<usize, String> {
            parses.set(parses.get() + 1);
            t.parse::<usize>().map_err(|e| e.to_string())
        };
        let (a, b, c) = (Path::new("a"), Path::new("b"), Path::new("c"));
        assert_eq!(memo.parse(a, "1".into(), parse), Ok(1));
        assert_eq!(memo.parse(a, "1".into(), parse), Ok(1));
        assert_eq!(parses.get(), 1, "the same text is not parsed again");
        assert_eq!(memo.parse(a, "2".into(), parse), Ok(2));
        assert_eq!(parses.get(), 2, "a changed text is");
        assert!(memo.parse(b, "x".into(), parse).is_err());
        assert!(memo.parse(b, "x".into(), parse).is_err());
        assert_eq!(parses.get(), 4, "a failure is not remembered");
        // Past `max` entries the memo starts over, and still answers right.
        memo.parse(b, "3".into(), parse).unwrap();
        memo.parse(c, "4".into(), parse).unwrap();
        assert_eq!(memo.parse(a, "2".into(), parse), Ok(2));
        assert_eq!(parses.get(), 7);
    }

    #[test]
    fn a_path_is_resolved_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["a", "b"] {
            std::fs::create_dir(base.join(d)).unwrap();
        }
        let link = base.join("link");
        std::os::unix::fs::symlink(base.join("a"), &link).unwrap();
        assert_eq!(canonicalize_once(&link).unwrap(), base.join("a"));
        // Repointed during the command: this process keeps its answer.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(base.join("b"), &link).unwrap();
        assert_eq!(canonicalize_once(&link).unwrap(), base.join("a"));
        assert_eq!(std::fs::canonicalize(&link).unwrap(), base.join("b"));
        // A failure is not remembered.
        let missing = base.join("missing");
        assert!(canonicalize_once(&missing).is_err());
        std::fs::create_dir(&missing).unwrap();
        assert_eq!(canonicalize_once(&missing).unwrap(), missing);
    }

    #[test]
    fn writes_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c.toml");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("c.toml")]);
        assert_eq!(read_optional(&dir.path().join("nope")).unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn links_are_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "mine").unwrap();
        let inside = dir.path().join("inside");
        std::fs::create_dir(&inside).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), inside.join("file")).unwrap();
        let e = read_optional(&inside.join("file")).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(is_link_error(
            &read_nofollow(&inside.join("file")).unwrap_err()
        ));

        // A write replaces the link; the file it pointed at keeps its bytes.
        write_atomic(&inside.join("file"), b"new").unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("secret")).unwrap(),
            "mine"
        );
        assert!(
            !std::fs::symlink_metadata(inside.join("file"))
                .unwrap()
                .is_symlink()
        );

        // A linked parent directory is refused before anything is written.
        std::os::unix::fs::symlink(&outside, inside.join("dir")).unwrap();
        let e = write_atomic(&inside.join("dir/x"), b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!outside.join("x").exists());

        // A FIFO is refused without waiting for a writer.
        let fifo = inside.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        assert!(read_optional(&fifo).is_err());
        assert_eq!(
            shown(Path::new(r"a\x1b[31m")),
            Path::new(r"a\x1b[31m"),
            "only real control characters are escaped"
        );
        assert_eq!(shown(Path::new("a\u{1b}[31m")), Path::new(r"a\u{1b}[31m"));
    }
}
