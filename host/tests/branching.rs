//! End-to-end tests of spec/06 (branching and writing) and worked examples
//! 2, 3 and 6 of spec/08, on git, on jj and on colocated jj (`for_each_vcs!`), with
//! the memory and file plugins: the real `tether` binary in temp repositories;
//! what lands in the stores is read back from the stores' own files and what
//! lands in the VCS with that VCS's own CLI.

use crate::support::{Dataset, MemoryStore, Vcs, describe, stderr, stdout};
use serde_json::{Value, json};

/// A dataset with a memory store `img` and a directory `raw`, committed on
/// the trunk.
fn dataset(vcs: Vcs) -> (Dataset, MemoryStore) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    img.write(json!({"labels": "v1"}), "convert");
    d.add_memory("img", &img);
    std::fs::create_dir_all(d.data().join("raw")).unwrap();
    std::fs::write(d.data().join("raw/a.txt"), "a").unwrap();
    let raw = d.data().join("raw");
    d.ok(&["add", "raw", "--kind", "file", raw.to_str().unwrap()]);
    d.ok(&["commit", "-m", "adopt"]);
    (d, img)
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn pin_of(d: &Dataset, key: &str) -> String {
    d.manifest(key)["pin"]["ref"]
        .as_str()
        .expect("pinned")
        .to_string()
}

fn a_bookmark_forks_lazily_commits_on_its_branch_and_promotes(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let main_head = img.head();
    let trunk_commit = d.bookmark("main");
    let wr = d.working_ref("relabel");

    // `new` decides names and fork points and writes nothing.
    let out = d.ok(&["new", "-b", "relabel"]);
    assert!(out.contains("on bookmark relabel"), "{out}");
    assert!(
        out.contains(&format!("img -> {wr} (created on first writable open)")),
        "{out}"
    );
    assert!(!out.contains("raw ->"), "files cannot fork: {out}");
    assert_eq!(d.current_bookmark(), "relabel");
    assert_eq!(
        img.branch(&wr),
        None,
        "lazy: no branch before the first write"
    );

    // A read-only open reads at the pin; the first writable open forks.
    let ro = json_of(&d.ok(&["open", "img", "--read-only", "--json"]));
    assert_eq!(ro["read_only"], true);
    assert_eq!(img.branch(&wr), None);
    let w = json_of(&d.ok(&["open", "img", "--json"]));
    assert_eq!(w["read_only"], false);
    assert!(w["address"].as_str().unwrap().ends_with(&format!("#{wr}")));
    assert_eq!(img.branch(&wr).as_deref(), Some(main_head.as_str()));
    let ws = std::fs::read_to_string(d.root().join(".tether/workspace.toml")).unwrap();
    assert!(
        !ws.contains("[pending_forks]"),
        "the fork moved to working_refs:\n{ws}"
    );

    // Write through the handle; main in the store is untouched.
    let relabeled = img.write_on(&wr, json!({"labels": "v3"}), "relabel");
    let status = d.ok(&["status", "--snapshot"]);
    assert!(
        status.contains("modified img [memory/forkable]"),
        "{status}"
    );
    assert!(status.contains("clean raw [file/observed]"), "{status}");
    assert!(status.contains("on bookmark relabel"), "{status}");
    let out = d.ok(&["commit", "-m", "Relabel with model v3"]);
    let pin = pin_of(&d, "img");
    assert!(out.contains(&format!("pinned img -> {pin}")), "{out}");
    assert_eq!(img.tag(&pin).as_deref(), Some(relabeled.as_str()));
    assert_eq!(img.head(), main_head, "main in the store did not move");
    assert_eq!(
        d.bookmark("main"),
        trunk_commit,
        "the trunk bookmark did not move"
    );
    let bookmark_commit = d.bookmark("relabel");

    // Promote: a preview first (exit 0), then the landing.
    let plan = d.ok(&["promote", "--dry-run"]);
    assert!(plan.contains("fast-forward img [memory] main"), "{plan}");
    assert!(plan.contains("raw: not forkable"), "{plan}");
    assert_eq!(img.head(), main_head, "a dry run moves nothing");
    let report = json_of(&d.ok(&["promote", "--json"]));
    assert_eq!(
        report["fast_forwarded"]["img"],
        json!({"snapshot_id": relabeled})
    );
    assert_eq!(report["trunk_moved"], json!(bookmark_commit));
    assert_eq!(img.head(), relabeled);
    assert_eq!(d.bookmark("main"), bookmark_commit);
    let ops = d.ok(&["ops"]);
    for command in ["promote", "commit", "open", "new"] {
        assert!(ops.contains(&format!("  {command}  ")), "{ops}");
    }
}

fn eager_new_forks_now_and_a_rerun_reuses(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let wr = d.working_ref("try");
    let out = d.ok(&["new", "-b", "try", "--eager", "--json"]);
    let r = json_of(&out);
    assert_eq!(r["bookmark"], "try");
    assert_eq!(r["working_refs"]["img"], json!(wr));
    assert_eq!(r["pending_forks"], json!({}));
    assert_eq!(r["fork_points"]["img"], json!({"snapshot_id": img.head()}));
    assert_eq!(img.branch(&wr), Some(img.head()));

    let plan = d.ok(&["new", "--dry-run"]);
    assert!(plan.contains("reuse img"), "already at the pin: {plan}");
    d.ok(&["new"]);
    assert_eq!(img.branch(&wr), Some(img.head()));
}

fn unpinned_writes_stop_new_until_commit_or_discard(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let wr = d.working_ref("scratch");
    d.ok(&["new", "-b", "scratch", "--eager"]);
    img.write_on(&wr, json!({"labels": "tmp"}), "scratch work");
    let before = d.written();
    let out = d.fails(&["new"], 1);
    let err = stderr(&out);
    assert!(
        err.contains("refusing to reset working branches with unpinned writes"),
        "{err}"
    );
    assert!(err.contains("this workspace's own"), "{err}");
    assert!(err.contains("--discard"), "{err}");
    assert_eq!(d.written(), before, "a refused new writes nothing");

    d.ok(&["new", "--discard", "--eager"]);
    assert_eq!(img.branch(&wr), Some(img.head()), "reset onto the pin");

    // Committed writes are safe to reset: re-forking needs no --discard.
    let w = img.write_on(&wr, json!({"labels": "kept"}), "kept work");
    d.ok(&["commit", "-m", "keep it"]);
    assert_eq!(img.tag(&pin_of(&d, "img")).as_deref(), Some(w.as_str()));
    d.ok(&["new"]);
}

fn a_pin_record_object_forks_at_new_unless_deferred(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let img = d.memory_store("img");
    d.add_memory("img", &img);
    d.ok(&["set", "img", "--pin", "record"]);
    d.ok(&["commit", "-m", "adopt"]);
    let wr = d.working_ref("sweep");
    let plan = d.ok(&["new", "-b", "sweep", "--dry-run"]);
    assert!(plan.contains("fork img"), "record objects fork now: {plan}");
    let plan = d.ok(&["new", "-b", "sweep", "--defer-record", "--dry-run"]);
    assert!(plan.contains("defer-fork img"), "{plan}");
    d.ok(&["new", "-b", "sweep"]);
    assert_eq!(img.branch(&wr), Some(img.head()));
}

fn promote_holds_the_bookmark_whole_and_lands_a_named_subset(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let a = d.memory_store("a");
    let b = d.memory_store("b");
    d.add_memory("a", &a);
    d.add_memory("b", &b);
    d.ok(&["commit", "-m", "adopt"]);
    let trunk = d.bookmark("main");
    let wr = d.working_ref("feature");
    d.ok(&["new", "-b", "feature", "--eager"]);
    let a_new = a.write_on(&wr, json!({"x": 1}), "a on the fork");
    b.write_on(&wr, json!({"y": 1}), "b on the fork");
    d.ok(&["commit", "-m", "work"]);
    // Upstream b moves meanwhile: only a merge can land it, and ff refuses those.
    let b_upstream = b.write(json!({"z": 1}), "upstream moved");

    let plan = d.ok(&["promote", "--strategy", "ff", "--dry-run"]);
    assert!(plan.contains("hold a [memory]"), "{plan}");
    assert!(plan.contains("refuse b [memory]"), "{plan}");
    let out = d.fails(&["promote", "--strategy", "ff", "--json"], 1);
    let r = json_of(&stdout(&out));
    assert!(r["held"]["a"].as_str().unwrap().contains("planned whole"));
    assert!(
        r["refused"]["b"]
            .as_str()
            .unwrap()
            .contains("--strategy ff")
    );
    assert_eq!(r["trunk_moved"], Value::Null);
    assert_ne!(a.head(), a_new, "nothing moved");
    assert_eq!(b.head(), b_upstream);

    // Naming the keys lands a subset on purpose; the trunk bookmark stays.
    let r = json_of(&d.ok(&["promote", "a", "--strategy", "ff", "--json"]));
    assert_eq!(r["fast_forwarded"]["a"], json!({"snapshot_id": a_new}));
    assert_eq!(r["trunk_moved"], Value::Null);
    assert_eq!(a.head(), a_new);
    assert_eq!(d.bookmark("main"), trunk);
}

fn a_merge_resets_the_branch_then_commit_and_promote_move_the_trunk(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let wr = d.working_ref("merge-me");
    d.ok(&["new", "-b", "merge-me", "--eager"]);
    img.write_on(&wr, json!({"labels": "v3"}), "relabel");
    d.ok(&["commit", "-m", "relabel"]);
    img.write(
        json!({"labels": "v1", "notes": "upstream"}),
        "upstream note",
    );

    let r = json_of(&d.ok(&["promote", "--json"]));
    let merged = r["merged"]["img"]["snapshot_id"]
        .as_str()
        .expect("merged")
        .to_string();
    assert_eq!(img.head(), merged);
    assert_eq!(r["trunk_moved"], Value::Null);
    assert!(r["trunk_held"].as_str().unwrap().contains("commit"));
    assert_eq!(
        img.branch(&wr).as_deref(),
        Some(merged.as_str()),
        "the branch follows the merge"
    );
    let status = d.ok(&["status", "--snapshot"]);
    assert!(status.contains("modified img"), "{status}");
    d.ok(&["commit", "-m", "Merge into main"]);
    let r = json_of(&d.ok(&["promote", "--json"]));
    assert_eq!(r["trunk_moved"], json!(d.bookmark("merge-me")));
    assert_eq!(d.bookmark("main"), d.bookmark("merge-me"));
}

fn a_bookmark_moved_by_hand_makes_the_working_copy_stale(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let wr = d.working_ref("stale");
    d.ok(&["new", "-b", "stale", "--eager"]);
    img.write_on(&wr, json!({"labels": "one"}), "one");
    d.ok(&["commit", "-m", "one"]);
    let status = d.ok(&["status"]);
    assert!(
        !status.contains("STALE"),
        "own commits never make you stale"
    );

    d.discard_last_commit();
    let status = d.ok(&["status"]);
    assert!(status.contains("(STALE: img)"), "{status}");
    let j = json_of(&d.ok(&["status", "--json"]));
    assert_eq!(j["stale"], true);
    assert_eq!(j["stale_keys"], json!(["img"]));
    let err = stderr(&d.fails(&["open", "img"], 1));
    assert!(err.contains("working copy is stale"), "{err}");
    assert!(err.contains("tether new"), "{err}");
    d.ok(&["open", "img", "--read-only"]);
    let err = stderr(&d.fails(&["commit", "-m", "x"], 1));
    assert!(err.contains("working copy is stale"), "{err}");

    // The branch holds what this workspace last committed (its pin is a
    // tag), so `new` may reset it: on the first writable open, lazily.
    let plan = d.ok(&["new", "--dry-run"]);
    assert!(plan.contains("reset onto pin"), "{plan}");
    d.ok(&["new"]);
    assert!(!d.ok(&["status"]).contains("STALE"));
    d.ok(&["open", "img"]);
    assert_eq!(img.branch(&wr), Some(img.head()));
}

fn new_rev_without_a_bookmark_is_read_only_on_a_parking_branch(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let first = d.head();
    img.write(json!({"labels": "v2"}), "v2");
    d.ok(&["commit", "-m", "v2"]);
    let out = d.ok(&["new", &first]);
    assert!(out.contains("read-only"), "{out}");
    // git parks the checkout on a branch of its own; jj needs none (every
    // commit stays visible), so the working copy is on no bookmark.
    let parking = match vcs {
        Vcs::Git => format!("tether/{}", &first[..12]),
        _ => String::new(),
    };
    assert_eq!(d.current_bookmark(), parking);
    assert!(d.ok(&["status"]).contains("on no bookmark: read-only"));
    let err = stderr(&d.fails(&["open", "img", "--writable"], 1));
    assert!(err.contains("read-only"), "{err}");
    d.fails(&["commit", "-m", "x"], 1);
    d.ok(&["new", "main"]);
    assert_eq!(d.current_bookmark(), "main");
}

fn new_and_promote_plans_apply_once_and_go_stale(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let plan = d.tmp().join("new.json");
    d.ok(&[
        "new",
        "-b",
        "planned",
        "--eager",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(d.current_bookmark(), "main");
    d.ok(&["new", "--from-plan", plan.to_str().unwrap()]);
    assert_eq!(d.current_bookmark(), "planned");
    let wr = d.working_ref("planned");
    assert_eq!(img.branch(&wr), Some(img.head()));

    img.write_on(&wr, json!({"labels": "p"}), "p");
    d.ok(&["commit", "-m", "p"]);
    let trunk = d.bookmark("main");
    let saved = d.tmp().join("promote.json");
    d.ok(&["promote", "--plan", saved.to_str().unwrap()]);
    let head = img.write(json!({"labels": "upstream"}), "moved under the plan");
    let out = d.fails(&["promote", "--from-plan", saved.to_str().unwrap()], 1);
    assert!(stderr(&out).contains("stale"), "{}", describe(&out));
    assert_eq!(img.head(), head, "a stale plan moves nothing");
    assert_eq!(d.bookmark("main"), trunk, "nor the trunk");
}

fn restore_resets_one_branch_from_a_commit_or_a_native_ref(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let first = d.head();
    let v1 = img.head();
    d.ok(&["new", "-b", "sweep", "--eager"]);
    let wr = d.working_ref("sweep");
    let v2 = img.write_on(&wr, json!({"labels": "v2"}), "v2");
    d.ok(&["commit", "-m", "v2"]);

    let r = json_of(&d.ok(&["restore", "img", "--from", &first, "--json"]));
    assert_eq!(r["from"], json!(first));
    assert_eq!(r["working_refs"]["img"], json!(wr));
    assert_eq!(img.branch(&wr), Some(v1.clone()));
    assert!(d.ok(&["status", "--snapshot"]).contains("modified img"));

    // The branch now holds a state this bookmark's commit does not pin... but
    // an older commit does, so going back needs no --discard.
    let head = d.head();
    d.ok(&["restore", "img", "--from", &head]);
    assert_eq!(img.branch(&wr), Some(v2.clone()));
    // Writes nobody committed are refused without --discard.
    img.write_on(&wr, json!({"labels": "scratch"}), "scratch");
    let err = stderr(&d.fails(&["restore", "img", "--from", &head], 1));
    assert!(err.contains("--discard"), "{err}");
    d.ok(&["restore", "img", "--at", "main", "--discard"]);
    assert_eq!(img.branch(&wr), Some(v1));

    let err = stderr(&d.fails(&["restore", "img", "--at", " "], 1));
    assert!(err.contains("empty"), "{err}");
    let err = stderr(&d.fails(&["restore", "raw", "--from", &head], 1));
    assert!(err.contains("cannot fork"), "{err}");
    d.ok(&["new", "main"]);
    let err = stderr(&d.fails(&["restore", "img", "--at", "main"], 1));
    assert!(err.contains("trunk"), "{err}");
}

fn a_fork_a_store_refuses_keeps_the_others_and_a_rerun_finishes(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let a = d.memory_store("a");
    let b = d.memory_store("b");
    d.add_memory("a", &a);
    d.add_memory("b", &b);
    d.ok(&["commit", "-m", "adopt"]);
    let b_pin = pin_of(&d, "b");
    let b_tag = std::fs::read(b.root.join(format!("refs/tags/{b_pin}.json"))).unwrap();
    b.delete_tag(&b_pin);
    let wr = d.working_ref("x");
    let out = d.tether(&["new", "-b", "x", "--eager"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("b: the fork failed"),
        "{}",
        describe(&out)
    );
    assert_eq!(a.branch(&wr), Some(a.head()), "a's branch stays");
    assert_eq!(b.branch(&wr), None);

    std::fs::write(b.root.join(format!("refs/tags/{b_pin}.json")), b_tag).unwrap();
    let plan = d.ok(&["new", "--eager", "--dry-run"]);
    assert!(plan.contains("reuse a"), "{plan}");
    assert!(plan.contains("fork b"), "{plan}");
    d.ok(&["new", "--eager"]);
    assert_eq!(b.branch(&wr), Some(b.head()));
}

/// Worked example 3: two candidates on two bookmarks from two checkouts (git
/// worktrees, jj workspaces); land A, B untouched.
fn two_worktrees_two_bookmarks_keep_one(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let fork_point = img.head();
    let b_dir = d.tmp().join("analysis-b");
    d.add_workspace(&b_dir);
    d.ok(&["new", "-b", "a"]);
    d.ok_in(&b_dir, &["new", "-b", "b"]);
    let (wa, wb) = (d.working_ref("a"), d.working_ref("b"));

    d.ok(&["open", "img"]);
    let a_state = img.write_on(&wa, json!({"labels": "A"}), "label A");
    d.ok(&["commit", "-m", "A"]);
    d.ok_in(&b_dir, &["open", "img"]);
    let b_state = img.write_on(&wb, json!({"labels": "B"}), "label B");
    d.ok_in(&b_dir, &["commit", "-m", "B"]);
    assert_eq!(
        img.payload(&img.branch(&wa).unwrap()),
        json!({"labels": "A"})
    );
    assert_eq!(
        img.payload(&img.branch(&wb).unwrap()),
        json!({"labels": "B"})
    );

    // B cannot join A's bookmark while A works on it.
    let out = d.tether_in(&b_dir, &["new", "a"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("--shared"), "{}", describe(&out));

    let diff = d.ok(&["diff", "b", "a", "--content"]);
    assert!(diff.contains("img"), "{diff}");

    let r = json_of(&d.ok(&["promote", "--json"]));
    assert_eq!(r["fast_forwarded"]["img"], json!({"snapshot_id": a_state}));
    assert_eq!(d.bookmark("main"), d.bookmark("a"));
    assert_eq!(img.head(), a_state);
    assert_eq!(img.branch(&wb), Some(b_state), "B is untouched");
    assert_ne!(fork_point, a_state);
}

/// spec/06, "Stale working copies": a peer's writes on a bookmark two clones
/// share are refused by `new` ("not this workspace's"), `--shared` adopts the
/// branch as it is when it builds on the bookmark's pin, and `commit` pins it.
///
/// git only: the clone is taken on the bookmark with `git clone --branch`;
/// the adopt decision itself is VCS-neutral.
#[test]
fn a_peers_writes_on_a_shared_bookmark_are_adopted_with_shared() {
    let (a, img) = dataset(Vcs::Git);
    a.ok(&["new", "-b", "feat"]);
    let wr = a.working_ref("feat");
    a.ok(&["open", "img"]);
    a.ok(&["commit", "-m", "feat starts"]);
    let b_dir = a.tmp().join("clone-b");
    a.git(&[
        "clone",
        "-q",
        "--branch",
        "feat",
        a.root().to_str().unwrap(),
        b_dir.to_str().unwrap(),
    ]);
    // A keeps writing on the store branch and has not committed yet.
    let peer = img.write_on(&wr, json!({"labels": "peer"}), "peer writes");

    let out = a.tether_in(&b_dir, &["new", "feat"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("not this workspace's"),
        "{}",
        describe(&out)
    );
    let plan = a.ok_in(&b_dir, &["new", "feat", "--shared", "--dry-run"]);
    assert!(plan.contains("adopt img"), "{plan}");
    let r = json_of(&a.ok_in(&b_dir, &["new", "feat", "--shared", "--json"]));
    assert_eq!(r["working_refs"]["img"], json!(wr));
    assert_eq!(
        img.branch(&wr),
        Some(peer.clone()),
        "adopting moves nothing"
    );
    assert!(
        a.ok_in(&b_dir, &["status", "--snapshot"])
            .contains("modified img")
    );
    a.ok_in(&b_dir, &["commit", "-m", "pin the peer's writes"]);
    let m: toml::Value =
        toml::from_str(&std::fs::read_to_string(b_dir.join(".tether/objects/img.toml")).unwrap())
            .unwrap();
    let pin = m["pin"]["ref"].as_str().unwrap();
    assert_eq!(img.tag(pin), Some(peer));
}
for_each_vcs!(
    colocated:
    a_bookmark_forks_lazily_commits_on_its_branch_and_promotes,
    eager_new_forks_now_and_a_rerun_reuses,
    unpinned_writes_stop_new_until_commit_or_discard,
    a_pin_record_object_forks_at_new_unless_deferred,
    promote_holds_the_bookmark_whole_and_lands_a_named_subset,
    a_merge_resets_the_branch_then_commit_and_promote_move_the_trunk,
    a_bookmark_moved_by_hand_makes_the_working_copy_stale,
    new_rev_without_a_bookmark_is_read_only_on_a_parking_branch,
    new_and_promote_plans_apply_once_and_go_stale,
    restore_resets_one_branch_from_a_commit_or_a_native_ref,
    a_fork_a_store_refuses_keeps_the_others_and_a_rerun_finishes,
    two_worktrees_two_bookmarks_keep_one,
);

/// Objects of one branch scope (two keys on one memory store) share one
/// branch: `new` forks it once (`share`), and `promote` moves it once.
fn two_keys_on_one_store_share_a_branch(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("shared");
    d.add_memory("left", &store);
    d.add_memory("right", &store);
    d.ok(&["commit", "-m", "adopt"]);
    let wr = d.working_ref("both");
    let plan = d.ok(&["new", "-b", "both", "--eager", "--dry-run"]);
    assert!(plan.contains("fork left"), "{plan}");
    assert!(plan.contains("share right"), "{plan}");
    d.ok(&["new", "-b", "both", "--eager"]);
    let written = store.write_on(&wr, json!({"x": 1}), "both write");
    d.ok(&["commit", "-m", "both"]);
    let plan = d.ok(&["promote", "--dry-run"]);
    assert!(plan.contains("fast-forward left"), "{plan}");
    assert!(plan.contains("share right"), "{plan}");
    let r = json_of(&d.ok(&["promote", "--json"]));
    assert_eq!(r["fast_forwarded"]["left"], json!({"snapshot_id": written}));
    assert_eq!(
        r["fast_forwarded"]["right"],
        json!({"snapshot_id": written})
    );
    assert!(r["trunk_moved"].is_string(), "{r}");
    assert_eq!(store.head(), written);
}

for_each_vcs!(colocated: two_keys_on_one_store_share_a_branch);

/// `new --keep`: the working refs stay exactly where they are (nothing is
/// reset, nothing forked) and only the baseline becomes the current
/// commit's, so a working copy left stale by a bookmark moved by hand can
/// commit its branch's writes again. Under jj this is also how a working
/// copy that `jj new` moved past the bookmark comes back to it.
fn new_keep_keeps_the_branches_and_refreshes_the_baseline(vcs: Vcs) {
    let (d, img) = dataset(vcs);
    let wr = d.working_ref("keep");
    d.ok(&["new", "-b", "keep", "--eager"]);
    let one = img.write_on(&wr, json!({"labels": "one"}), "one");
    d.ok(&["commit", "-m", "one"]);
    d.discard_last_commit();
    assert!(d.ok(&["status"]).contains("(STALE: img)"));
    let refs_before: toml::Value = toml::from_str(&d.workspace_text()).unwrap();

    let err = stderr(&d.fails(&["new", "--keep", "--adopt"], 2));
    assert!(err.contains("--keep"), "{err}");
    let plan = d.ok(&["new", "--keep", "--dry-run"]);
    assert!(
        plan.contains("--keep: working refs stay as they are"),
        "{plan}"
    );
    assert!(!plan.contains("reset onto pin"), "{plan}");

    if vcs != Vcs::Git {
        // The working copy moved past the bookmark: commit refuses until
        // `new NAME --keep` brings it back.
        d.jj(&["new"]);
        d.jj(&["new"]);
        d.fails(&["commit", "-m", "lost"], 1);
    }
    d.ok(&["new", "keep", "--keep"]);
    let ws: toml::Value = toml::from_str(&d.workspace_text()).unwrap();
    assert_eq!(ws["working_refs"], refs_before["working_refs"], "{ws}");
    assert_ne!(ws["base_states"], refs_before["base_states"], "{ws}");
    assert_eq!(img.branch(&wr), Some(one.clone()), "not reset");
    let status = d.ok(&["status"]);
    assert!(!status.contains("STALE"), "{status}");
    assert!(status.contains("modified img"), "{status}");

    d.ok(&["commit", "-m", "one, again"]);
    assert_eq!(img.tag(&pin_of(&d, "img")), Some(one));
    assert_eq!(d.current_bookmark(), "keep");
}
for_each_vcs!(colocated: new_keep_keeps_the_branches_and_refreshes_the_baseline);

/// spec/09 "promote": exit 3 when part of it landed. Both stores moved
/// upstream since the fork, so both need a merge; `a`'s merges cleanly and
/// lands, `b`'s conflicts and changes nothing. The trunk bookmark stays, and
/// once `b` is resolved on its branch a second round finishes.
fn promote_exits_3_when_only_part_of_it_lands(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let a = d.memory_store("a");
    let b = d.memory_store("b");
    d.add_memory("a", &a);
    d.add_memory("b", &b);
    d.ok(&["commit", "-m", "adopt"]);
    let trunk = d.bookmark("main");
    let wr = d.working_ref("feature");
    d.ok(&["new", "-b", "feature", "--eager"]);
    a.write_on(&wr, json!({"x": 1}), "a on the fork");
    b.write_on(&wr, json!({"y": 1}), "b on the fork");
    d.ok(&["commit", "-m", "work"]);
    a.write(json!({"z": 1}), "a upstream");
    let b_upstream = b.write(json!({"y": 2}), "b upstream, same key");

    let out = d.tether(&["promote", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&out));
    let r = json_of(&stdout(&out));
    let merged = r["merged"]["a"]["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(a.head(), merged);
    assert_eq!(a.payload(&merged), json!({"x": 1, "z": 1}));
    let why = r["conflicts"]["b"].to_string() + &r["failed"]["b"].to_string();
    assert!(why.contains('y'), "b's conflict names the key: {r}");
    assert_eq!(b.head(), b_upstream, "a conflicting merge changes nothing");
    assert_eq!(r["trunk_moved"], Value::Null);
    assert_eq!(d.bookmark("main"), trunk);
    let op = d.newest_op();
    assert_eq!(op["command"], "promote");
    assert!(op["result"].get("summary").is_some(), "finished: {op}");

    // a's branch now follows the merge (commit pins it); a plain `status`
    // shows that rather than the snapshot taken before promote moved it.
    let status = d.ok(&["status"]);
    assert!(status.contains("modified a [memory/forkable]"), "{status}");
    assert!(status.contains("clean b [memory/forkable]"), "{status}");
    // Resolve b on its branch, commit, and land the rest.
    b.write_on(&wr, json!({"y": 2, "w": 1}), "b resolved");
    d.ok(&["commit", "-m", "resolve b"]);
    d.ok(&["promote"]);
    d.ok(&["commit", "-m", "after the merges"]);
    d.ok(&["promote"]);
    assert_eq!(b.payload(&b.head()), json!({"y": 2, "w": 1}));
    assert_ne!(d.bookmark("main"), trunk, "the trunk moved at last");
}
for_each_vcs!(colocated: promote_exits_3_when_only_part_of_it_lands);
