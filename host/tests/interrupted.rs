//! Interrupted operations (issue 29, point 7; spec 15, "An interrupted
//! command"; spec 10, "Operation log"): a killed command is finished by
//! running it again, `repair --dry-run` says which entries are already
//! finished and stays short, a `gc` plan applied twice says what it did, and
//! the pins a killed commit left once its store moved on are named by
//! `repair`, handed to `gc` when `repair` closes the entry, and released.
//!
//! A kill is simulated as `repair.rs` does it: the journal is left as the
//! killed process would leave it (its `started` record and the progress of
//! the effects that landed, no completion mark), and those effects are made
//! by hand in the VCS and the memory store.

use crate::support::{Dataset, MemoryStore, lines, stderr, stdout};
use serde_json::{Value, json};
use tether::oplog::{Journal, NewOp};

fn journal(d: &Dataset) -> Journal {
    Journal::open(d.root().join(".tether/ops.jsonl"))
}

/// A dataset with one memory object `img`, committed once.
fn committed() -> (Dataset, MemoryStore) {
    let d = Dataset::init();
    let img = d.memory_store("img");
    img.write(json!({"v": 0}), "first");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "baseline"]);
    (d, img)
}

fn op<'a>(ops: &'a [Value], id: &str) -> &'a Value {
    ops.iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no operation {id}: {ops:?}"))
}

/// `new -b x` killed after the VCS moved (`switched`) or only after it
/// created the bookmark: the journal entry and the VCS as the kill left them.
fn kill_new_b(d: &Dataset, name: &str, switched: bool) -> String {
    let plan = d.json(&["new", "-b", name, "--dry-run"], 0);
    let commit = plan["context"]["vcs"]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    let ws = tether::model::WorkspaceState::read(&d.root().join(".tether/workspace.toml"))
        .unwrap()
        .unwrap();
    let mut op = journal(d)
        .start(
            NewOp::new("new")
                .plan_json(plan)
                .pre("workspace", ws.to_json()),
        )
        .unwrap();
    d.git(&["branch", name, &commit]);
    op.progress(json!({"vcs": "created", "bookmark": name, "commit": commit}))
        .unwrap();
    if switched {
        d.git(&["switch", "-q", name]);
        op.progress(json!({"vcs": "switched", "bookmark": name}))
            .unwrap();
    }
    op.id().to_string()
}

#[test]
fn a_killed_new_b_is_finished_by_running_it_again() {
    for switched in [true, false] {
        let (d, _) = committed();
        let id = kill_new_b(&d, "x", switched);
        assert_eq!(d.newest_op()["status"], "started", "INCOMPLETE");
        if switched {
            // The VCS is on x, workspace.toml still on main: status points
            // at the command that finishes the move, not at going back.
            let (out, _) = d.run(&["status"], 0);
            assert!(
                out.contains(&format!("interrupted `tether new` (operation {id})"))
                    && out.contains("`tether new -b x` finishes it"),
                "{out}"
            );
            assert!(!out.contains("tether new main"), "{out}");
        }

        let out = d.ok(&["new", "-b", "x"]);
        assert!(out.contains("on bookmark x"), "{out}");
        assert_eq!(d.git_branch(), "x");
        let ws = tether::model::WorkspaceState::read(&d.root().join(".tether/workspace.toml"))
            .unwrap()
            .unwrap();
        assert_eq!(ws.bookmark.as_deref(), Some("x"));
        assert_eq!(ws.pending_forks.get("img"), Some(&d.working_ref("x")));

        // The interrupted entry is closed by the run that finished it.
        let ops = d.ops();
        let finisher = ops[0]["id"].as_str().unwrap().to_string();
        assert_eq!(ops[0]["command"], "new");
        assert_eq!(ops[0]["status"], "done");
        let killed = op(&ops, &id);
        assert_eq!(killed["status"], "closed", "{killed}");
        assert_eq!(killed["result"]["closed_by"], json!(finisher));
        let listed = d.ok(&["ops"]);
        let line = lines(&listed)
            .into_iter()
            .find(|l| {
                l.split(' ')
                    .next()
                    .is_some_and(|short| id.starts_with(short))
            })
            .unwrap();
        assert!(
            line.contains(&format!("(interrupted; closed by {finisher})")),
            "{line}"
        );
        assert!(!line.contains("INCOMPLETE"), "{line}");
        let (plan, _) = d.run(&["repair", "--dry-run"], 0);
        assert!(!plan.contains("INCOMPLETE"), "{plan}");
        // A closed entry is still not one undo can reverse.
        let (_, err) = d.run(&["undo", &id], 1);
        assert!(err.contains("closed by"), "{err}");
    }
}

#[test]
fn a_bookmark_not_made_by_an_interrupted_new_is_still_refused() {
    let (d, _) = committed();
    d.git(&["branch", "x"]);
    let (_, err) = d.run(&["new", "-b", "x"], 1);
    assert!(err.contains("bookmark \"x\" already exists"), "{err}");
    // Nor one an interrupted `new -b` made that moved on since.
    let d2 = committed().0;
    kill_new_b(&d2, "y", false);
    d2.git(&["switch", "-q", "y"]);
    d2.commit_by_hand("moved on");
    d2.git(&["switch", "-q", "main"]);
    let (_, err) = d2.run(&["new", "-b", "y"], 1);
    assert!(err.contains("already exists"), "{err}");
}

/// A commit killed after its pin landed, then the store moving on: the
/// journal as the kill left it, and the pin in the store. Returns the
/// entry's id and the pin ref.
fn kill_commit_after_its_pin(d: &Dataset, img: &MemoryStore) -> (String, String) {
    let state = img.write(json!({"v": 1}), "v1");
    let plan = d.json(&["commit", "-m", "killed", "--dry-run"], 0);
    let target = plan["actions"][0]["target"].as_str().unwrap().to_string();
    let mut op = journal(d)
        .start(NewOp::new("commit").plan_json(plan))
        .unwrap();
    img.set_tag(&target, &state);
    op.progress(json!({"pinned": "img", "ref": target, "created": true}))
        .unwrap();
    (op.id().to_string(), target)
}

#[test]
fn pins_a_finished_commit_left_are_named_by_repair_and_released_after_it_closes_the_entry() {
    let (d, img) = committed();
    let (id, left) = kill_commit_after_its_pin(&d, &img);

    // Not finished yet: the re-run is what finishes it.
    let (plan, _) = d.run(&["repair", "--dry-run"], 0);
    let note = lines(&plan)
        .into_iter()
        .find(|l| l.contains(&format!("INCOMPLETE {id} commit")))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(
        note.contains("running `tether commit` again finishes it"),
        "{note}"
    );

    // The store moves on before the re-run, which pins the new state.
    let now = img.write(json!({"v": 2}), "v2");
    d.ok(&["commit", "-m", "rerun"]);
    let rerun = d.newest_op()["id"].as_str().unwrap().to_string();
    let pin = d.manifest("img")["pin"]["ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(pin, left);
    assert_eq!(img.tag(&pin), Some(now));

    // repair --dry-run no longer says a re-run finishes it; it names the
    // run that did and the pin that is left.
    let (plan, _) = d.run(&["repair", "--dry-run"], 0);
    let note = lines(&plan)
        .into_iter()
        .find(|l| l.contains(&format!("INCOMPLETE {id} commit")))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(!note.contains("again finishes it"), "{note}");
    assert!(note.contains(&format!("finished by {rerun}")), "{note}");
    assert!(
        note.contains(&format!(
            "`tether gc` releases the 1 pin(s) it left that no manifest names: {left}"
        )),
        "{note}"
    );

    // Until the entry is closed, gc keeps what it set out to create.
    d.ok(&["gc", "--no-dry-run"]);
    assert!(
        img.tag(&left).is_some(),
        "an INCOMPLETE entry's pin is kept"
    );

    let out = d.ok(&["repair"]);
    assert!(
        out.contains(&format!(
            "closed interrupted operation {id} (finished by {rerun}; 1 pin(s) left for `tether gc`)"
        )),
        "{out}"
    );
    let ops = d.ops();
    assert_eq!(op(&ops, &id)["status"], "closed");
    assert_eq!(ops[0]["command"], "repair");
    assert_eq!(op(&ops, &id)["result"]["closed_by"], ops[0]["id"]);
    let (plan, _) = d.run(&["repair", "--dry-run"], 0);
    assert!(!plan.contains("INCOMPLETE"), "{plan}");

    // The documented step: gc releases it now, and nothing a manifest names.
    let r: Value = serde_json::from_str(&d.ok(&["gc", "--no-dry-run", "--json"])).unwrap();
    assert_eq!(
        r["unpinned"]["memory"],
        json!([left.trim_start_matches("tether.")]),
        "{r}"
    );
    assert!(img.tag(&left).is_none());
    assert!(img.tag(&pin).is_some());
    d.ok(&["verify"]);
}

#[test]
fn repair_dry_run_stays_short_about_a_large_interrupted_operation() {
    let (d, img) = committed();
    img.write(json!({"v": 1}), "v1");
    let mut plan = d.json(&["commit", "-m", "killed", "--dry-run"], 0);
    // A commit of many objects: 600 planned pins, as many landed.
    let action = plan["actions"][0].clone();
    plan["actions"] = Value::Array(vec![action; 600]);
    let target = plan["actions"][0]["target"].as_str().unwrap().to_string();
    let mut op = journal(&d)
        .start(NewOp::new("commit").plan_json(plan))
        .unwrap();
    for _ in 0..600 {
        op.progress(json!({"pinned": "img", "ref": target, "created": true}))
            .unwrap();
    }
    let (out, _) = d.run(&["repair", "--dry-run"], 0);
    let note = lines(&out)
        .into_iter()
        .find(|l| l.contains("INCOMPLETE"))
        .expect("a note on the interrupted commit");
    // Cut short in a failure message: the point is that it may be long.
    let shown = &note[..note.len().min(600)];
    assert!(note.len() < 1000, "{} characters: {shown}", note.len());
    assert!(
        note.contains("600 of 600 planned effect(s) landed"),
        "{shown}"
    );
    assert!(note.contains("and 597 more"), "{shown}");
}

#[test]
fn a_gc_plan_applied_again_says_its_pins_were_already_released() {
    let (d, img) = committed();
    img.write(json!({"v": 2}), "v2");
    d.ok(&["commit", "-m", "v2"]);
    let p2 = d.manifest("img")["pin"]["ref"]
        .as_str()
        .unwrap()
        .to_string();
    d.discard_last_commit();
    let saved = d.tmp().join("gc.json");
    let plan = d.ok(&["gc", "--plan", saved.to_str().unwrap()]);
    assert!(plan.contains(&format!("unpin img [memory] {p2}")), "{plan}");

    let first = d.ok(&["gc", "--from-plan", saved.to_str().unwrap()]);
    assert!(first.contains("unpinned 1 pin(s)"), "{first}");
    assert!(img.tag(&p2).is_none());

    let out = d.tether(&["gc", "--from-plan", saved.to_str().unwrap()]);
    let again = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!again.contains("unpinned"), "{again}");
    assert!(
        again.contains("1 pin(s) already released (this plan was applied before)"),
        "{again}"
    );
    let newest = d.newest_op();
    assert_eq!(
        newest["result"]["summary"],
        "unpinned 0 (1 already released), deleted 0 branch(es), 0 listing(s)",
        "{newest}"
    );
    let r: Value =
        serde_json::from_str(&d.ok(&["gc", "--from-plan", saved.to_str().unwrap(), "--json"]))
            .unwrap();
    assert_eq!(r["unpinned"], json!({}), "{r}");
    assert_eq!(
        r["already_released"]["memory"],
        json!([p2.trim_start_matches("tether.")])
    );
}
