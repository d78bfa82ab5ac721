//! A committed `file = "immutable"` object whose bytes changed (spec/05,
//! "Drift"): `commit`, `commit KEY`, `commit --from-plan` with a plan made
//! before the change, `pull` and `snapshot` refuse with
//! `ImmutableObjectModified` (exit 1, spec/09) and write nothing;
//! `remove` + `add` + `commit` is the way out. On git and on jj.

use serde_json::{Value, json};

use crate::support::{Dataset, Vcs};

const REFUSAL: &str = "immutable object 'raw/plate1' changed since it was committed";

fn a_changed_immutable_directory_is_refused_everywhere(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let plate = d.data().join("plate1");
    std::fs::create_dir_all(&plate).unwrap();
    std::fs::write(plate.join("a.csv"), "well,value\nA1,1\n").unwrap();
    d.ok(&["add", "raw/plate1", "--kind", "file", "../data/plate1"]);
    let store = d.memory_store("mem");
    d.add_memory("mem", &store);
    d.ok(&["commit", "-m", "first"]);

    // A plan made while only the memory object moved.
    store.write(json!({"labels": "1"}), "relabel");
    let plan = d.tmp().join("plan.json");
    d.ok(&["commit", "-m", "planned", "--plan", plan.to_str().unwrap()]);

    // The instrument rewrites a file it should not have.
    std::fs::write(plate.join("a.csv"), "well,value\nA1,999\n").unwrap();
    let (_, err) = d.run(&["status", "--snapshot"], 1);
    assert!(err.contains(REFUSAL), "{err}");

    let written = d.written();
    let history = d.history();
    for args in [
        &["commit", "-m", "nightly"][..],
        &["commit", "raw/plate1", "-m", "nightly"],
        &["commit", "raw/", "-m", "nightly"],
        &["commit", "-m", "nightly", "--no-snapshot"],
        &["commit", "--from-plan", plan.to_str().unwrap()],
        &["pull"],
        &["pull", "--key", "raw/plate1"],
    ] {
        let (out, err) = d.run(args, 1);
        assert!(err.contains(REFUSAL), "{args:?}: {err}");
        assert!(!out.contains("recorded"), "{args:?}: {out}");
        assert_eq!(d.written(), written, "{args:?} wrote nothing");
        assert_eq!(d.history(), history, "{args:?} made no commit");
        assert!(
            d.uncommitted().is_empty(),
            "{args:?}: {:?}",
            d.uncommitted()
        );
    }
    // The error class, as --json reports it.
    for args in [
        &["commit", "-m", "nightly", "--json"][..],
        &["pull", "--json"],
    ] {
        let (out, _) = d.run(args, 1);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["error"]["class"], "ImmutableObjectModified",
            "{args:?}: {out}"
        );
    }
    // `snapshot` reports it as `status` does.
    let (_, err) = d.run(&["snapshot"], 1);
    assert!(err.contains(REFUSAL), "{err}");
    // The refusal stays: status still says error, not clean.
    let (_, err) = d.run(&["status"], 1);
    assert!(err.contains(REFUSAL), "{err}");

    // The other object can still be committed on its own.
    let (out, _) = d.run(&["commit", "mem", "-m", "relabel"], 0);
    assert!(out.contains("committed "), "{out}");
    assert_eq!(d.changed_files(&d.head()), [".tether/objects/mem.toml"]);

    // The way out: remove, add again, commit.
    d.ok(&["remove", "raw/plate1"]);
    d.ok(&["add", "raw/plate1", "--kind", "file", "../data/plate1"]);
    let (out, _) = d.run(&["commit", "-m", "re-register plate1"], 0);
    assert!(
        out.contains("recorded raw/plate1 (not recoverable)"),
        "{out}"
    );
    let (out, _) = d.run(&["status", "--snapshot"], 0);
    assert!(!out.contains("error"), "{out}");
    assert!(d.uncommitted().is_empty(), "{:?}", d.uncommitted());
}

for_each_vcs!(a_changed_immutable_directory_is_refused_everywhere);
