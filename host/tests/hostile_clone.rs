//! A clone is untrusted input (spec/10, "Security model"): each test builds a
//! hostile dataset the way an attacker would publish one — the layout made in
//! a source repository, committed with git or jj, then `git clone`d or `jj git
//! clone`d — and runs `tether` in the clone. Each asserts the refusal (exit 1,
//! `error:` naming the path or key), that nothing outside `.tether/` changed
//! (a digest of the sentinel tree the links point into, the clone's other
//! files and the store), and that the attacker's program (a `jj_path` script
//! that would write a sentinel file) never ran.
//!
//! One test per "It cannot" line of the security model, and per attack of
//! issue 29: a linked `.tether`, linked directories and files inside it,
//! per-checkout files tracked by every route, and a `.gitignore` that ignores
//! nothing; on git, jj and colocated jj.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::{Dataset, MemoryStore, Vcs, describe, stderr, stdout};

/// The commands a hostile clone is tried with: every one is refused before it
/// reads anything the clone chose.
const COMMANDS: &[&[&str]] = &[
    &["status"],
    &["status", "--snapshot"],
    &["commit", "-m", "x"],
    &["verify", "--all-history"],
    &["plugin", "pin", "memory", "--vendor"],
    &["new", "main"],
    &["new", "-b", "feature"],
    &["gc", "--no-dry-run"],
    &["ops"],
];

/// The commands of [`COMMANDS`] that list the working copy's manifests
/// before anything else can stop them in a fresh clone (`verify
/// --all-history` reads the committed ones from the VCS).
const MANIFEST_READERS: &[&[&str]] = &[
    &["status"],
    &["status", "--snapshot"],
    &["new", "main"],
    &["new", "-b", "feature"],
    &["gc", "--no-dry-run"],
];

/// The attacker's source dataset, its clone, and what must stay untouched.
struct Attack {
    d: Dataset,
    store: MemoryStore,
    /// `<tmp>/clone`: where the victim runs tether.
    clone: PathBuf,
    /// `<tmp>/outside`: the sentinel tree absolute links point into.
    outside: PathBuf,
    /// `<tmp>/ran`: the attacker's program writes it.
    ran: PathBuf,
}

impl Attack {
    /// A dataset with one committed memory object, a sentinel tree beside
    /// it, and the attacker's program `evil.sh` in the repository (it
    /// records that it ran, then runs the real jj so nothing else looks
    /// wrong). The source's own per-checkout files are removed: the attacker
    /// ships exactly what a test crafts.
    fn new(vcs: Vcs) -> Attack {
        let d = Dataset::init_in(vcs);
        let store = d.memory_store("imaging");
        store.write(json!({"labels": "0"}), "first");
        d.add_memory("imaging", &store);
        d.ok(&["commit", "-m", "baseline"]);
        let outside = d.tmp().join("outside");
        for dir in ["objects", "listings", "cache", "plugins"] {
            std::fs::create_dir_all(outside.join(dir)).unwrap();
            std::fs::write(outside.join(dir).join("keep.txt"), dir).unwrap();
        }
        std::fs::write(outside.join("victim.txt"), "precious\n").unwrap();
        let ran = d.tmp().join("ran");
        let evil = d.root().join("evil.sh");
        std::fs::write(
            &evil,
            format!(
                "#!/bin/sh\necho ran >> '{}'\nexec '{}' \"$@\"\n",
                ran.display(),
                tether_testkit::jj().display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
        for name in ["workspace.toml", "ops.jsonl", "lock"] {
            let _ = std::fs::remove_file(d.root().join(".tether").join(name));
        }
        let _ = std::fs::remove_dir_all(d.root().join(".tether/cache"));
        let clone = d.tmp().join("clone");
        Attack {
            d,
            store,
            clone,
            outside,
            ran,
        }
    }

    fn src(&self, rel: &str) -> PathBuf {
        self.d.root().join(rel)
    }

    /// The attacker's program, where the clone will have it.
    fn evil_in_clone(&self) -> String {
        self.clone.join("evil.sh").display().to_string()
    }

    /// A `secrets.toml` that would run the attacker's program (jj) and skip
    /// plugin trust (git and jj) if tether honoured it.
    fn hostile_secrets(&self) -> String {
        format!(
            "[vcs]\njj_path = \"{}\"\ngit_path = \"{}\"\n[plugins]\ntrusted = [\"sha256:{}\"]\n",
            self.evil_in_clone(),
            self.evil_in_clone(),
            "ab".repeat(32)
        )
    }

    /// Commit the source's working copy as the attacker would, `tracked`
    /// (paths relative to the root) included even where ignored, move the
    /// trunk onto it, and clone it to `self.clone` with the same VCS.
    fn ship(&self, tracked: &[&str]) {
        let d = &self.d;
        match d.vcs() {
            Vcs::Git => {
                d.git(&["add", "-A"]);
                for p in tracked {
                    d.git(&["add", "-f", "--", p]);
                }
                d.git(&["commit", "-q", "-m", "hostile"]);
            }
            Vcs::Jj | Vcs::JjColocated => {
                if !tracked.is_empty() {
                    let mut args = vec!["file", "track", "--include-ignored", "--"];
                    args.extend(tracked);
                    d.jj(&args);
                }
                d.jj(&["commit", "-m", "hostile"]);
                d.jj(&["bookmark", "set", "main", "-r", "@-"]);
            }
        }
        self.clone_it();
    }

    /// `git clone`, or `jj git clone` (colocated for the colocated variant)
    /// with the trunk tracked and a working copy on it.
    fn clone_it(&self) {
        let d = &self.d;
        let run = |program: &std::ffi::OsStr, at: &Path, args: &[&str]| {
            let out = d.command(program, at).args(args).output().unwrap();
            assert!(out.status.success(), "{args:?}: {}", describe(&out));
        };
        let (src, dst) = (d.root(), self.clone.to_string_lossy().into_owned());
        let jj = std::ffi::OsString::from(tether_testkit::jj());
        match d.vcs() {
            Vcs::Git => run(
                "git".as_ref(),
                d.tmp(),
                &["clone", "-q", src.to_str().unwrap(), &dst],
            ),
            Vcs::Jj | Vcs::JjColocated => {
                let store = src.join(".jj/repo/store/git");
                let from = if store.is_dir() { store } else { src.clone() };
                run(&jj, &src, &["git", "export"]);
                let colocate = if d.vcs() == Vcs::Jj {
                    "--no-colocate"
                } else {
                    "--colocate"
                };
                run(
                    &jj,
                    d.tmp(),
                    &["git", "clone", colocate, from.to_str().unwrap(), &dst],
                );
                run(&jj, &self.clone, &["bookmark", "track", "main@origin"]);
                run(&jj, &self.clone, &["new", "main"]);
            }
        }
        assert!(!self.ran.exists(), "cloning ran nothing of the attacker's");
    }

    /// A digest of everything outside the clone's `.tether/` directory that a
    /// command could reach: the sentinel tree, the clone's other files (what
    /// in-repository links point at), and the object's store.
    fn outside_digest(&self) -> String {
        let mut h = Sha256::new();
        for (dir, skip) in [
            (&self.outside, &[][..]),
            (&self.clone, &[".git", ".jj", ".tether"][..]),
            (&self.store.root, &[][..]),
        ] {
            h.update(dir.to_string_lossy().as_bytes());
            digest_tree(&mut h, dir, dir, skip);
        }
        hex::encode(h.finalize())
    }

    /// Run `tether ARGS` in the clone.
    fn tether(&self, args: &[&str]) -> std::process::Output {
        self.d.tether_in(&self.clone, args)
    }

    /// `tether ARGS` in the clone is refused: exit 1, `error:` holding each
    /// of `says`, nothing on stdout, nothing outside `.tether/` changed, and
    /// the attacker's program never ran.
    fn refused(&self, args: &[&str], says: &[&str]) {
        let before = self.outside_digest();
        let out = self.tether(args);
        let what = format!(
            "tether {} in the clone:\n{}",
            args.join(" "),
            describe(&out)
        );
        assert_eq!(out.status.code(), Some(1), "{what}");
        let err = stderr(&out);
        assert!(err.starts_with("error:"), "{what}");
        for s in says {
            assert!(err.contains(s), "the error names {s:?}: {what}");
        }
        assert_eq!(stdout(&out), "", "{what}");
        assert_eq!(
            self.outside_digest(),
            before,
            "nothing outside .tether/ changed: {what}"
        );
        assert!(!self.ran.exists(), "the attacker's program ran: {what}");
    }

    /// `tether ARGS` in the clone, whatever it answers, changes nothing in
    /// the sentinel tree or the store (it may write the dataset's own
    /// files: `plugin pin` writes `tether.toml`) and runs nothing of the
    /// attacker's.
    fn untouched(&self, args: &[&str]) {
        let sentinel = || {
            let mut h = Sha256::new();
            for dir in [&self.outside, &self.store.root] {
                digest_tree(&mut h, dir, dir, &[]);
            }
            hex::encode(h.finalize())
        };
        let before = sentinel();
        let out = self.tether(args);
        let what = format!(
            "tether {} in the clone:\n{}",
            args.join(" "),
            describe(&out)
        );
        assert_eq!(
            sentinel(),
            before,
            "the sentinel tree and store are unchanged: {what}"
        );
        assert!(!self.ran.exists(), "the attacker's program ran: {what}");
    }

    /// Every command of [`COMMANDS`] is refused naming `says`.
    fn all_refused(&self, says: &[&str]) {
        let tags = self.store.tags();
        for args in COMMANDS {
            self.refused(args, says);
        }
        assert_eq!(self.store.tags(), tags, "nothing was pinned");
    }

    /// Run a VCS command in the clone, returning stdout.
    fn vcs_in_clone(&self, args: &[&str]) -> String {
        let program: std::ffi::OsString = match self.d.vcs() {
            Vcs::Git => "git".into(),
            _ => tether_testkit::jj().into(),
        };
        let mut c = self.d.command(program, &self.clone);
        if self.d.vcs() != Vcs::Git {
            c.args(["--color=never", "--no-pager"]);
        }
        tether_testkit::run_ok(c.args(args))
    }

    /// Every path any commit of the clone holds.
    fn paths_in_history(&self) -> Vec<String> {
        let mut out: Vec<String> = match self.d.vcs() {
            Vcs::Git => self
                .vcs_in_clone(&["log", "--all", "--name-only", "--format="])
                .lines()
                .map(str::to_owned)
                .collect(),
            _ => {
                let ids = self.vcs_in_clone(&[
                    "log",
                    "--no-graph",
                    "-r",
                    "all() ~ root()",
                    "-T",
                    "commit_id ++ \"\\n\"",
                ]);
                ids.lines()
                    .flat_map(|id| {
                        self.vcs_in_clone(&["file", "list", "-r", id])
                            .lines()
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    })
                    .collect()
            }
        };
        out.sort();
        out.dedup();
        out
    }
}

/// Hash every entry under `dir` (relative to `base`) without following a
/// link: its path, its kind, its bytes or its link target.
fn digest_tree(h: &mut Sha256, base: &Path, dir: &Path, skip: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(base)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if dir == base && skip.contains(&rel.as_str()) {
            continue;
        }
        h.update(rel.as_bytes());
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            h.update(b"\0link\0");
            h.update(
                std::fs::read_link(&path)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes(),
            );
        } else if ft.is_dir() {
            h.update(b"\0dir\0");
            digest_tree(h, base, &path, skip);
        } else {
            h.update(b"\0file\0");
            h.update(std::fs::read(&path).unwrap());
        }
    }
}

/// Replace the source's `at` (a file, directory or link) with a link to `target`.
fn link(a: &Attack, at: &str, target: &Path) {
    let path = a.src(at);
    if path.is_dir() && !path.is_symlink() {
        std::fs::remove_dir_all(&path).unwrap();
    } else if path.exists() || path.is_symlink() {
        std::fs::remove_file(&path).unwrap();
    }
    symlink(target, &path).unwrap();
}

// ---- Issue 29, attack 1: a linked `.tether` ---------------------------------

/// `.tether` is a tracked link to a tracked directory `payload/` holding the
/// manifests and a `secrets.toml` naming the attacker's jj and trusting a
/// plugin. The VCS says `.tether/secrets.toml` is untracked (it is behind a
/// link), so only the link itself gives it away: every command is refused
/// naming `.tether`, and the program never runs.
fn a_linked_dot_tether_is_refused(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::rename(a.src(".tether"), a.src("payload")).unwrap();
    std::fs::remove_file(a.src("payload/.gitignore")).unwrap();
    std::fs::write(a.src("payload/secrets.toml"), a.hostile_secrets()).unwrap();
    std::fs::write(
        a.src("payload/workspace.toml"),
        "workspace_id = \"00000000000000000000000000000000\"\nbookmark = \"main\"\n",
    )
    .unwrap();
    symlink("payload", a.src(".tether")).unwrap();
    a.ship(&[]);
    assert!(
        a.clone.join(".tether").is_symlink(),
        "the clone has the link"
    );
    let dot = a.clone.join(".tether").display().to_string();
    a.all_refused(&[&dot, "symbolic link"]);
    // A link to a directory outside the checkout is refused the same way.
    std::fs::remove_file(a.clone.join(".tether")).unwrap();
    std::fs::create_dir_all(a.outside.join("objects")).unwrap();
    symlink(&a.outside, a.clone.join(".tether")).unwrap();
    a.all_refused(&[&dot, "symbolic link"]);
}

// ---- Attacks 2 and 3: linked files and directories inside `.tether/` -------

/// Each of tether's directories (and a directory inside `objects/`) is a
/// tracked link to a sentinel directory outside the dataset: `add`,
/// `commit`, `status --snapshot`, `verify --all-history` and `plugin pin
/// --vendor` would read and write there. Every command is refused naming
/// the link, and the sentinel tree is unchanged. The one exception is an
/// `add` beside a link deep in `objects/`: it touches only the manifest it
/// writes (it lists no other), so it is refused only when its key goes
/// through the link.
fn linked_directories_in_dot_tether_are_refused(vcs: Vcs) {
    for name in ["objects", "listings", "cache", "plugins", "objects/zarr"] {
        let a = Attack::new(vcs);
        let target = a.outside.join(name.replace('/', "-"));
        std::fs::create_dir_all(&target).unwrap();
        if name == "objects" {
            // The manifests are there, so tether would work on them.
            for e in std::fs::read_dir(a.src(".tether/objects")).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), target.join(e.file_name())).unwrap();
            }
        }
        let at = format!(".tether/{name}");
        if let Some(parent) = a.src(&at).parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        link(&a, &at, &target);
        // The cache is ignored: an attacker commits it by force.
        a.ship(&[&at]);
        assert!(
            a.clone.join(&at).is_symlink(),
            "the clone has {at} as a link"
        );
        let shown = a.clone.join(&at).display().to_string();
        let add = format!("system={}", a.store.root.display());
        if name == "objects/zarr" {
            // `check_dot_dir` does not walk `objects/`: every command that
            // lists the manifests refuses the link as it meets it, and the
            // others (which read none) change nothing outside.
            let tags = a.store.tags();
            for args in COMMANDS {
                if MANIFEST_READERS.contains(args) {
                    a.refused(args, &[&shown, "symbolic link"]);
                } else {
                    a.untouched(args);
                }
            }
            assert_eq!(a.store.tags(), tags, "nothing was pinned");
            a.refused(
                &["add", "zarr/other", "--kind", "memory", "--set", &add],
                &[&shown, "symbolic link"],
            );
            let before = a.outside_digest();
            let out = a.tether(&["add", "other", "--kind", "memory", "--set", &add]);
            assert!(out.status.success(), "{}", describe(&out));
            assert_eq!(a.outside_digest(), before, "add wrote only its manifest");
            assert!(a.clone.join(".tether/objects/other.toml").is_file());
        } else {
            a.all_refused(&[&shown, "symbolic link"]);
            a.refused(
                &["add", "other", "--kind", "memory", "--set", &add],
                &[&shown],
            );
        }
    }
}

/// The per-checkout files as tracked links: `lock` to a file outside the
/// dataset (every writing command would truncate it), `workspace.toml` and
/// `ops.jsonl` likewise, and `secrets.toml` to a tracked file elsewhere in
/// the repository that names the attacker's jj. Each is refused naming the
/// link; the victim file keeps its bytes.
fn linked_files_in_dot_tether_are_refused(vcs: Vcs) {
    for name in ["lock", "workspace.toml", "ops.jsonl", "secrets.toml"] {
        let a = Attack::new(vcs);
        let at = format!(".tether/{name}");
        if name == "secrets.toml" {
            std::fs::write(a.src("hostile-secrets.toml"), a.hostile_secrets()).unwrap();
            link(&a, &at, Path::new("../hostile-secrets.toml"));
        } else {
            link(&a, &at, &a.outside.join("victim.txt"));
        }
        a.ship(&[&at]);
        assert!(
            a.clone.join(&at).is_symlink(),
            "the clone has {at} as a link"
        );
        let shown = a.clone.join(&at).display().to_string();
        a.all_refused(&[&shown, "symbolic link"]);
        assert_eq!(
            std::fs::read_to_string(a.outside.join("victim.txt")).unwrap(),
            "precious\n"
        );
    }
}

// ---- Tracked per-checkout files, by every route ----------------------------

/// Every per-checkout path committed as a plain tracked file (force-added,
/// as the `.gitignore` ignores them): refused naming each one, before
/// `secrets.toml`'s `jj_path` could run.
fn tracked_per_checkout_files_are_refused(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::write(a.src(".tether/secrets.toml"), a.hostile_secrets()).unwrap();
    std::fs::write(
        a.src(".tether/workspace.toml"),
        "workspace_id = \"00000000000000000000000000000000\"\nbookmark = \"main\"\n",
    )
    .unwrap();
    std::fs::write(a.src(".tether/ops.jsonl"), "").unwrap();
    std::fs::write(a.src(".tether/lock"), "").unwrap();
    std::fs::create_dir_all(a.src(".tether/cache")).unwrap();
    std::fs::write(a.src(".tether/cache/file-hashes.json"), "{}").unwrap();
    let paths = [
        ".tether/secrets.toml",
        ".tether/workspace.toml",
        ".tether/ops.jsonl",
        ".tether/lock",
        ".tether/cache/file-hashes.json",
    ];
    a.ship(&paths);
    let untrack = match vcs {
        Vcs::Git => "git rm -r --cached",
        _ => "jj file untrack",
    };
    a.all_refused(&[
        ".tether/secrets.toml",
        ".tether/workspace.toml",
        ".tether/ops.jsonl",
        ".tether/lock",
        ".tether/cache",
        "tracked by the VCS",
        untrack,
    ]);
    // The advice works: untrack them as it says, and tether runs (the files
    // the clone brought stay on disk, now this checkout's own).
    match vcs {
        Vcs::Git => {
            let mut args = vec!["rm", "-r", "-q", "--cached", "--"];
            args.extend(paths);
            a.vcs_in_clone(&args);
            a.vcs_in_clone(&["commit", "-q", "-m", "untrack"]);
        }
        _ => {
            let mut args = vec!["file", "untrack", "--"];
            args.extend(paths);
            a.vcs_in_clone(&args);
        }
    }
    // The clone's secrets.toml is now an untracked file: replace it with the
    // user's own before running again.
    std::fs::remove_file(a.clone.join(".tether/secrets.toml")).unwrap();
    let out = a.tether(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(!a.ran.exists());
}

/// A dataset in a subdirectory whose per-checkout file is tracked, run from
/// a linked path to it (`alias -> nested`): the VCS tracks the files under
/// `nested/`, and tether asks about them there, not under `alias/`.
fn tracked_files_reached_through_a_linked_directory_are_refused(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::create_dir_all(a.src("nested/.tether/objects")).unwrap();
    std::fs::copy(a.src("tether.toml"), a.src("nested/tether.toml")).unwrap();
    std::fs::write(a.src("nested/.tether/secrets.toml"), a.hostile_secrets()).unwrap();
    symlink("nested", a.src("alias")).unwrap();
    a.ship(&["nested/.tether/secrets.toml"]);
    let out = a.d.tether_in(&a.clone.join("alias"), &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("nested/.tether/secrets.toml"),
        "{}",
        describe(&out)
    );
    assert!(!a.ran.exists(), "the attacker's program ran");
}

// ---- Attack 4: a `.gitignore` that ignores nothing --------------------------

/// The clone's `.tether/.gitignore` ignores nothing. tether's own commits
/// still never take `secrets.toml`, `workspace.toml`, `ops.jsonl`, `lock` or
/// the cache. Under jj, once the user's own `jj` snapshot has tracked them,
/// tether refuses, and its advice works: add the ignore lines, `jj file
/// untrack`, and tether runs again.
fn a_gitignore_that_ignores_nothing_never_commits_per_checkout_files(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::write(a.src(".tether/.gitignore"), "# nothing\n").unwrap();
    a.ship(&[]);
    let secrets = a.clone.join(".tether/secrets.toml");
    std::fs::write(&secrets, "[plugins]\ntrusted = []\n").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ok = |args: &[&str]| {
        let out = a.tether(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "tether {args:?}:\n{}",
            describe(&out)
        );
    };
    ok(&["new", "main"]);
    ok(&["status", "--snapshot"]);
    a.store.write(json!({"labels": "1"}), "relabel");
    ok(&["commit", "-m", "relabel"]);
    a.store.write(json!({"labels": "2"}), "relabel again");
    ok(&["commit", "-m", "relabel again"]);
    for name in ["workspace.toml", "ops.jsonl", "lock", "secrets.toml"] {
        assert!(
            a.clone.join(".tether").join(name).is_file(),
            "{name} exists"
        );
    }
    let committed = a.paths_in_history();
    assert!(
        committed
            .iter()
            .any(|p| p == ".tether/objects/imaging.toml"),
        "{committed:?}"
    );
    for p in &committed {
        assert!(
            !tether::model::layout::is_per_checkout_path(p),
            "{p} was committed: {committed:?}"
        );
    }
    // The user's own VCS leaves them out too: tether keeps them ignored in
    // the repository's info/exclude, which no clone brings.
    let status = match vcs {
        Vcs::Git => a.vcs_in_clone(&["status", "--porcelain", "--untracked-files=all"]),
        _ => a.vcs_in_clone(&["status"]),
    };
    assert!(!status.contains(".tether/secrets.toml"), "{status}");
    assert!(!status.contains(".tether/lock"), "{status}");
    if vcs == Vcs::Git {
        a.vcs_in_clone(&["add", "-A"]);
        let staged = a.vcs_in_clone(&["diff", "--cached", "--name-only"]);
        assert!(!staged.contains(".tether/"), "{staged}");
    }
    ok(&["status"]);
    for p in a.paths_in_history() {
        assert!(
            !tether::model::layout::is_per_checkout_path(&p),
            "{p} was committed"
        );
    }
}

// ---- The security model's "It cannot" lines ---------------------------------

/// "Run a program": neither a tracked `secrets.toml` nor the committed
/// `tether.toml` can name the jj (or git) tether runs.
fn cannot_run_a_program(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::write(a.src(".tether/secrets.toml"), a.hostile_secrets()).unwrap();
    a.ship(&[".tether/secrets.toml"]);
    a.all_refused(&[".tether/secrets.toml", "tracked by the VCS"]);

    let b = Attack::new(vcs);
    let config = std::fs::read_to_string(b.src("tether.toml")).unwrap();
    let vcs_table = format!("[vcs]\njj_path = \"{}\"\n", b.evil_in_clone());
    std::fs::write(b.src("tether.toml"), config.replace("[vcs]\n", &vcs_table)).unwrap();
    b.ship(&[]);
    b.all_refused(&["vcs.jj_path", "may not be set in the committed tether.toml"]);
}

/// "Run git code through a `git` object": a committed manifest naming a git
/// repository inside the checkout (a real bare repository with a commit,
/// shipped as ordinary files, whose config names the attacker's program as
/// `core.fsmonitor` and which has a `post-checkout` hook) is never handed to
/// the plugin: every call for the object is refused naming the overlap, the
/// program never runs, and nothing in the checkout changes (no pin tag).
fn cannot_run_git_code_through_a_git_object(vcs: Vcs) {
    let a = Attack::new(vcs);
    let git = |at: &Path, args: &[&str]| {
        tether_testkit::run_ok(a.d.command("git", at).args(args));
    };
    let work = a.d.tmp().join("work");
    git(a.d.tmp(), &["init", "-q", "-b", "main", "work"]);
    std::fs::write(work.join("f"), "code\n").unwrap();
    git(&work, &["add", "f"]);
    git(&work, &["commit", "-q", "-m", "code"]);
    git(
        a.d.root().as_path(),
        &["init", "-q", "--bare", "-b", "main", "code"],
    );
    git(
        &work,
        &["push", "-q", a.src("code").to_str().unwrap(), "main"],
    );
    let code = a.src("code");
    let config = std::fs::read_to_string(code.join("config")).unwrap();
    std::fs::write(
        code.join("config"),
        format!("{config}[core]\n\tfsmonitor = {}\n", a.evil_in_clone()),
    )
    .unwrap();
    std::fs::copy(a.src("evil.sh"), code.join("hooks/post-checkout")).unwrap();
    let manifest = format!(
        "kind = \"git\"\n[locator]\npath = \"{}\"\n",
        a.clone.join("code").display()
    );
    std::fs::write(a.src(".tether/objects/code.toml"), manifest).unwrap();
    a.ship(&[]);
    assert!(
        a.clone.join("code/HEAD").is_file(),
        "the clone has the repository"
    );
    a.d.ok_in(&a.clone, &["new", "main"]);
    for args in [&["status", "--snapshot"][..], &["commit", "-m", "x"]] {
        let before = a.outside_digest();
        let out = a.tether(args);
        let what = format!("{args:?}: {}", describe(&out));
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert!(
            stderr(&out).contains("overlaps the dataset's checkout"),
            "{what}"
        );
        assert!(
            stderr(&out).contains(&a.clone.join("code").display().to_string()),
            "{what}"
        );
        assert_eq!(a.outside_digest(), before, "{what}");
        assert!(!a.ran.exists(), "the attacker's program ran: {what}");
    }
}

/// "Choose where writes go, or which pins `gc` releases": a tracked
/// `workspace.toml` sending the object's writes to the attacker's branch, and
/// a tracked op log claiming pins, are refused; no store ref moves.
fn cannot_choose_where_writes_go_or_which_pins_gc_releases(vcs: Vcs) {
    let a = Attack::new(vcs);
    std::fs::write(
        a.src(".tether/workspace.toml"),
        "workspace_id = \"00000000000000000000000000000000\"\nbookmark = \"main\"\n\
         [working_refs]\nimaging = \"attacker\"\n",
    )
    .unwrap();
    std::fs::write(
        a.src(".tether/ops.jsonl"),
        "{\"op_id\":\"x\",\"command\":\"commit\",\"pins\":[\"tether.0a1b2c3d.deadbeef\"]}\n",
    )
    .unwrap();
    a.ship(&[".tether/workspace.toml", ".tether/ops.jsonl"]);
    let branches = a.store.branches();
    a.all_refused(&[
        ".tether/workspace.toml",
        ".tether/ops.jsonl",
        "tracked by the VCS",
    ]);
    assert_eq!(a.store.branches(), branches);
}

/// "Send your credentials somewhere": endpoints in the committed
/// `tether.toml` are refused, naming the key and where it belongs.
fn cannot_send_credentials_somewhere(vcs: Vcs) {
    for (table, key) in [
        (
            "[backends.file.storage_options]\nendpoint = \"http://attacker.invalid\"",
            "backends.file.storage_options.endpoint",
        ),
        (
            "[backends.icechunk]\nendpoint_url = \"http://attacker.invalid\"",
            "backends.icechunk.endpoint_url",
        ),
    ] {
        let a = Attack::new(vcs);
        let config = std::fs::read_to_string(a.src("tether.toml")).unwrap();
        std::fs::write(a.src("tether.toml"), format!("{config}\n{table}\n")).unwrap();
        a.ship(&[]);
        a.all_refused(&[key, ".tether/secrets.toml"]);
    }
}

/// "Run SQL": an import query or DuckLake `init_sql` in the committed
/// `tether.toml` is refused.
fn cannot_run_sql(vcs: Vcs) {
    for (table, key) in [
        ("[import]\nquery = \"SELECT 1\"", "import.query"),
        (
            "[backends.ducklake]\ninit_sql = [\"INSTALL evil\"]",
            "backends.ducklake.init_sql",
        ),
    ] {
        let a = Attack::new(vcs);
        let config = std::fs::read_to_string(a.src("tether.toml")).unwrap();
        std::fs::write(a.src("tether.toml"), format!("{config}\n{table}\n")).unwrap();
        a.ship(&[]);
        a.all_refused(&[key, "may not be set in the committed tether.toml"]);
    }
}

/// "Push your code": a committed git object whose `remote` is a URL, not a
/// remote the repository has, is refused, and nothing is pushed there.
fn cannot_push_your_code(vcs: Vcs) {
    let a = Attack::new(vcs);
    let code = a.d.tmp().join("code");
    let git = |at: &Path, args: &[&str]| {
        tether_testkit::run_ok(a.d.command("git", at).args(args));
    };
    git(a.d.tmp(), &["init", "-q", "-b", "main", "code"]);
    std::fs::write(code.join("f"), "mine\n").unwrap();
    git(&code, &["add", "f"]);
    git(&code, &["commit", "-q", "-m", "code"]);
    git(a.d.tmp(), &["init", "-q", "--bare", "drop.git"]);
    let drop = a.d.tmp().join("drop.git");
    let manifest = format!(
        "kind = \"git\"\n[locator]\npath = \"{}\"\nremote = \"file://{}\"\n",
        code.display(),
        drop.display()
    );
    std::fs::write(a.src(".tether/objects/code.toml"), manifest).unwrap();
    a.ship(&[]);
    a.d.ok_in(&a.clone, &["new", "main"]);
    let out = a.tether(&["commit", "-m", "x"]);
    assert_ne!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        stderr(&out).contains("must be the name of a remote"),
        "{}",
        describe(&out)
    );
    let pushed = std::process::Command::new("git")
        .args(["--git-dir"])
        .arg(&drop)
        .args(["for-each-ref"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&pushed),
        "",
        "nothing was pushed to the attacker's remote"
    );
    assert!(!a.ran.exists());
}

/// "Write outside `.tether/`": a manifest whose file name holds a backslash
/// or a drive letter is refused when read (links are the other route,
/// covered above).
fn cannot_write_outside_dot_tether(vcs: Vcs) {
    for (dir, file) in [("", "up\\..\\..\\x.toml"), ("C:", "x.toml")] {
        let a = Attack::new(vcs);
        let objects = a.src(".tether/objects");
        let manifest = std::fs::read(objects.join("imaging.toml")).unwrap();
        std::fs::create_dir_all(objects.join(dir)).unwrap();
        std::fs::write(objects.join(dir).join(file), manifest).unwrap();
        a.ship(&[]);
        for args in [&["status"][..], &["new", "main"], &["verify"]] {
            a.refused(args, &["invalid object key"]);
        }
    }
}

for_each_vcs!(colocated:
    a_linked_dot_tether_is_refused,
    linked_directories_in_dot_tether_are_refused,
    linked_files_in_dot_tether_are_refused,
    tracked_per_checkout_files_are_refused,
    tracked_files_reached_through_a_linked_directory_are_refused,
    a_gitignore_that_ignores_nothing_never_commits_per_checkout_files,
    cannot_run_a_program,
    cannot_run_git_code_through_a_git_object,
    cannot_choose_where_writes_go_or_which_pins_gc_releases,
    cannot_send_credentials_somewhere,
    cannot_run_sql,
    cannot_push_your_code,
    cannot_write_outside_dot_tether,
);
