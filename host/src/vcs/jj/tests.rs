//! Tests of the jj adapter: its parsers and config layer, and the adapter itself
//! against real repositories made and checked with the `jj` that `cargo xtask setup`
//! installs, in temp dirs with a private config.

use std::path::PathBuf;

use super::*;

/// A jj repository (`jj git init`, not colocated) with one workspace, a private
/// config, and the adapter opened on it.
struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    repo: PathBuf,
    env: VcsEnv,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(base.join("home")).unwrap();
        let config = base.join("home/jj.toml");
        fs::write(
            &config,
            "[user]\nname = \"Test User\"\nemail = \"test@example.com\"\n",
        )
        .unwrap();
        let env = VcsEnv::from_vars::<std::ffi::OsString, std::ffi::OsString>([
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), base.join("home").into_os_string()),
            (
                "XDG_CONFIG_HOME".into(),
                base.join("home/.config").into_os_string(),
            ),
            ("JJ_CONFIG".into(), config.into_os_string()),
            ("TETHER_JJ".into(), tether_testkit::jj().into_os_string()),
        ]);
        let fx = Fixture {
            _dir: dir,
            repo: base.join("repo"),
            base,
            env,
        };
        fx.jj_in(&fx.base, &["git", "init", "--no-colocate", "repo"]);
        fx
    }

    fn jj_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new(tether_testkit::jj())
            .current_dir(dir)
            .env_clear()
            .envs(self.env.vars())
            .args(["--color=never", "--no-pager"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "jj {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn jj(&self, args: &[&str]) -> String {
        self.jj_in(&self.repo, args)
    }

    fn open(&self) -> JjVcs {
        JjVcs::open_with_env(&self.repo, self.env.clone()).unwrap()
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.repo.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn id(&self, rev: &str) -> String {
        self.jj(&["log", "--no-graph", "-r", rev, "-T", "commit_id"])
    }
}

#[test]
fn commit_reads_history_and_the_bookmark_follows() {
    let fx = Fixture::new();
    let vcs = fx.open();
    assert_eq!(vcs.kind(), VcsKind::Jj);
    assert_eq!(vcs.shared_dir(), fx.repo.join(".jj/repo"));
    assert_eq!(
        vcs.head_state().unwrap(),
        HeadState::Unborn {
            branch: String::new()
        }
    );
    vcs.set_unborn_branch("main").unwrap();
    assert_eq!(vcs.current_branch().unwrap().as_deref(), Some("main"));
    assert_eq!(vcs.head().unwrap(), None);

    fx.write("tether.toml", "a\n");
    fx.write(".tether/objects/x.toml", "state = 1\n");
    fx.write("other.txt", "not ours\n");
    let c1 = vcs
        .commit_on_bookmark(&["tether.toml", ".tether/objects/x.toml"], "first", "main")
        .unwrap();
    assert_eq!(c1.as_str(), fx.id("main"));
    assert_eq!(c1.as_str(), fx.id("@-"));
    assert_eq!(vcs.head().unwrap(), Some(c1.clone()));
    assert_eq!(
        vcs.list_files(&c1, "").unwrap(),
        [".tether/objects/x.toml", "tether.toml"],
        "only the given paths went in"
    );
    assert_eq!(
        vcs.read_file(&c1, ".tether/objects/x.toml")
            .unwrap()
            .as_deref(),
        Some(&b"state = 1\n"[..])
    );
    // tether's per-checkout files are never committed, ignored or not.
    fx.write(".tether/secrets.toml", "[vcs]\n");
    let err = vcs
        .commit_on_bookmark(&["tether.toml", ".tether/secrets.toml"], "x", "main")
        .unwrap_err();
    assert!(matches!(err, VcsError::PerCheckoutPath { .. }), "{err}");
    fs::remove_file(fx.repo.join(".tether/secrets.toml")).unwrap();
    // Nothing changed: refused, nothing committed.
    let err = vcs
        .commit_on_bookmark(&["tether.toml"], "again", "main")
        .unwrap_err();
    assert!(matches!(err, VcsError::NothingToCommit { .. }), "{err}");
    assert_eq!(fx.id("main"), c1.as_str());

    // The bookmark at `@-` is advanced; a deleted path is committed as deleted.
    fs::remove_file(fx.repo.join(".tether/objects/x.toml")).unwrap();
    fx.write("tether.toml", "b\n");
    let c2 = vcs
        .commit_on_bookmark(&["tether.toml", ".tether/objects/x.toml"], "second", "main")
        .unwrap();
    assert_eq!(fx.id("main"), c2.as_str());
    assert_eq!(
        vcs.list_files(&c2, ".tether").unwrap(),
        Vec::<String>::new()
    );
    let history: Vec<String> = vcs
        .history(".tether")
        .unwrap()
        .map(|c| c.unwrap().id.to_string())
        .collect();
    assert_eq!(
        history,
        [c2.to_string(), c1.to_string()],
        "newest first, no working copy"
    );
    assert_eq!(vcs.visible_ids().unwrap(), [c2.clone(), c1.clone()]);
    assert!(vcs.is_ancestor(&c1, &c2).unwrap());
    assert!(!vcs.is_ancestor(&c2, &c1).unwrap());
    assert_eq!(vcs.resolve("main").unwrap(), c2);
    assert_eq!(vcs.resolve(&c1.as_str()[..12]).unwrap(), c1);
    assert!(matches!(
        vcs.resolve("no-such-bookmark").unwrap_err(),
        VcsError::UnknownRevision { .. }
    ));
    // The user's file stayed in the working copy.
    assert_eq!(
        vcs.changes()
            .unwrap()
            .into_iter()
            .map(|c| c.path)
            .collect::<Vec<_>>(),
        ["other.txt"]
    );
    // A digest changes with history.
    let digest = vcs.history_digest().unwrap();
    vcs.reset_soft(&c1).unwrap();
    assert_eq!(
        fx.id("main"),
        c1.as_str(),
        "the bookmark went back with the squash"
    );
    assert_eq!(vcs.head().unwrap(), Some(c1.clone()));
    assert_ne!(vcs.history_digest().unwrap(), digest);
    assert!(
        !fx.repo.join(".tether/objects/x.toml").exists(),
        "the work tree is as it was"
    );
    let in_wc = fx.jj(&["diff", "-r", "@", "--name-only"]);
    assert!(in_wc.contains("tether.toml"), "{in_wc}");
}

#[test]
fn bookmarks_move_and_delete_only_from_what_was_reviewed() {
    let fx = Fixture::new();
    fx.write("a", "1\n");
    fx.jj(&["commit", "-m", "one"]);
    fx.write("a", "2\n");
    fx.jj(&["commit", "-m", "two"]);
    let (one, two) = (fx.id("@--"), fx.id("@-"));
    let vcs = fx.open();
    let (one, two) = (CommitId::new(one), CommitId::new(two));
    vcs.create_branch("feat", &one).unwrap();
    assert!(matches!(
        vcs.create_branch("feat", &two).unwrap_err(),
        VcsError::BranchExists { .. }
    ));
    assert_eq!(vcs.branch_head("feat").unwrap(), Some(one.clone()));
    let err = vcs.move_branch("feat", &two, &two).unwrap_err();
    assert!(matches!(err, VcsError::BranchMoved { .. }), "{err}");
    vcs.move_branch("feat", &two, &one).unwrap();
    assert_eq!(fx.id("feat"), two.as_str());
    // `feat` is at `@-` now: this workspace works on it.
    assert_eq!(vcs.working_bookmarks().unwrap(), ["feat"]);
    let err = vcs.delete_branch("feat", &two).unwrap_err();
    assert!(matches!(err, VcsError::BranchCheckedOut { .. }), "{err}");
    vcs.checkout_detached(&one).unwrap();
    assert_eq!(vcs.head().unwrap(), Some(one.clone()));
    assert!(vcs.working_bookmarks().unwrap().is_empty());
    assert!(matches!(
        vcs.delete_branch("feat", &one).unwrap_err(),
        VcsError::BranchMoved { .. }
    ));
    vcs.delete_branch("feat", &two).unwrap();
    assert_eq!(vcs.branch_head("feat").unwrap(), None);
    vcs.delete_branch("feat", &two).unwrap();
}

#[test]
fn workspaces_are_listed_added_and_forgotten() {
    let fx = Fixture::new();
    fx.write("a", "1\n");
    fx.jj(&["commit", "-m", "one"]);
    fx.jj(&["bookmark", "create", "main", "-r", "@-"]);
    let vcs = fx.open();
    let second = fx.base.join("second");
    let added = vcs.add_worktree(&second, "main").unwrap();
    assert_eq!(added.name.as_deref(), Some("second"));
    assert!(added.exists && !added.is_main && !added.is_current);
    assert_eq!(added.branch.as_deref(), Some("main"));
    let listed = vcs.worktrees().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].is_main && listed[0].is_current);
    // The second workspace shares the repository directory.
    let other = JjVcs::open_with_env(&second, fx.env.clone()).unwrap();
    assert_eq!(other.shared_dir(), vcs.shared_dir());
    assert_eq!(other.current_branch().unwrap().as_deref(), Some("main"));
    // Both `@`s are working copies: neither is history.
    assert_eq!(vcs.visible_ids().unwrap().len(), 1);
    vcs.remove_worktree(&second, false).unwrap();
    assert!(!second.exists());
    assert_eq!(vcs.worktrees().unwrap().len(), 1);
}

#[test]
fn tracked_is_what_the_working_copy_holds() {
    let fx = Fixture::new();
    fx.write(".tether/.gitignore", "workspace.toml\n");
    fx.write(".tether/workspace.toml", "x\n");
    fx.write(".tether/ops.jsonl", "{}\n");
    fx.jj(&["status"]);
    let vcs = fx.open();
    assert_eq!(
        vcs.tracked(&[".tether/workspace.toml", ".tether/ops.jsonl"])
            .unwrap(),
        [".tether/ops.jsonl"],
        "the ignored file is untracked, the other one came in with jj's snapshot"
    );
}

#[test]
fn versions_parse() {
    assert_eq!(parse_jj_version("jj 0.45.1\n"), Some(JjVersion(0, 45, 1)));
    assert_eq!(
        parse_jj_version("jj 0.43.0-1a2b3c4d5e6f"),
        Some(JjVersion(0, 43, 0))
    );
    assert_eq!(parse_jj_version("jj 1.2"), Some(JjVersion(1, 2, 0)));
    assert_eq!(parse_jj_version("git version 2.47.3"), None);
    assert!(JjVersion(0, 42, 9) < JjVersion(0, 43, 0));
}

#[test]
fn the_user_layer_keeps_only_what_the_spec_lists() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    fs::write(
        &cfg,
        r#"
[user]
name = "A"
email = "a@b"
[ui]
color = "always"
pager = "less"
[templates]
log = "oops"
[snapshot]
auto-track = "none()"
[revset-aliases]
"immutable_heads()" = "trunk() | tags() | mine_old"
"trunk()" = "main@origin"
mine_old = "mine() & ::release"
"unrelated()" = "none()"
"#,
    )
    .unwrap();
    let env = VcsEnv::from_vars([("JJ_CONFIG", cfg.as_os_str())]);
    let layer: toml::Table = user_layer(&env).unwrap().parse().unwrap();
    let keys: Vec<&str> = layer.keys().map(String::as_str).collect();
    assert_eq!(keys, ["revset-aliases", "snapshot", "user"]);
    let aliases = layer["revset-aliases"].as_table().unwrap();
    let names: Vec<&str> = aliases.keys().map(String::as_str).collect();
    assert_eq!(names, ["immutable_heads()", "mine_old", "trunk()"]);
    assert_eq!(user_auto_track(&env).as_deref(), Some("none()"));
}

#[test]
fn fileset_strings_are_quoted() {
    assert_eq!(fileset_string("a/b.toml"), "\"a/b.toml\"");
    assert_eq!(fileset_string("we\"ird\\"), "\"we\\\"ird\\\\\"");
}

#[test]
fn view_lines_parse() {
    let text = "aaaa\tbbbb\t@\tdefault\t\tzzzz\t\nbbbb\tcccc\t-\t\tmain feat? \tyyyy\tv1 v2\n";
    let v = View::parse(text).unwrap();
    assert_eq!(v.commits[1].change_id, "yyyy");
    assert_eq!(v.commits[1].tags, ["v1", "v2"]);
    // A view cached in the older five-field shape is read anew, not misread.
    assert!(View::parse("aaaa\tbbbb\t@\tdefault\t\n").is_err());
    assert_eq!(v.working_copy().unwrap().id, "aaaa");
    assert_eq!(v.head().unwrap().as_deref(), Some("bbbb"));
    assert_eq!(v.working_bookmarks().unwrap(), ["main"]);
    assert_eq!(v.history_ids(), ["bbbb"]);
    assert_eq!(v.commits[1].conflicted, ["feat"]);
}

#[test]
fn the_version_check_is_remembered_per_executable() {
    let fx = Fixture::new();
    fx.open();
    let cache = fx.repo.join(".jj/repo/tether-jj-version");
    let text = fs::read_to_string(&cache).unwrap();
    assert!(text.trim_end().ends_with("\t0.45.1"), "{text}");
    // Another executable is asked, whatever the cache says.
    let old = fx.base.join("jj-old");
    fs::write(&old, "#!/bin/sh\necho 'jj 0.42.0'\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&old, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let err = JjVcs::open_with_exe(&fx.repo, fx.env.clone(), old).unwrap_err();
    assert!(
        matches!(
            err,
            VcsError::JjTooOld {
                found: JjVersion(0, 42, 0),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("0.43 or newer"), "{err}");
}

#[test]
fn dropping_commits_keeps_later_manifests_and_exclusive_commits_are_the_bookmarks_own() {
    let fx = Fixture::new();
    let mut ids = Vec::new();
    for n in 1..=3 {
        fx.write(".tether/objects/x.toml", &format!("state = {n}\n"));
        fx.jj(&["commit", "-m", &format!("c{n}")]);
        ids.push(CommitId::new(fx.id("@-")));
    }
    fx.jj(&["bookmark", "create", "main", "-r", "@-"]);
    fx.jj(&["bookmark", "create", "feat", "-r", ids[0].as_str()]);
    let vcs = fx.open();
    let (only_main, keepers) = vcs.exclusive_commits("main").unwrap();
    assert_eq!(only_main, [ids[2].clone(), ids[1].clone()]);
    assert!(keepers.is_empty(), "{keepers:?}");
    let (only_feat, keepers) = vcs.exclusive_commits("feat").unwrap();
    assert!(only_feat.is_empty());
    assert_eq!(keepers, ["refs/heads/main"]);

    let rewritten = vcs.drop_commits(&[ids[1].clone()], ".tether").unwrap();
    assert_eq!(rewritten.len(), 1, "{rewritten:?}");
    assert_eq!(rewritten[0].0, ids[2]);
    let c3 = rewritten[0].1.clone();
    assert_eq!(
        fx.id("main"),
        c3.as_str(),
        "the bookmark follows its commit"
    );
    assert_eq!(
        vcs.read_file(&c3, ".tether/objects/x.toml")
            .unwrap()
            .as_deref(),
        Some(&b"state = 3\n"[..]),
        "the later commit keeps its manifest exactly"
    );
    assert_eq!(vcs.visible_ids().unwrap(), [c3, ids[0].clone()]);
}

#[test]
fn a_conflicted_commit_yields_every_side_and_base() {
    let fx = Fixture::new();
    let vcs = fx.open();
    let manifest = ".tether/objects/x.toml";
    let mut ids = Vec::new();
    for text in ["base\n", "left\n", "right\n"] {
        fx.write(manifest, text);
        fx.jj(&["commit", "-m", text.trim()]);
        ids.push(fx.id("@-"));
    }
    // `right` rebased onto `base`: sides base and right, over left.
    fx.jj(&["rebase", "-s", &ids[2], "-d", &ids[0]]);
    let conflicted = fx.id("@-");
    let history: Vec<HistoryCommit> = vcs
        .history(".tether/objects")
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let c = history
        .iter()
        .find(|c| c.id.as_str() == conflicted)
        .unwrap();
    let mut terms: Vec<String> = c
        .all_files()
        .into_iter()
        .map(|(_, files)| String::from_utf8_lossy(&files[manifest]).into_owned())
        .collect();
    terms.sort();
    assert_eq!(terms, ["base\n", "left\n", "right\n"]);
    assert_eq!(c.conflict_terms.len(), 3, "two sides and a base");
    // jj interleaves them side, base, side: `conflicted_paths` relies on it.
    let in_order: Vec<&[u8]> = c
        .conflict_terms
        .iter()
        .map(|(_, files)| &*files[manifest])
        .collect();
    assert_eq!(in_order, [&b"base\n"[..], b"left\n", b"right\n"]);
    assert_eq!(c.conflicted_paths(), [manifest]);
    // A commit without a conflict has none.
    let plain = history.iter().find(|c| c.id.as_str() == ids[0]).unwrap();
    assert!(plain.conflict_terms.is_empty());
    assert_eq!(plain.all_files().len(), 1);
}
