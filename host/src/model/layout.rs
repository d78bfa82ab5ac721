//! Where a dataset's files live, and finding the dataset from any directory.
//!
//! ```text
//! <root>/tether.toml                 committed configuration
//! <root>/.tether/.gitignore          committed; ignores the per-checkout files
//! <root>/.tether/objects/<key>.toml  committed manifests
//! <root>/.tether/listings/<name>.jsonl  committed listings
//! <root>/.tether/plugins/            committed plugin components (by digest)
//! <root>/.tether/workspace.toml      per checkout
//! <root>/.tether/ops.jsonl           per checkout: the operation log
//! <root>/.tether/secrets.toml        per checkout: credentials, executables, SQL
//! <root>/.tether/cache/              per checkout: fingerprint caches, the history memo
//! <root>/.tether/lock                per checkout: the checkout lock
//! ```

use std::path::{Path, PathBuf};

use super::error::{ModelError, Result};
use super::fsutil;
use super::manifest::manifest_path;

/// The configuration file's name at the dataset root.
pub const CONFIG_FILE: &str = "tether.toml";
/// The dataset's directory at the root.
pub const DOT_DIR: &str = ".tether";

/// The entries `.tether/.gitignore` must hold. Anchored with `/` so an
/// object key like `cache/x` or `workspace` is never ignored by accident.
/// Leftover temporary files of atomic writes are ignored at any depth.
pub const GITIGNORE_ENTRIES: &[&str] = &[
    "/workspace.toml",
    "/ops.jsonl",
    "/secrets.toml",
    "/cache/",
    "/lock",
    ".tether-tmp-*",
];

/// The `.tether/.gitignore` that `init` writes.
pub fn gitignore_text() -> String {
    let mut s = String::from(
        "# Written by tether: per-checkout files, never committed.\n\
         # (secrets.toml, workspace.toml and ops.jsonl are refused while tracked.)\n",
    );
    for e in GITIGNORE_ENTRIES {
        s.push_str(e);
        s.push('\n');
    }
    s
}

/// `existing` with every missing entry appended, or `None` when nothing is
/// missing. Lines the user wrote are kept as they are.
pub fn updated_gitignore(existing: &str) -> Option<String> {
    let have: Vec<&str> = existing.lines().map(str::trim).collect();
    let missing: Vec<&str> = GITIGNORE_ENTRIES
        .iter()
        .copied()
        .filter(|e| !have.contains(e))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("# Added by tether: per-checkout files, never committed.\n");
    for e in missing {
        out.push_str(e);
        out.push('\n');
    }
    Some(out)
}

/// The paths of one dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of the dataset at `root` (the directory of `tether.toml`).
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    /// Find the dataset containing `start`: the nearest directory at or
    /// above it holding `tether.toml`.
    pub fn find(start: &Path) -> Result<Layout> {
        let start_abs = if start.is_absolute() {
            start.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| ModelError::io(start, e))?
                .join(start)
        };
        let mut dir = Some(start_abs.as_path());
        while let Some(d) = dir {
            if d.join(CONFIG_FILE).is_file() {
                return Ok(Layout::new(d));
            }
            dir = d.parent();
        }
        Err(ModelError::NotADataset { start: start_abs })
    }

    /// The dataset root.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `tether.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }
    /// `.tether/`.
    pub fn dot_dir(&self) -> PathBuf {
        self.root.join(DOT_DIR)
    }
    /// `.tether/.gitignore`.
    pub fn gitignore_file(&self) -> PathBuf {
        self.dot_dir().join(".gitignore")
    }
    /// `.tether/objects/`.
    pub fn objects_dir(&self) -> PathBuf {
        self.dot_dir().join("objects")
    }
    /// `.tether/objects/<key>.toml`.
    pub fn manifest_file(&self, key: &str) -> PathBuf {
        manifest_path(&self.objects_dir(), key)
    }
    /// `.tether/listings/`.
    pub fn listings_dir(&self) -> PathBuf {
        self.dot_dir().join("listings")
    }
    /// `.tether/listings/<name>.jsonl`.
    pub fn listing_file(&self, name: &str) -> PathBuf {
        self.listings_dir().join(format!("{name}.jsonl"))
    }
    /// `.tether/plugins/` (committed plugin components).
    pub fn plugins_dir(&self) -> PathBuf {
        self.dot_dir().join("plugins")
    }
    /// `.tether/workspace.toml`.
    pub fn workspace_file(&self) -> PathBuf {
        self.dot_dir().join("workspace.toml")
    }
    /// `.tether/ops.jsonl`.
    pub fn ops_file(&self) -> PathBuf {
        self.dot_dir().join("ops.jsonl")
    }
    /// `.tether/secrets.toml`.
    pub fn secrets_file(&self) -> PathBuf {
        self.dot_dir().join("secrets.toml")
    }
    /// `.tether/cache/`.
    pub fn cache_dir(&self) -> PathBuf {
        self.dot_dir().join("cache")
    }
    /// `.tether/lock` (the checkout lock).
    pub fn lock_file(&self) -> PathBuf {
        self.dot_dir().join("lock")
    }

    /// The per-checkout files the VCS must not track (security model), as
    /// paths relative to the root with `/` separators.
    pub fn untracked_paths() -> [&'static str; 3] {
        [
            ".tether/secrets.toml",
            ".tether/workspace.toml",
            ".tether/ops.jsonl",
        ]
    }

    /// Write `.tether/.gitignore` when missing, or add the entries an older
    /// one lacks. Returns whether it wrote.
    pub fn ensure_gitignore(&self) -> Result<bool> {
        let path = self.gitignore_file();
        let new = match fsutil::read_optional(&path)? {
            None => Some(gitignore_text()),
            Some(existing) => updated_gitignore(&existing),
        };
        match new {
            Some(text) => {
                fsutil::write_atomic(&path, text.as_bytes())?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let l = Layout::new("/d");
        assert_eq!(l.config_file(), Path::new("/d/tether.toml"));
        assert_eq!(
            l.manifest_file("zarr/imaging"),
            Path::new("/d/.tether/objects/zarr/imaging.toml")
        );
        assert_eq!(
            l.listing_file("ab"),
            Path::new("/d/.tether/listings/ab.jsonl")
        );
        assert_eq!(l.workspace_file(), Path::new("/d/.tether/workspace.toml"));
        assert_eq!(l.ops_file(), Path::new("/d/.tether/ops.jsonl"));
        assert_eq!(l.secrets_file(), Path::new("/d/.tether/secrets.toml"));
        assert_eq!(l.cache_dir(), Path::new("/d/.tether/cache"));
        assert_eq!(l.lock_file(), Path::new("/d/.tether/lock"));
        assert_eq!(l.gitignore_file(), Path::new("/d/.tether/.gitignore"));
    }

    #[test]
    fn find_walks_up() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let e = Layout::find(&root.join("a/b")).unwrap_err();
        assert!(e.to_string().contains("run `tether init`"), "{e}");
        assert_eq!(e.class(), "ConfigError");
        std::fs::write(root.join("tether.toml"), "").unwrap();
        assert_eq!(Layout::find(&root.join("a/b")).unwrap().root(), root);
        assert_eq!(Layout::find(&root).unwrap().root(), root);
    }

    #[test]
    fn gitignore() {
        assert_eq!(
            gitignore_text(),
            "# Written by tether: per-checkout files, never committed.\n\
             # (secrets.toml, workspace.toml and ops.jsonl are refused while tracked.)\n\
             /workspace.toml\n/ops.jsonl\n/secrets.toml\n/cache/\n/lock\n.tether-tmp-*\n"
        );
        assert_eq!(updated_gitignore(&gitignore_text()), None);
        let old = "/workspace.toml\n/ops.jsonl\nmine";
        assert_eq!(
            updated_gitignore(old).unwrap(),
            "/workspace.toml\n/ops.jsonl\nmine\n# Added by tether: per-checkout files, never committed.\n\
             /secrets.toml\n/cache/\n/lock\n.tether-tmp-*\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path());
        assert!(l.ensure_gitignore().unwrap());
        assert!(!l.ensure_gitignore().unwrap());
        std::fs::write(l.gitignore_file(), "/workspace.toml\n").unwrap();
        assert!(l.ensure_gitignore().unwrap());
        assert!(
            std::fs::read_to_string(l.gitignore_file())
                .unwrap()
                .contains("/secrets.toml\n")
        );
    }
}
