//! The main worktree: whether it is dirty, and bringing it along when tether
//! moves the branch it has checked out (a promote or merge onto the base, the
//! harness's commits).
//!
//! Dirty means what `git status --porcelain` would list: a staged change
//! (`.git/index` differs from `HEAD`'s tree, or holds a conflict), a tracked
//! file changed or gone in the worktree, or an untracked file that no ignore
//! rule covers. Tracked files are compared by content (their blob id), never
//! by timestamps; an ignored file is not dirt. The index is decoded from its
//! bytes (`gix_index::State::from_bytes`): gix's `File::at` asks for the
//! index file's mtime through `filetime`, which WASI lacks.
//!
//! Moving a checked-out branch rewrites the files that differ between the old
//! and the new tree and then the index (entries without stat data: git
//! re-reads such files once and refreshes them, as after a clone), so `git
//! status` afterwards is clean. It refuses a dirty checkout first, so nothing
//! of the user's is overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::objs::Kind;
use tether_sdk::{Error, Result};

use crate::refs::Lock;
use crate::repo::Repo;

/// A tracked entry: path → (blob id, mode bits).
type Entries = BTreeMap<BString, (ObjectId, u32)>;

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::backend(format!("cannot {what} {}: {e}", path.display()))
}

/// The index as tracked entries, and whether it holds a conflict.
fn read_index(repo: &Repo) -> Result<(Entries, bool)> {
    let path = repo.git_dir.join("index");
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((Entries::new(), false)),
        Err(e) => return Err(io("read", &path, e)),
    };
    let timestamp = filetime::FileTime::from_unix_time(0, 0);
    let (state, _) = gix::index::State::from_bytes(
        &bytes,
        timestamp,
        repo.gix.object_hash(),
        gix::index::decode::Options::default(),
    )
    .map_err(|e| Error::backend(format!("cannot read {}: {e}", path.display())))?;
    let mut entries = Entries::new();
    let mut conflict = false;
    for entry in state.entries() {
        if entry.stage_raw() != 0 {
            conflict = true;
            continue;
        }
        entries.insert(entry.path(&state).to_owned(), (entry.id, entry.mode.bits()));
    }
    Ok((entries, conflict))
}

/// The entries of a tree, flattened.
fn tree_entries(repo: &Repo, tree: ObjectId) -> Result<Entries> {
    let state = gix::index::State::from_tree(&tree, &repo.gix.objects, Default::default())
        .map_err(|e| Error::backend(format!("cannot read tree {tree}: {e}")))?;
    Ok(state
        .entries()
        .iter()
        .map(|e| (e.path(&state).to_owned(), (e.id, e.mode.bits())))
        .collect())
}

fn tree_of(repo: &Repo, commit: Option<ObjectId>) -> Result<ObjectId> {
    match commit {
        None => Ok(ObjectId::empty_tree(repo.gix.object_hash())),
        Some(id) => repo
            .gix
            .find_commit(id)
            .and_then(|c| c.tree_id().map(|t| t.detach()))
            .map_err(|e| Error::backend(format!("cannot read commit {id}: {e}"))),
    }
}

const MODE_SYMLINK: u32 = 0o120000;
const MODE_COMMIT: u32 = 0o160000;

fn blob_id(repo: &Repo, data: &[u8]) -> Result<ObjectId> {
    gix::objs::compute_hash(repo.gix.object_hash(), Kind::Blob, data)
        .map_err(|e| Error::backend(format!("cannot hash a file: {e}")))
}

/// The blob id of the worktree file at `path` as git would store it, or
/// `None` when it is missing.
fn worktree_blob(repo: &Repo, path: &Path, mode: u32) -> Result<Option<ObjectId>> {
    if mode == MODE_SYMLINK {
        return match fs::read_link(path) {
            Ok(target) => Ok(Some(blob_id(repo, target.as_os_str().as_encoded_bytes())?)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(_) => Ok(Some(ObjectId::null(repo.gix.object_hash()))),
        };
    }
    match fs::read(path) {
        Ok(data) => Ok(Some(blob_id(repo, &data)?)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        // A directory where a file was, say: changed.
        Err(_) => Ok(Some(ObjectId::null(repo.gix.object_hash()))),
    }
}

/// Why the main worktree is dirty (the first reason found), or `None` when
/// it is clean. A bare repository is never dirty.
pub fn dirt(repo: &Repo) -> Result<Option<String>> {
    let Some(root) = &repo.worktree else {
        return Ok(None);
    };
    let head = repo.refs.resolve("HEAD")?;
    let (index, conflict) = read_index(repo)?;
    if conflict {
        return Ok(Some("the index has unresolved conflicts".into()));
    }
    let head_entries = tree_entries(repo, tree_of(repo, head)?)?;
    if let Some(path) = first_difference(&index, &head_entries) {
        return Ok(Some(format!("{path} is staged")));
    }
    for (path, (id, mode)) in &index {
        if *mode == MODE_COMMIT {
            continue;
        }
        let file = root.join(path.to_str_lossy().as_ref());
        match worktree_blob(repo, &file, *mode)? {
            None => return Ok(Some(format!("{path} is deleted"))),
            Some(found) if found != *id => return Ok(Some(format!("{path} is modified"))),
            Some(_) => {}
        }
    }
    if let Some(path) = first_untracked(repo, root, &index)? {
        return Ok(Some(format!("{path} is untracked")));
    }
    Ok(None)
}

fn first_difference(a: &Entries, b: &Entries) -> Option<BString> {
    let keys: BTreeSet<&BString> = a.keys().chain(b.keys()).collect();
    keys.into_iter().find(|k| a.get(*k) != b.get(*k)).cloned()
}

/// The first file under `root` that the index does not track and no ignore
/// rule covers.
fn first_untracked(repo: &Repo, root: &Path, index: &Entries) -> Result<Option<String>> {
    let state = gix::index::State::new(repo.gix.object_hash());
    let mut excludes = repo
        .gix
        .excludes(
            &state,
            None,
            gix::worktree::stack::state::ignore::Source::WorktreeThenIdMappingIfNotSkipped,
        )
        .map_err(|e| Error::backend(format!("cannot read ignore rules: {e}")))?;
    // Directories that hold tracked files (their own ignore rules do not hide
    // what is tracked, and an untracked directory is reported whole).
    let tracked_dirs: BTreeSet<String> = index
        .keys()
        .flat_map(|p| {
            let p = p.to_str_lossy().into_owned();
            let mut dirs = Vec::new();
            let mut cur = p.as_str();
            while let Some((parent, _)) = cur.rsplit_once('/') {
                dirs.push(parent.to_string());
                cur = parent;
            }
            dirs
        })
        .collect();
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| io("list", &dir, e))?;
        let mut names: Vec<_> = entries
            .filter_map(|e| e.ok())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        names.sort();
        for (name, path) in names {
            if rel.is_empty() && name == ".git" {
                continue;
            }
            let child = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(&path).map_err(|e| io("stat", &path, e))?;
            let is_dir = meta.is_dir();
            if !is_dir && index.contains_key(child.as_bytes().as_bstr()) {
                continue;
            }
            if is_dir && tracked_dirs.contains(&child) {
                stack.push((path, child));
                continue;
            }
            let mode = if is_dir {
                gix::index::entry::Mode::DIR
            } else {
                gix::index::entry::Mode::FILE
            };
            let excluded = excludes
                .at_path(&child, Some(mode))
                .map(|p| p.is_excluded())
                .map_err(|e| Error::backend(format!("cannot match ignore rules: {e}")))?;
            if excluded {
                continue;
            }
            if is_dir {
                // An untracked directory is dirt only if it holds a file.
                if dir_has_file(&path) {
                    return Ok(Some(format!("{child}/")));
                }
                continue;
            }
            return Ok(Some(child));
        }
    }
    Ok(None)
}

fn dir_has_file(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let path = e.path();
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => dir_has_file(&path),
            Ok(_) => true,
            Err(_) => false,
        }
    })
}

/// Bring the main worktree and index from `old` to `new` (commits). Call with
/// the branch's ref lock held and after checking the worktree is clean.
pub fn sync(repo: &Repo, old: Option<ObjectId>, new: ObjectId) -> Result<()> {
    let Some(root) = &repo.worktree else {
        return Ok(());
    };
    let before = tree_entries(repo, tree_of(repo, old)?)?;
    let new_tree = tree_of(repo, Some(new))?;
    let after = tree_entries(repo, new_tree)?;
    // WASI has no stable way to make a symlink: refuse before touching anything.
    if let Some((path, _)) = after
        .iter()
        .find(|(p, e)| e.1 == MODE_SYMLINK && before.get(*p) != Some(*e))
    {
        return Err(Error::Capability(format!(
            "{path} is a symlink, which the git plugin cannot check out; move the branch \
             with git instead (`git merge`), then retry"
        )));
    }
    // Removals first (a file may become a directory), deepest paths first.
    for path in before.keys().rev() {
        if !after.contains_key(path) {
            let file = root.join(path.to_str_lossy().as_ref());
            match fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove", &file, e)),
            }
            remove_empty_parents(root, &file);
        }
    }
    for (path, (id, mode)) in &after {
        if before.get(path) == Some(&(*id, *mode)) || *mode == MODE_COMMIT {
            continue;
        }
        let file = root.join(path.to_str_lossy().as_ref());
        write_entry(repo, &file, *id, *mode)?;
    }
    // The index, from the new tree.
    let state = gix::index::State::from_tree(&new_tree, &repo.gix.objects, Default::default())
        .map_err(|e| Error::backend(format!("cannot build the index of {new_tree}: {e}")))?;
    let index_path = repo.git_dir.join("index");
    let file = gix::index::File::from_state(state, index_path.clone());
    let mut bytes = Vec::new();
    file.write_to(&mut bytes, gix::index::write::Options::default())
        .map_err(|e| Error::backend(format!("cannot encode the index: {e}")))?;
    let lock = Lock::acquire(&index_path, "the index")?;
    lock.commit(&bytes, "the index")
}

fn remove_empty_parents(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn write_entry(repo: &Repo, file: &Path, id: ObjectId, mode: u32) -> Result<()> {
    let blob = repo
        .gix
        .find_blob(id)
        .map_err(|e| Error::backend(format!("cannot read blob {id}: {e}")))?;
    if let Some(parent) = file.parent() {
        // A file where a directory must go: it was removed above if tracked.
        fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
    }
    if let Ok(meta) = fs::symlink_metadata(file)
        && meta.is_dir()
    {
        fs::remove_dir_all(file).map_err(|e| io("replace", file, e))?;
    }
    debug_assert_ne!(mode, MODE_SYMLINK, "sync refuses symlinks up front");
    fs::write(file, &blob.data).map_err(|e| io("write", file, e))
}
