//! The jj (Jujutsu) adapter: jj's CLI for every write, jj's own answer for which commits
//! are visible, and the repository's backing git store (through `git2`) for reading
//! files and walking history in one pass.
//!
//! - **What is visible** comes from one `jj log --ignore-working-copy` over `..` (every
//!   visible commit but the root), with each commit's parents, whether it is a working
//!   copy (this workspace's or another's) and its local bookmarks. The git refs alone are
//!   not the visible history: jj keeps abandoned commits alive under `refs/jj/keep/*`.
//!   That view is cached per adapter, keyed by jj's operation heads
//!   (`.jj/repo/op_heads/heads/`): it changes exactly when an operation lands, so a user's
//!   `jj` command between two reads is seen, and repeated reads cost no process; and
//!   across processes, in the workspace's `.jj/tether-view` under the same key, so a
//!   `status` while jj's operation heads have not moved starts no jj process at all.
//! - **History** ([`Vcs::history`]) yields the visible commits minus working-copy
//!   commits (an `@` is an edit in progress, not a dataset commit), and reads their
//!   manifests from the git store with the same walk as the git adapter.
//! - **Where the working copy is**: tether's bookmark sits at `@` or `@-`. The "head"
//!   (the last dataset commit, the parent of the next one) is `@-`; with `@-` the root
//!   commit, the bookmark is unborn.
//! - **A dataset commit** is one `jj commit` of exactly tether's paths, which leaves a
//!   new empty working-copy commit on top. The bookmark moves in that same operation: a
//!   bookmark at `@` follows the rewrite of `@`, one at `@-` is advanced by jj's
//!   `experimental-advance-branches` for exactly that bookmark. So `jj undo` takes both
//!   back.
//! - **Configuration** (spec/09, "Versions and environment"): jj runs with `JJ_CONFIG`
//!   pointing at a layer built from the user's config that keeps only `user`, `signing`,
//!   `snapshot`, `working-copy`, `fsmonitor`, `core` and `git`, plus `immutable_heads()`
//!   and the revset aliases it names. Colour and the pager are off. Repo-level config
//!   still loads, so templates call keywords as methods (`self.commit_id()`), which an
//!   alias cannot shadow. Snapshots tether causes leave `.tether/` out of auto-tracking
//!   (`(<your auto-track>) ~ root-glob:"**/.tether/**"`) and track tether's own paths by
//!   name when it commits them.
//! - **Which jj**: `[vcs] jj_path` in `.tether/secrets.toml` (applied by the engine once
//!   that file is known to be untracked), then `TETHER_JJ`, then `PATH`; jj 0.43 or newer,
//!   checked once per command, through a record in `.jj/repo/tether-jj-version` keyed
//!   by the executable's path, size and modification time (so it costs no process
//!   while the same jj is in use).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use git2::{Oid, Repository, RepositoryOpenFlags};
use sha2::{Digest, Sha256};

use super::git::{self as gitimpl, HistoryWalk};
use super::keyed_cache::KeyedCache;
use super::{
    BranchInfo, CommitId, HeadState, HistoryCommit, PathChange, Result, Vcs, VcsEnv, VcsError,
    VcsKind, WorktreeInfo, normalize_path,
};

/// The oldest jj tether runs with.
pub const MIN_JJ_VERSION: (u32, u32, u32) = (0, 43, 0);

/// The root commit's id in a git-backed jj repository: it exists only in jj.
const ROOT_ID: &str = "0000000000000000000000000000000000000000";

/// The user-config tables that reach tether's jj calls (spec/09).
const KEPT_TABLES: &[&str] = &[
    "user",
    "signing",
    "snapshot",
    "working-copy",
    "fsmonitor",
    "core",
    "git",
];

/// One line per visible commit: id, parents, `@` when it is this workspace's working
/// copy, the workspaces it is the working copy of, its local bookmarks (a
/// conflicted one marked with `?`), its change id and its tags. Keywords are called
/// as methods so a repo-level template alias cannot change what is printed. A
/// cached view in an older shape fails to parse and is read anew.
const VIEW_TEMPLATE: &str = r#"self.commit_id() ++ "\t" ++ self.parents().map(|p| p.commit_id()).join(" ") ++ "\t" ++ if(self.current_working_copy(), "@", "-") ++ "\t" ++ self.working_copies().map(|w| w.name()).join(" ") ++ "\t" ++ self.local_bookmarks().map(|b| if(b.conflict(), b.name() ++ "?", b.name())).join(" ") ++ "\t" ++ self.change_id() ++ "\t" ++ self.tags().map(|t| t.name()).join(" ") ++ "\n""#;

/// One visible commit, as [`VIEW_TEMPLATE`] prints it.
#[derive(Debug, Clone)]
struct ViewCommit {
    id: String,
    parents: Vec<String>,
    /// This workspace's `@`.
    current: bool,
    /// The working copy of some workspace.
    working_copy: bool,
    /// Local bookmarks here, conflicted ones left out.
    bookmarks: Vec<String>,
    /// Conflicted local bookmarks with a side here.
    conflicted: Vec<String>,
    /// jj's change id.
    change_id: String,
    /// Tags here.
    tags: Vec<String>,
}

/// Every visible commit, newest first in topological order.
#[derive(Debug)]
struct View {
    commits: Vec<ViewCommit>,
}

impl View {
    fn parse(text: &str) -> Result<View> {
        let mut commits = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 7 {
                return Err(VcsError::Jj {
                    command: "log".into(),
                    message: format!("unexpected line from the log template: {line:?}"),
                });
            }
            fn words(s: &str) -> impl Iterator<Item = String> + '_ {
                s.split(' ').filter(|w| !w.is_empty()).map(str::to_owned)
            }
            let (conflicted, bookmarks): (Vec<String>, Vec<String>) =
                words(f[4]).partition(|b| b.ends_with('?'));
            commits.push(ViewCommit {
                id: f[0].to_owned(),
                parents: words(f[1]).collect(),
                current: f[2] == "@",
                // jj lists working copies only once there are several workspaces.
                working_copy: f[2] == "@" || !f[3].trim().is_empty(),
                bookmarks,
                conflicted: conflicted
                    .into_iter()
                    .map(|b| b.trim_end_matches('?').to_owned())
                    .collect(),
                change_id: f[5].to_owned(),
                tags: words(f[6]).collect(),
            });
        }
        Ok(View { commits })
    }

    fn working_copy(&self) -> Result<&ViewCommit> {
        self.commits
            .iter()
            .find(|c| c.current)
            .ok_or(VcsError::JjNoWorkingCopy)
    }

    fn get(&self, id: &str) -> Option<&ViewCommit> {
        self.commits.iter().find(|c| c.id == id)
    }

    /// The first parent of `@`, `None` when it is the root commit.
    fn head(&self) -> Result<Option<String>> {
        let wc = self.working_copy()?;
        Ok(wc.parents.first().filter(|p| *p != ROOT_ID).cloned())
    }

    /// Bookmarks at `@`, then at `@-` (every parent), each once.
    fn working_bookmarks(&self) -> Result<Vec<String>> {
        let wc = self.working_copy()?;
        let mut out: Vec<String> = wc.bookmarks.clone();
        for p in &wc.parents {
            if let Some(c) = self.get(p) {
                for b in &c.bookmarks {
                    if !out.contains(b) {
                        out.push(b.clone());
                    }
                }
            }
        }
        Ok(out)
    }

    /// The dataset's history: visible commits that are nobody's working copy.
    fn history_ids(&self) -> Vec<&str> {
        self.commits
            .iter()
            .filter(|c| !c.working_copy)
            .map(|c| c.id.as_str())
            .collect()
    }
}

/// The file in a workspace's `.jj/` naming the bookmark tether last put that
/// workspace on. jj has no current bookmark: when several bookmarks sit on
/// `@-` (right after `tether new -b NAME`, every bookmark at the fork point),
/// this says which one the workspace works on.
const CHOSEN_BOOKMARK: &str = "tether-bookmark";

/// The bookmark tether last put the workspace at `root` on, if any.
fn chosen_bookmark(root: &Path) -> Option<String> {
    fs::read_to_string(root.join(".jj").join(CHOSEN_BOOKMARK))
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The view cache in a workspace's `.jj/`: the text of the last `jj log` of
/// the visible commits ([`VIEW_TEMPLATE`]), under a first line naming the
/// operation heads it was read at. The view is a function of those heads
/// (it is read without a snapshot), and every jj operation (a commit, `jj
/// new` in any workspace, `jj undo`, a concurrent run) replaces them, so a
/// `status` with the heads unchanged starts no jj process at all. Per
/// workspace, since `@` is; `.jj/` never comes with a clone, and the file
/// is read without following a link and only up to [`VIEW_CACHE_MAX`].
const VIEW_CACHE: &str = "tether-view";

/// The first line's tag, before the operation heads; a new format gets a new tag.
const VIEW_CACHE_TAG: &str = "tether-view 2\t";

/// The largest view cache read back (a bigger one is read from jj again).
const VIEW_CACHE_MAX: u64 = 256 << 20;

/// The view cache of the workspace at `root`.
fn view_cache(root: &Path) -> KeyedCache {
    KeyedCache {
        file: root.join(".jj").join(VIEW_CACHE),
        tag: VIEW_CACHE_TAG,
        max: VIEW_CACHE_MAX,
    }
}

/// `bookmarks` with the chosen one first, when it is among them.
fn chosen_first(mut bookmarks: Vec<String>, chosen: Option<&str>) -> Vec<String> {
    if let Some(c) = chosen
        && let Some(i) = bookmarks.iter().position(|b| b == c)
    {
        let b = bookmarks.remove(i);
        bookmarks.insert(0, b);
    }
    bookmarks
}

/// A jj workspace (the default one, or one `jj workspace add` made).
pub struct JjVcs {
    /// The workspace root (the directory holding `.jj/`).
    root: PathBuf,
    /// The repository's `.jj/repo/`, shared by every workspace.
    repo_dir: PathBuf,
    /// The backing git store.
    git_dir: PathBuf,
    exe: PathBuf,
    env: VcsEnv,
    git: Mutex<Repository>,
    blob_reads: AtomicU64,
    /// The user-config layer jj runs with (written once per adapter).
    layer: OnceLock<std::result::Result<tempfile::TempPath, String>>,
    /// `snapshot.auto-track` as the user's config (or the repo's) sets it.
    auto_track: OnceLock<String>,
    /// The last view read, with the operation heads it was read at.
    view: Mutex<Option<(String, Arc<View>)>>,
    /// jj processes started (benchmarks and tests count them).
    runs: AtomicU64,
}

impl std::fmt::Debug for JjVcs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JjVcs")
            .field("root", &self.root)
            .field("repo_dir", &self.repo_dir)
            .field("git_dir", &self.git_dir)
            .field("exe", &self.exe)
            .finish_non_exhaustive()
    }
}

impl JjVcs {
    /// A new empty working-copy change on top of `commit`.
    fn new_working_copy(&self, commit: &CommitId) -> Result<()> {
        let r = self.run(&["new", "-r", commit.as_str()], Some(&[]));
        self.forget_view();
        r.map(|_| ())
    }

    /// Record (or, with `None`, clear) the bookmark this workspace works on.
    fn choose_bookmark(&self, name: Option<&str>) -> Result<()> {
        let path = self.root.join(".jj").join(CHOSEN_BOOKMARK);
        let r = match name {
            Some(n) => fs::write(&path, format!("{n}\n")),
            None => match fs::remove_file(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        };
        r.map_err(|e| VcsError::io(format!("writing {}", path.display()), e))
    }

    /// Opens the jj workspace whose root is `root` (the directory holding `.jj/`), running
    /// the jj that `env` names (`TETHER_JJ`, else `jj` on `PATH`).
    pub fn open_with_env(root: &Path, env: VcsEnv) -> Result<Self> {
        let exe = env
            .get_os("TETHER_JJ")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("jj"));
        Self::open_with_exe(root, env, exe)
    }

    /// Opens the workspace at `root` with a given jj executable.
    pub fn open_with_exe(root: &Path, env: VcsEnv, exe: PathBuf) -> Result<Self> {
        let root = gitimpl::clean_dir(root);
        let dot_jj = root.join(".jj");
        let repo_dir = resolve_repo_dir(&dot_jj)?;
        let store = repo_dir.join("store");
        let target = fs::read_to_string(store.join("git_target"))
            .map_err(|_| VcsError::JjNotGitBacked { root: root.clone() })?;
        let target = PathBuf::from(target.trim_end_matches(['\n', '\r']));
        let git_dir = gitimpl::canonical(&if target.is_absolute() {
            target
        } else {
            store.join(target)
        });
        let git = Repository::open_ext(
            &git_dir,
            RepositoryOpenFlags::NO_SEARCH | RepositoryOpenFlags::NO_DOTGIT,
            std::iter::empty::<&str>(),
        )
        .map_err(VcsError::git(format!(
            "opening jj's git store at {}",
            git_dir.display()
        )))?;
        check_version_cached(&exe, &env, &repo_dir)?;
        Ok(JjVcs {
            root,
            repo_dir,
            git_dir,
            exe,
            env,
            git: Mutex::new(git),
            blob_reads: AtomicU64::new(0),
            layer: OnceLock::new(),
            auto_track: OnceLock::new(),
            view: Mutex::new(None),
            runs: AtomicU64::new(0),
        })
    }

    /// The jj executable this adapter runs.
    pub fn executable(&self) -> &Path {
        &self.exe
    }

    /// The backing git store.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// How many jj processes this adapter has started.
    pub fn jj_runs(&self) -> u64 {
        self.runs.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn git(&self) -> MutexGuard<'_, Repository> {
        self.git.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The user-config layer's path (written on first use).
    fn layer_path(&self) -> Result<&Path> {
        let made = self.layer.get_or_init(|| {
            let text = user_layer(&self.env).map_err(|e| e.to_string())?;
            let mut f = tempfile::Builder::new()
                .prefix("tether-jj-")
                .suffix(".toml")
                .tempfile()
                .map_err(|e| e.to_string())?;
            std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| e.to_string())?;
            Ok(f.into_temp_path())
        });
        match made {
            Ok(p) => Ok(p),
            Err(e) => Err(VcsError::Jj {
                command: "config".into(),
                message: format!("building tether's jj config layer: {e}"),
            }),
        }
    }

    /// The auto-track fileset tether's snapshots use, tracking `paths` by name.
    fn auto_track(&self, paths: &[String]) -> String {
        let user = self.auto_track.get_or_init(|| {
            repo_auto_track(&self.repo_dir, &self.env)
                .or_else(|| user_auto_track(&self.env))
                .unwrap_or_else(|| "all()".to_owned())
        });
        let mut expr = format!("({user}) ~ root-glob:\"**/.tether/**\"");
        for p in paths {
            expr.push_str(&format!(" | root-file:{}", fileset_string(p)));
        }
        expr
    }

    /// Runs jj with tether's settings; stdout on success.
    fn run(&self, args: &[&str], snapshot_paths: Option<&[String]>) -> Result<String> {
        let layer = self.layer_path()?;
        let mut cmd = Command::new(&self.exe);
        cmd.current_dir(&self.root)
            .env_clear()
            .envs(self.env.vars())
            .env("JJ_CONFIG", layer)
            .args(["--no-pager", "--color=never", "-R"])
            .arg(&self.root);
        match snapshot_paths {
            None => {
                cmd.arg("--ignore-working-copy");
            }
            Some(paths) => {
                let value = toml::Value::String(self.auto_track(paths)).to_string();
                cmd.arg(format!("--config=snapshot.auto-track={value}"));
            }
        }
        cmd.args(args).stdin(Stdio::null());
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = cmd.output().map_err(|e| VcsError::JjUnavailable {
            exe: self.exe.clone(),
            detail: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(VcsError::Jj {
                command: args.first().copied().unwrap_or_default().to_owned(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The operation heads' file names: they change exactly when an operation lands.
    fn op_heads(&self) -> String {
        let dir = self.repo_dir.join("op_heads").join("heads");
        let mut names: Vec<String> = fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names.join(",")
    }

    /// Every visible commit, read once per operation: from this adapter's
    /// memory, else from the view cache a previous command left in the
    /// workspace's `.jj/` ([`VIEW_CACHE`]) while jj's operation heads are the
    /// ones it was read at, else from one `jj log`.
    fn view(&self) -> Result<Arc<View>> {
        let key = self.op_heads();
        let mut cached = self.view.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, v)) = cached.as_ref()
            && *k == key
            && !key.is_empty()
        {
            return Ok(v.clone());
        }
        let cache = view_cache(&self.root);
        if !key.is_empty()
            && let Some(text) = cache.read(&key)
            && let Ok(view) = View::parse(&text)
        {
            let view = Arc::new(view);
            *cached = Some((key, view.clone()));
            return Ok(view);
        }
        let text = self.run(
            &["log", "--no-graph", "-r", "..", "-T", VIEW_TEMPLATE],
            None,
        )?;
        let view = Arc::new(View::parse(&text)?);
        // Key by the heads seen *before* the read: an operation landing during it
        // changes the heads and forces a re-read next time.
        if !key.is_empty() {
            cache.write(&key, &text);
        }
        *cached = Some((key, view.clone()));
        Ok(view)
    }

    fn forget_view(&self) {
        *self.view.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn oid(id: &str) -> Result<Oid> {
        Oid::from_str(id).map_err(VcsError::git(format!("reading commit id {id}")))
    }

    /// Whether `paths` (normalized) differ on disk from `base`'s tree.
    fn differs_from(&self, base: Option<&str>, paths: &[String]) -> Result<bool> {
        let repo = self.git();
        for p in paths {
            let disk = match fs::symlink_metadata(self.root.join(p)) {
                Ok(m) if m.is_dir() => return Err(VcsError::NotAFile { path: p.clone() }),
                Ok(_) => Some(
                    fs::read(self.root.join(p))
                        .map_err(|e| VcsError::io(format!("reading {p}"), e))?,
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(VcsError::io(format!("reading {p}"), e)),
            };
            let committed = match base {
                Some(b) => gitimpl::read_file_at(&repo, &CommitId::new(b), p)?,
                None => None,
            };
            if disk != committed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn workspace_list(&self) -> Result<Vec<(String, String, PathBuf)>> {
        let text = self.run(
            &[
                "workspace",
                "list",
                "-T",
                r#"self.name() ++ "\t" ++ self.target().commit_id() ++ "\t" ++ self.root() ++ "\n""#,
            ],
            None,
        )?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some((
                    f.next()?.to_owned(),
                    f.next()?.to_owned(),
                    PathBuf::from(f.next()?),
                ))
            })
            .collect())
    }

    /// Commits `paths` as [`Vcs::commit_paths`] does, moving `bookmark` (default: the
    /// first bookmark at `@`, else at `@-`) in the same jj operation.
    fn commit_moving(
        &self,
        paths: &[&str],
        message: &str,
        bookmark: Option<&str>,
    ) -> Result<CommitId> {
        let mut norm: Vec<String> = paths
            .iter()
            .map(|p| normalize_path(p))
            .collect::<Result<_>>()?;
        norm.sort();
        norm.dedup();
        if norm.is_empty() {
            return Err(VcsError::NothingToCommit { paths: Vec::new() });
        }
        gitimpl::refuse_per_checkout(&norm)?;
        let message = gitimpl::cleanup_message(message);
        if message.is_empty() {
            return Err(VcsError::EmptyMessage);
        }
        let view = self.view()?;
        let wc = view.working_copy()?.clone();
        if wc.parents.len() > 1 {
            return Err(VcsError::JjMergeWorkingCopy {
                parents: wc.parents.clone(),
            });
        }
        let base = view.head()?;
        let bookmark = match bookmark {
            Some(b) => Some(b.to_owned()),
            None => view.working_bookmarks()?.into_iter().next(),
        };
        let at_parent = match &bookmark {
            None => false,
            Some(b) if wc.bookmarks.contains(b) => false,
            Some(b)
                if base
                    .as_deref()
                    .and_then(|p| view.get(p))
                    .is_some_and(|c| c.bookmarks.contains(b)) =>
            {
                true
            }
            Some(b) => {
                return Err(VcsError::JjBookmarkNotHere {
                    bookmark: b.clone(),
                });
            }
        };
        if !self.differs_from(base.as_deref(), &norm)? {
            return Err(VcsError::NothingToCommit { paths: norm });
        }
        let filesets: Vec<String> = norm
            .iter()
            .map(|p| format!("root-file:{}", fileset_string(p)))
            .collect();
        let mut args: Vec<String> = vec!["commit".into()];
        if at_parent && let Some(b) = &bookmark {
            let patterns = toml::Value::Array(vec![toml::Value::String(format!(
                "exact:{}",
                fileset_string(b)
            ))]);
            args.push(format!(
                "--config=experimental-advance-branches.enabled-branches={patterns}"
            ));
            args.push("--config=experimental-advance-branches.disabled-branches=[]".into());
        }
        args.extend(["-m".into(), message, "--".into()]);
        args.extend(filesets);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = self.run(&argv, Some(&norm));
        self.forget_view();
        result?;
        let view = self.view()?;
        let commit = view.head()?.ok_or_else(|| VcsError::Jj {
            command: "commit".into(),
            message: "the new working copy has no parent commit".into(),
        })?;
        if let Some(b) = &bookmark
            && !view.get(&commit).is_some_and(|c| c.bookmarks.contains(b))
        {
            tracing::warn!(bookmark = %b, %commit, "jj did not move the bookmark onto the dataset commit");
        }
        Ok(CommitId::new(commit))
    }
}

impl Vcs for JjVcs {
    fn kind(&self) -> VcsKind {
        VcsKind::Jj
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn shared_dir(&self) -> &Path {
        &self.repo_dir
    }

    fn info_exclude(&self) -> Option<PathBuf> {
        Some(self.git_dir.join("info").join("exclude"))
    }

    fn head_state(&self) -> Result<HeadState> {
        let view = self.view()?;
        let head = view.head()?;
        let bookmark = self.working_bookmarks()?.into_iter().next();
        Ok(match (bookmark, head) {
            (Some(branch), None) => HeadState::Unborn { branch },
            (Some(name), Some(commit)) => HeadState::Branch {
                name,
                commit: CommitId::new(commit),
            },
            // A fresh repository: no commit and no bookmark yet.
            (None, None) => HeadState::Unborn {
                branch: String::new(),
            },
            (None, Some(commit)) => HeadState::Detached {
                commit: CommitId::new(commit),
            },
        })
    }

    fn current_branch(&self) -> Result<Option<String>> {
        Ok(self
            .head_state()?
            .bookmark()
            .filter(|b| !b.is_empty())
            .map(str::to_owned))
    }

    fn working_bookmarks(&self) -> Result<Vec<String>> {
        Ok(chosen_first(
            self.view()?.working_bookmarks()?,
            chosen_bookmark(&self.root).as_deref(),
        ))
    }

    fn resolve(&self, rev: &str) -> Result<CommitId> {
        // The lookup holds the repository while it runs; the suggestion
        // lists the branches, so it comes after.
        let found = (|| -> Result<CommitId> {
            let unknown = |detail: String| VcsError::UnknownRevision {
                rev: rev.to_owned(),
                detail,
                suggestion: String::new(),
            };
            if rev.trim().is_empty() || rev.starts_with('-') {
                return Err(unknown("not a revision".into()));
            }
            let out = self
                .run(
                    &[
                        "log",
                        "--no-graph",
                        "--limit",
                        "2",
                        "-r",
                        rev,
                        "-T",
                        r#"self.commit_id() ++ "\n""#,
                    ],
                    None,
                )
                .map_err(|e| match e {
                    VcsError::Jj { message, .. } => unknown(
                        message
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .trim_start_matches("Error: ")
                            .to_owned(),
                    ),
                    other => other,
                })?;
            let ids: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
            match ids.as_slice() {
                [] => Err(unknown("it names no commit".into())),
                [id] if *id == ROOT_ID => Err(VcsError::NoCommitYet),
                [id] => Ok(CommitId::new(*id)),
                _ => Err(unknown(
                    "it names several commits; name one (a commit id, a bookmark, `@-`)".into(),
                )),
            }
        })();
        found.map_err(|e| self.suggest_revision(e))
    }

    fn branches(&self) -> Result<Vec<BranchInfo>> {
        let view = self.view()?;
        let mut out: Vec<BranchInfo> = view
            .commits
            .iter()
            .flat_map(|c| {
                c.bookmarks.iter().map(|b| BranchInfo {
                    name: b.clone(),
                    commit: CommitId::new(c.id.clone()),
                    parking: false,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn tags(&self) -> Result<Vec<BranchInfo>> {
        let view = self.view()?;
        let mut out: Vec<BranchInfo> = view
            .commits
            .iter()
            .flat_map(|c| {
                c.tags.iter().map(|t| BranchInfo {
                    name: t.clone(),
                    commit: CommitId::new(c.id.clone()),
                    parking: false,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn change_ids(&self) -> Result<std::collections::HashMap<String, String>> {
        let view = self.view()?;
        Ok(view
            .commits
            .iter()
            .map(|c| (c.id.clone(), c.change_id.clone()))
            .collect())
    }

    fn branch_head(&self, name: &str) -> Result<Option<CommitId>> {
        Ok(self
            .branches()?
            .into_iter()
            .find(|b| b.name == name)
            .map(|b| b.commit))
    }

    fn conflicted_bookmarks(&self) -> Result<Vec<String>> {
        let view = self.view()?;
        let set: BTreeSet<String> = view
            .commits
            .iter()
            .flat_map(|c| c.conflicted.iter().cloned())
            .collect();
        Ok(set.into_iter().collect())
    }

    fn unresolved_conflicts(&self, prefix: &str) -> Result<Vec<(CommitId, Vec<String>)>> {
        let prefix = super::normalize_prefix(prefix)?;
        let heads = self.run(
            &[
                "log",
                "--no-graph",
                "-r",
                "heads(all()) & conflicts()",
                "-T",
                r#"self.commit_id() ++ "\n""#,
            ],
            None,
        )?;
        let mut out = Vec::new();
        for id in heads.lines().map(str::trim).filter(|l| !l.is_empty()) {
            // `jj resolve --list` prints one conflicted path per line, then
            // what kind of conflict it is.
            let listed = match self.run(&["resolve", "--list", "-r", id], None) {
                Ok(text) => text,
                Err(VcsError::Jj { .. }) => continue,
                Err(e) => return Err(e),
            };
            let paths: Vec<String> = listed
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|p| super::under_prefix(p, &prefix))
                .map(str::to_owned)
                .collect();
            if !paths.is_empty() {
                out.push((CommitId::new(id), paths));
            }
        }
        Ok(out)
    }

    fn read_file(&self, commit: &CommitId, path: &str) -> Result<Option<Vec<u8>>> {
        gitimpl::read_file_at(&self.git(), commit, path)
    }

    fn list_files(&self, commit: &CommitId, prefix: &str) -> Result<Vec<String>> {
        gitimpl::list_files_at(&self.git(), commit, prefix)
    }

    fn history<'a>(
        &'a self,
        prefix: &str,
    ) -> Result<Box<dyn Iterator<Item = Result<HistoryCommit>> + 'a>> {
        let prefix = super::normalize_prefix(prefix)?;
        let view = self.view()?;
        let ids = view
            .history_ids()
            .into_iter()
            .map(Self::oid)
            .collect::<Result<Vec<_>>>()?;
        Ok(Box::new(HistoryWalk::new(
            &self.git,
            &self.blob_reads,
            ids,
            prefix,
        )))
    }

    fn commit_files(&self, commit: &CommitId, prefix: &str) -> Result<HistoryCommit> {
        HistoryWalk::one(
            &self.git,
            &self.blob_reads,
            Self::oid(commit.as_str())?,
            prefix,
        )
    }

    fn history_key(&self) -> Result<Option<String>> {
        // What `history` walks is the view's commits, and the view is a
        // function of the operation heads (the same key `view` caches by).
        let heads = self.op_heads();
        Ok((!heads.is_empty()).then(|| format!("jj:{heads}")))
    }

    fn visible_ids(&self) -> Result<Vec<CommitId>> {
        Ok(self
            .view()?
            .history_ids()
            .into_iter()
            .map(CommitId::new)
            .collect())
    }

    fn history_digest(&self) -> Result<String> {
        let view = self.view()?;
        let mut ids = view.history_ids();
        ids.sort_unstable();
        let mut h = Sha256::new();
        for id in ids {
            h.update(id.as_bytes());
            h.update(b"\n");
        }
        Ok(hex::encode(h.finalize()))
    }

    fn tracked(&self, paths: &[&str]) -> Result<Vec<String>> {
        // What `@` holds as of its last snapshot: a clone's tracked copy arrives there.
        let view = self.view()?;
        let wc = CommitId::new(view.working_copy()?.id.clone());
        let repo = self.git();
        let tree = gitimpl::commit_tree(&repo, &wc)?;
        let mut out = Vec::new();
        for &given in paths {
            let path = normalize_path(given)?;
            if tree.get_path(Path::new(&path)).is_ok() {
                out.push(given.to_owned());
            }
        }
        Ok(out)
    }

    fn changes(&self) -> Result<Vec<PathChange>> {
        let text = self.run(&["diff", "-r", "@", "--name-only"], Some(&[]))?;
        self.forget_view();
        let mut out: Vec<PathChange> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| PathChange {
                path: l.replace('\\', "/"),
                staged: false,
                unstaged: true,
                untracked: false,
                conflicted: false,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn commit_paths(&self, paths: &[&str], message: &str) -> Result<CommitId> {
        self.commit_moving(paths, message, None)
    }

    fn commit_on_bookmark(
        &self,
        paths: &[&str],
        message: &str,
        bookmark: &str,
    ) -> Result<CommitId> {
        self.commit_moving(paths, message, Some(bookmark))
    }

    fn create_branch(&self, name: &str, commit: &CommitId) -> Result<()> {
        check_bookmark_name(name)?;
        if self.branch_head(name)?.is_some() {
            return Err(VcsError::BranchExists {
                name: name.to_owned(),
            });
        }
        let r = self.run(
            &["bookmark", "create", "-r", commit.as_str(), "--", name],
            Some(&[]),
        );
        self.forget_view();
        r.map(|_| ())
    }

    fn set_unborn_branch(&self, name: &str) -> Result<()> {
        check_bookmark_name(name)?;
        if self.view()?.head()?.is_some() || self.branch_head(name)?.is_some() {
            return Err(VcsError::BranchExists {
                name: name.to_owned(),
            });
        }
        // At `@`: the first dataset commit rewrites `@`, and the bookmark follows it.
        let r = self.run(&["bookmark", "create", "-r", "@", "--", name], Some(&[]));
        self.forget_view();
        r?;
        self.choose_bookmark(Some(name))
    }

    fn switch_branch(&self, name: &str) -> Result<()> {
        let Some(commit) = self.branch_head(name)? else {
            return Err(self.unknown_branch(name));
        };
        if !self.view()?.working_bookmarks()?.iter().any(|b| b == name) {
            self.new_working_copy(&commit)?;
        }
        self.choose_bookmark(Some(name))
    }

    fn checkout_detached(&self, commit: &CommitId) -> Result<()> {
        self.new_working_copy(commit)?;
        self.choose_bookmark(None)
    }

    fn park(&self, commit: &CommitId) -> Result<String> {
        // jj keeps every commit visible without a branch: no parking branch is needed,
        // and the working copy is simply a new change on top of the commit.
        self.checkout_detached(commit)?;
        Ok(commit.short12().to_owned())
    }

    fn move_branch(&self, name: &str, to: &CommitId, expected: &CommitId) -> Result<()> {
        match self.branch_head(name)? {
            Some(found) if found == *expected => {}
            found => {
                return Err(VcsError::BranchMoved {
                    name: name.to_owned(),
                    expected: expected.to_string(),
                    found: found.map_or_else(|| "nothing (deleted)".into(), |c| c.to_string()),
                });
            }
        }
        // Bookmarks are not checked out in jj: moving one moves no working copy.
        let r = self.run(
            &[
                "bookmark",
                "set",
                "--allow-backwards",
                "-r",
                to.as_str(),
                "--",
                name,
            ],
            None,
        );
        self.forget_view();
        r.map(|_| ())
    }

    fn delete_branch(&self, name: &str, expected: &CommitId) -> Result<()> {
        let Some(found) = self.branch_head(name)? else {
            return Ok(());
        };
        if found != *expected {
            return Err(VcsError::BranchMoved {
                name: name.to_owned(),
                expected: expected.to_string(),
                found: found.to_string(),
            });
        }
        // A bookmark a workspace works on is refused, as git refuses a checked-out
        // branch: the one of its `@`'s and `@-`'s bookmarks it was put on (another
        // bookmark merely sitting at the same commit may go).
        if let Some(w) = self
            .worktrees()?
            .into_iter()
            .find(|w| w.branch.as_deref() == Some(name))
        {
            return Err(VcsError::BranchCheckedOut {
                branch: name.to_owned(),
                path: w.path,
            });
        }
        let r = self.run(&["bookmark", "delete", "--", name], None);
        self.forget_view();
        r.map(|_| ())
    }

    fn is_ancestor(&self, ancestor: &CommitId, descendant: &CommitId) -> Result<bool> {
        let repo = self.git();
        let a = gitimpl::find_commit(&repo, ancestor)?.id();
        let d = gitimpl::find_commit(&repo, descendant)?.id();
        if a == d {
            return Ok(true);
        }
        repo.graph_descendant_of(d, a)
            .map_err(VcsError::git("comparing commits"))
    }

    /// jj has no index: uncommitting the dataset commit `@-` squashes it back into
    /// `@` (its bookmark moves to its parent, `to`), in one jj operation.
    fn reset_soft(&self, to: &CommitId) -> Result<()> {
        let view = self.view()?;
        let wc = view.working_copy()?;
        let Some(commit) = view.head()? else {
            return Err(VcsError::NoCommitYet);
        };
        let parent = {
            let repo = self.git();
            let c = gitimpl::find_commit(&repo, &CommitId::new(commit.clone()))?;
            c.parent_ids().next().map(|p| p.to_string())
        };
        let to_parent =
            parent.as_deref() == Some(to.as_str()) || (parent.is_none() && to.as_str() == ROOT_ID);
        let others = view
            .commits
            .iter()
            .filter(|c| c.id != wc.id && c.parents.contains(&commit))
            .count();
        if !to_parent || wc.parents.len() != 1 || others > 0 {
            return Err(VcsError::Jj {
                command: "squash".into(),
                message: format!(
                    "cannot uncommit {commit}: it is not the working copy's only parent on top of {to}, or other commits build on it"
                ),
            });
        }
        let r = self.run(
            &[
                "squash",
                "--from",
                &commit,
                "--into",
                "@",
                "--use-destination-message",
            ],
            Some(&[]),
        );
        self.forget_view();
        r.map(|_| ())
    }

    /// `jj abandon --restore-descendants --retain-bookmarks`: every descendant keeps
    /// its whole tree (so its manifests exactly), and a bookmark on an abandoned
    /// commit moves to its parent. The pairs map each rewritten descendant that is
    /// no working copy, through its change id.
    fn drop_commits(
        &self,
        commits: &[CommitId],
        exact_prefix: &str,
    ) -> Result<Vec<(CommitId, CommitId)>> {
        let _ = super::normalize_prefix(exact_prefix)?;
        if commits.is_empty() {
            return Ok(Vec::new());
        }
        let view = self.view()?;
        let dropped: HashSet<&str> = commits.iter().map(CommitId::as_str).collect();
        for c in commits {
            if view.get(c.as_str()).is_none() {
                return Err(VcsError::CannotAbandon {
                    what: c.to_string(),
                    why: "jj shows no such visible commit".into(),
                });
            }
        }
        // Only operators and commit ids in the revset (repo aliases cannot change it).
        let ids = commits
            .iter()
            .map(CommitId::as_str)
            .collect::<Vec<_>>()
            .join(" | ");
        let template = r#"self.change_id() ++ " " ++ self.commit_id() ++ "\n""#;
        let descendants = |out: &str| -> Vec<(String, String)> {
            out.lines()
                .filter_map(|l| l.split_once(' '))
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .collect()
        };
        let before = descendants(&self.run(
            &[
                "log",
                "--no-graph",
                "-r",
                &format!("({ids}):: ~ ({ids})"),
                "-T",
                template,
            ],
            None,
        )?);
        let mut args = vec![
            "abandon",
            "--restore-descendants",
            "--retain-bookmarks",
            "--",
        ];
        args.extend(commits.iter().map(CommitId::as_str));
        let r = self.run(&args, Some(&[]));
        self.forget_view();
        r.map_err(|e| VcsError::CannotAbandon {
            what: ids.clone(),
            why: e.to_string(),
        })?;
        let after = self.view()?;
        let mut out = Vec::new();
        for (change, old) in before {
            if dropped.contains(old.as_str()) || view.get(&old).is_some_and(|c| c.working_copy) {
                continue;
            }
            let new = self.run(
                &[
                    "log",
                    "--no-graph",
                    "-r",
                    &change,
                    "-T",
                    r#"self.commit_id()"#,
                ],
                None,
            )?;
            let new = new.trim().to_owned();
            if after.get(&new).is_some() {
                out.push((CommitId::new(old), CommitId::new(new)));
            }
        }
        Ok(out)
    }

    fn exclusive_commits(&self, name: &str) -> Result<(Vec<CommitId>, Vec<String>)> {
        let view = self.view()?;
        let Some(head) = view
            .commits
            .iter()
            .find(|c| c.bookmarks.iter().any(|b| b == name))
            .map(|c| c.id.clone())
        else {
            return Err(self.unknown_branch(name));
        };
        let ancestors = |start: &str| -> HashSet<String> {
            let mut seen = HashSet::new();
            let mut stack = vec![start.to_owned()];
            while let Some(id) = stack.pop() {
                if id == ROOT_ID || !seen.insert(id.clone()) {
                    continue;
                }
                if let Some(c) = view.get(&id) {
                    stack.extend(c.parents.iter().cloned());
                }
            }
            seen
        };
        let mine = ancestors(&head);
        let mut hidden: HashSet<String> = HashSet::new();
        let mut keepers = Vec::new();
        for c in &view.commits {
            for b in c.bookmarks.iter().filter(|b| *b != name) {
                hidden.extend(ancestors(&c.id));
                if ancestors(&c.id).contains(&head) {
                    keepers.push(format!("refs/heads/{b}"));
                }
            }
            // Another workspace's working copy keeps what it builds on, unless that
            // workspace works on this bookmark.
            if c.working_copy {
                let on_it = c.bookmarks.iter().any(|b| b == name)
                    || c.parents
                        .iter()
                        .filter_map(|p| view.get(p))
                        .any(|p| p.bookmarks.iter().any(|b| b == name));
                if !on_it && !c.current {
                    hidden.extend(ancestors(&c.id));
                }
            }
        }
        keepers.sort();
        keepers.dedup();
        // Newest first, as the view lists them.
        let out = view
            .commits
            .iter()
            .filter(|c| mine.contains(&c.id) && !hidden.contains(&c.id))
            .map(|c| CommitId::new(c.id.clone()))
            .collect();
        Ok((out, keepers))
    }

    fn worktrees(&self) -> Result<Vec<WorktreeInfo>> {
        let view = self.view()?;
        let current = gitimpl::canonical(&self.root);
        let mut out = Vec::new();
        for (name, target, path) in self.workspace_list()? {
            let wc = view.get(&target);
            let head = wc
                .and_then(|c| c.parents.first())
                .filter(|p| *p != ROOT_ID)
                .cloned();
            let mut at: Vec<String> = wc.map(|c| c.bookmarks.clone()).unwrap_or_default();
            if let Some(c) = head.as_deref().and_then(|h| view.get(h)) {
                at.extend(
                    c.bookmarks
                        .iter()
                        .filter(|b| !at.contains(b))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
            let branch = chosen_first(at, chosen_bookmark(&path).as_deref())
                .into_iter()
                .next();
            let is_main = name == "default";
            out.push(WorktreeInfo {
                name: (!is_main).then_some(name),
                exists: path.join(".jj").exists(),
                is_current: gitimpl::canonical(&path) == current,
                path,
                branch,
                head: head.map(CommitId::new),
                is_main,
                locked: false,
            });
        }
        out.sort_by_key(|w| !w.is_main);
        Ok(out)
    }

    fn add_worktree(&self, path: &Path, branch: &str) -> Result<WorktreeInfo> {
        let path = std::path::absolute(path)
            .map_err(|e| VcsError::io("resolving the workspace path", e))?;
        let Some(commit) = self.branch_head(branch)? else {
            return Err(self.unknown_branch(branch));
        };
        if fs::read_dir(&path).is_ok_and(|mut d| d.next().is_some()) {
            return Err(VcsError::WorktreePathTaken { path });
        }
        let p = path.to_string_lossy().into_owned();
        let r = self.run(
            &["workspace", "add", "-r", commit.as_str(), "--", &p],
            Some(&[]),
        );
        self.forget_view();
        r?;
        let want = gitimpl::canonical(&path);
        self.worktrees()?
            .into_iter()
            .find(|w| gitimpl::canonical(&w.path) == want)
            .ok_or(VcsError::UnknownWorktree { path })
    }

    fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let path = std::path::absolute(path)
            .map_err(|e| VcsError::io("resolving the workspace path", e))?;
        let want = gitimpl::canonical(&path);
        let ws = self
            .worktrees()?
            .into_iter()
            .find(|w| w.path == path || gitimpl::canonical(&w.path) == want)
            .ok_or_else(|| VcsError::UnknownWorktree { path: path.clone() })?;
        let Some(name) = ws.name.clone() else {
            return Err(VcsError::MainWorktree { path: ws.path });
        };
        if ws.exists && !force {
            let other = JjVcs::open_with_exe(&ws.path, self.env.clone(), self.exe.clone())?;
            let dirty: Vec<String> = other.changes()?.into_iter().map(|c| c.path).collect();
            if !dirty.is_empty() {
                return Err(VcsError::WorktreeDirty {
                    path: ws.path,
                    paths: dirty,
                });
            }
        }
        let r = self.run(&["workspace", "forget", "--", &name], None);
        self.forget_view();
        r?;
        if ws.exists {
            fs::remove_dir_all(&ws.path)
                .map_err(|e| VcsError::io(format!("removing {}", ws.path.display()), e))?;
        }
        Ok(())
    }
}

/// `.jj/repo` is the repository in the default workspace, and a file naming it in any
/// other (relative to that `.jj/`).
fn resolve_repo_dir(dot_jj: &Path) -> Result<PathBuf> {
    let repo = dot_jj.join("repo");
    if repo.is_dir() {
        return Ok(repo);
    }
    let text = fs::read_to_string(&repo)
        .map_err(|e| VcsError::io(format!("reading {}", repo.display()), e))?;
    let p = PathBuf::from(text.trim_end_matches(['\n', '\r']));
    Ok(gitimpl::canonical(&if p.is_absolute() {
        p
    } else {
        dot_jj.join(p)
    }))
}

/// A string literal as jj's fileset and string-pattern grammars read it.
fn fileset_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Bookmark names tether creates must be valid git branch names too: jj exports them.
fn check_bookmark_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('-')
        || !git2::Reference::is_valid_name(&format!("refs/heads/{name}"))
    {
        return Err(VcsError::InvalidBranchName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The user's config files, as jj finds them: `JJ_CONFIG` (a path list of files and
/// directories), else `~/.jjconfig.toml`, `<config dir>/jj/config.toml` and
/// `<config dir>/jj/conf.d/*.toml`.
fn user_config_files(env: &VcsEnv) -> Vec<PathBuf> {
    let expand = |p: PathBuf| -> Vec<PathBuf> {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = fs::read_dir(&p)
                .map(|rd| {
                    rd.filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            files
        } else if p.is_file() {
            vec![p]
        } else {
            Vec::new()
        }
    };
    if let Some(list) = env.get_os("JJ_CONFIG") {
        return std::env::split_paths(list)
            .filter(|p| !p.as_os_str().is_empty())
            .flat_map(expand)
            .collect();
    }
    let home = env.get_os("HOME").map(PathBuf::from);
    let config_dir = env
        .get_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut out = Vec::new();
    if let Some(h) = &home {
        out.extend(expand(h.join(".jjconfig.toml")));
    }
    if let Some(c) = &config_dir {
        out.extend(expand(c.join("jj").join("config.toml")));
        out.extend(expand(c.join("jj").join("conf.d")));
    }
    out
}

fn read_toml(path: &Path) -> Option<toml::Table> {
    let text = fs::read_to_string(path).ok()?;
    match text.parse::<toml::Table>() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(file = %path.display(), "ignoring an unreadable jj config file: {e}");
            None
        }
    }
}

/// Merges `src` into `dst`, tables recursively, later values winning (as jj layers do).
fn merge(dst: &mut toml::Table, src: toml::Table) {
    for (k, v) in src {
        match (dst.get_mut(&k), v) {
            (Some(toml::Value::Table(d)), toml::Value::Table(s)) => merge(d, s),
            (_, v) => {
                dst.insert(k, v);
            }
        }
    }
}

/// Splits a dotted TOML key table (`snapshot.auto-track = ...` is parsed as nested).
fn get_path<'t>(t: &'t toml::Table, path: &[&str]) -> Option<&'t toml::Value> {
    let (first, rest) = path.split_first()?;
    let v = t.get(*first)?;
    if rest.is_empty() {
        Some(v)
    } else {
        get_path(v.as_table()?, rest)
    }
}

/// The layer tether's jj calls get instead of the user's config (spec/09).
fn user_layer(env: &VcsEnv) -> std::result::Result<String, toml::ser::Error> {
    let mut all = toml::Table::new();
    for f in user_config_files(env) {
        if let Some(t) = read_toml(&f) {
            merge(&mut all, t);
        }
    }
    let mut layer = toml::Table::new();
    for name in KEPT_TABLES {
        if let Some(v) = all.get(*name) {
            layer.insert((*name).to_owned(), v.clone());
        }
    }
    if let Some(aliases) = all.get("revset-aliases").and_then(|v| v.as_table())
        && let Some(heads) = aliases.get("immutable_heads()")
    {
        let mut kept = toml::Table::new();
        kept.insert("immutable_heads()".into(), heads.clone());
        // The aliases `immutable_heads()` names, and those they name, to a fixpoint.
        loop {
            let text: String = kept
                .values()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(" ");
            let before = kept.len();
            for (k, v) in aliases {
                let name = k.split('(').next().unwrap_or(k);
                if !kept.contains_key(k) && mentions(&text, name) {
                    kept.insert(k.clone(), v.clone());
                }
            }
            if kept.len() == before {
                break;
            }
        }
        layer.insert("revset-aliases".into(), toml::Value::Table(kept));
    }
    toml::to_string(&layer)
}

/// Whether `name` occurs in `text` as a whole identifier.
fn mentions(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// `snapshot.auto-track` from the user's config files.
fn user_auto_track(env: &VcsEnv) -> Option<String> {
    let mut found = None;
    for f in user_config_files(env) {
        if let Some(t) = read_toml(&f)
            && let Some(v) = get_path(&t, &["snapshot", "auto-track"]).and_then(|v| v.as_str())
        {
            found = Some(v.to_owned());
        }
    }
    found
}

/// `snapshot.auto-track` from the repository's own config: `.jj/repo/config.toml`, or
/// the per-repository file jj keeps under the user's config directory
/// (`<config dir>/jj/repos/<config-id>/config.toml`).
fn repo_auto_track(repo_dir: &Path, env: &VcsEnv) -> Option<String> {
    let mut files = vec![repo_dir.join("config.toml")];
    if let Ok(id) = fs::read_to_string(repo_dir.join("config-id")) {
        let config_dir = env
            .get_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| env.get_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        if let Some(c) = config_dir {
            files.push(c.join("jj/repos").join(id.trim()).join("config.toml"));
        }
    }
    let mut found = None;
    for f in files {
        if let Some(t) = read_toml(&f)
            && let Some(v) = get_path(&t, &["snapshot", "auto-track"]).and_then(|v| v.as_str())
        {
            found = Some(v.to_owned());
        }
    }
    found
}

/// A jj version, as `jj --version` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct JjVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for JjVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Refuses a jj older than [`MIN_JJ_VERSION`]: `exe --version` once per process and
/// executable. An unparseable banner passes (a custom build), as for git.
pub fn require_jj_version(exe: &Path, env: &VcsEnv) -> Result<Option<JjVersion>> {
    let outcome = super::version_banner(exe, env).map(|text| parse_jj_version(&text));
    let min = JjVersion(MIN_JJ_VERSION.0, MIN_JJ_VERSION.1, MIN_JJ_VERSION.2);
    match outcome {
        Err(detail) => Err(VcsError::JjUnavailable {
            exe: exe.to_owned(),
            detail,
        }),
        Ok(Some(v)) if v < min => Err(VcsError::JjTooOld {
            exe: exe.to_owned(),
            found: v,
        }),
        Ok(v) => Ok(v),
    }
}

/// [`require_jj_version`], remembered across processes in the repository's shared
/// directory (`tether-jj-version`), keyed by the executable's resolved path, size
/// and modification time: a command then checks the version without starting jj,
/// and any other jj binary (or the same path rebuilt) is asked again.
fn check_version_cached(exe: &Path, env: &VcsEnv, repo_dir: &Path) -> Result<()> {
    let resolved = resolve_exe(exe, env);
    let key = resolved.as_deref().and_then(|p| {
        let meta = fs::metadata(p).ok()?;
        let mtime = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some(format!("{}\t{}\t{mtime}", p.display(), meta.len()))
    });
    let cache = repo_dir.join("tether-jj-version");
    if let Some(key) = &key
        && let Ok(text) = fs::read_to_string(&cache)
        && let Some((k, v)) = text.trim_end().rsplit_once('\t')
        && k == key
        && parse_jj_version(&format!("jj {v}"))
            .is_some_and(|v| v >= JjVersion(MIN_JJ_VERSION.0, MIN_JJ_VERSION.1, MIN_JJ_VERSION.2))
    {
        return Ok(());
    }
    let found = require_jj_version(exe, env)?;
    if let (Some(key), Some(v)) = (key, found) {
        // Best effort: a read-only repository just checks again next time.
        let tmp = repo_dir.join(format!("tether-jj-version.{}", std::process::id()));
        if fs::write(&tmp, format!("{key}\t{v}\n")).is_ok() && fs::rename(&tmp, &cache).is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }
    Ok(())
}

/// The executable `Command` would run for `exe`: itself when it names a path, else the
/// first match on `env`'s `PATH`.
fn resolve_exe(exe: &Path, env: &VcsEnv) -> Option<PathBuf> {
    if exe.components().count() > 1 {
        return Some(exe.to_owned());
    }
    let path = env.get_os("PATH")?;
    std::env::split_paths(path)
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
}

/// `jj 0.45.1`, `jj 0.45.1-4f0c1e2a...`.
pub fn parse_jj_version(banner: &str) -> Option<JjVersion> {
    let rest = banner.trim().strip_prefix("jj ")?;
    let token = rest.split_whitespace().next()?;
    let mut nums = token.split(['.', '-', '+']).map(|p| p.parse::<u32>().ok());
    let major = nums.next()??;
    let minor = nums.next()??;
    let patch = nums.next().flatten().unwrap_or(0);
    Some(JjVersion(major, minor, patch))
}

/// Ids of `history` that still exist: a caller holding commit ids from the op log can
/// tell which vanished. (Set form of [`Vcs::visible_ids`].)
pub fn visible_set(vcs: &dyn Vcs) -> Result<HashSet<String>> {
    Ok(vcs
        .visible_ids()?
        .into_iter()
        .map(|c| c.as_str().to_owned())
        .collect())
}

#[cfg(test)]
mod tests;
