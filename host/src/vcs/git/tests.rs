//! Tests of the git adapter against real repositories: set up and checked with the
//! `git` CLI, in temp dirs, with a private global config and fixed dates so neither the
//! machine's configuration nor the clock matters.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use git2::Oid;

use super::*;
use crate::vcs::{Prefer, Vcs, VcsEnv, VcsError, detect_with_env};

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    repo: PathBuf,
    env: VcsEnv,
}

const DATE: &str = "@1700000000 +0000";

fn env_for(base: &Path, global: &Path) -> VcsEnv {
    VcsEnv::from_vars::<OsString, OsString>([
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), base.join("home").into_os_string()),
        ("GIT_CONFIG_GLOBAL".into(), global.as_os_str().to_owned()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_AUTHOR_DATE".into(), DATE.into()),
        ("GIT_COMMITTER_DATE".into(), DATE.into()),
        (
            "GIT_CEILING_DIRECTORIES".into(),
            base.as_os_str().to_owned(),
        ),
        ("LC_ALL".into(), "C".into()),
    ])
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    fs::create_dir_all(base.join("home")).unwrap();
    let global = base.join("home/gitconfig");
    fs::write(
        &global,
        "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    let env = env_for(&base, &global);
    let repo = base.join("repo");
    let fx = Fixture {
        _dir: dir,
        base,
        repo,
        env,
    };
    fx.git(&fx.base, &["init", "-q", "repo"]);
    fx
}

impl Fixture {
    fn git(&self, cwd: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(self.env.vars())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn g(&self, args: &[&str]) -> String {
        self.git(&self.repo, args)
    }

    fn write(&self, path: &str, content: &str) {
        let p = self.repo.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn commit_all(&self, msg: &str) {
        self.g(&["add", "-A"]);
        self.g(&["commit", "-q", "-m", msg]);
    }

    fn open(&self) -> GitVcs {
        GitVcs::open_with_env(&self.repo, self.env.clone()).unwrap()
    }

    fn hook(&self, name: &str, script: &str) {
        let p = self.repo.join(".git/hooks").join(name);
        fs::write(&p, script).unwrap();
        make_executable(&p);
    }
}

fn make_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| !l.is_empty()).collect()
}

#[test]
fn discovers_the_checkout_from_a_subdirectory() {
    let fx = fixture();
    fs::create_dir_all(fx.repo.join("a/b")).unwrap();
    let vcs = detect_with_env(&fx.repo.join("a/b"), Prefer::Git, fx.env.clone()).unwrap();
    assert_eq!(vcs.kind(), VcsKind::Git);
    assert_eq!(vcs.root(), fx.repo);
    assert_eq!(vcs.shared_dir(), fx.repo.join(".git"));
    assert_eq!(
        vcs.head_state().unwrap(),
        HeadState::Unborn {
            branch: "main".into()
        }
    );
    assert_eq!(vcs.head().unwrap(), None);
    assert_eq!(vcs.current_branch().unwrap().as_deref(), Some("main"));

    // GIT_DIR from the caller (a hook) must not redirect discovery: VcsEnv drops it.
    let mut vars: Vec<(OsString, OsString)> = fx
        .env
        .vars()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    vars.push(("GIT_DIR".into(), "/nonexistent/.git".into()));
    let vcs = detect_with_env(&fx.repo.join("a"), Prefer::Git, VcsEnv::from_vars(vars)).unwrap();
    assert_eq!(vcs.root(), fx.repo);

    let outside = fx.base.join("elsewhere");
    fs::create_dir_all(&outside).unwrap();
    let err = detect_with_env(&outside, Prefer::Git, fx.env.clone()).unwrap_err();
    assert!(matches!(err, VcsError::NotARepository { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("run `git init` (or `jj git init`) first, then `tether init`"),
        "{err}"
    );

    // A colocated jj repository is jj's unless `[vcs] prefer = "git"`: with `.jj`
    // (here an empty one) next to `.git`, the jj adapter is the one that opens, and
    // says what it is missing.
    fs::create_dir_all(fx.repo.join(".jj")).unwrap();
    let err = detect_with_env(&fx.repo.join("a"), Prefer::Jj, fx.env.clone()).unwrap_err();
    assert!(err.to_string().contains(".jj/repo"), "{err}");
    assert_eq!(
        detect_with_env(&fx.repo.join("a"), Prefer::Git, fx.env.clone())
            .unwrap()
            .kind(),
        VcsKind::Git
    );
}

#[test]
fn commit_paths_commits_exactly_the_given_paths() {
    let fx = fixture();
    for f in ["a", "b", "c", "d"] {
        fx.write(f, &format!("{f}0\n"));
    }
    fx.commit_all("base");
    fx.write("a", "a1\n");
    fx.write("b", "b1\n");
    fx.g(&["add", "b"]); // staged, not ours
    fx.write("c", "c1\n"); // unstaged, not ours
    // An edit of the same size in the same second as the base commit's
    // index is "racily clean" to git once a later index write moves the
    // index's own time past it (git compares whole seconds): on a loaded
    // machine that made this test see `c` as unchanged. The user's edit
    // comes later, as it does in life.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(fx.repo.join("c"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    fx.write(".tether/objects/zarr/x.toml", "state = 1\n"); // new
    fs::remove_file(fx.repo.join("d")).unwrap(); // deleted
    let before_b_staged = fx.g(&["diff", "--cached", "--", "b"]);

    let vcs = fx.open();
    let id = vcs
        .commit_paths(
            &["a", ".tether/objects/zarr/x.toml", "d"],
            "tether: commit x\n",
        )
        .unwrap();

    assert_eq!(fx.g(&["rev-parse", "HEAD"]).trim(), id.as_str());
    let changed = fx.g(&["show", "--name-status", "--format=", "HEAD"]);
    assert_eq!(
        lines(&changed),
        vec!["A\t.tether/objects/zarr/x.toml", "M\ta", "D\td"]
    );
    assert_eq!(fx.g(&["show", "HEAD:a"]), "a1\n");
    assert_eq!(fx.g(&["show", "HEAD:b"]), "b0\n");
    assert_eq!(fx.g(&["show", "HEAD:c"]), "c0\n");
    assert_eq!(fx.g(&["log", "-1", "--format=%B"]), "tether: commit x\n\n");
    assert_eq!(
        fx.g(&["log", "-1", "--format=%an <%ae> %at"]).trim(),
        "Test User <test@example.com> 1700000000"
    );
    assert_eq!(fx.g(&["status", "--porcelain"]), "M  b\n M c\n");
    assert_eq!(fx.g(&["diff", "--cached", "--", "b"]), before_b_staged);
    assert_eq!(
        fx.g(&["reflog", "-1", "--format=%gs"]).trim(),
        "commit: tether: commit x"
    );
    fx.g(&["fsck", "--strict", "--no-progress"]);
    assert!(!fx.repo.join(".git/index.lock").exists());
    let leftovers: Vec<_> = fs::read_dir(fx.repo.join(".git"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("next-index") || n.starts_with("tether-index"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Committing the same state again is refused, not an empty commit.
    let err = vcs.commit_paths(&["a"], "again").unwrap_err();
    assert!(matches!(err, VcsError::NothingToCommit { .. }), "{err}");
    // Paths that would leave the checkout are refused.
    assert!(matches!(
        vcs.commit_paths(&["../x"], "m").unwrap_err(),
        VcsError::InvalidPath { .. }
    ));
    // tether's per-checkout files are never committed, ignored or not.
    fx.write(".tether/secrets.toml", "[vcs]\n");
    for p in [
        ".tether/secrets.toml",
        "./.tether/lock",
        "sub/.tether/cache/x",
    ] {
        let err = vcs.commit_paths(&["a", p], "m").unwrap_err();
        assert!(
            matches!(err, VcsError::PerCheckoutPath { .. }),
            "{p}: {err}"
        );
    }
    assert_eq!(
        fx.g(&["ls-files", ".tether/secrets.toml", ".tether/lock"]),
        ""
    );
}

/// The loose objects under `.git/objects` (not packs), by id.
fn loose_objects(fx: &Fixture) -> Vec<String> {
    let mut out = Vec::new();
    for dir in fs::read_dir(fx.repo.join(".git/objects")).unwrap() {
        let dir = dir.unwrap();
        let name = dir.file_name().into_string().unwrap();
        if name.len() != 2 {
            continue;
        }
        for f in fs::read_dir(dir.path()).unwrap() {
            out.push(format!(
                "{name}{}",
                f.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

fn packs(fx: &Fixture) -> usize {
    fs::read_dir(fx.repo.join(".git/objects/pack"))
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".pack"))
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_commit_of_many_paths_writes_its_objects_as_one_pack() {
    let fx = fixture();
    fx.write("seed", "seed\n");
    fx.commit_all("base");
    // Files and attributes as a dataset has them: a filter applies (CRLF to
    // LF on the way in) and one file already has its blob in the store.
    fx.write(".gitattributes", "*.toml text eol=lf\n");
    fx.commit_all("attributes");
    let n = PACK_FROM + 22;
    let mut paths: Vec<String> = (0..n)
        .map(|i| format!(".tether/objects/o{i:04}.toml"))
        .collect();
    for (i, p) in paths.iter().enumerate() {
        fx.write(p, &format!("state = {}\r\n", i % (n - 1)));
    }
    paths.push("seed".into());
    fx.write("seed", "seed, changed\n");
    let loose_before = loose_objects(&fx);
    // The hook sees the commit's objects: they are written before it runs.
    let seen = fx.base.join("pre-commit-diff");
    fx.hook(
        "pre-commit",
        &format!(
            "#!/bin/sh\ngit diff --cached --stat HEAD > {}\n",
            seen.display()
        ),
    );

    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let id = fx.open().commit_paths(&refs, "many").unwrap();

    assert_eq!(fx.g(&["rev-parse", "HEAD"]).trim(), id.as_str());
    fx.g(&["fsck", "--strict", "--no-progress", "--no-dangling"]);
    assert!(
        fs::read_to_string(&seen)
            .unwrap()
            .contains(&format!("{} files changed", n + 1)),
        "{}",
        fs::read_to_string(&seen).unwrap()
    );
    // Every file as git would have stored it, through the filter.
    for (i, p) in paths.iter().take(n).enumerate() {
        assert_eq!(
            fx.g(&["show", &format!("HEAD:{p}")]),
            format!("state = {}\n", i % (n - 1)),
            "{p}"
        );
    }
    assert_eq!(fx.g(&["show", "HEAD:seed"]), "seed, changed\n");
    // One pack; the only new loose object is the commit itself.
    assert_eq!(packs(&fx), 1);
    let new_loose: Vec<String> = loose_objects(&fx)
        .into_iter()
        .filter(|o| !loose_before.contains(o))
        .collect();
    assert_eq!(new_loose, vec![id.as_str().to_string()]);
    assert_eq!(fx.g(&["status", "--porcelain"]), "");

    // A commit of many paths whose blobs exist already packs its new trees
    // only; a small one writes loose objects, as git does.
    let loose_before = loose_objects(&fx);
    let again: Vec<String> = (0..PACK_FROM)
        .map(|i| format!(".tether/objects/o{i:04}.toml"))
        .collect();
    for p in &again {
        fx.write(p, "state = 0\n");
    }
    let refs: Vec<&str> = again.iter().map(String::as_str).collect();
    let id = fx.open().commit_paths(&refs, "same blobs").unwrap();
    assert_eq!(packs(&fx), 2);
    assert_eq!(loose_objects(&fx).len(), loose_before.len() + 1, "{id}");
    fx.write("seed", "seed, once more\n");
    fx.open().commit_paths(&["seed"], "small").unwrap();
    assert_eq!(packs(&fx), 2);
    fx.g(&["fsck", "--strict", "--no-progress", "--no-dangling"]);
    assert_eq!(fx.g(&["show", "HEAD:seed"]), "seed, once more\n");
}

/// Each field of an index entry, comparable.
#[derive(Debug, PartialEq)]
struct EntryFields {
    times: [(i64, u32); 2],
    stat: [u32; 6],
    id: Oid,
    flags: (u16, u16),
    path: String,
}

fn entry_fields(e: &git2::IndexEntry) -> EntryFields {
    EntryFields {
        times: [
            (e.ctime.seconds().into(), e.ctime.nanoseconds()),
            (e.mtime.seconds().into(), e.mtime.nanoseconds()),
        ],
        stat: [e.dev, e.ino, e.mode, e.uid, e.gid, e.file_size],
        id: e.id,
        flags: (e.flags, e.flags_extended),
        path: String::from_utf8_lossy(&e.path).into_owned(),
    }
}

/// Files of every kind a commit may stage: plain ones (the fast path),
/// and ones libgit2 must decide (a CR, an executable, a link).
fn write_mixed(fx: &Fixture, n: usize) -> Vec<String> {
    let mut paths: Vec<String> = (0..n)
        .map(|i| format!(".tether/objects/d{}/o{i:04}.toml", i % 3))
        .collect();
    for (i, p) in paths.iter().enumerate() {
        fx.write(p, &format!("state = {}\n", i % (n - 1)));
    }
    fx.write("crlf.toml", "a = 1\r\n");
    fx.write("run.sh", "#!/bin/sh\n");
    make_executable(&fx.repo.join("run.sh"));
    std::os::unix::fs::symlink("seed", fx.repo.join("link")).unwrap();
    paths.extend(["crlf.toml", "run.sh", "link", "seed", "gone"].map(String::from));
    paths
}

#[test]
fn plain_staging_makes_the_entries_libgit2_makes() {
    let fx = fixture();
    fx.write("seed", "seed\n");
    fx.write("gone", "to be removed\n");
    fx.commit_all("base");
    let paths = write_mixed(&fx, 40);
    fx.write("seed", "seed, changed\n");
    fs::remove_file(fx.repo.join("gone")).unwrap();
    let vcs = fx.open();
    let repo = vcs.reopen().unwrap();
    let head = repo.head().unwrap().peel_to_tree().unwrap();
    let staged = |plain: bool| -> Vec<EntryFields> {
        let mut index = git2::Index::open(&fx.base.join(format!("index-{plain}"))).unwrap();
        index.read_tree(&head).unwrap();
        if plain {
            // As `stage_and_write_tree` sets it up: a handle of its own
            // whose object database is the mempack alone.
            let own = vcs.reopen().unwrap();
            own.set_index(&mut index).unwrap();
            assert!(vcs.no_filters_apply(&own, &index, &paths).unwrap());
            let odb = git2::Odb::new().unwrap();
            odb.add_new_mempack_backend(MEMPACK_PRIORITY).unwrap();
            own.set_odb(&odb).unwrap();
            vcs.stage_plain(&odb, &mut index, &paths).unwrap();
        } else {
            repo.set_index(&mut index).unwrap();
            vcs.stage_paths(&mut index, &paths).unwrap();
        }
        index.iter().map(|e| entry_fields(&e)).collect()
    };
    let (plain, libgit2) = (staged(true), staged(false));
    assert_eq!(plain.len(), 40 + 4, "the removal is staged");
    assert_eq!(plain, libgit2);
}

#[test]
fn plain_staging_is_only_for_paths_no_attributes_reach() {
    let fx = fixture();
    fx.write("seed", "seed\n");
    fx.commit_all("base");
    let paths = vec![".tether/objects/a/o.toml".to_string(), "seed".to_string()];
    let vcs = fx.open();
    let plain = || {
        let repo = vcs.reopen().unwrap();
        let index = repo.index().unwrap();
        vcs.no_filters_apply(&repo, &index, &paths).unwrap()
    };
    assert!(plain());
    for file in [
        ".gitattributes",
        ".tether/.gitattributes",
        ".tether/objects/a/.gitattributes",
    ] {
        fx.write(file, "*.toml ident\n");
        assert!(!plain(), "{file}");
        fs::remove_file(fx.repo.join(file)).unwrap();
    }
    // Attributes only the index has still apply (libgit2 reads them there).
    fx.write(".tether/.gitattributes", "*.toml ident\n");
    fx.g(&["add", ".tether/.gitattributes"]);
    fs::remove_file(fx.repo.join(".tether/.gitattributes")).unwrap();
    assert!(!plain());
    fx.g(&["rm", "-q", "--cached", ".tether/.gitattributes"]);
    assert!(plain());
    fx.write(".git/info/attributes", "*.toml ident\n");
    assert!(!plain());
    fs::remove_file(fx.repo.join(".git/info/attributes")).unwrap();
    fx.g(&["config", "core.autocrlf", "true"]);
    assert!(!plain());
    fx.g(&["config", "core.autocrlf", "input"]);
    assert!(plain());
    fx.g(&["config", "attr.tree", "HEAD"]);
    assert!(!plain());
    fx.g(&["config", "--unset", "attr.tree"]);
    assert!(plain());
    let global = fx.base.join("home/attributes");
    fs::write(&global, "").unwrap();
    fx.g(&["config", "core.attributesFile", &global.to_string_lossy()]);
    assert!(!plain());
}

#[test]
fn a_commit_of_many_plain_paths_stages_what_git_would() {
    let fx = fixture();
    fx.write("seed", "seed\n");
    fx.write("gone", "to be removed\n");
    fx.commit_all("base");
    let paths = write_mixed(&fx, PACK_FROM + 10);
    fx.write("seed", "seed, changed\n");
    fs::remove_file(fx.repo.join("gone")).unwrap();
    // Out of git's racy window, so its check below trusts the stat data.
    let old = "200001010000";
    for p in &paths {
        if fx.repo.join(p).is_file() && p != "link" {
            Command::new("touch")
                .args(["-h", "-t", old])
                .arg(fx.repo.join(p))
                .status()
                .unwrap();
        }
    }
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let id = fx.open().commit_paths(&refs, "many").unwrap();
    assert_eq!(fx.g(&["rev-parse", "HEAD"]).trim(), id.as_str());
    fx.g(&["fsck", "--strict", "--no-progress", "--no-dangling"]);
    assert_eq!(packs(&fx), 1);
    // diff-files compares stat data only (no refresh): the entries say what
    // the files' stat says.
    assert_eq!(fx.g(&["diff-files", "--name-only"]), "");
    assert_eq!(fx.g(&["status", "--porcelain"]), "");
    assert_eq!(fx.g(&["show", "HEAD:crlf.toml"]), "a = 1\r\n");
    assert_eq!(
        fx.g(&["show", "HEAD:.tether/objects/d1/o0004.toml"]),
        "state = 4\n"
    );
    let modes = fx.g(&["ls-tree", "HEAD", "run.sh", "link", "seed"]);
    assert!(
        modes.contains("100755 blob") && modes.contains("120000 blob"),
        "{modes}"
    );
    assert_eq!(fx.g(&["ls-tree", "HEAD", "gone"]), "");
}

#[test]
fn first_commit_on_an_unborn_branch() {
    let fx = fixture();
    fx.write("tether.toml", "[tether]\nversion = 5\n");
    fx.write("other", "untracked\n");
    let vcs = fx.open();
    let id = vcs.commit_paths(&["tether.toml"], "tether init").unwrap();
    assert_eq!(fx.g(&["rev-parse", "main"]).trim(), id.as_str());
    assert_eq!(fx.g(&["log", "--format=%H %P"]).trim(), id.as_str());
    assert_eq!(
        fx.g(&["ls-tree", "-r", "--name-only", "HEAD"]),
        "tether.toml\n"
    );
    assert_eq!(fx.g(&["status", "--porcelain"]), "?? other\n");
    assert_eq!(
        fx.g(&["reflog", "-1", "--format=%gs"]).trim(),
        "commit (initial): tether init"
    );
    assert_eq!(
        vcs.head_state().unwrap(),
        HeadState::Branch {
            name: "main".into(),
            commit: id
        }
    );
    fx.g(&["fsck", "--strict", "--no-progress"]);
}

#[test]
fn identity_comes_from_config_or_is_asked_for() {
    let fx = fixture();
    fx.write("f", "x\n");
    let empty = fx.base.join("home/empty-config");
    fs::write(&empty, "").unwrap();
    let vcs = GitVcs::open_with_env(&fx.repo, env_for(&fx.base, &empty)).unwrap();
    let err = vcs.commit_paths(&["f"], "m").unwrap_err();
    assert!(matches!(err, VcsError::IdentityMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("git config --global user.name"),
        "{err}"
    );
    assert!(!fx.repo.join(".git/index.lock").exists());
    // Repository-level identity is enough.
    fx.g(&["config", "user.name", "Repo User"]);
    fx.g(&["config", "user.email", "repo@example.com"]);
    vcs.commit_paths(&["f"], "m").unwrap();
    assert_eq!(
        fx.g(&["log", "-1", "--format=%an <%ae>"]).trim(),
        "Repo User <repo@example.com>"
    );
}

#[test]
fn a_refusing_pre_commit_hook_leaves_everything_as_it_was() {
    let fx = fixture();
    fx.write("a", "a0\n");
    fx.write("b", "b0\n");
    fx.commit_all("base");
    let head = fx.g(&["rev-parse", "HEAD"]);
    fx.write("a", "a1\n");
    fx.write("b", "b1\n");
    fx.g(&["add", "b"]);
    fx.write("new.toml", "n\n");
    fx.hook(
        "pre-commit",
        "#!/bin/sh\necho 'manifest lint failed' >&2\necho stdout-line\nexit 3\n",
    );
    let status_before = fx.g(&["status", "--porcelain"]);
    let index_before = fs::read(fx.repo.join(".git/index")).unwrap();

    let err = fx.open().commit_paths(&["a", "new.toml"], "m").unwrap_err();
    match &err {
        VcsError::HookRefused {
            hook,
            status,
            output,
        } => {
            assert_eq!(*hook, "pre-commit");
            assert_eq!(status, "exit status 3");
            assert!(
                output.contains("manifest lint failed") && output.contains("stdout-line"),
                "{output}"
            );
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("nothing was committed"), "{err}");
    assert_eq!(fx.g(&["rev-parse", "HEAD"]), head);
    assert_eq!(fx.g(&["status", "--porcelain"]), status_before);
    assert_eq!(fs::read(fx.repo.join(".git/index")).unwrap(), index_before);
    assert!(!fx.repo.join(".git/index.lock").exists());
}

#[test]
fn hooks_see_the_partial_index_and_the_message() {
    let fx = fixture();
    fx.write("a", "a0\n");
    fx.write("b", "b0\n");
    fx.commit_all("base");
    fx.write("a", "a1\n");
    fx.write("b", "b1\n");
    fx.g(&["add", "b"]);
    let seen = fx.base.join("seen");
    fs::create_dir_all(&seen).unwrap();
    let s = seen.display();
    // pre-commit: what is staged for this commit, and where it runs.
    fx.hook(
        "pre-commit",
        &format!("#!/bin/sh\ngit diff --cached --name-only > {s}/staged\npwd > {s}/cwd\nenv | grep -c '^GIT_DIR=' > {s}/gitdir || true\n"),
    );
    // commit-msg: sees the message file and may amend it, as with git.
    fx.hook("commit-msg", &format!("#!/bin/sh\ncp \"$1\" {s}/msg\nprintf '\\nSigned-off-by: Hook <h@example.com>\\n' >> \"$1\"\n"));
    fx.hook("post-commit", &format!("#!/bin/sh\ngit rev-parse HEAD > {s}/post\ngit diff --cached --name-only > {s}/post-staged\n"));

    let id = fx
        .open()
        .commit_paths(&["a"], "the message\n\n\nbody  \n")
        .unwrap();
    assert_eq!(fs::read_to_string(seen.join("staged")).unwrap(), "a\n");
    assert_eq!(
        fs::read_to_string(seen.join("cwd")).unwrap().trim(),
        fx.repo.display().to_string()
    );
    assert_eq!(fs::read_to_string(seen.join("gitdir")).unwrap().trim(), "0");
    assert_eq!(
        fs::read_to_string(seen.join("msg")).unwrap(),
        "the message\n\n\nbody  \n"
    );
    assert_eq!(
        fs::read_to_string(seen.join("post")).unwrap().trim(),
        id.as_str()
    );
    // post-commit sees the real index: b still staged there.
    assert_eq!(fs::read_to_string(seen.join("post-staged")).unwrap(), "b\n");
    assert_eq!(
        fx.g(&["log", "-1", "--format=%B"]),
        "the message\n\nbody\n\nSigned-off-by: Hook <h@example.com>\n\n"
    );
    assert_eq!(fx.g(&["status", "--porcelain"]), "M  b\n");

    // A refusing commit-msg hook stops it too.
    fx.write("a", "a2\n");
    fx.hook("commit-msg", "#!/bin/sh\necho 'bad message' >&2\nexit 1\n");
    let err = fx.open().commit_paths(&["a"], "m").unwrap_err();
    assert!(
        matches!(&err, VcsError::HookRefused { hook: "commit-msg", output, .. } if output.contains("bad message")),
        "{err}"
    );
    assert_eq!(fx.g(&["rev-parse", "HEAD"]).trim(), id.as_str());
    assert_eq!(fx.g(&["status", "--porcelain"]), " M a\nM  b\n");

    // A hook that is not executable is ignored, as git does.
    fs::write(fx.repo.join(".git/hooks/commit-msg"), "#!/bin/sh\nexit 1\n").unwrap();
    let p = fx.repo.join(".git/hooks/commit-msg");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    fx.open().commit_paths(&["a"], "m2").unwrap();
}

#[test]
fn read_resolve_and_list_at_revisions() {
    let fx = fixture();
    fx.write(".tether/objects/a.toml", "v = 1\n");
    fx.write(".tether/objects/zarr/b.toml", "v = 1\n");
    fx.write("README", "r\n");
    fx.commit_all("one");
    fx.g(&["tag", "v1"]);
    fx.write(".tether/objects/a.toml", "v = 2\n");
    fx.commit_all("two");
    let vcs = fx.open();

    let head = vcs.resolve("HEAD").unwrap();
    let parent = vcs.resolve("HEAD~1").unwrap();
    assert_eq!(parent.as_str(), fx.g(&["rev-parse", "HEAD~1"]).trim());
    assert_eq!(vcs.resolve("v1").unwrap(), parent);
    assert_eq!(vcs.resolve("main").unwrap(), head);
    assert_eq!(vcs.resolve(&head.as_str()[..10]).unwrap(), head);
    assert_eq!(vcs.resolve(head.as_str()).unwrap(), head);
    for bad in ["nope", "HEAD~5", "", "--all"] {
        let err = vcs.resolve(bad).unwrap_err();
        assert!(
            matches!(err, VcsError::UnknownRevision { .. }),
            "{bad}: {err}"
        );
    }
    assert!(vcs.resolve("HEAD:README").is_err()); // a blob, not a commit

    assert_eq!(
        vcs.read_file(&parent, ".tether/objects/a.toml")
            .unwrap()
            .unwrap(),
        b"v = 1\n"
    );
    assert_eq!(
        vcs.read_file(&head, ".tether/objects/a.toml")
            .unwrap()
            .unwrap(),
        b"v = 2\n"
    );
    assert_eq!(
        vcs.read_file(&head, ".tether/objects/missing.toml")
            .unwrap(),
        None
    );
    assert_eq!(vcs.read_file(&head, ".tether/objects").unwrap(), None);
    assert_eq!(
        vcs.list_files(&head, ".tether/objects/").unwrap(),
        vec![".tether/objects/a.toml", ".tether/objects/zarr/b.toml"]
    );
    assert_eq!(
        vcs.list_files(&head, "nothing/here").unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(vcs.list_files(&head, "").unwrap().len(), 3);

    let branches = vcs.branches().unwrap();
    assert_eq!(branches.len(), 1);
    assert_eq!(
        (
            branches[0].name.as_str(),
            &branches[0].commit,
            branches[0].parking
        ),
        ("main", &head, false)
    );
    assert_eq!(vcs.branch_head("main").unwrap(), Some(head.clone()));
    assert_eq!(vcs.branch_head("nope").unwrap(), None);
}

#[test]
fn tracked_reports_head_and_index_entries() {
    let fx = fixture();
    fx.write("committed", "c\n");
    fx.write(".tether/objects/a.toml", "a\n");
    fx.commit_all("base");
    fx.write(".tether/secrets.toml", "s\n");
    fx.g(&["add", ".tether/secrets.toml"]); // staged only
    fx.write(".tether/workspace.toml", "w\n"); // untracked
    fx.g(&["rm", "-q", "--cached", "committed"]); // in HEAD, not in the index
    let vcs = fx.open();
    let got = vcs
        .tracked(&[
            "committed",
            ".tether/secrets.toml",
            ".tether/workspace.toml",
            ".tether/ops.jsonl",
            ".tether",
            "x",
        ])
        .unwrap();
    assert_eq!(got, vec!["committed", ".tether/secrets.toml", ".tether"]);
}

#[test]
fn tracked_reads_the_index_again_only_when_it_or_head_changed() {
    let fx = fixture();
    fx.write("a", "a\n");
    fx.commit_all("base");
    let paths = [".tether/secrets.toml", ".tether/cache"];
    let ask = |want: &[&str]| {
        // A new adapter each time, as each command opens one.
        let vcs = fx.open();
        assert_eq!(vcs.tracked(&paths).unwrap(), want);
        vcs.index_reads()
    };
    assert_eq!(ask(&[]), 1);
    assert_eq!(ask(&[]), 0);
    // Other paths are another question (one answer is remembered: tether
    // always asks about the same files).
    assert_eq!(fx.open().tracked(&["a"]).unwrap(), ["a"]);
    assert_eq!(ask(&[]), 1);
    assert_eq!(ask(&[]), 0);
    // Staged: the index file is replaced.
    fx.write(".tether/secrets.toml", "s\n");
    fx.g(&["add", "-f", ".tether/secrets.toml"]);
    assert_eq!(ask(&[".tether/secrets.toml"]), 1);
    assert_eq!(ask(&[".tether/secrets.toml"]), 0);
    // In HEAD only: HEAD moved and the index changed.
    fx.g(&["commit", "-q", "-m", "secrets"]);
    fx.g(&["rm", "-q", "--cached", ".tether/secrets.toml"]);
    assert_eq!(ask(&[".tether/secrets.toml"]), 1);
    // HEAD moved back by a reset that leaves the index file alone.
    fx.g(&["reset", "-q", "--soft", "HEAD~1"]);
    assert_eq!(ask(&[]), 1);
    // Without its cache file, the index is read again.
    let cache = fx.repo.join(".git/tether-tracked");
    assert!(cache.is_file());
    fs::remove_file(&cache).unwrap();
    assert_eq!(ask(&[]), 1);
}

#[test]
fn changes_and_clean_except() {
    let fx = fixture();
    fx.write("a", "a\n");
    fx.write(".tether/objects/a.toml", "a\n");
    fx.commit_all("base");
    let vcs = fx.open();
    assert!(vcs.changes().unwrap().is_empty());
    fx.write(".tether/objects/a.toml", "b\n");
    fx.write(".tether/workspace.toml", "w\n");
    assert!(vcs.is_clean_except(".tether").unwrap());
    assert!(!vcs.is_clean_except("").unwrap());
    fx.write("a", "changed\n");
    fx.g(&["add", "a"]);
    fx.write("untracked/deep/file", "u\n");
    assert!(!vcs.is_clean_except(".tether").unwrap());
    let changes = vcs.changes().unwrap();
    let a = changes.iter().find(|c| c.path == "a").unwrap();
    assert!(a.staged && !a.unstaged && !a.untracked);
    let u = changes
        .iter()
        .find(|c| c.path == "untracked/deep/file")
        .unwrap();
    assert!(u.untracked && !u.staged);
}

/// Builds history with `git fast-import` in one process: `n` commits on main, each
/// changing README and, every `every`th, manifest `k{i % 5}.toml`; five manifests from
/// the first commit on.
fn fast_import(fx: &Fixture, n: usize, every: usize) -> usize {
    let mut stream = String::new();
    let mut distinct = 0;
    for i in 0..n {
        let msg = format!("commit {i}");
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{}\ncommitter T <t@example.com> {} +0000\ndata {}\n{}\n",
            i + 1,
            1_700_000_000 + i,
            msg.len(),
            msg
        ));
        if i > 0 {
            stream.push_str(&format!("from :{i}\n"));
        }
        let mut files = vec![("README".to_owned(), format!("readme {i}\n"))];
        if i == 0 {
            for k in 0..5 {
                files.push((
                    format!(".tether/objects/k{k}.toml"),
                    format!("state = \"k{k}-0\"\n"),
                ));
                distinct += 1;
            }
        } else if i % every == 0 {
            let k = i % 5;
            files.push((
                format!(".tether/objects/k{k}.toml"),
                format!("state = \"k{k}-{i}\"\n"),
            ));
            distinct += 1;
        }
        for (path, content) in files {
            stream.push_str(&format!(
                "M 100644 inline {path}\ndata {}\n{content}\n",
                content.len()
            ));
        }
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&fx.repo)
        .env_clear()
        .envs(fx.env.vars())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    fx.g(&["reset", "-q", "--hard", "main"]);
    distinct
}

#[test]
fn history_walk_reads_each_commit_once_and_unchanged_manifests_once() {
    let fx = fixture();
    let distinct = fast_import(&fx, 200, 20);
    // A second branch with two more commits, one changing a manifest.
    fx.g(&["checkout", "-q", "-b", "feat", "main~50"]);
    fx.write(".tether/objects/k1.toml", "state = \"feat\"\n");
    fx.commit_all("feat 1");
    fx.write("README", "feat\n");
    fx.commit_all("feat 2");
    fx.g(&["checkout", "-q", "main"]);
    let vcs = fx.open();

    let start = Instant::now();
    let commits: Vec<HistoryCommit> = vcs
        .history(".tether/objects")
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    let elapsed = start.elapsed();
    eprintln!("walked {} commits in {elapsed:?}", commits.len());

    let expected: Vec<String> = lines(&fx.g(&["rev-list", "--branches", "HEAD"]))
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(commits.len(), 202);
    assert_eq!(commits.len(), expected.len());
    let mut ids: Vec<&str> = commits.iter().map(|c| c.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 202, "each commit once");
    let mut exp: Vec<&str> = expected.iter().map(String::as_str).collect();
    exp.sort();
    assert_eq!(ids, exp);
    // Newest first: the first commit is a branch tip, the root comes last.
    assert_eq!(commits.last().unwrap().parents, Vec::<CommitId>::new());
    assert_eq!(commits.last().unwrap().message, "commit 0");

    // Each distinct manifest blob was read once: the 5 initial + the changes + feat's.
    assert_eq!(vcs.blob_reads(), distinct as u64 + 1);
    for c in &commits {
        assert_eq!(c.files.len(), 5, "{}", c.id);
        assert!(
            c.files
                .keys()
                .all(|k| k.starts_with(".tether/objects/k") && k.ends_with(".toml"))
        );
    }
    // Files match what git has at a sample of commits.
    for c in commits.iter().step_by(37) {
        for (path, content) in c.files.iter() {
            assert_eq!(
                fx.g(&["show", &format!("{}:{path}", c.id)]).as_bytes(),
                &content[..]
            );
        }
        assert_eq!(
            c.files_id.as_deref(),
            Some(
                fx.g(&["rev-parse", &format!("{}:.tether/objects", c.id)])
                    .trim()
            )
        );
    }
    let tip = commits.iter().find(|c| c.message == "feat 2\n").unwrap();
    assert_eq!(
        &tip.files[".tether/objects/k1.toml"][..],
        b"state = \"feat\"\n"
    );
    assert_eq!(tip.author_name, "Test User");
    assert_eq!(tip.committed_at.timestamp(), 1_700_000_000);

    // A second walk has a cache of its own; a prefix nothing has yields empty maps.
    let none: Vec<HistoryCommit> = vcs
        .history("nothing")
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(none.len(), 202);
    assert!(
        none.iter()
            .all(|c| c.files.is_empty() && c.files_id.is_none())
    );
}

#[test]
fn history_digest_sees_commits_in_other_worktrees() {
    let fx = fixture();
    fx.write("f", "0\n");
    fx.commit_all("base");
    let vcs = fx.open();
    let d0 = vcs.history_digest().unwrap();
    assert_eq!(d0, vcs.history_digest().unwrap());
    let wt = fx.base.join("wt");
    fx.g(&["worktree", "add", "-q", "-b", "other", wt.to_str().unwrap()]);
    assert_eq!(
        vcs.history_digest().unwrap(),
        d0,
        "a new branch at the same commit adds nothing"
    );
    fs::write(wt.join("f"), "1\n").unwrap();
    fx.git(&wt, &["commit", "-q", "-am", "in the worktree"]);
    let d1 = vcs.history_digest().unwrap();
    assert_ne!(d1, d0);
    // A detached commit in the other worktree is visible through its HEAD.
    fx.git(&wt, &["checkout", "-q", "--detach"]);
    fs::write(wt.join("f"), "2\n").unwrap();
    fx.git(&wt, &["commit", "-q", "-am", "detached"]);
    let d2 = vcs.history_digest().unwrap();
    assert_ne!(d2, d1);
    // The digest is sha256 over the sorted ids, one per line.
    let mut ids: Vec<String> = lines(&fx.g(&[
        "rev-list",
        "--branches",
        "HEAD",
        fx.git(&wt, &["rev-parse", "HEAD"]).trim(),
    ]))
    .iter()
    .map(|s| s.to_string())
    .collect();
    ids.sort();
    let mut h = Sha256::new();
    for id in &ids {
        h.update(format!("{id}\n"));
    }
    assert_eq!(d2, hex::encode(h.finalize()));
}

#[test]
fn parking_branches_and_safe_checkout() {
    let fx = fixture();
    fx.write("f", "0\n");
    fx.commit_all("one");
    fx.write("f", "1\n");
    fx.commit_all("two");
    let vcs = fx.open();
    let old = vcs.resolve("HEAD~1").unwrap();

    // A local change the checkout would overwrite refuses it and keeps the change.
    fx.write("f", "local\n");
    let err = vcs.park(&old).unwrap_err();
    assert!(
        matches!(&err, VcsError::CheckoutConflict { paths } if paths == &vec!["f".to_owned()]),
        "{err}"
    );
    assert_eq!(fs::read_to_string(fx.repo.join("f")).unwrap(), "local\n");
    assert_eq!(fx.g(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    fx.g(&["checkout", "-q", "--", "f"]);

    let name = vcs.park(&old).unwrap();
    assert_eq!(name, format!("tether/{}", old.short12()));
    assert_eq!(
        fx.g(&["symbolic-ref", "HEAD"]).trim(),
        format!("refs/heads/{name}")
    );
    assert_eq!(fx.g(&["rev-parse", "HEAD"]).trim(), old.as_str());
    assert_eq!(fs::read_to_string(fx.repo.join("f")).unwrap(), "0\n");
    assert_eq!(fx.g(&["status", "--porcelain"]), "");
    assert_eq!(vcs.current_branch().unwrap(), None);
    assert_eq!(
        vcs.head_state().unwrap(),
        HeadState::Parked {
            branch: name.clone(),
            commit: old.clone()
        }
    );
    assert!(
        vcs.branches()
            .unwrap()
            .iter()
            .any(|b| b.name == name && b.parking)
    );

    // A dataset commit made there moves the parking branch; parking the same commit
    // again then takes a sibling rather than losing it.
    fx.write("m.toml", "m\n");
    let made = vcs
        .commit_paths(&["m.toml"], "on the parking branch")
        .unwrap();
    assert_eq!(vcs.branch_head(&name).unwrap(), Some(made.clone()));
    vcs.switch_branch("main").unwrap();
    assert!(!fx.repo.join("m.toml").exists());
    assert_eq!(vcs.park(&old).unwrap(), format!("{name}-2"));
    vcs.switch_branch("main").unwrap();
    assert_eq!(
        vcs.park(&old).unwrap(),
        format!("{name}-2"),
        "reused while it still points there"
    );

    vcs.switch_branch("main").unwrap();
    vcs.create_branch("feat/x", &old).unwrap();
    assert!(matches!(
        vcs.create_branch("feat/x", &old).unwrap_err(),
        VcsError::BranchExists { .. }
    ));
    assert!(matches!(
        vcs.create_branch("bad..name", &old).unwrap_err(),
        VcsError::InvalidBranchName { .. }
    ));
    assert!(matches!(
        vcs.switch_branch("nope").unwrap_err(),
        VcsError::UnknownBranch { .. }
    ));
    vcs.switch_branch("feat/x").unwrap();
    assert_eq!(vcs.current_branch().unwrap().as_deref(), Some("feat/x"));
    vcs.checkout_detached(&made).unwrap();
    assert!(matches!(vcs.head_state().unwrap(), HeadState::Detached { commit } if commit == made));
    assert_eq!(fx.g(&["status", "--porcelain"]), "");
    fx.g(&["fsck", "--strict", "--no-progress"]);
}

#[test]
fn worktrees_add_list_remove() {
    let fx = fixture();
    fx.write("f", "0\n");
    fx.commit_all("base");
    let vcs = fx.open();
    let head = vcs.head().unwrap().unwrap();
    vcs.create_branch("feat", &head).unwrap();
    let wt_path = fx.base.join("checkouts/feat-wt");

    let added = vcs.add_worktree(&wt_path, "feat").unwrap();
    assert_eq!(added.path, wt_path);
    assert_eq!(added.branch.as_deref(), Some("feat"));
    assert!(added.exists && !added.is_main && !added.is_current);
    assert_eq!(fs::read_to_string(wt_path.join("f")).unwrap(), "0\n");
    assert_eq!(fx.git(&wt_path, &["status", "--porcelain"]), "");
    assert_eq!(
        fx.git(&wt_path, &["rev-parse", "--abbrev-ref", "HEAD"])
            .trim(),
        "feat"
    );
    let listed = fx.g(&["worktree", "list", "--porcelain"]);
    assert!(
        listed.contains(&format!("worktree {}", wt_path.display())),
        "{listed}"
    );

    let all = vcs.worktrees().unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].is_main && all[0].is_current && all[0].path == fx.repo);
    assert_eq!(all[0].branch.as_deref(), Some("main"));
    assert_eq!(all[1].name.as_deref(), Some("feat-wt"));

    // The adapter opened in the worktree sees the same repository.
    let inner = GitVcs::open_with_env(&wt_path, fx.env.clone()).unwrap();
    assert_eq!(inner.shared_dir(), vcs.shared_dir());
    assert_eq!(inner.root(), wt_path);
    assert!(inner.worktrees().unwrap()[1].is_current);
    assert!(matches!(
        inner.switch_branch("main").unwrap_err(),
        VcsError::BranchCheckedOut { .. }
    ));
    assert!(matches!(
        vcs.add_worktree(&fx.base.join("again"), "feat")
            .unwrap_err(),
        VcsError::BranchCheckedOut { .. }
    ));
    assert!(matches!(
        vcs.remove_worktree(&fx.repo, true).unwrap_err(),
        VcsError::MainWorktree { .. }
    ));

    fs::write(wt_path.join("scratch"), "u\n").unwrap();
    let err = vcs.remove_worktree(&wt_path, false).unwrap_err();
    assert!(
        matches!(&err, VcsError::WorktreeDirty { paths, .. } if paths == &vec!["scratch".to_owned()]),
        "{err}"
    );
    vcs.remove_worktree(&wt_path, true).unwrap();
    assert!(!wt_path.exists());
    assert_eq!(
        lines(&fx.g(&["worktree", "list", "--porcelain"]))
            .iter()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1
    );
    fx.g(&["fsck", "--strict", "--no-progress"]);

    // A checkout deleted by hand is listed as gone, and removing it prunes it.
    let gone = fx.base.join("gone");
    vcs.add_worktree(&gone, "feat").unwrap();
    fs::remove_dir_all(&gone).unwrap();
    let listed = vcs.worktrees().unwrap();
    assert!(listed.iter().any(|w| w.path == gone && !w.exists));
    vcs.remove_worktree(&gone, false).unwrap();
    assert_eq!(vcs.worktrees().unwrap().len(), 1);
    assert_eq!(fx.g(&["worktree", "prune", "--dry-run", "-v"]), "");
}

#[test]
fn commit_in_a_linked_worktree_uses_its_own_index() {
    let fx = fixture();
    fx.write("f", "0\n");
    fx.commit_all("base");
    let wt = fx.base.join("wt");
    fx.g(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let seen = fx.base.join("seen-gitdir");
    fx.hook(
        "pre-commit",
        &format!("#!/bin/sh\necho \"$GIT_DIR\" > {}\n", seen.display()),
    );
    fs::write(wt.join("m.toml"), "m\n").unwrap();
    let vcs = GitVcs::open_with_env(&wt, fx.env.clone()).unwrap();
    let id = vcs.commit_paths(&["m.toml"], "side commit").unwrap();
    assert_eq!(fx.g(&["rev-parse", "side"]).trim(), id.as_str());
    assert_eq!(
        fx.g(&["rev-parse", "main"]).trim(),
        fx.g(&["rev-parse", "side~1"]).trim()
    );
    assert_eq!(fx.git(&wt, &["status", "--porcelain"]), "");
    assert_eq!(fx.g(&["status", "--porcelain"]), "");
    assert_eq!(
        fs::read_to_string(&seen).unwrap().trim(),
        fx.repo.join(".git/worktrees/wt").display().to_string()
    );
}

#[test]
fn git_version_is_checked_once() {
    assert_eq!(
        parse_git_version("git version 2.47.3\n"),
        Some(GitVersion(2, 47, 3))
    );
    assert_eq!(
        parse_git_version("git version 2.39.2 (Apple Git-143)"),
        Some(GitVersion(2, 39, 2))
    );
    assert_eq!(
        parse_git_version("git version 2.45.1.windows.1"),
        Some(GitVersion(2, 45, 1))
    );
    assert_eq!(
        parse_git_version("git version 2.38"),
        Some(GitVersion(2, 38, 0))
    );
    assert_eq!(parse_git_version("custom build"), None);
    let env = VcsEnv::from_process();
    let v = require_git_version(Path::new("git"), &env)
        .unwrap()
        .unwrap();
    assert!(v >= GitVersion(2, 38, 0));
    let err = require_git_version(Path::new("/nonexistent/git"), &env).unwrap_err();
    assert!(matches!(err, VcsError::GitUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("2.38 or newer"));

    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-git");
    fs::write(&old, "#!/bin/sh\necho 'git version 2.30.1'\n").unwrap();
    make_executable(&old);
    let err = require_git_version(&old, &env).unwrap_err();
    assert!(
        matches!(
            err,
            VcsError::GitTooOld {
                found: GitVersion(2, 30, 1),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("git 2.30.1"), "{err}");
    // Cached: the executable is not run again.
    fs::remove_file(&old).unwrap();
    assert!(matches!(
        require_git_version(&old, &env).unwrap_err(),
        VcsError::GitTooOld { .. }
    ));
}

#[test]
fn dates_and_messages_follow_git() {
    let t = parse_git_date("@1700000000 +0130").unwrap();
    assert_eq!((t.seconds(), t.offset_minutes()), (1_700_000_000, 90));
    let t = parse_git_date("1700000000 -0500").unwrap();
    assert_eq!((t.seconds(), t.offset_minutes()), (1_700_000_000, -300));
    let t = parse_git_date("2023-11-14T22:13:20+00:00").unwrap();
    assert_eq!(t.seconds(), 1_700_000_000);
    let t = parse_git_date("Tue, 14 Nov 2023 22:13:20 +0000").unwrap();
    assert_eq!(t.seconds(), 1_700_000_000);
    assert!(parse_git_date("yesterday-ish").is_none());
    assert_eq!(format_offset(-90), "-0130");
    assert_eq!(
        cleanup_message("\n\nsubject  \n\n\n\nbody\n\n"),
        "subject\n\nbody\n"
    );
    assert_eq!(cleanup_message("  \n\n"), "");
}
