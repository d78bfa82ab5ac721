//! A commit that fails after some pins were made releases exactly the pins it
//! created (never one it found already there), puts the manifests back, makes
//! no VCS commit, and journals the failure. And a lock held by another tether
//! makes a writing command wait, then fail naming the lock.

use crate::support::{Dataset, Vcs, describe, stderr};
use serde_json::json;
use tether::model::ids;

/// The pin id tether will compute for a memory object at `snapshot_id`.
fn pin_id_for(d: &Dataset, store: &crate::support::MemoryStore, snapshot_id: &str) -> String {
    let system = store.root.to_str().unwrap().trim_end_matches('/');
    ids::pin_id(
        &d.dataset_id(),
        "memory",
        &json!({"system": system}),
        &json!({"snapshot_id": snapshot_id}),
    )
}

/// Every manifest file and its bytes.
fn objects(d: &Dataset) -> Vec<(String, Vec<u8>)> {
    let root = d.root();
    crate::support::files_under(&root, &root.join(".tether/objects"))
        .into_iter()
        .map(|rel| {
            let bytes = std::fs::read(root.join(&rel)).unwrap();
            (rel, bytes)
        })
        .collect()
}

for_each_vcs!(
    a_failed_pin_releases_only_the_pins_this_commit_created,
    a_held_lock_makes_a_writing_command_fail_naming_the_lock,
);

fn a_failed_pin_releases_only_the_pins_this_commit_created(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let fresh = d.memory_store("fresh");
    let found = d.memory_store("found");
    let broken = d.memory_store("broken");
    d.add_memory("a/fresh", &fresh);
    d.add_memory("a/found", &found);
    d.add_memory("b/broken", &broken);

    // `found` already carries its pin at the right state (as if a peer made
    // it): this commit finds it and must not release it.
    let found_ref = ids::ref_for_pin(&pin_id_for(&d, &found, &found.head()));
    let found_ref_file = found
        .root
        .join("refs/tags")
        .join(format!("{found_ref}.json"));
    std::fs::create_dir_all(found_ref_file.parent().unwrap()).unwrap();
    std::fs::write(
        &found_ref_file,
        json!({"snapshot_id": found.head()}).to_string(),
    )
    .unwrap();
    // `broken`'s pin name is taken by a tag holding another state: pinning fails.
    let head = broken.head();
    let other = broken.write(json!({"x": 1}), "elsewhere");
    broken.set_branch("main", &head);
    let broken_ref = ids::ref_for_pin(&pin_id_for(&d, &broken, &broken.head()));
    let broken_ref_file = broken
        .root
        .join("refs/tags")
        .join(format!("{broken_ref}.json"));
    std::fs::create_dir_all(broken_ref_file.parent().unwrap()).unwrap();
    std::fs::write(&broken_ref_file, json!({"snapshot_id": other}).to_string()).unwrap();

    let manifests_before = objects(&d);
    let head_before = d.all_commits();
    let out = d.tether(&["commit", "-m", "baseline"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error:") && err.contains("b/broken"),
        "the error names the failing object: {err}"
    );

    assert!(
        fresh.tags().is_empty(),
        "the pin this commit created was released: {:?}",
        fresh.tags()
    );
    assert_eq!(
        found.tags(),
        vec![found_ref.clone()],
        "the pin it found stays"
    );
    assert_eq!(
        broken.tags(),
        vec![broken_ref.clone()],
        "the foreign tag is untouched"
    );
    assert_eq!(objects(&d), manifests_before, "manifests are put back");
    assert_eq!(d.all_commits(), head_before, "no VCS commit");

    let ops = d.ok(&["ops", "--json"]);
    let entries: serde_json::Value = serde_json::from_str(&ops).unwrap();
    let failed = &entries[0]["result"]["failed"];
    assert!(
        failed.get("b/broken").is_some(),
        "the journal records the failure: {ops}"
    );
}

fn a_held_lock_makes_a_writing_command_fail_naming_the_lock(vcs: Vcs) {
    let d = Dataset::init_in(vcs);
    let store = d.memory_store("s");
    d.add_memory("s", &store);
    // The checkout's lock, then the repository's, in the VCS's shared directory
    // (`.git/`, or jj's `.jj/repo/`).
    let shared = match vcs {
        Vcs::Git => d.root().join(".git"),
        Vcs::Jj | Vcs::JjColocated => d.root().join(".jj").join("repo"),
    };
    for lock_path in [
        d.root().join(".tether").join("lock"),
        shared.join("tether.lock"),
    ] {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .unwrap();
        file.lock().unwrap();
        let out = d
            .command(env!("CARGO_BIN_EXE_tether"), &d.root())
            .env("TETHER_LOCK_TIMEOUT", "1")
            .args(["commit", "-m", "x"])
            .output()
            .unwrap();
        file.unlock().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let err = stderr(&out);
        assert!(
            err.contains(lock_path.to_str().unwrap()),
            "the error names the lock: {err}"
        );
        assert!(store.tags().is_empty(), "nothing was pinned");
    }
}
