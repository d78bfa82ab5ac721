//! The `git` plugin through the host, checked with the git CLI: pins are tags
//! `git tag -l` lists, forks are branches, promote fast-forwards the checked-out
//! branch and its files, merge writes a real merge commit, a conflicting merge
//! leaves the repository byte for byte as it was, `git fsck` stays clean, and
//! `tether add --kind git` / `commit` / `diff --content` work end to end.
//! With `remote`, pins are pushed to a remote on this machine and released
//! there first; a jj commit's change id is the volatile `change_id`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::support::{Dataset, describe, lines};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tether::plugin::{
    BackendError, Expected, ObjectClient, Plugin, Runtime, RuntimeConfig, Target,
};
use tether_testkit::{block_on, cache_dir, first_party_plugin};

async fn plugin() -> Arc<Plugin> {
    let rt = Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    rt.load_file(&first_party_plugin("tether_plugin_git"))
        .await
        .expect("load the git plugin")
}

/// A code repository made with the git CLI, with a private identity.
struct Code {
    _tmp: tempfile::TempDir,
    path: PathBuf,
    home: PathBuf,
}

impl Code {
    fn new() -> Code {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Code Test\n\temail = code@tether.invalid\n[commit]\n\tgpgsign = false\n",
        )
        .unwrap();
        let path = tmp.path().join("code");
        let code = Code {
            path,
            home,
            _tmp: tmp,
        };
        code.git_in(
            code.path.parent().unwrap(),
            &["init", "-q", "-b", "main", "code"],
        );
        code.write("main.py", "print('a')\nprint('b')\n");
        code.commit_all("first");
        code
    }

    fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_GLOBAL", self.home.join(".gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(args)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {}: {}",
            args.join(" "),
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.path, args)
    }

    fn rev(&self, rev: &str) -> String {
        self.git(&["rev-parse", rev]).trim().to_string()
    }

    fn write(&self, file: &str, content: &str) {
        std::fs::write(self.path.join(file), content).unwrap();
    }

    fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.rev("HEAD")
    }

    /// Commit `file` = `content` on `branch` without touching the checkout
    /// (plumbing, as a second clone pushing would).
    fn commit_on(&self, branch: &str, file: &str, content: &str, message: &str) -> String {
        let parent = self.rev(branch);
        let index = self.path.join(".git/tmp-index");
        let run = |args: &[&str], stdin: Option<&str>| -> String {
            let mut c = Command::new("git");
            c.current_dir(&self.path)
                .env("HOME", &self.home)
                .env("GIT_CONFIG_GLOBAL", self.home.join(".gitconfig"))
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_INDEX_FILE", &index)
                .args(args);
            let out = if let Some(input) = stdin {
                use std::io::Write;
                c.stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let mut child = c.spawn().unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
                child.wait_with_output().unwrap()
            } else {
                c.output().unwrap()
            };
            assert!(
                out.status.success(),
                "git {}: {}",
                args.join(" "),
                describe(&out)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        run(&["read-tree", &parent], None);
        let blob = run(&["hash-object", "-w", "--stdin"], Some(content));
        run(
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{blob},{file}"),
            ],
            None,
        );
        let tree = run(&["write-tree"], None);
        let commit = run(&["commit-tree", &tree, "-p", &parent, "-m", message], None);
        run(
            &[
                "update-ref",
                &format!("refs/heads/{branch}"),
                &commit,
                &parent,
            ],
            None,
        );
        std::fs::remove_file(&index).unwrap();
        commit
    }

    fn locator(&self) -> Value {
        json!({ "path": self.path.to_str().unwrap() })
    }

    fn fsck_clean(&self) {
        let out = self.git(&["fsck", "--strict", "--no-dangling"]);
        assert_eq!(out.trim(), "", "git fsck reports problems");
    }

    fn status(&self) -> String {
        self.git(&["status", "--porcelain"])
    }
}

/// sha256 over every file under `dir` (paths and bytes), for "nothing changed".
fn hash_tree(dir: &Path) -> String {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if meta.is_dir() {
                out.push((format!("{rel}/"), Vec::new()));
                walk(base, &path, out);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for (p, bytes) in files {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(&bytes);
        h.update([0]);
    }
    hex::encode(h.finalize())
}

fn sha(state: &Value) -> String {
    state["sha"].as_str().expect("a sha").to_string()
}

async fn client(code: &Code) -> ObjectClient {
    plugin().await.object(&code.locator(), &json!({}))
}

#[test]
fn the_plugin_gets_the_repository_as_its_filesystem_and_nothing_else() {
    block_on(async {
        let p = plugin().await;
        assert_eq!(p.filesystem_keys(), ["path", "uri", "remote"]);
        let d = p.descriptor();
        assert_eq!(d.kind, "git");
        for cap in [
            "CHEAP_FINGERPRINT",
            "ATOMIC_REF",
            "CONDITIONAL_REF",
            "DIFF",
            "HISTORY",
            "PROMOTE",
            "MERGE",
            "CREATE",
        ] {
            assert!(d.capabilities.iter().any(|c| c == cap), "{cap}");
        }
        assert_eq!(d.volatile_keys, ["dirty", "change_id"]);
    });
}

#[test]
fn pin_fork_promote_and_merge_are_what_git_sees() {
    block_on(async {
        let code = Code::new();
        let obj = client(&code).await;
        let first = code.rev("HEAD");

        // Fingerprint: the checked-out branch, clean.
        let state = obj.fingerprint(None).await.expect("fingerprint");
        assert_eq!(state, json!({"sha": first, "dirty": false}));

        // Pin: a lightweight tag git lists, at the commit.
        let pin = obj.pin(&state, "ds1.abc").await.expect("pin");
        assert_eq!(pin.ref_name, "tether.ds1.abc");
        assert!(pin.created);
        assert_eq!(
            code.git(&["tag", "-l", "tether.*"]).trim(),
            "tether.ds1.abc"
        );
        assert_eq!(
            code.git(&["cat-file", "-t", "tether.ds1.abc"]).trim(),
            "commit"
        );
        assert_eq!(code.rev("tether.ds1.abc"), first);
        assert!(
            !obj.pin(&state, "ds1.abc").await.unwrap().created,
            "idempotent"
        );

        // Fork: a branch at the pin's commit; `main` itself and a checked-out
        // branch are refused.
        let fork = "tether.ws.ds1.feature";
        obj.fork(&Target::Pinned(pin.clone()), fork, &Expected::Absent)
            .await
            .expect("fork");
        assert_eq!(code.rev(fork), first);
        let branches = code.git(&["branch", "--format=%(refname:short)"]);
        assert_eq!(lines(&branches), ["main", fork]);
        let refused = obj
            .fork(
                &Target::Pinned(pin.clone()),
                "main",
                &Expected::Unconditional,
            )
            .await
            .expect_err("forking onto the checked-out base");
        assert!(refused.to_string().contains("main"), "{refused}");

        // A commit on the fork, then promote: main fast-forwards, and its
        // checkout follows (files and index), so git status stays clean.
        let on_fork = code.commit_on(fork, "main.py", "print('a')\nprint('B')\n", "fix b");
        let promoted = obj
            .promote(
                &Target::WorkingRef(fork.into()),
                &Expected::At(json!({"sha": first})),
            )
            .await
            .expect("promote");
        assert_eq!(sha(&promoted), on_fork);
        assert_eq!(code.rev("main"), on_fork);
        assert_eq!(
            std::fs::read_to_string(code.path.join("main.py")).unwrap(),
            "print('a')\nprint('B')\n"
        );
        assert_eq!(code.status(), "", "the checkout follows the promote");

        // A stale expected head is refused and moves nothing.
        let stale = obj
            .promote(
                &Target::WorkingRef(fork.into()),
                &Expected::At(json!({"sha": first})),
            )
            .await
            .expect_err("stale expected");
        assert!(matches!(stale, BackendError::RefMoved(_)), "{stale:?}");

        // Diverge: one commit on main (in the checkout), one on the fork.
        code.write("notes.txt", "main side\n");
        let on_main = code.commit_all("main side");
        let theirs = code.commit_on(fork, "other.txt", "fork side\n", "fork side");
        // Promote cannot fast-forward; merge writes a merge commit.
        let refused = obj
            .promote(&Target::WorkingRef(fork.into()), &Expected::Unconditional)
            .await
            .expect_err("promote of a diverged fork");
        assert!(
            refused.to_string().contains("--strategy merge"),
            "{refused}"
        );
        let merged = obj
            .merge(
                &Target::WorkingRef(fork.into()),
                "Merge the feature",
                &Expected::At(json!({"sha": on_main})),
            )
            .await
            .expect("merge");
        let merge_sha = sha(&merged);
        assert_eq!(code.rev("main"), merge_sha);
        let parents = code.git(&["log", "-1", "--format=%P", "main"]);
        assert_eq!(parents.trim(), format!("{on_main} {theirs}"));
        assert_eq!(
            code.git(&["log", "-1", "--format=%s", "main"]).trim(),
            "Merge the feature"
        );
        assert_eq!(
            std::fs::read_to_string(code.path.join("other.txt")).unwrap(),
            "fork side\n"
        );
        assert_eq!(
            std::fs::read_to_string(code.path.join("notes.txt")).unwrap(),
            "main side\n"
        );
        assert_eq!(code.status(), "", "the checkout follows the merge");
        // The two sides run side by side into the merge, over one line of history.
        let graph = code.git(&["log", "--graph", "--format=%s", "main"]);
        let graph_lines: Vec<String> = lines(&graph)
            .iter()
            .map(|l| l.trim_end().to_string())
            .collect();
        assert_eq!(graph_lines[0], "*   Merge the feature", "{graph}");
        assert_eq!(graph_lines[1], "|\\", "{graph}");
        for side in ["fork side", "main side"] {
            assert!(
                graph_lines[2..4]
                    .iter()
                    .any(|l| l.ends_with(side) && l.contains('|')),
                "{side} is on one of two parallel lines:\n{graph}"
            );
        }
        assert_eq!(graph_lines[4..], ["|/", "* fix b", "* first"], "{graph}");
        code.fsck_clean();

        // History: newest first, decorated like git log.
        let history = obj.history(None, 3).await.expect("history");
        assert_eq!(history[0].id, merge_sha);
        assert!(
            history[0].refs.iter().any(|r| r == "HEAD -> main"),
            "{:?}",
            history[0]
        );
        assert_eq!(history[0].message, "Merge the feature");
        let tagged = obj.history(Some("tether.ds1.abc"), 1).await.unwrap();
        assert!(
            tagged[0].refs.iter().any(|r| r == "tag: tether.ds1.abc"),
            "{tagged:?}"
        );

        // Unpin deletes the tag; delete-working-ref the branch.
        obj.unpin(&pin).await.expect("unpin");
        assert_eq!(code.git(&["tag", "-l", "tether.*"]).trim(), "");
        obj.delete_working_ref(fork).await.expect("delete fork");
        assert_eq!(
            lines(&code.git(&["branch", "--format=%(refname:short)"])),
            ["main"]
        );
        code.fsck_clean();
    });
}

#[test]
fn a_conflicting_merge_names_the_paths_and_leaves_the_repository_byte_for_byte() {
    block_on(async {
        let code = Code::new();
        let obj = client(&code).await;
        let base = obj.fingerprint(None).await.unwrap();
        let fork = "tether.ws.ds1.clash";
        obj.fork(&Target::Recorded(base.clone()), fork, &Expected::Absent)
            .await
            .unwrap();
        code.commit_on(fork, "main.py", "print('fork')\n", "fork edit");
        code.write("main.py", "print('main')\n");
        code.commit_all("main edit");
        let before = hash_tree(&code.path);
        let err = obj
            .merge(
                &Target::WorkingRef(fork.into()),
                "merge",
                &Expected::Unconditional,
            )
            .await
            .expect_err("a conflicting merge");
        match err {
            BackendError::MergeConflict(paths) => assert_eq!(paths, ["main.py"]),
            other => panic!("expected a merge conflict, got {other:?}"),
        }
        assert_eq!(
            hash_tree(&code.path),
            before,
            "nothing in the repository changed"
        );
        code.fsck_clean();
    });
}

#[test]
fn dirty_checkouts_and_detached_heads_are_refused_as_the_spec_says() {
    block_on(async {
        let code = Code::new();
        let obj = client(&code).await;
        code.write("scratch.txt", "untracked\n");
        let state = obj.fingerprint(None).await.unwrap();
        assert_eq!(state["dirty"], json!(true));
        let err = obj.pin(&state, "ds1.dirty").await.expect_err("dirty pin");
        assert!(err.to_string().contains("allow_dirty"), "{err}");
        assert!(err.to_string().contains("scratch.txt"), "{err}");
        // Ignored files are not dirt.
        code.write(".gitignore", "scratch.txt\n");
        code.commit_all("ignore scratch");
        assert_eq!(obj.fingerprint(None).await.unwrap()["dirty"], json!(false));
        // allow_dirty pins the last commit anyway.
        code.write("main.py", "changed\n");
        let mut loc = code.locator();
        loc["allow_dirty"] = json!(true);
        let lenient = plugin().await.object(&loc, &json!({}));
        let state = lenient.fingerprint(None).await.unwrap();
        assert_eq!(state["dirty"], json!(true));
        lenient
            .pin(&state, "ds1.lenient")
            .await
            .expect("allow_dirty pins");
        assert_eq!(code.rev("tether.ds1.lenient"), code.rev("HEAD"));
        code.git(&["checkout", "-q", "main.py"]);

        // A detached HEAD: promote and merge have no branch to move.
        let head = code.rev("HEAD");
        code.git(&["checkout", "-q", "--detach"]);
        let state = obj.fingerprint(None).await.unwrap();
        assert_eq!(sha(&state), head);
        for err in [
            obj.promote(&Target::Recorded(state.clone()), &Expected::Unconditional)
                .await
                .expect_err("promote on a detached HEAD"),
            obj.merge(
                &Target::Recorded(state.clone()),
                "m",
                &Expected::Unconditional,
            )
            .await
            .expect_err("merge on a detached HEAD"),
        ] {
            let m = err.to_string();
            assert!(
                m.contains("detached") && m.contains("set the locator's `ref` to the branch name"),
                "{m}"
            );
        }
        // With `ref` naming the branch, it works.
        let mut loc = code.locator();
        loc["ref"] = json!("main");
        let named = plugin().await.object(&loc, &json!({}));
        named
            .promote(&Target::Recorded(state), &Expected::Unconditional)
            .await
            .expect("promote onto a named branch");
        code.fsck_clean();
    });
}

#[test]
fn create_makes_the_same_root_commit_every_time_with_the_owner_in_git_config() {
    block_on(async {
        let p = plugin().await;
        let tmp = tempfile::tempdir().unwrap();
        let mut roots = Vec::new();
        for name in ["one", "two"] {
            let path = tmp.path().join(name);
            let obj = p.object(&json!({"path": path.to_str().unwrap()}), &json!({}));
            let state = obj.create("ds-owner").await.expect("create");
            let git = |args: &[&str]| {
                tether_testkit::run_ok(Command::new("git").current_dir(&path).args(args))
                    .trim()
                    .to_string()
            };
            assert_eq!(git(&["rev-parse", "HEAD"]), sha(&state));
            assert_eq!(git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
            assert_eq!(git(&["config", "tether.owner"]), "ds-owner");
            assert_eq!(
                git(&["log", "--format=%an <%ae> %aI|%s"]),
                "tether <tether@localhost> 2000-01-01T00:00:00Z|tether: empty root"
            );
            assert_eq!(git(&["status", "--porcelain"]), "");
            assert_eq!(git(&["fsck", "--strict", "--no-dangling"]), "");
            assert_eq!(obj.owner().await.unwrap().as_deref(), Some("ds-owner"));
            assert_eq!(obj.is_ref_empty(&[]).await.unwrap(), Some(true));
            let err = obj.create("ds-owner").await.expect_err("a second create");
            assert!(err.to_string().contains("not empty"), "{err}");
            roots.push(sha(&state));
            obj.delete_store("ds-owner").await.expect("delete_store");
            assert!(!path.exists());
        }
        assert_eq!(roots[0], roots[1], "the same root sha every time");
    });
}

/// The code story of spec/06: `tether add code --kind git ../code`, commit
/// (the pin is a tag git lists), a bookmark, a code commit on its fork,
/// commit, `diff --content` with line counts, promote (main fast-forwards in
/// the code repository and its checkout follows).
#[test]
fn the_code_story_add_commit_bookmark_diff_and_promote() {
    let d = Dataset::init();
    let code = d.tmp().join("code");
    let git = |args: &[&str]| -> String {
        let out = d.command("git", &code).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {}: {}",
            args.join(" "),
            describe(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out = d
        .command("git", d.tmp())
        .args(["init", "-q", "-b", "main", "code"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    std::fs::write(code.join("main.py"), "x = 1\nprint(x)\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "analysis"]);

    assert_eq!(
        d.ok(&["add", "code", "--kind", "git", "../code"]),
        "added code [git]\n"
    );
    let locator = &d.manifest("code")["locator"];
    assert_eq!(
        locator["uri"].as_str(),
        Some(code.canonicalize().unwrap().to_str().unwrap()),
        "stored absolute"
    );
    let out = d.ok(&["commit", "-m", "with code"]);
    let c1 = d.rev("HEAD");
    let tags = lines(&git(&["tag", "-l", "tether.*"]));
    assert_eq!(tags.len(), 1, "{out}");
    assert!(
        out.contains(&format!("pinned code -> {}", tags[0])),
        "{out}"
    );
    assert_eq!(git(&["rev-parse", &tags[0]]), git(&["rev-parse", "HEAD"]));

    // A bookmark: the code's fork is a branch at the pinned sha.
    let wr = d.working_ref("relabel");
    let out = d.ok(&["new", "-b", "relabel", "--eager"]);
    assert!(out.contains(&format!("code -> {wr}")), "{out}");
    assert_eq!(git(&["rev-parse", &wr]), git(&["rev-parse", &tags[0]]));
    assert_eq!(
        lines(&git(&["branch", "--format=%(refname:short)"])),
        ["main".to_string(), wr.clone()]
    );

    // A code commit on the fork, then a dataset commit pins it.
    git(&["checkout", "-q", &wr]);
    std::fs::write(code.join("main.py"), "x = 2\nprint(x)\n").unwrap();
    git(&["commit", "-q", "-am", "x = 2"]);
    let fork_head = git(&["rev-parse", "HEAD"]);
    git(&["checkout", "-q", "main"]);
    let out = d.ok(&["commit", "-m", "relabel code"]);
    assert!(out.contains("pinned code -> "), "{out}");
    let c2 = d.rev("HEAD");
    let tags = lines(&git(&["tag", "-l", "tether.*"]));
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert!(
        tags.iter().any(|t| git(&["rev-parse", t]) == fork_head),
        "the new pin is at the fork's head: {tags:?}"
    );

    let diff = d.ok(&["diff", &c1[..12], &c2[..12], "--content"]);
    let ls = lines(&diff);
    assert!(
        ls.iter()
            .any(|l| l.starts_with("changed code") && l.contains("~1 files")),
        "{diff}"
    );
    assert!(
        ls.iter().any(|l| l.trim() == "modified main.py +1 -1"),
        "{diff}"
    );

    // Promote: main fast-forwards to the fork in the code repository, and
    // the checkout (on main) follows.
    let out = d.ok(&["promote"]);
    assert!(out.contains("code"), "{out}");
    assert_eq!(git(&["rev-parse", "main"]), fork_head);
    assert_eq!(
        std::fs::read_to_string(code.join("main.py")).unwrap(),
        "x = 2\nprint(x)\n"
    );
    assert_eq!(git(&["status", "--porcelain"]), "");
    assert_eq!(
        lines(&git(&["log", "--graph", "--format=%s", "main"])),
        ["* x = 2", "* analysis"]
    );
    assert_eq!(git(&["fsck", "--strict", "--no-dangling"]), "");
}

/// spec/10, "Security model": a `git` object's path must be outside the
/// dataset's checkout; the repository the dataset lives in, a directory in
/// it, or one that contains it are refused at `add`, and nothing is written.
#[test]
fn the_datasets_own_checkout_is_refused_as_a_git_object() {
    let d = Dataset::init();
    let before = d.written();
    for target in [".", "sub", ".."] {
        std::fs::create_dir_all(d.root().join("sub")).unwrap();
        let out = d.tether(&["add", "code", "--kind", "git", target]);
        assert_eq!(out.status.code(), Some(1), "{target}: {}", describe(&out));
        let err = crate::support::stderr(&out);
        assert!(err.contains("overlaps the dataset's checkout"), "{err}");
    }
    assert_eq!(d.written(), before);
}

/// A code repository for the end-to-end tests, made with the dataset's own
/// git environment at `<tmp>/<name>`, with one commit.
fn code_repo(d: &Dataset, name: &str) -> PathBuf {
    let code = d.tmp().join(name);
    git_ok(d, d.tmp(), &["init", "-q", "-b", "main", name]);
    std::fs::write(code.join("main.py"), "x = 1\nprint(x)\n").unwrap();
    git_ok(d, &code, &["add", "-A"]);
    git_ok(d, &code, &["commit", "-q", "-m", "analysis"]);
    code
}

/// `git ARGS` in `dir` with the dataset's environment; stdout, trimmed.
fn git_ok(d: &Dataset, dir: &Path, args: &[&str]) -> String {
    tether_testkit::run_ok(d.command("git", dir).args(args))
        .trim()
        .to_string()
}

/// The `tether.*` tags of the repository at `dir`.
fn pin_tags(d: &Dataset, dir: &Path) -> Vec<String> {
    lines(&git_ok(d, dir, &["tag", "-l", "tether.*"]))
}

/// The tag a dataset commit reports for `key` (`pinned KEY -> TAG`).
fn pinned_tag(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("pinned {key} -> ")))
        .unwrap_or_else(|| panic!("the commit pins {key}:\n{out}"))
        .trim()
        .to_string()
}

/// `.tether/secrets.toml` with `text`, readable by its owner only.
fn write_secrets(d: &Dataset, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = d.root().join(".tether/secrets.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// spec/11, `git`, "Pin": with `remote = "origin"` (a bare repository on this
/// machine), `commit` pushes the pin's tag and every object it needs (the
/// remote passes `git fsck --full`, and a clone of it checks the tag out);
/// a second pin copies only what the remote lacks; `gc` releases a pin on the
/// remote and locally.
#[test]
fn pins_are_pushed_to_a_local_remote_and_released_there_too() {
    let d = Dataset::init();
    let code = code_repo(&d, "code");
    std::fs::create_dir_all(code.join("lib")).unwrap();
    std::fs::write(code.join("lib/util.py"), "def f():\n    pass\n").unwrap();
    git_ok(&d, &code, &["add", "-A"]);
    git_ok(&d, &code, &["commit", "-q", "-m", "util"]);
    let remote = d.tmp().join("remote.git");
    git_ok(&d, d.tmp(), &["init", "-q", "--bare", "remote.git"]);
    git_ok(
        &d,
        &code,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );

    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);
    assert_eq!(
        d.manifest("code")["locator"]["remote"].as_str(),
        Some("origin")
    );
    let first = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    assert_eq!(pin_tags(&d, &code), [first.as_str()]);
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "pushed");
    let head = git_ok(&d, &code, &["rev-parse", "HEAD"]);
    assert_eq!(git_ok(&d, &remote, &["rev-parse", &first]), head);
    assert_eq!(git_ok(&d, &remote, &["fsck", "--full", "--strict"]), "");
    let count = |s: &str| -> u64 { s.split_whitespace().next().unwrap().parse().unwrap() };
    assert_eq!(
        count(&git_ok(&d, &remote, &["count-objects"])),
        7,
        "two commits, two root trees, lib/, main.py and util.py: all of them, nothing else"
    );

    // A clone of the remote checks the pinned code out.
    git_ok(
        &d,
        d.tmp(),
        &["clone", "-q", remote.to_str().unwrap(), "cloned"],
    );
    let cloned = d.tmp().join("cloned");
    git_ok(&d, &cloned, &["checkout", "-q", &first]);
    assert_eq!(
        std::fs::read_to_string(cloned.join("main.py")).unwrap(),
        "x = 1\nprint(x)\n"
    );
    assert_eq!(
        std::fs::read_to_string(cloned.join("lib/util.py")).unwrap(),
        "def f():\n    pass\n"
    );

    // A pin is a pin where it was pushed: its tag gone from the remote is
    // `missing` for verify, and repair pushes it again.
    git_ok(&d, &remote, &["tag", "-d", &first]);
    let out = d.fails(&["verify"], 1);
    let text = crate::support::stdout(&out);
    assert!(text.contains("missing"), "{text}");
    assert!(text.contains("remote origin"), "{text}");
    d.ok(&["repair"]);
    assert_eq!(pin_tags(&d, &remote), [first.as_str()], "pushed again");
    assert!(d.ok(&["verify"]).contains("ok"));

    // A second code commit: only what the remote lacks is copied.
    let objects_before = git_ok(&d, &remote, &["count-objects"]);
    std::fs::write(code.join("main.py"), "x = 2\nprint(x)\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 2"]);
    let second = pinned_tag(&d.ok(&["commit", "-m", "code x = 2"]), "code");
    assert_eq!(
        git_ok(&d, &remote, &["rev-parse", &second]),
        git_ok(&d, &code, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        count(&git_ok(&d, &remote, &["count-objects"])) - count(&objects_before),
        3,
        "a commit, its tree and the changed blob"
    );
    assert_eq!(git_ok(&d, &remote, &["fsck", "--full", "--strict"]), "");

    // gc releases the second pin (no commit names it), on the remote first:
    // while the remote's tag is locked (a git pushing there), nothing is
    // released and the local tag stays.
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let lock = remote.join(format!("refs/tags/{second}.lock"));
    std::fs::write(&lock, "").unwrap();
    let out = d.fails(&["gc", "--no-dry-run"], 1);
    let err = crate::support::stderr(&out) + &crate::support::stdout(&out);
    assert!(err.contains("local tag is kept"), "{err}");
    assert_eq!(pin_tags(&d, &code).len(), 2);
    assert_eq!(pin_tags(&d, &remote).len(), 2);
    std::fs::remove_file(&lock).unwrap();
    // Then it goes on both sides; its commit stays in the remote, dangling,
    // as after `git push --delete`.
    let out = d.ok(&["gc", "--no-dry-run"]);
    assert!(
        out.contains(second.strip_prefix("tether.").unwrap()),
        "{out}"
    );
    assert_eq!(pin_tags(&d, &remote), [first.as_str()]);
    assert_eq!(pin_tags(&d, &code), [first]);
    assert_eq!(
        git_ok(
            &d,
            &remote,
            &["fsck", "--full", "--strict", "--no-dangling"]
        ),
        ""
    );
}

/// A push that fails fails the pin: the remote already holds the pin's tag
/// at another commit, so `commit` fails, no local tag is left, the manifest
/// is as it was, and the remote's tag is untouched.
#[test]
fn a_failed_push_fails_the_pin_and_leaves_no_local_tag() {
    let d = Dataset::init();
    let code = code_repo(&d, "code");
    let first = git_ok(&d, &code, &["rev-parse", "HEAD"]);
    std::fs::write(code.join("main.py"), "x = 2\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "second"]);
    let head = git_ok(&d, &code, &["rev-parse", "HEAD"]);
    git_ok(&d, d.tmp(), &["init", "-q", "--bare", "remote.git"]);
    let remote = d.tmp().join("remote.git");
    git_ok(
        &d,
        &code,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    d.ok(&[
        "add", "code", "--kind", "git", "../code", "--remote", "origin",
    ]);

    // The tag this commit will cut, taken in the remote at another commit.
    let path = code.canonicalize().unwrap();
    let pin_id = tether::model::ids::pin_id(
        &d.dataset_id(),
        "git",
        &json!({"path": path.to_str().unwrap()}),
        &json!({"sha": head}),
    );
    let tag = format!("tether.{pin_id}");
    git_ok(
        &d,
        &code,
        &["push", "-q", "origin", &format!("{first}:refs/tags/{tag}")],
    );
    let manifest_before = d.manifest("code");

    let out = d.fails(&["commit", "-m", "with code"], 1);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains(&tag) && err.contains("not pushed") && err.contains("remote origin"),
        "{err}"
    );
    assert_eq!(pin_tags(&d, &code), Vec::<String>::new(), "no local tag");
    assert_eq!(git_ok(&d, &remote, &["rev-parse", &tag]), first);
    assert_eq!(d.manifest("code"), manifest_before);
}

/// spec/10, "Security model": `remote` names a remote the repository already
/// has. An unconfigured name, a URL in the locator, and a remote inside the
/// dataset's checkout are refused at `add` (exit 1), and nothing is written.
/// (Network remotes, named or from secrets.toml, are pushed to by the host:
/// `git_remote.rs`.)
#[test]
fn remotes_tether_cannot_push_to_are_refused_at_add() {
    let d = Dataset::init();
    let code = code_repo(&d, "code");
    git_ok(&d, &d.root(), &["init", "-q", "--bare", "inside.git"]);
    git_ok(
        &d,
        &code,
        &[
            "remote",
            "add",
            "inside",
            d.root().join("inside.git").to_str().unwrap(),
        ],
    );
    // The first refused `add` leaves `.tether/lock` behind, as any would.
    let _ = d.tether(&[
        "add", "code", "--kind", "git", "../code", "--remote", "upstream",
    ]);
    let before = d.written();
    let refused = |args: &[&str], expect: &[&str]| {
        let mut all = vec!["add", "code", "--kind", "git", "../code"];
        all.extend_from_slice(args);
        let out = d.fails(&all, 1);
        let err = crate::support::stderr(&out);
        for e in expect {
            assert!(err.contains(e), "{args:?}: {e:?} not in {err}");
        }
        assert_eq!(d.written(), before, "{args:?} wrote something");
    };
    refused(
        &["--remote", "upstream"],
        &["no remote named \"upstream\"", "git remote add upstream"],
    );
    refused(
        &["--remote", "https://example.invalid/lab/code.git"],
        &["must be the name of a remote", "secrets.toml"],
    );
    refused(
        &["--remote", "inside"],
        &["overlaps the dataset's checkout"],
    );
}

/// A path only `.tether/secrets.toml` gives (`[objects."code"] remote`), here
/// a non-bare repository: pins go there, and `gc` releases them there.
#[test]
fn a_remote_path_from_secrets_toml_gets_the_pins() {
    let d = Dataset::init();
    let code = code_repo(&d, "code");
    git_ok(&d, d.tmp(), &["init", "-q", "-b", "main", "mirror"]);
    let mirror = d.tmp().join("mirror");
    write_secrets(
        &d,
        &format!(
            "[objects.\"code\"]\nremote = \"file://{}\"\n",
            mirror.display()
        ),
    );
    d.ok(&["add", "code", "--kind", "git", "../code"]);
    assert!(
        d.manifest("code")["locator"].get("remote").is_none(),
        "the path stays out of the committed locator"
    );
    let tag = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    assert_eq!(pin_tags(&d, &mirror), [tag.as_str()]);
    assert_eq!(
        git_ok(&d, &mirror, &["rev-parse", &tag]),
        git_ok(&d, &code, &["rev-parse", "HEAD"])
    );
    assert_eq!(git_ok(&d, &mirror, &["fsck", "--full", "--strict"]), "");

    std::fs::write(code.join("main.py"), "x = 3\n").unwrap();
    git_ok(&d, &code, &["commit", "-q", "-am", "x = 3"]);
    let second = pinned_tag(&d.ok(&["commit", "-m", "x = 3"]), "code");
    assert_eq!(pin_tags(&d, &mirror).len(), 2);
    d.git(&["reset", "-q", "--hard", "HEAD~1"]);
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(pin_tags(&d, &mirror), [tag.as_str()], "{second} released");
    assert_eq!(pin_tags(&d, &code), [tag]);
}

/// spec/11, `git`, "State": a commit jj made carries its change id, which
/// the plugin reads from the commit object (no jj runs) and reports as the
/// volatile `change_id`, equal to `jj log -T change_id`; the pin is the one
/// the sha alone names.
#[test]
fn a_jj_commit_reports_its_change_id_and_pins_by_sha_alone() {
    let d = Dataset::init();
    let jj = |args: &[&str]| -> String {
        tether_testkit::run_ok(
            d.command(tether_testkit::jj(), &d.tmp().join("code"))
                .args(["--color=never", "--no-pager"])
                .args(args),
        )
        .trim()
        .to_string()
    };
    let out = d
        .command(tether_testkit::jj(), d.tmp())
        .args(["git", "init", "--colocate", "code"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let code = d.tmp().join("code");
    std::fs::write(code.join("main.py"), "x = 1\n").unwrap();
    jj(&["describe", "-m", "analysis"]);
    jj(&["bookmark", "create", "analysis", "-r", "@"]);
    jj(&["new"]);
    let change_id = jj(&["log", "--no-graph", "-r", "analysis", "-T", "change_id"]);
    let sha = jj(&["log", "--no-graph", "-r", "analysis", "-T", "commit_id"]);
    assert_eq!(change_id.len(), 32, "{change_id}");

    d.ok(&[
        "add",
        "code",
        "--kind",
        "git",
        "../code",
        "--set",
        "ref=analysis",
    ]);
    let tag = pinned_tag(&d.ok(&["commit", "-m", "with code"]), "code");
    let state = &d.manifest("code")["state"];
    assert_eq!(state["sha"].as_str(), Some(sha.as_str()));
    assert_eq!(state["change_id"].as_str(), Some(change_id.as_str()));
    // Volatile: the pin is the one a state of the sha alone names.
    let path = code.canonicalize().unwrap();
    let pin_id = tether::model::ids::pin_id(
        &d.dataset_id(),
        "git",
        &json!({"path": path.to_str().unwrap()}),
        &json!({"sha": sha}),
    );
    assert_eq!(tag, format!("tether.{pin_id}"));
    // A plain git commit carries none.
    let plain = code_repo(&d, "plain");
    d.ok(&["add", "plain", "--kind", "git", "../plain"]);
    d.ok(&["commit", "-m", "plain"]);
    assert!(d.manifest("plain")["state"].get("change_id").is_none());
    assert!(plain.is_dir());
}
