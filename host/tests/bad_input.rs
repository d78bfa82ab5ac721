//! Bad input through the `tether` binary: each is refused with a clear
//! `error: ...` that says what to do, the spec's exit code (1 for a tether
//! error, 2 for a usage error), and nothing written: the `.tether/` tree,
//! `tether.toml` and git's HEAD, branches and index are byte-identical
//! before and after, and no store gained a ref.

use crate::support::{Dataset, MemoryStore, describe, stderr, stdout};
use serde_json::{Value, json};

/// Run `tether ARGS` expecting a refusal with exit `code` whose message
/// holds every one of `says`; check that nothing was written.
fn refused(d: &Dataset, args: &[&str], code: i32, says: &[&str]) -> String {
    refused_in(d, &d.root(), args, code, says)
}

fn refused_in(
    d: &Dataset,
    dir: &std::path::Path,
    args: &[&str],
    code: i32,
    says: &[&str],
) -> String {
    let before = d.written();
    let out = d.tether_in(dir, args);
    let what = format!("tether {}:\n{}", args.join(" "), describe(&out));
    assert_eq!(out.status.code(), Some(code), "{what}");
    let err = stderr(&out);
    assert!(
        err.starts_with("error:"),
        "stderr starts with `error:`: {what}"
    );
    for s in says {
        assert!(err.contains(s), "the error says {s:?}: {what}");
    }
    assert_eq!(
        stdout(&out),
        "",
        "a refusal prints nothing on stdout: {what}"
    );
    assert_eq!(d.written(), before, "nothing was written: {what}");
    err
}

/// A dataset with one memory object, `imaging`.
fn with_memory() -> (Dataset, MemoryStore) {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    (d, store)
}

#[test]
fn an_unknown_kind_is_refused() {
    let (d, store) = with_memory();
    let system = format!("system={}", store.root.display());
    refused(
        &d,
        &["add", "other", "--kind", "nosuch", "--set", &system],
        1,
        &["unknown kind \"nosuch\"", "memory", "tether backends"],
    );
    assert!(!d.root().join(".tether/objects/other.toml").exists());
}

#[test]
fn keys_that_could_leave_the_objects_directory_are_refused() {
    let (d, store) = with_memory();
    let system = format!("system={}", store.root.display());
    for key in ["a/../b", "..", "../escape", "a\\b", "/abs", "/tmp/abs"] {
        refused(
            &d,
            &["add", key, "--kind", "memory", "--set", &system],
            1,
            &["invalid object key", "a key may not"],
        );
    }
    // Nothing landed beside .tether/objects either.
    let files = crate::support::files_under(&d.root(), &d.root());
    assert!(
        files.iter().all(|f| f.starts_with(".git/")
            || [
                ".tether/objects/imaging.toml",
                // The journal of the add that registered it.
                ".tether/ops.jsonl",
                ".tether/.gitignore",
                ".tether/workspace.toml",
                ".tether/lock",
                "tether.toml"
            ]
            .contains(&f.as_str())),
        "{files:?}"
    );
}

#[test]
fn a_key_already_taken_is_refused() {
    let (d, _) = with_memory();
    let other = d.memory_store("other");
    let system = format!("system={}", other.root.display());
    refused(
        &d,
        &["add", "imaging", "--kind", "memory", "--set", &system],
        1,
        &["\"imaging\" is already taken", "tether remove imaging"],
    );
    // A derived key is refused the same way.
    let dir = d.data().join("plate1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.tif"), b"a").unwrap();
    d.ok(&["add", "../data/plate1/", "--kind", "file"]);
    std::fs::create_dir_all(d.data().join("elsewhere/plate1")).unwrap();
    refused(
        &d,
        &["add", "../data/elsewhere/plate1", "--kind", "file"],
        1,
        &["\"plate1\" is already taken"],
    );
}

#[test]
fn commit_without_a_message_is_refused() {
    let (d, store) = with_memory();
    for args in [&["commit"][..], &["commit", "-m", "  "]] {
        refused(
            &d,
            args,
            2,
            &["a commit message is required", "tether commit -m MESSAGE"],
        );
    }
    assert_eq!(store.tags(), Vec::<String>::new(), "nothing was pinned");
    let head = d
        .command("git", &d.root())
        .args(["rev-parse", "--verify", "-q", "HEAD"])
        .output()
        .unwrap();
    assert!(
        !head.status.success(),
        "no commit was made: {}",
        describe(&head)
    );
}

#[test]
fn a_selector_that_matches_nothing_is_refused() {
    let (d, store) = with_memory();
    for args in [
        &["status", "nosuch"][..],
        &["status", "imaging", "zarr/"],
        &["snapshot", "imag"],
        &["commit", "-m", "x", "nosuch/"],
        &["commit", "-m", "x", "--dry-run", "nosuch"],
    ] {
        let selector = args.last().unwrap();
        refused(
            &d,
            args,
            1,
            &[
                &format!("no object matches \"{selector}\""),
                "prefix ending in '/'",
            ],
        );
    }
    assert_eq!(store.tags(), Vec::<String>::new());
}

/// A committed dataset whose store then moved, and a saved commit plan for
/// the move (`<tmp>/p.json`, outside the dataset).
fn planned() -> (Dataset, MemoryStore, std::path::PathBuf) {
    let (d, store) = with_memory();
    d.ok(&["commit", "-m", "baseline"]);
    store.write(json!({"labels": "1"}), "relabel");
    let plan = d.tmp().join("p.json");
    let out = d.ok(&["commit", "-m", "relabel", "--plan", plan.to_str().unwrap()]);
    assert!(out.starts_with("plan: commit"), "{out}");
    assert_eq!(store.tags().len(), 1, "--plan pins nothing");
    (d, store, plan)
}

#[test]
fn an_edited_plan_is_refused() {
    let (d, store, plan) = planned();
    let tags = store.tags();
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    p["context"]["message"] = json!("a message nobody reviewed");
    std::fs::write(&plan, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    refused(
        &d,
        &["commit", "--from-plan", plan.to_str().unwrap()],
        1,
        &["this plan was edited after it was saved", "re-run the plan"],
    );
    assert_eq!(store.tags(), tags, "nothing was pinned");
}

#[test]
fn a_plan_whose_object_moved_is_refused() {
    let (d, store, plan) = planned();
    let tags = store.tags();
    store.write(json!({"labels": "2"}), "someone else's write");
    refused(
        &d,
        &["commit", "--from-plan", plan.to_str().unwrap()],
        1,
        &[
            "the commit plan is stale, and nothing was applied",
            "imaging",
            "Plan again",
        ],
    );
    assert_eq!(store.tags(), tags, "nothing was pinned");
}

/// A plan that cannot be saved names the file and says why once: the error
/// quotes its cause, and the causes printed after it do not repeat it.
#[test]
fn a_plan_that_cannot_be_saved_says_why_once() {
    let (d, store) = with_memory();
    d.ok(&["commit", "-m", "baseline"]);
    store.write(json!({"labels": "1"}), "relabel");
    let missing = d.tmp().join("no-such-dir/p.json");
    // Planning refreshes the snapshot cache, as `--dry-run` does, so this is
    // not `refused` (which wants nothing written at all).
    let out = d.tether(&["commit", "-m", "x", "--plan", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: plan file ") && err.contains("no-such-dir/p.json"),
        "{err}"
    );
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause once: {err}"
    );
    // Not the name of a temporary file the user never chose.
    assert!(
        !err.contains("at path") && !err.contains(".tether-tmp-"),
        "{err}"
    );
    assert_eq!(stdout(&out), "");
    assert!(!missing.exists());
}

#[test]
fn from_plan_refuses_dry_run_and_plan() {
    let (d, _, plan) = planned();
    let p = plan.to_str().unwrap();
    refused(
        &d,
        &["commit", "--from-plan", p, "--dry-run"],
        2,
        &["--dry-run"],
    );
    refused(
        &d,
        &["commit", "--from-plan", p, "--plan", p],
        2,
        &["--plan"],
    );
}

#[test]
fn a_tracked_workspace_toml_is_refused() {
    let (d, store) = with_memory();
    d.ok(&["commit", "-m", "baseline"]);
    d.git(&["add", "-f", ".tether/workspace.toml"]);
    d.git(&["commit", "-q", "-m", "track the per-checkout file"]);
    let says = [
        ".tether/workspace.toml",
        "per checkout",
        "git rm --cached .tether/workspace.toml",
    ];
    store.write(json!({"labels": "1"}), "relabel");
    let system = format!("system={}", store.root.display());
    for args in [
        &["status"][..],
        &["status", "--snapshot"],
        &["commit", "-m", "x"],
        &["add", "other", "--kind", "memory", "--set", &system],
    ] {
        refused(&d, args, 1, &says);
    }
    assert_eq!(store.tags().len(), 1, "nothing was pinned");

    // A clone brings the tracked file along, and is refused the same way.
    let clone = d.tmp().join("clone");
    let out = d
        .command("git", d.tmp())
        .args(["clone", "-q"])
        .arg(d.root())
        .arg(&clone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let before = crate::support::files_under(&clone, &clone.join(".tether"));
    for args in [&["status"][..], &["commit", "-m", "x"]] {
        let out = d.tether_in(&clone, args);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let err = stderr(&out);
        assert!(err.starts_with("error:"), "{}", describe(&out));
        for s in says {
            assert!(err.contains(s), "{s:?}: {}", describe(&out));
        }
    }
    assert_eq!(
        crate::support::files_under(&clone, &clone.join(".tether")),
        before
    );
    assert_eq!(store.tags().len(), 1, "nothing was pinned");
}

#[test]
fn usage_errors_exit_2() {
    let (d, _) = with_memory();
    refused(&d, &["add", "other"], 2, &["--kind"]);
    refused(&d, &["status", "--bogus"], 2, &["--bogus"]);
    refused(
        &d,
        &["status", "--snapshot", "--no-snapshot"],
        2,
        &["--no-snapshot"],
    );
    refused(&d, &["frobnicate"], 2, &["frobnicate"]);
}
