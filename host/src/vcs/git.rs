//! The git adapter, on libgit2 (`git2`).
//!
//! Everything here is in-process: no git subprocess on the hot path. The exceptions are
//! the user's commit hooks, which [`GitVcs::commit_paths`] runs as `git commit` would
//! (the spec: "a refusing pre-commit hook stops the dataset commit and leaves nothing
//! staged"), and the once-per-process `git --version` of `require_git_version`.
//!
//! The repository is opened explicitly from a directory, never from `GIT_DIR` and
//! friends (see [`VcsEnv`]): a hook that runs tether must still reach the dataset's
//! own repository. libgit2 then ignores `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` too,
//! so when the environment names either, the configuration is assembled here the way
//! git does it (one known gap: `includeIf "gitdir:..."` in those files is not
//! evaluated, since libgit2 only evaluates it for configs it loads itself).
//!
//! A dataset commit (`commit_paths`) follows `git commit -- PATH...`: the index is
//! locked (`index.lock`) for the whole operation; the commit's tree is `HEAD`'s with
//! the paths' work-tree contents, built in a temporary index that the hooks see as
//! `GIT_INDEX_FILE`; the real index gets the same paths updated and replaces the old one
//! only once the commit exists. A refusal anywhere before that leaves index and branch
//! as they were.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use git2::{
    BranchType, CheckoutNotificationType, Config, ConfigLevel, ErrorCode, ObjectType, Oid,
    Repository, RepositoryOpenFlags, RepositoryState, Signature, Sort, Status, StatusOptions, Time,
    TreeWalkMode, TreeWalkResult, WorktreeAddOptions,
};
use sha2::{Digest, Sha256};

use super::keyed_cache::KeyedCache;
use super::{
    BranchInfo, CommitId, FileMap, GitVersion, HeadState, HistoryCommit, MIN_GIT_VERSION,
    PARKING_PREFIX, PathChange, Result, Vcs, VcsEnv, VcsError, VcsKind, WorktreeInfo,
    is_parking_branch, normalize_path, normalize_prefix,
};

/// A git checkout (main worktree or linked one).
pub struct GitVcs {
    /// libgit2 handles are `Send` but not `Sync`; one lock serializes this adapter's
    /// reads, which are short. `commit_paths` opens its own handle instead, since it
    /// swaps the handle's index and runs hooks for an unbounded time.
    repo: Mutex<Repository>,
    /// The work tree, without a trailing separator.
    root: PathBuf,
    /// This checkout's git dir (`.git/`, or `.git/worktrees/<name>/`).
    git_dir: PathBuf,
    /// git's common dir, shared by every worktree.
    common_dir: PathBuf,
    env: VcsEnv,
    /// Blobs read from the object database by history walks (tests and benchmarks
    /// check that unchanged manifests are read once).
    blob_reads: AtomicU64,
    /// Index reads by [`Vcs::tracked`] (tests check that an unchanged index
    /// is answered from its cache).
    index_reads: AtomicU64,
}

impl std::fmt::Debug for GitVcs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitVcs")
            .field("root", &self.root)
            .field("git_dir", &self.git_dir)
            .field("common_dir", &self.common_dir)
            .finish_non_exhaustive()
    }
}

impl GitVcs {
    /// Opens the git checkout enclosing `start`, with the process environment.
    pub fn open(start: &Path) -> Result<Self> {
        Self::open_with_env(start, VcsEnv::from_process())
    }

    /// Opens the git checkout enclosing `start` (any directory inside its work tree).
    /// Discovery honours `GIT_CEILING_DIRECTORIES` and
    /// `GIT_DISCOVERY_ACROSS_FILESYSTEM` from `env`, as git does.
    pub fn open_with_env(start: &Path, env: VcsEnv) -> Result<Self> {
        let start = std::path::absolute(start)
            .map_err(|e| VcsError::io("resolving the start directory", e))?;
        let repo = open_repository(&start, &env, false)?;
        let root = clean_dir(repo.workdir().ok_or_else(|| VcsError::BareRepository {
            path: repo.path().to_owned(),
        })?);
        let git_dir = clean_dir(repo.path());
        let common_dir = clean_dir(repo.commondir());
        Ok(GitVcs {
            repo: Mutex::new(repo),
            root,
            git_dir,
            common_dir,
            env,
            blob_reads: AtomicU64::new(0),
            index_reads: AtomicU64::new(0),
        })
    }

    /// This checkout's git dir (`.git/` or `.git/worktrees/<name>/`): per-checkout state
    /// such as the index and `HEAD` lives there.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The environment this adapter works in and gives its hooks.
    pub fn env(&self) -> &VcsEnv {
        &self.env
    }

    /// How many blobs history walks have read from the object database so far. Cached
    /// reads do not count.
    pub fn blob_reads(&self) -> u64 {
        self.blob_reads.load(Ordering::Relaxed)
    }

    /// How many times [`Vcs::tracked`] has read the index so far.
    pub fn index_reads(&self) -> u64 {
        self.index_reads.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Repository> {
        // A panic while holding the lock cannot leave the handle inconsistent (libgit2
        // state lives on disk), so a poisoned lock is still usable.
        self.repo.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh handle on exactly this checkout.
    fn reopen(&self) -> Result<Repository> {
        open_repository(&self.root, &self.env, true)
    }

    fn identity(&self, config: &Config) -> Result<(Signature<'static>, Signature<'static>)> {
        let lookup = |env_var: &str, keys: &[&str]| -> Option<String> {
            self.env
                .get(env_var)
                .map(str::to_owned)
                .or_else(|| keys.iter().find_map(|k| config.get_string(k).ok()))
                .filter(|v| !v.trim().is_empty())
        };
        let email_fallback = self.env.get("EMAIL").map(str::to_owned);
        let author_name = lookup("GIT_AUTHOR_NAME", &["author.name", "user.name"]).ok_or(
            VcsError::IdentityMissing {
                missing: "user.name",
            },
        )?;
        let author_email = lookup("GIT_AUTHOR_EMAIL", &["author.email", "user.email"])
            .or_else(|| email_fallback.clone())
            .ok_or(VcsError::IdentityMissing {
                missing: "user.email",
            })?;
        let committer_name = lookup("GIT_COMMITTER_NAME", &["committer.name", "user.name"]).ok_or(
            VcsError::IdentityMissing {
                missing: "user.name",
            },
        )?;
        let committer_email = lookup("GIT_COMMITTER_EMAIL", &["committer.email", "user.email"])
            .or(email_fallback)
            .ok_or(VcsError::IdentityMissing {
                missing: "user.email",
            })?;
        let now = now_time();
        let author_time = match self.env.get("GIT_AUTHOR_DATE") {
            Some(v) => parse_git_date(v).ok_or_else(|| VcsError::InvalidDate {
                var: "GIT_AUTHOR_DATE",
                value: v.into(),
            })?,
            None => now,
        };
        let committer_time = match self.env.get("GIT_COMMITTER_DATE") {
            Some(v) => parse_git_date(v).ok_or_else(|| VcsError::InvalidDate {
                var: "GIT_COMMITTER_DATE",
                value: v.into(),
            })?,
            None => now,
        };
        let sig = |name: &str, email: &str, t: Time| {
            Signature::new(name, email, &t)
                .map_err(VcsError::git("building the commit's signature"))
        };
        Ok((
            sig(&author_name, &author_email, author_time)?,
            sig(&committer_name, &committer_email, committer_time)?,
        ))
    }

    /// The hook `name` if present and executable, as git looks for it: `core.hooksPath`
    /// (relative to the work tree) or the common dir's `hooks/`.
    fn hook(&self, config: &Config, name: &str) -> Option<PathBuf> {
        let dir = match config.get_path("core.hooksPath") {
            Ok(p) if p.is_absolute() => p,
            Ok(p) => self.root.join(p),
            Err(_) => self.common_dir.join("hooks"),
        };
        let path = dir.join(name);
        let meta = fs::metadata(&path).ok()?;
        if !meta.is_file() || !is_executable(&meta) {
            if meta.is_file() {
                tracing::debug!(hook = %path.display(), "hook ignored: not executable (as git does)");
            }
            return None;
        }
        Some(path)
    }

    /// Runs one hook as `git commit` would: work tree as cwd, the clean environment plus
    /// what git sets for hooks. Its stdout and stderr go to one file, so a refusal can
    /// show them interleaved as the user would have seen them.
    fn run_hook(
        &self,
        hook: &'static str,
        path: &Path,
        args: &[&Path],
        vars: &[(&str, &std::ffi::OsStr)],
    ) -> Result<()> {
        let io = |e| VcsError::io(format!("capturing the {hook} hook's output"), e);
        let mut out = tempfile::tempfile().map_err(io)?;
        let mut cmd = Command::new(path);
        cmd.args(args)
            .current_dir(&self.root)
            .env_clear()
            .envs(self.env.vars())
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(io)?)
            .stderr(out.try_clone().map_err(io)?);
        if self.git_dir != self.common_dir {
            // git exports GIT_DIR to hooks in a linked worktree (not in the main one).
            cmd.env("GIT_DIR", &self.git_dir);
        }
        let status = cmd.status().map_err(|source| VcsError::HookFailed {
            hook,
            path: path.to_owned(),
            source,
        })?;
        let mut bytes = Vec::new();
        out.seek(SeekFrom::Start(0))
            .and_then(|_| out.read_to_end(&mut bytes))
            .map_err(io)?;
        let output = String::from_utf8_lossy(&bytes).into_owned();
        if !status.success() {
            let status = match status.code() {
                Some(code) => format!("exit status {code}"),
                None => "killed by a signal".to_owned(),
            };
            return Err(VcsError::HookRefused {
                hook,
                status,
                output,
            });
        }
        if !output.trim().is_empty() {
            tracing::info!(hook, "{}", output.trim_end());
        }
        Ok(())
    }

    fn worktree_list(&self, repo: &Repository) -> Result<Vec<WorktreeInfo>> {
        let mut out = Vec::new();
        let current = canonical(&self.git_dir);
        // The main worktree: its HEAD is the common dir's. A bare main repository with
        // linked worktrees has no checkout of its own and is left out.
        let main_root = if !repo.is_worktree() {
            Some(self.root.clone())
        } else {
            Repository::open_ext(
                &self.common_dir,
                RepositoryOpenFlags::NO_SEARCH,
                std::iter::empty::<&str>(),
            )
            .ok()
            .and_then(|r| r.workdir().map(clean_dir))
        };
        if let Some(path) = main_root {
            let (branch, head) = read_head_file(repo, &self.common_dir);
            out.push(WorktreeInfo {
                name: None,
                exists: path.exists(),
                path,
                branch,
                head,
                is_main: true,
                is_current: canonical(&self.common_dir) == current,
                locked: false,
            });
        }
        let admin = self.common_dir.join("worktrees");
        let mut names: Vec<String> = match fs::read_dir(&admin) {
            Ok(entries) => entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(VcsError::io(format!("listing {}", admin.display()), e)),
        };
        names.sort();
        for name in names {
            let dir = admin.join(&name);
            // `gitdir` names the checkout's `.git` file; a directory without it is not
            // a worktree git would list.
            let Ok(gitdir) = fs::read_to_string(dir.join("gitdir")) else {
                continue;
            };
            let dot_git = PathBuf::from(gitdir.trim_end_matches(['\n', '\r']));
            let path = clean_dir(dot_git.parent().unwrap_or(&dot_git));
            let (branch, head) = read_head_file(repo, &dir);
            out.push(WorktreeInfo {
                name: Some(name),
                exists: dot_git.exists(),
                path,
                branch,
                head,
                is_main: false,
                is_current: canonical(&dir) == current,
                locked: dir.join("locked").exists(),
            });
        }
        Ok(out)
    }

    /// The other checkout that has `refname` checked out, if any.
    fn checked_out_elsewhere(&self, repo: &Repository, branch: &str) -> Result<Option<PathBuf>> {
        Ok(self
            .worktree_list(repo)?
            .into_iter()
            .find(|w| !w.is_current && w.exists && w.branch.as_deref() == Some(branch))
            .map(|w| w.path))
    }

    /// A safe checkout of `commit`'s tree into the work tree and index: refuses, and
    /// changes nothing, when a local change would be overwritten.
    fn safe_checkout(&self, repo: &Repository, commit: &git2::Commit<'_>) -> Result<()> {
        let mut conflicts = Vec::new();
        let result = {
            let mut builder = git2::build::CheckoutBuilder::new();
            builder
                .safe()
                .notify_on(CheckoutNotificationType::CONFLICT)
                .notify(|_, path, _, _, _| {
                    if let Some(p) = path {
                        conflicts.push(p.to_string_lossy().into_owned());
                    }
                    true
                });
            repo.checkout_tree(commit.as_object(), Some(&mut builder))
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.code() == ErrorCode::Conflict || !conflicts.is_empty() => {
                conflicts.sort();
                conflicts.dedup();
                Err(VcsError::CheckoutConflict { paths: conflicts })
            }
            Err(e) => Err(VcsError::git("checking out")(e)),
        }
    }

    fn commit_paths_inner(&self, paths: &[String], message: &str) -> Result<CommitId> {
        refuse_per_checkout(paths)?;
        let repo = self.reopen()?;
        match repo.state() {
            RepositoryState::Clean => {}
            state => {
                return Err(VcsError::OperationInProgress {
                    state: format!("{state:?}").to_lowercase(),
                });
            }
        }
        let config = repo
            .config()
            .map_err(VcsError::git("reading the configuration"))?;
        // Identity first: a missing one should not cost a hook run.
        let (author, committer) = self.identity(&config)?;

        let index_path = self.git_dir.join("index");
        let lock = LockFile::acquire(self.git_dir.join("index.lock"))?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let next_index = self.git_dir.join(format!("next-index-{pid}-{n}.lock"));
        let new_index = self.git_dir.join(format!("tether-index-{pid}-{n}"));
        let _cleanup = RemoveOnDrop(vec![
            next_index.clone(),
            suffixed(&next_index, ".lock"),
            new_index.clone(),
            suffixed(&new_index, ".lock"),
        ]);

        let parent = match repo.head() {
            Ok(head) => Some(
                head.peel_to_commit()
                    .map_err(VcsError::git("reading HEAD"))?,
            ),
            Err(e) if no_head_yet(&e) => None,
            Err(e) => return Err(VcsError::git("reading HEAD")(e)),
        };
        let parent_tree = match &parent {
            Some(c) => Some(c.tree().map_err(VcsError::git("reading HEAD's tree"))?),
            None => None,
        };

        // The commit's index: HEAD's tree plus the paths as the work tree has them.
        let mut partial =
            git2::Index::open(&next_index).map_err(VcsError::git("creating the commit's index"))?;
        if let Some(tree) = &parent_tree {
            partial
                .read_tree(tree)
                .map_err(VcsError::git("reading HEAD's tree"))?;
        }
        let staged_tree = self.stage_and_write_tree(&repo, &mut partial, paths)?;
        let head_tree = match &parent_tree {
            Some(t) => t.id(),
            None => empty_tree(&repo)?,
        };
        if staged_tree == head_tree {
            return Err(VcsError::NothingToCommit {
                paths: paths.to_vec(),
            });
        }

        // The real index as it will be after the commit: same paths updated, every
        // other entry (staged work included) untouched. Written aside, swapped in last.
        if index_path.exists() {
            fs::copy(&index_path, &new_index).map_err(|e| VcsError::io("copying the index", e))?;
        }
        let mut real = git2::Index::open(&new_index).map_err(VcsError::git("reading the index"))?;
        repo.set_index(&mut real)
            .map_err(VcsError::git("preparing the index"))?;
        // The entries staged above, as they are: each file was hashed (through
        // its filters) once, not once per index.
        copy_staged(&partial, &mut real, paths)?;
        real.write().map_err(VcsError::git("writing the index"))?;

        let idx_var = |p: &Path| p.as_os_str().to_owned();
        let author_date = format!(
            "@{} {}",
            author.when().seconds(),
            format_offset(author.when().offset_minutes())
        );
        let author_vars = [
            (
                "GIT_AUTHOR_NAME",
                author.name().unwrap_or_default().to_owned(),
            ),
            (
                "GIT_AUTHOR_EMAIL",
                author.email().unwrap_or_default().to_owned(),
            ),
            ("GIT_AUTHOR_DATE", author_date),
        ];
        let partial_index = idx_var(&next_index);
        let mut vars: Vec<(&str, &std::ffi::OsStr)> = vec![
            ("GIT_INDEX_FILE", partial_index.as_os_str()),
            ("GIT_EDITOR", std::ffi::OsStr::new(":")),
            ("GIT_PREFIX", std::ffi::OsStr::new("")),
        ];
        vars.extend(
            author_vars
                .iter()
                .map(|(k, v)| (*k, std::ffi::OsStr::new(v.as_str()))),
        );

        let tree_id = match self.hook(&config, "pre-commit") {
            Some(hook) => {
                self.run_hook("pre-commit", &hook, &[], &vars)?;
                // A hook may `git add` to the index it was given, as with git.
                partial.read(true).map_err(VcsError::git(
                    "re-reading the commit's index after pre-commit",
                ))?;
                partial
                    .write_tree_to(&repo)
                    .map_err(VcsError::git("writing the commit's tree"))?
            }
            None => staged_tree,
        };

        let msg_path = self.git_dir.join("COMMIT_EDITMSG");
        let mut message = message.to_owned();
        if let Some(hook) = self.hook(&config, "commit-msg") {
            let mut text = message.clone();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            fs::write(&msg_path, text).map_err(|e| VcsError::io("writing COMMIT_EDITMSG", e))?;
            self.run_hook("commit-msg", &hook, &[&msg_path], &vars)?;
            message = fs::read_to_string(&msg_path)
                .map_err(|e| VcsError::io("reading COMMIT_EDITMSG", e))?;
        }
        let message = cleanup_message(&message);
        if message.is_empty() {
            return Err(VcsError::EmptyMessage);
        }
        if let Err(e) = fs::write(&msg_path, &message) {
            tracing::debug!("could not record COMMIT_EDITMSG: {e}");
        }

        let tree = repo
            .find_tree(tree_id)
            .map_err(VcsError::git("reading the commit's tree"))?;
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        // Updating "HEAD" moves the branch it names (creating it on an unborn branch),
        // and refuses if HEAD moved since we read it (libgit2 checks the first parent).
        let id = repo
            .commit(Some("HEAD"), &author, &committer, &message, &tree, &parents)
            .map_err(VcsError::git("creating the commit"))?;

        // Swap the updated index in through the lock we hold, as git does.
        lock.commit_from(&new_index, &index_path)
            .map_err(|e| VcsError::io("updating the index", e))?;

        if let Some(hook) = self.hook(&config, "post-commit") {
            let real_index = idx_var(&index_path);
            vars[0] = ("GIT_INDEX_FILE", real_index.as_os_str());
            // git ignores post-commit's status: the commit is made.
            if let Err(e) = self.run_hook("post-commit", &hook, &[], &vars) {
                tracing::warn!("{e}");
            }
        }
        Ok(CommitId::new(id.to_string()))
    }

    /// Where [`Vcs::tracked`] keeps its last answer: this checkout's git dir,
    /// beside the index it describes.
    fn tracked_cache(&self) -> KeyedCache {
        KeyedCache {
            file: self.git_dir.join(TRACKED_CACHE),
            tag: TRACKED_CACHE_TAG,
            max: 1 << 20,
        }
    }

    /// What [`Vcs::tracked`]'s answer for `paths` depends on: the commit HEAD
    /// names and the index file's identity (device, inode, size, modified
    /// and changed times: git replaces the index by renaming a new file over
    /// it, and nothing sets a file's change time back). Read before the
    /// index, so a change during the read shows in the next key. `None`
    /// when either cannot be read: then nothing is remembered.
    fn tracked_key(&self, paths: &[&str]) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let head = match self.lock().refname_to_id("HEAD") {
            Ok(oid) => oid.to_string(),
            Err(e) if no_head_yet(&e) => "unborn".to_string(),
            Err(_) => return None,
        };
        let index = match fs::symlink_metadata(self.git_dir.join("index")) {
            Ok(md) => format!(
                "{} {} {} {}.{} {}.{}",
                md.dev(),
                md.ino(),
                md.size(),
                md.mtime(),
                md.mtime_nsec(),
                md.ctime(),
                md.ctime_nsec()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "none".to_string(),
            Err(_) => return None,
        };
        Some(format!(
            "{head} {index} {}",
            serde_json::to_string(paths).ok()?
        ))
    }

    /// Which of `paths` the index or HEAD's tree has, read from them.
    fn tracked_in_index(&self, paths: &[&str]) -> Result<Vec<String>> {
        self.index_reads.fetch_add(1, Ordering::Relaxed);
        let repo = self.lock();
        let mut index = repo.index().map_err(VcsError::git("reading the index"))?;
        index
            .read(false)
            .map_err(VcsError::git("reading the index"))?;
        let head_tree = match repo.head() {
            Ok(h) => Some(
                h.peel_to_tree()
                    .map_err(VcsError::git("reading HEAD's tree"))?,
            ),
            Err(e) if no_head_yet(&e) => None,
            Err(e) => return Err(VcsError::git("reading HEAD")(e)),
        };
        let mut out = Vec::new();
        for &given in paths {
            let path = normalize_path(given)?;
            let in_index = (0..=3).any(|stage| index.get_path(Path::new(&path), stage).is_some())
                || index.find_prefix(Path::new(&format!("{path}/"))).is_ok();
            let in_head = head_tree
                .as_ref()
                .is_some_and(|t| t.get_path(Path::new(&path)).is_ok());
            if in_index || in_head {
                out.push(given.to_owned());
            }
        }
        Ok(out)
    }

    /// Stage `paths` into `partial` (HEAD's tree already read into it), write
    /// it, and write its tree: the tree's id.
    ///
    /// A commit of many paths writes its new blobs and trees as one pack
    /// instead of a loose object each: they are collected in memory (a
    /// mempack backend on a handle of its own) and written with one pack and
    /// its index before anything else (a hook, the commit) can look for them.
    /// Thousands of loose objects cost a temporary file and a rename each,
    /// and push git toward an automatic `gc` on the user's next command.
    fn stage_and_write_tree(
        &self,
        repo: &Repository,
        partial: &mut git2::Index,
        paths: &[String],
    ) -> Result<Oid> {
        let packed = paths.len() >= PACK_FROM;
        let own;
        let mut plain = None;
        let staging = match packed {
            true => {
                own = self.reopen()?;
                let prepare = VcsError::git("preparing the commit's objects");
                if self.no_filters_apply(&own, partial, paths)? {
                    // Nothing to read from the store while staging: an
                    // object database of the mempack alone, so a write does
                    // not first look for its object in (and re-scan) the
                    // packs. `write_pack` packs what the repository lacks.
                    let odb = git2::Odb::new().map_err(prepare)?;
                    odb.add_new_mempack_backend(MEMPACK_PRIORITY)
                        .map_err(VcsError::git("preparing the commit's objects"))?;
                    own.set_odb(&odb)
                        .map_err(VcsError::git("preparing the commit's objects"))?;
                    plain = Some(odb);
                } else {
                    // The backend stays with the handle's object database.
                    own.odb()
                        .and_then(|odb| odb.add_new_mempack_backend(MEMPACK_PRIORITY).map(drop))
                        .map_err(prepare)?;
                }
                &own
            }
            false => repo,
        };
        staging
            .set_index(partial)
            .map_err(VcsError::git("preparing the commit's index"))?;
        match &plain {
            Some(odb) => self.stage_plain(odb, partial, paths)?,
            None => self.stage_paths(partial, paths)?,
        }
        partial
            .write()
            .map_err(VcsError::git("writing the commit's index"))?;
        let tree = partial
            .write_tree_to(staging)
            .map_err(VcsError::git("writing the commit's tree"))?;
        if packed {
            self.write_pack(repo, staging, partial, tree, paths)?;
            // The index goes on with the commit's own handle (hooks, tree).
            repo.set_index(partial)
                .map_err(VcsError::git("preparing the commit's index"))?;
        }
        Ok(tree)
    }

    /// Write the objects a commit of `paths` adds (their blobs and the trees
    /// above them, held by `staging`'s mempack) as one pack. A mempack dumps
    /// only what its commits reach, so the objects are named here: each one
    /// `repo` (no mempack) does not already have.
    fn write_pack(
        &self,
        repo: &Repository,
        staging: &Repository,
        partial: &git2::Index,
        tree: Oid,
        paths: &[String],
    ) -> Result<()> {
        let odb = repo
            .odb()
            .map_err(VcsError::git("opening the object database"))?;
        let root = staging
            .find_tree(tree)
            .map_err(VcsError::git("reading the commit's tree"))?;
        let mut seen = std::collections::HashSet::new();
        let mut wanted: Vec<(Oid, String)> = Vec::new();
        let mut want = |id: Oid, name: &str| {
            // No re-scan of the pack directory per object it lacks (most
            // are new): one missed in a pack written just now is only packed
            // twice.
            if seen.insert(id) && !odb.exists_ext(id, git2::OdbLookupFlags::NO_REFRESH) {
                wanted.push((id, name.to_owned()));
            }
        };
        want(tree, "");
        for path in paths {
            if let Some(entry) = partial.get_path(Path::new(path), 0) {
                want(entry.id, path);
            }
        }
        for dir in ancestor_dirs(paths) {
            // A directory the commit emptied is in no tree any more.
            if let Ok(entry) = root.get_path(dir) {
                want(entry.id(), &dir.to_string_lossy());
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let mut builder = staging
            .packbuilder()
            .map_err(VcsError::git("packing the commit's objects"))?;
        // The delta search on every core (0: as many threads as there are).
        builder.set_threads(0);
        for (id, name) in &wanted {
            builder
                .insert_object(*id, Some(name))
                .map_err(VcsError::git("packing the commit's objects"))?;
        }
        let mut pack = git2::Buf::new();
        builder
            .write_buf(&mut pack)
            .map_err(VcsError::git("packing the commit's objects"))?;
        let mut writer = odb
            .packwriter()
            .map_err(VcsError::git("writing the commit's objects"))?;
        std::io::Write::write_all(&mut writer, &pack)
            .map_err(|e| VcsError::io("writing the commit's objects", e))?;
        writer
            .commit()
            .map_err(VcsError::git("writing the commit's objects"))?;
        Ok(())
    }

    /// Puts each path's work-tree state into `index` (which must be the repository's
    /// current index, so filters and stat data apply): added or updated when it exists,
    /// removed when it does not.
    fn stage_paths(&self, index: &mut git2::Index, paths: &[String]) -> Result<()> {
        for path in paths {
            let rel = Path::new(path);
            match fs::symlink_metadata(self.root.join(rel)) {
                Ok(meta) if meta.is_dir() => return Err(VcsError::NotAFile { path: path.clone() }),
                Ok(_) => index
                    .add_path(rel)
                    .map_err(VcsError::git(format!("staging {path}")))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => index
                    .remove_path(rel)
                    .map_err(VcsError::git(format!("staging the removal of {path}")))?,
                Err(e) => return Err(VcsError::io(format!("reading {path}"), e)),
            }
        }
        Ok(())
    }

    /// Whether staging `paths` would pass their content through unchanged:
    /// no attributes file git reads for them exists (so no `text`, `eol`,
    /// `ident` or `filter`), and `core.autocrlf` is not `true` (`input` and
    /// `false` change only CRLF, which [`Self::stage_plain`] leaves to
    /// libgit2). `partial` is the index libgit2 would read attributes from.
    fn no_filters_apply(
        &self,
        repo: &Repository,
        partial: &git2::Index,
        paths: &[String],
    ) -> Result<bool> {
        if !cfg!(unix) {
            return Ok(false);
        }
        let config = repo
            .config()
            .map_err(VcsError::git("reading the configuration"))?;
        // `attr.tree` (git 2.42) reads attributes from a tree instead.
        if config.get_bool("core.autocrlf").unwrap_or(false)
            || config.get_path("core.attributesFile").is_ok()
            || config.get_entry("attr.tree").is_ok()
        {
            return Ok(false);
        }
        let exists = |p: &Path| fs::symlink_metadata(p).is_ok();
        // The files git and libgit2 read for every path, wherever a home or
        // an XDG directory may point (the process's and the adapter's).
        let mut global = vec![
            PathBuf::from("/etc/gitattributes"),
            self.common_dir.join("info/attributes"),
        ];
        if let Ok(system) = Config::find_system()
            && let Some(dir) = system.parent()
        {
            global.push(dir.join("gitattributes"));
        }
        let both = |name: &str| -> Vec<PathBuf> {
            [
                std::env::var_os(name),
                self.env.get_os(name).map(Into::into),
            ]
            .into_iter()
            .flatten()
            .map(PathBuf::from)
            .collect()
        };
        for dir in both("XDG_CONFIG_HOME") {
            global.push(dir.join("git/attributes"));
        }
        for dir in both("HOME") {
            global.push(dir.join(".config/git/attributes"));
        }
        if global.iter().any(|p| exists(p)) {
            return Ok(false);
        }
        // A `.gitattributes` in the top directory or any other above a
        // path, in the work tree or (where the work tree has none) in the
        // index.
        let mut dirs = ancestor_dirs(paths);
        dirs.insert(Path::new(""));
        Ok(!dirs.iter().any(|d| {
            let file = d.join(".gitattributes");
            exists(&self.root.join(&file)) || partial.get_path(&file, 0).is_some()
        }))
    }

    /// [`Self::stage_paths`] where no filter applies ([`Self::no_filters_apply`]):
    /// a regular file's blob is its bytes, written to `odb`, and its entry
    /// the one libgit2 would make. What this does not cover (a link, an
    /// executable, a CR, a mode the index keeps) goes through libgit2.
    #[cfg(unix)]
    fn stage_plain(
        &self,
        odb: &git2::Odb,
        index: &mut git2::Index,
        paths: &[String],
    ) -> Result<()> {
        use crate::model::fsutil;
        use std::os::unix::fs::MetadataExt;
        for path in paths {
            let rel = Path::new(path);
            let full = self.root.join(rel);
            // Opened without following a link; the entry's stat data is the
            // open file's, so it matches the bytes hashed.
            let opened = fsutil::nofollow(fs::OpenOptions::new().read(true))
                .open(&full)
                .and_then(|f| f.metadata().map(|m| (f, m)));
            let (mut file, meta) = match opened {
                Ok((f, m)) if m.is_file() && m.mode() & 0o111 == 0 => (f, m),
                // A directory, a link, a FIFO, an executable: libgit2
                // decides (and refuses what it must).
                Ok(_) => {
                    self.stage_paths(index, std::slice::from_ref(path))?;
                    continue;
                }
                Err(e) if fsutil::is_link_error(&e) => {
                    self.stage_paths(index, std::slice::from_ref(path))?;
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    index
                        .remove_path(rel)
                        .map_err(VcsError::git(format!("staging the removal of {path}")))?;
                    continue;
                }
                Err(e) => return Err(VcsError::io(format!("reading {path}"), e)),
            };
            let kept_mode = index
                .get_path(rel, 0)
                .is_some_and(|e| e.mode != PLAIN_FILE_MODE);
            // One byte past the size shows a file that grew; `take` keeps
            // `File::read_to_end` from asking the size (a stat, a seek) again.
            let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
            Read::by_ref(&mut file)
                .take(meta.len() + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| VcsError::io(format!("reading {path}"), e))?;
            if kept_mode || bytes.len() as u64 != meta.len() || bytes.contains(&b'\r') {
                self.stage_paths(index, std::slice::from_ref(path))?;
                continue;
            }
            let id = odb
                .write(ObjectType::Blob, &bytes)
                .map_err(VcsError::git(format!("staging {path}")))?;
            index
                .add(&plain_entry(path, &meta, id))
                .map_err(VcsError::git(format!("staging {path}")))?;
        }
        Ok(())
    }

    #[cfg(not(unix))]
    fn stage_plain(
        &self,
        _odb: &git2::Odb,
        index: &mut git2::Index,
        paths: &[String],
    ) -> Result<()> {
        self.stage_paths(index, paths)
    }
}

/// Every directory above one of `paths` (relative, `/`-separated), the top
/// directory (`""`) not included.
fn ancestor_dirs(paths: &[String]) -> std::collections::BTreeSet<&Path> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in paths {
        let mut dir = Path::new(path).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            if !dirs.insert(d) {
                break;
            }
            dir = d.parent();
        }
    }
    dirs
}

/// The mode of a regular file that is not executable, as the index has it.
const PLAIN_FILE_MODE: u32 = 0o100644;

/// The index entry `git add` makes for a regular, non-executable file with
/// `meta` whose (unfiltered) content is the blob `id`: libgit2's stat data,
/// fields cut to the index's 32 bits as it cuts them (`dev` is `st_rdev`
/// there; git itself ignores it on Linux).
#[cfg(unix)]
fn plain_entry(path: &str, meta: &fs::Metadata, id: Oid) -> git2::IndexEntry {
    use std::os::unix::fs::MetadataExt;
    git2::IndexEntry {
        ctime: git2::IndexTime::new(meta.ctime() as i32, meta.ctime_nsec() as u32),
        mtime: git2::IndexTime::new(meta.mtime() as i32, meta.mtime_nsec() as u32),
        dev: meta.rdev() as u32,
        ino: meta.ino() as u32,
        mode: PLAIN_FILE_MODE,
        uid: meta.uid(),
        gid: meta.gid(),
        file_size: meta.size() as u32,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Give `to` the entries `from` has for `paths` (stage 0; a path `from` lacks
/// is removed from `to`), as [`GitVcs::stage_paths`] put them there: the
/// blobs are written already, and the entries carry the work-tree stat data.
fn copy_staged(from: &git2::Index, to: &mut git2::Index, paths: &[String]) -> Result<()> {
    for path in paths {
        let rel = Path::new(path);
        match from.get_path(rel, 0) {
            Some(entry) => to
                .add(&entry)
                .map_err(VcsError::git(format!("staging {path}")))?,
            None => to
                .remove_path(rel)
                .map_err(VcsError::git(format!("staging the removal of {path}")))?,
        }
    }
    Ok(())
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// [`GitVcs::tracked_cache`]'s file in the git dir, and its format's tag.
const TRACKED_CACHE: &str = "tether-tracked";
const TRACKED_CACHE_TAG: &str = "tether-tracked 1\t";

/// Whether reading HEAD failed only because no commit exists yet (an unborn
/// branch, or no HEAD reference).
fn no_head_yet(e: &git2::Error) -> bool {
    e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound
}

/// From this many paths a commit writes its objects as one pack
/// ([`GitVcs::stage_and_write_tree`]); fewer are written loose, as git does,
/// so small commits do not leave a pack each.
const PACK_FROM: usize = 128;

/// The mempack backend's priority: above the loose and packed backends
/// (1 and 2), so every object written on its handle goes to memory.
const MEMPACK_PRIORITY: i32 = 1000;

impl Vcs for GitVcs {
    fn kind(&self) -> VcsKind {
        VcsKind::Git
    }

    fn root(&self) -> &Path {
        &self.root
    }

    fn shared_dir(&self) -> &Path {
        &self.common_dir
    }

    fn info_exclude(&self) -> Option<PathBuf> {
        Some(self.common_dir.join("info").join("exclude"))
    }

    fn head_state(&self) -> Result<HeadState> {
        let repo = self.lock();
        let head = repo
            .find_reference("HEAD")
            .map_err(VcsError::git("reading HEAD"))?;
        if let Some(target) = head.symbolic_target().ok().flatten() {
            let branch = target
                .strip_prefix("refs/heads/")
                .unwrap_or(target)
                .to_owned();
            return match repo.refname_to_id(target) {
                Ok(oid) => {
                    let commit = commit_id_of(&repo, oid)?;
                    Ok(if is_parking_branch(&branch) {
                        HeadState::Parked { branch, commit }
                    } else {
                        HeadState::Branch {
                            name: branch,
                            commit,
                        }
                    })
                }
                Err(e) if e.code() == ErrorCode::NotFound => Ok(HeadState::Unborn { branch }),
                Err(e) => Err(VcsError::git("reading HEAD")(e)),
            };
        }
        let oid = head.target().ok_or_else(|| {
            VcsError::git("reading HEAD")(git2::Error::from_str("HEAD has no target"))
        })?;
        Ok(HeadState::Detached {
            commit: commit_id_of(&repo, oid)?,
        })
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
            // A leading `-` would be an option to git; tether passes REV through as git does.
            if rev.trim().is_empty() || rev.starts_with('-') {
                return Err(unknown("not a revision".into()));
            }
            let repo = self.lock();
            let object = repo.revparse_single(rev).map_err(|e| match e.code() {
                ErrorCode::UnbornBranch => VcsError::NoCommitYet,
                ErrorCode::Ambiguous => {
                    unknown(format!("ambiguous: {}; give more digits", e.message()))
                }
                _ => unknown(e.message().to_owned()),
            })?;
            let kind = object.kind();
            let commit = object.peel_to_commit().map_err(|_| {
                unknown(format!(
                    "it names a {}, not a commit",
                    kind.map_or("object".into(), |k| k.to_string())
                ))
            })?;
            Ok(CommitId::new(commit.id().to_string()))
        })();
        found.map_err(|e| self.suggest_revision(e))
    }

    fn branches(&self) -> Result<Vec<BranchInfo>> {
        let repo = self.lock();
        let mut out = Vec::new();
        for branch in repo
            .branches(Some(BranchType::Local))
            .map_err(VcsError::git("listing branches"))?
        {
            let (branch, _) = branch.map_err(VcsError::git("listing branches"))?;
            let Some(name) = branch.name().ok().flatten().map(str::to_owned) else {
                continue;
            };
            let Ok(commit) = branch.get().peel_to_commit() else {
                continue;
            };
            out.push(BranchInfo {
                parking: is_parking_branch(&name),
                name,
                commit: CommitId::new(commit.id().to_string()),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn tags(&self) -> Result<Vec<BranchInfo>> {
        let repo = self.lock();
        let mut out = Vec::new();
        let refs = repo
            .references_glob("refs/tags/*")
            .map_err(VcsError::git("listing tags"))?;
        for r in refs {
            let r = r.map_err(VcsError::git("listing tags"))?;
            let Ok(name) = r.shorthand().map(str::to_owned) else {
                continue;
            };
            // A tag of a tree or blob names no commit: not a ref of history.
            let Ok(commit) = r.peel_to_commit() else {
                continue;
            };
            out.push(BranchInfo {
                name,
                commit: CommitId::new(commit.id().to_string()),
                parking: false,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn branch_head(&self, name: &str) -> Result<Option<CommitId>> {
        let repo = self.lock();
        match repo.find_branch(name, BranchType::Local) {
            Ok(b) => {
                let c = b
                    .get()
                    .peel_to_commit()
                    .map_err(VcsError::git(format!("reading branch {name}")))?;
                Ok(Some(CommitId::new(c.id().to_string())))
            }
            Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => Ok(None),
            Err(e) => Err(VcsError::git(format!("reading branch {name}"))(e)),
        }
    }

    fn read_file(&self, commit: &CommitId, path: &str) -> Result<Option<Vec<u8>>> {
        read_file_at(&self.lock(), commit, path)
    }

    fn list_files(&self, commit: &CommitId, prefix: &str) -> Result<Vec<String>> {
        list_files_at(&self.lock(), commit, prefix)
    }

    fn history<'a>(
        &'a self,
        prefix: &str,
    ) -> Result<Box<dyn Iterator<Item = Result<HistoryCommit>> + 'a>> {
        let prefix = normalize_prefix(prefix)?;
        let ids = {
            let repo = self.lock();
            visible_commits(&repo, &self.common_dir)?
        };
        Ok(Box::new(HistoryWalk::new(
            &self.repo,
            &self.blob_reads,
            ids,
            prefix,
        )))
    }

    fn commit_files(&self, commit: &CommitId, prefix: &str) -> Result<HistoryCommit> {
        let oid = Oid::from_str(commit.as_str())
            .map_err(VcsError::git(format!("reading commit id {commit}")))?;
        HistoryWalk::one(&self.repo, &self.blob_reads, oid, prefix)
    }

    fn visible_ids(&self) -> Result<Vec<CommitId>> {
        let repo = self.lock();
        Ok(visible_commits(&repo, &self.common_dir)?
            .iter()
            .map(|o| CommitId::new(o.to_string()))
            .collect())
    }

    fn history_key(&self) -> Result<Option<String>> {
        // Commits are immutable, so the walk is a function of its tips and of
        // what can change a commit's parents after the fact: the shallow
        // boundary, grafts and replace refs. Nothing else.
        let repo = self.lock();
        let mut h = Sha256::new();
        for tip in history_tips(&repo, &self.common_dir)? {
            h.update(tip.as_bytes());
        }
        for file in ["shallow", "info/grafts"] {
            h.update(file.as_bytes());
            match fs::read(self.common_dir.join(file)) {
                Ok(bytes) => h.update(&bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(VcsError::Io {
                        context: format!("reading .git/{file}"),
                        source: e,
                    });
                }
            }
        }
        h.update(b"replace");
        for r in repo
            .references_glob("refs/replace/*")
            .map_err(VcsError::git("listing refs"))?
        {
            let r = r.map_err(VcsError::git("listing refs"))?;
            h.update(r.name_bytes());
            if let Some(target) = r.target() {
                h.update(target.as_bytes());
            }
        }
        Ok(Some(hex::encode(h.finalize())))
    }

    fn history_digest(&self) -> Result<String> {
        let repo = self.lock();
        let mut ids: Vec<String> = visible_commits(&repo, &self.common_dir)?
            .iter()
            .map(Oid::to_string)
            .collect();
        ids.sort();
        let mut h = Sha256::new();
        for id in &ids {
            h.update(id.as_bytes());
            h.update(b"\n");
        }
        Ok(hex::encode(h.finalize()))
    }

    fn tracked(&self, paths: &[&str]) -> Result<Vec<String>> {
        // Asked on every command (the clone-safety check): answered from the
        // last answer while HEAD and the index file are the same, since
        // reading a dataset's index (a megabyte at 10,000 manifests, with
        // its checksum) was a fifth of an `add`.
        let cache = self.tracked_cache();
        let key = self.tracked_key(paths);
        if let Some(key) = &key
            && let Some(body) = cache.read(key)
            && let Ok(answer) = serde_json::from_str::<Vec<String>>(&body)
        {
            return Ok(answer);
        }
        let answer = self.tracked_in_index(paths)?;
        if let Some(key) = key
            && let Ok(body) = serde_json::to_string(&answer)
        {
            cache.write(&key, &body);
        }
        Ok(answer)
    }

    fn changes(&self) -> Result<Vec<PathChange>> {
        let repo = self.lock();
        statuses(&repo)
    }

    fn commit_paths(&self, paths: &[&str], message: &str) -> Result<CommitId> {
        let mut norm: Vec<String> = paths
            .iter()
            .map(|p| normalize_path(p))
            .collect::<Result<_>>()?;
        norm.sort();
        norm.dedup();
        if norm.is_empty() {
            return Err(VcsError::NothingToCommit { paths: Vec::new() });
        }
        self.commit_paths_inner(&norm, message)
    }

    fn create_branch(&self, name: &str, commit: &CommitId) -> Result<()> {
        if !git2::Branch::name_is_valid(name).unwrap_or(false) {
            return Err(VcsError::InvalidBranchName {
                name: name.to_owned(),
            });
        }
        let repo = self.lock();
        let target = find_commit(&repo, commit)?;
        match repo.branch(name, &target, false) {
            Ok(_) => Ok(()),
            Err(e) if e.code() == ErrorCode::Exists => Err(VcsError::BranchExists {
                name: name.to_owned(),
            }),
            Err(e) => Err(VcsError::git(format!("creating branch {name}"))(e)),
        }
    }

    fn set_unborn_branch(&self, name: &str) -> Result<()> {
        let repo = self.lock();
        let refname = format!("refs/heads/{name}");
        if !git2::Reference::is_valid_name(&refname) {
            return Err(VcsError::InvalidBranchName {
                name: name.to_owned(),
            });
        }
        if repo.head().is_ok() {
            return Err(VcsError::BranchExists {
                name: name.to_owned(),
            });
        }
        // libgit2 points HEAD at a branch that does not exist yet when asked to.
        repo.set_head(&refname)
            .map_err(VcsError::git(format!("pointing HEAD at {name}")))
    }

    fn switch_branch(&self, name: &str) -> Result<()> {
        if self.branch_head(name)?.is_none() {
            return Err(self.unknown_branch(name));
        }
        let repo = self.lock();
        let refname = format!("refs/heads/{name}");
        let reference = match repo.find_reference(&refname) {
            Ok(r) => r,
            Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => {
                return Err(VcsError::UnknownBranch {
                    name: name.to_owned(),
                    suggestion: String::new(),
                });
            }
            Err(e) => return Err(VcsError::git(format!("reading branch {name}"))(e)),
        };
        let head = repo
            .find_reference("HEAD")
            .map_err(VcsError::git("reading HEAD"))?;
        if head.symbolic_target().ok().flatten() == Some(refname.as_str()) {
            return Ok(());
        }
        if let Some(path) = self.checked_out_elsewhere(&repo, name)? {
            return Err(VcsError::BranchCheckedOut {
                branch: name.to_owned(),
                path,
            });
        }
        let commit = reference
            .peel_to_commit()
            .map_err(VcsError::git(format!("reading branch {name}")))?;
        self.safe_checkout(&repo, &commit)?;
        repo.set_head(&refname)
            .map_err(VcsError::git(format!("switching to {name}")))
    }

    fn checkout_detached(&self, commit: &CommitId) -> Result<()> {
        let repo = self.lock();
        let target = find_commit(&repo, commit)?;
        self.safe_checkout(&repo, &target)?;
        repo.set_head_detached(target.id())
            .map_err(VcsError::git(format!("checking out {commit}")))
    }

    fn park(&self, commit: &CommitId) -> Result<String> {
        let name = {
            let repo = self.lock();
            let target = find_commit(&repo, commit)?;
            let base = format!("{PARKING_PREFIX}{}", &target.id().to_string()[..12]);
            let mut n = 1;
            loop {
                let candidate = if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                match repo.find_branch(&candidate, BranchType::Local) {
                    Ok(b) if b.get().target() == Some(target.id()) => break candidate,
                    // Dataset commits moved it: a sibling keeps both reachable.
                    Ok(_) => n += 1,
                    Err(e) if e.code() == ErrorCode::NotFound => {
                        repo.branch(&candidate, &target, false)
                            .map_err(VcsError::git(format!("creating {candidate}")))?;
                        break candidate;
                    }
                    Err(e) => return Err(VcsError::git(format!("reading {candidate}"))(e)),
                }
            }
        };
        self.switch_branch(&name)?;
        Ok(name)
    }

    fn move_branch(&self, name: &str, to: &CommitId, expected: &CommitId) -> Result<()> {
        let repo = self.lock();
        if let Some(path) = self.checked_out_elsewhere(&repo, name)? {
            return Err(VcsError::BranchCheckedOut {
                branch: name.to_owned(),
                path,
            });
        }
        let target = find_commit(&repo, to)?;
        let old = find_commit(&repo, expected)?;
        let refname = format!("refs/heads/{name}");
        match repo.reference_matching(
            &refname,
            target.id(),
            true,
            old.id(),
            &format!("tether: move {name}"),
        ) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.code(), ErrorCode::Modified | ErrorCode::NotFound) => {
                let found = repo
                    .find_reference(&refname)
                    .ok()
                    .and_then(|r| r.target())
                    .map(|o| o.to_string())
                    .unwrap_or_else(|| "nothing (deleted)".into());
                Err(VcsError::BranchMoved {
                    name: name.to_owned(),
                    expected: expected.to_string(),
                    found,
                })
            }
            Err(e) => Err(VcsError::git(format!("moving {name}"))(e)),
        }
    }

    fn delete_branch(&self, name: &str, expected: &CommitId) -> Result<()> {
        let repo = self.lock();
        let on_it = self
            .worktree_list(&repo)?
            .into_iter()
            .find(|w| w.exists && w.branch.as_deref() == Some(name));
        if let Some(w) = on_it {
            return Err(VcsError::BranchCheckedOut {
                branch: name.to_owned(),
                path: w.path,
            });
        }
        let mut branch = match repo.find_branch(name, BranchType::Local) {
            Ok(b) => b,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(()),
            Err(e) => return Err(VcsError::git(format!("reading branch {name}"))(e)),
        };
        let found = branch
            .get()
            .target()
            .map(|o| o.to_string())
            .unwrap_or_default();
        if found != expected.as_str() {
            return Err(VcsError::BranchMoved {
                name: name.to_owned(),
                expected: expected.to_string(),
                found,
            });
        }
        branch
            .delete()
            .map_err(VcsError::git(format!("deleting branch {name}")))
    }

    fn is_ancestor(&self, ancestor: &CommitId, descendant: &CommitId) -> Result<bool> {
        let repo = self.lock();
        let a = find_commit(&repo, ancestor)?.id();
        let d = find_commit(&repo, descendant)?.id();
        if a == d {
            return Ok(true);
        }
        repo.graph_descendant_of(d, a)
            .map_err(VcsError::git("comparing commits"))
    }

    fn reset_soft(&self, to: &CommitId) -> Result<()> {
        let repo = self.lock();
        let target = find_commit(&repo, to)?;
        repo.reset(target.as_object(), git2::ResetType::Soft, None)
            .map_err(VcsError::git(format!("resetting to {to}")))
    }

    fn exclusive_commits(&self, name: &str) -> Result<(Vec<CommitId>, Vec<String>)> {
        if self.branch_head(name)?.is_none() {
            return Err(self.unknown_branch(name));
        }
        let worktrees = {
            let repo = self.lock();
            self.worktree_list(&repo)?
        };
        let repo = self.lock();
        let own = format!("refs/heads/{name}");
        let head = repo
            .find_reference(&own)
            .ok()
            .and_then(|r| r.target())
            .ok_or_else(|| VcsError::UnknownBranch {
                name: name.to_owned(),
                suggestion: String::new(),
            })?;
        let mut walk = repo.revwalk().map_err(VcsError::git("walking history"))?;
        walk.push(head).map_err(VcsError::git("walking history"))?;
        let mut keepers = Vec::new();
        let refs = repo.references().map_err(VcsError::git("listing refs"))?;
        for r in refs.flatten() {
            let Ok(refname) = r.name().map(str::to_owned) else {
                continue;
            };
            if refname == own
                || !(refname.starts_with("refs/heads/") || refname.starts_with("refs/tags/"))
            {
                continue;
            }
            if let Ok(c) = r.peel_to_commit() {
                walk.hide(c.id())
                    .map_err(VcsError::git("walking history"))?;
                if repo.graph_descendant_of(c.id(), head).unwrap_or(false) || c.id() == head {
                    keepers.push(refname);
                }
            }
        }
        for w in worktrees
            .iter()
            .filter(|w| w.exists && w.branch.as_deref() != Some(name))
        {
            if let Some(h) = &w.head
                && let Ok(oid) = Oid::from_str(h.as_str())
            {
                walk.hide(oid).map_err(VcsError::git("walking history"))?;
            }
        }
        let mut out = Vec::new();
        for oid in walk {
            let oid = oid.map_err(VcsError::git("walking history"))?;
            out.push(CommitId::new(oid.to_string()));
        }
        Ok((out, keepers))
    }

    fn drop_commits(
        &self,
        commits: &[CommitId],
        exact_prefix: &str,
    ) -> Result<Vec<(CommitId, CommitId)>> {
        let prefix = normalize_prefix(exact_prefix)?;
        let repo = self.lock();
        let head_ref = repo.head().map_err(VcsError::git("reading HEAD"))?;
        let Some(branch) = head_ref
            .name()
            .ok()
            .filter(|n| n.starts_with("refs/heads/"))
        else {
            return Err(VcsError::CannotAbandon {
                what: "commits".into(),
                why: "HEAD is not on a branch: check out the branch whose line they are on".into(),
            });
        };
        let branch = branch.to_string();
        let head = head_ref
            .peel_to_commit()
            .map_err(VcsError::git("reading HEAD"))?;
        let mut drop: std::collections::HashSet<Oid> = std::collections::HashSet::new();
        for c in commits {
            drop.insert(find_commit(&repo, c)?.id());
        }
        // Walk the first-parent line back past the oldest commit to drop.
        let mut chain = Vec::new();
        let mut remaining = drop.clone();
        let mut cursor = head.clone();
        let base = loop {
            if cursor.parent_count() > 1 {
                return Err(VcsError::CannotAbandon {
                    what: cursor.id().to_string(),
                    why: "a merge commit lies between it and HEAD; abandon works on a linear line"
                        .into(),
                });
            }
            let is_drop = drop.contains(&cursor.id());
            remaining.remove(&cursor.id());
            chain.push(cursor.clone());
            if is_drop && remaining.is_empty() {
                // The oldest commit to drop: its parent is where the line resumes.
                break cursor.parent(0).map_err(|_| VcsError::CannotAbandon {
                    what: cursor.id().to_string(),
                    why: "it is the root commit".into(),
                })?;
            }
            cursor = match cursor.parent(0) {
                Ok(p) => p,
                Err(_) => {
                    let missing: Vec<String> = remaining
                        .iter()
                        .map(|o| o.to_string()[..12].to_string())
                        .collect();
                    return Err(VcsError::CannotAbandon {
                        what: missing.join(", "),
                        why: format!(
                            "not on the line of the current branch ({})",
                            branch.trim_start_matches("refs/heads/")
                        ),
                    });
                }
            };
        };
        // Oldest first, without the dropped ones.
        let kept: Vec<git2::Commit<'_>> = chain
            .into_iter()
            .rev()
            .filter(|c| !drop.contains(&c.id()))
            .collect();
        let components: Vec<&str> = if prefix.is_empty() {
            Vec::new()
        } else {
            prefix.split('/').collect()
        };
        let mut onto = base;
        let mut rewritten = Vec::new();
        for k in kept {
            let mut index = repo
                .cherrypick_commit(&k, &onto, 0, None)
                .map_err(VcsError::git(format!("replaying {}", k.id())))?;
            if index.has_conflicts() {
                let mut outside = Vec::new();
                let mut inside = Vec::new();
                for conflict in index
                    .conflicts()
                    .map_err(VcsError::git("reading conflicts"))?
                {
                    let conflict = conflict.map_err(VcsError::git("reading conflicts"))?;
                    let entry = conflict.our.or(conflict.their).or(conflict.ancestor);
                    if let Some(e) = entry {
                        let path = String::from_utf8_lossy(&e.path).into_owned();
                        if super::under_prefix(&path, &prefix) {
                            inside.push(path);
                        } else {
                            outside.push(path);
                        }
                    }
                }
                if !outside.is_empty() {
                    outside.sort();
                    return Err(VcsError::CannotAbandon {
                        what: "those commits".into(),
                        why: format!(
                            "replaying {} conflicts outside the dataset's files ({}); nothing was changed",
                            &k.id().to_string()[..12],
                            outside.join(", ")
                        ),
                    });
                }
                for path in inside {
                    index
                        .conflict_remove(Path::new(&path))
                        .map_err(VcsError::git("resolving a manifest conflict"))?;
                }
            }
            let tree_id = index
                .write_tree_to(&repo)
                .map_err(VcsError::git("writing a replayed tree"))?;
            let tree = repo
                .find_tree(tree_id)
                .map_err(VcsError::git("reading a tree"))?;
            // The dataset's files exactly as the commit had them.
            let theirs = k.tree().map_err(VcsError::git("reading a tree"))?;
            let sub = subtree_id(&repo, &theirs, &components)?;
            let tree_id = replace_subtree(&repo, &tree, &components, sub)?;
            let tree = repo
                .find_tree(tree_id)
                .map_err(VcsError::git("reading a tree"))?;
            let new = repo
                .commit(
                    None,
                    &k.author(),
                    &k.committer(),
                    k.message_raw().unwrap_or_default(),
                    &tree,
                    &[&onto],
                )
                .map_err(VcsError::git("writing a replayed commit"))?;
            rewritten.push((
                CommitId::new(k.id().to_string()),
                CommitId::new(new.to_string()),
            ));
            onto = repo
                .find_commit(new)
                .map_err(VcsError::git("reading a commit"))?;
        }
        repo.reference_matching(&branch, onto.id(), true, head.id(), "tether abandon")
            .map_err(VcsError::git("moving the branch"))?;
        repo.reset(onto.as_object(), git2::ResetType::Hard, None)
            .map_err(VcsError::git("updating the work tree"))?;
        Ok(rewritten)
    }

    fn worktrees(&self) -> Result<Vec<WorktreeInfo>> {
        let repo = self.lock();
        self.worktree_list(&repo)
    }

    fn add_worktree(&self, path: &Path, branch: &str) -> Result<WorktreeInfo> {
        let path = std::path::absolute(path)
            .map_err(|e| VcsError::io("resolving the worktree path", e))?;
        if self.branch_head(branch)?.is_none() {
            return Err(self.unknown_branch(branch));
        }
        let repo = self.lock();
        let reference = match repo.find_branch(branch, BranchType::Local) {
            Ok(b) => b.into_reference(),
            Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => {
                return Err(VcsError::UnknownBranch {
                    name: branch.to_owned(),
                    suggestion: String::new(),
                });
            }
            Err(e) => return Err(VcsError::git(format!("reading branch {branch}"))(e)),
        };
        if let Some(w) = self
            .worktree_list(&repo)?
            .into_iter()
            .find(|w| w.exists && w.branch.as_deref() == Some(branch))
        {
            return Err(VcsError::BranchCheckedOut {
                branch: branch.to_owned(),
                path: w.path,
            });
        }
        match fs::read_dir(&path) {
            // libgit2 creates the directory itself and refuses an existing one; git
            // accepts an empty one, so an empty one is removed first.
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(VcsError::WorktreePathTaken { path });
                }
                fs::remove_dir(&path)
                    .map_err(|e| VcsError::io(format!("preparing {}", path.display()), e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return Err(VcsError::WorktreePathTaken { path }),
        }
        // git names the admin dir after the checkout's basename, numbered on a clash.
        let base: String = path
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                            c
                        } else {
                            '-'
                        }
                    })
                    .collect()
            })
            .filter(|n: &String| !n.is_empty() && !n.starts_with('.'))
            .unwrap_or_else(|| "worktree".to_owned());
        let admin = self.common_dir.join("worktrees");
        let mut name = base.clone();
        let mut n = 1;
        while admin.join(&name).exists() {
            name = format!("{base}{n}");
            n += 1;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| VcsError::io(format!("creating {}", parent.display()), e))?;
        }
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(&reference));
        repo.worktree(&name, &path, Some(&opts))
            .map_err(VcsError::git(format!("adding worktree {}", path.display())))?;
        let listed = self.worktree_list(&repo)?;
        listed
            .into_iter()
            .find(|w| w.name.as_deref() == Some(name.as_str()))
            .ok_or(VcsError::UnknownWorktree { path })
    }

    fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let path = std::path::absolute(path)
            .map_err(|e| VcsError::io("resolving the worktree path", e))?;
        let want = canonical(&path);
        let repo = self.lock();
        let wt = self
            .worktree_list(&repo)?
            .into_iter()
            .find(|w| w.path == path || canonical(&w.path) == want)
            .ok_or_else(|| VcsError::UnknownWorktree { path: path.clone() })?;
        let Some(name) = wt.name.clone() else {
            return Err(VcsError::MainWorktree { path: wt.path });
        };
        if wt.locked {
            return Err(VcsError::WorktreeLocked { path: wt.path });
        }
        if wt.exists {
            if !force {
                let other = open_repository(&wt.path, &self.env, true)?;
                let dirty: Vec<String> = statuses(&other)?.into_iter().map(|c| c.path).collect();
                if !dirty.is_empty() {
                    return Err(VcsError::WorktreeDirty {
                        path: wt.path,
                        paths: dirty,
                    });
                }
            }
            fs::remove_dir_all(&wt.path)
                .map_err(|e| VcsError::io(format!("removing {}", wt.path.display()), e))?;
        }
        let admin = self.common_dir.join("worktrees").join(&name);
        fs::remove_dir_all(&admin)
            .map_err(|e| VcsError::io(format!("removing {}", admin.display()), e))?;
        Ok(())
    }
}

/// The streaming walk behind [`Vcs::history`]: commit ids are listed up front (cheap),
/// commits are read one per `next()`. Within one walk, the prefix's subtree is found
/// through a cache keyed by (tree id, depth), a subtree seen before yields the same
/// shared file map, and blobs are read once by id.
pub(super) struct HistoryWalk<'a> {
    repo: &'a Mutex<Repository>,
    blob_reads: &'a AtomicU64,
    ids: std::vec::IntoIter<Oid>,
    prefix: String,
    components: Vec<String>,
    child_of: HashMap<(Oid, usize), Option<Oid>>,
    files_of: HashMap<Oid, Arc<FileMap>>,
    blobs: HashMap<Oid, Arc<[u8]>>,
    empty: Arc<FileMap>,
}

impl Iterator for HistoryWalk<'_> {
    type Item = Result<HistoryCommit>;

    fn next(&mut self) -> Option<Self::Item> {
        let id = self.ids.next()?;
        Some(self.load(id))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ids.size_hint()
    }
}

impl<'a> HistoryWalk<'a> {
    /// A walk over `ids` (already in the order to yield) of the repository behind
    /// `repo`, counting blob reads in `blob_reads`. The jj adapter walks its backing
    /// git store with it too.
    pub(super) fn new(
        repo: &'a Mutex<Repository>,
        blob_reads: &'a AtomicU64,
        ids: Vec<Oid>,
        prefix: String,
    ) -> Self {
        HistoryWalk {
            repo,
            blob_reads,
            ids: ids.into_iter(),
            components: if prefix.is_empty() {
                Vec::new()
            } else {
                prefix.split('/').map(str::to_owned).collect()
            },
            prefix,
            child_of: HashMap::new(),
            files_of: HashMap::new(),
            blobs: HashMap::new(),
            empty: Arc::new(FileMap::new()),
        }
    }

    /// One commit read as a walk reads each ([`Vcs::commit_files`]).
    pub(super) fn one(
        repo: &'a Mutex<Repository>,
        blob_reads: &'a AtomicU64,
        id: Oid,
        prefix: &str,
    ) -> Result<HistoryCommit> {
        HistoryWalk::new(repo, blob_reads, Vec::new(), normalize_prefix(prefix)?).load(id)
    }

    fn load(&mut self, id: Oid) -> Result<HistoryCommit> {
        // As in `GitVcs::lock`: libgit2 state lives on disk, so a poisoned lock is usable.
        let repo_lock: &Mutex<Repository> = self.repo;
        let repo = repo_lock.lock().unwrap_or_else(|p| p.into_inner());
        let ctx = || format!("reading commit {id}");
        let commit = repo.find_commit(id).map_err(VcsError::git(ctx()))?;
        let (tree, files) = self.files_at(&repo, commit.tree_id(), &ctx)?;
        // A conflicted jj commit names every term of the conflict (sides and bases,
        // the same trees as its `.jjconflict-*` directories) in a `jj:trees` header;
        // jj reads its content from there, not from the commit's tree.
        let mut conflict_terms = Vec::new();
        if let Ok(value) = commit.header_field_bytes(JJ_TREES_HEADER) {
            for hex in value
                .split(|b| b.is_ascii_whitespace())
                .filter(|h| !h.is_empty())
            {
                let term = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| Oid::from_str(h).ok())
                    .ok_or_else(|| VcsError::Git {
                        context: ctx(),
                        source: git2::Error::from_str("an invalid jj:trees header"),
                    })?;
                let (t, f) = self.files_at(&repo, term, &ctx)?;
                conflict_terms.push((t.map(|t| t.to_string()), f));
            }
        }
        let author = commit.author();
        Ok(HistoryCommit {
            id: CommitId::new(id.to_string()),
            parents: commit
                .parent_ids()
                .map(|p| CommitId::new(p.to_string()))
                .collect(),
            author_name: String::from_utf8_lossy(author.name_bytes()).into_owned(),
            author_email: String::from_utf8_lossy(author.email_bytes()).into_owned(),
            authored_at: to_datetime(author.when()),
            committed_at: to_datetime(commit.committer().when()),
            message: String::from_utf8_lossy(commit.message_bytes()).into_owned(),
            files_id: tree.map(|t| t.to_string()),
            files,
            conflict_terms,
        })
    }

    /// The prefix's subtree under root tree `root` and its files (shared maps, blobs
    /// read once per walk).
    fn files_at(
        &mut self,
        repo: &Repository,
        root: Oid,
        ctx: &dyn Fn() -> String,
    ) -> Result<(Option<Oid>, Arc<FileMap>)> {
        let mut tree = Some(root);
        for (depth, name) in self.components.iter().enumerate() {
            let Some(current) = tree else { break };
            tree = match self.child_of.get(&(current, depth)) {
                Some(child) => *child,
                None => {
                    let t = repo.find_tree(current).map_err(VcsError::git(ctx()))?;
                    let child = t
                        .get_name(name)
                        .filter(|e| e.kind() == Some(ObjectType::Tree))
                        .map(|e| e.id());
                    self.child_of.insert((current, depth), child);
                    child
                }
            };
        }
        let files = match tree {
            None => self.empty.clone(),
            Some(t) => match self.files_of.get(&t) {
                Some(files) => files.clone(),
                None => {
                    let subtree = repo.find_tree(t).map_err(VcsError::git(ctx()))?;
                    let mut files = FileMap::new();
                    for (path, blob_id) in blob_entries(&subtree, &self.prefix)? {
                        let content = match self.blobs.get(&blob_id) {
                            Some(c) => c.clone(),
                            None => {
                                let blob = repo
                                    .find_blob(blob_id)
                                    .map_err(VcsError::git(format!("reading {path}")))?;
                                self.blob_reads.fetch_add(1, Ordering::Relaxed);
                                let c: Arc<[u8]> = Arc::from(blob.content());
                                self.blobs.insert(blob_id, c.clone());
                                c
                            }
                        };
                        files.insert(path, content);
                    }
                    let files = Arc::new(files);
                    self.files_of.insert(t, files.clone());
                    files
                }
            },
        };
        Ok((tree, files))
    }
}

/// The commit header in which jj names the trees of a conflicted commit's terms.
const JJ_TREES_HEADER: &str = "jj:trees";

/// A file's content at a commit, `None` when it has no file there (both adapters).
pub(super) fn read_file_at(
    repo: &Repository,
    commit: &CommitId,
    path: &str,
) -> Result<Option<Vec<u8>>> {
    let path = normalize_path(path)?;
    let tree = commit_tree(repo, commit)?;
    let entry = match tree.get_path(Path::new(&path)) {
        Ok(e) => e,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(VcsError::git(format!("reading {path} at {commit}"))(e)),
    };
    if entry.kind() != Some(ObjectType::Blob) {
        return Ok(None);
    }
    let blob = repo
        .find_blob(entry.id())
        .map_err(VcsError::git(format!("reading {path} at {commit}")))?;
    Ok(Some(blob.content().to_vec()))
}

/// Every file under `prefix` at a commit, sorted (both adapters).
pub(super) fn list_files_at(
    repo: &Repository,
    commit: &CommitId,
    prefix: &str,
) -> Result<Vec<String>> {
    let prefix = normalize_prefix(prefix)?;
    let tree = commit_tree(repo, commit)?;
    let sub = if prefix.is_empty() {
        tree
    } else {
        match tree.get_path(Path::new(&prefix)) {
            Ok(e) if e.kind() == Some(ObjectType::Tree) => repo
                .find_tree(e.id())
                .map_err(VcsError::git(format!("reading {prefix} at {commit}")))?,
            Ok(e) if e.kind() == Some(ObjectType::Blob) => return Ok(vec![prefix]),
            Ok(_) => return Ok(Vec::new()),
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(VcsError::git(format!("reading {prefix} at {commit}"))(e)),
        }
    };
    let mut out: Vec<String> = blob_entries(&sub, &prefix)?
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    out.sort();
    Ok(out)
}

/// Opens the repository at or above `start` without reading `GIT_DIR` & co. from the
/// process (`FROM_ENV` off), then applies the configuration `env` asks for.
fn open_repository(start: &Path, env: &VcsEnv, exact: bool) -> Result<Repository> {
    let mut flags = RepositoryOpenFlags::empty();
    if exact {
        flags |= RepositoryOpenFlags::NO_SEARCH;
    }
    if env
        .get("GIT_DISCOVERY_ACROSS_FILESYSTEM")
        .is_some_and(parse_bool)
    {
        flags |= RepositoryOpenFlags::CROSS_FS;
    }
    let ceilings: Vec<PathBuf> = env
        .get_os("GIT_CEILING_DIRECTORIES")
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let repo = Repository::open_ext(start, flags, &ceilings).map_err(|e| match e.code() {
        ErrorCode::NotFound => VcsError::NotARepository {
            start: start.to_owned(),
        },
        _ => VcsError::git(format!("opening the repository at {}", start.display()))(e),
    })?;
    if repo.is_bare() || repo.workdir().is_none() {
        return Err(VcsError::BareRepository {
            path: repo.path().to_owned(),
        });
    }
    apply_config(&repo, env)?;
    Ok(repo)
}

/// libgit2 reads `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` only when opened from the
/// environment, which we avoid; so when `env` names them (or `GIT_CONFIG_NOSYSTEM`),
/// build the configuration as git would: system (unless disabled), then either
/// `GIT_CONFIG_GLOBAL` alone or the XDG file and `~/.gitconfig`, then the repository's
/// own `config` and, with `extensions.worktreeConfig`, `config.worktree`.
fn apply_config(repo: &Repository, env: &VcsEnv) -> Result<()> {
    let names = [
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
    ];
    if names.iter().all(|n| env.get_os(n).is_none()) {
        return Ok(());
    }
    let err = VcsError::git("assembling the git configuration");
    let mut config = Config::new().map_err(VcsError::git("assembling the git configuration"))?;
    let add = |config: &mut Config, path: &Path, level| -> Result<()> {
        // /dev/null is git's idiom for "no such file"; libgit2 will not parse a device.
        if path.as_os_str().is_empty() || path == Path::new("/dev/null") {
            return Ok(());
        }
        config
            .add_file(path, level, true)
            .map_err(VcsError::git(format!("reading {}", path.display())))
    };
    if !env.get("GIT_CONFIG_NOSYSTEM").is_some_and(parse_bool) {
        let system = env
            .get_os("GIT_CONFIG_SYSTEM")
            .map(PathBuf::from)
            .or_else(|| Config::find_system().ok());
        if let Some(p) = system {
            add(&mut config, &p, ConfigLevel::System)?;
        }
    }
    match env.get_os("GIT_CONFIG_GLOBAL") {
        Some(p) => add(&mut config, Path::new(p), ConfigLevel::Global)?,
        None => {
            if let Ok(p) = Config::find_xdg() {
                add(&mut config, &p, ConfigLevel::XDG)?;
            }
            if let Ok(p) = Config::find_global() {
                add(&mut config, &p, ConfigLevel::Global)?;
            }
        }
    }
    add(
        &mut config,
        &repo.commondir().join("config"),
        ConfigLevel::Local,
    )?;
    if config
        .get_bool("extensions.worktreeConfig")
        .unwrap_or(false)
    {
        add(
            &mut config,
            &repo.path().join("config.worktree"),
            ConfigLevel::Worktree,
        )?;
    }
    repo.set_config(&config).map_err(err)
}

/// Tips of visible history: every local branch, and the `HEAD` of every checkout (a
/// detached one in another worktree included), then every commit they reach.
fn visible_commits(repo: &Repository, common_dir: &Path) -> Result<Vec<Oid>> {
    let tips = history_tips(repo, common_dir)?;
    if tips.is_empty() {
        return Ok(Vec::new());
    }
    let mut walk = repo.revwalk().map_err(VcsError::git("walking history"))?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::TIME)
        .map_err(VcsError::git("walking history"))?;
    for tip in tips {
        // A HEAD naming a missing object (a corrupt worktree) should not hide the rest.
        if let Err(e) = walk.push(tip) {
            tracing::warn!("skipping history tip {tip}: {}", e.message());
        }
    }
    walk.collect::<Result<Vec<_>, _>>()
        .map_err(VcsError::git("walking history"))
}

/// The commits [`visible_commits`] walks from, sorted and deduplicated. As
/// `git rev-list --all`: branches, tags, remote-tracking branches, and every
/// checkout's HEAD.
fn history_tips(repo: &Repository, common_dir: &Path) -> Result<Vec<Oid>> {
    let mut tips = Vec::new();
    for glob in ["refs/heads/*", "refs/tags/*", "refs/remotes/*"] {
        for r in repo
            .references_glob(glob)
            .map_err(VcsError::git("listing refs"))?
        {
            let r = r.map_err(VcsError::git("listing refs"))?;
            if let Ok(c) = r.peel_to_commit() {
                tips.push(c.id());
            }
        }
    }
    let mut head_dirs = vec![common_dir.to_owned()];
    if let Ok(entries) = fs::read_dir(common_dir.join("worktrees")) {
        head_dirs.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    for dir in head_dirs {
        if let (_, Some(oid)) = read_head_file(repo, &dir) {
            tips.push(Oid::from_str(oid.as_str()).map_err(VcsError::git("reading HEAD"))?);
        }
    }
    tips.sort();
    tips.dedup();
    Ok(tips)
}

/// The branch (`None` when detached) and commit (`None` when unborn or unreadable) a
/// git dir's `HEAD` file names. Read directly, because libgit2 opens only one
/// worktree's HEAD at a time.
fn read_head_file(repo: &Repository, dir: &Path) -> (Option<String>, Option<CommitId>) {
    let Ok(text) = fs::read_to_string(dir.join("HEAD")) else {
        return (None, None);
    };
    let text = text.trim();
    if let Some(target) = text.strip_prefix("ref:") {
        let target = target.trim();
        let branch = target.strip_prefix("refs/heads/").map(str::to_owned);
        let commit = repo
            .find_reference(target)
            .ok()
            .and_then(|r| r.peel_to_commit().ok())
            .map(|c| CommitId::new(c.id().to_string()));
        (branch, commit)
    } else {
        (
            None,
            Oid::from_str(text)
                .ok()
                .map(|o| CommitId::new(o.to_string())),
        )
    }
}

fn statuses(repo: &Repository) -> Result<Vec<PathChange>> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false);
    let list = repo
        .statuses(Some(&mut opts))
        .map_err(VcsError::git("reading the status"))?;
    let staged = Status::INDEX_NEW
        | Status::INDEX_MODIFIED
        | Status::INDEX_DELETED
        | Status::INDEX_RENAMED
        | Status::INDEX_TYPECHANGE;
    let unstaged =
        Status::WT_MODIFIED | Status::WT_DELETED | Status::WT_RENAMED | Status::WT_TYPECHANGE;
    let mut out: Vec<PathChange> = list
        .iter()
        .filter_map(|e| {
            let s = e.status();
            let path = String::from_utf8_lossy(e.path_bytes()).into_owned();
            let change = PathChange {
                path,
                staged: s.intersects(staged),
                unstaged: s.intersects(unstaged),
                untracked: s.contains(Status::WT_NEW),
                conflicted: s.contains(Status::CONFLICTED),
            };
            (change.staged || change.unstaged || change.untracked || change.conflicted)
                .then_some(change)
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Every blob under `tree` as (`prefix/relative path`, blob id). Submodules are left out.
pub(super) fn blob_entries(tree: &git2::Tree<'_>, prefix: &str) -> Result<Vec<(String, Oid)>> {
    let mut out = Vec::new();
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let name = String::from_utf8_lossy(entry.name_bytes());
            let rel = format!("{dir}{name}");
            out.push((
                if prefix.is_empty() {
                    rel
                } else {
                    format!("{prefix}/{rel}")
                },
                entry.id(),
            ));
        }
        TreeWalkResult::Ok
    })
    .map_err(VcsError::git("listing a tree"))?;
    Ok(out)
}

pub(super) fn find_commit<'r>(repo: &'r Repository, commit: &CommitId) -> Result<git2::Commit<'r>> {
    let unknown = |detail: &str| VcsError::UnknownRevision {
        rev: commit.to_string(),
        detail: detail.to_owned(),
        suggestion: String::new(),
    };
    let oid = Oid::from_str(commit.as_str()).map_err(|_| unknown("not a commit id"))?;
    repo.find_commit(oid).map_err(|e| unknown(e.message()))
}

pub(super) fn commit_tree<'r>(repo: &'r Repository, commit: &CommitId) -> Result<git2::Tree<'r>> {
    find_commit(repo, commit)?
        .tree()
        .map_err(VcsError::git(format!("reading the tree of {commit}")))
}

fn commit_id_of(repo: &Repository, oid: Oid) -> Result<CommitId> {
    let commit = repo
        .find_object(oid, None)
        .and_then(|o| o.peel_to_commit())
        .map_err(VcsError::git("reading HEAD"))?;
    Ok(CommitId::new(commit.id().to_string()))
}

fn empty_tree(repo: &Repository) -> Result<Oid> {
    repo.treebuilder(None)
        .and_then(|b| b.write())
        .map_err(VcsError::git("writing the empty tree"))
}

pub(super) fn to_datetime(t: Time) -> chrono::DateTime<chrono::FixedOffset> {
    let offset = chrono::FixedOffset::east_opt(t.offset_minutes() * 60)
        .unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("zero offset"));
    chrono::DateTime::from_timestamp(t.seconds(), 0)
        .unwrap_or_default()
        .with_timezone(&offset)
}

fn now_time() -> Time {
    let now = chrono::Local::now();
    Time::new(now.timestamp(), now.offset().local_minus_utc() / 60)
}

fn format_offset(minutes: i32) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let m = minutes.abs();
    format!("{sign}{:02}{:02}", m / 60, m % 60)
}

/// The date formats git documents for `GIT_AUTHOR_DATE`: its internal `<unix> <±hhmm>`
/// (optionally `@`-prefixed), RFC 2822 and ISO 8601.
fn parse_git_date(value: &str) -> Option<Time> {
    let v = value.trim();
    let raw = v.strip_prefix('@').unwrap_or(v);
    let mut parts = raw.split_whitespace();
    if let Some(secs) = parts.next().and_then(|s| s.parse::<i64>().ok()) {
        let offset = match parts.next() {
            None => 0,
            Some(tz) => parse_offset(tz)?,
        };
        return parts.next().is_none().then(|| Time::new(secs, offset));
    }
    let dt = chrono::DateTime::parse_from_rfc2822(v)
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(v))
        .or_else(|_| chrono::DateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S %z"))
        .or_else(|_| chrono::DateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S%z"))
        .ok()?;
    Some(Time::new(
        dt.timestamp(),
        dt.offset().local_minus_utc() / 60,
    ))
}

fn parse_offset(tz: &str) -> Option<i32> {
    let (sign, digits) = match tz.as_bytes().first()? {
        b'+' => (1, &tz[1..]),
        b'-' => (-1, &tz[1..]),
        _ => return None,
    };
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i32 = digits[..2].parse().ok()?;
    let m: i32 = digits[2..].parse().ok()?;
    Some(sign * (h * 60 + m))
}

fn parse_bool(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// git's `--cleanup=whitespace`, its default for a message given with `-m`: trailing
/// whitespace off every line, runs of blank lines collapsed, leading and trailing blank
/// lines dropped, one final newline.
pub(super) fn cleanup_message(message: &str) -> String {
    let mut out = String::new();
    let mut blank_run = false;
    for line in message.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run = !out.is_empty();
            continue;
        }
        if blank_run {
            out.push('\n');
            blank_run = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    true
}

/// A path without `.` segments or a trailing separator (libgit2 returns dirs with one).
pub(super) fn clean_dir(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// Refuse to commit a per-checkout path of any dataset's `.tether/`: the
/// paths a commit is given are checked, not the ignore files, which a clone
/// chooses.
pub(super) fn refuse_per_checkout(paths: &[String]) -> Result<()> {
    match paths
        .iter()
        .find(|p| crate::model::layout::is_per_checkout_path(p))
    {
        Some(p) => Err(VcsError::PerCheckoutPath { path: p.clone() }),
        None => Ok(()),
    }
}

pub(super) fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| clean_dir(p))
}

fn suffixed(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Deletes temporary files on every way out.
struct RemoveOnDrop(Vec<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// git's lock-file protocol: `<file>.lock` created exclusively (so concurrent git
/// commands refuse instead of racing), replaced by the new content, renamed over the
/// file. Dropped without [`commit_from`](Self::commit_from), it is removed and the file
/// is untouched.
struct LockFile {
    path: PathBuf,
    done: bool,
}

impl LockFile {
    fn acquire(path: PathBuf) -> Result<Self> {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => Ok(LockFile { path, done: false }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(VcsError::IndexLocked { path })
            }
            Err(e) => Err(VcsError::io(format!("creating {}", path.display()), e)),
        }
    }

    fn commit_from(mut self, content: &Path, target: &Path) -> std::io::Result<()> {
        if content.exists() {
            fs::rename(content, &self.path)?;
            fs::rename(&self.path, target)?;
        } else {
            fs::remove_file(&self.path)?;
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

pub(super) fn require_git_version(exe: &Path, env: &VcsEnv) -> Result<Option<GitVersion>> {
    let outcome = super::version_banner(exe, env).map(|text| parse_git_version(&text));
    match outcome {
        Err(detail) => Err(VcsError::GitUnavailable {
            exe: exe.to_owned(),
            detail,
        }),
        Ok(Some(v)) if v < GitVersion(MIN_GIT_VERSION.0, MIN_GIT_VERSION.1, MIN_GIT_VERSION.2) => {
            Err(VcsError::GitTooOld {
                exe: exe.to_owned(),
                found: v,
            })
        }
        Ok(v) => Ok(v),
    }
}

/// `git version 2.47.3`, `git version 2.39.2 (Apple Git-143)`, `git version 2.45.1.windows.1`.
fn parse_git_version(banner: &str) -> Option<GitVersion> {
    let rest = banner.trim().strip_prefix("git version ")?;
    let token = rest.split_whitespace().next()?;
    let mut nums = token.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = nums.next()??;
    let minor = nums.next()??;
    let patch = nums.next().flatten().unwrap_or(0);
    Some(GitVersion(major, minor, patch))
}

#[cfg(test)]
mod tests;

/// The id of the tree at `components` under `tree` (`None`: nothing there).
fn subtree_id(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    components: &[&str],
) -> Result<Option<Oid>> {
    if components.is_empty() {
        return Ok(Some(tree.id()));
    }
    let Some(entry) = tree.get_name(components[0]) else {
        return Ok(None);
    };
    if entry.kind() != Some(ObjectType::Tree) {
        return Ok(None);
    }
    let sub = repo
        .find_tree(entry.id())
        .map_err(VcsError::git("reading a tree"))?;
    subtree_id(repo, &sub, &components[1..])
}

/// `tree` with the entry at `components` replaced by tree `sub` (or removed).
fn replace_subtree(
    repo: &Repository,
    tree: &git2::Tree<'_>,
    components: &[&str],
    sub: Option<Oid>,
) -> Result<Oid> {
    if components.is_empty() {
        return match sub {
            Some(id) => Ok(id),
            None => repo
                .treebuilder(None)
                .and_then(|b| b.write())
                .map_err(VcsError::git("writing a tree")),
        };
    }
    let mut builder = repo
        .treebuilder(Some(tree))
        .map_err(VcsError::git("writing a tree"))?;
    let name = components[0];
    let inner = match tree.get_name(name) {
        Some(e) if e.kind() == Some(ObjectType::Tree) => Some(
            repo.find_tree(e.id())
                .map_err(VcsError::git("reading a tree"))?,
        ),
        _ => None,
    };
    let replaced = match (&inner, components.len()) {
        (_, 1) => sub,
        (Some(inner), _) => Some(replace_subtree(repo, inner, &components[1..], sub)?),
        (None, _) => match sub {
            Some(_) => {
                let empty = repo
                    .treebuilder(None)
                    .and_then(|b| b.write())
                    .map_err(VcsError::git("writing a tree"))?;
                let empty = repo
                    .find_tree(empty)
                    .map_err(VcsError::git("reading a tree"))?;
                Some(replace_subtree(repo, &empty, &components[1..], sub)?)
            }
            None => None,
        },
    };
    match replaced {
        Some(id) => builder
            .insert(name, id, 0o040000)
            .map(|_| ())
            .map_err(VcsError::git("writing a tree"))?,
        None => {
            if builder.get(name).ok().flatten().is_some() {
                builder
                    .remove(name)
                    .map_err(VcsError::git("writing a tree"))?;
            }
        }
    }
    builder.write().map_err(VcsError::git("writing a tree"))
}
