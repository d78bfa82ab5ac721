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
//! <root>/.tether/cache/              per checkout: fingerprint caches, the history memo,
//!                                    spare files for big manifest batches (`spare/`)
//! <root>/.tether/lock                per checkout: the checkout lock
//! ```
//!
//! Everything under `.tether/` can have come with a clone, so before a command
//! reads any of it [`Layout::check_dot_dir`] walks the directory without
//! following links and refuses a symbolic link anywhere in it (`.tether`
//! itself included), a special file, a nested `.git`, or a per-checkout file
//! that is not a regular file. The two directories that grow with the dataset
//! ([`DATASET_SIZED_DIRS`]: the manifests and the listings) are checked to be
//! real directories but not walked: the code that lists and opens their
//! entries applies the same rules to each (`manifest::walk` and its readers,
//! `listing`'s no-follow reads of flat names), so a command that touches one
//! manifest does not list ten thousand. `cache/spare/` ([`SPARE_DIR`]) is
//! likewise checked but not walked (`spares` checks each spare it uses).
//! After that check no path tether builds here can lead outside `.tether/`;
//! the readers also open with `O_NOFOLLOW` (`fsutil`), and the per-checkout
//! files must also be untracked (`Repo::find`).

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

/// The per-checkout files under `.tether/`: never tracked, never committed,
/// and only ever regular files.
pub const PER_CHECKOUT_FILES: &[&str] = &["workspace.toml", "ops.jsonl", "secrets.toml", "lock"];

/// The per-checkout directory under `.tether/` (caches): never tracked.
pub const PER_CHECKOUT_DIRS: &[&str] = &["cache"];

/// tether's directories under `.tether/`, which must be real directories.
pub const DIRS: &[&str] = &["objects", "listings", "cache", "plugins"];

/// The directories of [`DIRS`] whose entries grow with the dataset (a
/// manifest per object, a listing per directory state): `check_dot_dir`
/// does not walk them, since every reader of an entry in them checks that
/// entry itself (see the module doc).
pub const DATASET_SIZED_DIRS: &[&str] = &["objects", "listings"];

/// The directory under `cache/` holding spare files (a file per manifest a
/// big commit replaced): checked to be a real directory, not walked, since
/// it grows with the dataset and every spare is checked as it is used.
pub const SPARE_DIR: &str = "spare";

/// Whether `path` (relative to a VCS root, `/`-separated) is one of tether's
/// per-checkout files, or lies in its cache directory, or is a leftover
/// temporary file, in some dataset's `.tether/`: what tether must never
/// commit, whatever the ignore files say.
pub fn is_per_checkout_path(path: &str) -> bool {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts
        .last()
        .is_some_and(|name| name.starts_with(fsutil::TEMP_PREFIX))
        && parts.contains(&DOT_DIR)
    {
        return true;
    }
    parts.windows(2).enumerate().any(|(i, w)| {
        w[0] == DOT_DIR
            && ((PER_CHECKOUT_FILES.contains(&w[1]) && i + 2 == parts.len())
                || PER_CHECKOUT_DIRS.contains(&w[1]))
    })
}

/// The lines that keep the per-checkout paths of the dataset at `prefix`
/// (its path from the VCS root, empty or ending in `/`) ignored, for the
/// repository's `info/exclude`: anchored, with glob characters escaped.
pub fn exclude_lines(prefix: &str) -> Vec<String> {
    let mut escaped = String::new();
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    let dot = format!("/{escaped}{DOT_DIR}");
    let mut out: Vec<String> = PER_CHECKOUT_FILES
        .iter()
        .map(|f| format!("{dot}/{f}"))
        .collect();
    out.extend(PER_CHECKOUT_DIRS.iter().map(|d| format!("{dot}/{d}/")));
    out.push(format!("{dot}/**/{}*", fsutil::TEMP_PREFIX));
    out
}

/// Add the [`exclude_lines`] of the dataset at `prefix` that `exclude` (a
/// repository's `info/exclude`) lacks. Returns whether it wrote.
pub fn ensure_excluded(exclude: &Path, prefix: &str) -> Result<bool> {
    let existing = fsutil::read_optional(exclude)?.unwrap_or_default();
    let have: Vec<&str> = existing.lines().map(str::trim_end).collect();
    let missing: Vec<String> = exclude_lines(prefix)
        .into_iter()
        .filter(|l| !have.contains(&l.as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut out = existing.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("# Added by tether: per-checkout files, never committed.\n");
    for l in missing {
        out.push_str(&l);
        out.push('\n');
    }
    fsutil::write_atomic(exclude, out.as_bytes())?;
    Ok(true)
}

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
    /// `.tether/cache/spare/`: files replaced by big batches, kept for the
    /// next one to write into (`model::spares`).
    pub fn spare_dir(&self) -> PathBuf {
        self.cache_dir().join(SPARE_DIR)
    }
    /// `.tether/lock` (the checkout lock).
    pub fn lock_file(&self) -> PathBuf {
        self.dot_dir().join("lock")
    }

    /// The per-checkout paths the VCS must not track (security model), as
    /// paths relative to the root with `/` separators: the files, and the
    /// cache directory (anything tracked under it counts).
    pub fn untracked_paths() -> Vec<String> {
        PER_CHECKOUT_FILES
            .iter()
            .chain(PER_CHECKOUT_DIRS)
            .map(|name| format!("{DOT_DIR}/{name}"))
            .collect()
    }

    /// Refuse a `.tether/` that a clone could have turned against this
    /// checkout: `.tether` or anything under it that is a symbolic link, a
    /// special file (FIFO, socket, device) or a `.git` (a submodule, whose
    /// files its own repository tracks), a per-checkout file that is not a
    /// regular file, or one of tether's directories that is not a directory.
    /// The walk never follows a link, and stops at the
    /// [`DATASET_SIZED_DIRS`], whose readers check each entry they use. A
    /// missing `.tether/` is fine: tether creates it as a real directory.
    pub fn check_dot_dir(&self) -> Result<()> {
        let dot = self.dot_dir();
        let md = match std::fs::symlink_metadata(&dot) {
            Ok(md) => md,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ModelError::io(&dot, e)),
        };
        check_entry(&dot, md.file_type(), Expect::Dir)?;
        check_tree(&dot, Within::Top)
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

/// What one entry under `.tether/` must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Dir,
    File,
    Either,
}

fn check_tree(dir: &Path, within: Within) -> Result<()> {
    let top = within == Within::Top;
    let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ModelError::io(dir, e))?;
        let path = entry.path();
        // `file_type` comes from the directory entry (or an lstat): a link
        // is seen as a link, never as what it points at.
        let ft = entry.file_type().map_err(|e| ModelError::io(&path, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let expect = if !top {
            Expect::Either
        } else if PER_CHECKOUT_FILES.contains(&name.as_ref()) {
            Expect::File
        } else if DIRS.contains(&name.as_ref()) {
            Expect::Dir
        } else {
            Expect::Either
        };
        if name == ".git" {
            return Err(nested_repository(&path));
        }
        check_entry(&path, ft, expect)?;
        let unwalked = match within {
            Within::Top => DATASET_SIZED_DIRS.contains(&name.as_ref()),
            Within::Cache => name == SPARE_DIR,
            Within::Other => false,
        };
        if ft.is_dir() && !unwalked {
            let next = match within {
                Within::Top if name == "cache" => Within::Cache,
                _ => Within::Other,
            };
            check_tree(&path, next)?;
        }
    }
    Ok(())
}

/// Where [`check_tree`] is walking: `.tether/` itself, its `cache/`, or
/// deeper.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Within {
    Top,
    Cache,
    Other,
}

/// The refusal for a `.git` under `.tether/`.
pub(crate) fn nested_repository(path: &Path) -> ModelError {
    ModelError::invalid(
        fsutil::shown(path),
        "is a git repository inside .tether/ (a submodule): its files are tracked by that \
         repository, so a clone could supply tether's files through it. Remove it, then run \
         tether again",
    )
}

/// The refusal for a FIFO, socket or device under `.tether/`.
pub(crate) fn special_file(path: &Path) -> ModelError {
    ModelError::invalid(
        fsutil::shown(path),
        "is a special file (a FIFO, socket or device); tether keeps only regular files \
         and directories under .tether/. Remove it, then run tether again",
    )
}

fn check_entry(path: &Path, ft: std::fs::FileType, expect: Expect) -> Result<()> {
    if ft.is_symlink() {
        return Err(fsutil::linked(path));
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a regular file"
    } else {
        return Err(special_file(path));
    };
    let wanted = match expect {
        Expect::Dir if !ft.is_dir() => "a directory",
        Expect::File if !ft.is_file() => "a regular file",
        _ => return Ok(()),
    };
    Err(ModelError::invalid(
        fsutil::shown(path),
        format!(
            "is {what}, where tether keeps {wanted}. Move it away (and untrack it if the VCS \
             tracks it), then run tether again"
        ),
    ))
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
    fn per_checkout_paths() {
        for p in [
            ".tether/secrets.toml",
            ".tether/lock",
            "sub/ds/.tether/ops.jsonl",
            ".tether/workspace.toml",
            ".tether/cache/history-memo.bin",
            ".tether/cache",
            ".tether/objects/.tether-tmp-x1",
        ] {
            assert!(is_per_checkout_path(p), "{p}");
        }
        for p in [
            "tether.toml",
            ".tether/.gitignore",
            ".tether/objects/lock.toml",
            ".tether/objects/cache/x.toml",
            ".tether/listings/secrets.toml.jsonl",
            "secrets.toml",
            "lock",
        ] {
            assert!(!is_per_checkout_path(p), "{p}");
        }
    }

    #[test]
    fn exclude_lines_are_anchored_escaped_and_added_once() {
        assert_eq!(
            exclude_lines(""),
            [
                "/.tether/workspace.toml",
                "/.tether/ops.jsonl",
                "/.tether/secrets.toml",
                "/.tether/lock",
                "/.tether/cache/",
                "/.tether/**/.tether-tmp-*",
            ]
        );
        assert_eq!(exclude_lines("a b/[x]/")[3], r"/a\ b/\[x\]/.tether/lock");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("info/exclude");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "mine\n/.tether/lock\n").unwrap();
        assert!(ensure_excluded(&f, "").unwrap());
        assert!(!ensure_excluded(&f, "").unwrap());
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.starts_with("mine\n/.tether/lock\n"), "{text}");
        assert_eq!(text.matches("/.tether/lock").count(), 1, "{text}");
        assert!(text.contains("/.tether/secrets.toml\n"), "{text}");
    }

    #[cfg(unix)]
    #[test]
    fn dot_dir_check_refuses_links_and_special_files() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let l = Layout::new(&root);
        // No .tether/ yet: nothing to refuse.
        l.check_dot_dir().unwrap();
        let refused = |what: &str| {
            let e = l.check_dot_dir().unwrap_err();
            assert_eq!(e.class(), "ConfigError");
            let msg = e.to_string();
            assert!(msg.contains(what), "{what}: {msg}");
            msg
        };

        symlink(&outside, l.dot_dir()).unwrap();
        let msg = refused("symbolic link");
        assert!(msg.starts_with(&l.dot_dir().display().to_string()), "{msg}");
        std::fs::remove_file(l.dot_dir()).unwrap();

        std::fs::create_dir_all(l.objects_dir().join("zarr")).unwrap();
        std::fs::write(l.objects_dir().join("zarr/x.toml"), "").unwrap();
        std::fs::write(l.secrets_file(), "").unwrap();
        l.check_dot_dir().unwrap();

        for (name, is_dir) in [
            ("listings", true),
            ("cache", true),
            ("plugins", true),
            ("cache/deep", true),
            ("cache/spare", true),
            ("plugins/x.wasm", false),
            ("lock", false),
            ("workspace.toml", false),
            ("ops.jsonl", false),
        ] {
            let at = l.dot_dir().join(name);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(
                if is_dir {
                    outside.clone()
                } else {
                    outside.join("f")
                },
                &at,
            )
            .unwrap();
            let msg = refused("symbolic link");
            assert!(msg.contains(name), "{msg}");
            std::fs::remove_file(&at).unwrap();
        }
        for made in ["cache", "plugins"] {
            std::fs::remove_dir(l.dot_dir().join(made)).unwrap();
        }
        std::fs::remove_file(l.secrets_file()).unwrap();
        std::fs::create_dir(l.secrets_file()).unwrap();
        refused("is a directory, where tether keeps a regular file");
        std::fs::remove_dir(l.secrets_file()).unwrap();
        std::fs::write(l.cache_dir(), "").unwrap();
        refused("is a regular file, where tether keeps a directory");
        std::fs::remove_file(l.cache_dir()).unwrap();
        std::fs::create_dir_all(l.dot_dir().join(".git")).unwrap();
        refused("submodule");
        std::fs::remove_dir(l.dot_dir().join(".git")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            l.lock_file(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        refused("special file");
        std::fs::remove_file(l.lock_file()).unwrap();
        l.check_dot_dir().unwrap();

        // The directories that grow with the dataset are checked to be real
        // directories, not walked: their readers check each entry they use
        // (`manifest`'s tests), so a command touching one manifest does not
        // list them all.
        symlink(&outside, l.objects_dir().join("zarr/deep")).unwrap();
        std::fs::create_dir_all(l.listings_dir().join(".git")).unwrap();
        // So is the spare directory (`spares` checks each spare it uses).
        std::fs::create_dir_all(l.spare_dir()).unwrap();
        symlink(outside.join("f"), l.spare_dir().join("s")).unwrap();
        l.check_dot_dir().unwrap();
        assert!(
            crate::model::manifest::read_all(&l.objects_dir())
                .unwrap_err()
                .to_string()
                .contains("symbolic link")
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
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
