//! jj as the dataset's VCS, beyond the shared suites (which run on git and jj):
//! what jj does behind tether's back (`jj undo` of a dataset commit, a bookmark
//! renamed, moved or left), the one-operation commit that moves the bookmark, a
//! colocated repository, which jj runs and the version floor, and the user-config
//! layer. Everything is checked with the real `jj` that `cargo xtask setup`
//! installs.

use crate::support::{Dataset, JjCallLog, MemoryStore, Vcs, describe, lines, stderr, stdout};
use serde_json::{Value, json};

/// A dataset with one memory store, and its first dataset commit.
fn with_commit(vcs: Vcs) -> (Dataset, MemoryStore, String) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "empty labels");
    d.add_memory("zarr/imaging", &store);
    d.ok(&["commit", "-m", "baseline"]);
    let c1 = d.head();
    (d, store, c1)
}

fn status_json(d: &Dataset) -> Value {
    let out = d.ok(&["status", "--json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn warnings(out: &str) -> Vec<String> {
    lines(out)
        .into_iter()
        .filter(|l| l.starts_with("warning: "))
        .collect()
}

#[test]
fn a_commit_moves_the_bookmark_in_one_operation_and_leaves_an_empty_working_copy() {
    let (d, store, c1) = with_commit(Vcs::Jj);
    // The bookmark is on the dataset commit, `@` is empty on top of it.
    let at = |rev: &str, t: &str| d.jj(&["log", "--no-graph", "-r", rev, "-T", t]);
    assert_eq!(at("main", "commit_id"), c1);
    assert_eq!(at("@", "empty"), "true");
    assert_eq!(at("@-", "commit_id"), c1);
    assert_eq!(d.message(&c1), "baseline");
    assert_eq!(at("@-", "author.name()"), "Tether Test");

    // A second commit is one jj operation: `jj undo` takes the commit and the
    // bookmark back together.
    store.write(json!({"labels": "1"}), "relabel");
    let op_log = || lines(&d.jj(&["op", "log", "--no-graph", "-T", "description ++ \"\\n\""]));
    let ops_before = op_log().len();
    d.ok(&["commit", "-m", "relabel"]);
    let c2 = d.head();
    assert_ne!(c2, c1);
    assert_eq!(at("main", "commit_id"), c2);
    let ops = op_log();
    let new_ops = &ops[..ops.len() - ops_before];
    // jj snapshots the working copy as an operation of its own before any
    // command; the commit and the bookmark move are the one operation after it.
    assert_eq!(
        new_ops
            .iter()
            .filter(|o| !o.starts_with("snapshot working copy"))
            .count(),
        1,
        "the commit and the bookmark move are one operation: {new_ops:?}"
    );
    assert!(new_ops[0].starts_with("commit "), "{new_ops:?}");
    d.jj(&["undo"]);
    assert_eq!(
        at("main", "commit_id"),
        c1,
        "the bookmark went back with it"
    );
    // Only tether's paths were committed; nothing of `.tether/` is left untracked
    // by jj's own snapshots of per-checkout files.
    assert_eq!(
        d.changed_files(&c1),
        [
            ".tether/.gitignore",
            ".tether/objects/zarr/imaging.toml",
            "tether.toml"
        ]
    );
}

#[test]
fn jj_undo_of_a_dataset_commit_is_reported_by_status_and_ops() {
    let (d, store, _c1) = with_commit(Vcs::Jj);
    store.write(json!({"labels": "1"}), "relabel");
    let out = d.ok(&["commit", "-m", "relabel", "--json"]);
    let commit: Value = serde_json::from_str(&out).unwrap();
    let pin2 = commit["pinned"]["zarr/imaging"]
        .as_str()
        .unwrap()
        .to_string();
    let c2 = d.head();
    assert_eq!(commit["vcs_commit"], json!(c2));
    assert!(status_json(&d)["vcs_drift"].as_array().unwrap().is_empty());

    // `jj undo` drops the dataset commit. The working copy still holds the
    // manifests it committed, so they still reference its pin.
    d.jj(&["undo"]);
    let j = status_json(&d);
    let drift = j["vcs_drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{j}");
    assert_eq!(drift[0]["commit"], json!(c2));
    assert_eq!(drift[0]["referenced"], json!({"zarr/imaging": true}));
    let op = drift[0]["op"].as_str().unwrap().to_string();
    let out = d.ok(&["status"]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(w[0].contains(&c2[..12]), "names the commit: {out}");
    assert!(w[0].contains(&op), "names the operation: {out}");
    assert!(
        w[0].contains("the manifests still reference its pins of zarr/imaging"),
        "{out}"
    );

    // `ops` flags the entry.
    let out = d.ok(&["ops"]);
    let line = lines(&out)
        .into_iter()
        .find(|l| {
            l.split(' ')
                .next()
                .is_some_and(|short| op.starts_with(short))
        })
        .unwrap_or_else(|| panic!("no entry {op}:\n{out}"));
    assert!(line.ends_with("(vcs commit gone)"), "{line}");
    let j: Value = serde_json::from_str(&d.ok(&["ops", "--json"])).unwrap();
    let entry = j
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == json!(op))
        .unwrap();
    assert_eq!(entry["vcs_commit_gone"], json!(true));

    // Restoring the working copy from the bookmark drops the last reference:
    // the warning says the pin is now unreferenced, for gc.
    d.jj(&["restore"]);
    let j = status_json(&d);
    assert_eq!(
        j["vcs_drift"][0]["referenced"],
        json!({"zarr/imaging": false}),
        "{j}"
    );
    let out = d.ok(&["status"]);
    let w = warnings(&out);
    assert!(
        w[0].contains("no manifest references its pins of zarr/imaging any more")
            && w[0].contains("tether gc"),
        "{out}"
    );
    assert!(store.tag(&pin2).is_some(), "status releases nothing");
}

#[test]
fn a_bookmark_renamed_moved_or_left_behind_tethers_back_is_a_warning() {
    let (d, store, c1) = with_commit(Vcs::Jj);
    store.write(json!({"labels": "1"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    let c2 = d.head();
    assert!(
        status_json(&d)["bookmark_drift"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Moved: the bookmark goes back while the working copy stays.
    d.jj(&["bookmark", "set", "main", "-r", &c1, "--allow-backwards"]);
    let j = status_json(&d);
    let w = j["bookmark_drift"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{j}");
    let w = w[0].as_str().unwrap();
    assert!(w.contains("bookmark main was moved"), "{w}");
    assert!(w.contains(&c1[..12]), "{w}");
    // commit refuses until the working copy is back on the bookmark.
    let out = d.tether(&["commit", "-m", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("jj new main"), "{}", describe(&out));
    d.jj(&["bookmark", "set", "main", "-r", &c2]);
    assert!(
        status_json(&d)["bookmark_drift"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Left: the working copy moves to another commit.
    d.jj(&["new", &c1]);
    let out = d.ok(&["status"]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(
        w[0].contains("the working copy has left bookmark main"),
        "{out}"
    );
    d.jj(&["new", "main"]);
    assert!(warnings(&d.ok(&["status"])).is_empty());

    // Renamed.
    d.jj(&["bookmark", "rename", "main", "trunk"]);
    let out = d.ok(&["status"]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(
        w[0].contains("bookmark main was deleted or renamed"),
        "{out}"
    );
    assert!(w[0].contains("renamed to trunk?"), "{out}");
}

#[test]
fn a_colocated_repository_is_jjs_unless_tether_toml_prefers_git() {
    let (d, _store, c1) = with_commit(Vcs::JjColocated);
    assert!(d.root().join(".git").exists() && d.root().join(".jj").is_dir());
    // jj made the commit (an empty `@` on top), and git sees it as HEAD.
    assert_eq!(
        d.jj(&["log", "--no-graph", "-r", "@", "-T", "empty"]),
        "true"
    );
    assert_eq!(d.rev("HEAD"), c1);
    // The indexes live in jj's shared directory.
    assert!(
        d.root().join(".jj/repo/tether-pinned.jsonl").is_file(),
        "the pin index is in .jj/repo/"
    );

    let text = std::fs::read_to_string(d.root().join("tether.toml")).unwrap();
    assert!(text.contains("[vcs]"), "{text}");
    let git_side = text.replace("prefer = \"jj\"", "prefer = \"git\"");
    assert_ne!(git_side, text);
    std::fs::write(d.root().join("tether.toml"), git_side).unwrap();
    // Under git the working copy is detached (jj colocated), so it is off the
    // bookmark; the refusal is git's.
    let out = d.tether(&["commit", "-m", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("git switch main"),
        "{}",
        describe(&out)
    );
}

#[test]
fn which_jj_runs_and_the_version_floor() {
    let d = Dataset::init_in(Vcs::Jj);
    let bin = d.tmp().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        p
    };
    let old = script("jj-old", "echo 'jj 0.42.1'");
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_JJ", &old)
        .args(["status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("jj 0.42.1"), "names the version found: {err}");
    assert!(err.contains("0.43 or newer"), "{err}");

    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_JJ", d.tmp().join("no-such-jj"))
        .args(["status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("TETHER_JJ"), "{}", describe(&out));

    // `[vcs] jj_path` in secrets.toml takes over once the per-checkout files are
    // known to be untracked: a wrapper that logs, then runs the real jj.
    let log = d.tmp().join("wrapper.log");
    let wrapper = script(
        "jj-wrapper",
        &format!(
            "echo \"$@\" >> '{}'\nexec '{}' \"$@\"",
            log.display(),
            tether_testkit::jj().display()
        ),
    );
    std::fs::write(
        d.root().join(".tether/secrets.toml"),
        format!("[vcs]\njj_path = {:?}\n", wrapper.display().to_string()),
    )
    .unwrap();
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["commit", "-m", "through the wrapper"]);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.lines().any(|l| l.contains("commit")),
        "the dataset commit ran through jj_path:\n{logged}"
    );
}

#[test]
fn the_users_colour_pager_templates_and_aliases_stay_out() {
    let d = Dataset::new_in(Vcs::Jj);
    // A user config that would break any parsing of jj's output.
    let cfg = d.tmp().join("home/jjconfig.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(
        "[ui]\ncolor = \"always\"\npaginate = \"auto\"\npager = \"false\"\n\
         [template-aliases]\n\"commit_id\" = '\"not-an-id\"'\n\
         [templates]\nlog = '\"nothing\"'\n\
         [revset-aliases]\n\"all()\" = \"none()\"\n",
    );
    std::fs::write(&cfg, text).unwrap();
    d.ok(&["init"]);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    d.ok(&["commit", "-m", "with a hostile user config"]);
    let out = d.tether(&["verify", "--all-history"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let head = d.jj(&[
        "--config",
        "template-aliases.commit_id='self.commit_id()'",
        "log",
        "--no-graph",
        "-r",
        "@-",
        "-T",
        "self.commit_id()",
    ]);
    let head = head.trim().to_string();
    assert_eq!(
        lines(&stdout(&out)),
        [format!("ok {}:s", &head[..12])],
        "{}",
        describe(&out)
    );
}

#[test]
fn init_on_existing_jj_history_and_a_users_own_edits_stay_in_the_working_copy() {
    let d = Dataset::new_in(Vcs::Jj);
    std::fs::write(d.root().join("code.py"), "print(1)\n").unwrap();
    d.jj(&["commit", "-m", "code"]);
    let code = d.head();
    d.ok(&["init"]);
    // No bookmark existed: the trunk is created where the history is.
    assert_eq!(
        d.jj(&["log", "--no-graph", "-r", "main", "-T", "commit_id"]),
        code
    );
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    // The user's own edit, never snapshotted by jj before tether commits.
    std::fs::write(d.root().join("notes.txt"), "mine\n").unwrap();
    d.ok(&["commit", "-m", "dataset"]);
    let c = d.head();
    assert_eq!(
        d.jj(&["log", "--no-graph", "-r", "main", "-T", "commit_id"]),
        c
    );
    assert_eq!(
        d.jj(&[
            "log",
            "--no-graph",
            "-r",
            &format!("{c}-"),
            "-T",
            "commit_id"
        ]),
        code,
        "the dataset commit builds on the user's history"
    );
    let files = d.changed_files(&c);
    assert!(!files.iter().any(|f| f == "notes.txt"), "{files:?}");
    assert!(
        files.iter().any(|f| f == ".tether/objects/s.toml"),
        "{files:?}"
    );
    assert_eq!(
        d.uncommitted(),
        ["notes.txt"],
        "the user's edit stays in the working copy"
    );
    let status = status_json(&d);
    assert!(
        status["bookmark_drift"].as_array().unwrap().is_empty(),
        "{status}"
    );
}

/// The tag files of a memory store: `refs/tags/*.json`, sorted.
fn tag_files(store: &MemoryStore) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.root.join("refs/tags"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn after_jj_undo_of_a_dataset_commit_gc_releases_only_the_pins_it_made() {
    let (d, store, _c1) = with_commit(Vcs::Jj);
    let other = d.memory_store("other");
    d.add_memory("other", &other);
    d.ok(&["commit", "-m", "add other"]);
    let (tags_before, other_before) = (tag_files(&store), tag_files(&other));

    // The commit to be undone pins a new state of `imaging` only; `other`'s
    // pin is the one the earlier commit made.
    store.write(json!({"labels": "1"}), "relabel");
    let out = d.ok(&["commit", "-m", "relabel", "--json"]);
    let commit: Value = serde_json::from_str(&out).unwrap();
    let pin = commit["pinned"]["zarr/imaging"]
        .as_str()
        .unwrap()
        .to_string();
    let c = d.head();
    assert!(store.tag(&pin).is_some());
    assert_eq!(tag_files(&store).len(), tags_before.len() + 1);

    d.jj(&["undo"]);
    // The working copy still holds the manifests the commit wrote: its pin is
    // referenced, and gc keeps it until the working copy lets it go.
    let plan = d.ok(&["gc"]);
    assert!(
        !plan.contains(&format!("unpin zarr/imaging [memory] {pin}")),
        "{plan}"
    );
    d.jj(&["restore"]);
    let plan = d.ok(&["gc"]);
    assert!(
        plan.contains(&format!("unpin zarr/imaging [memory] {pin}")),
        "{plan}"
    );
    let out = d.ok(&["status"]);
    let w = warnings(&out);
    assert_eq!(w.len(), 1, "{out}");
    assert!(w[0].contains(&c[..12]), "names the commit: {out}");

    let r: Value = serde_json::from_str(&d.ok(&["gc", "--no-dry-run", "--json"])).unwrap();
    assert_eq!(
        r["unpinned"]["memory"],
        json!([pin.trim_start_matches("tether.")]),
        "{r}"
    );
    assert_eq!(tag_files(&store), tags_before, "exactly its pin went");
    assert_eq!(tag_files(&other), other_before, "other's pin stays");
    d.ok(&["verify"]);
}

#[test]
fn gc_and_drop_refuse_while_a_bookmark_is_conflicted() {
    let (d, store, c1) = with_commit(Vcs::Jj);
    store.write(json!({"labels": "1"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    let c2 = d.head();
    // Two concurrent operations create `side` at sibling commits: jj keeps
    // both targets, the bookmark conflicted (at an ancestor and its descendant
    // jj would take the descendant).
    d.jj(&["new", "--no-edit", &c1, "-m", "sibling"]);
    let sibling = d.jj(&[
        "log",
        "--no-graph",
        "-r",
        &format!("children({c1}) ~ {c2}"),
        "-T",
        "commit_id",
    ]);
    let op = d.jj(&["op", "log", "--no-graph", "-n", "1", "-T", "id"]);
    d.jj(&["bookmark", "create", "side", "-r", &sibling]);
    d.jj(&["--at-op", &op, "bookmark", "create", "side", "-r", &c2]);
    let listed = d.jj(&["bookmark", "list", "side"]);
    assert!(listed.contains("conflict"), "{listed}");
    let tags = store.tags();

    for args in [
        &["gc"][..],
        &["gc", "--no-dry-run"],
        &["drop", "side"],
        &["drop", "side", "--no-dry-run"],
    ] {
        let before = d.written();
        let err = stderr(&d.fails(args, 1));
        assert!(err.contains("bookmark side is conflicted"), "{err}");
        assert!(err.contains("jj bookmark set side"), "{err}");
        assert_eq!(d.written(), before, "a refused {args:?} writes nothing");
    }
    assert_eq!(store.tags(), tags);

    d.jj(&["bookmark", "set", "side", "-r", &c2]);
    d.ok(&["gc", "--no-dry-run"]);
    d.ok(&["drop", "side"]);
}

/// spec/07: gc and drop refuse while a conflict in `.tether/` stands that no
/// later commit resolved (a conflicted manifest is several answers); once
/// resolved, they run.
#[test]
fn gc_and_drop_refuse_an_unresolved_conflict_in_the_datasets_files() {
    let (d, _store, c1) = with_commit(Vcs::Jj);
    let manifest = d.root().join(".tether/objects/zarr/imaging.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    let mut sides = Vec::new();
    for side in ["a", "b"] {
        d.jj(&["new", &c1, "-m", &format!("side {side}")]);
        std::fs::write(&manifest, format!("{original}# side {side}\n")).unwrap();
        d.jj(&["commit", "-m", &format!("edit {side}")]);
        sides.push(d.jj(&["log", "--no-graph", "-r", "@-", "-T", "commit_id"]));
    }
    d.jj(&["new", &sides[0], &sides[1], "-m", "merge"]);
    for args in [&["gc"][..], &["gc", "--no-dry-run"]] {
        let err = stderr(&d.fails(args, 1));
        assert!(err.contains("conflict in the dataset's files"), "{err}");
        assert!(err.contains(".tether/objects/zarr/imaging.toml"), "{err}");
    }
    // Resolved in the working copy, which jj records on its next snapshot.
    std::fs::write(&manifest, &original).unwrap();
    d.jj(&["status"]);
    d.ok(&["gc"]);
}

/// spec/07: every side of a conflicted jj commit is a reference, also a side
/// whose own commit is hidden now. Rebasing the last dataset commit onto the
/// first makes its manifest a conflict whose sides are the first commit's and
/// the rebased one's (the original is hidden); gc refuses while the conflict
/// stands, keeps the hidden side's pin once a later commit resolved it, and
/// releases that pin once the conflict itself is resolved away.
#[test]
fn a_conflict_side_that_only_a_hidden_commit_made_keeps_its_pin() {
    conflict_side_of_a_hidden_commit(Vcs::Jj);
}

/// The same in a colocated repository, where git sees jj's conflict trees too.
#[test]
fn a_conflict_side_that_only_a_hidden_commit_made_keeps_its_pin_colocated() {
    conflict_side_of_a_hidden_commit(Vcs::JjColocated);
}

/// Commits c1, c2, c3 of one object (pins p1, p2, p3), then c3 rebased onto
/// c1: the rebased commit (and the working copy on it) conflicts, c1's
/// manifest against c3's over c2's. c3 itself is hidden; its manifest lives
/// on only as a side of the conflict. Returns the dataset, the store, c1, p2,
/// p3 and the rebased commit.
fn conflicted_manifest(vcs: Vcs) -> (Dataset, MemoryStore, String, String, String, String) {
    let (d, store, c1) = with_commit(vcs);
    let mut pins = Vec::new();
    for labels in ["1", "2"] {
        store.write(json!({ "labels": labels }), "relabel");
        let out = d.ok(&["commit", "-m", &format!("relabel {labels}"), "--json"]);
        let commit: Value = serde_json::from_str(&out).unwrap();
        pins.push(
            commit["pinned"]["zarr/imaging"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let (p2, p3) = (pins[0].clone(), pins[1].clone());
    let c3 = d.head();
    d.jj(&["rebase", "-s", &c3, "-d", &c1]);
    let rebased = d.head();
    assert_ne!(rebased, c3);
    assert!(!d.all_commits().contains(&c3), "the original is hidden");
    (d, store, c1, p2, p3, rebased)
}

fn conflict_side_of_a_hidden_commit(vcs: Vcs) {
    let (d, store, c1, p2, p3, rebased) = conflicted_manifest(vcs);
    let unpins =
        |plan: &str, pin: &str| plan.contains(&format!("unpin zarr/imaging [memory] {pin}"));
    let conflicts = d.jj(&[
        "log",
        "--no-graph",
        "-r",
        "conflicts()",
        "-T",
        "commit_id ++ \"\\n\"",
    ]);
    assert!(lines(&conflicts).contains(&rebased), "{conflicts}");
    let tags = store.tags();
    for args in [&["gc"][..], &["gc", "--no-dry-run"]] {
        let err = stderr(&d.fails(args, 1));
        assert!(err.contains("conflict in the dataset's files"), "{err}");
    }
    assert_eq!(store.tags(), tags, "a refused gc releases nothing");

    // Resolved in the working copy (c1's manifest taken): the conflicted commit
    // is history now, and each of its sides a reference.
    d.jj(&[
        "restore",
        "--from",
        &c1,
        "root-file:\".tether/objects/zarr/imaging.toml\"",
    ]);
    assert!(
        !lines(&d.jj(&[
            "log",
            "--no-graph",
            "-r",
            "@ & conflicts()",
            "-T",
            "commit_id"
        ]))
        .iter()
        .any(|l| !l.is_empty())
    );
    let plan = d.ok(&["gc"]);
    assert!(
        !unpins(&plan, &p3),
        "the hidden side's pin is referenced:\n{plan}"
    );
    assert!(
        !unpins(&plan, &p2),
        "the base's pin is referenced (c2 is visible):\n{plan}"
    );
    d.ok(&["gc", "--no-dry-run"]);
    assert!(store.tag(&p3).is_some(), "gc kept the side's pin");
    assert!(store.tag(&p2).is_some());

    // The resolution squashed into the conflicted commit: no side of anything
    // names the hidden commit's pin any more, and gc releases exactly it.
    d.jj(&["squash"]);
    assert!(
        lines(&d.jj(&["log", "--no-graph", "-r", "conflicts()", "-T", "commit_id"]))
            .iter()
            .all(|l| l.is_empty())
    );
    let plan = d.ok(&["gc"]);
    assert!(unpins(&plan, &p3), "{plan}");
    assert!(!unpins(&plan, &p2), "{plan}");
    let r: Value = serde_json::from_str(&d.ok(&["gc", "--no-dry-run", "--json"])).unwrap();
    assert_eq!(
        r["unpinned"]["memory"],
        json!([p3.trim_start_matches("tether.")]),
        "{r}"
    );
    assert!(store.tag(&p3).is_none());
    assert!(store.tag(&p2).is_some());
    d.ok(&["verify", "--all-history"]);
}

/// A conflicted commit's label answers for every side and base of the
/// conflict, with `--all-history` and with `-r`: a pin gone from one side is
/// `missing` however the others fare.
#[test]
fn verify_reports_a_missing_pin_on_any_side_of_a_conflict() {
    let (d, store, _c1, p2, p3, rebased) = conflicted_manifest(Vcs::Jj);
    d.ok(&["verify", "--all-history"]);
    let label = format!("{}:zarr/imaging", &rebased[..12]);
    // Each side in turn: c1's pin (the side the rebase landed on) and c3's
    // (the hidden commit's); whichever the report reads last must not hide
    // the other.
    let p1 = store
        .tags()
        .into_iter()
        .find(|t| *t != p2 && *t != p3)
        .expect("c1's pin");
    for gone in [&p1, &p3] {
        let snapshot = store.tag(gone).expect("the pin's tag");
        store.delete_tag(gone);
        for args in [&["--all-history"][..], &["-r", &rebased]] {
            let out = d.fails(&[&["verify", "--json"][..], args].concat(), 1);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v[&label]["status"], "missing", "{gone} {args:?}: {v}");
            let message = v[&label]["message"].as_str().unwrap();
            assert!(message.contains(gone.as_str()), "names the pin: {v}");
        }
        store.set_tag(gone, &snapshot);
    }
}

/// The jj processes one `tether status` starts, each with its arguments, through a
/// logging wrapper (the version check is remembered per executable, so the run
/// after the first asks jj nothing about its version).
fn jj_calls_of_status(d: &Dataset) -> Vec<String> {
    let jj = JjCallLog::new(&d.tmp().join("counting"));
    let mut calls = Vec::new();
    for _ in 0..2 {
        let out = d
            .command(env!("CARGO_BIN_EXE_tether"), &d.root())
            .env("TETHER_JJ", &jj.wrapper)
            .arg("status")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        calls = jj.take();
    }
    calls
}

/// `cargo xtask bench` times `status` on jj beside as many bare jj calls as it
/// makes: that number is none while jj's operation heads stand (the view of
/// visible commits is cached under them, the version check is remembered,
/// git-store reads start no process), in a dataset with history, a second
/// bookmark and a second workspace alike (`scale.rs` counts the one `jj
/// log` after an operation).
#[test]
fn status_on_jj_starts_no_jj_process_when_nothing_moved() {
    let (d, store, _c1) = with_commit(Vcs::Jj);
    let calls = jj_calls_of_status(&d);
    assert!(calls.is_empty(), "{calls:#?}");

    store.write(json!({"labels": "1"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    d.jj(&["bookmark", "create", "side", "-r", "@-"]);
    d.add_workspace(&d.tmp().join("second"));
    let calls = jj_calls_of_status(&d);
    assert!(calls.is_empty(), "{calls:#?}");
}

/// A commit whose conflict leaves an object's manifest unsettled names no
/// one state of it: reading it as one (`open -r`, `diff`, `new`) is refused,
/// naming the file, where git alone would show the first side; the working
/// copy's conflict markers are named as a conflict. `abandon` waits for
/// the conflict to be resolved, then counts every side's pins as the
/// commit's own, so `--gc` releases the one only the conflicted commit named.
#[test]
fn a_conflicted_commit_is_not_read_as_one_side() {
    let (d, store, c1, p2, p3, rebased) = conflicted_manifest(Vcs::Jj);
    let refusal = format!(
        "commit {} has a conflict in the dataset's files (.tether/objects/zarr/imaging.toml)",
        &rebased[..12]
    );
    let before = (store.tags(), d.ok(&["ops", "--json"]), d.all_commits());
    for args in [
        &["open", "zarr/imaging", "-r", &rebased][..],
        &["diff", &c1, &rebased],
    ] {
        let err = stderr(&d.fails(args, 1));
        assert!(err.contains(&refusal), "{args:?}: {err}");
    }
    // The working copy on top carries the conflict as markers in the file:
    // named as a conflict, not as the TOML error the markers cause.
    for args in [&["status"][..], &["new", &rebased]] {
        let err = stderr(&d.fails(args, 1));
        assert!(
            err.contains("imaging.toml: has unresolved conflict markers (line"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        (store.tags(), d.ok(&["ops", "--json"]), d.all_commits()),
        before,
        "a refusal changes nothing"
    );
    // A commit without a conflict still reads.
    d.ok(&["open", "zarr/imaging", "-r", &c1]);

    // The report's gc plan would be refused after the commit was dropped:
    // refused before, and nothing changes.
    let before = d.all_commits();
    let err = stderr(&d.fails(&["abandon", &rebased, "--gc"], 1));
    assert!(err.contains("refusing to abandon: commit"), "{err}");
    assert_eq!(d.all_commits(), before);

    // Resolved in a commit of its own (c1's manifest taken), the conflicted
    // commit can go.
    d.jj(&[
        "restore",
        "--from",
        &c1,
        "root-file:\".tether/objects/zarr/imaging.toml\"",
    ]);
    d.jj(&["commit", "-m", "resolve"]);
    let out = d.ok(&["abandon", &rebased, "--gc", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    let unpinned: Vec<&Value> = r["gc_plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["op"] == "unpin")
        .map(|a| &a["target"])
        .collect();
    assert_eq!(
        unpinned,
        [&json!(p3)],
        "the hidden side's pin goes with the commit: {r}"
    );
    assert_eq!(r["gc_applied"], true);
    assert!(store.tag(&p3).is_none());
    assert!(store.tag(&p2).is_some(), "c2 still names its pin");
    d.ok(&["verify", "--all-history"]);
}
