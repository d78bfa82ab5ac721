//! What a plugin may not change in a git repository it was given as a real
//! directory (`describe-fs`): the files git itself runs commands from.
//!
//! A preopen is a whole directory, so a plugin granted a repository (the
//! `git` backend's `path`, or its `remote`) can write every file in it. Most
//! of that is the plugin's business (objects, refs). But `config` names
//! commands the user's own git runs later, outside the sandbox
//! (`core.fsmonitor`, `core.pager`, `core.sshCommand`, aliases), existing
//! hooks are programs, and a `.git` *file* says where the repository is. So
//! around every call the host snapshots these, and afterwards puts back any
//! the plugin changed, created or removed, and fails the call naming them.
//!
//! Guarded, for each preopened directory `D` that is a repository before the
//! call (a checkout, `D/.git`, or a bare one, `D/HEAD` + `D/objects/`): its
//! `.git` file or the git directory's `config`, `config.worktree` and every
//! file already in `hooks/`. A new hook file is not guarded: a plugin cannot
//! make it executable (WASI has no `chmod`), and git runs no other. A
//! repository the call itself creates (`create`) is the plugin's to set up.
//! A user who edits the same config *during* the call has the edit undone
//! and the call refused; the message says which file.

use std::path::{Path, PathBuf};

/// The guarded files of a call's preopened directories, as they were.
#[derive(Debug, Default)]
pub(crate) struct GitGuard {
    /// Each guarded file, its content before the call (`None`: absent), and
    /// the directory whose removal takes it along.
    files: Vec<(PathBuf, Option<Vec<u8>>, PathBuf)>,
}

impl GitGuard {
    /// Snapshot the guarded files under `dirs` (resolved host paths).
    pub(crate) fn take<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> GitGuard {
        let mut files = Vec::new();
        for dir in dirs {
            let (home, paths) = guarded_files(dir);
            for path in paths {
                let before = std::fs::read(&path).ok();
                files.push((path, before, home.clone()));
            }
        }
        GitGuard { files }
    }

    /// Put back every guarded file whose content changed; the paths put back.
    /// A repository the call removed whole (`delete-store`) has nothing left
    /// to run: its files are not put back.
    pub(crate) fn restore_changed(&self) -> Vec<PathBuf> {
        let mut restored = Vec::new();
        for (path, before, home) in &self.files {
            let now = std::fs::read(path).ok();
            if now == *before || !home.exists() {
                continue;
            }
            let put_back = match before {
                Some(bytes) => std::fs::write(path, bytes),
                None => std::fs::remove_file(path),
            };
            match put_back {
                Ok(()) => {
                    tracing::warn!(path = %path.display(), "a plugin changed a git file; put back")
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), "a plugin changed a git file that could not be put back: {e}")
                }
            }
            restored.push(path.clone());
        }
        restored
    }
}

/// The files of `dir`'s repository that git runs commands from or that say
/// where it is, with the directory holding them (the git directory, or
/// `dir` for a `.git` file); none when `dir` is no repository.
fn guarded_files(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let dot_git = dir.join(".git");
    let git_dir = match std::fs::symlink_metadata(&dot_git) {
        Ok(md) if md.is_dir() => dot_git,
        // A worktree or submodule checkout: the file says where its
        // repository is; the repository itself is not in the grant.
        Ok(_) => return (dir.to_path_buf(), vec![dot_git]),
        Err(_) if dir.join("HEAD").is_file() && dir.join("objects").is_dir() => dir.to_path_buf(),
        Err(_) => return (dir.to_path_buf(), Vec::new()),
    };
    let mut files = vec![git_dir.join("config"), git_dir.join("config.worktree")];
    if let Ok(hooks) = std::fs::read_dir(git_dir.join("hooks")) {
        let mut existing: Vec<PathBuf> = hooks
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        existing.sort();
        files.extend(existing);
    }
    (git_dir, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_config_or_hook_is_put_back_and_named() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let bare = tmp.path().join("bare.git");
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(bare.join("config"), "[core]\n\tbare = true\n").unwrap();
        let plain = tmp.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();

        let guard = GitGuard::take([repo.as_path(), bare.as_path(), plain.as_path()]);
        assert!(guard.restore_changed().is_empty(), "nothing changed yet");

        std::fs::write(repo.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(repo.join(".git/config.worktree"), "[core]\n").unwrap();
        std::fs::write(bare.join("config"), "[alias]\n\tx = !evil\n").unwrap();
        // Not guarded: a new (never executable) hook, a file outside git's.
        std::fs::write(repo.join(".git/hooks/post-commit"), "x").unwrap();
        std::fs::write(plain.join("config"), "x").unwrap();

        let restored = guard.restore_changed();
        assert_eq!(
            restored,
            [
                repo.join(".git/config"),
                repo.join(".git/config.worktree"),
                repo.join(".git/hooks/pre-commit"),
                bare.join("config"),
            ]
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!repo.join(".git/config.worktree").exists());
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/hooks/pre-commit")).unwrap(),
            "#!/bin/sh\n"
        );
        assert_eq!(
            std::fs::read_to_string(bare.join("config")).unwrap(),
            "[core]\n\tbare = true\n"
        );
        assert!(guard.restore_changed().is_empty(), "all put back");
    }

    #[test]
    fn a_repository_removed_whole_is_not_put_back() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        let guard = GitGuard::take([repo.as_path()]);
        std::fs::remove_dir_all(&repo).unwrap();
        assert!(guard.restore_changed().is_empty());
        assert!(!repo.exists());
    }

    #[test]
    fn a_dot_git_file_is_guarded() {
        let tmp = tempfile::tempdir().unwrap();
        let wt = tmp.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), "gitdir: /elsewhere/.git/worktrees/wt\n").unwrap();
        let guard = GitGuard::take([wt.as_path()]);
        std::fs::write(wt.join(".git"), "gitdir: .evil\n").unwrap();
        assert_eq!(guard.restore_changed(), [wt.join(".git")]);
        assert_eq!(
            std::fs::read_to_string(wt.join(".git")).unwrap(),
            "gitdir: /elsewhere/.git/worktrees/wt\n"
        );
    }
}
