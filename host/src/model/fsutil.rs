//! Atomic file writes.
//!
//! Every file tether writes under `.tether/` and `tether.toml` is replaced
//! whole: written to a temporary file in the same directory, synced, then
//! renamed over the target. A crash leaves either the old file or the new one,
//! never a torn one. Temporary names start with [`TEMP_PREFIX`], which the
//! `.tether/.gitignore` ignores, so a leftover never shows as untracked.
//!
//! [`FileStamp`] tells whether a file was rewritten since it was last read,
//! for caches derived from one (the hash cache, status's drift memo).

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::error::{ModelError, Result};

/// Prefix of the temporary files atomic writes create next to their target.
pub const TEMP_PREFIX: &str = ".tether-tmp-";

/// Write `bytes` to `path` atomically, creating parent directories.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| ModelError::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| ModelError::io(path, e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| ModelError::io(path, e))?;
    tmp.persist(path)
        .map_err(|e| ModelError::io(path, e.error))?;
    // Make the rename itself durable; best effort, as not every platform
    // lets a directory be opened and synced.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
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

/// Read a file as UTF-8 text, `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ModelError::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
