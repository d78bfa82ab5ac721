//! Ref transactions of our own, written like git writes them: a lock file
//! `<ref>.lock` made with create-exclusive, the old value compared while the
//! lock is held, the new value written to the lock file and renamed over the
//! ref. Deleting a packed ref also rewrites `packed-refs` under
//! `packed-refs.lock`. gix's own transactions go through gix-tempfile, which
//! asks for a process id WASI does not have (research/formats.md §3.3), and
//! this is all a compare-and-swap needs.
//!
//! A git or jj process holding a lock makes our move fail (never wait, never
//! steal it), exactly as two gits would.

use std::collections::BTreeMap;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;
use tether_sdk::{Error, Result};

/// What a ref holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefValue {
    Object(ObjectId),
    /// `ref: <name>`
    Symbolic(String),
}

impl RefValue {
    pub fn object(&self) -> Option<ObjectId> {
        match self {
            RefValue::Object(id) => Some(*id),
            RefValue::Symbolic(_) => None,
        }
    }
}

/// The refs of one repository: `common_dir` is where `refs/` and
/// `packed-refs` live (the `.git` directory, or a bare repository).
#[derive(Debug, Clone)]
pub struct Refs {
    common_dir: PathBuf,
}

/// A held `<name>.lock`, removed on drop unless committed.
pub(crate) struct Lock {
    path: PathBuf,
    target: PathBuf,
    done: bool,
}

impl Lock {
    pub(crate) fn acquire(target: &Path, what: &str) -> Result<Lock> {
        let mut path = target.as_os_str().to_owned();
        path.push(".lock");
        let path = PathBuf::from(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err("create the directory of", what, e))?;
        }
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => Ok(Lock {
                path,
                target: target.to_path_buf(),
                done: false,
            }),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(Error::ref_moved(format!(
                "{what} is locked by another git process ({} exists); nothing was written. \
                 If no git is running, remove that file and retry",
                path.display()
            ))),
            Err(e) => Err(io_err("lock", what, e)),
        }
    }

    /// Write `content` to the lock file and rename it over the target.
    pub(crate) fn commit(mut self, content: &[u8], what: &str) -> Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&self.path)
            .map_err(|e| io_err("write", what, e))?;
        file.write_all(content)
            .and_then(|()| file.sync_all())
            .map_err(|e| io_err("write", what, e))?;
        drop(file);
        fs::rename(&self.path, &self.target).map_err(|e| io_err("update", what, e))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

fn io_err(verb: &str, what: &str, e: std::io::Error) -> Error {
    Error::backend(format!("cannot {verb} {what}: {e}"))
}

/// How a move checks the ref's current value.
#[derive(Debug, Clone, Copy)]
pub enum Prev {
    /// The ref must not exist.
    Absent,
    /// The ref must hold exactly this object.
    At(ObjectId),
}

impl Refs {
    pub fn new(common_dir: impl Into<PathBuf>) -> Refs {
        Refs {
            common_dir: common_dir.into(),
        }
    }

    fn loose_path(&self, name: &str) -> PathBuf {
        self.common_dir.join(name)
    }

    /// The value of ref `name` (`refs/heads/main`, `HEAD`): the loose file
    /// when there is one, else its line in `packed-refs`.
    pub fn read(&self, name: &str) -> Result<Option<RefValue>> {
        let path = self.loose_path(name);
        match fs::read(&path) {
            Ok(bytes) => return parse_loose(name, &bytes).map(Some),
            // A directory of that name (`refs/heads/a` when `a/b` exists) is no ref.
            Err(e) if e.kind() == ErrorKind::NotFound || path.is_dir() => {}
            Err(e) => return Err(io_err("read ref", name, e)),
        }
        Ok(self.packed()?.remove(name).map(RefValue::Object))
    }

    /// `HEAD` of the main worktree followed one level: the branch it names,
    /// or `None` when detached.
    pub fn head_branch(&self) -> Result<Option<String>> {
        Ok(match self.read("HEAD")? {
            Some(RefValue::Symbolic(target)) => Some(target),
            _ => None,
        })
    }

    /// The object `name` holds, following symbolic refs (`HEAD`).
    pub fn resolve(&self, name: &str) -> Result<Option<ObjectId>> {
        let mut name = name.to_string();
        for _ in 0..5 {
            match self.read(&name)? {
                Some(RefValue::Object(id)) => return Ok(Some(id)),
                Some(RefValue::Symbolic(next)) => name = next,
                None => return Ok(None),
            }
        }
        Err(Error::backend(format!(
            "ref {name} is a chain of symbolic refs too long to follow"
        )))
    }

    /// Every ref under `prefix` (`refs/tags/`), loose and packed, as name → object.
    pub fn list(&self, prefix: &str) -> Result<BTreeMap<String, ObjectId>> {
        let mut out: BTreeMap<String, ObjectId> = self
            .packed()?
            .into_iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .collect();
        let dir = self.common_dir.join(prefix);
        let mut stack = vec![(dir, prefix.trim_end_matches('/').to_string())];
        while let Some((dir, name)) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("list refs in", &name, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_err("list refs in", &name, e))?;
                let file_name = entry.file_name().to_string_lossy().into_owned();
                let child = format!("{name}/{file_name}");
                let path = entry.path();
                if path.is_dir() {
                    stack.push((path, child));
                } else if !file_name.ends_with(".lock") {
                    let bytes = fs::read(&path).map_err(|e| io_err("read ref", &child, e))?;
                    if let Ok(RefValue::Object(id)) = parse_loose(&child, &bytes) {
                        out.insert(child, id);
                    }
                }
            }
        }
        Ok(out)
    }

    /// `packed-refs` as name → object (peeled `^` lines skipped).
    fn packed(&self) -> Result<BTreeMap<String, ObjectId>> {
        let text = match fs::read(self.common_dir.join("packed-refs")) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(io_err("read", "packed-refs", e)),
        };
        let mut out = BTreeMap::new();
        for line in String::from_utf8_lossy(&text).lines() {
            if line.starts_with('#') || line.starts_with('^') || line.is_empty() {
                continue;
            }
            if let Some((hex, name)) = line.split_once(' ')
                && let Ok(id) = ObjectId::from_hex(hex.as_bytes())
            {
                out.insert(name.to_string(), id);
            }
        }
        Ok(out)
    }

    fn check(name: &str, current: Option<&RefValue>, prev: Prev) -> Result<()> {
        let current_id = current.and_then(RefValue::object);
        match (prev, current) {
            (Prev::Absent, None) => Ok(()),
            (Prev::Absent, Some(_)) => Err(Error::ref_moved(format!(
                "{name} already exists{}; nothing was written",
                current_id
                    .map(|id| format!(" (at {id})"))
                    .unwrap_or_default()
            ))),
            (Prev::At(want), _) if current_id == Some(want) => Ok(()),
            (Prev::At(want), None) => Err(Error::ref_moved(format!(
                "{name} was expected at {want} but does not exist; nothing was written"
            ))),
            (Prev::At(want), Some(_)) => Err(Error::ref_moved(format!(
                "{name} moved: expected {want}, found {}; nothing was written",
                current_id
                    .map(|id| id.to_string())
                    .unwrap_or_else(|| "a symbolic ref".into())
            ))),
        }
    }

    /// Set `name` to `new` if it holds what `prev` says, atomically: the
    /// check and the write happen under `<name>.lock`. `before_commit` runs
    /// with the lock held and the check passed (the checkout update of a
    /// promote or merge onto a checked-out branch).
    pub fn update(
        &self,
        name: &str,
        prev: Prev,
        new: ObjectId,
        before_commit: impl FnOnce(Option<ObjectId>) -> Result<()>,
    ) -> Result<()> {
        validate_name(name)?;
        let lock = Lock::acquire(&self.loose_path(name), name)?;
        let current = self.read(name)?;
        Self::check(name, current.as_ref(), prev)?;
        before_commit(current.as_ref().and_then(RefValue::object))?;
        lock.commit(format!("{new}\n").as_bytes(), name)?;
        tether_sdk::debug!("{name} -> {new}");
        Ok(())
    }

    /// Delete `name` if it holds what `prev` says.
    pub fn delete(&self, name: &str, prev: Prev) -> Result<()> {
        validate_name(name)?;
        let loose = self.loose_path(name);
        let lock = Lock::acquire(&loose, name)?;
        let current = self.read(name)?;
        Self::check(name, current.as_ref(), prev)?;
        if self.packed()?.contains_key(name) {
            let packed_path = self.common_dir.join("packed-refs");
            let packed_lock = Lock::acquire(&packed_path, "packed-refs")?;
            let text = fs::read(&packed_path).map_err(|e| io_err("read", "packed-refs", e))?;
            let mut out = String::new();
            let mut skipping = false;
            for line in String::from_utf8_lossy(&text).lines() {
                if line.starts_with('^') {
                    if !skipping {
                        out.push_str(line);
                        out.push('\n');
                    }
                    continue;
                }
                skipping = line.split_once(' ').is_some_and(|(_, n)| n == name);
                if !skipping {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            packed_lock.commit(out.as_bytes(), "packed-refs")?;
        }
        match fs::remove_file(&loose) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("delete", name, e)),
        }
        drop(lock);
        tether_sdk::debug!("{name} deleted");
        Ok(())
    }

    /// Branches (`refs/heads/...`) checked out in any worktree, with the
    /// worktree's name (`main worktree` or its name under `worktrees/`).
    pub fn checked_out(&self, bare: bool) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        if !bare && let Some(branch) = self.head_branch()? {
            out.push((branch, "the main worktree".to_string()));
        }
        let dir = self.common_dir.join("worktrees");
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let head = entry.path().join("HEAD");
                if let Ok(bytes) = fs::read(&head)
                    && let Ok(RefValue::Symbolic(branch)) = parse_loose("HEAD", &bytes)
                {
                    out.push((
                        branch,
                        format!("worktree {}", entry.file_name().to_string_lossy()),
                    ));
                }
            }
        }
        Ok(out)
    }
}

fn parse_loose(name: &str, bytes: &[u8]) -> Result<RefValue> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if let Some(target) = text.strip_prefix("ref:") {
        return Ok(RefValue::Symbolic(target.trim().to_string()));
    }
    ObjectId::from_hex(text.as_bytes())
        .map(RefValue::Object)
        .map_err(|e| Error::backend(format!("ref {name} holds {text:?}, not an object id: {e}")))
}

/// Refuse names git would refuse (`..`, control characters, `.lock`, ...).
pub fn validate_name(name: &str) -> Result<()> {
    gix::validate::reference::name(name.into())
        .map(|_| ())
        .map_err(|e| Error::invalid(format!("{name:?} is not a valid git ref name: {e}")))
}
