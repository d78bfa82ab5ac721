//! The crash suite (issue 29): the `tether` binary killed with SIGKILL at
//! each side effect of `commit`, `pull`, `new`, `open`, `restore`, `promote`,
//! `gc`, `drop`, `undo` and `repair`, at the deterministic points of
//! `host/src/fault.rs`, then `status`, `ops`, `verify`, `repair --dry-run`
//! and the same command again.
//!
//! Each scenario sets up a dataset on memory stores kept in local
//! directories, runs the command once to completion with
//! `TETHER_FAULT_TRACE` to learn the points it passes (and how often), and
//! then, once per point it passed, sets the same dataset up afresh and runs
//! the command with `TETHER_FAULT=NAME#N`. After each kill:
//!
//! - the process died of SIGKILL (the point was reached);
//! - 0 lost pins: every pin a manifest of the working tree names is a ref in
//!   its store, now and after recovery; `verify --all-history` passes after
//!   recovery (every pin history names);
//! - 0 unaccounted refs: every `tether.*` ref in every store is named by the
//!   checkout's operation log (`.tether/ops.jsonl`), now and after recovery;
//! - `status`, `ops`, `verify` and `repair --dry-run` answer (no crash, no
//!   refusal), and `ops` shows the killed operation INCOMPLETE unless it was
//!   killed after its completion mark;
//! - running the same command again (spec 14, "An interrupted command")
//!   finishes with exit 0.
//!
//! The stores are read with plain file reads in the memory plugin's
//! documented layout (`plugins/memory/src/lib.rs`, "Storage layout").

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{Dataset, MemoryStore, Vcs, describe, stdout};
use serde_json::{Value, json};

/// A dataset set up just before the command under test, and the roots of
/// every store tether may write refs into.
struct Prepared {
    d: Dataset,
    stores: Vec<PathBuf>,
    args: Vec<String>,
}

/// One command under test: how to set it up, and which points it must pass.
struct Scenario {
    name: &'static str,
    setup: fn(Vcs) -> Prepared,
    /// The points the command must reach; their union over the scenarios is
    /// the documented list of `fault.rs` (see `every_point_is_documented_and_tested`).
    points: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "commit",
        setup: commit_setup,
        points: &[
            "journal.started",
            "store.pin",
            "journal.progress",
            "listing.write",
            "manifest.write",
            "workspace.write",
            "vcs.commit",
            "index.add",
            "journal.done",
        ],
    },
    Scenario {
        name: "pull",
        setup: pull_setup,
        points: &[
            "journal.started",
            "store.pin",
            "journal.progress",
            "manifest.write",
            "vcs.commit",
            "index.add",
            "journal.done",
        ],
    },
    Scenario {
        name: "new",
        setup: new_setup,
        points: &[
            "journal.started",
            "vcs.bookmark",
            "vcs.switch",
            "store.fork",
            "journal.progress",
            "workspace.write",
            "journal.done",
        ],
    },
    Scenario {
        name: "open",
        setup: open_setup,
        points: &[
            "journal.started",
            "store.fork",
            "journal.progress",
            "workspace.write",
            "journal.done",
        ],
    },
    Scenario {
        name: "restore",
        setup: restore_setup,
        points: &[
            "journal.started",
            "store.fork",
            "journal.progress",
            "workspace.write",
            "journal.done",
        ],
    },
    Scenario {
        name: "promote",
        setup: promote_setup,
        points: &[
            "journal.started",
            "store.move",
            "journal.progress",
            "vcs.bookmark",
            "workspace.write",
            "journal.done",
        ],
    },
    Scenario {
        name: "gc",
        setup: gc_setup,
        points: &[
            "journal.started",
            "store.unpin",
            "store.delete-ref",
            "index.remove",
            "listing.delete",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "drop",
        setup: drop_setup,
        points: &[
            "journal.started",
            "vcs.switch",
            "vcs.bookmark",
            "store.unpin",
            "store.delete-ref",
            "store.delete-store",
            "index.remove",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "undo_new",
        setup: undo_new_setup,
        points: &[
            "journal.started",
            "store.delete-ref",
            "vcs.switch",
            "vcs.bookmark",
            "workspace.write",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "undo_commit",
        setup: undo_commit_setup,
        points: &[
            "journal.started",
            "vcs.reset",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "undo_remove",
        setup: undo_remove_setup,
        points: &[
            "journal.started",
            "manifest.write",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "undo_gc",
        setup: undo_gc_setup,
        points: &[
            "journal.started",
            "listing.write",
            "journal.progress",
            "journal.done",
        ],
    },
    Scenario {
        name: "repair",
        setup: repair_setup,
        points: &[
            "journal.started",
            "store.pin",
            "store.fork",
            "journal.progress",
            "journal.done",
        ],
    },
];

// ---- Setups ---------------------------------------------------------------

/// Two memory objects, `img` and `tab`, each with a first state, and a
/// versioned directory `raw` (whose commits write listings), committed once
/// on `main` ("adopt").
fn adopted(vcs: Vcs) -> Prepared {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    img.write(json!({"labels": "0"}), "img v1");
    let tab = d.memory_store("tab");
    tab.write(json!({"rows": 1}), "tab v1");
    d.add_memory("img", &img);
    d.add_memory("tab", &tab);
    std::fs::create_dir_all(d.data().join("raw")).unwrap();
    std::fs::write(d.data().join("raw/a.tif"), [1u8; 64]).unwrap();
    d.ok(&[
        "add",
        "raw",
        "--kind",
        "file",
        "--file",
        "versioned",
        "../data/raw",
    ]);
    d.ok(&["commit", "-m", "adopt"]);
    Prepared {
        stores: vec![img.root.clone(), tab.root.clone()],
        d,
        args: Vec::new(),
    }
}

fn store(p: &Prepared, i: usize) -> MemoryStore {
    MemoryStore {
        root: p.stores[i].clone(),
    }
}

fn with_args(mut p: Prepared, args: &[&str]) -> Prepared {
    p.args = args.iter().map(|a| a.to_string()).collect();
    p
}

/// Both stores moved on `main` and a new directory `more` was added;
/// `commit` pins both stores and writes `more`'s listing. (A change in
/// `raw`, a system without branches, is `pull`'s to take: spec/06.)
fn commit_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    store(&p, 0).write(json!({"labels": "1"}), "img v2");
    store(&p, 1).write(json!({"rows": 2}), "tab v2");
    std::fs::create_dir_all(p.d.data().join("more")).unwrap();
    std::fs::write(p.d.data().join("more/b.tif"), [2u8; 64]).unwrap();
    p.d.ok(&[
        "add",
        "more",
        "--kind",
        "file",
        "--file",
        "versioned",
        "../data/more",
    ]);
    with_args(p, &["commit", "-m", "next"])
}

/// Both stores moved on `main`; `pull` on the trunk pins and commits them.
fn pull_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    store(&p, 0).write(json!({"labels": "2"}), "img upstream");
    store(&p, 1).write(json!({"rows": 3}), "tab upstream");
    with_args(p, &["pull"])
}

/// `new -b feat --eager`: a bookmark, the switch, two forks.
fn new_setup(vcs: Vcs) -> Prepared {
    with_args(adopted(vcs), &["new", "-b", "feat", "--eager"])
}

/// On a lazy bookmark, `open img` forks its working branch.
fn open_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["new", "-b", "feat"]);
    with_args(p, &["open", "img"])
}

/// On an eager bookmark, `restore img --from` the first commit resets the
/// working branch to the state that commit pinned.
fn restore_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    let first = p.d.head();
    store(&p, 0).write(json!({"labels": "1"}), "img v2");
    p.d.ok(&["commit", "-m", "v2"]);
    p.d.ok(&["new", "-b", "sweep", "--eager"]);
    let mut p = with_args(p, &["restore", "img", "--from"]);
    p.args.push(first);
    p
}

/// Work on `feat` in both stores, committed; `promote` fast-forwards both
/// stores' `main` and the trunk bookmark.
fn promote_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["new", "-b", "feat", "--eager"]);
    let wr = p.d.working_ref("feat");
    store(&p, 0).write_on(&wr, json!({"labels": "feat"}), "img on feat");
    store(&p, 1).write_on(&wr, json!({"rows": 9}), "tab on feat");
    p.d.ok(&["commit", "-m", "feat work"]);
    with_args(p, &["promote"])
}

/// A listing no manifest names: `raw` changed and pulled, the pull undone,
/// and its manifest checked out again (git), so the listing the pull wrote
/// stays behind in the working tree.
fn orphan_listing(p: &Prepared) {
    std::fs::write(p.d.data().join("raw/a.tif"), [3u8; 64]).unwrap();
    p.d.ok(&["pull", "-m", "raw v2"]);
    p.d.ok(&["undo"]);
    p.d.git(&["checkout", "HEAD", "--", ".tether/objects"]);
}

/// A bookmark `side` with a commit of its own, deleted by hand after going
/// back to `main`, and an orphan listing: `gc --prune-bookmarks
/// --force-prune` releases side's pins, deletes its working branches (whose
/// heads only those pins held) and the listing.
fn gc_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["new", "-b", "side", "--eager"]);
    let wr = p.d.working_ref("side");
    store(&p, 0).write_on(&wr, json!({"labels": "side"}), "img on side");
    store(&p, 1).write_on(&wr, json!({"rows": 7}), "tab on side");
    p.d.ok(&["commit", "-m", "side work"]);
    p.d.ok(&["new", "main"]);
    p.d.delete_bookmark("side");
    orphan_listing(&p);
    with_args(
        p,
        &["gc", "--no-dry-run", "--prune-bookmarks", "--force-prune"],
    )
}

/// Spec 07's probe: on bookmark `probe`, a store made with `add --create`
/// and work in `img`, committed; `drop probe --delete-stores` leaves the
/// bookmark, deletes it, releases its pins and branches and the store.
fn drop_setup(vcs: Vcs) -> Prepared {
    let mut p = adopted(vcs);
    p.d.ok(&["new", "-b", "probe", "--eager"]);
    let probe = p.d.data().join("probe");
    let system = format!("system={}", probe.display());
    p.d.ok(&[
        "add", "probe", "--kind", "memory", "--set", &system, "--create",
    ]);
    let wr = p.d.working_ref("probe");
    MemoryStore {
        root: probe.clone(),
    }
    .write_on(&wr, json!({"emb": 1}), "probe data");
    store(&p, 0).write_on(&wr, json!({"labels": "probe"}), "img on probe");
    p.d.ok(&["commit", "-m", "probe"]);
    p.stores.push(probe);
    with_args(p, &["drop", "probe", "--delete-stores", "--no-dry-run"])
}

/// `undo` of `new -b scratch --eager`: the forks deleted, the working copy
/// back on `main`, the bookmark deleted.
fn undo_new_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["new", "-b", "scratch", "--eager"]);
    with_args(p, &["undo"])
}

/// `undo` of a commit: the VCS commit taken back, the manifests left as
/// working-tree edits.
fn undo_commit_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    store(&p, 0).write(json!({"labels": "1"}), "img v2");
    p.d.ok(&["commit", "-m", "v2"]);
    with_args(p, &["undo"])
}

/// `undo` of `remove tab`: its manifest written back.
fn undo_remove_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["remove", "tab"]);
    with_args(p, &["undo"])
}

/// `undo` of a `gc` that deleted an orphan listing: the listing written back.
fn undo_gc_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    orphan_listing(&p);
    p.d.ok(&["gc", "--no-dry-run"]);
    with_args(p, &["undo"])
}

/// Both pins deleted by hand in the stores, and `img`'s working branch of
/// an eager bookmark: `repair` pins both again and forks the branch again.
fn repair_setup(vcs: Vcs) -> Prepared {
    let p = adopted(vcs);
    p.d.ok(&["new", "-b", "feat", "--eager"]);
    for (i, key) in ["img", "tab"].iter().enumerate() {
        let pin = p.d.manifest(key)["pin"]["ref"]
            .as_str()
            .expect("a pinned object")
            .to_string();
        store(&p, i).delete_tag(&pin);
    }
    store(&p, 0).delete_branch(&p.d.working_ref("feat"));
    with_args(p, &["repair"])
}

// ---- The run --------------------------------------------------------------

/// `tether ARGS` in the dataset root with extra environment.
fn tether_env(d: &Dataset, args: &[String], env: &[(&str, &str)]) -> Output {
    let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run tether")
}

/// The points the command passes, in order, when it runs to completion.
fn trace(s: &Scenario, vcs: Vcs) -> Vec<String> {
    let p = (s.setup)(vcs);
    let file = p.d.tmp().join("fault-trace");
    let out = tether_env(
        &p.d,
        &p.args,
        &[("TETHER_FAULT_TRACE", file.to_str().unwrap())],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: tether {} without a fault should succeed:\n{}",
        s.name,
        p.args.join(" "),
        describe(&out)
    );
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let points: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(
        !points.is_empty(),
        "{}: no fault point was reached: is this tether built without its test-only \
         `fault-injection` hook (a --release test build)?",
        s.name
    );
    let reached: BTreeSet<&str> = points.iter().map(String::as_str).collect();
    for want in s.points {
        assert!(
            reached.contains(want),
            "{}: point {want} was not reached; the trace: {points:?}",
            s.name
        );
    }
    points
}

/// Each point of the trace once, as `NAME#N` (its `N`th hit).
fn kill_points(trace: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    trace
        .iter()
        .map(|name| {
            let n = seen.entry(name).or_default();
            *n += 1;
            format!("{name}#{n}")
        })
        .collect()
}

/// Run one scenario: learn its points, then kill it at each and recover.
fn run(s: &Scenario, vcs: Vcs) {
    let points = kill_points(&trace(s, vcs));
    let mut failures = Vec::new();
    for point in &points {
        if let Err(e) = crash_at(s, vcs, point) {
            failures.push(format!("--- killed at {point}:\n{e}"));
        }
    }
    let distinct: BTreeSet<&str> = points
        .iter()
        .filter_map(|p| p.split_once('#').map(|(name, _)| name))
        .collect();
    eprintln!(
        "crash: {} ({vcs:?}): killed at {} hit(s) of {} point(s)",
        s.name,
        points.len(),
        distinct.len()
    );
    assert!(
        failures.is_empty(),
        "{} ({vcs:?}): {} of {} kill point(s) failed:\n{}",
        s.name,
        failures.len(),
        points.len(),
        failures.join("\n")
    );
}

/// Set up, kill at `point`, look around, recover, check.
fn crash_at(s: &Scenario, vcs: Vcs, point: &str) -> Result<(), String> {
    let p = (s.setup)(vcs);
    let d = &p.d;
    let ops_before = journal_lines(d);
    // What the setup itself broke (repair's lost pins) is not the kill's.
    let before = damage(&p);
    let out = tether_env(d, &p.args, &[("TETHER_FAULT", point)]);
    if out.status.signal() != Some(SIGKILL) {
        return Err(format!(
            "tether {} was not killed at {point}:\n{}",
            p.args.join(" "),
            describe(&out)
        ));
    }
    let after_kill = damage(&p);
    let new_damage: Vec<&String> = after_kill.difference(&before).collect();
    if !new_damage.is_empty() {
        return Err(format!("after the kill:\n  {new_damage:?}"));
    }

    // Looking around answers: `status` and `verify` describe what the kill
    // left (exit 1 when an object is `error` or a report is not `ok`, say a
    // working branch an interrupted undo deleted), `ops` and `repair
    // --dry-run` succeed.
    let status = expect(d, &["status"], 0..=1)?;
    if !status.starts_with("dataset ") {
        return Err(format!("status says no dataset:\n{status}"));
    }
    let ops = expect(d, &["ops", "--json"], 0..=0)?;
    let ops: Value = serde_json::from_str(&ops).map_err(|e| format!("ops --json: {e}"))?;
    let incomplete = ops
        .as_array()
        .map(|a| a.iter().any(|e| e["status"] == "started"))
        .unwrap_or(false);
    let started = journal_lines(d) > ops_before;
    // An operation started and killed before its mark reads back INCOMPLETE.
    if started && !incomplete && !point.starts_with("journal.done#") {
        return Err(format!(
            "killed at {point}, yet `ops` shows no INCOMPLETE entry:\n{ops:#}"
        ));
    }
    expect(d, &["verify"], 0..=1)?;
    expect(d, &["repair", "--dry-run"], 0..=0)?;

    // The same command again finishes what is left: when an entry is
    // INCOMPLETE, or when the kill came before the operation started. (One
    // that completed is done: `undo` or `new -b` again would be another.)
    if incomplete || !started {
        let args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        let out = d.tether(&args);
        if out.status.code() != Some(0) {
            return Err(format!(
                "tether {} again should finish it:\n{}",
                args.join(" "),
                describe(&out)
            ));
        }
    }
    expect(d, &["verify", "--all-history"], 0..=0)?;
    expect(d, &["status"], 0..=0)?;
    let left = damage(&p);
    if !left.is_empty() {
        return Err(format!("after the re-run:\n  {left:?}"));
    }
    Ok(())
}

/// The signal `kill -9` sends.
const SIGKILL: i32 = 9;

/// Run `tether ARGS`; its stdout, or why its exit is not in `codes`.
fn expect(
    d: &Dataset,
    args: &[&str],
    codes: std::ops::RangeInclusive<i32>,
) -> Result<String, String> {
    let out = d.tether(args);
    match out.status.code() {
        Some(c) if codes.contains(&c) => Ok(stdout(&out)),
        _ => Err(format!(
            "tether {} should exit {codes:?}:\n{}",
            args.join(" "),
            describe(&out)
        )),
    }
}

fn journal_lines(d: &Dataset) -> usize {
    std::fs::read_to_string(d.root().join(".tether/ops.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Lost pins and unaccounted refs, read from the files themselves: a pin a
/// working-tree manifest names that is no ref in its store, and a `tether.*`
/// ref in a store that the operation log does not name.
fn damage(p: &Prepared) -> BTreeSet<String> {
    let d = &p.d;
    let mut problems = BTreeSet::new();
    // Every pin a working-tree manifest names exists in its store.
    for (key, manifest) in manifests(&d.root().join(".tether/objects")) {
        let Some(pin) = manifest
            .get("pin")
            .and_then(|p| p.get("ref"))
            .and_then(|r| r.as_str())
        else {
            continue;
        };
        let system = manifest
            .get("locator")
            .and_then(|l| l.get("system"))
            .and_then(|s| s.as_str())
            .unwrap_or_default();
        let tag = Path::new(system)
            .join("refs/tags")
            .join(format!("{pin}.json"));
        if !tag.is_file() {
            problems.insert(format!(
                "lost pin: {key}'s manifest names {pin}, gone from {system}"
            ));
        }
    }
    // Every tether ref in every store is named by the operation log.
    let journal = std::fs::read_to_string(d.root().join(".tether/ops.jsonl")).unwrap_or_default();
    for root in &p.stores {
        for r in tether_refs(root) {
            if !journal.contains(&r) {
                problems.insert(format!(
                    "unaccounted ref: {r} in {} is named by no operation",
                    root.display()
                ));
            }
        }
    }
    problems
}

/// Every manifest under `dir`, by key.
fn manifests(dir: &Path) -> Vec<(String, toml::Value)> {
    crate::support::files_under(dir, dir)
        .into_iter()
        .filter_map(|rel| {
            let key = rel.strip_suffix(".toml")?.to_string();
            let text = std::fs::read_to_string(dir.join(&rel)).ok()?;
            Some((key, toml::from_str(&text).ok()?))
        })
        .collect()
}

/// The `tether.*` tags and branches of a memory store (none when the store
/// is gone).
fn tether_refs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for kind in ["tags", "branches"] {
        let Ok(rd) = std::fs::read_dir(root.join("refs").join(kind)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(r) = name.strip_suffix(".json")
                && r.starts_with("tether.")
            {
                out.push(r.to_string());
            }
        }
    }
    out.sort();
    out
}

fn scenario(name: &str) -> &'static Scenario {
    SCENARIOS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

// ---- The tests ------------------------------------------------------------

#[test]
fn commit_git() {
    run(scenario("commit"), Vcs::Git);
}

#[test]
fn commit_jj() {
    run(scenario("commit"), Vcs::Jj);
}

#[test]
fn pull_git() {
    run(scenario("pull"), Vcs::Git);
}

#[test]
fn new_git() {
    run(scenario("new"), Vcs::Git);
}

#[test]
fn open_git() {
    run(scenario("open"), Vcs::Git);
}

#[test]
fn restore_git() {
    run(scenario("restore"), Vcs::Git);
}

#[test]
fn promote_git() {
    run(scenario("promote"), Vcs::Git);
}

#[test]
fn gc_git() {
    run(scenario("gc"), Vcs::Git);
}

#[test]
fn drop_git() {
    run(scenario("drop"), Vcs::Git);
}

#[test]
fn undo_new_git() {
    run(scenario("undo_new"), Vcs::Git);
}

#[test]
fn undo_commit_git() {
    run(scenario("undo_commit"), Vcs::Git);
}

#[test]
fn undo_remove_git() {
    run(scenario("undo_remove"), Vcs::Git);
}

#[test]
fn undo_gc_git() {
    run(scenario("undo_gc"), Vcs::Git);
}

#[test]
fn repair_git() {
    run(scenario("repair"), Vcs::Git);
}

/// The points `host/src/fault.rs` documents are exactly the ones the source
/// passes to `fault::point`/`fault::on_ok`, and every one is required of
/// some scenario above (each scenario asserts it reaches its points).
#[test]
fn every_point_is_documented_and_tested() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let doc = std::fs::read_to_string(src.join("fault.rs")).unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("//! - `"))
        .filter_map(|l| l.split_once("`:").map(|(name, _)| name.to_string()))
        .filter(|name| !name.contains('='))
        .collect();
    assert!(documented.len() >= 10, "{documented:?}");

    let mut used = BTreeSet::new();
    for rel in crate::support::files_under(&src, &src) {
        if rel == "fault.rs" || !rel.ends_with(".rs") {
            continue;
        }
        let text = std::fs::read_to_string(src.join(&rel)).unwrap();
        for call in ["fault::point(\"", "fault::on_ok(\""] {
            for (i, _) in text.match_indices(call) {
                let rest = &text[i + call.len()..];
                let name = &rest[..rest.find('"').unwrap()];
                used.insert(name.to_string());
            }
        }
    }
    assert_eq!(
        used, documented,
        "the points the source uses and the ones fault.rs documents differ"
    );
    let tested: BTreeSet<String> = SCENARIOS
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.to_string()))
        .collect();
    let untested: Vec<&String> = documented.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "points no scenario reaches: {untested:?}"
    );
}
