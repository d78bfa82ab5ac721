//! `tether repair` end to end, through the binary (spec 09, "ops, undo,
//! repair"; spec 07, "What a plan checks before it applies"): pins deleted
//! by hand are pinned again, under the next generation where the store
//! never reuses a deleted tag's name; a drifted pin is reported and left
//! alone; `--all-history`; plans saved, applied and refused as stale; a lost
//! working branch forked again. The stores are the memory backend's, read
//! and written with plain file operations in its documented layout.

use crate::support::{Dataset, MemoryStore, lines};
use serde_json::{Value, json};

/// A dataset with one memory object, committed once; the pin it made.
fn committed(tombstones: bool) -> (Dataset, MemoryStore, String) {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "labels");
    let system = format!("system={}", store.root.display());
    let mut args = vec!["add", "zarr/imaging", "--kind", "memory", "--set", &system];
    if tombstones {
        args.extend(["--set", "tombstones=true"]);
    }
    d.ok(&args);
    d.ok(&["commit", "-m", "baseline"]);
    let pin = pin_ref(&d);
    assert_eq!(store.tag(&pin), Some(store.head()));
    (d, store, pin)
}

/// The pin ref the working tree's manifest names.
fn pin_ref(d: &Dataset) -> String {
    d.manifest("zarr/imaging")["pin"]["ref"]
        .as_str()
        .expect("a pinned object")
        .to_string()
}

fn pinned_index(d: &Dataset) -> String {
    std::fs::read_to_string(d.root().join(".git/tether-pinned.jsonl")).unwrap_or_default()
}

#[test]
fn a_pin_deleted_by_hand_is_pinned_again() {
    let (d, store, pin) = committed(false);
    let snapshot = store.head();
    let manifest = std::fs::read(d.root().join(".tether/objects/zarr/imaging.toml")).unwrap();
    d.ok(&["repair"]);
    assert_eq!(d.ok(&["repair"]), "nothing to repair\n");

    store.delete_tag(&pin);
    let (out, _) = d.run(&["verify"], 1);
    assert!(out.starts_with("missing zarr/imaging"), "{out}");

    // The dry run names the action and writes nothing.
    let written = d.written();
    let (out, _) = d.run(&["repair", "--dry-run"], 0);
    assert_eq!(
        lines(&out),
        [
            "plan: repair (1 write(s))".to_string(),
            format!(
                "  repin zarr/imaging [memory] {pin} native ref gone; the store still has the state"
            ),
        ]
    );
    assert_eq!(d.written(), written);
    assert_eq!(store.tag(&pin), None);

    let (out, _) = d.run(&["repair"], 0);
    assert_eq!(out, format!("repinned zarr/imaging -> {pin}\n"));
    assert_eq!(store.tag(&pin), Some(snapshot));
    assert_eq!(
        std::fs::read(d.root().join(".tether/objects/zarr/imaging.toml")).unwrap(),
        manifest,
        "the manifest stays as it was"
    );
    assert_eq!(d.ok(&["verify"]), "ok zarr/imaging\n");
    let op = d.newest_op();
    assert_eq!(op["command"], "repair");
    assert_eq!(op["status"], "done");
    assert_eq!(op["plan"]["actions"][0]["op"], "repin");
    assert!(pinned_index(&d).contains(&pin));
    assert_eq!(d.ok(&["repair"]), "nothing to repair\n");
}

#[test]
fn a_store_that_never_reuses_a_tag_name_gets_the_next_generation() {
    let (d, store, pin) = committed(true);
    let snapshot = store.head();
    let pin_id = pin.strip_prefix("tether.").unwrap().to_string();

    store.tombstone_tag(&pin);
    let r = d.json(&["repair"], 0);
    let second = format!("{pin}.2");
    assert_eq!(
        r,
        json!({"repinned": {"zarr/imaging": pin_id}, "reforked": {}, "failed": {}, "notes": []})
    );
    assert_eq!(store.tag(&second), Some(snapshot.clone()));
    assert_eq!(store.tag(&pin), None, "the tombstoned name is not reused");
    // The pin id and the manifest stay; readers resolve the live generation.
    assert_eq!(pin_ref(&d), pin);
    assert_eq!(
        d.ok(&["verify"]),
        format!("ok zarr/imaging: pinned as {second}\n")
    );
    let v = d.json(&["verify"], 0);
    assert_eq!(
        v["zarr/imaging"],
        json!({"status": "ok", "message": format!("pinned as {second}")})
    );
    let opened = d.json(&["open", "zarr/imaging", "-r", "HEAD"], 0);
    assert_eq!(
        opened["address"],
        format!("{}#{second}", store.root.display())
    );
    // The index names pins by id, which this clone recorded when it committed.
    assert!(pinned_index(&d).contains(&pin_id));

    // Again: `.3`, and the human output names it.
    store.tombstone_tag(&second);
    let (out, _) = d.run(&["repair"], 0);
    assert_eq!(out, format!("repinned zarr/imaging -> {pin}.3\n"));
    assert_eq!(store.tag(&format!("{pin}.3")), Some(snapshot));
    assert_eq!(
        d.ok(&["verify"]),
        format!("ok zarr/imaging: pinned as {pin}.3\n")
    );
}

#[test]
fn a_drifted_pin_is_reported_not_overwritten_and_a_lost_state_fails() {
    let (d, store, pin) = committed(false);
    let snapshot = store.head();
    let elsewhere = store.write(json!({"labels": "other"}), "someone else's");
    store.set_tag(&pin, &elsewhere);

    let (out, _) = d.run(&["repair"], 0);
    let out = lines(&out);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        out[0].starts_with(&format!("zarr/imaging: pin {pin} points elsewhere")),
        "{out:?}"
    );
    assert!(out[0].contains("reported, not overwritten"), "{out:?}");
    assert_eq!(out[1], "nothing to repair");
    assert_eq!(
        store.tag(&pin),
        Some(elsewhere),
        "the drifted pin is left alone"
    );

    // A pin whose state is gone too cannot be rebuilt: FAILED, exit 3.
    store.delete_tag(&pin);
    store.delete_snapshot(&snapshot);
    let (out, _) = d.run(&["repair"], 3);
    assert!(
        out.contains(&format!(
            "FAILED zarr/imaging: pin {pin} is gone and so is its state"
        )),
        "{out}"
    );
    assert_eq!(lines(&out).len(), 1, "said once: {out}");
    let (out, _) = d.run(&["repair", "--dry-run"], 0);
    assert!(
        out.contains(&format!("cannot rebuild zarr/imaging: pin {pin} is gone")),
        "{out}"
    );
    let r = d.json(&["repair"], 3);
    assert_eq!(r["repinned"], json!({}));
    assert!(r["failed"]["zarr/imaging"].is_string(), "{r}");
    assert_eq!(store.tag(&pin), None);
}

#[test]
fn all_history_repins_what_older_commits_pinned() {
    let (d, store, first) = committed(false);
    let first_commit = d.rev("HEAD");
    let first_snapshot = store.head();
    store.write(json!({"labels": "1"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    let second = pin_ref(&d);
    assert_ne!(first, second);

    store.delete_tag(&first);
    // The working tree's pin is fine: a plain repair has nothing to do.
    assert_eq!(d.ok(&["repair"]), "nothing to repair\n");
    let (out, _) = d.run(&["verify", "--all-history"], 1);
    assert!(out.contains("missing"), "{out}");

    let label = format!("{}:zarr/imaging", &first_commit[..12]);
    let (out, _) = d.run(&["repair", "--all-history", "zarr/"], 0);
    assert_eq!(out, format!("repinned {label} -> {first}\n"));
    assert_eq!(store.tag(&first), Some(first_snapshot));
    d.ok(&["verify", "--all-history"]);

    // A selector nothing matches is refused.
    let (_, err) = d.run(&["repair", "--all-history", "nope"], 1);
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn a_saved_plan_applies_once_and_goes_stale_with_history() {
    let (d, store, pin) = committed(false);
    store.delete_tag(&pin);
    let plan_file = d.tmp().join("repair-plan.json");
    let plan_path = plan_file.to_str().unwrap();
    let (out, _) = d.run(&["repair", "--plan", plan_path], 0);
    assert!(
        out.contains(&format!("repin zarr/imaging [memory] {pin}")),
        "{out}"
    );
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    assert_eq!(plan["command"], "repair");
    let kinds: Vec<&str> = plan["preconditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["workspace_id", "history_digest"]);
    assert_eq!(plan["actions"][0]["op"], "repin");
    assert_eq!(plan["actions"][0]["target"], pin);
    assert_eq!(store.tag(&pin), None, "--plan writes nothing");

    // A commit anywhere moves the history digest: the plan is stale.
    std::fs::write(d.root().join("README"), "notes\n").unwrap();
    d.git(&["add", "README"]);
    d.git(&["commit", "-q", "-m", "unrelated"]);
    let written = d.written();
    let (_, err) = d.run(&["repair", "--from-plan", plan_path], 1);
    assert!(err.contains("history"), "{err}");
    assert_eq!(d.written(), written);
    assert_eq!(store.tag(&pin), None, "a stale plan does nothing");

    // Planned again, it applies; another selection than the plan's is refused.
    d.run(&["repair", "--plan", plan_path, "zarr/imaging"], 0);
    let (_, err) = d.run(&["repair", "--from-plan", plan_path, "zarr/"], 1);
    assert!(err.contains("zarr/"), "{err}");
    let (out, _) = d.run(&["repair", "--from-plan", plan_path, "zarr/imaging"], 0);
    assert_eq!(out, format!("repinned zarr/imaging -> {pin}\n"));
    assert_eq!(store.tag(&pin), Some(store.head()));
}

#[test]
fn a_lost_working_branch_is_forked_again_while_it_is_absent() {
    let (d, store, pin) = committed(false);
    let branch = d.fork_bookmark("relabel", "zarr/imaging");
    let snapshot = store.head();
    assert_eq!(store.branch(&branch), Some(snapshot.clone()));
    assert_eq!(d.ok(&["repair"]), "nothing to repair\n");

    store.delete_branch(&branch);
    let plan_file = d.tmp().join("refork.json");
    let plan_path = plan_file.to_str().unwrap();
    let (out, _) = d.run(&["repair", "--plan", plan_path], 0);
    assert!(
        out.contains(&format!(
            "refork zarr/imaging [memory] {branch} forked again from pin {pin}"
        )),
        "{out}"
    );
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_file).unwrap()).unwrap();
    let absent: Vec<&Value> = plan["preconditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "ref_absent")
        .collect();
    assert_eq!(absent.len(), 1, "{plan}");
    assert_eq!(absent[0]["key"], "zarr/imaging");

    // Someone recreates the branch meanwhile: the plan is stale, and the
    // branch they made is left as it is.
    let theirs = store.write(json!({"labels": "theirs"}), "theirs");
    store.set_branch(&branch, &theirs);
    let (_, err) = d.run(&["repair", "--from-plan", plan_path], 1);
    assert!(err.contains(&branch), "{err}");
    assert_eq!(store.branch(&branch), Some(theirs));

    // Lost again: repair forks it from the pin the manifest names.
    store.delete_branch(&branch);
    let r = d.json(&["repair"], 0);
    assert_eq!(r["reforked"], json!({"zarr/imaging": branch}));
    assert_eq!(r["repinned"], json!({}));
    assert_eq!(store.branch(&branch), Some(snapshot));
    assert_eq!(d.ok(&["repair"]), "nothing to repair\n");

    // Both lost: the pin first, then the branch from it, in one repair.
    store.delete_branch(&branch);
    store.delete_tag(&pin);
    let (out, _) = d.run(&["repair", "zarr/imaging"], 0);
    assert_eq!(
        lines(&out),
        [
            format!("repinned zarr/imaging -> {pin}"),
            format!("reforked zarr/imaging -> {branch}"),
        ]
    );
    assert_eq!(store.branch(&branch), store.tag(&pin));
}

#[test]
fn a_dry_run_says_how_far_an_interrupted_operation_got() {
    let (d, store, _) = committed(false);
    store.write(json!({"labels": "1"}), "relabel");
    // A commit killed after its first pin: the journal has its start and one
    // progress record, and no completion mark.
    let plan = d.json(&["commit", "-m", "killed", "--dry-run"], 0);
    let ops = d.root().join(".tether/ops.jsonl");
    let journal = tether::oplog::Journal::open(&ops);
    let mut op = journal
        .start(tether::oplog::NewOp::new("commit").plan_json(plan.clone()))
        .unwrap();
    let target = plan["actions"][0]["target"].as_str().unwrap().to_string();
    op.progress(json!({"pinned": "zarr/imaging", "ref": target, "created": true}))
        .unwrap();
    drop(op);
    let (out, _) = d.run(&["ops"], 0);
    assert!(out.contains("INCOMPLETE"), "{out}");

    let (out, _) = d.run(&["repair", "--dry-run"], 0);
    let note = lines(&out)
        .into_iter()
        .find(|l| l.contains("INCOMPLETE"))
        .unwrap_or_else(|| panic!("a note on the interrupted commit:\n{out}"));
    assert!(
        note.contains(&format!("INCOMPLETE {} commit", op_id(&d))),
        "{note}"
    );
    assert!(note.contains("1 of 1 planned effect(s) landed"), "{note}");
    assert!(
        note.contains(&format!("done: pinned zarr/imaging -> {target};")),
        "{note}"
    );
    assert!(
        note.contains("running `tether commit` again finishes it"),
        "{note}"
    );
}

/// The id of the newest operation.
fn op_id(d: &Dataset) -> String {
    d.newest_op()["id"].as_str().unwrap().to_string()
}

#[test]
fn a_gc_you_regret_is_repaired_under_the_next_generation() {
    // spec 09 ("ops, undo, repair"), 14 ("Icechunk never reuses a deleted tag
    // name"): a pin `gc` released in a store with tombstones comes back, once
    // its commit is back, as `tether.<pin_id>.2`.
    let (d, store, _) = committed(true);
    let first = d.rev("HEAD");
    let relabelled = store.write(json!({"labels": "1"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    let second = d.rev("HEAD");
    let pin = pin_ref(&d);

    // The commit leaves history; gc releases the pin only it referenced.
    d.git(&["reset", "-q", "--hard", &first]);
    d.ok(&["gc", "--no-dry-run"]);
    assert_eq!(store.tag(&pin), None, "gc released {pin}");

    // The commit comes back (the reflog); its pin is missing, its state is not.
    d.git(&["reset", "-q", "--hard", &second]);
    let (out, _) = d.run(&["verify"], 1);
    assert!(out.starts_with("missing zarr/imaging"), "{out}");
    let (out, _) = d.run(&["repair"], 0);
    assert_eq!(out, format!("repinned zarr/imaging -> {pin}.2\n"));
    assert_eq!(store.tag(&format!("{pin}.2")), Some(relabelled));
    let mut verified = lines(&d.ok(&["verify", "--all-history"]));
    verified.sort();
    let mut expected = vec![
        format!("ok {}:zarr/imaging", &first[..12]),
        format!("ok {}:zarr/imaging: pinned as {pin}.2", &second[..12]),
    ];
    expected.sort();
    assert_eq!(verified, expected);
}
