//! The dataset VCS: where tether's manifests live and how a dataset commit is made.
//!
//! A dataset is `tether.toml`, `.tether/objects/<key>.toml` and `.tether/listings/`
//! inside the user's own git or jj repository, and a dataset commit is a VCS
//! commit of those files. The engine talks to that repository only through the
//! [`Vcs`] trait, so git and jj are interchangeable behind it.
//!
//! - [`detect`] finds the repository enclosing a directory and opens the adapter for it.
//! - [`git::GitVcs`] is the git adapter, on `git2` (libgit2): no git subprocess on the
//!   hot path. The one subprocess it starts is a user's commit hook (`pre-commit`,
//!   `commit-msg`, `post-commit`), because the spec says a refusing hook stops a
//!   dataset commit; and [`require_git_version`] runs `git --version` once per process.
//! - [`jj::JjVcs`] is the jj adapter: the jj CLI for writes and for which commits are
//!   visible, the repository's backing git store (`git2`) for reading files and history.
//! - [`VcsEnv`] is the environment the adapter works in, captured once: the variables
//!   `git rev-parse --local-env-vars` lists (`GIT_DIR`, `GIT_INDEX_FILE`, ...) are
//!   dropped, so a git hook that runs tether still commits to the dataset's own
//!   repository, while `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` and the identity
//!   variables still apply.
//!
//! Paths given to and returned by the trait are repository-relative, `/`-separated and
//! UTF-8 (`.tether/objects/zarr/imaging.toml`); tether only ever names its own files.

pub mod git;
pub mod jj;
mod keyed_cache;
pub mod pin_push;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use git::GitVcs;
pub use jj::{JjVcs, JjVersion, MIN_JJ_VERSION};

/// The result type of this module.
pub type Result<T, E = VcsError> = std::result::Result<T, E>;

/// The oldest git tether runs with: 2.38 introduced `safe.bareRepository`, which the
/// `git` backend relies on.
pub const MIN_GIT_VERSION: (u32, u32, u32) = (2, 38, 0);

/// The prefix of a parking branch: `tether new REV` for a commit no branch names checks
/// it out on `tether/<rev12>`, so dataset commits made there stay reachable.
pub const PARKING_PREFIX: &str = "tether/";

/// Which version-control system an adapter drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VcsKind {
    /// git, through libgit2.
    Git,
    /// jj (Jujutsu), through its CLI and its git store.
    Jj,
}

impl fmt::Display for VcsKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VcsKind::Git => "git",
            VcsKind::Jj => "jj",
        })
    }
}

/// A commit id as the VCS prints it: lowercase hex (40 digits for git, and for jj's
/// git-backed commits). A string rather than a `git2::Oid`, so jj can use it too.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct CommitId(String);

impl CommitId {
    /// Wraps a full hex id. Not validated: ids come from the VCS itself or from files
    /// tether wrote, and [`Vcs::resolve`] is the way to check a user's string.
    pub fn new(hex: impl Into<String>) -> Self {
        CommitId(hex.into())
    }

    /// The full hex id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, as in a parking branch `tether/<rev12>`.
    pub fn short12(&self) -> &str {
        &self.0[..self.0.len().min(12)]
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the checkout's `HEAD` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadState {
    /// On a branch that has no commit yet (a fresh `git init`).
    Unborn { branch: String },
    /// On a branch (a bookmark tether works on).
    Branch { name: String, commit: CommitId },
    /// On a parking branch `tether/<rev12>`: a read-only working copy of a commit.
    Parked { branch: String, commit: CommitId },
    /// Detached at a commit.
    Detached { commit: CommitId },
}

impl HeadState {
    /// The commit checked out, `None` on an unborn branch.
    pub fn commit(&self) -> Option<&CommitId> {
        match self {
            HeadState::Unborn { .. } => None,
            HeadState::Branch { commit, .. }
            | HeadState::Parked { commit, .. }
            | HeadState::Detached { commit } => Some(commit),
        }
    }

    /// The bookmark this checkout works on: the branch (an unborn one too), `None` when
    /// detached or on a parking branch.
    pub fn bookmark(&self) -> Option<&str> {
        match self {
            HeadState::Unborn { branch } => Some(branch),
            HeadState::Branch { name, .. } => Some(name),
            HeadState::Parked { .. } | HeadState::Detached { .. } => None,
        }
    }
}

/// A local branch and the commit it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    /// The short name (`main`, `feat/x`, `tether/0123456789ab`).
    pub name: String,
    /// The commit it points at.
    pub commit: CommitId,
    /// Whether it is a `tether/<rev12>` parking branch rather than a bookmark.
    pub parking: bool,
}

/// The files under a prefix at one commit, path → content. Shared: a commit whose
/// subtree is unchanged from one already walked gets the same map.
pub type FileMap = BTreeMap<String, Arc<[u8]>>;

/// One commit of [`Vcs::history`].
#[derive(Debug, Clone)]
pub struct HistoryCommit {
    /// The commit.
    pub id: CommitId,
    /// Its parents, first parent first.
    pub parents: Vec<CommitId>,
    /// Author name and email.
    pub author_name: String,
    pub author_email: String,
    /// When it was authored and committed, with the recorded UTC offset.
    pub authored_at: chrono::DateTime<chrono::FixedOffset>,
    pub committed_at: chrono::DateTime<chrono::FixedOffset>,
    /// The full message.
    pub message: String,
    /// An id of the prefix's content (git: its tree id), `None` when the commit has
    /// nothing there. Equal ids mean equal [`files`](Self::files), so a caller can skip
    /// a manifest set it has already checked.
    pub files_id: Option<String>,
    /// Every file under the prefix, by repository path.
    pub files: Arc<FileMap>,
    /// A conflicted jj commit's terms, every side and base of the conflict, each as
    /// ([`files_id`](Self::files_id), [`files`](Self::files)) under the prefix; empty
    /// for a commit without a conflict. `files` alone is what git shows (jj copies the
    /// first side there), but spec/07 counts every side's manifests as references.
    pub conflict_terms: Vec<(Option<String>, Arc<FileMap>)>,
}

impl HistoryCommit {
    /// The commit's content under the prefix, then each conflict term's, each
    /// distinct `files_id` once and commits with nothing there left out.
    pub fn all_files(&self) -> Vec<(&str, &Arc<FileMap>)> {
        let mut out: Vec<(&str, &Arc<FileMap>)> = Vec::new();
        let terms = std::iter::once((&self.files_id, &self.files))
            .chain(self.conflict_terms.iter().map(|(id, f)| (id, f)));
        for (id, files) in terms {
            if let Some(id) = id
                && !out.iter().any(|(seen, _)| *seen == id.as_str())
            {
                out.push((id.as_str(), files));
            }
        }
        out
    }

    /// The paths under the prefix whose content the sides of a conflicted jj
    /// commit disagree on (a side lacking the file counts as disagreeing),
    /// sorted; empty for a commit without a conflict. jj interleaves the
    /// terms side, base, side, ...: only the sides count, since a file the
    /// sides agree on is resolved whatever the base held.
    pub fn conflicted_paths(&self) -> Vec<String> {
        let sides: Vec<&FileMap> = self
            .conflict_terms
            .iter()
            .step_by(2)
            .map(|(_, files)| &**files)
            .collect();
        let Some((first, rest)) = sides.split_first() else {
            return Vec::new();
        };
        let paths: std::collections::BTreeSet<&String> =
            sides.iter().flat_map(|files| files.keys()).collect();
        paths
            .into_iter()
            .filter(|path| rest.iter().any(|side| side.get(*path) != first.get(*path)))
            .cloned()
            .collect()
    }
}

/// One path with local changes, from [`Vcs::changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// The path (the new one for a rename; renames are not detected, so both sides show).
    pub path: String,
    /// Staged: the index differs from `HEAD`.
    pub staged: bool,
    /// Unstaged: the work tree differs from the index.
    pub unstaged: bool,
    /// Not tracked at all (listed whatever `status.showUntrackedFiles` says).
    pub untracked: bool,
    /// A merge conflict.
    pub conflicted: bool,
}

/// One checkout of the repository (a git worktree, a jj workspace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeInfo {
    /// The worktree's name (`git worktree`'s administrative name); `None` for the main one.
    pub name: Option<String>,
    /// Its work tree.
    pub path: PathBuf,
    /// The branch it has checked out, if any.
    pub branch: Option<String>,
    /// The commit it has checked out, `None` on an unborn branch.
    pub head: Option<CommitId>,
    /// Whether the checkout directory still exists (a deleted one is prunable).
    pub exists: bool,
    /// Whether this is the main worktree (the one holding the shared directory).
    pub is_main: bool,
    /// Whether this is the checkout the adapter was opened in.
    pub is_current: bool,
    /// Whether it is locked (`git worktree lock`).
    pub locked: bool,
}

/// The version-control surface tether relies on. Object-safe and shareable: the engine
/// holds a `Box<dyn Vcs>` and fans out across threads.
///
/// Every read of the work tree or index sees the disk as it is now (nothing is cached
/// across calls except immutable objects), because the user's own git commands run
/// between tether's.
pub trait Vcs: Send + Sync + fmt::Debug {
    /// Which VCS this is.
    fn kind(&self) -> VcsKind;

    /// The checkout's root: the work tree holding `tether.toml`.
    fn root(&self) -> &Path;

    /// The directory every checkout of the repository shares (git's common dir, the
    /// main worktree's `.git/`; jj's repo dir). The repository lock and the pinned,
    /// created and touched indexes live there.
    fn shared_dir(&self) -> &Path;

    /// The repository's own ignore file that no clone brings (git's
    /// `info/exclude`; for jj, its backing git store's, which jj reads too):
    /// where tether keeps its per-checkout files ignored whatever the
    /// committed `.gitignore` says.
    fn info_exclude(&self) -> Option<PathBuf> {
        None
    }

    /// Where `HEAD` is: branch, parking branch, detached, or unborn.
    fn head_state(&self) -> Result<HeadState>;

    /// The commit checked out, `None` before the first commit (unborn branch).
    fn head(&self) -> Result<Option<CommitId>> {
        Ok(self.head_state()?.commit().cloned())
    }

    /// The bookmark this checkout works on: the current branch, `None` when detached or
    /// on a `tether/<rev12>` parking branch. An unborn branch is still the bookmark.
    fn current_branch(&self) -> Result<Option<String>> {
        Ok(self.head_state()?.bookmark().map(str::to_owned))
    }

    /// Every bookmark the working copy is on, the first being [`current_branch`](Self::current_branch).
    /// git: the checked-out branch. jj: the bookmarks at `@`, then at `@-`.
    fn working_bookmarks(&self) -> Result<Vec<String>> {
        Ok(self.current_branch()?.into_iter().collect())
    }

    /// Bookmarks in conflict (jj: moved concurrently to several commits); git has none.
    fn conflicted_bookmarks(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Conflicts under `prefix` that no later commit resolved: the visible head
    /// commits (working copies included) that carry one, with the conflicted
    /// paths. A git commit never records a conflict, so git has none.
    fn unresolved_conflicts(&self, _prefix: &str) -> Result<Vec<(CommitId, Vec<String>)>> {
        Ok(Vec::new())
    }

    /// Resolves a user's `REV` (full or short sha, branch, tag, `HEAD~2`, ...) to a
    /// commit, refusing an unknown or ambiguous one with [`VcsError::UnknownRevision`].
    fn resolve(&self, rev: &str) -> Result<CommitId>;

    /// Every local branch, sorted by name, parking branches included and marked.
    fn branches(&self) -> Result<Vec<BranchInfo>>;

    /// The commit a local branch points at, `None` when there is no such branch.
    fn branch_head(&self, name: &str) -> Result<Option<CommitId>>;

    /// Every tag that leads to a commit (an annotated tag by the commit it
    /// peels to), sorted by name; `parking` is always false.
    fn tags(&self) -> Result<Vec<BranchInfo>> {
        Ok(Vec::new())
    }

    /// jj's change id of each visible commit, by commit id; empty where the
    /// VCS has no change ids (git).
    fn change_ids(&self) -> Result<std::collections::HashMap<String, String>> {
        Ok(std::collections::HashMap::new())
    }

    /// `error` with a bookmark suggested when it is an unknown revision that
    /// looks like a mistyped bookmark name. Call it holding no lock of the
    /// repository: it lists the branches.
    fn suggest_revision(&self, error: VcsError) -> VcsError {
        match error {
            VcsError::UnknownRevision {
                rev,
                detail,
                suggestion,
            } if suggestion.is_empty() => {
                let known = self.branches().unwrap_or_default();
                let suggestion = crate::model::suggest::did_you_mean(
                    &rev,
                    known.iter().filter(|b| !b.parking).map(|b| b.name.as_str()),
                );
                VcsError::UnknownRevision {
                    rev,
                    detail,
                    suggestion,
                }
            }
            other => other,
        }
    }

    /// [`VcsError::UnknownBranch`] for `name`, suggesting the closest bookmark.
    /// Call it holding no lock of the repository: it lists the branches.
    fn unknown_branch(&self, name: &str) -> VcsError {
        let known = self.branches().unwrap_or_default();
        VcsError::UnknownBranch {
            name: name.to_owned(),
            suggestion: crate::model::suggest::did_you_mean(
                name,
                known.iter().filter(|b| !b.parking).map(|b| b.name.as_str()),
            ),
        }
    }

    /// A file's content at a commit, `None` when the commit has no file there.
    fn read_file(&self, commit: &CommitId, path: &str) -> Result<Option<Vec<u8>>>;

    /// Every file under a directory prefix at a commit (recursively), sorted. An empty
    /// prefix means the whole tree.
    fn list_files(&self, commit: &CommitId, prefix: &str) -> Result<Vec<String>>;

    /// Streams all visible history (git: every commit reachable from a branch or from
    /// any checkout's `HEAD`; jj: every visible commit that is no workspace's working
    /// copy), newest first in topological order, each commit once, with
    /// the files under `prefix`. Unchanged content is read once per walk.
    fn history<'a>(
        &'a self,
        prefix: &str,
    ) -> Result<Box<dyn Iterator<Item = Result<HistoryCommit>> + 'a>>;

    /// One commit read as [`history`](Self::history) reads each: its files
    /// under `prefix`, and a conflicted jj commit's every side and base.
    fn commit_files(&self, commit: &CommitId, prefix: &str) -> Result<HistoryCommit>;

    /// The ids of every commit [`history`](Self::history) would yield, in its order,
    /// without reading them: how a caller checks that a recorded commit still exists.
    fn visible_ids(&self) -> Result<Vec<CommitId>>;

    /// A cheap key of what [`history`](Self::history) would walk: equal keys
    /// mean the same visible commits in the same order, so a caller may reuse
    /// a walk it remembers under the key (git: the walk's tips and what can
    /// change parents; jj: the operation heads). `None` when the VCS cannot
    /// say without walking (then nothing is reused).
    fn history_key(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// sha256 (hex) over every visible commit id, sorted: a commit made in any checkout
    /// changes it, which stales a saved `gc` plan.
    fn history_digest(&self) -> Result<String>;

    /// Which of `paths` the VCS tracks (in `HEAD`'s tree or in the index); a directory
    /// counts when anything under it is tracked. Returned in the order given.
    fn tracked(&self, paths: &[&str]) -> Result<Vec<String>>;

    /// Every path with staged, unstaged or untracked changes (ignored files excluded).
    fn changes(&self) -> Result<Vec<PathChange>>;

    /// Whether the checkout has no changes outside `prefix` (a directory, e.g.
    /// `.tether`; empty excepts nothing). `abandon` and `new` refuse a dirty tree with this.
    fn is_clean_except(&self, prefix: &str) -> Result<bool> {
        let prefix = normalize_prefix(prefix)?;
        Ok(self
            .changes()?
            .iter()
            .all(|c| !prefix.is_empty() && under_prefix(&c.path, &prefix)))
    }

    /// Commits exactly `paths`' current work-tree contents (added, modified or deleted)
    /// on top of `HEAD`, like `git commit -- PATH...` (untracked paths included), and
    /// moves the current branch (or makes its first commit). Every other staged or
    /// unstaged change stays as it was. Runs the user's `pre-commit`, `commit-msg` and
    /// `post-commit` hooks; a refusing hook leaves index and branch untouched.
    fn commit_paths(&self, paths: &[&str], message: &str) -> Result<CommitId>;

    /// [`commit_paths`](Self::commit_paths) for the working copy's `bookmark`, which
    /// moves onto the new commit (jj: in the same operation). git commits on the
    /// checked-out branch, which is the bookmark.
    fn commit_on_bookmark(
        &self,
        paths: &[&str],
        message: &str,
        bookmark: &str,
    ) -> Result<CommitId> {
        let _ = bookmark;
        self.commit_paths(paths, message)
    }

    /// Creates branch `name` at `commit`, refusing an existing one.
    fn create_branch(&self, name: &str, commit: &CommitId) -> Result<()>;

    /// Checks out branch `name`, updating work tree and index; refuses when local
    /// changes would be overwritten, or when another checkout has the branch.
    /// Point an unborn HEAD (no commit yet) at branch `name`, so the first
    /// commit lands there: how `init` puts a fresh repository on the trunk.
    /// Refused once HEAD has a commit.
    fn set_unborn_branch(&self, name: &str) -> Result<()>;

    fn switch_branch(&self, name: &str) -> Result<()>;

    /// Checks out `commit` detached, with the same safety as [`switch_branch`](Self::switch_branch).
    fn checkout_detached(&self, commit: &CommitId) -> Result<()>;

    /// Checks out `commit` on a parking branch `tether/<rev12>` (reused when it still
    /// points there; `tether/<rev12>-2`, `-3`, ... when dataset commits moved it) and
    /// returns the branch's name. Parking branches are never deleted by tether.
    fn park(&self, commit: &CommitId) -> Result<String>;

    /// Moves branch `name` to `to`, only from `expected` (a compare-and-swap:
    /// [`VcsError::BranchMoved`] and nothing moved when it points elsewhere). A branch
    /// checked out in another checkout is refused; the current checkout's own branch
    /// moves without touching its work tree (the caller knows the trees agree).
    fn move_branch(&self, name: &str, to: &CommitId, expected: &CommitId) -> Result<()>;

    /// Deletes branch `name`, only while it points at `expected`. A branch checked out
    /// in any checkout is refused; an absent one is success.
    fn delete_branch(&self, name: &str, expected: &CommitId) -> Result<()>;

    /// Whether `ancestor` is `descendant` or one of its ancestors.
    fn is_ancestor(&self, ancestor: &CommitId, descendant: &CommitId) -> Result<bool>;

    /// Moves the current branch back to `to` keeping the work tree and index as
    /// they are (`git reset --soft`): how `undo` uncommits a dataset commit.
    fn reset_soft(&self, to: &CommitId) -> Result<()>;

    /// Drops `commits` from the current branch's line, keeping every later
    /// commit's content under `exact_prefix` exactly as it was (a manifest is
    /// a whole state, not a patch) and replaying the rest of each later commit
    /// onto the new line; a conflict outside `exact_prefix` aborts with nothing
    /// changed. Each commit must be on the current branch's first-parent line
    /// (no merges in between), and the work tree clean. Moves the branch and
    /// the work tree; returns (old id, new id) for each rewritten commit.
    fn drop_commits(
        &self,
        commits: &[CommitId],
        exact_prefix: &str,
    ) -> Result<Vec<(CommitId, CommitId)>>;

    /// The commits only branch `name` reaches, newest first: reachable from it
    /// but from no other branch, tag or other checkout's `HEAD`. What remains
    /// reachable otherwise is listed in the second value (the refs keeping it).
    fn exclusive_commits(&self, name: &str) -> Result<(Vec<CommitId>, Vec<String>)>;

    /// Every checkout of the repository, the main one first.
    fn worktrees(&self) -> Result<Vec<WorktreeInfo>>;

    /// Adds a checkout at `path` (which must not exist or be empty) on existing branch
    /// `branch`, as `git worktree add PATH BRANCH`.
    fn add_worktree(&self, path: &Path, branch: &str) -> Result<WorktreeInfo>;

    /// Removes the checkout at `path` and its administrative files, as `git worktree
    /// remove`: a checkout with changes or untracked files is refused unless `force`; a
    /// checkout whose directory is already gone is pruned.
    fn remove_worktree(&self, path: &Path, force: bool) -> Result<()>;
}

/// `exe --version`'s output, run once per process and executable (git's and
/// jj's version floors both read it), or why it could not run.
pub(crate) fn version_banner(exe: &Path, env: &VcsEnv) -> std::result::Result<String, String> {
    type Banners = std::sync::Mutex<BTreeMap<PathBuf, std::result::Result<String, String>>>;
    static CACHE: std::sync::OnceLock<Banners> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry(exe.to_owned())
        .or_insert_with(|| {
            let out = std::process::Command::new(exe)
                .arg("--version")
                .env_clear()
                .envs(env.vars())
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "{} ({})",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .clone()
}

/// Which adapter [`detect`] opens when a directory holds both `.jj` and `.git`
/// (`[vcs] prefer` in `tether.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prefer {
    /// jj, the spec's default for colocated repositories.
    #[default]
    Jj,
    /// git.
    Git,
}

/// Finds the repository enclosing `start` (any subdirectory of a checkout) and opens its
/// adapter, with the process environment as [`VcsEnv::from_process`] filters it.
pub fn detect(start: &Path, prefer: Prefer) -> Result<Box<dyn Vcs>> {
    detect_with_env(start, prefer, VcsEnv::from_process())
}

/// [`detect`] with an explicit environment (tests, and callers that already built one).
pub fn detect_with_env(start: &Path, prefer: Prefer, env: VcsEnv) -> Result<Box<dyn Vcs>> {
    let start =
        std::path::absolute(start).map_err(|e| VcsError::io("resolving the start directory", e))?;
    // The nearest directory holding `.jj` or `.git` decides; jj colocates `.git` next
    // to `.jj`, which is where `prefer` applies.
    for dir in start.ancestors() {
        let has_jj = dir.join(".jj").is_dir();
        let has_git = dir.join(".git").exists();
        if has_jj && (!has_git || prefer == Prefer::Jj) {
            return Ok(Box::new(JjVcs::open_with_env(dir, env)?));
        }
        if has_git {
            break;
        }
    }
    // No `.git` found above is fine too: libgit2's discovery also honours
    // GIT_CEILING_DIRECTORIES and gitfiles, and gives the real error.
    Ok(Box::new(GitVcs::open_with_env(&start, env)?))
}

/// `git rev-parse --local-env-vars` (git 2.47), plus the `GIT_CONFIG_KEY_<n>` /
/// `GIT_CONFIG_VALUE_<n>` pairs `GIT_CONFIG_COUNT` announces: what would point git at
/// another repository or add configuration to it.
pub const LOCAL_ENV_VARS: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
];

/// Whether `name` is one of the variables tether clears before any VCS work.
pub fn is_local_env_var(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    LOCAL_ENV_VARS.contains(&name)
        || name
            .strip_prefix("GIT_CONFIG_KEY_")
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        || name
            .strip_prefix("GIT_CONFIG_VALUE_")
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// The environment the VCS adapter works in and hands to the hooks it runs: a snapshot
/// of variables without [`LOCAL_ENV_VARS`]. Captured once, so the adapter never reads
/// the process environment behind the engine's back, and tests can inject one without
/// touching the process's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VcsEnv {
    vars: BTreeMap<OsString, OsString>,
}

impl VcsEnv {
    /// This process's environment, filtered.
    pub fn from_process() -> Self {
        Self::from_vars(std::env::vars_os())
    }

    /// The given variables, filtered.
    pub fn from_vars<K: Into<OsString>, V: Into<OsString>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let vars = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(k, _)| !is_local_env_var(k))
            .collect();
        VcsEnv { vars }
    }

    /// The same environment with `name` set to `value` (how the engine points the jj
    /// adapter at `[vcs] jj_path`).
    pub fn with_var(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.vars.insert(OsString::from(name), value.into());
        self
    }

    /// One variable, `None` when unset or not UTF-8.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(OsStr::new(name)).and_then(|v| v.to_str())
    }

    /// One variable as the OS gave it.
    pub fn get_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// Every variable, for a subprocess (`Command::env_clear().envs(env.vars())`).
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }
}

/// A git version, as `git --version` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GitVersion(pub u32, pub u32, pub u32);

impl fmt::Display for GitVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Refuses a git older than [`MIN_GIT_VERSION`]. Runs `exe --version` once per process
/// and executable (cached, outcome included). An unparseable banner (a custom build)
/// passes, as the spec's implementation did, and returns `None`.
pub fn require_git_version(exe: &Path, env: &VcsEnv) -> Result<Option<GitVersion>> {
    git::require_git_version(exe, env)
}

/// Normalizes a repository path given to the trait: relative, `/`-separated, no `.`
/// or `..` segments, no trailing `/`. Refuses anything that could leave the checkout.
pub fn normalize_path(path: &str) -> Result<String> {
    let trimmed = path.trim_end_matches('/');
    let bad = || VcsError::InvalidPath {
        path: path.to_owned(),
    };
    if trimmed.is_empty()
        || trimmed.starts_with('/')
        || trimmed.contains('\\')
        || trimmed.contains('\0')
    {
        return Err(bad());
    }
    let mut parts = Vec::new();
    for seg in trimmed.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(bad()),
            s => parts.push(s),
        }
    }
    if parts.is_empty() || parts[0] == ".git" {
        return Err(bad());
    }
    Ok(parts.join("/"))
}

/// [`normalize_path`] for a directory prefix, where empty (or `.`) means everything.
pub fn normalize_prefix(prefix: &str) -> Result<String> {
    let p = prefix.trim_start_matches("./");
    if p.is_empty() || p == "." || p == "/" {
        return Ok(String::new());
    }
    normalize_path(p)
}

/// Whether `path` is `prefix` itself or under it (`prefix` normalized, empty = all).
pub fn under_prefix(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// Whether `name` is a `tether/<rev12>` parking branch (or a `-2`, `-3` sibling).
pub fn is_parking_branch(name: &str) -> bool {
    name.strip_prefix(PARKING_PREFIX).is_some_and(|rest| {
        let (hex, suffix) = rest.split_once('-').unwrap_or((rest, "1"));
        hex.len() == 12
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            && !suffix.is_empty()
            && suffix.bytes().all(|b| b.is_ascii_digit())
    })
}

/// A version-control operation failed. Every message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    #[error(
        "{} is not inside a git or jj repository: run `git init` (or `jj git init`) first, then `tether init`",
        start.display()
    )]
    NotARepository { start: PathBuf },

    #[error(
        "{} is a bare git repository: tether needs a checkout with a working tree (`git clone` without `--bare`, or `git worktree add`)",
        path.display()
    )]
    BareRepository { path: PathBuf },

    #[error(
        "{} is a jj repository without a git backend: tether reads jj history from its git store (`jj git init`)",
        root.display()
    )]
    JjNotGitBacked { root: PathBuf },

    #[error(
        "this jj workspace has no working-copy commit (was it forgotten? `jj workspace update-stale` or `jj workspace add` make one)"
    )]
    JjNoWorkingCopy,

    #[error("the jj working copy is a merge (parents {}): a dataset commit needs one parent. `jj new BOOKMARK` first", parents.join(", "))]
    JjMergeWorkingCopy { parents: Vec<String> },

    #[error(
        "bookmark `{bookmark}` is not at `@` or `@-`: `tether new {bookmark} --keep` (or `jj new {bookmark}`) brings the working copy back"
    )]
    JjBookmarkNotHere { bookmark: String },

    #[error("jj {found} ({}) is too old: tether needs jj {}.{} or newer. Install a newer jj (`cargo install --locked jj-cli`), or point TETHER_JJ or `[vcs] jj_path` in .tether/secrets.toml at one", exe.display(), MIN_JJ_VERSION.0, MIN_JJ_VERSION.1)]
    JjTooOld { exe: PathBuf, found: JjVersion },

    #[error("could not run `{} --version`: {detail}. Install jj {}.{} or newer, or point TETHER_JJ at one (a jj reachable only through `[vcs] jj_path` in .tether/secrets.toml also needs TETHER_JJ: that file is read only after jj has said it is untracked)", exe.display(), MIN_JJ_VERSION.0, MIN_JJ_VERSION.1)]
    JjUnavailable { exe: PathBuf, detail: String },

    #[error("jj {command}: {message}")]
    Jj { command: String, message: String },

    #[error(
        "unknown revision `{rev}`{suggestion}: name a commit id (or a unique prefix of one), a branch or bookmark, a tag, or an expression such as `HEAD~2` (git) or `@-` (jj) ({detail})"
    )]
    UnknownRevision {
        rev: String,
        detail: String,
        /// ` (did you mean "x"?)` when `rev` is close to a bookmark's name,
        /// else empty ([`Vcs::suggest_revision`]).
        suggestion: String,
    },

    #[error(
        "the repository has no commit yet: make a first commit (`tether commit`, or `git commit`) first"
    )]
    NoCommitYet,

    #[error("no branch named `{name}`{suggestion} (`git branch` lists them)")]
    UnknownBranch {
        name: String,
        /// ` (did you mean "x"?)` or empty ([`Vcs::unknown_branch`]).
        suggestion: String,
    },

    #[error(
        "a branch named `{name}` already exists: pick another name, or join it instead of creating it"
    )]
    BranchExists { name: String },

    #[error("cannot abandon {what}: {why}")]
    CannotAbandon { what: String, why: String },

    #[error("`{name}` is not a valid git branch name")]
    InvalidBranchName { name: String },

    #[error(
        "branch `{name}` moved: it is at {found}, not at {expected} as this operation reviewed; \
         look at `git log {name}` and run the command again"
    )]
    BranchMoved {
        name: String,
        expected: String,
        found: String,
    },

    #[error("branch `{branch}` is checked out in another worktree, {}: switch that checkout to another branch first, or work there", path.display())]
    BranchCheckedOut { branch: String, path: PathBuf },

    #[error(
        "`{path}` is not a path inside the checkout (relative, `/`-separated, no `..`, not under `.git`)"
    )]
    InvalidPath { path: String },

    #[error("`{path}` is a directory, not a file tether can commit")]
    NotAFile { path: String },

    #[error(
        "`{path}` is one of tether's per-checkout files (secrets, workspace state, op log, lock, caches): tether never commits it, whatever the ignore files say. Nothing was committed"
    )]
    PerCheckoutPath { path: String },

    #[error("nothing to commit: {} {} already committed as they are", paths.join(", "), if paths.len() == 1 { "is" } else { "are" })]
    NothingToCommit { paths: Vec<String> },

    #[error("the commit message is empty (after the commit-msg hook): nothing was committed")]
    EmptyMessage,

    #[error(
        "git needs your identity to commit ({missing} is not set): run `git config --global user.name \"Your Name\"` and `git config --global user.email you@example.com` (or without `--global`, for this repository only)"
    )]
    IdentityMissing { missing: &'static str },

    #[error(
        "{var}={value:?} is not a date git understands (use `@<unix-seconds> +0000`, RFC 2822 or ISO 8601)"
    )]
    InvalidDate { var: &'static str, value: String },

    #[error("the {hook} hook refused the commit ({status}); nothing was committed and the index is as it was{}", if output.trim().is_empty() { String::new() } else { format!(". Its output:\n{}", output.trim_end()) })]
    HookRefused {
        hook: &'static str,
        status: String,
        output: String,
    },

    #[error("could not run the {hook} hook {}: {source} (make it executable with a valid `#!` line, or remove it)", path.display())]
    HookFailed {
        hook: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{} exists: another git process seems to be running in this repository. If none is, remove that file and retry", path.display())]
    IndexLocked { path: PathBuf },

    #[error(
        "the repository is in the middle of a {state} (`git status` says how to finish or abort it); finish it first"
    )]
    OperationInProgress { state: String },

    #[error("checking out would overwrite local changes to {}: commit or stash them first", paths.join(", "))]
    CheckoutConflict { paths: Vec<String> },

    #[error("no worktree at {} (`git worktree list` shows them)", path.display())]
    UnknownWorktree { path: PathBuf },

    #[error("{} is the main worktree, which holds the repository itself; it cannot be removed", path.display())]
    MainWorktree { path: PathBuf },

    #[error("the worktree at {} is locked (`git worktree unlock` it first)", path.display())]
    WorktreeLocked { path: PathBuf },

    #[error("the worktree at {} has changes or untracked files ({}): commit or remove them, or force the removal", path.display(), paths.join(", "))]
    WorktreeDirty { path: PathBuf, paths: Vec<String> },

    #[error("{} already exists and is not empty: pick another path for the worktree", path.display())]
    WorktreePathTaken { path: PathBuf },

    #[error("git {found} ({}) is too old: tether needs git {}.{} or newer (for `safe.bareRepository`). Install a newer git, or point TETHER_GIT or `[vcs] git_path` in .tether/secrets.toml at one", exe.display(), MIN_GIT_VERSION.0, MIN_GIT_VERSION.1)]
    GitTooOld { exe: PathBuf, found: GitVersion },

    #[error("could not run `{} --version`: {detail}. Install git {}.{} or newer, or point TETHER_GIT or `[vcs] git_path` in .tether/secrets.toml at one", exe.display(), MIN_GIT_VERSION.0, MIN_GIT_VERSION.1)]
    GitUnavailable { exe: PathBuf, detail: String },

    #[error("git: {context}: {}", source.message())]
    Git {
        context: String,
        source: git2::Error,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl VcsError {
    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> VcsError {
        let context = context.into();
        move |source| VcsError::Git { context, source }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> VcsError {
        VcsError::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized_and_confined() {
        assert_eq!(
            normalize_path(".tether/objects/a.toml").unwrap(),
            ".tether/objects/a.toml"
        );
        assert_eq!(normalize_path("./a//b/").unwrap(), "a/b");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            ".git/config",
            "a\\b",
        ] {
            assert!(normalize_path(bad).is_err(), "{bad}");
        }
        assert_eq!(normalize_prefix("").unwrap(), "");
        assert_eq!(
            normalize_prefix(".tether/objects/").unwrap(),
            ".tether/objects"
        );
        assert!(under_prefix(".tether/objects/a.toml", ".tether"));
        assert!(under_prefix(".tether", ".tether"));
        assert!(!under_prefix(".tetherish", ".tether"));
        assert!(under_prefix("x", ""));
    }

    #[test]
    fn parking_branch_names() {
        assert!(is_parking_branch("tether/0123456789ab"));
        assert!(is_parking_branch("tether/0123456789ab-2"));
        assert!(!is_parking_branch("tether/feature"));
        assert!(!is_parking_branch("tether/0123456789AB"));
        assert!(!is_parking_branch("main"));
    }

    #[test]
    fn local_env_vars_are_dropped() {
        let env = VcsEnv::from_vars([
            ("GIT_DIR", "/elsewhere"),
            ("GIT_INDEX_FILE", "/elsewhere/index"),
            ("GIT_CONFIG_KEY_0", "core.hooksPath"),
            ("GIT_CONFIG_VALUE_0", "/x"),
            ("GIT_CONFIG_GLOBAL", "/home/me/.gitconfig"),
            ("GIT_AUTHOR_NAME", "Me"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(env.get("GIT_DIR"), None);
        assert_eq!(env.get("GIT_INDEX_FILE"), None);
        assert_eq!(env.get("GIT_CONFIG_KEY_0"), None);
        assert_eq!(env.get("GIT_CONFIG_VALUE_0"), None);
        assert_eq!(env.get("GIT_CONFIG_GLOBAL"), Some("/home/me/.gitconfig"));
        assert_eq!(env.get("GIT_AUTHOR_NAME"), Some("Me"));
        assert_eq!(env.get("PATH"), Some("/usr/bin"));
    }
}
