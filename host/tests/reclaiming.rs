//! End-to-end tests of spec/07 (reclaiming storage): `gc`, `abandon`, `drop`
//! and `forget-workspace` with the memory plugin, worked example 5 of spec/08,
//! and a second clone, on git, on jj and on colocated jj (`for_each_vcs!`). Store
//! contents are read from the stores' own files; VCS state with that VCS's CLI.

use crate::support::{Dataset, MemoryStore, Vcs, describe, stderr, stdout};
use serde_json::{Value, json};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn pin_of(d: &Dataset, key: &str) -> String {
    d.manifest(key)["pin"]["ref"]
        .as_str()
        .expect("pinned")
        .to_string()
}

/// Every tag and branch of a store: what "exactly as before" compares.
fn refs(s: &MemoryStore) -> (Vec<String>, Vec<String>) {
    (s.tags(), s.branches())
}

/// Worked example 5: trials on a bookmark, abandon the tries, gc releases
/// only their pins; the `--pin record` object frees nothing.
fn abandon_trials_releases_only_their_pins(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    let scratch = d.memory_store("scratch");
    d.add_memory("img", &img);
    d.add_memory("scratch", &scratch);
    d.ok(&["set", "scratch", "--pin", "record"]);
    d.ok(&["commit", "-m", "adopt"]);
    d.ok(&["new", "-b", "sweep"]);
    let wr = d.working_ref("sweep");
    d.ok(&["open", "img"]);
    d.ok(&["open", "scratch"]);
    let mut pins = Vec::new();
    let mut commits = Vec::new();
    for i in 1..=4 {
        img.write_on(&wr, json!({"trial": i}), &format!("trial {i}"));
        scratch.write_on(&wr, json!({"rows": i}), &format!("rows {i}"));
        d.ok(&["commit", "-m", &format!("trial {i}")]);
        pins.push(pin_of(&d, "img"));
        commits.push(d.head());
    }
    let last_manifest = d.show(&d.head(), ".tether/objects/img.toml");
    let last_scratch = d.show(&d.head(), ".tether/objects/scratch.toml");

    let out = d.ok(&["abandon", &commits[1], &commits[2]]);
    assert!(out.starts_with("abandoned "), "{out}");
    assert!(
        out.contains(&format!("unpin img [memory] {}", pins[1])),
        "{out}"
    );
    assert!(
        out.contains(&format!("unpin img [memory] {}", pins[2])),
        "{out}"
    );
    assert!(
        !out.contains("scratch"),
        "record objects free nothing: {out}"
    );
    assert!(out.contains("not applied"), "{out}");
    // Later commits keep their manifests exactly.
    assert_eq!(d.show(&d.head(), ".tether/objects/img.toml"), last_manifest);
    assert_eq!(
        d.show(&d.head(), ".tether/objects/scratch.toml"),
        last_scratch
    );
    assert_eq!(d.current_bookmark(), "sweep");
    assert_eq!(d.subjects(), ["trial 4", "trial 1", "adopt"]);
    assert!(img.tag(&pins[1]).is_some(), "not applied without --gc");

    let r = json_of(&d.ok(&["gc", "--no-dry-run", "--json"]));
    let mut released: Vec<String> = r["unpinned"]["memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("tether.{}", v.as_str().unwrap()))
        .collect();
    released.sort();
    let mut expected = vec![pins[1].clone(), pins[2].clone()];
    expected.sort();
    assert_eq!(released, expected);
    assert!(img.tag(&pins[0]).is_some() && img.tag(&pins[3]).is_some());
    assert!(img.tag(&pins[1]).is_none() && img.tag(&pins[2]).is_none());
    d.ok(&["verify", "--all-history", "--deep"]);
}

fn abandon_with_gc_applies_and_refuses_a_dirty_tree(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    img.write(json!({"v": 2}), "v2");
    d.ok(&["commit", "-m", "v2"]);
    let p2 = pin_of(&d, "img");
    img.write(json!({"v": 3}), "v3");
    d.ok(&["commit", "-m", "v3"]);
    std::fs::write(d.root().join("notes.txt"), "x").unwrap();
    d.track("notes.txt");
    let parent = d.history()[1].clone();
    let err = stderr(&d.fails(&["abandon", &parent], 1));
    assert!(err.contains("uncommitted changes"), "{err}");
    d.untrack_and_remove("notes.txt");

    let r = json_of(&d.ok(&["abandon", &parent, "--gc", "--json"]));
    assert_eq!(r["gc_applied"], true);
    assert_eq!(r["abandoned"].as_array().unwrap().len(), 1);
    assert!(img.tag(&p2).is_none(), "its pin was released");
    let ops = d.ok(&["ops"]);
    assert!(ops.contains("abandon"), "{ops}");
    assert!(ops.contains("(step of "), "{ops}");
}

fn a_second_clone_keeps_foreign_pins_until_release_foreign(vcs: Vcs) {
    let a = Dataset::init_in(vcs);
    let img = a.memory_store("img");
    a.add_memory("img", &img);
    a.ok(&["commit", "-m", "adopt"]);
    let b_dir = a.tmp().join("clone-b");
    a.clone_to(&b_dir);
    img.write(json!({"v": 2}), "v2");
    a.ok(&["commit", "-m", "v2 (not fetched by b)"]);
    let p2 = pin_of(&a, "img");

    let plan = a.ok_in(&b_dir, &["gc"]);
    assert!(
        plan.contains(&format!("keep-pin img [memory] {p2}")),
        "{plan}"
    );
    assert!(plan.contains("not created by this clone"), "{plan}");
    let r = json_of(&a.ok_in(&b_dir, &["gc", "--no-dry-run", "--json"]));
    assert_eq!(r["unpinned"], json!({}));
    assert!(img.tag(&p2).is_some(), "a keep-pin writes nothing");

    let r = json_of(&a.ok_in(
        &b_dir,
        &["gc", "--release-foreign", "--no-dry-run", "--json"],
    ));
    assert_eq!(
        r["unpinned"]["memory"],
        json!([p2.trim_start_matches("tether.")])
    );
    assert!(img.tag(&p2).is_none());
    let out = a.tether(&["verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stdout(&out).contains("missing"), "{}", describe(&out));
}

fn a_saved_gc_plan_goes_stale_after_a_new_commit(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    img.write(json!({"v": 2}), "v2");
    d.ok(&["commit", "-m", "v2"]);
    let p2 = pin_of(&d, "img");
    d.discard_last_commit();
    let saved = d.tmp().join("gc.json");
    let plan = d.ok(&["gc", "--plan", saved.to_str().unwrap()]);
    assert!(plan.contains(&format!("unpin img [memory] {p2}")), "{plan}");
    // A new commit elsewhere (here: the same pin named again).
    d.commit_by_hand("elsewhere");
    let out = d.fails(&["gc", "--from-plan", saved.to_str().unwrap()], 1);
    assert!(stderr(&out).contains("stale"), "{}", describe(&out));
    assert!(img.tag(&p2).is_some(), "a stale plan releases nothing");
}

fn prune_bookmarks_judges_gone_bookmarks_branches_by_their_head(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    for b in ["pinned", "idle", "dirty"] {
        d.ok(&["new", "-b", b, "--eager"]);
    }
    let (wp, wi, wd) = (
        d.working_ref("pinned"),
        d.working_ref("idle"),
        d.working_ref("dirty"),
    );
    d.ok(&["new", "pinned"]);
    img.write_on(&wp, json!({"p": 1}), "pinned work");
    d.ok(&["commit", "-m", "pinned work"]);
    d.ok(&["new", "dirty"]);
    img.write_on(&wd, json!({"d": 1}), "unpinned work");
    d.ok(&["new", "main", "--discard"]);
    for b in ["idle", "dirty"] {
        d.delete_bookmark(b);
    }
    // `pinned`'s commit stays in history after the bookmark goes.
    d.keep_in_history("keep-pinned", "pinned");
    d.delete_bookmark("pinned");

    assert!(
        !d.ok(&["gc"]).contains("delete-branch"),
        "plain gc never deletes a branch"
    );
    let plan = d.ok(&["gc", "--prune-bookmarks"]);
    assert!(
        plan.contains(&format!(
            "delete-branch img [memory] {wp} bookmark pinned (gone); head is pinned"
        )),
        "{plan}"
    );
    assert!(
        plan.contains(&format!(
            "delete-branch img [memory] {wi} bookmark idle (gone); nothing was ever written"
        )),
        "{plan}"
    );
    assert!(
        plan.contains(&format!(
            "keep-branch img [memory] {wd} bookmark dirty (gone); kept: has unpinned writes"
        )),
        "{plan}"
    );
    let plan = d.ok(&["gc", "--prune-bookmarks", "--keep-bookmark", "idle"]);
    assert!(!plan.contains(&wi), "{plan}");
    d.ok(&["gc", "--prune-bookmarks", "--no-dry-run"]);
    assert_eq!(img.branches(), vec!["main".to_string(), wd.clone()]);
    let plan = d.ok(&["gc", "--prune-bookmarks", "--force-prune"]);
    assert!(plan.contains("FORCED"), "{plan}");
    d.ok(&["gc", "--prune-bookmarks", "--force-prune", "--no-dry-run"]);
    assert_eq!(img.branches(), vec!["main".to_string()]);
}

fn drop_of_a_failed_bookmark_leaves_the_stores_as_before(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    let before = refs(&img);
    let trunk = d.bookmark("main");
    d.ok(&["new", "-b", "probe"]);
    let wr = d.working_ref("probe");
    d.ok(&["open", "img"]);
    img.write_on(&wr, json!({"probe": 1}), "probe 1");
    d.ok(&["commit", "-m", "probe 1"]);
    img.write_on(&wr, json!({"probe": 2}), "probe 2");
    d.ok(&["commit", "-m", "probe 2"]);

    let err = stderr(&d.fails(&["drop", "main"], 1));
    assert!(err.contains("trunk"), "{err}");
    let plan = d.ok(&["drop", "probe"]);
    for line in [
        "leave-bookmark",
        "abandon-commit",
        "delete-bookmark",
        "unpin img",
        "delete-branch img",
    ] {
        assert!(plan.contains(line), "{line}: {plan}");
    }
    assert!(plan.contains("not applied"), "{plan}");
    assert_eq!(d.current_bookmark(), "probe", "a dry run");

    let r = json_of(&d.ok(&["drop", "probe", "--no-dry-run", "--json"]));
    assert_eq!(r["bookmark"], "probe");
    assert_eq!(r["left_for"], "main");
    assert_eq!(r["abandoned"].as_array().unwrap().len(), 2);
    assert_eq!(d.current_bookmark(), "main");
    assert_eq!(d.bookmark("main"), trunk);
    assert!(!d.bookmarks().contains(&"probe".to_string()));
    assert_eq!(
        refs(&img),
        before,
        "the store is exactly as before the bookmark"
    );
    let ops = d.ok(&["ops"]);
    assert!(ops.contains("drop"), "{ops}");
    assert!(ops.contains("(step of "), "{ops}");
}

fn drop_of_a_landed_bookmark_keeps_what_main_names(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    d.ok(&["new", "-b", "land"]);
    let wr = d.working_ref("land");
    d.ok(&["open", "img"]);
    let landed = img.write_on(&wr, json!({"v": "landed"}), "landed");
    d.ok(&["commit", "-m", "landed"]);
    let pin = pin_of(&d, "img");
    d.ok(&["promote"]);
    d.ok(&["new", "main"]);
    let plan = d.ok(&["drop", "land"]);
    assert!(
        !plan.contains("abandon-commit"),
        "main reaches them: {plan}"
    );
    assert!(plan.contains("main reaches them"), "{plan}");
    d.ok(&["drop", "land", "--no-dry-run"]);
    assert_eq!(
        img.tag(&pin).as_deref(),
        Some(landed.as_str()),
        "main's pin stays"
    );
    assert_eq!(img.branch(&wr), None, "its head was pinned: deleted");
    assert_eq!(img.head(), landed);
}

/// Worked example 3, the retirement: drop refuses a bookmark another live
/// checkout holds; forget that checkout first.
fn forget_workspace_then_drop_the_loser(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    let before = refs(&img);
    let b_dir = d.tmp().join("analysis-b");
    d.add_workspace(&b_dir);
    d.ok_in(&b_dir, &["new", "-b", "b"]);
    d.ok_in(&b_dir, &["open", "img"]);
    img.write_on(&d.working_ref("b"), json!({"b": 1}), "B");
    d.ok_in(&b_dir, &["commit", "-m", "B"]);

    let err = stderr(&d.fails(&["drop", "b"], 1));
    assert!(err.contains("forget-workspace"), "{err}");
    let ws_b = std::fs::read_to_string(b_dir.join(".tether/workspace.toml")).unwrap();
    let id = ws_b
        .lines()
        .find_map(|l| l.strip_prefix("workspace_id = "))
        .unwrap()
        .trim_matches('"')[..8]
        .to_string();
    let plan = d.ok(&["forget-workspace", &id, "--dry-run"]);
    assert!(plan.contains("forget-vcs-workspace"), "{plan}");
    let r = json_of(&d.ok(&["forget-workspace", &id, "--json"]));
    assert_eq!(r["workspace"], json!(id));
    let forget = match vcs {
        Vcs::Git => "git worktree remove",
        _ => "jj workspace forget",
    };
    assert!(r["vcs"].as_str().unwrap().contains(forget), "{r}");
    assert!(!b_dir.exists(), "{forget} took the directory");
    assert!(
        img.branch(&d.working_ref("b")).is_some(),
        "no store branch is touched"
    );
    d.ok(&["drop", "b", "--no-dry-run"]);
    assert_eq!(refs(&img), before);
}

/// spec/15, "Recovering a lost dataset repo": delete the repository, make a
/// fresh one, and follow `recover`'s steps; every pin comes back under the
/// old id with its tag reused, and the bookmark's uncommitted writes are
/// adopted and pinned.
fn recover_a_lost_dataset_repository(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    let old_id = d.dataset_id();
    let trunk_pin = pin_of(&d, "img");
    d.ok(&["new", "-b", "relabel"]);
    d.ok(&["open", "img"]);
    let wr = d.working_ref("relabel");
    img.write_on(&wr, json!({"labels": "v3"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    let uncommitted = img.write_on(&wr, json!({"labels": "v4"}), "not committed");
    let tags_before = img.tags();

    // The repository is lost.
    d.reinit_repository();
    d.ok(&["init"]);
    d.add_memory("img", &img);
    assert_ne!(d.dataset_id(), old_id);

    let r = json_of(&d.ok(&["recover", "--json"]));
    assert_eq!(r["suggested_dataset_id"], json!(old_id));
    assert_eq!(r["pinned"], false);
    let text = d.ok(&["recover"]);
    assert!(text.contains(&format!("id = \"{old_id}\"")), "{text}");
    // Step: set the id.
    let cfg = d.root().join("tether.toml");
    let new_id = d.dataset_id();
    let toml = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace(&new_id, &old_id);
    std::fs::write(&cfg, toml).unwrap();

    let r = json_of(&d.ok(&["recover", "--json"]));
    assert_eq!(r["datasets"][0]["current"], true);
    assert_eq!(r["datasets"][0]["bookmarks"][0]["bookmark"], "relabel");
    let commands: Vec<String> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["command"].as_str().map(str::to_string))
        .collect();
    assert_eq!(commands[0], "tether commit -m 'Recover main'");
    assert_eq!(
        commands[1],
        "tether new -b relabel --adopt -- main && tether commit -m 'Recover relabel'"
    );
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_tether"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for c in &commands {
        let out = d
            .command("sh", &d.root())
            .env("PATH", &path)
            .args(["-c", c])
            .output()
            .unwrap();
        assert!(out.status.success(), "{c}:\n{}", describe(&out));
    }
    // The bookmark's commit pinned the adopted writes: the only new tag.
    let tags = img.tags();
    let new: Vec<&String> = tags.iter().filter(|t| !tags_before.contains(t)).collect();
    assert_eq!(new.len(), 1, "only the adopted writes are new: {tags:?}");
    assert_eq!(img.tag(new[0]).as_deref(), Some(uncommitted.as_str()));
    assert_eq!(&pin_of(&d, "img"), new[0]);
    d.ok(&["new", "main"]);
    assert_eq!(pin_of(&d, "img"), trunk_pin, "the trunk's tag was reused");
    d.ok(&["verify", "--all-history"]);
}

/// Stores tether created (experimental), worked example 5's probe: `add
/// --create` on a bookmark, `drop --delete-stores` takes the store away with
/// the bookmark; an adopted store is never deleted, nor one without a marker.
fn gc_delete_stores_takes_away_only_what_tether_created(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["commit", "-m", "adopt"]);
    d.ok(&["new", "-b", "probe"]);
    let probe_dir = d.data().join("probe");
    let system = format!("system={}", probe_dir.display());
    let out = d.ok(&[
        "add", "probe", "--kind", "memory", "--set", &system, "--create",
    ]);
    assert!(out.contains("created the store"), "{out}");
    let probe = MemoryStore {
        root: probe_dir.clone(),
    };
    let wr = d.working_ref("probe");
    assert_eq!(probe.branches(), vec!["main".to_string(), wr.clone()]);
    assert!(d.ok(&["status"]).contains("(created)"));
    probe.write_on(&wr, json!({"emb": 1}), "probe data");
    d.ok(&["commit", "-m", "probe"]);
    let err = stderr(&d.fails(
        &[
            "add", "again", "--kind", "memory", "--set", &system, "--create",
        ],
        1,
    ));
    assert!(err.contains("not empty"), "{err}");

    // While a manifest names it, it stays.
    let plan = d.ok(&["gc", "--delete-stores"]);
    assert!(!plan.contains("delete-store"), "{plan}");
    let plan = d.ok(&["drop", "probe", "--delete-stores"]);
    assert!(plan.contains("delete-store probe [memory]"), "{plan}");
    assert!(!plan.contains("delete-store img"), "{plan}");
    let r = json_of(&d.ok(&["drop", "probe", "--delete-stores", "--no-dry-run", "--json"]));
    assert!(r["gc"]["deleted_stores"]["probe"].is_string(), "{r}");
    let left: Vec<String> = std::fs::read_dir(&probe_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "the store is gone: {left:?}");
    assert!(img.head().len() == 20, "the adopted store is untouched");

    // --store on a store with no marker is refused (left alone).
    let plan = d.ok(&[
        "gc",
        "--delete-stores",
        "--store",
        &format!("memory={}", img.root.display()),
    ]);
    assert!(plan.contains("no owner marker"), "{plan}");
    assert!(!plan.contains("delete-store"), "{plan}");
}

/// `undo add` of `add --create` takes the still-empty store away again; once
/// the store holds data it is kept and said so.
fn undo_add_create_removes_a_still_empty_store(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let p1 = d.data().join("p1");
    d.ok(&[
        "add",
        "p1",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", p1.display()),
        "--create",
    ]);
    assert!(p1.join("refs/branches/main.json").exists());
    let out = d.ok(&["undo"]);
    assert!(out.contains("deleted the still-empty store"), "{out}");
    assert!(!d.root().join(".tether/objects/p1.toml").exists());
    let left: Vec<_> = std::fs::read_dir(&p1)
        .map(|rd| rd.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    let p2 = d.data().join("p2");
    d.ok(&[
        "add",
        "p2",
        "--kind",
        "memory",
        "--set",
        &format!("system={}", p2.display()),
        "--create",
    ]);
    let store = MemoryStore { root: p2.clone() };
    store.write(json!({"x": 1}), "data");
    let out = d.tether(&["undo"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    assert!(
        stdout(&out).contains("holds data now"),
        "{}",
        describe(&out)
    );
    assert!(p2.join("refs/branches/main.json").exists(), "kept");
}
for_each_vcs!(
    colocated:
    abandon_trials_releases_only_their_pins,
    abandon_with_gc_applies_and_refuses_a_dirty_tree,
    a_second_clone_keeps_foreign_pins_until_release_foreign,
    a_saved_gc_plan_goes_stale_after_a_new_commit,
    prune_bookmarks_judges_gone_bookmarks_branches_by_their_head,
    drop_of_a_failed_bookmark_leaves_the_stores_as_before,
    drop_of_a_landed_bookmark_keeps_what_main_names,
    forget_workspace_then_drop_the_loser,
    recover_a_lost_dataset_repository,
    gc_delete_stores_takes_away_only_what_tether_created,
    undo_add_create_removes_a_still_empty_store,
);
