//! Shared support for the CLI tests (`pinning_loop`, `bad_input`): a dataset
//! in a fresh git or jj repository with a private identity, a runner for the
//! `tether` binary, memory stores kept in a local directory and written with
//! plain file writes, and a digest of everything a refused command must not
//! touch.
//!
//! The end-to-end suites run once per VCS: a test is a function of [`Vcs`], and
//! [`for_each_vcs!`] makes a `git` and a `jj` test of it (and a `jj_colocated`
//! one in the pinning, branching and reclaiming suites). What a test checks in
//! the VCS goes through the VCS-neutral readers of [`Dataset`] (`head`,
//! `subjects`, `changed_files`, `show`, ...), each answered by that VCS's own CLI.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tether::model::canonical;
pub use tether_testkit::describe;

/// The VCS a dataset under test lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vcs {
    /// `git init -b main`.
    Git,
    /// `jj git init --no-colocate`: jj alone, its git store inside `.jj/`, so
    /// nothing here can be read with git by accident.
    Jj,
    /// `jj git init --colocate`: `.jj` next to `.git`, which tether takes as jj's.
    JjColocated,
}

/// Runs a test function of [`Vcs`] once per VCS: `for_each_vcs!(name, ...)`
/// makes `name::git` and `name::jj`; `for_each_vcs!(colocated: name, ...)`
/// adds `name::jj_colocated`, the same story in a colocated jj repository
/// (kept to representative tests: every arm costs CI time).
#[macro_export]
macro_rules! for_each_vcs {
    (colocated: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn git() {
                    super::$name($crate::support::Vcs::Git)
                }
                #[test]
                fn jj() {
                    super::$name($crate::support::Vcs::Jj)
                }
                #[test]
                fn jj_colocated() {
                    super::$name($crate::support::Vcs::JjColocated)
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn git() {
                    super::$name($crate::support::Vcs::Git)
                }
                #[test]
                fn jj() {
                    super::$name($crate::support::Vcs::Jj)
                }
            }
        )*
    };
}

/// A dataset under test: `<tmp>/ds` is a git or jj repository, `<tmp>/data`
/// holds the data it tracks, `<tmp>/home` the private git and jj
/// configuration every command here runs with.
pub struct Dataset {
    tmp: TempDir,
    vcs: Vcs,
}

impl Dataset {
    /// A fresh git repository, not yet a dataset.
    pub fn new() -> Dataset {
        Dataset::new_in(Vcs::Git)
    }

    /// A fresh repository of `vcs`, not yet a dataset.
    pub fn new_in(vcs: Vcs) -> Dataset {
        let tmp = tempfile::tempdir().expect("temp dir");
        let d = Dataset { tmp, vcs };
        std::fs::create_dir_all(d.home()).unwrap();
        std::fs::create_dir_all(d.data()).unwrap();
        std::fs::write(
            d.home().join(".gitconfig"),
            "[user]\n\tname = Tether Test\n\temail = test@tether.invalid\n\
             [init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n",
        )
        .unwrap();
        std::fs::write(
            d.jj_config(),
            "[user]\nname = \"Tether Test\"\nemail = \"test@tether.invalid\"\n",
        )
        .unwrap();
        let (program, args): (std::ffi::OsString, &[&str]) = match vcs {
            Vcs::Git => ("git".into(), &["init", "-q", "-b", "main", "ds"]),
            Vcs::Jj => (
                tether_testkit::jj().into(),
                &["git", "init", "--no-colocate", "ds"],
            ),
            Vcs::JjColocated => (
                tether_testkit::jj().into(),
                &["git", "init", "--colocate", "ds"],
            ),
        };
        let out = d
            .command(&program, d.tmp.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{vcs:?} init: {}", describe(&out));
        d
    }

    /// A fresh dataset: `new` plus `tether init`.
    pub fn init() -> Dataset {
        Dataset::init_in(Vcs::Git)
    }

    /// A fresh dataset in a repository of `vcs`.
    pub fn init_in(vcs: Vcs) -> Dataset {
        let d = Dataset::new_in(vcs);
        d.ok(&["init"]);
        d
    }

    /// The VCS this dataset lives in.
    pub fn vcs(&self) -> Vcs {
        self.vcs
    }

    fn is_jj(&self) -> bool {
        matches!(self.vcs, Vcs::Jj | Vcs::JjColocated)
    }

    fn jj_config(&self) -> PathBuf {
        self.home().join("jjconfig.toml")
    }

    /// The dataset (and git) root.
    pub fn root(&self) -> PathBuf {
        self.tmp.path().join("ds")
    }

    /// Where the tracked data lives, outside the repository.
    pub fn data(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    pub fn tmp(&self) -> &Path {
        self.tmp.path()
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// A command with this dataset's environment: the private git identity,
    /// the shared compiled-plugin cache, nothing of the caller's tether or
    /// git settings.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut c = Command::new(program);
        c.current_dir(dir)
            .env("HOME", self.home())
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("TETHER_CACHE_DIR", tether_testkit::cache_dir())
            .env("JJ_CONFIG", self.jj_config())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            // No cloud credential chain may ask an instance-metadata server
            // (169.254.169.254) from a test.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("NO_GCE_CHECK", "true")
            .env_remove("TETHER_JJ")
            .env_remove("TETHER_REV")
            .env_remove("RUST_LOG")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        if self.is_jj() {
            c.env("TETHER_JJ", tether_testkit::jj());
        }
        c
    }

    /// Run `tether ARGS` in the dataset root.
    pub fn tether(&self, args: &[&str]) -> Output {
        self.tether_in(&self.root(), args)
    }

    /// Run `tether ARGS` in `dir`.
    pub fn tether_in(&self, dir: &Path, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_tether"), dir)
            .args(args)
            .output()
            .expect("run tether")
    }

    /// Run `tether ARGS`, require exit 0, return stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.tether(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "tether {} should succeed:\n{}",
            args.join(" "),
            describe(&out)
        );
        stdout(&out)
    }

    /// Run `git ARGS` in the dataset root, require success, return stdout.
    pub fn git(&self, args: &[&str]) -> String {
        tether_testkit::run_ok(self.command("git", &self.root()).args(args))
    }

    /// The full id of `rev`.
    pub fn rev(&self, rev: &str) -> String {
        self.git(&["rev-parse", rev]).trim().to_string()
    }

    /// Run `jj ARGS` in the dataset root, require success, return stdout.
    pub fn jj(&self, args: &[&str]) -> String {
        tether_testkit::run_ok(
            self.command(tether_testkit::jj(), &self.root())
                .args(["--color=never", "--no-pager"])
                .args(args),
        )
    }

    /// The last dataset commit's full id: git's `HEAD`, jj's `@-`.
    pub fn head(&self) -> String {
        if self.is_jj() {
            self.jj(&["log", "--no-graph", "-r", "@-", "-T", "commit_id"])
        } else {
            self.rev("HEAD")
        }
    }

    /// Every commit of the dataset's line, newest first, as full ids (git:
    /// `git log`; jj: the ancestors of `@-`).
    pub fn history(&self) -> Vec<String> {
        if self.is_jj() {
            lines(&self.jj(&[
                "log",
                "--no-graph",
                "-r",
                "::@- ~ root()",
                "-T",
                "commit_id ++ \"\\n\"",
            ]))
        } else {
            lines(&self.git(&["log", "--format=%H"]))
        }
    }

    /// Every commit the VCS shows, as full ids (git: `rev-list --all`; jj:
    /// every visible commit but the root).
    pub fn all_commits(&self) -> Vec<String> {
        if self.is_jj() {
            lines(&self.jj(&[
                "log",
                "--no-graph",
                "-r",
                "..",
                "-T",
                "commit_id ++ \"\\n\"",
            ]))
        } else {
            lines(&self.git(&["rev-list", "--all"]))
        }
    }

    /// Each commit's subject, newest first, as `git log --format=%s` prints it
    /// (the first paragraph, its lines joined with spaces).
    pub fn subjects(&self) -> Vec<String> {
        if self.is_jj() {
            let out = self.jj(&[
                "log",
                "--no-graph",
                "-r",
                "::@- ~ root()",
                "-T",
                "description ++ \"\\0\"",
            ]);
            out.split('\0')
                .filter(|m| !m.is_empty())
                .map(|m| {
                    let para = m.trim_start().split("\n\n").next().unwrap_or_default();
                    para.lines().map(str::trim).collect::<Vec<_>>().join(" ")
                })
                .collect()
        } else {
            lines(&self.git(&["log", "--format=%s"]))
        }
    }

    /// The full message of `rev` (a commit id), trailing whitespace trimmed.
    pub fn message(&self, rev: &str) -> String {
        let text = if self.is_jj() {
            self.jj(&["log", "--no-graph", "-r", rev, "-T", "description"])
        } else {
            self.git(&["log", "-1", "--format=%B", rev])
        };
        text.trim_end().to_string()
    }

    /// The files `rev` (a commit id) changed, sorted.
    pub fn changed_files(&self, rev: &str) -> Vec<String> {
        let mut files = if self.is_jj() {
            lines(&self.jj(&["diff", "-r", rev, "--name-only"]))
        } else {
            lines(&self.git(&["show", "--name-only", "--format=", rev]))
        };
        files.retain(|f| !f.is_empty());
        files.sort();
        files
    }

    /// A file's content at `rev` (a commit id).
    pub fn show(&self, rev: &str, path: &str) -> String {
        if self.is_jj() {
            self.jj(&["file", "show", "-r", rev, &format!("root-file:{path:?}")])
        } else {
            self.git(&["show", &format!("{rev}:{path}")])
        }
    }

    /// Paths the working copy changed that no commit holds (git: `status
    /// --porcelain`, untracked files included; jj: the diff of `@`).
    pub fn uncommitted(&self) -> Vec<String> {
        let text = if self.is_jj() {
            self.jj(&["diff", "-r", "@", "--name-only"])
        } else {
            self.git(&["status", "--porcelain"])
        };
        lines(&text).into_iter().filter(|l| !l.is_empty()).collect()
    }

    /// The dataset id from `tether.toml`.
    pub fn dataset_id(&self) -> String {
        let text = std::fs::read_to_string(self.root().join("tether.toml")).unwrap();
        let cfg: toml::Value = toml::from_str(&text).unwrap();
        cfg["dataset"]["id"]
            .as_str()
            .expect("[dataset] id")
            .to_string()
    }

    /// A manifest, parsed.
    pub fn manifest(&self, key: &str) -> toml::Value {
        let path = self
            .root()
            .join(".tether/objects")
            .join(format!("{key}.toml"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        toml::from_str(&text).unwrap()
    }

    /// A memory store kept in `<tmp>/data/<name>`, created with its initial
    /// snapshot on `main`.
    pub fn memory_store(&self, name: &str) -> MemoryStore {
        MemoryStore::create(&self.data().join(name))
    }

    /// `tether add KEY --kind memory --set system=<store>`.
    pub fn add_memory(&self, key: &str, store: &MemoryStore) {
        let system = format!("system={}", store.root.display());
        let out = self.ok(&["add", key, "--kind", "memory", "--set", &system]);
        assert_eq!(out, format!("added {key} [memory]\n"));
    }

    /// Commits made straight onto the checked-out `main` with `git
    /// fast-import` (thousands in a second, where `tether commit` would take
    /// minutes): each a message and the files it writes, `(path, content)`
    /// relative to the repository root, on top of the last. The checkout
    /// is then reset to the new head.
    pub fn fast_import(&self, commits: &[(String, Vec<(String, String)>)]) {
        use std::io::Write as _;
        let mut stream = String::new();
        let head = self.rev("HEAD");
        for (n, (msg, files)) in commits.iter().enumerate() {
            stream.push_str(&format!(
                "commit refs/heads/main\ncommitter T <t@t.invalid> {} +0000\ndata {}\n{msg}\n",
                1_700_000_000 + n,
                msg.len() + 1
            ));
            if n == 0 {
                stream.push_str(&format!("from {head}\n"));
            }
            for (path, content) in files {
                stream.push_str(&format!(
                    "M 100644 inline {path}\ndata {}\n{content}\n",
                    content.len()
                ));
            }
        }
        let mut child = self
            .command("git", &self.root())
            .args(["fast-import", "--quiet", "--force"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stream.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "git fast-import failed");
        self.git(&["reset", "-q", "--hard"]);
    }

    /// A digest of everything a refused command must leave alone: the
    /// `.tether/` tree and `tether.toml` byte for byte (the checkout lock's
    /// content is the last holder's pid, so only its existence counts), git's
    /// HEAD, branches and index. `.tether/cache/` is left out: the history
    /// and drift memos record what the VCS and op log hold, and the file-hash
    /// cache takes a file's hash once it is no longer racy (2 s after its last
    /// change), which any command reading them may do — on a loaded machine,
    /// between two commands of one test.
    pub fn written(&self) -> String {
        let mut h = Sha256::new();
        let root = self.root();
        for rel in files_under(&root, &root.join(".tether")) {
            if rel.starts_with(".tether/cache/") {
                continue;
            }
            h.update(rel.as_bytes());
            h.update([0]);
            if rel != ".tether/lock" {
                h.update(std::fs::read(root.join(&rel)).unwrap());
            }
            h.update([0]);
        }
        h.update(std::fs::read(root.join("tether.toml")).unwrap_or_default());
        for args in [
            &["rev-parse", "--verify", "-q", "HEAD"][..],
            &["symbolic-ref", "-q", "HEAD"],
            &["show-ref"],
            &["ls-files", "-s"],
        ] {
            let out = self.command("git", &root).args(args).output().unwrap();
            h.update(&out.stdout);
        }
        hex::encode(h.finalize())
    }
}

impl Default for Dataset {
    fn default() -> Self {
        Self::new()
    }
}

/// Every file under `dir`, as sorted `/`-separated paths relative to `base`.
pub fn files_under(base: &Path, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(base).unwrap();
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Output lines, trailing whitespace trimmed.
pub fn lines(text: &str) -> Vec<String> {
    text.lines().map(|l| l.trim_end().to_string()).collect()
}

/// Whether `s` is `n` lowercase hex digits.
pub fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A `jj` that writes each call's arguments on one line of a log, then runs
/// the real jj: how a test counts the jj processes a command starts (give
/// [`wrapper`](Self::wrapper) as `TETHER_JJ`).
pub struct JjCallLog {
    pub wrapper: PathBuf,
    log: PathBuf,
}

impl JjCallLog {
    /// The wrapper and its log, in `dir`.
    pub fn new(dir: &Path) -> JjCallLog {
        std::fs::create_dir_all(dir).unwrap();
        let (wrapper, log) = (dir.join("jj"), dir.join("calls.log"));
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$(echo \"$*\" | tr '\\n' ' ')\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                tether_testkit::jj().display()
            ),
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        JjCallLog { wrapper, log }
    }

    /// The calls logged since the last `take`, one per element; clears the log.
    pub fn take(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text.lines().map(str::to_owned).collect()
    }
}

/// A memory-backend store in a local directory, read and written with plain
/// file writes in the layout `plugins/memory/src/lib.rs` documents.
pub struct MemoryStore {
    pub root: PathBuf,
}

impl MemoryStore {
    /// The initial snapshot, with `main` on it.
    pub fn create(root: &Path) -> MemoryStore {
        let s = MemoryStore {
            root: root.to_path_buf(),
        };
        let id =
            s.write_snapshot(&json!({"message": "initial snapshot", "parents": [], "payload": {}}));
        s.set_branch("main", &id);
        s
    }

    fn write_snapshot(&self, snap: &Value) -> String {
        let text = canonical::to_string(snap);
        let id = hex::encode(Sha256::digest(text.as_bytes()))[..20].to_string();
        let path = self.root.join("snapshots").join(format!("{id}.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        id
    }

    fn ref_path(&self, kind: &str, name: &str) -> PathBuf {
        self.root
            .join("refs")
            .join(kind)
            .join(format!("{name}.json"))
    }

    pub fn set_branch(&self, name: &str, snapshot_id: &str) {
        let path = self.ref_path("branches", name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, json!({"snapshot_id": snapshot_id}).to_string()).unwrap();
    }

    fn read_ref(&self, kind: &str, name: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.ref_path(kind, name)).ok()?;
        let v: Value = serde_json::from_str(&text).expect("a ref file is JSON");
        Some(v["snapshot_id"].as_str().expect("snapshot_id").to_string())
    }

    /// The snapshot `main` holds.
    pub fn head(&self) -> String {
        self.read_ref("branches", "main").expect("main exists")
    }

    /// Write a new state on `main`: a child snapshot of the head holding
    /// `payload`, then move `main` onto it. Returns the new snapshot id.
    pub fn write(&self, payload: Value, message: &str) -> String {
        let head = self.head();
        let id = self
            .write_snapshot(&json!({"message": message, "parents": [head], "payload": payload}));
        self.set_branch("main", &id);
        id
    }

    /// The payload of a snapshot.
    pub fn payload(&self, snapshot_id: &str) -> Value {
        let path = self
            .root
            .join("snapshots")
            .join(format!("{snapshot_id}.json"));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v["payload"].clone()
    }

    /// The snapshot a tag names, if the tag exists.
    pub fn tag(&self, name: &str) -> Option<String> {
        self.read_ref("tags", name)
    }

    /// Every tag, sorted.
    pub fn tags(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.root.join("refs/tags"))
            .map(|rd| {
                rd.filter_map(|e| {
                    let name = e.ok()?.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".json").map(str::to_string)
                })
                .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Delete a tag behind tether's back.
    pub fn delete_tag(&self, name: &str) {
        std::fs::remove_file(self.ref_path("tags", name)).expect("the tag exists");
    }
}

// ---- Branching support: store branches and git worktrees -------------------

impl MemoryStore {
    /// The snapshot branch `name` holds, if it exists.
    pub fn branch(&self, name: &str) -> Option<String> {
        self.read_ref("branches", name)
    }

    /// Every branch, sorted.
    pub fn branches(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.root.join("refs/branches"))
            .map(|rd| {
                rd.filter_map(|e| {
                    let name = e.ok()?.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".json").map(str::to_string)
                })
                .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Write a new state on branch `name` (a child of its head), as a job
    /// writing through a handle would. Returns the new snapshot id.
    pub fn write_on(&self, name: &str, payload: Value, message: &str) -> String {
        let head = self.branch(name).expect("the branch exists");
        let id = self
            .write_snapshot(&json!({"message": message, "parents": [head], "payload": payload}));
        self.set_branch(name, &id);
        id
    }
}

impl Dataset {
    /// The working branch tether names for `bookmark` in this dataset.
    pub fn working_ref(&self, bookmark: &str) -> String {
        format!("tether.ws.{}.{bookmark}", self.dataset_id())
    }

    /// Run `tether ARGS` in `dir`, require exit 0, return stdout.
    pub fn ok_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.tether_in(dir, args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "tether {} (in {}) should succeed:\n{}",
            args.join(" "),
            dir.display(),
            describe(&out)
        );
        stdout(&out)
    }

    /// Run `tether ARGS`, require exit `code`, return the output.
    pub fn fails(&self, args: &[&str], code: i32) -> Output {
        let out = self.tether(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tether {} should exit {code}:\n{}",
            args.join(" "),
            describe(&out)
        );
        out
    }
}

impl Dataset {
    /// Write `.tether/secrets.toml` (mode 0600, as tether requires).
    pub fn write_secrets(&self, text: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let path = self.root().join(".tether").join("secrets.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

// ---- Undo support (`undo.rs`): the checkout's per-workspace file, its git
// branch, and its operation log -------------------------------------------

impl Dataset {
    /// `.tether/workspace.toml` as text ("" when there is none).
    pub fn workspace_text(&self) -> String {
        std::fs::read_to_string(self.root().join(".tether/workspace.toml")).unwrap_or_default()
    }

    /// The branch git has checked out (empty when detached).
    pub fn git_branch(&self) -> String {
        self.git(&["branch", "--show-current"]).trim().to_string()
    }

    /// `tether ops --json`, newest first.
    pub fn ops(&self) -> Vec<Value> {
        let out = self.ok(&["ops", "--json"]);
        let v: Value = serde_json::from_str(&out).expect("ops --json is JSON");
        v.as_array().expect("an array").clone()
    }
}

// --- pull and repair (host/tests/pull.rs, host/tests/repair.rs) ---

impl Dataset {
    /// Run `tether ARGS`, require exit `code`; stdout and stderr.
    pub fn run(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.tether(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tether {} should exit {code}:\n{}",
            args.join(" "),
            describe(&out)
        );
        (stdout(&out), stderr(&out))
    }

    /// Run `tether ARGS --json`, require exit `code`, parse stdout.
    pub fn json(&self, args: &[&str], code: i32) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let (out, _) = self.run(&args, code);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
    }

    /// The newest entry of this checkout's operation log, as `ops --json`
    /// prints it.
    pub fn newest_op(&self) -> Value {
        self.json(&["ops"], 0)[0].clone()
    }

    /// `tether new -b NAME --eager`: this checkout on a new bookmark, every
    /// working branch forked now. Returns `key`'s working branch, as
    /// `workspace.toml` names it.
    pub fn fork_bookmark(&self, bookmark: &str, key: &str) -> String {
        self.ok(&["new", "-b", bookmark, "--eager"]);
        let path = self.root().join(".tether/workspace.toml");
        let ws = tether::model::WorkspaceState::read(&path)
            .unwrap()
            .expect("new writes workspace.toml");
        assert_eq!(ws.bookmark.as_deref(), Some(bookmark));
        assert_eq!(self.git(&["branch", "--show-current"]).trim(), bookmark);
        ws.working_refs
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("no working branch for {key} in {}", path.display()))
    }
}

impl MemoryStore {
    /// Delete a branch behind tether's back.
    pub fn delete_branch(&self, name: &str) {
        std::fs::remove_file(self.ref_path("branches", name)).expect("the branch exists");
    }

    /// Point a tag at another snapshot behind tether's back.
    pub fn set_tag(&self, name: &str, snapshot_id: &str) {
        let path = self.ref_path("tags", name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, json!({"snapshot_id": snapshot_id}).to_string()).unwrap();
    }

    /// Delete a tag the way a store that never reuses a tag's name does (the
    /// memory layout's tombstone, as Icechunk keeps one): the tombstone first,
    /// then the tag.
    pub fn tombstone_tag(&self, name: &str) {
        let tag = self.ref_path("tags", name);
        let mut tombstone = tag.clone().into_os_string();
        tombstone.push(".deleted");
        std::fs::write(tombstone, "{}").unwrap();
        std::fs::remove_file(tag).expect("the tag exists");
    }

    /// Remove a snapshot file (its state is gone from the store).
    pub fn delete_snapshot(&self, snapshot_id: &str) {
        std::fs::remove_file(
            self.root
                .join("snapshots")
                .join(format!("{snapshot_id}.json")),
        )
        .expect("the snapshot exists");
    }
}

// ---- VCS-neutral story steps (branching.rs, reclaiming.rs, jj_vcs.rs): what
// a user does by hand in the dataset's VCS, each the same story in git and jj --

impl Dataset {
    /// The commit a bookmark (git: branch) points at, or a commit id's full form.
    pub fn bookmark(&self, name: &str) -> String {
        if self.is_jj() {
            self.jj(&["log", "--no-graph", "-r", name, "-T", "commit_id"])
        } else {
            self.rev(name)
        }
    }

    /// The bookmark the working copy is on: git's checked-out branch; in jj,
    /// which has no current bookmark, the one of `@-`'s bookmarks tether
    /// recorded the workspace on (`.jj/tether-bookmark`), else the first ("" when
    /// none).
    pub fn current_bookmark(&self) -> String {
        if self.is_jj() {
            let out = self.jj(&[
                "log",
                "--no-graph",
                "-r",
                "@-",
                "-T",
                "local_bookmarks.map(|b| b.name()).join(\"\\n\")",
            ]);
            let at = lines(&out);
            let chosen = std::fs::read_to_string(self.root().join(".jj/tether-bookmark"))
                .unwrap_or_default()
                .trim()
                .to_string();
            if at.contains(&chosen) {
                chosen
            } else {
                at.into_iter().next().unwrap_or_default()
            }
        } else {
            self.git(&["branch", "--show-current"]).trim().to_string()
        }
    }

    /// Every local bookmark (git: branch) name, sorted.
    pub fn bookmarks(&self) -> Vec<String> {
        let mut names = if self.is_jj() {
            lines(&self.jj(&["bookmark", "list", "-T", "name ++ \"\\n\""]))
        } else {
            lines(&self.git(&["branch", "--format=%(refname:short)"]))
        };
        names.retain(|n| !n.is_empty());
        names.sort();
        names
    }

    /// A second checkout of the repository at `dir` on the current commit:
    /// `git worktree add --detach`, `jj workspace add`.
    pub fn add_workspace(&self, dir: &Path) {
        let p = dir.to_str().unwrap();
        if self.is_jj() {
            self.jj(&["workspace", "add", "-r", "@-", p]);
        } else {
            self.git(&["worktree", "add", "-q", "--detach", p]);
        }
    }

    /// Throw the last dataset commit away by hand, its bookmark and working
    /// copy going back to its parent: `git reset --hard HEAD~1`, `jj abandon
    /// --retain-bookmarks @-` (the bookmark moves to the parent, not away).
    pub fn discard_last_commit(&self) {
        if self.is_jj() {
            self.jj(&["abandon", "--retain-bookmarks", "@-"]);
        } else {
            self.git(&["reset", "-q", "--hard", "HEAD~1"]);
        }
    }

    /// Delete a bookmark by hand: `git branch -D`, `jj bookmark delete`.
    pub fn delete_bookmark(&self, name: &str) {
        if self.is_jj() {
            self.jj(&["bookmark", "delete", name]);
        } else {
            self.git(&["branch", "-q", "-D", name]);
        }
    }

    /// Keep `rev` in history once its bookmark is gone: a git tag; jj keeps
    /// every commit visible until it is abandoned, so nothing to do.
    pub fn keep_in_history(&self, name: &str, rev: &str) {
        if !self.is_jj() {
            self.git(&["tag", name, rev]);
        }
    }

    /// A new empty commit on top of the working copy, made by hand outside
    /// tether: `git commit --allow-empty`, `jj commit`.
    pub fn commit_by_hand(&self, message: &str) {
        if self.is_jj() {
            self.jj(&["commit", "-m", message]);
        } else {
            self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        }
    }

    /// Make `path` (already written) an uncommitted change the VCS sees: `git
    /// add`; jj snapshots every file on its own.
    pub fn track(&self, path: &str) {
        if !self.is_jj() {
            self.git(&["add", path]);
        }
    }

    /// Undo `track(path)` and remove the file: the working copy is clean again.
    pub fn untrack_and_remove(&self, path: &str) {
        if !self.is_jj() {
            self.git(&["rm", "-q", "--cached", path]);
        }
        std::fs::remove_file(self.root().join(path)).unwrap();
    }

    /// A clone of the dataset repository at `dir`, its working copy on the
    /// trunk `main`: `git clone`; jj: `jj git export` (a jj-only repository
    /// keeps its bookmarks out of its git store until then), `jj git clone` of
    /// that store, `jj bookmark track main@origin`, `jj new main`.
    pub fn clone_to(&self, dir: &Path) {
        let run = |program: &std::ffi::OsStr, at: &Path, args: &[&str]| {
            let out = self.command(program, at).args(args).output().unwrap();
            assert!(out.status.success(), "{args:?}: {}", describe(&out));
        };
        let (src, dst) = (self.root(), dir.to_string_lossy().into_owned());
        if !self.is_jj() {
            run(
                "git".as_ref(),
                self.tmp(),
                &["clone", "-q", src.to_str().unwrap(), &dst],
            );
            return;
        }
        let jj = std::ffi::OsString::from(tether_testkit::jj());
        let store = src.join(".jj/repo/store/git");
        let from = if store.is_dir() { store } else { src.clone() };
        run(&jj, &src, &["git", "export"]);
        run(
            &jj,
            self.tmp(),
            &["git", "clone", from.to_str().unwrap(), &dst],
        );
        run(&jj, dir, &["bookmark", "track", "main@origin"]);
        run(&jj, dir, &["new", "main"]);
    }

    /// Lose the repository and make a fresh, empty one of the same VCS in its place.
    pub fn reinit_repository(&self) {
        std::fs::remove_dir_all(self.root()).unwrap();
        let (program, args): (std::ffi::OsString, &[&str]) = match self.vcs {
            Vcs::Git => ("git".into(), &["init", "-q", "-b", "main", "ds"]),
            Vcs::Jj => (
                tether_testkit::jj().into(),
                &["git", "init", "--no-colocate", "ds"],
            ),
            Vcs::JjColocated => (
                tether_testkit::jj().into(),
                &["git", "init", "--colocate", "ds"],
            ),
        };
        let out = self
            .command(&program, self.tmp())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "re-init: {}", describe(&out));
    }
}
